//===- LowerToExec.cpp - dist-lower-to-exec -------------------------------===//
//
// The staged, partitioned model to one exec.program per pipeline rank: every
// SSA value becomes a named buffer and every op a kernel or collective
// launch in the forward phase of its model chunk.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/ParallelRoles.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace partita {
#define GEN_PASS_DEF_DISTLOWERTOEXEC
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

class StageLowering {
public:
  StageLowering(ModuleOp module, const ParallelConfig &config)
      : module(module), config(config), b(module.getContext()) {}

  LogicalResult lower(tfm::ModelOp model);

private:
  exec::ProgramOp programFor(int64_t ppRank);
  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerBlock(tfm::BlockOp block);
  LogicalResult lowerSend(dist::SendOp send);
  LogicalResult lowerRecv(dist::RecvOp recv);
  LogicalResult lowerEmbedding(Value table, Value tokens, Value result,
                               int64_t parts, FloatAttr scale);
  LogicalResult lowerRmsNorm(tfm::RmsNormOp norm);
  LogicalResult lowerRotary(tfm::RotaryOp rotary);
  /// attention, with the log-sum-exp its backward reads as a second output.
  LogicalResult lowerAttention(tfm::AttentionOp attention);
  /// The loss: ce_max, ce_stats and ce_loss, reduced over vocabulary shards.
  LogicalResult lowerCrossEntropy(Operation *op);
  /// The buffer holding `v`, created as an activation on first use.
  FlatSymbolRefAttr ref(Value v);
  FlatSymbolRefAttr newBuffer(StringRef base, Type type, exec::BufferKind kind);
  FlatSymbolRefAttr activation(Value v, StringRef kernel);
  FlatSymbolRefAttr param(tfm::ParamOp op);
  /// Launches `name`; its output buffer is named after `base` (default:
  /// the kernel).
  exec::KernelOp kernel(plan::Kernel kernel, ArrayRef<Value> ins, Value out,
                        ArrayRef<NamedAttribute> params = {},
                        StringRef base = {});
  void collective(exec::CollectiveKind kind, dist::MeshAxisAttr axis, Value in,
                  Value out, std::optional<int64_t> dim, bool async);
  /// Lowers a dist all_reduce, all_gather or reduce_scatter.
  void lowerCollective(Operation *op, bool async);
  /// The slice of a pipeline message each tp rank sends, when tp ranks hold
  /// the whole (replicated) activation.
  std::optional<RankedTensorType> p2pSlice(Type type) {
    auto t = cast<RankedTensorType>(type);
    if (config.tp == 1 || config.sequenceParallel || t.getRank() != 3 ||
        t.getDimSize(1) % config.tp != 0)
      return std::nullopt;
    SmallVector<int64_t> shape(t.getShape());
    shape[1] /= config.tp;
    return RankedTensorType::get(shape, t.getElementType());
  }
  /// The mesh axis's group (the dist and exec enums share names).
  exec::Group groupOf(dist::MeshAxisAttr axis) {
    return *exec::symbolizeGroup(dist::stringifyMeshAxis(axis.getValue()));
  }
  NamedAttribute param(StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  }

  ModuleOp module;
  const ParallelConfig &config;
  OpBuilder b;
  llvm::DenseMap<int64_t, exec::ProgramOp> programs;
  llvm::DenseMap<Operation *, exec::PhaseOp> firstPhase;
  exec::BufferOp lastBuffer;
  /// Buffer names taken, per program.
  llvm::DenseMap<Operation *, llvm::StringSet<>> takenNames;
  exec::ProgramOp program;
  exec::PhaseOp phase;
  llvm::DenseMap<Value, FlatSymbolRefAttr> buffers;
  /// Decoder layer of the ops being lowered, for names and the `layer`
  /// attribute that recomputation and ZeRO-3 group launches by.
  std::optional<int64_t> layer;
  /// Gives `launch` the current decoder layer, if any.
  void tagLayer(Operation *launch) {
    if (layer)
      launch->setAttr("layer", b.getI64IntegerAttr(*layer));
  }
  int64_t counter = 0;
  Value labels;
};

