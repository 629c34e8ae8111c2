//===- GraphBuilder.cpp - ModelSpec to tfm IR -----------------------------===//
//
// Emits the forward graph of one training step. Each layer is pre-norm:
//
//   sequential:  r = x + attn(norm1(x));  y = r + mlp(norm2(r))
//   parallel:    y = x + attn(norm1(x)) + mlp(norm2(x))        (GPT-NeoX)
//
// With qk_norm, each query and key head is normalised over its head_dim
// before the rotary embedding (Qwen3): a norm whose weight spans one head.
//
// Parameter names are canonical ("layers.3.attn.q.weight"), independent of
// the source format, so that checkpoints and shardings name tensors alike.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/GraphBuilder.h"
#include "dialects/tfm/TfmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <cmath>

using namespace mlir;

namespace partita {
namespace {

class GraphBuilder {
public:
  GraphBuilder(const ModelSpec &spec, MLIRContext &ctx)
      : spec(spec), m(spec.model), b(&ctx),
        fileLoc(FileLineColLoc::get(&ctx, spec.sourceFile, 0, 0)) {
    switch (spec.training.dtype) {
    case DType::BF16:
      elementType = b.getBF16Type();
      break;
    case DType::F16:
      elementType = b.getF16Type();
      break;
    case DType::F32:
      elementType = b.getF32Type();
      break;
    }
  }

  OwningOpRef<ModuleOp> build();

private:
  /// Ops are located at the spec file, named after the part of the model
  /// they implement.
  Location loc(const Twine &name) {
    return NameLoc::get(b.getStringAttr(name), fileLoc);
  }
  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, elementType);
  }
  RankedTensorType activation(int64_t features) {
    return tensor({spec.training.globalBatch, spec.training.seqLen, features});
  }

  Value param(const Twine &name, ArrayRef<int64_t> shape, tfm::InitKind init,
              double std = 0.0) {
    std::string n = name.str();
    FloatAttr stdAttr =
        init == tfm::InitKind::normal ? b.getF64FloatAttr(std) : FloatAttr();
    return tfm::ParamOp::create(b, loc(n), tensor(shape), b.getStringAttr(n),
                                tfm::InitKindAttr::get(b.getContext(), init),
                                stdAttr);
  }

  /// A linear layer [in -> out] named `prefix`, with an optional bias. Output
  /// projections get the 1/sqrt(2 * layers) scaled init of GPT-2/Megatron.
  Value linear(Value x, const Twine &prefix, int64_t in, int64_t out, bool bias,
               bool outputProjection = false) {
    double std = m.initStd;
    if (outputProjection && m.scaledOutputInit)
      std /= std::sqrt(2.0 * m.numLayers);
    Value w = param(prefix + ".weight", {out, in}, tfm::InitKind::normal, std);
    Value bv =
        bias ? param(prefix + ".bias", {out}, tfm::InitKind::zeros) : Value();
    auto xType = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(xType.getShape());
    shape.back() = out;
    return tfm::LinearOp::create(b, loc(prefix), tensor(shape), x, w, bv);
  }

  /// The model's norm named `prefix`, over spans of `h` channels of the last
  /// dimension (by default, all of it).
  Value norm(Value x, const Twine &prefix, int64_t h = 0) {
    if (h == 0)
      h = m.hiddenSize;
    // A unit offset's weights start at zero: the scale starts at one.
    Value w =
        param(prefix + ".weight", {h},
              m.normUnitOffset ? tfm::InitKind::zeros : tfm::InitKind::ones);
    FloatAttr eps = b.getF64FloatAttr(m.normEps);
    if (m.norm == NormKind::RmsNorm)
      return tfm::RmsNormOp::create(
          b, loc(prefix), x.getType(), x, w, eps,
          b.getF64FloatAttr(m.normUnitOffset ? 1.0 : 0.0));
    Value bias = m.normBias ? param(prefix + ".bias", {h}, tfm::InitKind::zeros)
                            : Value();
    return tfm::LayerNormOp::create(b, loc(prefix), x.getType(), x, w, bias,
                                    eps);
  }

  tfm::RopeScalingAttr ropeScaling(const RopeScaling &s) {
    using K = RopeScaling::Kind;
    tfm::RopeScalingKind kind =
        s.kind == K::Llama3     ? tfm::RopeScalingKind::llama3
        : s.kind == K::Yarn     ? tfm::RopeScalingKind::yarn
        : s.kind == K::LongRope ? tfm::RopeScalingKind::longrope
        : s.kind == K::Dynamic  ? tfm::RopeScalingKind::dynamic
                                : tfm::RopeScalingKind::linear;
    return tfm::RopeScalingAttr::get(b.getContext(), kind, s);
  }

