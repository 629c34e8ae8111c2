//===- BuildBackward.cpp - exec-build-backward ----------------------------===//
//
// Reverse-mode differentiation of each forward phase, the gradient
// reductions of the strategy (tensor, sequence and data parallelism, ZeRO,
// tied weights) and the optimizer step.
//
//===----------------------------------------------------------------------===//

#include "compiler/CostModel/ParallelConfig.h"
#include "dialects/exec/ExecDialect.h"
#include "partita/plan/Kernels.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace partita {
#define GEN_PASS_DEF_EXECBUILDBACKWARD
#include "passes/Passes.h.inc"

using namespace mlir;
using exec::BufferKind;
using exec::CollectiveKind;
using exec::Group;

namespace {

SmallVector<StringAttr> refs(ArrayAttr array) {
  SmallVector<StringAttr> out;
  for (Attribute a : array)
    out.push_back(cast<FlatSymbolRefAttr>(a).getAttr());
  return out;
}

/// The buffers launch `op` reads (an accumulated output included) and
/// writes; a wait reads and writes its collective's output, which it
/// completes.
std::pair<SmallVector<StringAttr>, SmallVector<StringAttr>>
launchBuffers(Operation &op) {
  SmallVector<StringAttr> ins, outs;
  if (auto k = dyn_cast<exec::KernelOp>(op)) {
    ins = refs(k.getIns());
    outs = refs(k.getOuts());
    if (std::optional<ArrayRef<bool>> adds = k.getAccumulate())
      for (auto [out, add] : llvm::zip(outs, *adds))
        if (add)
          ins.push_back(out);
  } else if (auto c = dyn_cast<exec::CollectiveOp>(op)) {
    ins = {c.getInputAttr().getAttr()};
    outs = {c.getOutputAttr().getAttr()};
    if (c.getAccumulate())
      ins.push_back(outs.front());
  } else if (auto s = dyn_cast<exec::SendOp>(op)) {
    ins = {s.getBufferAttr().getAttr()};
  } else if (auto w = dyn_cast<exec::WaitOp>(op)) {
    ins = outs = {w.getBufferAttr().getAttr()};
  }
  return {ins, outs};
}

class BackwardBuilder {
public:
  /// `gradientElement`: the dtype of parameter gradients, or null for the
  /// parameter's own.
  BackwardBuilder(exec::ProgramOp program, const ParallelConfig &config,
                  int64_t seqLen, Type gradientElement)
      : program(program), config(config), seqLen(seqLen),
        zero(config.dp > 1 ? config.zero : 0), gradientElement(gradientElement),
        b(program.getContext()) {}

  LogicalResult run();

private:
  // Buffers.
  exec::BufferOp buffer(StringAttr name) { return bufferTable.lookup(name); }
  StringAttr addBuffer(const Twine &name, Type type, BufferKind kind);
  /// A buffer of parameter `param`'s (a gradient, a shard, optimizer state):
  /// it names the parameter, as checkpoints and the runtime's checks of
  /// what a collective combines read it (docs/plan-format.md).
  StringAttr addParamBuffer(const Twine &name, Type type, BufferKind kind,
                            StringAttr param, bool dpShard);
  FlatSymbolRefAttr sym(StringAttr name) {
    return FlatSymbolRefAttr::get(name);
  }
  bool isParam(StringAttr name) {
    exec::BufferOp buf = buffer(name);
    return buf && (buf.getKind() == BufferKind::param ||
                   buf.getKind() == BufferKind::param_gathered);
  }
  /// Whether a column-parallel linear writes `value` in the forward phase:
  /// this rank's heads (or its replica of key/value heads).
  bool columnParallelOutput(StringAttr value) {
    return llvm::any_of(writers.lookup(value), [&](Operation *w) {
      auto k = dyn_cast<exec::KernelOp>(w);
      if (!k || k.getKernel() != plan::Kernel::Linear)
        return false;
      std::optional<int64_t> dim = buffer(refs(k.getIns())[1]).getShardingDim();
      return dim && *dim == 0;
    });
  }
  /// Whether a pipeline receive writes `value` in the forward phase.
  bool received(StringAttr value) {
    return llvm::any_of(writers.lookup(value),
                        [](Operation *w) { return isa<exec::RecvOp>(w); });
  }
  /// The type of a gradient of parameter type `type`.
  RankedTensorType gradientType(RankedTensorType type) {
    return gradientElement ? type.clone(gradientElement) : type;
  }
  /// The flat 1/dp slice type of `type` (padded to a multiple of dp).
  RankedTensorType shardType(RankedTensorType type) {
    int64_t n = type.getNumElements();
    return RankedTensorType::get({(n + config.dp - 1) / config.dp},
                                 type.getElementType());
  }

  // Launch helpers (at the builder's insertion point).
  exec::KernelOp kernel(plan::Kernel kernel, ArrayRef<StringAttr> ins,
                        ArrayRef<StringAttr> outs, ArrayRef<bool> accumulate,
                        DictionaryAttr params);
  void collective(CollectiveKind kind, Group group, StringAttr in,
                  StringAttr out, std::optional<int64_t> dim,
                  bool accumulate = false);