exec::ProgramOp StageLowering::programFor(int64_t ppRank) {
  auto [it, inserted] = programs.try_emplace(ppRank);
  if (inserted) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    it->second = exec::ProgramOp::create(
        b, module.getLoc(), b.getStringAttr("rank" + Twine(ppRank)),
        b.getI64IntegerAttr(ppRank));
    b.createBlock(&it->second.getBody());
    counter = 0;
  }
  return it->second;
}

FlatSymbolRefAttr StageLowering::newBuffer(StringRef base, Type type,
                                           exec::BufferKind kind) {
  std::string name = base.str();
  llvm::StringSet<> &names = takenNames[program];
  for (int i = 1; !names.insert(name).second; ++i)
    name = (base + "#" + Twine(i)).str();
  OpBuilder::InsertionGuard guard(b);
  // Buffers come first in the program, in creation order.
  Block &body = program.getBody().front();
  exec::PhaseOp first = firstPhase.lookup(program);
  if (first)
    b.setInsertionPoint(first);
  else
    b.setInsertionPointToEnd(&body);
  lastBuffer = exec::BufferOp::create(b, program.getLoc(), name, type, kind);
  return FlatSymbolRefAttr::get(b.getContext(), name);
}

FlatSymbolRefAttr StageLowering::activation(Value v, StringRef kernel) {
  std::string base = (layer ? "layers." + Twine(*layer) + "." : Twine()).str() +
                     kernel.str() + "." + std::to_string(counter++);
  FlatSymbolRefAttr ref =
      newBuffer(base, v.getType(), exec::BufferKind::activation);
  buffers[v] = ref;
  return ref;
}

FlatSymbolRefAttr StageLowering::param(tfm::ParamOp op) {
  FlatSymbolRefAttr ref =
      newBuffer(op.getParamName(), op.getType(), exec::BufferKind::param);
  exec::BufferOp buffer = lastBuffer;
  buffer.setParam(op.getParamName());
  buffer.setInit(tfm::stringifyInitKind(op.getInit()));
  if (op.getStd())
    buffer.setInitStdAttr(b.getF64FloatAttr(op.getStd()->convertToDouble()));
  if (auto sharding = op->getAttrOfType<dist::ShardingAttr>("dist.sharding")) {
    buffer.setShardingDim(sharding.getDim());
    buffer.setShardingParts(sharding.getParts());
  } else if (config.tp > 1 && llvm::any_of(op->getUsers(), [](Operation *user) {
               auto linear = dyn_cast<tfm::LinearOp>(user);
               return linear && feedsKeyOrValue(linear.getResult());
             })) {
    // One key/value head for every tensor-parallel rank: a whole copy each.
    buffer.setShardingDim(0);
    buffer.setShardingParts(1);
  }
  if (auto padded = op->getAttrOfType<IntegerAttr>("dist.padded_from"))
    buffer.setPaddedFrom(padded.getInt());
  buffer.setTied(op->hasAttr("dist.tied"));
  if (layer)
    buffer.setLayer(*layer);
  buffers[op.getResult()] = ref;
  return ref;
}

FlatSymbolRefAttr StageLowering::ref(Value v) {
  auto it = buffers.find(v);
  return it != buffers.end() ? it->second : activation(v, "value");
}

exec::KernelOp StageLowering::kernel(plan::Kernel kernel, ArrayRef<Value> ins,
                                     Value out, ArrayRef<NamedAttribute> params,
                                     StringRef base) {
  SmallVector<Attribute> inRefs;
  for (Value v : ins)
    inRefs.push_back(ref(v));
  FlatSymbolRefAttr outRef =
      activation(out, base.empty() ? StringRef(plan::name(kernel)) : base);
  auto launch = exec::KernelOp::create(
      b, out.getLoc(), kernel, b.getArrayAttr(inRefs), b.getArrayAttr({outRef}),
      nullptr, params.empty() ? nullptr : b.getDictionaryAttr(params));
  tagLayer(launch);
  return launch;
}

