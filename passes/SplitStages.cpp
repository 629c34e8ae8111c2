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

LogicalResult splitModel(tfm::ModelOp model, dist::StrategyAttr strategy) {
  ArrayRef<int64_t> chunkLayers = strategy.getStageLayers().asArrayRef();
  const int64_t chunks = chunkLayers.size(), pp = strategy.getPp();
  Block &body = model.getBodyBlock();
  int64_t numBlocks =
      llvm::count_if(body, [](Operation &op) { return isa<tfm::BlockOp>(op); });
  int64_t total = 0;
  for (int64_t n : chunkLayers)
    total += n;
  if (total != numBlocks)
    return model.emitOpError("the strategy's stage_layers cover ")
           << total << " layers but the model has " << numBlocks;

  // Which chunk each op runs in: ops before the first block with chunk 0,
  // blocks by the cut, ops after the last block with the last chunk.
  // Parameters go with their first user.
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

  OpBuilder builder(model.getContext());
  auto yield = cast<tfm::YieldOp>(body.getTerminator());
  builder.setInsertionPoint(yield);
  Value loss = yield.getValues()[0];
  std::vector<dist::StageOp> stages;
  std::vector<Block *> stageBodies;
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
    stageBodies.push_back(block);
  }

  // Move ops in order; parameters into the chunk of their first user, with
  // a copy in every other chunk that uses them.
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
  // Keep each chunk's parameters ahead of their users.
  for (Block *block : stageBodies)
    for (Operation &op : llvm::make_early_inc_range(*block))
      if (op.hasAttr("dist.tied") && isa<tfm::ParamOp>(op))
        op.moveBefore(&block->front());

  // Values that cross a cut travel by send and receive.
  for (int64_t c = 0; c < chunks; ++c) {
    for (Operation &op : llvm::make_early_inc_range(*stageBodies[c])) {
      for (Value result : op.getResults()) {
        SmallVector<int64_t> readers;
        for (Operation *user : result.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (top && isa<dist::StageOp>(top)) {
            int64_t reader = cast<dist::StageOp>(top).getChunk();
            if (reader != c && !llvm::is_contained(readers, reader))
              readers.push_back(reader);
          }
        }
        for (int64_t reader : readers) {
          if (reader != c + 1)
            return op.emitOpError("is used by pipeline chunk ")
                   << reader << " but produced in chunk " << c
                   << "; only the next chunk can receive it";
          builder.setInsertionPoint(stageBodies[c]->getTerminator());
          dist::SendOp::create(
              builder, op.getLoc(), result,
              dist::PeerAttr::get(builder.getContext(), dist::Peer::next));
          builder.setInsertionPointToStart(stageBodies[reader]);
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
  }
  yield.getValuesMutable().assign(stages.back().getResult(0));
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
