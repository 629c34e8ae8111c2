//===- SchedulePipeline.cpp - exec-schedule-pipeline
//-----------------------===//

#include "compiler/CostModel/ParallelConfig.h"
#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace partita {
#define GEN_PASS_DEF_EXECSCHEDULEPIPELINE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct Task {
  exec::PhaseKind phase;
  int64_t microBatch, chunk;
};

/// Megatron-LM's interleaved 1F1B: virtual micro-batch k of a rank is
/// micro-batch (k / (pp * vpp)) * pp + k % pp of local chunk (k / pp) % vpp
/// (backwards walk the chunks in reverse).
Task virtualTask(int64_t k, bool forward, int64_t rank, int64_t pp,
                 int64_t vpp) {
  int64_t local = (k / pp) % vpp;
  if (!forward)
    local = vpp - 1 - local;
  int64_t mb = (k / (pp * vpp)) * pp + k % pp;
  return {forward ? exec::PhaseKind::forward : exec::PhaseKind::backward, mb,
          local * pp + rank};
}

std::vector<Task> schedule(const ParallelConfig &c, int64_t rank) {
  const int64_t m = c.numMicroBatches, pp = c.pp, vpp = c.vpp;
  std::vector<Task> tasks;
  auto fwd = [&](int64_t mb, int64_t chunk) {
    tasks.push_back({exec::PhaseKind::forward, mb, chunk});
  };
  auto bwd = [&](int64_t mb, int64_t chunk) {
    tasks.push_back({exec::PhaseKind::backward, mb, chunk});
  };
  if (c.schedule == Schedule::GPipe) {
    for (int64_t local = 0; local < vpp; ++local)
      for (int64_t mb = 0; mb < m; ++mb)
        fwd(mb, local * pp + rank);
    for (int64_t local = vpp - 1; local >= 0; --local)
      for (int64_t mb = 0; mb < m; ++mb)
        bwd(mb, local * pp + rank);
    return tasks;
  }
  // 1F1B, and its interleaved form over vpp chunks per rank.
  const int64_t total = m * vpp;
  int64_t warmup =
      vpp == 1 ? pp - rank - 1 : (pp - rank - 1) * 2 + (vpp - 1) * pp;
  warmup = std::min(warmup, total);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f)
    tasks.push_back(virtualTask(f, true, rank, pp, vpp));
  for (; f < total; ++f, ++b) {
    tasks.push_back(virtualTask(f, true, rank, pp, vpp));
    tasks.push_back(virtualTask(b, false, rank, pp, vpp));
  }
  for (; b < total; ++b)
    tasks.push_back(virtualTask(b, false, rank, pp, vpp));
  return tasks;
}

struct ExecSchedulePipelinePass
    : impl::ExecSchedulePipelineBase<ExecSchedulePipelinePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::StrategyAttr strategy =
        requireStrategy(module, "exec-schedule-pipeline");
    if (!strategy)
      return signalPassFailure();
    ParallelConfig config = fromStrategyAttr(strategy);
    if (config.vpp > 1 &&
        (config.vpp < 2 || config.numMicroBatches % config.pp != 0)) {
      module.emitError(
          "exec-schedule-pipeline: model chunks interleaved over the "
          "pipeline ranks need a number of micro-batches (")
          << config.numMicroBatches << ") divisible by pp (" << config.pp
          << ")";
      return signalPassFailure();
    }
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
      for (const Task &task : schedule(config, program.getPpRank()))
        exec::RunOp::create(b, program.getLoc(), task.phase, task.microBatch,
                            task.chunk);
      if (failed(op.verify()))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace partita
