//===- ModelSpec.h - What a user declares about a model ---------*- C++ -*-===//
//
// The importers (Partita's JSON model spec and Hugging Face config.json) fill
// a ModelSpec; the graph builder turns it into a tfm.model.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_IMPORT_MODELSPEC_H
#define PARTITA_COMPILER_IMPORT_MODELSPEC_H

#include "dialects/tfm/TfmDialect.h"
#include "support/DType.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace partita {

enum class NormKind { LayerNorm, RmsNorm };
enum class Activation { Gelu, GeluTanh, SwiGlu, GeGlu, GeGluTanh };
enum class PositionEmbedding { Learned, Rope };

llvm::StringRef toString(NormKind kind);
llvm::StringRef toString(Activation kind);
/// Whether the MLP has a gate projection (SwiGLU, GeGLU).
inline bool isGated(Activation kind) {
  return kind == Activation::SwiGlu || kind == Activation::GeGlu ||
         kind == Activation::GeGluTanh;
}
llvm::StringRef toString(PositionEmbedding kind);

/// A rotary scaling as #tfm.rope_scaling holds it: the importer resolves
/// the config's defaults (docs/model-spec.md) so that the graph needs no
/// other field of the config. Fields the kind does not use are ignored.
struct RopeScaling : tfm::RopeScalingFields {
  enum class Kind {
    Linear,
    Llama3,
    Yarn,
    LongRope,
    Dynamic
  } kind = Kind::Linear;
};

/// The architecture of a decoder-only Transformer. Field names follow the
/// canonical keys of the model spec's "model" object (docs/model-spec.md).
struct ModelConfig {
  /// Where the architecture came from, e.g. "LlamaForCausalLM" or "spec".
  std::string architecture = "spec";
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0; // 0: same as numHeads
  int64_t headDim = 0;    // 0: hiddenSize / numHeads
  int64_t ffnHiddenSize = 0;
  int64_t maxPositionEmbeddings = 0;
  NormKind norm = NormKind::RmsNorm;
  double normEps = 1e-5;
  bool normBias = false;
  /// RMSNorm weights kept as offsets from one, initialised to zero (Gemma).
  bool normUnitOffset = false;
  Activation activation = Activation::SwiGlu;
  PositionEmbedding position = PositionEmbedding::Rope;
  double ropeTheta = 10000.0;
  double rotaryFraction = 1.0;
  std::optional<RopeScaling> ropeScaling;
  std::optional<int64_t> slidingWindow;
  /// Layers below this index attend to the full context (Qwen2's
  /// max_window_layers); 0: the window applies to every layer.
  int64_t slidingWindowFromLayer = 0;
  /// Per layer, whether it uses the window (HF's layer_types); when given,
  /// in place of slidingWindowFromLayer.
  std::vector<bool> slidingLayers;
  bool qkvBias = false;
  bool attnOutBias = false;
  bool mlpBias = false;
  bool tieEmbeddings = false;
  /// Token embeddings are multiplied by embeddingScale, or by
  /// sqrt(hidden_size) where embeddingScaleSqrtHidden (Gemma's, which
  /// follows a width a spec overrides).
  double embeddingScale = 1.0;
  bool embeddingScaleSqrtHidden = false;
  bool parallelResidual = false;
  /// Each query and key head normalised (the model's norm, over head_dim,
  /// weights shared by the heads) before the rotary embedding (Qwen3); with
  /// qkNormOverProjection, the whole query and key projections instead,
  /// each channel its own weight (OLMo-2).
  bool qkNorm = false;
  bool qkNormOverProjection = false;
  /// Norms on the sublayers' outputs, before the residual adds, and none
  /// on their inputs (OLMo-2).
  bool postNorm = false;
  double initStd = 0.02;
  /// Output projections (attention out, MLP down) initialised with
  /// initStd / sqrt(2 * numLayers), as GPT-2 and Megatron-LM do.
  bool scaledOutputInit = true;

  int64_t kvHeads() const { return numKVHeads ? numKVHeads : numHeads; }
  int64_t headDimension() const {
    return headDim ? headDim : (numHeads ? hiddenSize / numHeads : 0);
  }
  int64_t rotaryDim() const;
  double embeddingMultiplier() const;
};

/// Settings of one training step.
/// AdamW and its learning-rate schedule. The defaults here are the
/// documented ones (docs/model-spec.md); plan.json carries the result.
struct OptimizerConfig {
  double lr = 3e-4;
  double minLr = 3e-5;
  int64_t warmupSteps = 0;
  /// Steps of decay from lr to min_lr after warm-up; 0: no decay.
  int64_t decaySteps = 0;
  std::string decay = "cosine"; // cosine, linear or constant
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weightDecay = 0.1;
  /// Global gradient-norm clipping; 0 turns it off.
  double clipNorm = 1.0;
};

struct TrainingConfig {
  int64_t seqLen = 0;
  int64_t globalBatch = 0; // in sequences
  DType dtype = DType::BF16;
  OptimizerConfig optimizer;
  /// seq_len and global_batch were missing and stand at 1
  /// (TrainingOverrides::stepOptional): the model has no step to speak of.
  bool stepMissing = false;
};

/// Command-line values that complete or override a spec's training settings.
struct TrainingOverrides {
  std::optional<int64_t> seqLen;
  std::optional<int64_t> globalBatch;
  std::optional<std::string> dtype;
  /// A missing seq_len or global_batch is no error but 1, for what needs
  /// only the model (a summary of its parameters).
  bool stepOptional = false;
};

struct ModelSpec {
  std::string name;
  /// Strategy dimensions the spec pins ("tp=8,recompute=full"), in the
  /// --strategy syntax; empty when none.
  std::string strategyPins;
  /// The file the spec was read from; used in locations and messages.
  std::string sourceFile;
  ModelConfig model;
  TrainingConfig training;
};

/// Reads a model spec: Partita's JSON spec (which may point at an HF
/// config.json) or an HF config.json itself. Every problem is reported as
/// "FILE: /json/pointer: what is wrong", one per line, in the error.
llvm::Expected<ModelSpec> readModelSpecFile(llvm::StringRef path,
                                            const TrainingOverrides &overrides);

/// As readModelSpecFile, for a document already in memory. `baseDir` resolves
/// a relative "hf_config" path.
llvm::Expected<ModelSpec> readModelSpec(llvm::StringRef text,
                                        llvm::StringRef fileName,
                                        llvm::StringRef baseDir,
                                        const TrainingOverrides &overrides);

} // namespace partita

#endif // PARTITA_COMPILER_IMPORT_MODELSPEC_H
