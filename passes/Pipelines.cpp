//===- Pipelines.cpp - Named pipelines and registration -------------------===//

#include "passes/Pipelines.h"
#include "compiler/CostModel/CostModel.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace partita {

void addPlanLowering(mlir::OpPassManager &pm, bool overlap, bool quiet,
                     llvm::StringRef trace, llvm::StringRef costParams) {
  pm.addPass(createDistPartitionTensors());
  pm.addPass(createDistSplitStages());
  if (overlap)
    pm.addPass(createDistOverlapCollectives({quiet}));
  // The gradient dtype and buckets the cost model counted; a malformed
  // --cost-params is reported by the passes that cost.
  CostParams counted;
  if (llvm::Expected<CostParams> parsed = parseCostParams(costParams))
    counted = *parsed;
  else
    llvm::consumeError(parsed.takeError());
  pm.addPass(createDistLowerToExec());
  pm.addPass(createExecBuildBackward({counted.gradientDtype()}));
  if (overlap)
    pm.addPass(createExecOverlapCommunication({quiet, counted.bucketMb}));
  pm.addPass(createExecSchedulePipeline());
  pm.addPass(createExecPlanMemory({quiet, costParams.str()}));
  pm.addPass(createExecSimulatePlan(
      {trace.str(), /*report=*/"", quiet, costParams.str()}));
}

void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options) {
  if (!options.topology.empty())
    pm.addPass(createDistAttachTopology({options.topology}));
  if (options.summarize)
    pm.addPass(createTfmSummarizeModel());
  // With the search, the cost report describes its winner; without it, the
  // strategy given (completed with the documented defaults).
  std::string costed =
      options.search ? std::string() : options.strategy.getValue();
  // The search confirms its choice on the plans its best candidates
  // compile to, and reports the one kept, whether a plan is written or not.
  if (options.search)
    pm.addPass(createDistSearchStrategy(
        {options.strategy, options.objective, options.memoryCapGib,
         options.allowTpAcrossNodes, options.freeGlobalBatch, /*topK=*/5,
         options.report, options.costParams, /*recordRunnersUp=*/0,
         options.confirm, options.overlap}));
  bool wantsCost = !options.strategy.empty() || !options.costReport.empty();
  if (wantsCost)
    pm.addPass(
        createDistEstimateCost({costed, "text", "-", options.costParams}));
  if (!options.costReport.empty())
    pm.addPass(createDistEstimateCost(
        {costed, "json", options.costReport, options.costParams}));
  if (options.plan.empty())
    return;
  // The plan carries the prediction, made on the global shapes.
  if (!wantsCost)
    pm.addPass(
        createDistEstimateCost({costed, "none", "-", options.costParams}));
  addPlanLowering(pm, options.overlap, /*quiet=*/false, options.trace,
                  options.costParams);
  pm.addPass(createExecExportPlan({options.plan, options.allowUnfit}));
}

void registerPartitaPassesAndPipelines() {
  registerPartitaPasses();
  mlir::PassPipelineRegistration<CompilePipelineOptions>(
      "partita-compile",
      "Compile an imported model (what plan-opt runs on a model spec)",
      buildCompilePipeline);
}

} // namespace partita