  // Differentiation of one forward phase.
  LogicalResult differentiate(exec::PhaseOp forward);
  void indexForward(ArrayRef<Operation *> launches);
  /// The gradient buffer to write for `value` and whether to add to it;
  /// null for tokens and labels.
  std::pair<StringAttr, bool> gradOut(StringAttr value);
  /// The gradient of `value` so far, or null when nothing flows into it.
  StringAttr gradIn(StringAttr value) {
    return written.contains(value) ? grads.lookup(value) : StringAttr();
  }
  LogicalResult backwardOf(Operation *op);
  void backwardOfSend(exec::SendOp send);
  LogicalResult backwardOfRecv(exec::RecvOp recv);
  void backwardOfCollective(exec::CollectiveOp c);
  void backwardOfCrossEntropy(exec::KernelOp loss);
  /// The kernels whose backward is not a registry kernel of their own.
  bool backwardOfDataMovement(exec::KernelOp k, StringAttr dy);
  LogicalResult backwardOfKernel(exec::KernelOp k, StringAttr dy);
  /// Parameters of a norm or bias that see only this rank's tokens or
  /// heads.
  void notePartialParams(exec::KernelOp k);
  /// What the backward of a linear reads as the forward's input `value`.
  StringAttr backwardInput(StringAttr value);
  void finishGradient(StringAttr value);
  /// Whether `reader` is a column-parallel linear reading `value` as its
  /// input.
  bool isColumnRead(Operation *reader, StringAttr value);
  /// Whether some column-parallel linear reads `value` as its input.
  bool hasColumnReader(StringAttr value);
  /// Whether `value` is read by column-parallel linears and by other
  /// launches too (a post-norm block's input: the projections and the
  /// residual add): only the linears' share of its gradient is partial.
  bool hasMixedReaders(StringAttr value);
  void gatherParams(ArrayRef<Operation *> launches);
  /// Erases the backward phase's parameter gathers whose output no later
  /// launch reads before it is gathered again.
  void eraseUnreadGathers();
  /// Erases the recomputed launches of backward phase `body` whose outputs
  /// no later launch reads: a recomputed layer's last projection, its
  /// reduction and the residual add it feeds write the layer's output,
  /// which the backward never reads (the next layer's backward read the
  /// kept copy before).
  void eraseUnreadRecomputation(Block &body);
  void scatterGradients(llvm::SetVector<StringAttr> &params,
                        std::optional<int64_t> layer);

  // The step phase.
  void buildStep();

  exec::ProgramOp program;
  /// The program's buffers by name, and where new ones go.
  llvm::DenseMap<StringAttr, exec::BufferOp> bufferTable;
  Operation *firstPhase = nullptr;
  const ParallelConfig &config;
  int64_t seqLen;
  int64_t zero;
  Type gradientElement;
  OpBuilder b;

