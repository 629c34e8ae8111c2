//===- EstimateCost.cpp - dist-estimate-cost ------------------------------===//

#include "compiler/CostModel/CostReport.h"
#include "compiler/Topology/Topology.h"
#include "passes/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace partita {
#define GEN_PASS_DEF_DISTESTIMATECOST
#include "passes/Passes.h.inc"

namespace {

struct DistEstimateCostPass
    : impl::DistEstimateCostBase<DistEstimateCostPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (format != "text" && format != "json") {
      module.emitError("dist-estimate-cost: format must be text or json, "
                       "got '")
          << format << "'";
      return signalPassFailure();
    }
    // Without a strategy option, cost the one the module carries.
    auto chosen = module->getAttrOfType<dist::StrategyAttr>(
        dist::kStrategyAttrName);
    llvm::Expected<PartialParallelConfig> partial =
        parseParallelConfig(strategy);
    if (!partial) {
      module.emitError(llvm::toString(partial.takeError()));
      return signalPassFailure();
    }
    llvm::Expected<CostParams> params = parseCostParams(costParams);
    if (!params) {
      module.emitError(llvm::toString(params.takeError()));
      return signalPassFailure();
    }

    std::string note;
    Topology topology = moduleTopology(module, note);
    bool usesDefault = !note.empty();
    TopologyGraph graph(topology);

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file;
    if (output != "-") {
      file = mlir::openOutputFile(output, &error);
      if (!file) {
        module.emitError("dist-estimate-cost: ") << error;
        return signalPassFailure();
      }
    }
    llvm::raw_ostream &os = file ? file->os() : llvm::errs();

    llvm::json::Array reports;
    mlir::WalkResult result = module.walk([&](tfm::ModelOp model) {
      ModelProfile profile = profileModel(model);
      llvm::Expected<ParallelConfig> config =
          chosen && strategy.empty()
              ? llvm::Expected<ParallelConfig>(fromStrategyAttr(chosen))
              : completeParallelConfig(
                    *partial, topology.numDevices(), profile.globalBatch,
                    static_cast<int64_t>(profile.layers.size()));
      llvm::Expected<CostEstimate> estimate =
          config ? estimateCost(profile, graph, *config, *params)
                 : llvm::Expected<CostEstimate>(config.takeError());
      if (!estimate) {
        mlir::emitError(model.getLoc(), llvm::toString(estimate.takeError()));
        return mlir::WalkResult::interrupt();
      }
      if (format == "text")
        printCostReport(*estimate, profile, note, os);
      else
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
    if (file)
      file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partita