  Value rotary(Value x, const Twine &name, int64_t heads) {
    tfm::RopeScalingAttr scaling;
    if (m.ropeScaling)
      scaling = ropeScaling(*m.ropeScaling);
    return tfm::RotaryOp::create(b, loc(name), x.getType(), x,
                                 b.getI64IntegerAttr(heads),
                                 b.getI64IntegerAttr(m.rotaryDim()),
                                 b.getF64FloatAttr(m.ropeTheta), scaling);
  }

  Value attention(Value x, const std::string &layer, int64_t index);
  Value mlp(Value x, const std::string &layer);
  Value block(Value x, int64_t index);

  const ModelSpec &spec;
  const ModelConfig &m;
  OpBuilder b;
  Location fileLoc;
  Type elementType;
};

Value GraphBuilder::attention(Value x, const std::string &layer,
                              int64_t index) {
  std::string p = layer + ".attn";
  int64_t h = m.hiddenSize, hd = m.headDimension();
  int64_t qWidth = m.numHeads * hd, kvWidth = m.kvHeads() * hd;
  Value q = linear(x, p + ".q", h, qWidth, m.qkvBias);
  Value k = linear(x, p + ".k", h, kvWidth, m.qkvBias);
  Value v = linear(x, p + ".v", h, kvWidth, m.qkvBias);
  if (m.qkNorm) {
    q = norm(q, p + ".q_norm", m.qkNormOverProjection ? qWidth : hd);
    k = norm(k, p + ".k_norm", m.qkNormOverProjection ? kvWidth : hd);
  }
  if (m.position == PositionEmbedding::Rope) {
    q = rotary(q, p + ".rotary_q", m.numHeads);
    k = rotary(k, p + ".rotary_k", m.kvHeads());
  }
  bool slides = m.slidingLayers.empty() ? index >= m.slidingWindowFromLayer
                                        : bool(m.slidingLayers[index]);
  IntegerAttr window = m.slidingWindow && slides
                           ? b.getI64IntegerAttr(*m.slidingWindow)
                           : IntegerAttr();
  Value core = tfm::AttentionOp::create(b, loc(p + ".core"), q.getType(), q, k,
                                        v, b.getI64IntegerAttr(m.numHeads),
                                        b.getI64IntegerAttr(m.kvHeads()),
                                        b.getUnitAttr(), window);
  return linear(core, p + ".out", qWidth, h, m.attnOutBias,
                /*outputProjection=*/true);
}

Value GraphBuilder::mlp(Value x, const std::string &layer) {
  std::string p = layer + ".mlp";
  int64_t h = m.hiddenSize, f = m.ffnHiddenSize;
  Value hidden;
  auto approximate = tfm::GeluApproximationAttr::get(
      b.getContext(), m.activation == Activation::GeluTanh ||
                              m.activation == Activation::GeGluTanh
                          ? tfm::GeluApproximation::tanh
                          : tfm::GeluApproximation::none);
  if (isGated(m.activation)) {
    Value gate = linear(x, p + ".gate", h, f, m.mlpBias);
    Value up = linear(x, p + ".up", h, f, m.mlpBias);
    if (m.activation == Activation::SwiGlu)
      hidden =
          tfm::SwigluOp::create(b, loc(p + ".act"), gate.getType(), gate, up);
    else
      hidden = tfm::GegluOp::create(b, loc(p + ".act"), gate.getType(), gate,
                                    up, approximate);
  } else {
    Value up = linear(x, p + ".up", h, f, m.mlpBias);
    hidden =
        tfm::GeluOp::create(b, loc(p + ".act"), up.getType(), up, approximate);
  }
  return linear(hidden, p + ".down", f, h, m.mlpBias,
                /*outputProjection=*/true);
}

Value GraphBuilder::block(Value x, int64_t index) {
  std::string layer = "layers." + std::to_string(index);
  Type type = x.getType();
  auto op = tfm::BlockOp::create(b, loc(layer), TypeRange{type}, index,
                                 ValueRange{x});
  OpBuilder::InsertionGuard guard(b);
  Block *body = b.createBlock(&op.getBody(), {}, {type}, {loc(layer)});
  Value in = body->getArgument(0);

  Value out;
  if (m.postNorm) {
    Value attn = norm(attention(in, layer, index), layer + ".post_attn_norm");
    Value mid = tfm::AddOp::create(b, loc(layer + ".attn_residual"), type,
                                   ValueRange{in, attn});
    Value ffn = norm(mlp(mid, layer), layer + ".post_mlp_norm");
    out = tfm::AddOp::create(b, loc(layer + ".mlp_residual"), type,
                             ValueRange{mid, ffn});
    tfm::YieldOp::create(b, loc(layer), ValueRange{out});
    return op.getResult(0);
  }
  Value attn = attention(norm(in, layer + ".attn_norm"), layer, index);
  if (m.parallelResidual) {
    Value ffn = mlp(norm(in, layer + ".mlp_norm"), layer);
    out = tfm::AddOp::create(b, loc(layer + ".residual"), type,
                             ValueRange{in, attn, ffn});
  } else {
    Value mid = tfm::AddOp::create(b, loc(layer + ".attn_residual"), type,
                                   ValueRange{in, attn});
    Value ffn = mlp(norm(mid, layer + ".mlp_norm"), layer);
    out = tfm::AddOp::create(b, loc(layer + ".mlp_residual"), type,
                             ValueRange{mid, ffn});
  }
  tfm::YieldOp::create(b, loc(layer), ValueRange{out});
  return op.getResult(0);
}