  /// Per forward phase: the launches that write / read each buffer.
  llvm::DenseMap<StringAttr, SmallVector<Operation *>> writers, readers;
  /// Gradient buffer of each activation or parameter, and the ones written
  /// in the backward phase being built.
  llvm::DenseMap<StringAttr, StringAttr> grads;
  llvm::DenseSet<StringAttr> written, finished;
  llvm::DenseSet<StringAttr> gatheredParams;
  /// The parameter gathers of the backward phase being built.
  SmallVector<exec::CollectiveOp> backwardGathers;
  /// Parameters read by some layer's launches.
  llvm::DenseSet<StringAttr> layerParams;
  /// Forward reads of each parameter not yet differentiated.
  llvm::DenseMap<StringAttr, int64_t> pendingReads;
  /// Launches already tagged with the layer they belong to (or none).
  llvm::DenseSet<Operation *> ownLayer;
  /// Parameters in program order, and the local gradient form the step
  /// phase reduces (full or ZeRO shard).
  llvm::SetVector<StringAttr> params;
  /// Parameters whose gradients are partial over tp: replicated weights
  /// applied to sequence shards or to each head of a head split.
  llvm::DenseSet<StringAttr> tpPartialParams;
  /// Sequence-parallel GEMM inputs gathered again in backward.
  llvm::DenseMap<StringAttr, StringAttr> regathered;
  /// For values with mixed readers, the column-parallel linears' partial
  /// share of the gradient, kept apart until it is reduced over tp.
  llvm::DenseMap<StringAttr, StringAttr> partialGrads;
  /// Values whose partial share this phase has written.
  llvm::DenseSet<StringAttr> partialWritten;
  /// The forward launches cloned into the backward phase being built.
  llvm::SmallPtrSet<Operation *, 32> recomputed;
};

StringAttr BackwardBuilder::addBuffer(const Twine &name, Type type,
                                      BufferKind kind) {
  StringAttr attr = b.getStringAttr(name);
  if (buffer(attr))
    return attr;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(firstPhase);
  bufferTable[attr] =
      exec::BufferOp::create(b, program.getLoc(), attr, type, kind);
  return attr;
}

StringAttr BackwardBuilder::addParamBuffer(const Twine &name, Type type,
                                           BufferKind kind, StringAttr param,
                                           bool dpShard) {
  StringAttr attr = addBuffer(name, type, kind);
  exec::BufferOp buf = buffer(attr), of = buffer(param);
  buf.setParam(of.getParam() ? *of.getParam() : param.getValue());
  buf.setDpShard(dpShard);
  return attr;
}

exec::KernelOp BackwardBuilder::kernel(plan::Kernel kernel,
                                       ArrayRef<StringAttr> ins,
                                       ArrayRef<StringAttr> outs,
                                       ArrayRef<bool> accumulate,
                                       DictionaryAttr params) {
  SmallVector<Attribute> inRefs, outRefs;
  for (StringAttr in : ins)
    inRefs.push_back(sym(in));
  for (StringAttr out : outs)
    outRefs.push_back(sym(out));
  bool any = llvm::is_contained(accumulate, true);
  return exec::KernelOp::create(
      b, program.getLoc(), kernel, b.getArrayAttr(inRefs),
      b.getArrayAttr(outRefs),
      any ? b.getDenseBoolArrayAttr(accumulate) : DenseBoolArrayAttr(),
      params && !params.empty() ? params : DictionaryAttr());
}

void BackwardBuilder::collective(CollectiveKind kind, Group group,
                                 StringAttr in, StringAttr out,
                                 std::optional<int64_t> dim, bool accumulate) {
  exec::CollectiveOp::create(b, program.getLoc(), kind, group, sym(in),
                             sym(out), exec::Reduction::sum, dim, accumulate);
}

std::pair<StringAttr, bool> BackwardBuilder::gradOut(StringAttr value) {
  exec::BufferOp buf = buffer(value);
  if (buf.getKind() == BufferKind::tokens ||
      buf.getKind() == BufferKind::labels)
    return {};
  StringAttr &grad = grads[value];
  if (!grad) {
    if (isParam(value))
      grad = addParamBuffer("grad." + value.getValue(),
                            gradientType(buf.getTensorType()),
                            BufferKind::param_grad, value, false);
    else
      grad = addBuffer("d." + value.getValue(), buf.getType(),
                       BufferKind::activation_grad);
  }
  bool first = written.insert(value).second;
  // Parameter gradients add up over the micro-batches of a step, unless
  // ZeRO-2/3 reduce-scatters them after each micro-batch.
  bool accumulate = isParam(value) ? (zero < 2 || !first) : !first;
  return {grad, accumulate};
}

bool BackwardBuilder::isColumnRead(Operation *reader, StringAttr value) {
  auto k = dyn_cast<exec::KernelOp>(reader);
  if (!k || k.getKernel() != plan::Kernel::Linear ||
      cast<FlatSymbolRefAttr>(k.getIns()[0]).getAttr() != value)
    return false;
  exec::BufferOp weight =
      buffer(cast<FlatSymbolRefAttr>(k.getIns()[1]).getAttr());
  return weight.getShardingDim() && *weight.getShardingDim() == 0;
}

bool BackwardBuilder::hasColumnReader(StringAttr value) {
  return llvm::any_of(readers.lookup(value),
                      [&](Operation *r) { return isColumnRead(r, value); });
}

bool BackwardBuilder::hasMixedReaders(StringAttr value) {
  return config.tp > 1 && hasColumnReader(value) &&
         !llvm::all_of(readers.lookup(value),
                       [&](Operation *r) { return isColumnRead(r, value); });
}

/// The gradient of `value` is complete: a replicated activation read by
/// column-parallel projections holds only this rank's share of it.
void BackwardBuilder::finishGradient(StringAttr value) {
  if (config.tp == 1 || !finished.insert(value).second)
    return;
  if (partialWritten.contains(value)) {
    StringAttr partial = partialGrads.lookup(value);
    // The linears' share, reduced, joins the rest of the gradient.
    collective(CollectiveKind::all_reduce, Group::tp, partial, partial,
               std::nullopt);
    auto [grad, accumulate] = gradOut(value);
    kernel(plan::Kernel::Copy, {partial}, {grad}, {accumulate}, {});
    return;
  }
  if (!gradIn(value))
    return;
  bool gathered = llvm::any_of(writers.lookup(value), [](Operation *w) {
    auto c = dyn_cast<exec::CollectiveOp>(w);
    return c && c.getKind() == CollectiveKind::all_gather;
  });
  if (hasColumnReader(value) && !gathered)
    collective(CollectiveKind::all_reduce, Group::tp, grads[value],
               grads[value], std::nullopt);
}

/// With sequence parallelism a linear's input is the all-gather of a
/// sequence shard. As in Megatron-LM, backward gathers it again from the
/// shard, at its first use, instead of keeping the whole input from the
/// forward pass: between the passes only 1/tp of it stays in memory, for
/// one more all-gather. (Full recomputation re-runs the gather anyway.)
StringAttr BackwardBuilder::backwardInput(StringAttr value) {
  if (!config.regathersInputs() || config.tp == 1)
    return value;
  exec::CollectiveOp gather;
  for (Operation *w : writers.lookup(value))
    if (auto c = dyn_cast<exec::CollectiveOp>(w))
      if (c.getKind() == CollectiveKind::all_gather &&
          c.getGroup() == Group::tp && c.getDim())
        gather = c;
  if (!gather)
    return value;
  StringAttr shard = gather.getInputAttr().getAttr();
  // Gathered received slices (pipeline scatter/gather) are kept anyway.
  if (received(shard))
    return value;
  StringAttr &again = regathered[value];
  if (!again) {
    again = addBuffer(value.getValue() + ".regathered", buffer(value).getType(),
                      BufferKind::activation);
    collective(CollectiveKind::all_gather, Group::tp, shard, again,
               *gather.getDim());
  }
  return again;
}

LogicalResult BackwardBuilder::backwardOf(Operation *op) {
  // An async collective's gradient is built at the collective itself.
  if (isa<exec::WaitOp>(op))
    return success();
  if (auto send = dyn_cast<exec::SendOp>(op)) {
    backwardOfSend(send);
    return success();
  }
  if (auto recv = dyn_cast<exec::RecvOp>(op))
    return backwardOfRecv(recv);
  if (auto c = dyn_cast<exec::CollectiveOp>(op)) {
    backwardOfCollective(c);
    return success();
  }
  auto k = cast<exec::KernelOp>(op);
  if (k.getKernel() == plan::Kernel::CeMax ||
      k.getKernel() == plan::Kernel::CeStats)
    return success(); // differentiated with ce_loss
  if (k.getKernel() == plan::Kernel::CeLoss) {
    backwardOfCrossEntropy(k);
    return success();
  }
  StringAttr dy = gradIn(refs(k.getOuts())[0]);
  if (!dy)
    return success(); // nothing depends on this output
  if (backwardOfDataMovement(k, dy))
    return success();
  return backwardOfKernel(k, dy);
}

void BackwardBuilder::backwardOfSend(exec::SendOp send) {
  StringAttr value = send.getBufferAttr().getAttr();
  auto [grad, accumulate] = gradOut(value);
  if (!accumulate) {
    exec::RecvOp::create(b, send.getLoc(), sym(grad), exec::Peer::next);
    return;
  }
  StringAttr tmp =
      addBuffer("d." + value.getValue() + ".recv", buffer(value).getType(),
                BufferKind::activation_grad);
  exec::RecvOp::create(b, send.getLoc(), sym(tmp), exec::Peer::next);
  kernel(plan::Kernel::Copy, {tmp}, {grad}, {true}, {});
}

LogicalResult BackwardBuilder::backwardOfRecv(exec::RecvOp recv) {
  StringAttr grad = gradIn(recv.getBufferAttr().getAttr());
  if (!grad)
    return recv.emitError("the activation received here gets no gradient, "
                          "so the previous stage would wait forever");
  exec::SendOp::create(b, recv.getLoc(), sym(grad), exec::Peer::prev);
  return success();
}

void BackwardBuilder::backwardOfCollective(exec::CollectiveOp c) {
  StringAttr in = c.getInputAttr().getAttr(), out = c.getOutputAttr().getAttr();
  StringAttr dOut = gradIn(out);
  if (!dOut || c.getKind() == CollectiveKind::all_reduce)
    return; // the sum's gradient is its input's: same buffer
  auto [dIn, accumulate] = gradOut(in);
  // Gathering received slices rebuilds a replicated activation: its
  // gradient is whole on every rank, and each sends back its own slice.
  // (Not so a sequence shard gathered for column-parallel linears alone,
  // whose gradients are partial sums: those are reduce-scattered.)
  bool partialOut = hasColumnReader(out) && !hasMixedReaders(out);
  if (received(in) && !partialOut) {
    kernel(plan::Kernel::ShardSlice, {dOut}, {dIn}, {accumulate},
           b.getDictionaryAttr(
               {b.getNamedAttr("dim", b.getI64IntegerAttr(*c.getDim())),
                b.getNamedAttr(
                    "group", b.getStringAttr(stringifyGroup(c.getGroup())))}));
    return;
  }
  CollectiveKind adjoint = c.getKind() == CollectiveKind::all_gather
                               ? CollectiveKind::reduce_scatter
                               : CollectiveKind::all_gather;
  collective(adjoint, c.getGroup(), dOut, dIn,
             c.getDim() ? std::optional<int64_t>(*c.getDim()) : std::nullopt,
             accumulate);
}

/// ce_loss(max, stats): its backward takes the logits and labels from the
/// ce_stats that wrote `stats`, and both kernels' params.
void BackwardBuilder::backwardOfCrossEntropy(exec::KernelOp loss) {
  SmallVector<StringAttr> ins = refs(loss.getIns());
  // A copy that outlives the search: lookup returns one by value.
  SmallVector<Operation *> statsWriters = writers.lookup(ins[1]);
  auto stats = llvm::find_if(statsWriters, [](Operation *w) {
    return isa<exec::KernelOp>(w) &&
           cast<exec::KernelOp>(w).getKernel() == plan::Kernel::CeStats;
  });
  auto statsKernel = cast<exec::KernelOp>(*stats);
  SmallVector<StringAttr> statsIns = refs(statsKernel.getIns());
  auto [dLogits, accumulate] = gradOut(statsIns[0]);
  SmallVector<NamedAttribute> merged(statsKernel.getParamsAttr().getValue());
  DictionaryAttr params = loss.getParamsAttr();
  merged.append(params.getValue().begin(), params.getValue().end());
  kernel(plan::Kernel::CeBwd, {statsIns[0], ins[0], ins[1], statsIns[2]},
         {dLogits}, {accumulate}, b.getDictionaryAttr(merged));
}

bool BackwardBuilder::backwardOfDataMovement(exec::KernelOp k, StringAttr dy) {
  using plan::Kernel;
  SmallVector<StringAttr> ins = refs(k.getIns());
  DictionaryAttr params = k.getParamsAttr();
  auto gradKernel = [&](Kernel backward, ArrayRef<StringAttr> bwdIns,
                        StringAttr of, DictionaryAttr bwdParams) {
    auto [g, accumulate] = gradOut(of);
    kernel(backward, bwdIns, {g}, {accumulate}, bwdParams);
  };
  switch (k.getKernel()) {
  case Kernel::Add:
  case Kernel::Copy:
    for (StringAttr in : ins)
      gradKernel(Kernel::Copy, {dy}, in, {});
    return true;
  case Kernel::Embedding:
    gradKernel(Kernel::EmbeddingBwd, {dy, ins[1]}, ins[0], params);
    return true;
  case Kernel::PositionEmbedding:
    gradKernel(Kernel::Copy, {dy}, ins[0], {});
    gradKernel(Kernel::PositionEmbeddingBwd, {dy}, ins[1], {});
    return true;
  case Kernel::ShardSlice: {
    auto [dx, accumulate] = gradOut(ins[0]);
    collective(
        CollectiveKind::all_gather,
        *exec::symbolizeGroup(params.getAs<StringAttr>("group").getValue()), dy,
        dx, params.getAs<IntegerAttr>("dim").getInt(), accumulate);
    return true;
  }
  default:
    return false;
  }
}

LogicalResult BackwardBuilder::backwardOfKernel(exec::KernelOp k,
                                                StringAttr dy) {
  plan::Kernel forward = k.getKernel();
  SmallVector<StringAttr> ins = refs(k.getIns()), outs = refs(k.getOuts());
  if (forward == plan::Kernel::Attention &&
      config.recompute == Recompute::Selective)
    recomputed.insert(b.clone(*k)); // the core's output, not kept
  const plan::KernelInfo *info = &plan::info(forward);
  if (!info->backward)
    return k.emitOpError("kernel '")
           << k.getKernelName() << "' has no backward rule";
  // Backward kernels read the output gradient, then what the registry says
  // they read again of their forward (norms and linears their input and
  // weight; attention also its outputs, the log-sum-exp where kept), and
  // write one gradient per differentiable input.
  const plan::KernelInfo &backward = plan::info(*info->backward);
  SmallVector<StringAttr> bwdIns = {dy};
  for (unsigned i = 0; i < backward.savedCount; ++i) {
    const plan::SavedOperand &saved = backward.saved[i];
    const SmallVector<StringAttr> &from = saved.ofOutput ? outs : ins;
    if (saved.forwardOperand >= from.size())
      continue; // an optional operand the forward went without
    StringAttr value = from[saved.forwardOperand];
    // A linear's input may be gathered again rather than kept.
    bool linearInput = forward == plan::Kernel::Linear && !saved.ofOutput &&
                       saved.forwardOperand == 0;
    bwdIns.push_back(linearInput ? backwardInput(value) : value);
  }
  SmallVector<StringAttr> gs;
  SmallVector<bool> acc;
  for (StringAttr in : ins) {
    // A column-parallel linear's share of a mixed-read input's gradient
    // goes apart, to be reduced over tp alone (finishGradient).
    if (in == ins[0] && hasMixedReaders(in) && isColumnRead(k, in)) {
      StringAttr &partial = partialGrads[in];
      if (!partial)
        partial = addBuffer("d." + in.getValue() + ".tp_partial",
                            buffer(in).getType(), BufferKind::activation_grad);
      gs.push_back(partial);
      acc.push_back(!partialWritten.insert(in).second);
      continue;
    }
    auto [g, accumulate] = gradOut(in);
    gs.push_back(g);
    acc.push_back(accumulate);
  }
  kernel(*info->backward, bwdIns, gs, acc, k.getParamsAttr());
  notePartialParams(k);
  return success();
}

void BackwardBuilder::notePartialParams(exec::KernelOp k) {
  // Norm weights and biases on sequence shards see only this rank's
  // tokens; a per-head norm's weight only this rank's heads.
  plan::Kernel forward = k.getKernel();
  if (config.tp == 1 ||
      (forward != plan::Kernel::RmsNorm && forward != plan::Kernel::LayerNorm &&
       forward != plan::Kernel::BiasAdd))
    return;
  SmallVector<StringAttr> ins = refs(k.getIns());
  auto type = buffer(ins[0]).getTensorType();
  bool sequenceShard = config.sequenceParallel && type.getRank() == 3 &&
                       type.getDimSize(1) < seqLen;
  bool perHead =
      forward != plan::Kernel::BiasAdd && columnParallelOutput(ins[0]);
  if (sequenceShard || perHead)
    for (StringAttr in : llvm::drop_begin(ins))
      tpPartialParams.insert(in);
}

void BackwardBuilder::gatherParams(ArrayRef<Operation *> launches) {
  if (zero < 3)
    return;
  for (Operation *op : launches) {
    auto k = dyn_cast<exec::KernelOp>(op);
    if (!k)
      continue;
    for (StringAttr in : refs(k.getIns())) {
      if (!isParam(in) || !gatheredParams.insert(in).second)
        continue;
      collective(CollectiveKind::all_gather, Group::dp,
                 b.getStringAttr(in.getValue() + ".shard"), in, std::nullopt);
      backwardGathers.push_back(
          cast<exec::CollectiveOp>(*std::prev(b.getInsertionPoint())));
    }
  }
}

void BackwardBuilder::eraseUnreadGathers() {
  auto reads = [](Operation &op, StringAttr buffer) {
    return llvm::is_contained(launchBuffers(op).first, buffer);
  };
  for (exec::CollectiveOp gather : backwardGathers) {
    StringAttr output = gather.getOutputAttr().getAttr();
    bool read = false;
    for (Operation &op : llvm::make_range(std::next(gather->getIterator()),
                                          gather->getBlock()->end())) {
      if (reads(op, output)) {
        read = true;
        break;
      }
      auto again = dyn_cast<exec::CollectiveOp>(op);
      if (again && again.getOutputAttr().getAttr() == output)
        break;
    }
    if (!read)
      gather->erase();
  }
  backwardGathers.clear();
}

void BackwardBuilder::eraseUnreadRecomputation(Block &body) {
  // Buffers some later launch reads, from the phase's end backwards.
  llvm::DenseSet<StringAttr> read;
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    auto [ins, outs] = launchBuffers(op);
    if (recomputed.contains(&op) && llvm::none_of(outs, [&](StringAttr out) {
          return read.contains(out);
        })) {
      op.erase();
      continue;
    }
    read.insert(ins.begin(), ins.end());
  }
  recomputed.clear();
}

