//===- SearchExtensions.cpp - Plugin hooks into the search ----------------===//

#include "passes/SearchExtensions.h"

namespace partita {

namespace {

struct NamedRule {
  std::string name;
  StrategyRule rule;
};

// Function-local statics: plugins register before any pass runs, and the
// registries exist by then whatever the order of static initialisation.
std::vector<NamedRule> &rules() {
  static std::vector<NamedRule> registry;
  return registry;
}

std::vector<CostParamsOverride> &overrides() {
  static std::vector<CostParamsOverride> registry;
  return registry;
}

} // namespace

void registerStrategyRule(llvm::StringRef name, StrategyRule rule) {
  rules().push_back({name.str(), std::move(rule)});
}

void registerCostParamsOverride(CostParamsOverride override) {
  overrides().push_back(std::move(override));
}

std::vector<StrategyConstraint> strategyConstraints(mlir::ModuleOp module) {
  std::vector<StrategyConstraint> bound;
  for (const NamedRule &r : rules())
    bound.push_back({r.name, [rule = r.rule, module](const ParallelConfig &c) {
                       return rule(c, module);
                     }});
  return bound;
}

std::optional<std::string> brokenRule(const ParallelConfig &config,
                                      mlir::ModuleOp module) {
  for (const NamedRule &r : rules())
    if (std::optional<std::string> why = r.rule(config, module))
      return r.name + ": " + *why;
  return std::nullopt;
}

void applyCostParamsOverrides(CostParams &params, const TopologyGraph &graph,
                              mlir::ModuleOp module) {
  for (const CostParamsOverride &override : overrides())
    if (std::optional<std::string> name = override(params, graph, module))
      params.overrides.push_back(*name);
}

} // namespace partita
