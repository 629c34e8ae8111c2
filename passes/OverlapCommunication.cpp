//===- OverlapCommunication.cpp - exec-overlap-communication --------------===//

#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace partita {
#define GEN_PASS_DEF_EXECOVERLAPCOMMUNICATION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Whether `op` must stay on its side of collective `c`: it writes c's
/// input, or reads or writes c's output.
bool conflicts(Operation *op, exec::CollectiveOp c) {
  SmallVector<StringRef> reads, writes;
  exec::getLaunchAccesses(op, reads, writes);
  for (StringRef w : writes)
    if (w == c.getInput() || w == c.getOutput())
      return true;
  return llvm::is_contained(reads, c.getOutput());
}

/// Why each collective of a group stayed synchronous, and how many did not.
struct GroupTally {
  int64_t async = 0;
  std::map<std::string, int64_t> syncWhy;
};

/// Whether async collective `c` is waited for after `op`: the comm stream
/// may run a collective needed at `op` before it.
bool neededLater(exec::CollectiveOp c, Operation *op) {
  if (!c.getAsync())
    return false;
  for (Operation *next = c->getNextNode(); next; next = next->getNextNode())
    if (auto wait = dyn_cast<exec::WaitOp>(next);
        wait && wait.getBuffer() == c.getOutput())
      return op->isBeforeInBlock(wait);
  return false;
}

std::optional<int64_t> layerOf(Operation *op) {
  if (auto layer = op->getAttrOfType<IntegerAttr>("layer"))
    return layer.getInt();
  return std::nullopt;
}

void overlapPhase(exec::PhaseOp phase,
                  std::map<std::string, GroupTally> &tally) {
  SmallVector<exec::CollectiveOp> collectives;
  for (auto c : phase.getBody().front().getOps<exec::CollectiveOp>())
    collectives.push_back(c);
  OpBuilder b(phase.getContext());
  // Forward walks the blocks up, backward down.
  int64_t direction = phase.getKind() == exec::PhaseKind::backward ? 1 : -1;
  for (exec::CollectiveOp c : collectives) {
    GroupTally &t = tally[c.getGroup().str()];
    if (c.getGroup() == "tied" || c.getGroup() == "world") {
      ++t.syncWhy["its group spans ranks of other programs"];
      continue;
    }
    // Latest end: the first launch that needs it done.
    Operation *end = c->getNextNode();
    while (end && !conflicts(end, c))
      end = end->getNextNode();
    // Earliest start: a collective used by block L may start during the
    // block before it in the phase's order (L - 1 forward, L + 1 backward),
    // passing that block's kernels and waits, but no earlier: one block of
    // prefetch. On the comm stream it may go ahead of collectives needed
    // after it (gradient reductions waited for at the end of the phase),
    // not of those needed before. One that no block uses starts only behind
    // kernels. Sends and receives keep their place.
    std::optional<int64_t> consumer = end ? layerOf(end) : std::nullopt;
    auto inWindow = [&](Operation *op) {
      std::optional<int64_t> layer = layerOf(op);
      return consumer && layer &&
             (*layer == *consumer || *layer == *consumer + direction);
    };
    Operation *start = c;
    for (Operation *prev = c->getPrevNode(); prev; prev = prev->getPrevNode()) {
      bool passable;
      if (isa<exec::SendOp, exec::RecvOp>(prev) || conflicts(prev, c))
        passable = false;
      else if (auto other = dyn_cast<exec::CollectiveOp>(prev))
        passable = end && other.getGroup() != "tied" &&
                   other.getGroup() != "world" && neededLater(other, end);
      else if (isa<exec::WaitOp>(prev))
        passable = consumer.has_value();
      else
        passable = !consumer || inWindow(prev);
      if (!passable)
        break;
      start = prev;
    }
    if (start == c.getOperation() && end == c->getNextNode()) {
      ++t.syncWhy[end ? "the launch after it needs its result at once"
                      : "nothing follows it in its phase"];
      continue;
    }
    ++t.async;
    if (start != c.getOperation())
      c->moveBefore(start);
    c.setAsync(true);
    if (end)
      b.setInsertionPoint(end);
    else
      b.setInsertionPointToEnd(&phase.getBody().front());
    exec::WaitOp::create(b, c.getLoc(), c.getOutputAttr());
  }
}

struct ExecOverlapCommunicationPass
    : impl::ExecOverlapCommunicationBase<ExecOverlapCommunicationPass> {
  using Base::Base;

  void runOnOperation() override {
    std::map<std::string, GroupTally> tally;
    getOperation().walk(
        [&](exec::PhaseOp phase) { overlapPhase(phase, tally); });
    if (quiet || tally.empty())
      return;
    llvm::errs() << "overlap:";
    for (const auto &[group, t] : tally) {
      int64_t sync = 0;
      for (const auto &[why, n] : t.syncWhy)
        sync += n;
      llvm::errs() << " " << group << " " << t.async << " of " << t.async + sync
                   << " async";
      for (const auto &[why, n] : t.syncWhy)
        llvm::errs() << " (" << n << " not: " << why << ")";
      llvm::errs() << ";";
    }
    llvm::errs() << "\n";
  }
};

} // namespace
} // namespace partita
