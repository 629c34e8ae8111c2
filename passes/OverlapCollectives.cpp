//===- OverlapCollectives.cpp - dist-overlap-collectives ------------------===//
//
// Forward collectives in async form: each block is list-scheduled so that a
// collective starts as soon as its input is ready and the ops that need its
// result come after every op that does not; a collective with work between
// its start and its first use becomes dist.async + dist.wait.
//
//===----------------------------------------------------------------------===//

#include "dialects/dist/DistDialect.h"
#include "dialects/tfm/TfmDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <map>

namespace partita {
#define GEN_PASS_DEF_DISTOVERLAPCOLLECTIVES
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

using dist::isCollective;

/// Ops that launch work while a collective is in flight (parameters are
/// declarations, collectives run on the communication stream).
bool isCompute(Operation *op) {
  return !isa<tfm::ParamOp>(op) && !isCollective(op);
}

/// Ops the scheduler may reorder: pure, without regions.
bool isMovable(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
         !op->hasTrait<OpTrait::IsTerminator>();
}

struct AxisTally {
  int64_t async = 0;
  int64_t sync = 0;
};

/// A list schedule of `segment` (movable ops, in program order): among the
/// ops whose operands are ready, a collective first (it starts as early as
/// possible), then a branch head (an op reading only the segment's inputs
/// and parameters), then an op that does not read a collective still in
/// flight, and only when nothing else is left the reader that waits for the
/// collective started first (its wait goes as late as possible). Ties go to
/// program order.
SmallVector<Operation *> listSchedule(ArrayRef<Operation *> segment) {
  llvm::SmallPtrSet<Operation *, 32> inSegment(segment.begin(), segment.end());
  // In-flight collectives, by start order.
  llvm::DenseMap<Operation *, size_t> started;
  llvm::DenseSet<Operation *> done;
  SmallVector<Operation *> order;
  // The norms at the head of each branch of a parallel residual.
  auto isRoot = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !def || !inSegment.contains(def) || isa<tfm::ParamOp>(def);
    });
  };
  auto ready = [&](Operation *op) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !def || !inSegment.contains(def) || done.contains(def);
    });
  };
  // The latest start among the in-flight collectives `op` reads, if any:
  // they finish in start order, so `op` waits for that one.
  auto blockedBy = [&](Operation *op) -> std::optional<size_t> {
    std::optional<size_t> last;
    for (Value v : op->getOperands())
      if (auto it = started.find(v.getDefiningOp()); it != started.end())
        last = last ? std::max(*last, it->second) : it->second;
    return last;
  };
  while (order.size() < segment.size()) {
    Operation *collective = nullptr, *root = nullptr, *free = nullptr,
              *blocked = nullptr;
    size_t blockedStart = SIZE_MAX;
    for (Operation *op : segment) {
      if (done.contains(op) || !ready(op))
        continue;
      std::optional<size_t> by = blockedBy(op);
      if (!by && isCollective(op) && !collective)
        collective = op;
      else if (!by && isRoot(op) && !root)
        root = op;
      else if (!by && !free)
        free = op;
      else if (by && *by < blockedStart) {
        blocked = op;
        blockedStart = *by;
      }
    }
    Operation *next = collective ? collective
                      : root     ? root
                      : free     ? free
                                 : blocked;
    assert(next && "an SSA block always has a ready op");
    for (Value v : next->getOperands())
      started.erase(v.getDefiningOp());
    if (isCollective(next))
      started[next] = order.size();
    done.insert(next);
    order.push_back(next);
  }
  return order;
}

/// Whether a collective at `order[start]` first read at `order[end]` (or
/// at the end of the segment) overlaps compute.
bool overlapsCompute(ArrayRef<Operation *> order, size_t start, size_t end) {
  return llvm::any_of(order.slice(start + 1, end - start - 1), isCompute);
}

/// Schedules one segment, which `segmentEnd` follows, and makes the
/// collectives that then overlap compute async, each waited for right
/// before its first reader in the segment (or at its end).
void scheduleSegment(ArrayRef<Operation *> segment, Operation *segmentEnd,
                     std::map<std::string, AxisTally> &tally) {
  SmallVector<Operation *> order = listSchedule(segment);
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(order))
    position[op] = i;
  struct Overlap {
    Operation *collective;
    Operation *firstUse; // nullptr: read after the segment
  };
  SmallVector<Overlap> overlaps;
  for (auto [i, op] : llvm::enumerate(order)) {
    if (!isCollective(op))
      continue;
    size_t end = order.size();
    Operation *firstUse = nullptr;
    for (Operation *user : op->getResult(0).getUsers())
      if (auto it = position.find(user);
          it != position.end() && it->second < end) {
        end = it->second;
        firstUse = user;
      }
    auto axis = op->getAttrOfType<dist::MeshAxisAttr>("axis");
    AxisTally &t = tally[dist::stringifyMeshAxis(axis.getValue()).str()];
    if (!overlapsCompute(order, i, end)) {
      ++t.sync;
      continue;
    }
    ++t.async;
    overlaps.push_back({op, firstUse});
  }
  // Keep the program order unless the schedule overlaps something.
  if (overlaps.empty())
    return;
  for (Operation *op : order)
    op->moveBefore(segmentEnd);
  for (auto [collective, firstUse] : overlaps) {
    OpBuilder b(collective);
    Value result = collective->getResult(0);
    auto start = dist::AsyncOp::create(b, collective->getLoc());
    Block *body = b.createBlock(&start.getBody());
    collective->moveBefore(body, body->end());
    b.setInsertionPointToEnd(body);
    dist::YieldOp::create(b, collective->getLoc(), result);
    b.setInsertionPoint(firstUse ? firstUse : segmentEnd);
    auto wait = dist::WaitOp::create(b, collective->getLoc(), result.getType(),
                                     start.getToken());
    result.replaceUsesWithIf(wait.getResult(), [&](OpOperand &use) {
      return !isa<dist::YieldOp>(use.getOwner());
    });
  }
}

/// Schedules the runs of movable ops between the fixed ones (pipeline sends
/// and receives, blocks, the terminator) in `block`, and recurses into the
/// blocks of its ops.
void scheduleBlock(Block &block, std::map<std::string, AxisTally> &tally) {
  SmallVector<Operation *> segment;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (isMovable(&op)) {
      segment.push_back(&op);
      continue;
    }
    if (!segment.empty())
      scheduleSegment(segment, &op, tally);
    segment.clear();
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        scheduleBlock(inner, tally);
  }
  assert(segment.empty() && "a block ends with its terminator");
}

struct DistOverlapCollectivesPass
    : impl::DistOverlapCollectivesBase<DistOverlapCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    std::map<std::string, AxisTally> tally;
    for (auto model : getOperation().getOps<tfm::ModelOp>())
      scheduleBlock(model.getBodyBlock(), tally);
    if (quiet || tally.empty())
      return;
    llvm::errs() << "overlap in forward:";
    for (const auto &[axis, t] : tally) {
      llvm::errs() << " " << axis << " " << t.async << " of "
                   << t.async + t.sync << " async";
      if (t.sync)
        llvm::errs() << " (" << t.sync
                     << " not: nothing independent of its result runs while "
                        "it is in flight)";
      llvm::errs() << ";";
    }
    llvm::errs() << "\n";
  }
};

} // namespace
} // namespace partita
