//===- Pipelines.cpp - Named pipelines and registration -------------------===//

#include "passes/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace partita {

void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options) {
  if (options.summarize)
    pm.addPass(createTfmSummarizeModel());
}

void registerPartitaPassesAndPipelines() {
  registerPartitaPasses();
  mlir::PassPipelineRegistration<CompilePipelineOptions>(
      "partita-compile",
      "Compile an imported model (what plan-opt runs on a model spec)",
      buildCompilePipeline);
}

} // namespace partita
