//===- SimulatePlan.cpp - exec-simulate-plan ------------------------------===//

#include "compiler/Export/PlanExport.h"
#include "compiler/Simulate/PlanSimulator.h"
#include "compiler/Topology/Topology.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"
#include "passes/SearchExtensions.h"

#include "llvm/Support/Format.h"

namespace partita {
#define GEN_PASS_DEF_EXECSIMULATEPLAN
#include "passes/Passes.h.inc"

namespace {

void printSimulation(const SimulationResult &r, mlir::ModuleOp module,
                     llvm::raw_ostream &os) {
  using llvm::format;
  os << format("simulated step %.4f s", r.stepTimeS);
  double closed =
      numberAt(module->getAttrOfType<mlir::DictionaryAttr>("dist.predicted"),
               "step_time_s");
  if (!std::isnan(closed))
    os << format(" (closed form %.4f s, %+.1f%%)", closed,
                 100 * (r.stepTimeS - closed) / closed);
  os << format(", bubble %.1f%%, exposed communication %.4f s",
               100 * r.bubbleFraction, r.exposedCommTotalS);
  for (const auto &[group, time] : r.exposedCommS)
    os << format(" (%s %.4f)", group.c_str(), time);
  os << "\n";
  for (const SimulatedRank &s : r.ranks)
    os << format("  pp rank %lld: compute %.4f s, comm %.4f s, waits for "
                 "pipeline messages %.4f s, done at %.4f s\n",
                 static_cast<long long>(s.ppRank), s.computeBusyS, s.commBusyS,
                 s.pipelineWaitS, s.finishS);
}

llvm::LogicalResult writeJson(mlir::ModuleOp module, llvm::StringRef path,
                              llvm::json::Value value) {
  if (llvm::Error error =
          writeOutputFile(path, llvm::formatv("{0}", value).str() + "\n"))
    return module.emitError("exec-simulate-plan: ")
           << llvm::toString(std::move(error));
  return llvm::success();
}

struct ExecSimulatePlanPass : impl::ExecSimulatePlanBase<ExecSimulatePlanPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    std::string note;
    Topology topology = moduleTopology(module, note);
    llvm::Expected<CostParams> params = costParamsFor(topology, costParams);
    if (!params) {
      module.emitError("exec-simulate-plan: ")
          << llvm::toString(params.takeError());
      return signalPassFailure();
    }
    SimulationOptions options;
    options.costParams = *params;
    // The plan's nodes only: a large cluster's whole graph takes seconds.
    auto strategy =
        module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
    TopologyGraph graph(topology, strategy
                                      ? fromStrategyAttr(strategy).numDevices()
                                      : topology.numDevices());
    applyCostParamsOverrides(options.costParams, graph, module);
    options.recordSpans = !trace.empty();
    llvm::Expected<SimulationResult> result = simulatePlan(module, options);
    if (!result) {
      module.emitError("exec-simulate-plan: ")
          << llvm::toString(result.takeError());
      return signalPassFailure();
    }
    llvm::json::Object json = simulationJson(*result);
    json.erase("ranks");
    module->setAttr("exec.simulated", numbersToAttr(json, module.getContext()));
    if (!quiet)
      printSimulation(*result, module, llvm::errs());
    if ((!trace.empty() &&
         failed(writeJson(module, trace, chromeTrace(*result)))) ||
        (!report.empty() &&
         failed(writeJson(module, report, simulationJson(*result)))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace partita