void BackwardBuilder::scatterGradients(llvm::SetVector<StringAttr> &touched,
                                       std::optional<int64_t> layer) {
  if (config.dp == 1)
    return;
  llvm::SetVector<StringAttr> pending;
  for (StringAttr param : touched) {
    if (pendingReads.lookup(param) > 0) {
      pending.insert(param); // another launch still adds to it
      continue;
    }
    // ZeRO-2/3 reduce every micro-batch's gradient into the shard; ZeRO-0/1
    // reduce the sum over micro-batches, in the last micro-batch's run.
    StringAttr shard = b.getStringAttr("grad_shard." + param.getValue());
    if (zero >= 2)
      collective(CollectiveKind::reduce_scatter, Group::dp, grads[param], shard,
                 std::nullopt, /*accumulate=*/true);
    else if (zero == 1)
      collective(CollectiveKind::reduce_scatter, Group::dp, grads[param], shard,
                 std::nullopt);
    else
      collective(CollectiveKind::all_reduce, Group::dp, grads[param],
                 grads[param], std::nullopt);
    Operation *scatter = &*std::prev(b.getInsertionPoint());
    if (zero < 2)
      cast<exec::CollectiveOp>(scatter).setLastMicroBatch(true);
    if (layer)
      scatter->setAttr("layer", b.getI64IntegerAttr(*layer));
    ownLayer.insert(scatter);
  }
  touched = std::move(pending);
}

