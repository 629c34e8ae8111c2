//===- SearchStrategy.cpp - dist-search-strategy --------------------------===//

#include "compiler/Search/SearchReport.h"
#include "compiler/Topology/Topology.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"
#include "passes/SearchExtensions.h"

#include <cmath>

namespace partita {
#define GEN_PASS_DEF_DISTSEARCHSTRATEGY
#include "passes/Passes.h.inc"

/// The module's topology, or the default and a note saying so. The
/// default is attached to the module: what is planned for it (the
/// strategy, the plan) says which topology it was made for.
Topology moduleTopology(mlir::ModuleOp module, std::string &note) {
  if (auto attr =
          module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName))
    return fromAttr(attr);
  note = "no topology given: the default, one dgx-h100 node; choose one "
         "with --topology";
  Topology topology = defaultTopology();
  module->setAttr(dist::kTopologyAttrName,
                  toAttr(topology, module.getContext()));
  return topology;
}

dist::StrategyAttr requireStrategy(mlir::ModuleOp module,
                                   llvm::StringRef pass) {
  auto strategy =
      module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
  if (!strategy)
    module.emitError(pass) << " needs the module's dist.strategy: run "
                              "dist-search-strategy first (or plan-opt "
                              "--strategy=...)";
  return strategy;
}

llvm::Expected<SearchOptions> searchOptionsFor(mlir::ModuleOp module,
                                               const TopologyGraph &graph,
                                               const SearchSettings &settings) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  SearchOptions options;
  llvm::Expected<PartialParallelConfig> pins =
      parseParallelConfig(settings.strategy);
  if (!pins)
    return pins.takeError();
  // The model spec's pins (carried by the module), then the option's.
  if (auto specPins =
          module->getAttrOfType<mlir::StringAttr>("dist.strategy_pins")) {
    llvm::Expected<PartialParallelConfig> fromSpec =
        parseParallelConfig(specPins.getValue());
    if (!fromSpec)
      return fromSpec.takeError();
    options.pins = overlay(*fromSpec, *pins);
  } else {
    options.pins = *pins;
  }
  llvm::Expected<CostParams> params = parseCostParams(settings.costParams);
  if (!params)
    return params.takeError();
  options.costParams = *params;
  if (settings.objective != "throughput" && settings.objective != "memory")
    return error("dist-search-strategy: objective must be throughput or "
                 "memory, got '" +
                 settings.objective + "'");
  options.objective = settings.objective == "memory"
                          ? SearchObjective::Memory
                          : SearchObjective::Throughput;
  if (!(settings.memoryCapGib >= 0) || !std::isfinite(settings.memoryCapGib))
    return error("dist-search-strategy: memory-cap-gib must be a finite "
                 "number of GiB, not negative");
  if (settings.memoryCapGib > 0)
    options.memoryCapBytes = settings.memoryCapGib * kGiB;
  options.allowTpAcrossNodes = settings.allowTpAcrossNodes;
  options.freeGlobalBatch = settings.freeGlobalBatch;
  options.topK = settings.topK;
  applyCostParamsOverrides(options.costParams, graph, module);
  options.constraints = strategyConstraints(module);
  return options;
}

namespace {

struct DistSearchStrategyPass
    : impl::DistSearchStrategyBase<DistSearchStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto fail = [&](const llvm::Twine &message) {
      module.emitError(message);
      signalPassFailure();
    };
    auto specPins =
        module->getAttrOfType<mlir::StringAttr>("dist.strategy_pins");
    std::string note;
    Topology topology = moduleTopology(module, note);
    TopologyGraph graph(topology);
    // The search keeps as many runners-up as either use needs.
    SearchSettings settings{strategy,
                            costParams,
                            objective,
                            memoryCapGib,
                            allowTpAcrossNodes,
                            freeGlobalBatch,
                            std::max<int64_t>({0, topK, recordRunnersUp})};
    llvm::Expected<SearchOptions> built =
        searchOptionsFor(module, graph, settings);
    if (!built)
      return fail(llvm::toString(built.takeError()));
    SearchOptions options = std::move(*built);
    llvm::json::Array reports;
    mlir::WalkResult walk = module.walk([&](tfm::ModelOp model) {
      ModelProfile profile = profileModel(model);
      llvm::Expected<SearchResult> result =
          searchStrategy(profile, graph, options);
      if (!result) {
        // An impossible pin is named after where it came from: the spec's
        // "strategy", the option, or both.
        std::string message = llvm::toString(result.takeError());
        llvm::StringRef rest(message);
        if (specPins && rest.consume_front("--strategy: "))
          message = (strategy.empty() ? "/strategy (the model spec's pins): "
                                      : "--strategy over the model spec's "
                                        "/strategy: ") +
                    rest.str();
        mlir::emitError(model.getLoc(), message);
        return mlir::WalkResult::interrupt();
      }
      module->setAttr(dist::kStrategyAttrName,
                      toStrategyAttr(result->best.config, profile.layers.size(),
                                     module.getContext()));
      // The runners-up, best first, for dist-confirm-strategy.
      if (recordRunnersUp > 0) {
        llvm::SmallVector<mlir::Attribute> runnersUp;
        for (const Candidate &c :
             llvm::ArrayRef(result->runnersUp).take_front(recordRunnersUp))
          runnersUp.push_back(toStrategyAttr(c.config, profile.layers.size(),
                                             module.getContext()));
        module->setAttr("dist.runners_up",
                        mlir::ArrayAttr::get(module.getContext(), runnersUp));
      }
      // The report lists top-k; the rest recorded for confirmation count
      // as slower, as they would have without it.
      size_t listed = std::max<int64_t>(0, topK);
      if (result->runnersUp.size() > listed) {
        result->rejectedSlower += result->runnersUp.size() - listed;
        result->runnersUp.resize(listed);
      }
      printSearchReport(*result, profile, note, llvm::errs());
      reports.push_back(searchReportJson(*result, profile, !note.empty()));
      return mlir::WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (report.empty())
      return;
    std::string text =
        llvm::formatv("{0:2}", reports.size() == 1
                                   ? llvm::json::Value(std::move(reports[0]))
                                   : llvm::json::Value(std::move(reports)))
            .str() +
        "\n";
    if (llvm::Error error = writeOutputFile(report, text))
      return fail("dist-search-strategy: " + llvm::toString(std::move(error)));
  }
};

} // namespace
} // namespace partita