void StageLowering::collective(exec::CollectiveKind kind,
                               dist::MeshAxisAttr axis, Value in, Value out,
                               std::optional<int64_t> dim, bool async) {
  FlatSymbolRefAttr input = ref(in);
  FlatSymbolRefAttr output;
  // A block argument's buffer is its input's, which may have other readers.
  if (kind == exec::CollectiveKind::all_reduce && in.hasOneUse() &&
      !isa<BlockArgument>(in)) {
    output = input; // in place: nothing else reads the partial sums
    buffers[out] = output;
  } else if (kind == exec::CollectiveKind::all_reduce) {
    output = activation(out, "all_reduce");
    exec::KernelOp::create(b, out.getLoc(), plan::Kernel::Copy,
                           b.getArrayAttr({input}), b.getArrayAttr({output}),
                           nullptr, nullptr);
    input = output;
  } else {
    output = activation(out, exec::stringifyCollectiveKind(kind));
  }
  auto launch =
      exec::CollectiveOp::create(b, out.getLoc(), kind, groupOf(axis), input,
                                 output, exec::Reduction::sum, dim, false);
  launch.setAsync(async);
  tagLayer(launch);
}

void StageLowering::lowerCollective(Operation *op, bool async) {
  if (auto ar = dyn_cast<dist::AllReduceOp>(op))
    return collective(exec::CollectiveKind::all_reduce, ar.getAxisAttr(),
                      ar.getInput(), ar.getResult(), std::nullopt, async);
  if (auto ag = dyn_cast<dist::AllGatherOp>(op))
    return collective(exec::CollectiveKind::all_gather, ag.getAxisAttr(),
                      ag.getInput(), ag.getResult(), ag.getDim(), async);
  auto rs = cast<dist::ReduceScatterOp>(op); // dist::isCollective's third
  collective(exec::CollectiveKind::reduce_scatter, rs.getAxisAttr(),
             rs.getInput(), rs.getResult(), rs.getDim(), async);
}

LogicalResult StageLowering::lowerBlock(tfm::BlockOp block) {
  Block &body = block.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), block.getInputs()))
    buffers[arg] = ref(input);
  std::optional<int64_t> outer = layer;
  layer = block.getLayer();
  for (Operation &inner : body.without_terminator())
    if (failed(lowerOp(&inner)))
      return failure();
  layer = outer;
  for (auto [result, value] :
       llvm::zip(block.getResults(), body.getTerminator()->getOperands()))
    buffers[result] = ref(value);
  return success();
}

// Activations replicated over tp cross a stage boundary as 1/tp slices,
// gathered again by the receivers (Megatron-LM's scatter/gather): each tp
// rank's link carries 1/tp of the bytes.
LogicalResult StageLowering::lowerSend(dist::SendOp send) {
  Value x = send.getInput();
  FlatSymbolRefAttr sent = ref(x);
  if (std::optional<RankedTensorType> slice = p2pSlice(x.getType())) {
    FlatSymbolRefAttr whole = sent;
    sent = newBuffer(whole.getValue().str() + ".slice", *slice,
                     exec::BufferKind::activation);
    exec::KernelOp::create(
        b, send.getLoc(), plan::Kernel::ShardSlice, b.getArrayAttr({whole}),
        b.getArrayAttr({sent}), nullptr,
        b.getDictionaryAttr({param("dim", b.getI64IntegerAttr(1)),
                             param("group", b.getStringAttr("tp"))}));
  }
  exec::SendOp::create(b, send.getLoc(), sent, exec::Peer::next);
  return success();
}

LogicalResult StageLowering::lowerRecv(dist::RecvOp recv) {
  Value x = recv.getResult();
  std::optional<RankedTensorType> slice = p2pSlice(x.getType());
  if (!slice) {
    exec::RecvOp::create(b, recv.getLoc(), activation(x, "recv"),
                         exec::Peer::prev);
    return success();
  }
  FlatSymbolRefAttr whole = activation(x, "recv");
  FlatSymbolRefAttr received = newBuffer(whole.getValue().str() + ".slice",
                                         *slice, exec::BufferKind::activation);
  exec::RecvOp::create(b, recv.getLoc(), received, exec::Peer::prev);
  exec::CollectiveOp::create(b, recv.getLoc(), exec::CollectiveKind::all_gather,
                             exec::Group::tp, received, whole,
                             exec::Reduction::sum, 1, false);
  return success();
}

