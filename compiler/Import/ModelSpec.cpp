//===- ModelSpec.cpp - Partita model specs and HF config.json import ------===//
//
// Two readers fill one ModelConfig: the Hugging Face reader maps each
// supported architecture's config.json keys, and the spec reader applies
// Partita's canonical keys (on their own, or over an HF config named by
// "hf_config"). One validation pass then checks the cross-field rules and
// reports each problem at the key it came from.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/ModelSpec.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "compiler/Import/JsonReader.h"
#include "dialects/tfm/TfmDialect.h"

#include "support/Format.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>

using json = nlohmann::json;
using llvm::StringRef;

namespace partita {

StringRef toString(NormKind kind) {
  return kind == NormKind::LayerNorm ? "layer_norm" : "rms_norm";
}
StringRef toString(Activation kind) {
  switch (kind) {
  case Activation::Gelu:
    return "gelu";
  case Activation::GeluTanh:
    return "gelu_tanh";
  case Activation::SwiGlu:
    return "swiglu";
  case Activation::GeGlu:
    return "geglu";
  case Activation::GeGluTanh:
    return "geglu_tanh";
  }
  return "";
}
StringRef toString(PositionEmbedding kind) {
  return kind == PositionEmbedding::Learned ? "learned" : "rope";
}

int64_t ModelConfig::rotaryDim() const {
  // int(head_dim * fraction), as GPT-NeoX computes it; validate() requires
  // an even result.
  return static_cast<int64_t>(headDimension() * rotaryFraction);
}

double ModelConfig::embeddingMultiplier() const {
  return embeddingScaleSqrtHidden ? std::sqrt(double(hiddenSize))
                                  : embeddingScale;
}

namespace {

/// Upper bound on any single model dimension; keeps products of shapes far
/// from int64 overflow while allowing every real model.
constexpr int64_t kMaxDim = int64_t(1) << 24;
/// The deepest real models have a few hundred layers; the bound keeps a
/// mistyped depth from building millions of ops.
constexpr int64_t kMaxLayers = 10000;
/// A standard deviation that stays a positive double after the output
/// projections' 1/sqrt(2 * layers) scaling.
constexpr double kMinInitStd = 1e-30;

/// Where each canonical field got its value, for cross-field messages.
using FieldSources = llvm::StringMap<std::string>;

/// Reads `key` as an integer into `field`, recording where it came from.
template <typename T>
void readInto(ObjectReader &r, StringRef key, StringRef canonical, T &field,
              FieldSources &sources, ObjectReader::Need need, int64_t min = 1,
              int64_t max = kMaxDim) {
  if (auto v = r.integer(key, need, min, max)) {
    field = *v;
    sources[canonical] = r.where(key);
  }
}

void readBool(ObjectReader &r, StringRef key, bool &field) {
  if (auto v = r.boolean(key, ObjectReader::Optional))
    field = *v;
}

void readSlidingWindow(ObjectReader &r, ModelConfig &cfg, FieldSources &src,
                       ObjectReader::Need need) {
  if (auto window = r.integer("sliding_window", need, 1, kMaxDim)) {
    cfg.slidingWindow = *window;
    src["sliding_window"] = r.where("sliding_window");
  }
}

//===----------------------------------------------------------------------===//
// Rope scaling (same shape in HF configs and in specs)
//===----------------------------------------------------------------------===//

/// The magnitude YaRN gives the rotated channels at `factor` (Hugging
/// Face's get_mscale).
double yarnMagnitude(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

/// The scaling's kind: rope_type (newer) or type (older); configs saved by
/// newer versions carry both. None where it is missing or wrong.
std::optional<std::string> readRopeType(ObjectReader &r,
                                        const ModelConfig &cfg) {
  using N = ObjectReader::Need;
  constexpr StringRef kinds[] = {"default",  "linear",  "llama3", "yarn",
                                 "longrope", "dynamic", "su"};
  std::optional<std::string> type;
  if (r.has("rope_type"))
    type = r.oneOf("rope_type", N::Required, kinds);
  if (r.has("type")) {
    std::optional<std::string> old = r.oneOf("type", N::Required, kinds);
    if (type && old && *old != *type)
      r.errors().add(r.where("type"), "\"" + *old +
                                          "\" disagrees with rope_type \"" +
                                          *type + "\"");
    else if (!type)
      type = old;
  }
  if (!r.has("rope_type") && !r.has("type"))
    r.errors().add(r.where("rope_type"), "required field is missing");
  // Phi-3's first configs name LongRoPE "su"; HF's Phi-3 reads it so.
  if (type && *type == "su") {
    if (cfg.architecture == "Phi3ForCausalLM")
      return std::string("longrope");
    r.errors().add(r.where(r.has("rope_type") ? "rope_type" : "type"),
                   "\"su\" is Phi-3's old name for longrope; give "
                   "\"longrope\"");
  }
  return type;
}

/// The pretrained length a scaling of `type` stretches.
void readPretrainedLength(ObjectReader &r, const ModelConfig &cfg,
                          StringRef type, RopeScaling &scaling,
                          std::optional<int64_t> outerOriginalMax) {
  using N = ObjectReader::Need;
  StringRef key = "original_max_position_embeddings";
  if (type == "dynamic") {
    // transformers' dynamic NTK takes max_position_embeddings as the
    // pretrained length, whatever else the config says.
    std::optional<int64_t> given = r.integer(key, N::Optional, 1, kMaxDim);
    if (!given)
      given = outerOriginalMax;
    scaling.originalMaxPositions = cfg.maxPositionEmbeddings;
    if (cfg.maxPositionEmbeddings == 0)
      r.errors().add(r.where("rope_type"),
                     "dynamic scaling needs max_position_embeddings, the "
                     "pretrained length it scales beyond");
    else if (given && *given != cfg.maxPositionEmbeddings)
      r.errors().add(r.where(key),
                     llvm::Twine(*given) +
                         " differs from max_position_embeddings " +
                         llvm::Twine(cfg.maxPositionEmbeddings) +
                         ", which transformers' dynamic scaling takes as the "
                         "pretrained length");
    return;
  }
  if (type == "linear")
    return;
  // rope_scaling's, else the top-level one, else (yarn and longrope, as
  // transformers 5) max_position_embeddings.
  bool needed = type == "llama3" && !outerOriginalMax;
  std::optional<int64_t> inner =
      r.integer(key, needed ? N::Required : N::Optional, 1, kMaxDim);
  if (inner && outerOriginalMax && *inner != *outerOriginalMax)
    r.errors().add(r.where(key), "disagrees with the top-level " + key.str() +
                                     " " + llvm::Twine(*outerOriginalMax));
  if (std::optional<int64_t> given = inner ? inner : outerOriginalMax)
    scaling.originalMaxPositions = *given;
  else if (type != "llama3")
    scaling.originalMaxPositions = cfg.maxPositionEmbeddings;
  if (scaling.originalMaxPositions == 0 && type != "llama3")
    r.errors().add(r.where(key), "required field is missing (and there "
                                 "is no max_position_embeddings to take "
                                 "it from)");
}

void readLlama3Scaling(ObjectReader &r, RopeScaling &scaling) {
  using N = ObjectReader::Need;
  scaling.kind = RopeScaling::Kind::Llama3;
  if (auto v = r.number("low_freq_factor", N::Required, 0.0, 1e308, true))
    scaling.lowFreqFactor = *v;
  if (auto v = r.number("high_freq_factor", N::Required, 0.0, 1e308, true))
    scaling.highFreqFactor = *v;
  if (scaling.highFreqFactor <= scaling.lowFreqFactor)
    r.errors().add(r.where("high_freq_factor"),
                   "must be greater than low_freq_factor");
}

void readYarnScaling(ObjectReader &r, RopeScaling &scaling,
                     std::optional<double> attentionFactor) {
  using N = ObjectReader::Need;
  scaling.kind = RopeScaling::Kind::Yarn;
  if (auto v = r.number("beta_fast", N::Optional, 0.0, 1e308, true))
    scaling.betaFast = *v;
  if (auto v = r.number("beta_slow", N::Optional, 0.0, 1e308, true))
    scaling.betaSlow = *v;
  if (scaling.betaFast < scaling.betaSlow)
    r.errors().add(r.where("beta_fast"), "must be at least beta_slow (" +
                                             formatNumber(scaling.betaSlow) +
                                             "), got " +
                                             formatNumber(scaling.betaFast));
  if (auto v = r.boolean("truncate", N::Optional))
    scaling.truncate = *v;
  // DeepSeek's pair: the magnitude is their ratio when both are nonzero.
  std::optional<double> mscale = r.number("mscale", N::Optional, 0.0);
  std::optional<double> mscaleAllDim =
      r.number("mscale_all_dim", N::Optional, 0.0);
  if (attentionFactor)
    scaling.attentionFactor = *attentionFactor;
  else if (mscale && mscaleAllDim && *mscale != 0 && *mscaleAllDim != 0)
    scaling.attentionFactor = yarnMagnitude(scaling.factor, *mscale) /
                              yarnMagnitude(scaling.factor, *mscaleAllDim);
  else
    scaling.attentionFactor = yarnMagnitude(scaling.factor, 1.0);
}

void readLongRopeScaling(ObjectReader &r, const ModelConfig &cfg,
                         RopeScaling &scaling, bool factorGiven,
                         std::optional<double> attentionFactor) {
  using N = ObjectReader::Need;
  scaling.kind = RopeScaling::Kind::LongRope;
  if (auto v = r.positiveNumbers("short_factor", N::Required))
    scaling.shortFactor.assign(v->begin(), v->end());
  if (auto v = r.positiveNumbers("long_factor", N::Required))
    scaling.longFactor.assign(v->begin(), v->end());
  if (!scaling.shortFactor.empty() && !scaling.longFactor.empty() &&
      scaling.shortFactor.size() != scaling.longFactor.size())
    r.errors().add(r.where("long_factor"),
                   "has " + llvm::Twine(scaling.longFactor.size()) +
                       " factors; short_factor has " +
                       llvm::Twine(scaling.shortFactor.size()));
  // Without a factor, the context's growth over the pretrained length.
  int64_t original = scaling.originalMaxPositions;
  if (!factorGiven)
    scaling.factor = original > 0 && cfg.maxPositionEmbeddings > original
                         ? double(cfg.maxPositionEmbeddings) / double(original)
                         : 1.0;
  if (attentionFactor)
    scaling.attentionFactor = *attentionFactor;
  else if (scaling.factor > 1.0 && original > 1)
    scaling.attentionFactor =
        std::sqrt(1.0 + std::log(scaling.factor) / std::log(double(original)));
  else if (scaling.factor > 1.0 && original == 1)
    r.errors().add(r.where("original_max_position_embeddings"),
                   "1 leaves LongRoPE's default attention factor "
                   "undefined; give attention_factor");
}

/// The scaling of rope_scaling's object `r`, or of HF's rope_parameters,
/// whose other keys (`alsoRead`) the caller has read. `outerOriginalMax` is
/// an HF config's top-level original_max_position_embeddings (Phi-3 keeps
/// it there), which transformers 5 moves into the rope parameters. Every
/// default a later field of the config cannot change is resolved here, as
/// transformers resolves it: cfg.maxPositionEmbeddings is read before.
void readRopeScalingObject(ObjectReader &r, ModelConfig &cfg,
                           llvm::ArrayRef<StringRef> alsoRead = {},
                           std::optional<int64_t> outerOriginalMax = {}) {
  using N = ObjectReader::Need;
  std::optional<std::string> type = readRopeType(r, cfg);
  if (!type || *type == "default") {
    llvm::SmallVector<StringRef> known(alsoRead);
    known.push_back("factor");
    r.rejectUnknownKeys(known);
    return;
  }
  RopeScaling scaling;
  bool longrope = *type == "longrope";
  std::optional<double> factor =
      r.number("factor", longrope ? N::Optional : N::Required, 1.0);
  if (factor)
    scaling.factor = *factor;
  readPretrainedLength(r, cfg, *type, scaling, outerOriginalMax);
  std::optional<double> attentionFactor;
  if (*type == "yarn" || longrope)
    attentionFactor =
        r.number("attention_factor", N::Optional, 0.0, 1e308, true);
  if (*type == "llama3")
    readLlama3Scaling(r, scaling);
  else if (*type == "yarn")
    readYarnScaling(r, scaling, attentionFactor);
  else if (*type == "dynamic")
    scaling.kind = RopeScaling::Kind::Dynamic;
  else if (longrope)
    readLongRopeScaling(r, cfg, scaling, factor.has_value(), attentionFactor);
  r.rejectUnknownKeys(alsoRead);
  cfg.ropeScaling = scaling;
}

void readRopeScaling(ObjectReader &parent, StringRef key, ModelConfig &cfg,
                     FieldSources &sources,
                     std::optional<int64_t> outerOriginalMax = {}) {
  std::optional<ObjectReader> r = parent.object(key, ObjectReader::Optional);
  if (!r)
    return;
  sources["rope_scaling"] = parent.where(key);
  readRopeScalingObject(*r, cfg, {}, outerOriginalMax);
}

/// Why a partial rotary factor is refused where HF rotates whole heads.
constexpr const char *kWholeHeads =
    "this architecture's HF code rotates whole heads; a partial rotary "
    "factor is not supported for it";

/// HF's rope_parameters (transformers 5 saves the rotary base, its scaling
/// and a partial rotary factor in one object, in place of the top-level
/// keys): read after them, it is an error where they disagree. `thetaKey`
/// and `fractionKey` name the top-level keys the architecture reads; an
/// architecture whose HF code rotates whole heads has no `fractionKey`.
void readRopeParameters(ObjectReader &parent, ModelConfig &cfg,
                        FieldSources &sources, StringRef thetaKey,
                        StringRef fractionKey,
                        std::optional<int64_t> outerOriginalMax) {
  std::optional<ObjectReader> r =
      parent.object("rope_parameters", ObjectReader::Optional);
  if (!r)
    return;
  if (cfg.ropeScaling)
    r->errors().add(parent.where("rope_parameters"),
                    "both rope_scaling and rope_parameters are given; give "
                    "the rotary scaling in one of them");
  // Its value of `key`, which must agree with the top-level `topKey`.
  auto value = [&](StringRef key, StringRef topKey,
                   double max) -> std::optional<double> {
    std::optional<double> v =
        r->number(key, ObjectReader::Optional, 0.0, max, true);
    if (v && !topKey.empty() && parent.has(topKey) &&
        parent.number(topKey, ObjectReader::Optional, 0.0, max, true) != *v)
      r->errors().add(r->where(key),
                      "disagrees with the top-level " + topKey.str());
    return v;
  };
  if (auto theta = value("rope_theta", thetaKey, 1e308))
    cfg.ropeTheta = *theta;
  if (auto fraction = value("partial_rotary_factor", fractionKey, 1.0)) {
    if (fractionKey.empty() && *fraction != 1.0)
      r->errors().add(r->where("partial_rotary_factor"), kWholeHeads);
    cfg.rotaryFraction = *fraction;
    sources["rotary_fraction"] = r->where("partial_rotary_factor");
  }
  sources["rope_scaling"] = parent.where("rope_parameters");
  readRopeScalingObject(*r, cfg, {"rope_theta", "partial_rotary_factor"},
                        outerOriginalMax);
}

//===----------------------------------------------------------------------===//
// Hugging Face config.json
//===----------------------------------------------------------------------===//

constexpr StringRef kSupportedArchitectures[] = {
    "GPT2LMHeadModel",    "LlamaForCausalLM",      "MistralForCausalLM",
    "Qwen2ForCausalLM",   "Qwen3ForCausalLM",      "Phi3ForCausalLM",
    "GPTNeoXForCausalLM", "GPTBigCodeForCausalLM", "Starcoder2ForCausalLM",
    "GemmaForCausalLM",   "Olmo2ForCausalLM"};

std::optional<Activation> hfActivation(ObjectReader &r, StringRef key,
                                       StringRef fallback, bool gated) {
  std::string name = fallback.str();
  if (r.has(key))
    if (auto v = r.string(key, ObjectReader::Optional))
      name = *v;
  // A gated MLP applies the activation to its gate: act(gate) * up.
  if (gated && (name == "silu" || name == "swish"))
    return Activation::SwiGlu;
  if (name == "gelu")
    return gated ? Activation::GeGlu : Activation::Gelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
    return gated ? Activation::GeGluTanh : Activation::GeluTanh;
  r.errors().add(r.where(key), "activation \"" + name +
                                   "\" is not supported for this architecture");
  return std::nullopt;
}

/// GPT-2 and GPTBigCode (StarCoder) share one layout: learned positions,
/// LayerNorm and biased linears, a GELU MLP and a tied LM head; GPTBigCode
/// adds multi-query attention.
void readGpt2(ObjectReader &r, StringRef arch, ModelConfig &cfg,
              FieldSources &src) {
  bool bigCode = arch == "GPTBigCodeForCausalLM";
  using N = ObjectReader::Need;
  readInto(r, "vocab_size", "vocab_size", cfg.vocabSize, src, N::Required);
  readInto(r, "n_embd", "hidden_size", cfg.hiddenSize, src, N::Required);
  readInto(r, "n_layer", "num_layers", cfg.numLayers, src, N::Required, 1,
           kMaxLayers);
  readInto(r, "n_head", "num_heads", cfg.numHeads, src, N::Required);
  readInto(r, "n_positions", "max_position_embeddings",
           cfg.maxPositionEmbeddings, src, N::Required);
  cfg.ffnHiddenSize = 4 * cfg.hiddenSize;
  readInto(r, "n_inner", "ffn_hidden_size", cfg.ffnHiddenSize, src,
           N::Optional);
  if (auto a = hfActivation(r, "activation_function",
                            bigCode ? "gelu_pytorch_tanh" : "gelu_new", false))
    cfg.activation = *a;
  // Scores scaled otherwise than by 1/sqrt(head_dim) make another model.
  bool scaled = true, byLayer = false;
  readBool(r, "scale_attn_weights", scaled);
  if (!bigCode) // GPTBigCode's HF code has no such scale
    readBool(r, "scale_attn_by_inverse_layer_idx", byLayer);
  if (!scaled)
    r.errors().add(r.where("scale_attn_weights"),
                   "attention scores without the 1/sqrt(head_dim) scale are "
                   "not supported");
  if (byLayer)
    r.errors().add(r.where("scale_attn_by_inverse_layer_idx"),
                   "attention scores scaled by the inverse layer index are "
                   "not supported");
  if (bigCode) {
    bool multiQuery = true; // one key/value head (HF's default)
    readBool(r, "multi_query", multiQuery);
    if (multiQuery) {
      cfg.numKVHeads = 1;
      src["num_kv_heads"] = r.where("multi_query");
    }
  }
  cfg.norm = NormKind::LayerNorm;
  cfg.normBias = true;
  if (auto eps = r.number("layer_norm_epsilon", N::Optional, 0.0, 1.0, true))
    cfg.normEps = *eps;
  cfg.position = PositionEmbedding::Learned;
  cfg.qkvBias = cfg.attnOutBias = cfg.mlpBias = true;
  cfg.tieEmbeddings = true;
  readBool(r, "tie_word_embeddings", cfg.tieEmbeddings);
}

/// HF's defaults, per architecture, for what a config of the Llama family
/// leaves out, and the keys it names them by.
struct LlamaFamilyDefaults {
  llvm::StringLiteral arch;
  /// Key/value heads: 0 for one per query head.
  int64_t kvHeads;
  /// Head size: 0 for hidden_size / num_attention_heads.
  int64_t headDim;
  llvm::StringLiteral activationKey, activation;
  bool gated;
  NormKind norm;
  llvm::StringLiteral epsKey;
  double normEps;
  bool tieEmbeddings;
  /// Whether HF rotates part of each head (partial_rotary_factor).
  bool partialRotary;
};

// clang-format off
constexpr LlamaFamilyDefaults kLlamaFamily[] = {
  // arch                     kv  head  activation key        activation           gated  norm                 eps key         eps   tied   partial
  {"LlamaForCausalLM",         0,    0, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-6, false, false},
  {"MistralForCausalLM",       8,    0, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-6, false, false},
  {"Qwen2ForCausalLM",        32,    0, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-6, false, false},
  {"Qwen3ForCausalLM",        32,  128, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-6, false, false},
  {"Phi3ForCausalLM",          0,    0, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-5, false, true},
  {"Starcoder2ForCausalLM",    2,    0, "hidden_act",        "gelu_pytorch_tanh", false, NormKind::LayerNorm, "norm_epsilon", 1e-5, true,  false},
  // Gemma's HF code ignores hidden_act for hidden_activation, and takes the
  // tanh GELU when that is null or absent.
  {"GemmaForCausalLM",        16,  256, "hidden_activation", "gelu_pytorch_tanh", true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-6, true,  false},
  {"Olmo2ForCausalLM",         0,    0, "hidden_act",        "silu",              true,  NormKind::RmsNorm,   "rms_norm_eps", 1e-5, false, false},
};
// clang-format on

const LlamaFamilyDefaults &llamaFamilyDefaults(StringRef arch) {
  for (const LlamaFamilyDefaults &d : kLlamaFamily)
    if (d.arch == arch)
      return d;
  llvm_unreachable("readLlamaFamily reads only the Llama family");
}

/// The sizes, heads and activation, with `d`'s defaults.
void readLlamaFamilyShape(ObjectReader &r, const LlamaFamilyDefaults &d,
                          ModelConfig &cfg, FieldSources &src) {
  using N = ObjectReader::Need;
  readInto(r, "vocab_size", "vocab_size", cfg.vocabSize, src, N::Required);
  readInto(r, "hidden_size", "hidden_size", cfg.hiddenSize, src, N::Required);
  readInto(r, "intermediate_size", "ffn_hidden_size", cfg.ffnHiddenSize, src,
           N::Required);
  readInto(r, "num_hidden_layers", "num_layers", cfg.numLayers, src,
           N::Required, 1, kMaxLayers);
  readInto(r, "num_attention_heads", "num_heads", cfg.numHeads, src,
           N::Required);
  cfg.numKVHeads = d.kvHeads;
  if (r.isNull("num_key_value_heads"))
    cfg.numKVHeads = 0; // an explicit null means one per query head
  src["num_kv_heads"] = r.where("num_key_value_heads"); // also the default
  readInto(r, "num_key_value_heads", "num_kv_heads", cfg.numKVHeads, src,
           N::Optional);
  // Qwen3's attention takes head_dim as it is: transformers cannot build a
  // Qwen3 model with a null one, so no width can be inferred for it.
  if (d.arch == "Qwen3ForCausalLM" && r.isNull("head_dim"))
    r.errors().add(r.where("head_dim"),
                   "Qwen3 needs a head size; null builds no model in "
                   "transformers (omit it for the default, 128)");
  if (d.headDim)
    cfg.headDim = d.headDim;
  readInto(r, "head_dim", "head_dim", cfg.headDim, src, N::Optional);
  readInto(r, "max_position_embeddings", "max_position_embeddings",
           cfg.maxPositionEmbeddings, src, N::Optional);
  if (auto a = hfActivation(r, d.activationKey, d.activation, d.gated))
    cfg.activation = *a;
  cfg.norm = d.norm;
  cfg.normBias = d.norm == NormKind::LayerNorm;
  cfg.normEps = d.normEps;
  if (auto eps = r.number(d.epsKey, N::Optional, 0.0, 1.0, true))
    cfg.normEps = *eps;
}

/// Rotary embeddings: the base, the rotated part of each head and the
/// scaling.
void readLlamaFamilyRotary(ObjectReader &r, const LlamaFamilyDefaults &d,
                           ModelConfig &cfg, FieldSources &src) {
  using N = ObjectReader::Need;
  cfg.position = PositionEmbedding::Rope;
  if (auto theta = r.number("rope_theta", N::Optional, 0.0, 1e308, true))
    cfg.ropeTheta = *theta;
  // Of these, only Phi-3's HF code rotates part of each head; the others'
  // cannot run a config with a partial factor.
  if (auto fraction =
          r.number("partial_rotary_factor", N::Optional, 0.0, 1.0, true)) {
    if (d.partialRotary) {
      cfg.rotaryFraction = *fraction;
      src["rotary_fraction"] = r.where("partial_rotary_factor");
    } else if (*fraction != 1.0) {
      r.errors().add(r.where("partial_rotary_factor"), kWholeHeads);
    }
  }
  std::optional<int64_t> outerOriginalMax =
      r.integer("original_max_position_embeddings", N::Optional, 1, kMaxDim);
  readRopeScaling(r, "rope_scaling", cfg, src, outerOriginalMax);
  readRopeParameters(r, cfg, src, "rope_theta",
                     d.partialRotary ? "partial_rotary_factor" : "",
                     outerOriginalMax);
  // Phi-3's HF code takes LongRoPE only.
  if (d.arch == "Phi3ForCausalLM" && cfg.ropeScaling &&
      cfg.ropeScaling->kind != RopeScaling::Kind::LongRope)
    r.errors().add(src["rope_scaling"],
                   "Phi-3 takes no rotary scaling but longrope");
}

/// Qwen2's and Qwen3's biases, query/key norms and sliding windows.
void readQwenAttention(ObjectReader &r, StringRef arch, ModelConfig &cfg,
                       FieldSources &src) {
  using N = ObjectReader::Need;
  if (arch == "Qwen2ForCausalLM") {
    cfg.qkvBias = true; // Qwen2 biases q, k and v but not the output.
  } else {
    cfg.qkNorm = true;
    bool attentionBias = false;
    readBool(r, "attention_bias", attentionBias);
    cfg.qkvBias = cfg.attnOutBias = attentionBias;
  }
  // Both keep a sliding_window value even when it is switched off; when
  // on, the layers layer_types names use it, or without it those from
  // max_window_layers up (HF's defaults: a window of 4096 from layer 28).
  bool useWindow = false;
  readBool(r, "use_sliding_window", useWindow);
  std::optional<std::vector<std::string>> types = r.eachOneOf(
      "layer_types", N::Optional, {"full_attention", "sliding_attention"});
  if (!useWindow) {
    // HF has no window then to give the layers that layer_types says
    // slide, and cannot run them.
    if (types && llvm::is_contained(*types, "sliding_attention"))
      r.errors().add(r.where("layer_types"),
                     "names sliding_attention layers, but "
                     "use_sliding_window is false");
    return;
  }
  cfg.slidingWindow = 4096;
  if (r.isNull("sliding_window"))
    cfg.slidingWindow.reset();
  readSlidingWindow(r, cfg, src, N::Optional);
  cfg.slidingWindowFromLayer = 28;
  readInto(r, "max_window_layers", "max_window_layers",
           cfg.slidingWindowFromLayer, src, N::Optional, 0, kMaxLayers);
  if (!types)
    return;
  src["layer_types"] = r.where("layer_types");
  if (int64_t(types->size()) != cfg.numLayers)
    r.errors().add(r.where("layer_types"),
                   "names " + llvm::Twine(types->size()) +
                       " layers; num_hidden_layers is " +
                       llvm::Twine(cfg.numLayers));
  for (const std::string &type : *types)
    cfg.slidingLayers.push_back(type == "sliding_attention");
}

/// The other architectures' biases, windows and layout.
void readLlamaFamilyVariant(ObjectReader &r, StringRef arch, ModelConfig &cfg,
                            FieldSources &src) {
  using N = ObjectReader::Need;
  if (arch == "Phi3ForCausalLM" || arch == "Starcoder2ForCausalLM") {
    // Their window, where they have one, covers every layer.
    if (r.has("sliding_window"))
      readSlidingWindow(r, cfg, src, N::Required);
    if (arch == "Starcoder2ForCausalLM") {
      bool bias = true;
      readBool(r, "use_bias", bias);
      cfg.qkvBias = cfg.attnOutBias = cfg.mlpBias = bias;
      cfg.initStd = 0.018042; // HF's default initializer_range for it
    }
    return;
  }
  if (arch == "MistralForCausalLM") {
    // HF's default is a 4096-token window; an explicit null means none.
    if (r.isNull("sliding_window"))
      cfg.slidingWindow.reset();
    else if (r.has("sliding_window"))
      readSlidingWindow(r, cfg, src, N::Required);
    else
      cfg.slidingWindow = 4096;
    return;
  }
  // Llama, Gemma and OLMo-2.
  bool attentionBias = false;
  readBool(r, "attention_bias", attentionBias);
  cfg.qkvBias = cfg.attnOutBias = attentionBias;
  if (arch == "GemmaForCausalLM") {
    cfg.normUnitOffset = true;
    cfg.embeddingScaleSqrtHidden = true;
  } else if (arch == "Olmo2ForCausalLM") {
    cfg.qkNorm = cfg.qkNormOverProjection = cfg.postNorm = true;
  } else {
    readBool(r, "mlp_bias", cfg.mlpBias);
  }
}

/// Llama, Mistral, Qwen2, Qwen3 and Phi-3 share one layout: pre-RMSNorm,
/// rotary, GQA and a SwiGLU MLP (Phi-3 fuses q, k, v and gate, up into one
/// weight each, the same maps); they differ in biases, defaults, sliding
/// windows and Qwen3's query/key norms. StarCoder2 keeps the layout with
/// LayerNorm and a tanh-GELU MLP, all of it biased. Gemma keeps it with a
/// GeGLU MLP, norm weights offset from one and embeddings scaled by
/// sqrt(hidden_size). OLMo-2 normalises the sublayers' outputs rather than
/// their inputs, and its query and key projections whole.
void readLlamaFamily(ObjectReader &r, StringRef arch, ModelConfig &cfg,
                     FieldSources &src) {
  const LlamaFamilyDefaults &defaults = llamaFamilyDefaults(arch);
  readLlamaFamilyShape(r, defaults, cfg, src);
  readLlamaFamilyRotary(r, defaults, cfg, src);
  cfg.tieEmbeddings = defaults.tieEmbeddings;
  readBool(r, "tie_word_embeddings", cfg.tieEmbeddings);
  // HF initialises every linear of these models with initializer_range.
  cfg.scaledOutputInit = false;
  if (arch == "Qwen2ForCausalLM" || arch == "Qwen3ForCausalLM")
    readQwenAttention(r, arch, cfg, src);
  else
    readLlamaFamilyVariant(r, arch, cfg, src);
}

void readGptNeoX(ObjectReader &r, ModelConfig &cfg, FieldSources &src) {
  cfg.scaledOutputInit = false; // HF GPT-NeoX: plain initializer_range
  using N = ObjectReader::Need;
  readInto(r, "vocab_size", "vocab_size", cfg.vocabSize, src, N::Required);
  readInto(r, "hidden_size", "hidden_size", cfg.hiddenSize, src, N::Required);
  readInto(r, "intermediate_size", "ffn_hidden_size", cfg.ffnHiddenSize, src,
           N::Required);
  readInto(r, "num_hidden_layers", "num_layers", cfg.numLayers, src,
           N::Required, 1, kMaxLayers);
  readInto(r, "num_attention_heads", "num_heads", cfg.numHeads, src,
           N::Required);
  readInto(r, "max_position_embeddings", "max_position_embeddings",
           cfg.maxPositionEmbeddings, src, N::Optional);
  if (auto a = hfActivation(r, "hidden_act", "gelu", false))
    cfg.activation = *a;
  cfg.norm = NormKind::LayerNorm;
  cfg.normBias = true;
  if (auto eps = r.number("layer_norm_eps", N::Optional, 0.0, 1.0, true))
    cfg.normEps = *eps;
  cfg.position = PositionEmbedding::Rope;
  cfg.rotaryFraction = 0.25;
  if (auto pct = r.number("rotary_pct", N::Optional, 0.0, 1.0, true)) {
    cfg.rotaryFraction = *pct;
    src["rotary_fraction"] = r.where("rotary_pct");
  }
  StringRef baseKey =
      r.has("rotary_emb_base") ? "rotary_emb_base" : "rope_theta";
  if (auto base = r.number(baseKey, N::Optional, 0.0, 1e308, true))
    cfg.ropeTheta = *base;
  std::optional<int64_t> outerOriginalMax =
      r.integer("original_max_position_embeddings", N::Optional, 1, kMaxDim);
  readRopeScaling(r, "rope_scaling", cfg, src, outerOriginalMax);
  readRopeParameters(r, cfg, src, baseKey, "rotary_pct", outerOriginalMax);
  bool attentionBias = true;
  readBool(r, "attention_bias", attentionBias);
  cfg.qkvBias = cfg.attnOutBias = attentionBias;
  cfg.mlpBias = true;
  cfg.parallelResidual = true;
  readBool(r, "use_parallel_residual", cfg.parallelResidual);
  cfg.tieEmbeddings = false;
  readBool(r, "tie_word_embeddings", cfg.tieEmbeddings);
}

/// Reads an HF config.json object. Unknown keys are normal in HF configs and
/// are ignored, and so is torch_dtype: it is the checkpoint's storage type,
/// not a training choice.
void readHFConfig(ObjectReader &r, ModelConfig &cfg, FieldSources &src) {
  std::optional<std::string> arch =
      r.firstString("architectures", ObjectReader::Optional);
  if (!arch && r.has("architectures"))
    return; // reported by firstString
  if (!arch) {
    // Older configs carry only model_type.
    std::optional<std::string> type =
        r.string("model_type", ObjectReader::Optional);
    static const llvm::StringMap<StringRef> byModelType = {
        {"gpt2", "GPT2LMHeadModel"},
        {"llama", "LlamaForCausalLM"},
        {"mistral", "MistralForCausalLM"},
        {"qwen2", "Qwen2ForCausalLM"},
        {"qwen3", "Qwen3ForCausalLM"},
        {"phi3", "Phi3ForCausalLM"},
        {"gpt_bigcode", "GPTBigCodeForCausalLM"},
        {"starcoder2", "Starcoder2ForCausalLM"},
        {"gpt_neox", "GPTNeoXForCausalLM"},
        {"gemma", "GemmaForCausalLM"},
        {"olmo2", "Olmo2ForCausalLM"}};
    if (type && byModelType.count(*type))
      arch = byModelType.lookup(*type).str();
    else if (!type) {
      r.errors().add(r.where(), "neither \"architectures\" nor "
                                "\"model_type\" says which model this is");
      return;
    } else {
      arch = *type;
    }
  }
  if (!llvm::is_contained(kSupportedArchitectures, StringRef(*arch))) {
    std::string list;
    for (StringRef a : kSupportedArchitectures)
      list += (list.empty() ? "" : ", ") + a.str();
    r.errors().add(r.has("architectures") ? r.where("architectures") + "/0"
                                          : r.where("model_type"),
                   "unknown architecture \"" + *arch +
                       "\"; supported: " + list);
    return;
  }
  cfg.architecture = *arch;
  if (*arch == "GPT2LMHeadModel" || *arch == "GPTBigCodeForCausalLM")
    readGpt2(r, *arch, cfg, src);
  else if (*arch == "GPTNeoXForCausalLM")
    readGptNeoX(r, cfg, src);
  else
    readLlamaFamily(r, *arch, cfg, src);
  if (auto init = r.number("initializer_range", ObjectReader::Optional,
                           kMinInitStd, 1.0))
    cfg.initStd = *init;
}

//===----------------------------------------------------------------------===//
// Partita's spec: canonical "model" keys
//===----------------------------------------------------------------------===//

/// Applies the canonical keys of a spec's "model" object to `cfg`. With a
/// base from an HF config every key is optional; without one the sizes are
/// required.
void readCanonicalModel(ObjectReader &r, ModelConfig &cfg, FieldSources &src,
                        bool hasBase) {
  using N = ObjectReader::Need;
  N sizeNeed = hasBase ? N::Optional : N::Required;
  readInto(r, "vocab_size", "vocab_size", cfg.vocabSize, src, sizeNeed);
  readInto(r, "hidden_size", "hidden_size", cfg.hiddenSize, src, sizeNeed);
  readInto(r, "num_layers", "num_layers", cfg.numLayers, src, sizeNeed, 1,
           kMaxLayers);
  readInto(r, "num_heads", "num_heads", cfg.numHeads, src, sizeNeed);
  readInto(r, "num_kv_heads", "num_kv_heads", cfg.numKVHeads, src, N::Optional);
  readInto(r, "head_dim", "head_dim", cfg.headDim, src, N::Optional);
  readInto(r, "ffn_hidden_size", "ffn_hidden_size", cfg.ffnHiddenSize, src,
           sizeNeed);
  readInto(r, "max_position_embeddings", "max_position_embeddings",
           cfg.maxPositionEmbeddings, src, N::Optional);

  if (auto norm = r.oneOf("norm", sizeNeed, {"layer_norm", "rms_norm"})) {
    cfg.norm = *norm == "layer_norm" ? NormKind::LayerNorm : NormKind::RmsNorm;
    cfg.normBias = cfg.norm == NormKind::LayerNorm;
  }
  if (auto bias = r.boolean("norm_bias", N::Optional)) {
    cfg.normBias = *bias;
    src["norm_bias"] = r.where("norm_bias");
  }
  if (auto eps = r.number("norm_eps", N::Optional, 0.0, 1.0, true))
    cfg.normEps = *eps;
  if (auto offset = r.boolean("norm_unit_offset", N::Optional)) {
    cfg.normUnitOffset = *offset;
    src["norm_unit_offset"] = r.where("norm_unit_offset");
  }
  constexpr Activation kActivations[] = {Activation::Gelu, Activation::GeluTanh,
                                         Activation::SwiGlu, Activation::GeGlu,
                                         Activation::GeGluTanh};
  llvm::SmallVector<StringRef> activationNames;
  for (Activation a : kActivations)
    activationNames.push_back(toString(a));
  if (auto act = r.oneOf("activation", sizeNeed, activationNames))
    for (Activation a : kActivations)
      if (toString(a) == *act)
        cfg.activation = a;
  if (auto pos = r.oneOf("position_embedding", sizeNeed, {"learned", "rope"})) {
    cfg.position = *pos == "learned" ? PositionEmbedding::Learned
                                     : PositionEmbedding::Rope;
    src["position_embedding"] = r.where("position_embedding");
  }
  if (auto theta = r.number("rope_theta", N::Optional, 0.0, 1e308, true))
    cfg.ropeTheta = *theta;
  if (auto fraction =
          r.number("rotary_fraction", N::Optional, 0.0, 1.0, true)) {
    cfg.rotaryFraction = *fraction;
    src["rotary_fraction"] = r.where("rotary_fraction");
  }
  readRopeScaling(r, "rope_scaling", cfg, src);
  if (r.has("sliding_window"))
    readSlidingWindow(r, cfg, src, N::Required);
  readBool(r, "qkv_bias", cfg.qkvBias);
  readBool(r, "attn_out_bias", cfg.attnOutBias);
  readBool(r, "mlp_bias", cfg.mlpBias);
  readBool(r, "tie_embeddings", cfg.tieEmbeddings);
  if (auto scale = r.number("embedding_scale", N::Optional, 0.0, 1e30,
                            /*minExclusive=*/true)) {
    cfg.embeddingScale = *scale;
    cfg.embeddingScaleSqrtHidden = false;
  }
  readBool(r, "parallel_residual", cfg.parallelResidual);
  readBool(r, "qk_norm", cfg.qkNorm);
  if (auto span =
          r.oneOf("qk_norm_span", N::Optional, {"head", "projection"})) {
    cfg.qkNormOverProjection = *span == "projection";
    src["qk_norm_span"] = r.where("qk_norm_span");
  }
  if (auto post = r.boolean("post_norm", N::Optional)) {
    cfg.postNorm = *post;
    src["post_norm"] = r.where("post_norm");
  }
  if (auto init = r.number("init_std", N::Optional, kMinInitStd, 1.0))
    cfg.initStd = *init;
  readBool(r, "scaled_output_init", cfg.scaledOutputInit);
}

//===----------------------------------------------------------------------===//
// Cross-field validation
//===----------------------------------------------------------------------===//

void validate(const ModelSpec &spec, const FieldSources &src,
              ErrorList &errors) {
  const ModelConfig &m = spec.model;
  auto at = [&](StringRef field) {
    auto it = src.find(field);
    return it != src.end() ? it->second : spec.sourceFile;
  };
  if (m.headDim == 0 && m.hiddenSize % m.numHeads != 0)
    errors.add(at("num_heads"),
               llvm::Twine("num_heads ") + llvm::Twine(m.numHeads) +
                   " does not divide hidden_size " + llvm::Twine(m.hiddenSize));
  if (m.kvHeads() > m.numHeads || m.numHeads % m.kvHeads() != 0)
    errors.add(at("num_kv_heads"),
               llvm::Twine("num_kv_heads ") + llvm::Twine(m.kvHeads()) +
                   " does not divide num_heads " + llvm::Twine(m.numHeads));
  if (m.position == PositionEmbedding::Rope && m.headDimension() > 0 &&
      (m.rotaryDim() < 2 || m.rotaryDim() % 2 != 0))
    errors.add(at("rotary_fraction"),
               "rotary embedding covers " + llvm::Twine(m.rotaryDim()) +
                   " channels of head_dim " + llvm::Twine(m.headDimension()) +
                   "; need an even count of at least 2");
  if (m.position == PositionEmbedding::Rope && m.ropeScaling &&
      m.ropeScaling->kind == RopeScaling::Kind::LongRope &&
      m.headDimension() > 0 &&
      int64_t(m.ropeScaling->shortFactor.size()) != m.rotaryDim() / 2)
    errors.add(at("rope_scaling"),
               "longrope has " +
                   llvm::Twine(m.ropeScaling->shortFactor.size()) +
                   " factors a list; the rotary embedding turns " +
                   llvm::Twine(m.rotaryDim() / 2) +
                   " pairs of channels a head (rotary_dim " +
                   llvm::Twine(m.rotaryDim()) + ")");
  if (m.norm == NormKind::RmsNorm && m.normBias)
    errors.add(at("norm_bias"), "rms_norm has no bias");
  if (src.count("qk_norm_span") && m.qkNormOverProjection && !m.qkNorm)
    errors.add(at("qk_norm_span"), "qk_norm_span needs qk_norm");
  if (m.postNorm && m.parallelResidual)
    errors.add(at("post_norm"), "post_norm and parallel_residual do not "
                                "combine: a parallel residual reads one "
                                "normalised input");
  if (m.norm == NormKind::LayerNorm && m.normUnitOffset)
    errors.add(at("norm_unit_offset"),
               "a unit weight offset is an rms_norm's (Gemma); layer_norm "
               "has none");
  // A spec may keep fewer of the HF config's layers, not add to them.
  if (!m.slidingLayers.empty() && int64_t(m.slidingLayers.size()) < m.numLayers)
    errors.add(at("num_layers"), "num_layers " + llvm::Twine(m.numLayers) +
                                     " exceeds the " +
                                     llvm::Twine(m.slidingLayers.size()) +
                                     " layers of the HF config's layer_types");
  // Attention widths are derived, not read: bound them like any dimension.
  if (m.numHeads * m.headDimension() > kMaxDim)
    errors.add(at("head_dim"), "num_heads x head_dim = " +
                                   llvm::Twine(m.numHeads * m.headDimension()) +
                                   " exceeds " + llvm::Twine(kMaxDim));
  // A bound far above any real model (10^15 parameters) that keeps every
  // count and byte size of the graph inside int64.
  double h = m.hiddenSize, q = double(m.numHeads) * m.headDimension(),
         kv = double(m.kvHeads()) * m.headDimension(), f = m.ffnHiddenSize;
  double perLayer = h * (2 * q + 2 * kv) + 3 * h * f;
  if (double(m.numLayers) * perLayer + 2.0 * m.vocabSize * h > 1e15)
    errors.add(at("num_layers"),
               "the model would have more than 10^15 parameters");
  const TrainingConfig &t = spec.training;
  if (m.position == PositionEmbedding::Learned) {
    if (m.maxPositionEmbeddings == 0)
      errors.add(at("position_embedding"),
                 "learned position embeddings need max_position_embeddings");
    else if (t.seqLen > m.maxPositionEmbeddings)
      errors.add(at("seq_len"), "seq_len " + llvm::Twine(t.seqLen) +
                                    " exceeds the " +
                                    llvm::Twine(m.maxPositionEmbeddings) +
                                    " learned positions of the model");
  }
  // The largest activation is the logits tensor [batch, seq, vocab].
  if (t.seqLen > 0 && t.globalBatch > 0 &&
      t.globalBatch > (int64_t(1) << 62) / t.seqLen /
                          std::max<int64_t>(
                              {m.vocabSize, m.ffnHiddenSize, m.hiddenSize, 1}))
    errors.add(at("global_batch"),
               "global_batch x seq_len x vocab_size overflows 64-bit sizes");
}

void readTraining(ObjectReader *r, const TrainingOverrides &overrides,
                  ModelSpec &spec, FieldSources &src, ErrorList &errors) {
  TrainingConfig &t = spec.training;
  constexpr int64_t kMaxBatch = int64_t(1) << 30;
  if (r) {
    readInto(*r, "seq_len", "seq_len", t.seqLen, src, ObjectReader::Optional, 1,
             kMaxDim);
    readInto(*r, "global_batch", "global_batch", t.globalBatch, src,
             ObjectReader::Optional, 1, kMaxBatch);
    if (auto name = r->string("dtype", ObjectReader::Optional)) {
      if (auto dtype = parseDType(*name))
        t.dtype = *dtype;
      else
        errors.add(r->where("dtype"), "unknown dtype \"" + *name +
                                          "\"; expected bf16, f16 or f32");
    }
    if (auto o = r->object("optimizer", ObjectReader::Optional)) {
      OptimizerConfig &opt = t.optimizer;
      // In the ranges the tfm.optimizer attribute takes. False when the key
      // is given but invalid (already reported).
      auto real = [&](StringRef key, double &field) {
        const tfm::OptimizerRealRange &range = *tfm::findOptimizerReal(key);
        bool given = o->has(key);
        if (auto v =
                o->number(key, ObjectReader::Optional, range.min, range.max,
                          range.minExclusive, range.maxExclusive)) {
          field = *v;
          return true;
        }
        return !given;
      };
      bool lrValid = real("lr", opt.lr);
      bool minLrValid = real("min_lr", opt.minLr);
      real("beta1", opt.beta1);
      real("beta2", opt.beta2);
      real("eps", opt.eps);
      real("weight_decay", opt.weightDecay);
      real("clip_norm", opt.clipNorm);
      if (auto v = o->integer("warmup_steps", ObjectReader::Optional, 0))
        opt.warmupSteps = *v;
      if (auto v = o->integer("decay_steps", ObjectReader::Optional, 0))
        opt.decaySteps = *v;
      if (auto v =
              o->oneOf("decay", ObjectReader::Optional, tfm::kOptimizerDecays))
        opt.decay = *v;
      if (lrValid && minLrValid && opt.minLr > opt.lr)
        errors.add(o->where("min_lr"), "min_lr " + formatNumber(opt.minLr) +
                                           " exceeds lr " +
                                           formatNumber(opt.lr));
      o->rejectUnknownKeys();
    }
    r->rejectUnknownKeys();
  }
  // The command line wins over the file.
  auto flag = [&](StringRef name, std::optional<int64_t> value, int64_t max,
                  int64_t &field, StringRef canonical) {
    if (!value)
      return;
    if (*value < 1 || *value > max) {
      errors.add("--" + name.str(), "must be between 1 and " +
                                        llvm::Twine(max) + ", got " +
                                        llvm::Twine(*value));
      src[canonical] = "--" + name.str(); // reported; not missing
      return;
    }
    field = *value;
    src[canonical] = "--" + name.str();
  };
  flag("seq-len", overrides.seqLen, kMaxDim, t.seqLen, "seq_len");
  flag("global-batch", overrides.globalBatch, kMaxBatch, t.globalBatch,
       "global_batch");
  if (overrides.dtype) {
    if (auto dtype = parseDType(*overrides.dtype))
      t.dtype = *dtype;
    else
      errors.add("--dtype", "unknown dtype \"" + *overrides.dtype +
                                "\"; expected bf16, f16 or f32");
  }
  std::string where = r ? r->where() : spec.sourceFile;
  // A value that was given but invalid is already reported.
  if (r && r->has("seq_len"))
    src.try_emplace("seq_len", r->where("seq_len"));
  if (r && r->has("global_batch"))
    src.try_emplace("global_batch", r->where("global_batch"));
  auto optional = [&](int64_t &field, StringRef key) {
    if (overrides.stepOptional && field == 0 && !src.count(key)) {
      field = 1;
      t.stepMissing = true;
    }
  };
  optional(t.seqLen, "seq_len");
  optional(t.globalBatch, "global_batch");
  if (t.seqLen == 0 && !src.count("seq_len"))
    errors.add(where, "training setting seq_len is missing: give "
                      "\"training\": {\"seq_len\": N} or --seq-len=N");
  if (t.globalBatch == 0 && !src.count("global_batch"))
    errors.add(where, "training setting global_batch is missing: give "
                      "\"training\": {\"global_batch\": N} or "
                      "--global-batch=N");
}

std::string stem(StringRef fileName) {
  StringRef s = llvm::sys::path::stem(fileName);
  if (s == "config") // HF: name the model after its folder
    s = llvm::sys::path::filename(llvm::sys::path::parent_path(fileName));
  return s.empty() ? "model" : s.str();
}

} // namespace

llvm::Expected<ModelSpec> readModelSpec(StringRef text, StringRef fileName,
                                        StringRef baseDir,
                                        const TrainingOverrides &overrides) {
  ErrorList errors;
  ModelSpec spec;
  spec.sourceFile = fileName.str();
  spec.name = stem(fileName);
  std::optional<json> doc = parseJsonObject(text, fileName, errors);
  if (!doc)
    return errors.takeError();
  ObjectReader root(*doc, fileName.str(), "", errors);
  FieldSources src;
  std::optional<ObjectReader> training;

  bool isSpec = root.has("version") || root.has("model");
  bool isHF = root.has("architectures") || root.has("model_type");
  if (isSpec) {
    // Another version's schema may differ: check nothing else against it.
    std::optional<int64_t> version =
        root.integer("version", ObjectReader::Required, 1);
    if (version && *version != 1)
      errors.add(root.where("version"), "unsupported spec version " +
                                            llvm::Twine(*version) +
                                            "; this Partita reads version 1");
    if (!errors.empty())
      return errors.takeError();
    if (auto name = root.string("name", ObjectReader::Optional)) {
      if (name->empty())
        errors.add(root.where("name"), "must not be empty");
      spec.name = *name;
    }
    std::optional<ObjectReader> model =
        root.object("model", ObjectReader::Required);
    // Keeps the HF document alive while its reader is in use.
    std::optional<json> hfDoc;
    if (model) {
      bool hasBase = false;
      if (auto hfPath = model->string("hf_config", ObjectReader::Optional)) {
        llvm::SmallString<256> path(*hfPath);
        if (!llvm::sys::path::is_absolute(path) && !baseDir.empty())
          path = (baseDir + "/" + *hfPath).str();
        std::optional<std::string> contents;
        if (llvm::sys::fs::is_regular_file(path))
          contents = readFileText(path, errors);
        else
          errors.add(model->where("hf_config"),
                     "HF config \"" + path.str().str() +
                         "\" is not a readable file");
        if (contents) {
          hfDoc = parseJsonObject(*contents, path, errors);
          if (hfDoc) {
            ObjectReader hf(*hfDoc, path.str().str(), "", errors);
            readHFConfig(hf, spec.model, src);
            hasBase = true;
          }
        }
        if (!hasBase)
          return errors.takeError();
      }
      readCanonicalModel(*model, spec.model, src, hasBase);
      model->rejectUnknownKeys();
    }
    training = root.object("training", ObjectReader::Optional);
    if (auto pins = root.string("strategy", ObjectReader::Optional)) {
      if (llvm::Expected<PartialParallelConfig> parsed =
              parseParallelConfig(*pins))
        spec.strategyPins = *pins;
      else
        errors.add(root.where("strategy"), llvm::toString(parsed.takeError()));
    }
    root.rejectUnknownKeys();
  } else if (isHF) {
    readHFConfig(root, spec.model, src);
  } else {
    errors.add(fileName.str() + ": /",
               "neither a Partita model spec (no \"version\" and \"model\") "
               "nor a Hugging Face config.json (no \"architectures\" or "
               "\"model_type\")");
    return errors.takeError();
  }
  // Training problems are reported together with the model's.
  readTraining(training ? &*training : nullptr, overrides, spec, src, errors);
  if (errors.empty())
    validate(spec, src, errors);
  if (!errors.empty())
    return errors.takeError();
  return spec;
}

llvm::Expected<ModelSpec>
readModelSpecFile(StringRef path, const TrainingOverrides &overrides) {
  ErrorList errors;
  std::optional<std::string> contents = readFileText(path, errors);
  if (!contents)
    return errors.takeError();
  return readModelSpec(*contents, path, llvm::sys::path::parent_path(path),
                       overrides);
}

} // namespace partita