/// Who reads and writes each buffer of the forward phase, and how many of
/// its reads each parameter has left to differentiate.
void BackwardBuilder::indexForward(ArrayRef<Operation *> launches) {
  writers.clear();
  readers.clear();
  pendingReads.clear();
  layerParams.clear();
  written.clear();
  finished.clear();
  partialWritten.clear();
  for (Operation *op : launches) {
    if (auto k = dyn_cast<exec::KernelOp>(op)) {
      for (StringAttr in : refs(k.getIns())) {
        readers[in].push_back(op);
        if (isParam(in)) {
          ++pendingReads[in];
          if (exec::launchLayer(op))
            layerParams.insert(in);
        }
      }
      for (StringAttr out : refs(k.getOuts()))
        writers[out].push_back(op);
    } else if (auto c = dyn_cast<exec::CollectiveOp>(op)) {
      readers[c.getInputAttr().getAttr()].push_back(op);
      writers[c.getOutputAttr().getAttr()].push_back(op);
    } else if (auto r = dyn_cast<exec::RecvOp>(op)) {
      writers[r.getBufferAttr().getAttr()].push_back(op);
    }
  }
}

LogicalResult BackwardBuilder::differentiate(exec::PhaseOp forward) {
  SmallVector<Operation *> launches;
  for (Operation &op : forward.getBody().front())
    launches.push_back(&op);
  indexForward(launches);

  // A layer's launches, in order; a launch outside the layers is a segment
  // of its own.
  llvm::DenseMap<int64_t, SmallVector<Operation *>> layerLaunches;
  for (Operation *op : launches)
    if (std::optional<int64_t> layer = exec::launchLayer(op))
      layerLaunches[*layer].push_back(op);
  auto segmentOf = [&](Operation *op, std::optional<int64_t> layer) {
    return layer ? layerLaunches.lookup(*layer) : SmallVector<Operation *>{op};
  };

  // ZeRO-3: gather each layer's parameters just before the layer.
  if (zero >= 3) {
    std::optional<int64_t> current;
    gatheredParams.clear();
    for (Operation *op : launches) {
      if (exec::launchLayer(op) != current || !exec::launchLayer(op)) {
        current = exec::launchLayer(op);
        b.setInsertionPoint(op);
        gatherParams(segmentOf(op, current));
      }
    }
  }

  b.setInsertionPointAfter(forward);
  auto backward = exec::PhaseOp::create(
      b, forward.getLoc(), exec::PhaseKind::backward, forward.getChunkAttr());
  b.createBlock(&backward.getBody());
  gatheredParams.clear();
  backwardGathers.clear();
  llvm::SetVector<StringAttr> touched;
  std::optional<int64_t> current;
  bool first = true;
  Block *backwardBody = &backward.getBody().front();
  for (Operation *op : llvm::reverse(launches)) {
    std::optional<int64_t> layer = exec::launchLayer(op);
    Operation *last = backwardBody->empty() ? nullptr : &backwardBody->back();
    // Non-layer launches (embedding, head, loss) are segments of their own.
    if (first || layer != current || !layer) {
      // Gradients whose every use is differentiated are final for this
      // micro-batch. Entering a layer: gather it, recompute it.
      scatterGradients(touched, current);
      // A layer's gathered parameters are freed when it is done; the
      // embedding and head's (read by several non-layer launches, tied)
      // stay for the phase.
      if (layer != current)
        for (StringAttr p : llvm::to_vector(gatheredParams))
          if (layerParams.contains(p))
            gatheredParams.erase(p);
      current = layer;
      first = false;
      SmallVector<Operation *> segment = segmentOf(op, layer);
      gatherParams(segment);
      if (layer && config.recompute == Recompute::Full)
        for (Operation *other : segment)
          if (!isa<exec::SendOp, exec::RecvOp>(other))
            recomputed.insert(b.clone(*other));
    }
    // Gradients of what this launch wrote are complete.
    if (auto k = dyn_cast<exec::KernelOp>(op))
      for (StringAttr out : refs(k.getOuts()))
        finishGradient(out);
    if (auto r = dyn_cast<exec::RecvOp>(op))
      finishGradient(r.getBufferAttr().getAttr());
    if (auto c = dyn_cast<exec::CollectiveOp>(op))
      finishGradient(c.getOutputAttr().getAttr());
    if (failed(backwardOf(op)))
      return failure();
    if (auto k = dyn_cast<exec::KernelOp>(op))
      for (StringAttr in : refs(k.getIns()))
        if (isParam(in)) {
          --pendingReads[in];
          if (written.contains(in))
            touched.insert(in);
        }
    // Backward launches belong to the layer of their forward launch.
    if (layer)
      for (Operation &added : llvm::make_range(
               last ? std::next(last->getIterator()) : backwardBody->begin(),
               backwardBody->end()))
        if (!added.hasAttr("layer") && !ownLayer.contains(&added))
          added.setAttr("layer", b.getI64IntegerAttr(*layer));
  }
  scatterGradients(touched, current);
  eraseUnreadRecomputation(*backwardBody);
  // A forward launch's parameters are gathered for its backward, which may
  // not read them: an embedding's backward reads no table, a bias's
  // gradient no bias. Gathering those would move their bytes for nothing.
  eraseUnreadGathers();
  return success();
}