// A scale that changes nothing is left out of params.
LogicalResult StageLowering::lowerEmbedding(Value table, Value tokens,
                                            Value result, int64_t parts,
                                            FloatAttr scale) {
  SmallVector<NamedAttribute> params = {
      param("vocab_parts", b.getI64IntegerAttr(parts))};
  if (scale.getValueAsDouble() != 1.0)
    params.push_back(param("scale", scale));
  kernel(plan::Kernel::Embedding, {table, tokens}, result, params);
  return success();
}

// A weight offset that changes nothing is left out of params.
LogicalResult StageLowering::lowerRmsNorm(tfm::RmsNormOp norm) {
  SmallVector<NamedAttribute> params = {param("eps", norm.getEpsAttr())};
  if (norm.getWeightOffset().convertToDouble() != 0.0)
    params.push_back(param("weight_offset", norm.getWeightOffsetAttr()));
  kernel(plan::Kernel::RmsNorm, {norm.getInput(), norm.getWeight()},
         norm.getResult(), params);
  return success();
}

LogicalResult StageLowering::lowerRotary(tfm::RotaryOp rotary) {
  int64_t seqLen = rotary.getInput().getType().getDimSize(1);
  tfm::RopeScalingAttr scaling = rotary.getScalingAttr();
  // Dynamic NTK is a base for the plan's sequence: plain RoPE with it.
  bool dynamic = scaling && scaling.getKind() == tfm::RopeScalingKind::dynamic;
  FloatAttr theta = dynamic ? b.getF64FloatAttr(scaling.dynamicTheta(
                                  rotary.getTheta().convertToDouble(),
                                  rotary.getRotaryDim(), seqLen))
                            : rotary.getThetaAttr();
  SmallVector<NamedAttribute> params = {
      param("num_heads", rotary.getNumHeadsAttr()),
      param("rotary_dim", rotary.getRotaryDimAttr()), param("theta", theta)};
  if (scaling && !dynamic) {
    tfm::RopeScalingKind kind = scaling.getKind();
    auto number = [&](StringRef key, StringRef field, const APFloat &v) {
      if (tfm::ropeScalingHasField(kind, field))
        params.push_back(param(key, b.getF64FloatAttr(v.convertToDouble())));
    };
    params.push_back(
        param("scaling", b.getStringAttr(tfm::stringifyRopeScalingKind(kind))));
    number("scaling_factor", "factor", scaling.getFactor());
    number("low_freq_factor", "low_freq_factor", scaling.getLowFreqFactor());
    number("high_freq_factor", "high_freq_factor", scaling.getHighFreqFactor());
    if (tfm::ropeScalingHasField(kind, "original_max_positions"))
      params.push_back(
          param("original_max_positions",
                b.getI64IntegerAttr(scaling.getOriginalMaxPositions())));
    number("beta_fast", "beta_fast", scaling.getBetaFast());
    number("beta_slow", "beta_slow", scaling.getBetaSlow());
    if (tfm::ropeScalingHasField(kind, "truncate"))
      params.push_back(param("truncate", b.getBoolAttr(scaling.getTruncate())));
    number("attention_factor", "attention_factor",
           scaling.getAttentionFactor());
    // LongRoPE's divisors for this sequence: the kernel needs one list.
    if (kind == tfm::RopeScalingKind::longrope)
      params.push_back(
          param("frequency_factors",
                b.getF64ArrayAttr(scaling.frequencyFactors(seqLen))));
  }
  kernel(plan::Kernel::Rotary, {rotary.getInput()}, rotary.getResult(), params);
  return success();
}

