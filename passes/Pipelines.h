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
  Option<bool> search{*this, "search",
                      llvm::cl::desc("Search the parallel strategy "
                                     "(dist-search-strategy)"),
                      llvm::cl::init(true)};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("Pin these dimensions of the strategy and report the "
                     "cost of the result (dist-estimate-cost)")};
  Option<std::string> objective{*this, "objective",
                                llvm::cl::desc("throughput or memory"),
                                llvm::cl::init("throughput")};
  Option<double> memoryCapGib{
      *this, "memory-cap-gib",
      llvm::cl::desc("Memory a device may use in GiB (0: all of it)"),
      llvm::cl::init(0)};
  Option<bool> allowTpAcrossNodes{
      *this, "allow-tp-across-nodes",
      llvm::cl::desc("Let tensor-parallel groups span nodes"),
      llvm::cl::init(false)};
  Option<bool> freeGlobalBatch{
      *this, "free-global-batch",
      llvm::cl::desc("Let the global batch move to the nearest multiple of "
                     "dp * mbs"),
      llvm::cl::init(false)};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Write the search report as JSON to this file")};
  Option<std::string> costParams{
      *this, "cost-params",
      llvm::cl::desc("Override the cost model's physical parameters")};
  Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("Compile on to an executable plan (partition, stages, "
                     "exec lowering, backward, schedule) and write it as "
                     "plan.json to this file")};
  Option<std::string> costReport{
      *this, "cost-report",
      llvm::cl::desc("Also write the cost report as JSON to this file")};
  Option<bool> overlap{
      *this, "overlap",
      llvm::cl::desc("With plan: launch collectives asynchronously where "
                     "they can overlap compute (exec-overlap-communication)"),
      llvm::cl::init(true)};
  Option<int64_t> confirm{
      *this, "confirm",
      llvm::cl::desc("With search: compile and simulate this many of the "
                     "best candidates and keep the fastest whose memory plan "
                     "fits, before the report (0: the closed form's "
                     "choice)"),
      llvm::cl::init(3)};
  Option<bool> allowUnfit{
      *this, "allow-unfit",
      llvm::cl::desc("With plan: write it even when it needs more memory "
                     "than the device has"),
      llvm::cl::init(false)};
  Option<std::string> trace{
      *this, "trace",
      llvm::cl::desc("With plan: write a Chrome trace of the simulated step "
                     "to this file")};
};

/// From a module with its dist.strategy to scheduled exec programs with a
/// memory plan and a simulated step: partition, stages, exec lowering,
/// backward, (overlap,) schedule, memory plan, simulation.
void addPlanLowering(mlir::OpPassManager &pm, bool overlap, bool quiet,
                     llvm::StringRef trace, llvm::StringRef costParams);

/// The compile pipeline: attach the topology, summarise the model, search
/// the strategy and report its cost; with `plan`, on through partitioning,
/// stages, exec lowering, backward and schedule to a simulated step and
/// plan.json.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompilePipelineOptions &options);

} // namespace partita

#endif // PARTITA_PASSES_PIPELINES_H
