//===- PartitionTensors.cpp - dist-partition-tensors ----------------------===//
//
// Global shapes to the local shapes of one rank and one micro-batch, with
// the tensor-parallel collectives Megatron-LM's scheme needs.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/ParallelRoles.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace partita {
#define GEN_PASS_DEF_DISTPARTITIONTENSORS
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim < 0 ? shape.size() + dim : dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

int64_t lastDim(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape().back();
}

class Partitioner {
public:
  Partitioner(tfm::ModelOp model, const ParallelConfig &config)
      : model(model), t(config.tp), mbs(config.microBatchSize),
        sp(config.sequenceParallel && config.tp > 1),
        builder(model.getContext()) {}

  LogicalResult run();

private:
  LogicalResult checkShapes();
  LogicalResult rewrite(Block &block);
  LogicalResult rewriteOp(Operation *op);
  LogicalResult rewriteBlock(tfm::BlockOp block);
  void rewriteLinear(tfm::LinearOp linear);
  void rewriteEmbedding(tfm::EmbeddingOp embedding);
  void rewritePositionEmbedding(tfm::PositionEmbeddingOp position);
  void rewriteLmHead(tfm::LmHeadOp head);
  void rewriteCrossEntropy(tfm::CrossEntropyOp loss);
  void keepFirstOperandShape(Operation *op);
  /// The parts a column-parallel projection's output is cut into: t, or
  /// the key/value heads when tp exceeds them.
  int64_t columnParts(tfm::LinearOp linear);
  void shard(Value param, int64_t dim, int64_t parts);
  /// Sets `v`'s batch dimension to the micro-batch size.
  void localBatch(Value v) { v.setType(withDim(v.getType(), 0, mbs)); }
  dist::MeshAxisAttr tpAxis() {
    return dist::MeshAxisAttr::get(builder.getContext(), dist::MeshAxis::tp);
  }
  Value allReduce(Value v, Location loc) {
    return dist::AllReduceOp::create(builder, loc, v.getType(), v, tpAxis());
  }
  /// Sequence parallelism: a row-parallel result is reduced and scattered
  /// along the sequence; otherwise all-reduced.
  Value reduce(Value v, Location loc) {
    if (!sp)
      return allReduce(v, loc);
    Type shard = withDim(v.getType(), 1,
                         cast<RankedTensorType>(v.getType()).getDimSize(1) / t);
    return dist::ReduceScatterOp::create(builder, loc, shard, v, tpAxis(),
                                         builder.getI64IntegerAttr(1));
  }
  /// The full sequence of a sequence-sharded value, gathered once and
  /// shared by every projection that reads it.
  Value gathered(Value shard) {
    auto [it, inserted] = gathers.try_emplace(shard, Value());
    if (!inserted)
      return it->second;
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(shard);
    Type full =
        withDim(shard.getType(), 1,
                cast<RankedTensorType>(shard.getType()).getDimSize(1) * t);
    it->second =
        dist::AllGatherOp::create(builder, shard.getLoc(), full, shard,
                                  tpAxis(), builder.getI64IntegerAttr(1));
    return it->second;
  }

  tfm::ModelOp model;
  int64_t t, mbs;
  bool sp;
  llvm::DenseMap<Value, Value> gathers;
  OpBuilder builder;
  int64_t kvHeads = 0;
  /// The LM head's (unpadded) vocabulary, for the loss.
  int64_t vocab = 0;
};

int64_t Partitioner::columnParts(tfm::LinearOp linear) {
  if (kvHeads && kvHeads < t && feedsKeyOrValue(linear.getResult()))
    return kvHeads;
  return t;
}

void Partitioner::shard(Value param, int64_t dim, int64_t parts) {
  auto op = param.getDefiningOp<tfm::ParamOp>();
  if (!op || parts == 1 || op->hasAttr("dist.sharding"))
    return;
  auto type = cast<RankedTensorType>(param.getType());
  int64_t size = type.getDimSize(dim);
  // Only the vocabulary can be uneven (checkShapes): pad it.
  if (size % parts != 0)
    op->setAttr("dist.padded_from", builder.getI64IntegerAttr(size));
  param.setType(withDim(type, dim, (size + parts - 1) / parts));
  op->setAttr("dist.sharding",
              dist::ShardingAttr::get(builder.getContext(), dist::MeshAxis::tp,
                                      dim, parts));
}