LogicalResult StageLowering::lowerAttention(tfm::AttentionOp attention) {
  SmallVector<NamedAttribute> params = {
      param("num_heads", attention.getNumHeadsAttr()),
      param("num_kv_heads", attention.getNumKvHeadsAttr()),
      param("causal", b.getBoolAttr(attention.getCausal()))};
  if (auto window = attention.getWindowAttr())
    params.push_back(param("window", window));
  // Besides o, the log-sum-exp of each query row's scores ([b, heads, s],
  // f32), which the backward reads instead of going over the keys again.
  Value o = attention.getResult();
  auto qType = cast<RankedTensorType>(attention.getQuery().getType());
  auto lseType = RankedTensorType::get({qType.getDimSize(0),
                                        int64_t(attention.getNumHeads()),
                                        qType.getDimSize(1)},
                                       b.getF32Type());
  exec::KernelOp launch =
      kernel(plan::Kernel::Attention,
             {attention.getQuery(), attention.getKey(), attention.getValue()},
             o, params);
  auto oRef = cast<FlatSymbolRefAttr>(launch.getOuts()[0]);
  FlatSymbolRefAttr lseRef = newBuffer(oRef.getValue().str() + ".lse", lseType,
                                       exec::BufferKind::activation);
  launch.setOutsAttr(b.getArrayAttr({oRef, lseRef}));
  return success();
}

LogicalResult StageLowering::lowerCrossEntropy(Operation *op) {
  Value logits = op->getOperand(0), labelsIn = op->getOperand(1);
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t parts = isa<dist::VocabCrossEntropyOp>(op) ? config.tp : 1;
  int64_t vocab = logitsType.getShape().back() * parts;
  if (auto padded = op->getAttrOfType<IntegerAttr>("vocab_size"))
    vocab = padded.getInt();
  auto rows =
      RankedTensorType::get(logitsType.getShape().drop_back(), b.getF32Type());
  SmallVector<int64_t> statsShape(rows.getShape());
  statsShape.push_back(2);
  auto stats = RankedTensorType::get(statsShape, b.getF32Type());
  NamedAttribute vocabParams[] = {
      param("vocab_parts", b.getI64IntegerAttr(parts)),
      param("vocab_size", b.getI64IntegerAttr(vocab))};
  // The row maxima and (sum of exponents, target logit) per token, each
  // reduced over the vocabulary shards.
  FlatSymbolRefAttr logitsRef = ref(logits), labelsRef = ref(labelsIn);
  FlatSymbolRefAttr maxRef =
      newBuffer("loss.max", rows, exec::BufferKind::activation);
  FlatSymbolRefAttr statsRef =
      newBuffer("loss.stats", stats, exec::BufferKind::activation);
  exec::Group tp = exec::Group::tp;
  exec::KernelOp::create(b, op->getLoc(), plan::Kernel::CeMax,
                         b.getArrayAttr({logitsRef}), b.getArrayAttr({maxRef}),
                         nullptr, b.getDictionaryAttr(vocabParams));
  if (parts > 1)
    exec::CollectiveOp::create(
        b, op->getLoc(), exec::CollectiveKind::all_reduce, tp, maxRef, maxRef,
        exec::Reduction::max, std::nullopt, false);
  exec::KernelOp::create(b, op->getLoc(), plan::Kernel::CeStats,
                         b.getArrayAttr({logitsRef, maxRef, labelsRef}),
                         b.getArrayAttr({statsRef}), nullptr,
                         b.getDictionaryAttr(vocabParams));
  if (parts > 1)
    exec::CollectiveOp::create(
        b, op->getLoc(), exec::CollectiveKind::all_reduce, tp, statsRef,
        statsRef, exec::Reduction::sum, std::nullopt, false);
  // Every micro-batch adds its share of the mean over the global batch.
  int64_t globalTokens = config.globalBatch() * logitsType.getDimSize(1);
  FlatSymbolRefAttr lossRef =
      newBuffer("loss", op->getResult(0).getType(), exec::BufferKind::scalar);
  exec::KernelOp::create(
      b, op->getLoc(), plan::Kernel::CeLoss, b.getArrayAttr({maxRef, statsRef}),
      b.getArrayAttr({lossRef}), b.getDenseBoolArrayAttr({true}),
      b.getDictionaryAttr(
          {param("scale", b.getF64FloatAttr(1.0 / globalTokens))}));
  buffers[op->getResult(0)] = lossRef;
  return success();
}

