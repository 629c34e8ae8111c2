//===- SchedulePipeline.cpp - exec-schedule-pipeline ----------------------===//

#include "compiler/CostModel/PipelineSchedule.h"
#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace partita {
#define GEN_PASS_DEF_EXECSCHEDULEPIPELINE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct ExecSchedulePipelinePass
    : impl::ExecSchedulePipelineBase<ExecSchedulePipelinePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::StrategyAttr strategy =
        requireStrategy(module, "exec-schedule-pipeline");
    if (!strategy)
      return signalPassFailure();
    // (The strategy's verifier holds the interleaved schedule's rule on m.)
    ParallelConfig config = fromStrategyAttr(strategy);
    OpBuilder b(&getContext());
    for (auto program : module.getOps<exec::ProgramOp>()) {
      Block &body = program.getBody().front();
      if (!body.getOps<exec::ScheduleOp>().empty()) {
        program.emitOpError("already has a schedule");
        return signalPassFailure();
      }
      bool hasBackward =
          llvm::any_of(body.getOps<exec::PhaseOp>(), [](exec::PhaseOp p) {
            return p.getKind() == exec::PhaseKind::backward;
          });
      if (!hasBackward) {
        program.emitOpError("has no backward phases; run exec-build-backward "
                            "first");
        return signalPassFailure();
      }
      b.setInsertionPointToEnd(&body);
      auto op = exec::ScheduleOp::create(b, program.getLoc());
      b.createBlock(&op.getBody());
      for (const PipelineRun &run : pipelineRuns(config, program.getPpRank()))
        exec::RunOp::create(b, program.getLoc(),
                            run.forward ? exec::PhaseKind::forward
                                        : exec::PhaseKind::backward,
                            run.microBatch, run.chunk);
      if (failed(op.verify()))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace partita
