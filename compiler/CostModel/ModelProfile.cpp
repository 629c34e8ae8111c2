//===- ModelProfile.cpp - A tfm.model as the cost model sees it -----------===//

#include "compiler/CostModel/ModelProfile.h"
#include "compiler/Analysis/ModelStats.h"
#include "compiler/Analysis/ParallelRoles.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace partita {
namespace {

int64_t width(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape().back();
}

/// Values inside a tensor-parallel region: produced by a column-parallel
/// GEMM or by an op that keeps the split (rotary, attention, activations,
/// per-head norms).
bool isSharded(Value v, const llvm::DenseSet<Operation *> &columnGemms) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false; // block argument: the residual stream
  if (isa<tfm::RmsNormOp, tfm::LayerNormOp>(def))
    return isSharded(def->getOperand(0), columnGemms);
  return columnGemms.contains(def) ||
         isa<tfm::RotaryOp, tfm::AttentionOp>(def) || tfm::isActivation(def);
}

/// A block's profile, built op by op.
class BlockProfiler {
public:
  LayerProfile run(tfm::BlockOp block);

private:
  /// Counts a value kept for backward once, by where it lives.
  void save(Value v) {
    if (!saved.insert(v).second)
      return;
    (isSharded(v, columnGemms) ? layer.savedSharded : layer.savedBoundary) +=
        width(v);
  }
  /// An elementwise op's memory traffic (parameters aside).
  void traffic(Operation *op);
  void profileLinear(tfm::LinearOp linear);
  void profileAttention(tfm::AttentionOp attention);
  void profileNorm(Operation *norm);
  void markUnreadByBackward(tfm::BlockOp block);
  void findParallelBranches();

  struct Traffic {
    Operation *op;
    double elements;
    bool sharded;
  };
  LayerProfile layer;
  llvm::DenseSet<Operation *> columnGemms;
  llvm::DenseSet<Value> saved;
  SmallVector<Traffic> elementwiseOps;
  SmallVector<Operation *> gemmOps, rowGemms;
  Operation *attentionOp = nullptr;
  /// The spans of norms over tensor-parallel values (a head, or more).
  SmallVector<int64_t> shardedNormSpans;
};

void BlockProfiler::traffic(Operation *op) {
  double elements = 0;
  for (Value v : op->getOperands())
    if (!v.getDefiningOp<tfm::ParamOp>())
      elements += width(v);
  for (Value v : op->getResults())
    elements += width(v);
  bool sharded = isSharded(op->getResult(0), columnGemms);
  (sharded ? layer.shardedTraffic : layer.boundaryTraffic) += elements;
  elementwiseOps.push_back({op, elements, sharded});
}

void BlockProfiler::profileLinear(tfm::LinearOp linear) {
  bool row = isRowParallel(linear);
  gemmOps.push_back(linear);
  if (row)
    rowGemms.push_back(linear);
  auto weight = linear.getWeight().getType();
  // Named after the weight: "layers.3.attn.q.weight" -> "attn.q".
  std::string name = "linear";
  if (auto param = linear.getWeight().getDefiningOp<tfm::ParamOp>()) {
    llvm::StringRef n = param.getParamName();
    n.consume_back(".weight");
    if (n.consume_front("layers."))
      n = n.split('.').second;
    name = n.str();
  }
  bool keyValue = !row && feedsKeyOrValue(linear.getResult());
  layer.gemms.push_back(
      {name, weight.getDimSize(0), weight.getDimSize(1), row, keyValue});
  if (keyValue) {
    layer.keyValueParams += weight.getNumElements();
    if (Value bias = linear.getBias())
      layer.keyValueParams +=
          cast<RankedTensorType>(bias.getType()).getNumElements();
  }
  if (row && linear.getBias()) // added once, after the reduction
    layer.replicatedParams +=
        cast<RankedTensorType>(linear.getBias().getType()).getNumElements();
  if (!row)
    columnGemms.insert(linear);
  save(linear.getInput());
}

void BlockProfiler::profileAttention(tfm::AttentionOp attention) {
  attentionOp = attention;
  layer.heads = attention.getNumHeads();
  layer.kvHeads = attention.getNumKvHeads();
  layer.headDim = width(attention.getQuery()) / layer.heads;
  layer.window = attention.getWindow().value_or(0);
  // Flash-style attention keeps its inputs; its output is kept by the
  // projection that reads it.
  save(attention.getQuery());
  save(attention.getKey());
  save(attention.getValue());
}

void BlockProfiler::profileNorm(Operation *norm) {
  traffic(norm);
  save(norm->getOperand(0));
  if (isSharded(norm->getOperand(0), columnGemms))
    shardedNormSpans.push_back(
        cast<RankedTensorType>(norm->getOperand(1).getType()).getDimSize(0));
  for (Value v : norm->getOperands().drop_front())
    layer.replicatedParams +=
        cast<RankedTensorType>(v.getType()).getNumElements();
}