/// Everything tensor parallelism splits must divide by t, before anything
/// changes.
LogicalResult Partitioner::checkShapes() {
  auto tokens = cast<RankedTensorType>(model.getTokens().getType());
  if (tokens.getDimSize(0) % mbs != 0)
    return model.emitOpError("micro-batch size ")
           << mbs << " does not divide the batch of " << tokens;
  if (sp && tokens.getDimSize(1) % t != 0)
    return model.emitOpError("sequence parallelism: tp=")
           << t << " does not divide the sequence length "
           << tokens.getDimSize(1);
  WalkResult result = model.walk([&](Operation *op) -> WalkResult {
    if (auto attention = dyn_cast<tfm::AttentionOp>(op)) {
      int64_t heads = attention.getNumHeads();
      int64_t kv = attention.getNumKvHeads();
      kvHeads = kv;
      if (heads % t != 0)
        return attention.emitOpError("tp=")
               << t << " does not divide the " << heads << " heads";
      if (kv % t != 0 && t % kv != 0)
        return attention.emitOpError("tp=")
               << t << " neither divides nor is a multiple of the " << kv
               << " key/value heads";
    } else if (auto linear = dyn_cast<tfm::LinearOp>(op)) {
      int64_t width = isRowParallel(linear) ? lastDim(linear.getInput())
                                            : lastDim(linear.getResult());
      if (width % t != 0)
        return linear.emitOpError("tp=")
               << t << " does not divide the width " << width;
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult Partitioner::run() {
  if (failed(checkShapes()))
    return failure();
  Block &body = model.getBodyBlock();
  for (BlockArgument arg : body.getArguments())
    localBatch(arg);
  return rewrite(body);
}

LogicalResult Partitioner::rewrite(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block))
    if (failed(rewriteOp(&op)))
      return failure();
  return success();
}

LogicalResult Partitioner::rewriteOp(Operation *op) {
  builder.setInsertionPointAfter(op);
  auto done = [](auto) { return success(); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tfm::BlockOp block) { return rewriteBlock(block); })
      // Parameters are shaped by their users.
      .Case<tfm::ParamOp, tfm::YieldOp>(done)
      .Case([&](tfm::LinearOp linear) {
        rewriteLinear(linear);
        return success();
      })
      .Case([&](tfm::RotaryOp rotary) {
        Value input = rotary.getInput();
        int64_t headDim = lastDim(rotary.getResult()) / rotary.getNumHeads();
        rotary.setNumHeads(lastDim(input) / headDim);
        rotary.getResult().setType(cast<RankedTensorType>(input.getType()));
        return success();
      })
      .Case([&](tfm::AttentionOp attention) {
        int64_t heads = attention.getNumHeads();
        int64_t headDim = lastDim(attention.getResult()) / heads;
        attention.setNumHeads(lastDim(attention.getQuery()) / headDim);
        attention.setNumKvHeads(lastDim(attention.getKey()) / headDim);
        attention.getResult().setType(attention.getQuery().getType());
        return success();
      })
      .Case([&](tfm::EmbeddingOp e) {
        rewriteEmbedding(e);
        return success();
      })
      .Case([&](tfm::PositionEmbeddingOp position) {
        rewritePositionEmbedding(position);
        return success();
      })
      .Case([&](tfm::LmHeadOp head) {
        rewriteLmHead(head);
        return success();
      })
      .Case([&](tfm::CrossEntropyOp loss) {
        rewriteCrossEntropy(loss);
        return success();
      })
      .Default([&](Operation *other) {
        keepFirstOperandShape(other);
        return success();
      });
}

LogicalResult Partitioner::rewriteBlock(tfm::BlockOp block) {
  Block &body = block.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), block.getInputs()))
    arg.setType(input.getType());
  if (failed(rewrite(body)))
    return failure();
  for (auto [result, value] :
       llvm::zip(block.getResults(), body.getTerminator()->getOperands()))
    result.setType(value.getType());
  return success();
}