LogicalResult StageLowering::lowerOp(Operation *op) {
  if (dist::isCollective(op)) {
    lowerCollective(op, /*async=*/false);
    return success();
  }
  auto approximate = [&](tfm::GeluApproximation a) {
    return param("approximate",
                 b.getStringAttr(tfm::stringifyGeluApproximation(a)));
  };
  // A launch made is the op lowered.
  auto done = [](exec::KernelOp) { return success(); };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tfm::ParamOp p) {
        param(p);
        return success();
      })
      .Case([&](tfm::BlockOp block) { return lowerBlock(block); })
      .Case([&](dist::SendOp send) { return lowerSend(send); })
      .Case([&](dist::RecvOp recv) { return lowerRecv(recv); })
      // The collective starts on the comm stream; its buffer is ready at
      // the wait.
      .Case([&](dist::AsyncOp start) {
        Operation *inner = start.getCollective();
        lowerCollective(inner, /*async=*/true);
        buffers[start.getToken()] = ref(inner->getResult(0));
        return success();
      })
      .Case([&](dist::WaitOp wait) {
        FlatSymbolRefAttr output = ref(wait.getToken());
        buffers[wait.getResult()] = output;
        tagLayer(exec::WaitOp::create(b, wait.getLoc(), output));
        return success();
      })
      .Case([&](dist::ShardSliceOp slice) {
        return done(kernel(
            plan::Kernel::ShardSlice, {slice.getInput()}, slice.getResult(),
            {param("dim", b.getI64IntegerAttr(slice.getDim())),
             param("group", b.getStringAttr(dist::stringifyMeshAxis(
                                slice.getAxisAttr().getValue())))}));
      })
      .Case([&](tfm::EmbeddingOp emb) {
        return lowerEmbedding(emb.getTable(), emb.getTokens(), emb.getResult(),
                              1, emb.getScaleAttr());
      })
      .Case([&](dist::VocabEmbeddingOp emb) {
        return lowerEmbedding(emb.getTable(), emb.getTokens(), emb.getResult(),
                              config.tp, emb.getScaleAttr());
      })
      .Case([&](tfm::PositionEmbeddingOp pos) {
        return done(kernel(plan::Kernel::PositionEmbedding,
                           {pos.getInput(), pos.getTable()}, pos.getResult()));
      })
      .Case([&](tfm::RmsNormOp norm) { return lowerRmsNorm(norm); })
      .Case([&](tfm::LayerNormOp norm) {
        SmallVector<Value> ins = {norm.getInput(), norm.getWeight()};
        if (norm.getBias())
          ins.push_back(norm.getBias());
        return done(kernel(plan::Kernel::LayerNorm, ins, norm.getResult(),
                           {param("eps", norm.getEpsAttr())}));
      })
      .Case([&](tfm::LinearOp linear) {
        SmallVector<Value> ins = {linear.getInput(), linear.getWeight()};
        if (linear.getBias())
          ins.push_back(linear.getBias());
        return done(kernel(plan::Kernel::Linear, ins, linear.getResult()));
      })
      .Case([&](tfm::LmHeadOp head) {
        return done(kernel(plan::Kernel::Linear,
                           {head.getInput(), head.getWeight()},
                           head.getResult(), {}, "lm_head"));
      })
      .Case([&](tfm::BiasAddOp bias) {
        return done(kernel(plan::Kernel::BiasAdd,
                           {bias.getInput(), bias.getBias()},
                           bias.getResult()));
      })
      .Case([&](tfm::RotaryOp rotary) { return lowerRotary(rotary); })
      .Case(
          [&](tfm::AttentionOp attention) { return lowerAttention(attention); })
      .Case([&](tfm::GeluOp gelu) {
        return done(kernel(plan::Kernel::Gelu, {gelu.getInput()},
                           gelu.getResult(),
                           {approximate(gelu.getApproximate())}));
      })
      .Case([&](tfm::SiluOp silu) {
        return done(
            kernel(plan::Kernel::Silu, {silu.getInput()}, silu.getResult()));
      })
      .Case([&](tfm::SwigluOp swiglu) {
        return done(kernel(plan::Kernel::Swiglu,
                           {swiglu.getGate(), swiglu.getUp()},
                           swiglu.getResult()));
      })
      .Case([&](tfm::GegluOp geglu) {
        return done(kernel(plan::Kernel::Geglu,
                           {geglu.getGate(), geglu.getUp()}, geglu.getResult(),
                           {approximate(geglu.getApproximate())}));
      })
      .Case([&](tfm::AddOp add) {
        return done(kernel(plan::Kernel::Add,
                           SmallVector<Value>(add.getInputs()),
                           add.getResult()));
      })
      .Case<tfm::CrossEntropyOp, dist::VocabCrossEntropyOp>(
          [&](Operation *) { return lowerCrossEntropy(op); })
      .Default([](Operation *op) {
        return op->emitOpError("has no exec lowering");
      });
}

