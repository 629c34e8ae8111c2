//===- StrategySearch.h - The fastest parallel plan that fits ---*- C++ -*-===//
//
// Enumerates parallel configurations of a profiled model on a topology,
// prunes those that cannot work (divisibility, memory), costs the rest with
// the closed-form cost model and keeps the best. docs/search.md describes
// the space, the pruning and the report.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_SEARCH_STRATEGYSEARCH_H
#define PARTITA_COMPILER_SEARCH_STRATEGYSEARCH_H

#include "compiler/CostModel/CostModel.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace partita {

enum class SearchObjective { Throughput, Memory };

/// A rule the chosen configuration must follow beyond what the model and
/// the topology impose, e.g. a site's limit on pipeline depth.
struct StrategyConstraint {
  std::string name;
  /// Why `config` breaks the rule, or nothing when it follows it.
  std::function<std::optional<std::string>(const ParallelConfig &config)> check;
};

struct SearchOptions {
  /// Dimensions the user fixed; the search fills in the rest.
  PartialParallelConfig pins;
  SearchObjective objective = SearchObjective::Throughput;
  /// Memory a device may use; default: the device's memory.
  std::optional<double> memoryCapBytes;
  /// Let tensor-parallel groups span nodes.
  bool allowTpAcrossNodes = false;
  /// Let the global batch move to the nearest multiple of dp * mbs instead
  /// of requiring dp * mbs to divide it.
  bool freeGlobalBatch = false;
  /// Runners-up kept in the report.
  int64_t topK = 5;
  CostParams costParams;
  std::vector<StrategyConstraint> constraints;
};

struct Candidate {
  ParallelConfig config;
  CostEstimate estimate;
};

struct SearchResult {
  Candidate best;
  /// The next best, best first (at most topK).
  std::vector<Candidate> runnersUp;
  int64_t costed = 0;
  int64_t rejectedOutOfMemory = 0;
  int64_t rejectedIndivisible = 0;
  int64_t rejectedSlower = 0;
  /// Per constraint: how many configurations it rejected and the reason it
  /// gave for the first.
  std::map<std::string, std::pair<int64_t, std::string>> rejectedByConstraint;
  double searchTimeS = 0;
  double memoryCapBytes = 0;
  /// One sentence on why the winner wins (explainChoice).
  std::string why;
  /// Each pipeline depth the search could build: whether some
  /// configuration of it fits (else all ran out of memory).
  std::map<int64_t, bool> fitsAtPp;
};

/// Sets `r.why`: one sentence on why `r.best` wins, from how the best
/// alternatives along each dimension fared; the dimensions `pins` fixed
/// are named as pinned, not explained as choices. The last clause compares
/// the winner with the runner-up, or is `against` where given.
void explainChoice(SearchResult &r, const ModelProfile &profile,
                   const Topology &topology, const PartialParallelConfig &pins,
                   llvm::StringRef against = "");

/// Searches the space. When no configuration fits, the error says the
/// smallest memory any configuration needs, the memory available and what
/// would make it fit; impossible pins are errors naming the constraint.
llvm::Expected<SearchResult> searchStrategy(const ModelProfile &profile,
                                            const TopologyGraph &graph,
                                            const SearchOptions &options);

/// Cuts `layerCosts` into `stages` contiguous non-empty stages, the first
/// also carrying `firstExtra` and the last `lastExtra`, minimising the
/// largest stage load. Returns the layers per stage.
std::vector<int64_t> balancedStageCut(const std::vector<double> &layerCosts,
                                      double firstExtra, double lastExtra,
                                      int64_t stages);

} // namespace partita

#endif // PARTITA_COMPILER_SEARCH_STRATEGYSEARCH_H