void Partitioner::rewriteLinear(tfm::LinearOp linear) {
  Value result = linear.getResult();
  result.setType(withDim(result.getType(), 0, mbs));
  if (t == 1)
    return;
  if (!isRowParallel(linear)) {
    if (sp)
      linear.getInputMutable().assign(gathered(linear.getInput()));
    int64_t parts = columnParts(linear);
    shard(linear.getWeight(), 0, parts);
    if (linear.getBias())
      shard(linear.getBias(), 0, parts);
    result.setType(withDim(result.getType(), -1, lastDim(result) / parts));
    return;
  }
  // Row-parallel: partial sums, reduced over tp, then the bias once.
  shard(linear.getWeight(), 1, t);
  Value bias = linear.getBias();
  if (bias)
    linear.getBiasMutable().clear();
  Location loc = linear.getLoc();
  Value reduced = reduce(result, loc);
  Value out =
      bias ? tfm::BiasAddOp::create(builder, loc, reduced, bias).getResult()
           : reduced;
  result.replaceAllUsesExcept(out, reduced.getDefiningOp());
}

void Partitioner::rewriteEmbedding(tfm::EmbeddingOp embedding) {
  Value result = embedding.getResult();
  result.setType(withDim(result.getType(), 0, mbs));
  if (t == 1)
    return;
  shard(embedding.getTable(), 0, t);
  Location loc = embedding.getLoc();
  auto local = dist::VocabEmbeddingOp::create(
      builder, loc, result.getType(), embedding.getTable(),
      embedding.getTokens(), tpAxis(), embedding.getScaleAttr());
  // Learned positions are added to the full sequence before it is split.
  bool positionsFollow = llvm::any_of(result.getUsers(), [](Operation *u) {
    return isa<tfm::PositionEmbeddingOp>(u);
  });
  Value out = positionsFollow ? allReduce(local, loc) : reduce(local, loc);
  result.replaceAllUsesWith(out);
  embedding.erase();
}

void Partitioner::rewritePositionEmbedding(tfm::PositionEmbeddingOp position) {
  Value result = position.getResult();
  result.setType(cast<RankedTensorType>(position.getInput().getType()));
  if (!sp)
    return;
  Type shard =
      withDim(result.getType(), 1,
              cast<RankedTensorType>(result.getType()).getDimSize(1) / t);
  auto slice =
      dist::ShardSliceOp::create(builder, position.getLoc(), shard, result,
                                 tpAxis(), builder.getI64IntegerAttr(1));
  result.replaceAllUsesExcept(slice, slice);
}

void Partitioner::rewriteLmHead(tfm::LmHeadOp head) {
  if (sp)
    head.getInputMutable().assign(gathered(head.getInput()));
  shard(head.getWeight(), 0, t);
  Value result = head.getResult();
  vocab = lastDim(result);
  result.setType(
      withDim(withDim(result.getType(), 0, mbs), -1, (vocab + t - 1) / t));
}

void Partitioner::rewriteCrossEntropy(tfm::CrossEntropyOp loss) {
  if (t == 1)
    return;
  IntegerAttr padded =
      vocab % t != 0 ? builder.getI64IntegerAttr(vocab) : IntegerAttr();
  auto local = dist::VocabCrossEntropyOp::create(
      builder, loss.getLoc(), loss.getType(), loss.getLogits(),
      loss.getLabels(), tpAxis(), padded);
  loss.getResult().replaceAllUsesWith(local.getResult());
  loss.erase();
}

/// Norms, adds, activations: the shape of their first operand (the batch
/// is already local there).
void Partitioner::keepFirstOperandShape(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() < 1)
    return;
  if (isa<tfm::RmsNormOp, tfm::LayerNormOp, tfm::AddOp, tfm::BiasAddOp,
          dist::AllReduceOp>(op) ||
      tfm::isActivation(op))
    op->getResult(0).setType(op->getOperand(0).getType());
}

struct DistPartitionTensorsPass
    : impl::DistPartitionTensorsBase<DistPartitionTensorsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::StrategyAttr strategy =
        requireStrategy(module, "dist-partition-tensors");
    if (!strategy)
      return signalPassFailure();
    ParallelConfig config = fromStrategyAttr(strategy);
    WalkResult result = module.walk([&](tfm::ModelOp model) {
      if (failed(Partitioner(model, config).run()))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace partita