LogicalResult StageLowering::lower(tfm::ModelOp model) {
  Block &body = model.getBodyBlock();
  auto tokensType = cast<RankedTensorType>(model.getTokens().getType());
  if (config.globalBatch() <= 0)
    return model.emitOpError("the strategy has no global batch");
  for (Operation &op : body.without_terminator()) {
    auto stage = dyn_cast<dist::StageOp>(op);
    if (!stage)
      return op.emitOpError("is outside every dist.stage; run "
                            "dist-split-stages before dist-lower-to-exec");
    program = programFor(stage.getRank());
    // Each program reads the tokens and labels it uses.
    buffers.erase(model.getTokens());
    buffers.erase(model.getLabels());
    b.setInsertionPointToEnd(&program.getBody().front());
    phase = exec::PhaseOp::create(b, stage.getLoc(), exec::PhaseKind::forward,
                                  b.getI64IntegerAttr(stage.getChunk()));
    firstPhase.try_emplace(program, phase);
    b.createBlock(&phase.getBody());
    auto input = [&](Value v, StringRef name, exec::BufferKind kind) {
      if (!takenNames[program].contains(name))
        newBuffer(name, tokensType, kind);
      buffers[v] = FlatSymbolRefAttr::get(b.getContext(), name);
    };
    input(model.getTokens(), "tokens", exec::BufferKind::tokens);
    input(model.getLabels(), "labels", exec::BufferKind::labels);
    for (Operation &inner : stage.getBody().front().without_terminator())
      if (failed(lowerOp(&inner)))
        return failure();
  }
  // Buffers nobody reads (tokens on a middle stage) are dropped.
  for (auto &[rank, prog] : programs) {
    llvm::DenseSet<StringAttr> used;
    prog.walk([&](Operation *op) {
      if (isa<exec::BufferOp>(op))
        return;
      for (NamedAttribute attr : op->getAttrs())
        attr.getValue().walk(
            [&](FlatSymbolRefAttr ref) { used.insert(ref.getAttr()); });
    });
    for (auto buffer : llvm::make_early_inc_range(
             prog.getBody().front().getOps<exec::BufferOp>()))
      if (!used.contains(buffer.getSymNameAttr()))
        buffer.erase();
  }
  return success();
}

struct DistLowerToExecPass : impl::DistLowerToExecBase<DistLowerToExecPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::StrategyAttr strategy = requireStrategy(module, "dist-lower-to-exec");
    if (!strategy)
      return signalPassFailure();
    ParallelConfig config = fromStrategyAttr(strategy);
    SmallVector<tfm::ModelOp> models(module.getOps<tfm::ModelOp>());
    if (models.size() != 1) {
      module.emitError("dist-lower-to-exec needs exactly one tfm.model, found ")
          << models.size();
      return signalPassFailure();
    }
    tfm::ModelOp model = models.front();
    if (failed(StageLowering(module, config).lower(model)))
      return signalPassFailure();
    module->setAttr(
        "exec.seq_len",
        IntegerAttr::get(
            IntegerType::get(&getContext(), 64),
            cast<RankedTensorType>(model.getTokens().getType()).getDimSize(1)));
    module->setAttr("exec.model",
                    StringAttr::get(&getContext(), model.getSymName()));
    model.erase();
  }
};

} // namespace
} // namespace partita