/// What the backward reads: the values kept for it, and what ops that
/// produce them read. A GEMM outside that adds only to the block's result.
void BlockProfiler::markUnreadByBackward(tfm::BlockOp block) {
  llvm::DenseSet<Operation *> readByBackward;
  for (Operation &op : llvm::reverse(block.getBody().front()))
    if (llvm::any_of(op.getResults(), [&](Value result) {
          return saved.contains(result) ||
                 llvm::any_of(result.getUsers(), [&](Operation *user) {
                   return readByBackward.contains(user);
                 });
        }))
      readByBackward.insert(&op);
  for (auto [gemm, profile] : llvm::zip_equal(gemmOps, layer.gemms))
    profile.unreadByBackward = !readByBackward.contains(gemm);
  for (const Traffic &t : elementwiseOps)
    if (!readByBackward.contains(t.op))
      (t.sharded ? layer.unreadShardedTraffic : layer.unreadBoundaryTraffic) +=
          t.elements;
}

/// Two row-parallel GEMMs neither of which depends on the other: the
/// branches of a parallel residual.
void BlockProfiler::findParallelBranches() {
  if (rowGemms.size() != 2)
    return;
  // The block is isolated from above: its ops' slices stay inside it.
  auto slice = [](Operation *root) {
    BackwardSliceOptions options;
    options.inclusive = true;
    options.omitBlockArguments = true;
    llvm::SetVector<Operation *> ops;
    (void)getBackwardSlice(root, &ops, options);
    return ops;
  };
  llvm::SetVector<Operation *> first = slice(rowGemms[0]),
                               second = slice(rowGemms[1]);
  if (first.contains(rowGemms[1]) || second.contains(rowGemms[0]))
    return;
  for (const llvm::SetVector<Operation *> &ops : {first, second}) {
    LayerProfile::Branch branch;
    for (auto [i, gemm] : llvm::enumerate(gemmOps))
      if (ops.contains(gemm))
        branch.gemms.push_back(i);
    branch.attention = attentionOp && ops.contains(attentionOp);
    layer.parallelBranches.push_back(std::move(branch));
  }
}

LayerProfile BlockProfiler::run(tfm::BlockOp block) {
  block.getBody().walk([&](Operation *op) {
    if (auto param = dyn_cast<tfm::ParamOp>(op))
      layer.params += param.getNumElements();
    else if (auto linear = dyn_cast<tfm::LinearOp>(op))
      profileLinear(linear);
    else if (auto attention = dyn_cast<tfm::AttentionOp>(op))
      profileAttention(attention);
    else if (isa<tfm::RmsNormOp, tfm::LayerNormOp>(op))
      profileNorm(op);
    else if (tfm::isActivation(op)) {
      traffic(op);
      for (Value v : op->getOperands())
        save(v);
    } else if (isa<tfm::AddOp, tfm::RotaryOp>(op))
      traffic(op);
  });
  layer.rowParallelGemms = int64_t(rowGemms.size());
  layer.normSpansHeads = llvm::any_of(
      shardedNormSpans, [&](int64_t span) { return span > layer.headDim; });
  markUnreadByBackward(block);
  findParallelBranches();
  return layer;
}

LayerProfile profileBlock(tfm::BlockOp block) {
  return BlockProfiler().run(block);
}

} // namespace

ModelProfile profileModel(tfm::ModelOp model) {
  ModelProfile p;
  p.name = model.getSymName().str();
  ModelStats stats = computeModelStats(model);
  p.globalBatch = stats.globalBatch;
  p.seqLen = stats.seqLen;
  p.hidden = stats.hiddenSize;
  p.vocab = stats.vocabSize;
  p.numParameters = stats.numParameters;
  p.elementType = stats.elementType;
  if (stats.elementType && stats.elementType.isIntOrFloat())
    p.elementBytes = stats.elementType.getIntOrFloatBitWidth() / 8;

  for (Operation &op : model.getBodyBlock()) {
    if (auto block = dyn_cast<tfm::BlockOp>(op)) {
      p.layers.push_back(profileBlock(block));
    } else if (auto param = dyn_cast<tfm::ParamOp>(op)) {
      bool usedByHead = llvm::any_of(param->getUsers(), [](Operation *u) {
        return isa<tfm::LmHeadOp>(u);
      });
      bool usedByEmbedding = llvm::any_of(param->getUsers(), [](Operation *u) {
        return isa<tfm::EmbeddingOp, tfm::PositionEmbeddingOp>(u);
      });
      if (usedByEmbedding)
        p.embeddingParams += param.getNumElements();
      else if (usedByHead)
        p.headParams += param.getNumElements();
      else
        p.finalNormParams += param.getNumElements();
    }
  }
  return p;
}

} // namespace partita
