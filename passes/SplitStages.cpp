//===- SplitStages.cpp - dist-split-stages --------------------------------===//

#include "compiler/CostModel/ParallelConfig.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace partita {
#define GEN_PASS_DEF_DISTSPLITSTAGES
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Which chunk each op runs in: ops before the first block with chunk 0,
/// blocks by the cut, ops after the last block with the last chunk.
/// Parameters are left out: they go with their first user.
llvm::DenseMap<Operation *, int64_t>
chunksOfOps(Block &body, ArrayRef<int64_t> chunkLayers, int64_t numBlocks) {
  const int64_t chunks = chunkLayers.size();
  llvm::DenseMap<Operation *, int64_t> chunkOf;
  int64_t blockIndex = 0, chunk = 0, inChunk = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<tfm::BlockOp>(op)) {
      while (inChunk == chunkLayers[chunk]) {
        ++chunk;
        inChunk = 0;
      }
      chunkOf[&op] = chunk;
      ++inChunk;
      ++blockIndex;
    } else if (!isa<tfm::ParamOp>(op)) {
      chunkOf[&op] = blockIndex == numBlocks ? chunks - 1 : chunk;
    }
  }
  return chunkOf;
}

/// An empty dist.stage per chunk, before the model's yield; the last one
/// returns the loss.
std::vector<dist::StageOp> createStages(OpBuilder &builder, tfm::ModelOp model,
                                        int64_t chunks, int64_t pp) {
  auto yield = cast<tfm::YieldOp>(model.getBodyBlock().getTerminator());
  builder.setInsertionPoint(yield);
  Value loss = yield.getValues()[0];
  std::vector<dist::StageOp> stages;
  for (int64_t c = 0; c < chunks; ++c) {
    TypeRange results =
        c == chunks - 1 ? TypeRange(loss.getType()) : TypeRange();
    auto stage = dist::StageOp::create(builder, model.getLoc(), results,
                                       builder.getI64IntegerAttr(c),
                                       builder.getI64IntegerAttr(c % pp));
    Block *block = builder.createBlock(&stage.getBody());
    builder.setInsertionPointToEnd(block);
    dist::StageReturnOp::create(builder, model.getLoc(),
                                c == chunks - 1 ? ValueRange(loss)
                                                : ValueRange());
    builder.setInsertionPoint(yield);
    stages.push_back(stage);
  }
  return stages;
}

/// Moves the model's ops into their stages, in order; parameters into the
/// chunk of their first user, with a copy in every other chunk that uses
/// them, ahead of their users.
void moveIntoStages(OpBuilder &builder, Block &body,
                    llvm::DenseMap<Operation *, int64_t> &chunkOf,
                    llvm::ArrayRef<Block *> stageBodies) {
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isa<dist::StageOp>(op))
      ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto param = dyn_cast<tfm::ParamOp>(op)) {
      llvm::SmallSetVector<int64_t, 4> users;
      for (Operation *user : param->getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        users.insert(chunkOf.lookup(top));
      }
      // A parameter nothing reads stays in the first chunk, as one inside
      // a block stays with the block.
      ArrayRef<int64_t> readers = users.getArrayRef();
      chunkOf[op] = readers.empty() ? 0 : readers.front();
      for (int64_t other : readers.empty() ? readers : readers.drop_front()) {
        builder.setInsertionPoint(stageBodies[other]->getTerminator());
        Operation *copy = builder.clone(*op);
        copy->setAttr("dist.tied", builder.getUnitAttr());
        op->setAttr("dist.tied", builder.getUnitAttr());
        param.getResult().replaceUsesWithIf(
            copy->getResult(0), [&](OpOperand &use) {
              Operation *top = body.findAncestorOpInBlock(*use.getOwner());
              return chunkOf.lookup(top) == other;
            });
      }
    }
    op->moveBefore(stageBodies[chunkOf[op]]->getTerminator());
  }
  for (Block *block : stageBodies)
    for (Operation &op : llvm::make_early_inc_range(*block))
      if (op.hasAttr("dist.tied") && isa<tfm::ParamOp>(op))
        op.moveBefore(&block->front());
}

/// Values that cross a cut travel by send and receive; only to the next
/// chunk.
LogicalResult connectStages(OpBuilder &builder, Block &body,
                            llvm::MutableArrayRef<dist::StageOp> stages) {
  auto chunkReading = [&](Operation *user) -> std::optional<int64_t> {
    Operation *top = body.findAncestorOpInBlock(*user);
    if (top && isa<dist::StageOp>(top))
      return cast<dist::StageOp>(top).getChunk();
    return std::nullopt;
  };
  for (auto [c, stage] : llvm::enumerate(stages)) {
    Block *stageBody = &stage.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(*stageBody))
      for (Value result : op.getResults()) {
        SmallVector<int64_t> readers;
        for (Operation *user : result.getUsers())
          if (std::optional<int64_t> reader = chunkReading(user);
              reader && *reader != int64_t(c) &&
              !llvm::is_contained(readers, *reader))
            readers.push_back(*reader);
        for (int64_t reader : readers) {
          if (reader != int64_t(c) + 1)
            return op.emitOpError("is used by pipeline chunk ")
                   << reader << " but produced in chunk " << c
                   << "; only the next chunk can receive it";
          builder.setInsertionPoint(stageBody->getTerminator());
          dist::SendOp::create(
              builder, op.getLoc(), result,
              dist::PeerAttr::get(builder.getContext(), dist::Peer::next));
          builder.setInsertionPointToStart(&stages[reader].getBody().front());
          auto recv = dist::RecvOp::create(
              builder, op.getLoc(), result.getType(),
              dist::PeerAttr::get(builder.getContext(), dist::Peer::prev));
          result.replaceUsesWithIf(recv.getResult(), [&](OpOperand &use) {
            Operation *top = body.findAncestorOpInBlock(*use.getOwner());
            return top == stages[reader].getOperation();
          });
        }
      }
  }
  return success();
}

LogicalResult splitModel(tfm::ModelOp model, dist::StrategyAttr strategy) {
  ArrayRef<int64_t> chunkLayers = strategy.getStageLayers().asArrayRef();
  Block &body = model.getBodyBlock();
  int64_t numBlocks =
      llvm::count_if(body, [](Operation &op) { return isa<tfm::BlockOp>(op); });
  int64_t total = 0;
  for (int64_t n : chunkLayers)
    total += n;
  if (total != numBlocks)
    return model.emitOpError("the strategy's stage_layers cover ")
           << total << " layers but the model has " << numBlocks;
  llvm::DenseMap<Operation *, int64_t> chunkOf =
      chunksOfOps(body, chunkLayers, numBlocks);
  OpBuilder builder(model.getContext());
  std::vector<dist::StageOp> stages = createStages(
      builder, model, int64_t(chunkLayers.size()), strategy.getPp());
  SmallVector<Block *> stageBodies;
  for (dist::StageOp stage : stages)
    stageBodies.push_back(&stage.getBody().front());
  moveIntoStages(builder, body, chunkOf, stageBodies);
  if (failed(connectStages(builder, body, stages)))
    return failure();
  cast<tfm::YieldOp>(body.getTerminator())
      .getValuesMutable()
      .assign(stages.back().getResult(0));
  return success();
}

struct DistSplitStagesPass : impl::DistSplitStagesBase<DistSplitStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::StrategyAttr strategy = requireStrategy(module, "dist-split-stages");
    if (!strategy)
      return signalPassFailure();
    WalkResult result = module.walk([&](tfm::ModelOp model) {
      return failed(splitModel(model, strategy)) ? WalkResult::interrupt()
                                                 : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace partita
