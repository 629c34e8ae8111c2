//===- BandwidthTest.h - The job's links, measured --------------*- C++ -*-===//
//
// plan-run --bandwidth-test: the collectives a plan uses, timed over the
// job's MPI ranks the way nccl-tests times NCCL's (sizes in bytes, algbw =
// size / time, busbw = algbw times the collective's bus factor), inside a
// host and across hosts; and a topology JSON of what was measured, for
// plan-opt --topology.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_TOOLS_PLANRUN_BANDWIDTHTEST_H
#define PARTITA_TOOLS_PLANRUN_BANDWIDTHTEST_H

#include <cstdint>
#include <string>

namespace partita::runtime {
class RankHosts;
}

namespace partita {

struct BandwidthOptions {
  int64_t minBytes = 1 << 10;
  int64_t maxBytes = int64_t(256) << 20;
  /// Where rank 0 writes the measured topology (empty: nowhere).
  std::string topologyPath;
};

/// Collective over MPI_COMM_WORLD; rank 0 prints the tables. Returns the
/// process's exit status.
int runBandwidthTest(const BandwidthOptions &options,
                     const runtime::RankHosts &hosts);

} // namespace partita

#endif // PARTITA_TOOLS_PLANRUN_BANDWIDTHTEST_H
