//===- SearchExtensions.h - Plugin hooks into the search and cost model -*-===//
//
// What a plugin (plan-opt --load-pass-plugin) registers to change which
// strategy the compiler chooses without editing it: constraints that every
// candidate must meet, and overrides of the cost model's parameters. The
// passes that search (dist-search-strategy) and cost (dist-estimate-cost)
// consult every registration on every module. docs/writing-passes.md has a
// worked example.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_PASSES_SEARCHEXTENSIONS_H
#define PARTITA_PASSES_SEARCHEXTENSIONS_H

#include "compiler/Search/StrategySearch.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace partita {

/// Why `config` is not acceptable for `module`, or nothing when it is. The
/// module is there for rules configured by attributes (a plugin's pass may
/// set them earlier in the pipeline).
using StrategyRule = std::function<std::optional<std::string>(
    const ParallelConfig &config, mlir::ModuleOp module)>;

/// Adjusts `params` for `module` on `graph`'s topology. Returns the name the
/// reports show when it changed something, or nothing when it did not apply.
/// Once the module has a strategy, `graph` may route only that strategy's
/// ranks (TopologyGraph's usedDevices); its topology() is the whole cluster.
using CostParamsOverride = std::function<std::optional<std::string>(
    CostParams &params, const TopologyGraph &graph, mlir::ModuleOp module)>;

/// Registers a rule under `name` (shown in the search report). Call it when
/// the plugin loads (from its registration callback); not thread-safe.
void registerStrategyRule(llvm::StringRef name, StrategyRule rule);

/// Registers a cost-model override, applied in registration order.
void registerCostParamsOverride(CostParamsOverride override);

/// The registered rules, bound to `module`.
std::vector<StrategyConstraint> strategyConstraints(mlir::ModuleOp module);

/// Why `config` breaks a registered rule for `module` ("NAME: reason"), or
/// nothing.
std::optional<std::string> brokenRule(const ParallelConfig &config,
                                      mlir::ModuleOp module);

/// Applies every registered override to `params`.
void applyCostParamsOverrides(CostParams &params, const TopologyGraph &graph,
                              mlir::ModuleOp module);

/// dist-search-strategy's settings, as its options spell them.
struct SearchSettings {
  std::string strategy, costParams, objective = "throughput";
  double memoryCapGib = 0;
  bool allowTpAcrossNodes = false, freeGlobalBatch = false;
  int64_t topK = 5;
};

/// The search's options for `module` on `graph`: the model spec's pins
/// with `settings.strategy` over them, the cost parameters with every
/// registered override applied, and every registered rule.
llvm::Expected<SearchOptions> searchOptionsFor(mlir::ModuleOp module,
                                               const TopologyGraph &graph,
                                               const SearchSettings &settings);

} // namespace partita

#endif // PARTITA_PASSES_SEARCHEXTENSIONS_H
