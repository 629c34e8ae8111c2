//===- EstimateCost.cpp - dist-estimate-cost ------------------------------===//

#include "compiler/CostModel/CostReport.h"
#include "compiler/Export/PlanExport.h"
#include "compiler/Topology/Topology.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"
#include "passes/SearchExtensions.h"

#include "mlir/IR/Builders.h"

namespace partita {
#define GEN_PASS_DEF_DISTESTIMATECOST
#include "passes/Passes.h.inc"

namespace {

/// The prediction travels with the module to plan.json.
void recordPrediction(mlir::ModuleOp module, const llvm::json::Object &p) {
  module->setAttr("dist.predicted", numbersToAttr(p, module.getContext()));
}

struct DistEstimateCostPass : impl::DistEstimateCostBase<DistEstimateCostPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (format != "text" && format != "json" && format != "none") {
      module.emitError("dist-estimate-cost: format must be text, json or "
                       "none, "
                       "got '")
          << format << "'";
      return signalPassFailure();
    }
    // Without a strategy option, cost the one the module carries.
    auto chosen =
        module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
    llvm::Expected<PartialParallelConfig> partial =
        parseParallelConfig(strategy);
    if (!partial) {
      module.emitError(llvm::toString(partial.takeError()));
      return signalPassFailure();
    }
    std::string note;
    Topology topology = moduleTopology(module, note);
    llvm::Expected<CostParams> params = costParamsFor(topology, costParams);
    if (!params) {
      module.emitError(llvm::toString(params.takeError()));
      return signalPassFailure();
    }
    bool usesDefault = !note.empty();
    // The carried strategy's nodes only: a large cluster's whole graph
    // takes a second to build, and the confirmation costs many plans.
    TopologyGraph graph(topology, chosen && strategy.empty()
                                      ? fromStrategyAttr(chosen).numDevices()
                                      : topology.numDevices());
    applyCostParamsOverrides(*params, graph, module);

    // The report is written whole once every model is costed, so a failed
    // model leaves no half-written file.
    std::string text;
    llvm::raw_string_ostream os(text);

    llvm::json::Array reports;
    mlir::WalkResult result = module.walk([&](tfm::ModelOp model) {
      ModelProfile profile = profileModel(model);
      llvm::Expected<ParallelConfig> config =
          chosen && strategy.empty()
              ? llvm::Expected<ParallelConfig>(fromStrategyAttr(chosen))
              : completeParallelConfig(
                    *partial, topology.numDevices(), profile.globalBatch,
                    static_cast<int64_t>(profile.layers.size()));
      if (config)
        if (std::optional<std::string> broken = brokenRule(*config, module)) {
          mlir::emitError(model.getLoc())
              << "strategy " << config->str() << " breaks the rule " << *broken;
          return mlir::WalkResult::interrupt();
        }
      llvm::Expected<CostEstimate> estimate =
          config ? estimateCost(profile, graph, *config, *params)
                 : llvm::Expected<CostEstimate>(config.takeError());
      if (!estimate) {
        mlir::emitError(model.getLoc(), llvm::toString(estimate.takeError()));
        return mlir::WalkResult::interrupt();
      }
      recordPrediction(module, predictedJson(*estimate));
      // The strategy costed is the one later passes apply when the module
      // has none yet.
      if (!chosen)
        module->setAttr(
            dist::kStrategyAttrName,
            toStrategyAttr(estimate->config,
                           static_cast<int64_t>(profile.layers.size()),
                           model.getContext()));
      if (format == "text")
        printCostReport(*estimate, profile, note, os);
      else if (format == "json")
        reports.push_back(costReportJson(*estimate, profile, usesDefault));
      return mlir::WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    if (format == "json") {
      // One object for one model, an array for several.
      if (reports.size() == 1)
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(reports[0])));
      else
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(reports)));
      os << "\n";
    }
    if (format == "none")
      return;
    if (output == "-") {
      llvm::errs() << text;
      return;
    }
    if (llvm::Error error = writeOutputFile(output, text)) {
      module.emitError("dist-estimate-cost: ")
          << llvm::toString(std::move(error));
      return signalPassFailure();
    }
  }
};

} // namespace
} // namespace partita