void BackwardBuilder::buildStep() {
  Block &body = program.getBody().front();
  b.setInsertionPointToEnd(&body);
  auto step = exec::PhaseOp::create(b, program.getLoc(), exec::PhaseKind::step,
                                    IntegerAttr());
  b.createBlock(&step.getBody());
  auto f32 = b.getF32Type();
  auto scalarType = RankedTensorType::get({}, f32);

  // The parameters trained, each with its gradient as held now.
  SmallVector<StringAttr> trained, gradForms;
  SmallVector<Attribute> weights;
  for (StringAttr param : params) {
    exec::BufferOp buf = buffer(param);
    StringAttr grad = grads.lookup(param);
    if (!grad)
      continue; // never differentiated: frozen by construction
    // The gradient as held now, reduced over dp in backward: whole (ZeRO-0)
    // or this rank's shard (ZeRO >= 1); the model-parallel sums, which
    // commute with the dp reduction, follow on it.
    StringAttr form =
        zero >= 1 ? b.getStringAttr("grad_shard." + param.getValue()) : grad;
    auto modelParallelSums = [&](StringAttr g) {
      if (buf.getTied() && config.pp > 1)
        collective(CollectiveKind::all_reduce, Group::tied, g, g, std::nullopt);
      if (tpPartialParams.contains(param))
        collective(CollectiveKind::all_reduce, Group::tp, g, g, std::nullopt);
      if (buf.getShardingParts() && *buf.getShardingParts() < config.tp)
        collective(CollectiveKind::all_reduce, Group::tp_kv, g, g,
                   std::nullopt);
    };
    modelParallelSums(form);
    trained.push_back(param);
    gradForms.push_back(form);
    // Every copy of a gradient counts once in the global norm.
    double weight = 1.0;
    int64_t parts = buf.getShardingParts().value_or(1);
    weight *= double(parts) / config.tp;
    if (zero == 0)
      weight /= config.dp;
    if (buf.getTied() && config.pp > 1)
      weight /= 2;
    weights.push_back(b.getF64FloatAttr(weight));
  }
  StringAttr sumsq = addBuffer("grad_sumsq", scalarType, BufferKind::scalar);
  StringAttr clip =
      addBuffer("clip_coefficient", scalarType, BufferKind::scalar);
  kernel(plan::Kernel::GradSumsq, gradForms, {sumsq}, {false},
         b.getDictionaryAttr(
             {b.getNamedAttr("weights", b.getArrayAttr(weights))}));
  int64_t world = config.dp * config.tp * config.pp;
  if (world > 1)
    collective(CollectiveKind::all_reduce, Group::world, sumsq, sumsq,
               std::nullopt);
  kernel(plan::Kernel::ClipCoefficient, {sumsq}, {clip}, {false}, {});

  for (auto [param, form] : llvm::zip_equal(trained, gradForms)) {
    exec::BufferOp buf = buffer(param);
    StringAttr stored =
        zero >= 3 ? b.getStringAttr(param.getValue() + ".shard") : param;
    // AdamW's state is fp32 whatever the training dtype; below fp32 it
    // includes an fp32 master copy of the parameter, which the update
    // applies to (mixed precision, as the cost model counts it).
    RankedTensorType stateType =
        zero >= 1 ? shardType(buf.getTensorType()) : buf.getTensorType();
    bool master = !stateType.getElementType().isF32();
    stateType = stateType.clone(b.getF32Type());
    auto state = [&](StringRef prefix) {
      return addParamBuffer(prefix + param.getValue(), stateType,
                            BufferKind::optimizer_state, param, zero >= 1);
    };
    StringAttr m = state("adam_m."), v = state("adam_v.");
    bool decay = buf.getTensorType().getRank() >= 2;
    SmallVector<StringAttr> ins = {stored, form, m, v, clip},
                            outs = {stored, m, v};
    if (master) {
      StringAttr w = state("master.");
      ins.push_back(w);
      outs.push_back(w);
    }
    kernel(plan::Kernel::AdamW, ins, outs,
           SmallVector<bool>(outs.size(), false),
           b.getDictionaryAttr(
               {b.getNamedAttr("weight_decay", b.getBoolAttr(decay)),
                b.getNamedAttr("dp_shard",
                               b.getBoolAttr(zero == 1 || zero == 2))}));
    if (zero == 1 || zero == 2)
      collective(CollectiveKind::all_gather, Group::dp, param, param,
                 std::nullopt);
  }
  StringAttr loss = b.getStringAttr("loss");
  if (buffer(loss) && config.dp > 1)
    collective(CollectiveKind::all_reduce, Group::dp, loss, loss, std::nullopt);
}

