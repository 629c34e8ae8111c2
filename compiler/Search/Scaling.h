//===- Scaling.h - The best plan for each cluster size ----------*- C++ -*-===//
//
// Is another node worth it? The search run for one model on a topology
// resized to each of several node counts: tokens/s, scaling efficiency
// against the smallest count, and the time and cost of a token budget.
// plan-opt --scaling prints it (docs/search.md).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_SEARCH_SCALING_H
#define PARTITA_COMPILER_SEARCH_SCALING_H

#include "compiler/Search/StrategySearch.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace partita {

struct ScalingRow {
  int64_t nodes = 0, devices = 0;
  /// The search's choice, or why there is none (nothing fits, say).
  std::optional<Candidate> best;
  std::string error;
};

struct ScalingStudy {
  std::string topology; // the topology's name, as resized
  std::vector<ScalingRow> rows;
};

/// Searches on `base` resized to each of `nodeCounts`; `optionsFor` gives
/// the search's options on a resized topology's graph.
ScalingStudy studyScaling(
    const ModelProfile &profile, const Topology &base,
    llvm::ArrayRef<int64_t> nodeCounts,
    const std::function<llvm::Expected<SearchOptions>(const TopologyGraph &)>
        &optionsFor);

/// What a token budget costs: with `tokens` > 0, the time to train on
/// them; with `usdPerGpuHour` > 0 too, its price.
struct TokenBudget {
  double tokens = 0, usdPerGpuHour = 0;
};

/// One table per study: each row's strategy, tokens/s, step time, MFU,
/// memory, scaling efficiency (tokens/s per device against the study's
/// first row that has a plan) and the budget's time and cost.
void printScaling(llvm::ArrayRef<ScalingStudy> studies,
                  const ModelProfile &profile, const TokenBudget &budget,
                  llvm::raw_ostream &os);

} // namespace partita

#endif // PARTITA_COMPILER_SEARCH_SCALING_H
