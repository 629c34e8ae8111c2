//===- RunOptions.h - plan-run's command line -------------------*- C++ -*-===//

#ifndef PARTITA_TOOLS_PLAN_RUN_RUNOPTIONS_H
#define PARTITA_TOOLS_PLAN_RUN_RUNOPTIONS_H

#include "BandwidthTest.h"

#include <cstdint>
#include <string>

namespace partita {

struct RunOptions {
  std::string plan;
  int64_t steps = 10;
  std::string logJson;
  std::string hostfile;
  std::string data;
  int dataBytes = 2;
  bool dataDtypeGiven = false;
  bool profile = false;
  std::string saveParams;
  std::string dumpGrads;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  bool resume = false;
  double collectiveTimeout = 300;
  int64_t collectiveChunk;
  int64_t maxRestarts = 0;
  std::string trace;
  std::string device = "auto";
  std::string gemmPrecision = "bf16";
  int64_t threadsPerRank = 0; // 0: the host's cores over its ranks
  bool allowSplitGroups = false;
  bool bandwidthTest = false;
  int64_t ranks = 0; // of the bandwidth test (0: the hostfile's slots, or 2)
  BandwidthOptions bandwidth;
};

/// plan-run's options from its command line (and --config FILE). --help
/// prints them, grouped and described, to stdout and exits 0; a bad
/// command line prints why to stderr and exits 2.
RunOptions parseRunOptions(int argc, char **argv);

} // namespace partita

#endif // PARTITA_TOOLS_PLAN_RUN_RUNOPTIONS_H