LogicalResult BackwardBuilder::run() {
  Block &body = program.getBody().front();
  if (!body.getOps<exec::ScheduleOp>().empty() ||
      llvm::any_of(body.getOps<exec::PhaseOp>(), [](exec::PhaseOp p) {
        return p.getKind() != exec::PhaseKind::forward;
      }))
    return program.emitOpError("already has backward or step phases");
  for (Operation &op : body) {
    if (auto buf = dyn_cast<exec::BufferOp>(op)) {
      bufferTable[buf.getSymNameAttr()] = buf;
      if (buf.getKind() == BufferKind::param)
        params.insert(buf.getSymNameAttr());
    } else if (!firstPhase) {
      firstPhase = &op;
    }
  }
  if (!firstPhase)
    return program.emitOpError("has no forward phase");
  // ZeRO: shards of gradients (2, 3) and of the parameters themselves (3).
  for (StringAttr param : params) {
    exec::BufferOp buf = buffer(param);
    RankedTensorType shard = shardType(buf.getTensorType());
    if (zero >= 1)
      addParamBuffer("grad_shard." + param.getValue(), gradientType(shard),
                     BufferKind::grad_shard, param, true);
    if (zero >= 3) {
      StringAttr stored = addBuffer(param.getValue() + ".shard", shard,
                                    BufferKind::param_shard);
      exec::BufferOp s = buffer(stored);
      s.setParam(*buf.getParam());
      s.setInitAttr(buf.getInitAttr());
      s.setInitStdAttr(buf.getInitStdAttr());
      s.setShardingDimAttr(buf.getShardingDimAttr());
      s.setShardingPartsAttr(buf.getShardingPartsAttr());
      s.setPaddedFromAttr(buf.getPaddedFromAttr());
      s.setTied(buf.getTied());
      s.setLayerAttr(buf.getLayerAttr());
      s.setDpShard(true);
      // Record the whole local shape: the shard is its flat slice.
      s->setAttr("local_type", TypeAttr::get(buf.getType()));
      buf.setKind(BufferKind::param_gathered);
    }
  }
  for (auto forward : llvm::to_vector(body.getOps<exec::PhaseOp>()))
    if (failed(differentiate(forward)))
      return failure();
  buildStep();
  return success();
}

struct ExecBuildBackwardPass
    : impl::ExecBuildBackwardBase<ExecBuildBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Type gradientElement;
    if (gradientDtype == "f32") {
      gradientElement = Float32Type::get(&getContext());
    } else if (gradientDtype != "param") {
      module.emitError("exec-build-backward: gradient-dtype must be `param` "
                       "or `f32`, not `")
          << gradientDtype << "`";
      return signalPassFailure();
    }
    dist::StrategyAttr strategy =
        requireStrategy(module, "exec-build-backward");
    if (!strategy)
      return signalPassFailure();
    auto seqLen = module->getAttrOfType<IntegerAttr>("exec.seq_len");
    if (!seqLen) {
      module.emitError("exec-build-backward needs the exec programs of "
                       "dist-lower-to-exec (no exec.seq_len on the module)");
      return signalPassFailure();
    }
    ParallelConfig config = fromStrategyAttr(strategy);
    for (auto program : module.getOps<exec::ProgramOp>())
      if (failed(
              BackwardBuilder(program, config, seqLen.getInt(), gradientElement)
                  .run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partita
