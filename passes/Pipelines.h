//===- Pipelines.h - Named pass pipelines -----------------------*- C++ -*-===//

#ifndef PARTITA_PASSES_PIPELINES_H
#define PARTITA_PASSES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace partita {

/// Options of the `partita-compile` pipeline, the one plan-opt runs on a
/// model spec when no passes are named on its command line.
struct CompilePipelineOptions
    : public mlir::PassPipelineOptions<CompilePipelineOptions> {
  Option<bool> summarize{*this, "summarize",
                         llvm::cl::desc("Print the model summary "
                                        "(tfm-summarize-model)"),
                         llvm::cl::init(true)};
  Option<std::string> topology{
      *this, "topology",
      llvm::cl::desc("Attach this topology first (dist-attach-topology): "
                     "NAME[:N] or a .json file")};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("Report the cost of this parallel configuration "
                     "(dist-estimate-cost)")};
  Option<std::string> costParams{
      *this, "cost-params",
      llvm::cl::desc("Override the cost model's physical parameters")};
  Option<std::string> costReport{
      *this, "cost-report",
      llvm::cl::desc("Also write the cost report as JSON to this file")};
};

/// The compile pipeline. Today: attach the topology, summarise the model,
/// and report the cost of a given strategy; the strategy search,
/// partitioning and plan export join it as they land.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options);

} // namespace partita

#endif // PARTITA_PASSES_PIPELINES_H