OwningOpRef<ModuleOp> GraphBuilder::build() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  auto model = tfm::ModelOp::create(b, loc(spec.name), spec.name);
  const TrainingConfig &t = spec.training;
  auto tokenType =
      RankedTensorType::get({t.globalBatch, t.seqLen}, b.getI32Type());
  Block *body = b.createBlock(&model.getBody(), {}, {tokenType, tokenType},
                              {loc("tokens"), loc("labels")});
  Value tokens = body->getArgument(0), labels = body->getArgument(1);

  int64_t h = m.hiddenSize, v = m.vocabSize;
  Value table =
      param("embed.tokens.weight", {v, h}, tfm::InitKind::normal, m.initStd);
  Value x = tfm::EmbeddingOp::create(
      b, loc("embed.tokens"), activation(h), table, tokens,
      b.getF64FloatAttr(m.embeddingMultiplier()));
  if (m.position == PositionEmbedding::Learned) {
    Value positions =
        param("embed.positions.weight", {m.maxPositionEmbeddings, h},
              tfm::InitKind::normal, m.initStd);
    x = tfm::PositionEmbeddingOp::create(b, loc("embed.positions"), x.getType(),
                                         x, positions);
  }
  for (int64_t i = 0; i < m.numLayers; ++i)
    x = block(x, i);
  x = norm(x, "final_norm");
  Value head = m.tieEmbeddings ? table
                               : param("lm_head.weight", {v, h},
                                       tfm::InitKind::normal, m.initStd);
  Value logits =
      tfm::LmHeadOp::create(b, loc("lm_head"), activation(v), x, head);
  Value loss = tfm::CrossEntropyOp::create(
      b, loc("loss"), RankedTensorType::get({}, b.getF32Type()), logits,
      labels);
  tfm::YieldOp::create(b, loc("loss"), ValueRange{loss});

  // The optimizer settings travel in the IR to plan.json.
  const OptimizerConfig &opt = spec.training.optimizer;
  (*module)->setAttr(
      tfm::kOptimizerAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("lr", b.getF64FloatAttr(opt.lr)),
           b.getNamedAttr("min_lr", b.getF64FloatAttr(opt.minLr)),
           b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(opt.warmupSteps)),
           b.getNamedAttr("decay_steps", b.getI64IntegerAttr(opt.decaySteps)),
           b.getNamedAttr("decay", b.getStringAttr(opt.decay)),
           b.getNamedAttr("beta1", b.getF64FloatAttr(opt.beta1)),
           b.getNamedAttr("beta2", b.getF64FloatAttr(opt.beta2)),
           b.getNamedAttr("eps", b.getF64FloatAttr(opt.eps)),
           b.getNamedAttr("weight_decay", b.getF64FloatAttr(opt.weightDecay)),
           b.getNamedAttr("clip_norm", b.getF64FloatAttr(opt.clipNorm))}));
  // A model imported without a training step says so, for the summary.
  if (spec.training.stepMissing)
    (*module)->setAttr(tfm::kStepMissingAttrName, b.getUnitAttr());
  // Pins travel in the IR, so the search stays a function of its input.
  if (!spec.strategyPins.empty())
    (*module)->setAttr("dist.strategy_pins",
                       b.getStringAttr(spec.strategyPins));
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace

OwningOpRef<ModuleOp> buildModelModule(const ModelSpec &spec,
                                       MLIRContext &context) {
  context.getOrLoadDialect<tfm::TfmDialect>();
  return GraphBuilder(spec, context).build();
}

llvm::Expected<OwningOpRef<ModuleOp>>
importModelFile(StringRef path, const TrainingOverrides &overrides,
                MLIRContext &context) {
  llvm::Expected<ModelSpec> spec = readModelSpecFile(path, overrides);
  if (!spec)
    return spec.takeError();
  OwningOpRef<ModuleOp> module = buildModelModule(*spec, context);
  if (!module)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s: the imported model graph does not verify (see above)",
        path.str().c_str());
  return module;
}

DType dtypeOf(Type elementType) {
  return elementType.isBF16()  ? DType::BF16
         : elementType.isF16() ? DType::F16
                               : DType::F32;
}

} // namespace partita
