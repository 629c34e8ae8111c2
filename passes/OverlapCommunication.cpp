//===- OverlapCommunication.cpp - exec-overlap-communication --------------===//

#include "compiler/Export/PlanExport.h"
#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace partita {
#define GEN_PASS_DEF_EXECOVERLAPCOMMUNICATION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Whether `op` must stay on its side of collective `c`: it writes c's
/// input, or reads or writes c's output, or it is the wait that makes one
/// of them ready.
bool conflicts(Operation *op, exec::CollectiveOp c) {
  if (auto wait = dyn_cast<exec::WaitOp>(op))
    return wait.getBuffer() == c.getInput() ||
           wait.getBuffer() == c.getOutput();
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

/// Whether async collective `c` is waited for after `op`: its group's comm
/// stream may run a collective needed at `op` before it.
bool neededLater(exec::CollectiveOp c, Operation *op) {
  if (!c.getAsync())
    return false;
  for (Operation *next = c->getNextNode(); next; next = next->getNextNode())
    if (auto wait = dyn_cast<exec::WaitOp>(next);
        wait && wait.getBuffer() == c.getOutput())
      return op->isBeforeInBlock(wait);
  return false;
}

/// Bytes a collective moves: the full buffer (the input of a reduction, the
/// output of a gather).
double collectiveBytes(exec::CollectiveOp c) {
  auto program = c->getParentOfType<exec::ProgramOp>();
  return tensorBytes(
      program
          .lookupBuffer(c.getKind() == exec::CollectiveKind::all_gather
                            ? c.getOutputAttr().getAttr()
                            : c.getInputAttr().getAttr())
          .getTensorType());
}

/// Whether `c` gathers a ZeRO-3 parameter for the layer that reads it.
bool gathersParameter(exec::CollectiveOp c) {
  return c.getKind() == exec::CollectiveKind::all_gather &&
         c->getParentOfType<exec::ProgramOp>()
                 .lookupBuffer(c.getOutputAttr().getAttr())
                 .getKind() == exec::BufferKind::param_gathered;
}

/// Groups data-parallel collectives of one kind that follow each other in a
/// phase into buckets of at most `limit` bytes: the members move down to
/// the last one, so that a bucket starts when all its inputs are ready, and
/// carry a common `bucket` number. A launch that reads a member's output or
/// writes its input in between closes the bucket, as does any other
/// collective, send or receive. ZeRO-3's parameter gathers have no limit:
/// a layer needs all of them before it runs, so its gathers are one bucket
/// (as FSDP gathers a layer's flat parameters), and at large data-parallel
/// widths each collective's latency would cost more than the bytes.
void formBuckets(exec::PhaseOp phase, double limit, int64_t &nextBucket) {
  SmallVector<exec::CollectiveOp> bucket;
  double bytes = 0;
  bool bucketGathersParameters = false;
  auto close = [&] {
    if (bucket.size() > 1) {
      Operation *last = bucket.back();
      for (exec::CollectiveOp member : ArrayRef(bucket).drop_back())
        member->moveBefore(last);
      for (exec::CollectiveOp member : bucket)
        member->setAttr(
            "bucket", IntegerAttr::get(IntegerType::get(phase.getContext(), 64),
                                       nextBucket));
      ++nextBucket;
    }
    bucket.clear();
    bytes = 0;
  };
  for (Operation &op : llvm::make_early_inc_range(phase.getBody().front())) {
    auto c = dyn_cast<exec::CollectiveOp>(op);
    if (c && c.getGroup() == exec::Group::dp) {
      bool parameter = gathersParameter(c);
      double moved = collectiveBytes(c);
      if (!bucket.empty() &&
          (c.getKind() != bucket.front().getKind() ||
           c.getLastMicroBatch() != bucket.front().getLastMicroBatch() ||
           parameter != bucketGathersParameters ||
           (!parameter && bytes + moved > limit)))
        close();
      bucketGathersParameters = parameter;
      bucket.push_back(c);
      bytes += moved;
      continue;
    }
    if (isa<exec::CollectiveOp, exec::SendOp, exec::RecvOp>(op) ||
        llvm::any_of(bucket,
                     [&](exec::CollectiveOp m) { return conflicts(&op, m); }))
      close();
  }
  close();
}

/// Makes a phase's collectives async: each starts as early and is waited
/// for as late as its data and its group's order allow.
class PhaseOverlapper {
public:
  PhaseOverlapper(exec::PhaseOp phase, std::map<std::string, GroupTally> &tally,
                  SmallVectorImpl<exec::CollectiveOp> &waitInStep)
      : phase(phase), tally(tally), waitInStep(waitInStep),
        b(phase.getContext()),
        direction(phase.getKind() == exec::PhaseKind::backward ? 1 : -1) {}

  void run();

private:
  void overlap(exec::CollectiveOp c);
  SmallVector<exec::CollectiveOp> bucketOf(exec::CollectiveOp c) {
    if (auto id = c->getAttrOfType<IntegerAttr>("bucket"))
      return buckets[id.getInt()];
    return {c};
  }
  Operation *latestEnd(exec::CollectiveOp x, bool lastMicroBatch) const;
  Operation *neededBy(exec::CollectiveOp c, Operation *end,
                      bool lastMicroBatch);
  Operation *earliestStart(exec::CollectiveOp c, Operation *needed);
  bool passable(Operation *prev, exec::CollectiveOp c, Operation *needed,
                std::optional<int64_t> consumer);

  exec::PhaseOp phase;
  std::map<std::string, GroupTally> &tally;
  SmallVectorImpl<exec::CollectiveOp> &waitInStep;
  OpBuilder b;
  /// Forward walks the blocks up, backward down.
  int64_t direction;
  /// A bucket starts when the inputs of all its members are ready.
  std::map<int64_t, SmallVector<exec::CollectiveOp>> buckets;
  /// Per bucket, the first launch that needs one of its members.
  std::map<int64_t, Operation *> bucketNeeded;
};

void PhaseOverlapper::run() {
  SmallVector<exec::CollectiveOp> collectives;
  for (auto c : phase.getBody().front().getOps<exec::CollectiveOp>())
    collectives.push_back(c);
  for (exec::CollectiveOp c : collectives)
    if (auto id = c->getAttrOfType<IntegerAttr>("bucket"))
      buckets[id.getInt()].push_back(c);
  for (exec::CollectiveOp c : collectives)
    overlap(c);
}

/// Latest end: the first launch that needs it done, but no later than the
/// block after next: a collective holds its input until its wait (a
/// gradient, say, that could be freed once reduced), and the memory plan
/// keeps it live until then. A last-micro-batch reduction is needed in the
/// step phase only.
Operation *PhaseOverlapper::latestEnd(exec::CollectiveOp x,
                                      bool lastMicroBatch) const {
  std::optional<int64_t> block = exec::launchLayer(x);
  for (Operation *prev = x->getPrevNode(); prev && !block;
       prev = prev->getPrevNode())
    block = exec::launchLayer(prev);
  auto beyondNextBlock = [&](Operation *op) {
    std::optional<int64_t> layer = exec::launchLayer(op);
    return block && layer && (*layer - *block) * -direction >= 2;
  };
  Operation *end = x->getNextNode();
  while (!lastMicroBatch && end && !conflicts(end, x) && !beyondNextBlock(end))
    end = end->getNextNode();
  return end;
}

/// A bucket runs as one collective: it starts in time for the member
/// needed first (a ZeRO-3 layer's bias gathers, which its backward does
/// not read, go with its weights), found before any member moves.
Operation *PhaseOverlapper::neededBy(exec::CollectiveOp c, Operation *end,
                                     bool lastMicroBatch) {
  auto id = c->getAttrOfType<IntegerAttr>("bucket");
  if (!id)
    return end;
  auto [it, first] = bucketNeeded.try_emplace(id.getInt(), end);
  if (first)
    for (exec::CollectiveOp m : bucketOf(c))
      if (Operation *e = m == c ? nullptr : latestEnd(m, lastMicroBatch);
          e && (!it->second || e->isBeforeInBlock(it->second)))
        it->second = e;
  return it->second;
}

/// Whether `c`, needed by `needed` (in block `consumer`), may start before
/// `prev`. Each group has a comm stream of its own, so it passes other
/// groups' collectives as it passes waits (a ZeRO-3 gather passes the
/// block's tensor-parallel collectives); within its group it may go ahead
/// of collectives needed after it (gradient reductions waited for at the
/// end of the phase), not of those needed before. One that no block uses
/// starts only behind kernels. Sends and receives keep their place.
bool PhaseOverlapper::passable(Operation *prev, exec::CollectiveOp c,
                               Operation *needed,
                               std::optional<int64_t> consumer) {
  if (isa<exec::SendOp, exec::RecvOp>(prev) ||
      llvm::any_of(bucketOf(c),
                   [&](exec::CollectiveOp m) { return conflicts(prev, m); }))
    return false;
  if (auto other = dyn_cast<exec::CollectiveOp>(prev))
    return needed && other.getGroup() != exec::Group::tied &&
           other.getGroup() != exec::Group::world &&
           (llvm::all_of(
                bucketOf(other),
                [&](exec::CollectiveOp m) { return neededLater(m, needed); }) ||
            (other.getGroup() != c.getGroup() && consumer)) &&
           !(c->hasAttr("bucket") &&
             other->getAttr("bucket") == c->getAttr("bucket"));
  if (isa<exec::WaitOp>(prev))
    return consumer.has_value();
  // A collective used by block L may start during the block before it in
  // the phase's order (L - 1 forward, L + 1 backward), but no earlier: one
  // block of prefetch.
  std::optional<int64_t> layer = exec::launchLayer(prev);
  return !consumer ||
         (layer && (*layer == *consumer || *layer == *consumer + direction));
}

/// Earliest start: up past the launches it may pass.
Operation *PhaseOverlapper::earliestStart(exec::CollectiveOp c,
                                          Operation *needed) {
  std::optional<int64_t> consumer =
      needed ? exec::launchLayer(needed) : std::nullopt;
  Operation *start = c;
  for (Operation *prev = c->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (!passable(prev, c, needed, consumer))
      break;
    start = prev;
  }
  return start;
}

void PhaseOverlapper::overlap(exec::CollectiveOp c) {
  GroupTally &t = tally[exec::stringifyGroup(c.getGroup()).str()];
  // Waited for in the next step's forward, or made async with its wait
  // already placed (dist-overlap-collectives).
  if (c.getAsync()) {
    ++t.async;
    return;
  }
  if (c.getGroup() == exec::Group::tied || c.getGroup() == exec::Group::world) {
    ++t.syncWhy["its group spans ranks of other programs"];
    return;
  }
  bool lastMicroBatch = c.getLastMicroBatch();
  Operation *end = latestEnd(c, lastMicroBatch);
  Operation *start = earliestStart(c, neededBy(c, end, lastMicroBatch));
  if (!lastMicroBatch && start == c.getOperation() && end == c->getNextNode()) {
    ++t.syncWhy[end ? "the launch after it needs its result at once"
                    : "nothing follows it in its phase"];
    return;
  }
  ++t.async;
  if (start != c.getOperation())
    c->moveBefore(start);
  c.setAsync(true);
  if (lastMicroBatch) {
    waitInStep.push_back(c);
    return;
  }
  if (end)
    b.setInsertionPoint(end);
  else
    b.setInsertionPointToEnd(&phase.getBody().front());
  exec::WaitOp::create(b, c.getLoc(), c.getOutputAttr());
}

void overlapPhase(exec::PhaseOp phase, std::map<std::string, GroupTally> &tally,
                  SmallVectorImpl<exec::CollectiveOp> &waitInStep) {
  PhaseOverlapper(phase, tally, waitInStep).run();
}

/// ZeRO-1/2 gather the parameters after AdamW updates each rank's slice.
/// Nothing reads them before the next step's forward, so each gather is
/// carried there: `next_step`, waited for in the first micro-batch's run
/// of the forward phase that reads the parameter first, right before that
/// read. The step phase then ends without waiting for them, and the gathers
/// overlap the next step's first layers.
void carryGathersToNextStep(exec::ProgramOp program, exec::PhaseOp step,
                            ArrayRef<exec::PhaseOp> phases) {
  // The first forward launch that reads each buffer, in program order.
  llvm::StringMap<Operation *> firstReads;
  for (exec::PhaseOp phase : phases)
    if (phase.getKind() == exec::PhaseKind::forward)
      for (Operation &op : phase.getBody().front()) {
        SmallVector<StringRef> reads, writes;
        exec::getLaunchAccesses(&op, reads, writes);
        for (StringRef read : reads)
          firstReads.try_emplace(read, &op);
      }
  for (auto c : step.getBody().front().getOps<exec::CollectiveOp>()) {
    exec::BufferOp param = program.lookupBuffer(c.getOutputAttr().getAttr());
    if (c.getKind() != exec::CollectiveKind::all_gather ||
        c.getGroup() != exec::Group::dp || c.getInput() != c.getOutput() ||
        !param || param.getKind() != exec::BufferKind::param)
      continue;
    Operation *firstRead = firstReads.lookup(c.getOutput());
    if (!firstRead)
      continue;
    c.setAsync(true);
    c.setNextStep(true);
    OpBuilder b(firstRead);
    exec::WaitOp::create(b, c.getLoc(), c.getOutputAttr(), b.getUnitAttr());
  }
}

struct ExecOverlapCommunicationPass
    : impl::ExecOverlapCommunicationBase<ExecOverlapCommunicationPass> {
  using Base::Base;

  void runOnOperation() override {
    if (bucketMb <= 0) {
      getOperation().emitError("exec-overlap-communication: bucket-mb must be "
                               "positive, got ")
          << bucketMb;
      return signalPassFailure();
    }
    const double bucketBytes = bucketMb * 1048576.0;
    std::map<std::string, GroupTally> tally;
    int64_t nextBucket = 0;
    for (auto program : getOperation().getOps<exec::ProgramOp>()) {
      // The step phase last: it waits for the gradient reductions that the
      // last micro-batch's backward starts.
      SmallVector<exec::PhaseOp> phases, steps;
      for (auto phase : program.getBody().front().getOps<exec::PhaseOp>())
        (phase.getKind() == exec::PhaseKind::step ? steps : phases)
            .push_back(phase);
      SmallVector<exec::CollectiveOp> waitInStep;
      for (exec::PhaseOp phase : phases) {
        formBuckets(phase, bucketBytes, nextBucket);
        overlapPhase(phase, tally, waitInStep);
      }
      for (exec::PhaseOp step : steps) {
        OpBuilder b(step.getContext());
        Block &body = step.getBody().front();
        for (exec::CollectiveOp c : waitInStep) {
          Operation *use = nullptr;
          for (Operation &op : body)
            if (!isa<exec::WaitOp>(op) && conflicts(&op, c)) {
              use = &op;
              break;
            }
          if (use)
            b.setInsertionPoint(use);
          else
            b.setInsertionPointToEnd(&body);
          exec::WaitOp::create(b, c.getLoc(), c.getOutputAttr());
        }
        formBuckets(step, bucketBytes, nextBucket);
        carryGathersToNextStep(program, step, phases);
        overlapPhase(step, tally, waitInStep);
      }
    }
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
