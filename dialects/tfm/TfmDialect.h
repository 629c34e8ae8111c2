//===- TfmDialect.h - The tfm model-graph dialect ---------------*- C++ -*-===//

#ifndef PARTITA_DIALECTS_TFM_TFMDIALECT_H
#define PARTITA_DIALECTS_TFM_TFMDIALECT_H

#include "mlir/IR/Dialect.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include "dialects/tfm/TfmDialect.h.inc"

namespace partita::tfm {

/// The module attribute that carries AdamW's settings to plan.json.
inline constexpr llvm::StringLiteral kOptimizerAttrName = "tfm.optimizer";

/// A unit module attribute: the model was imported without a training
/// step (no seq_len or global_batch), for a summary of its parameters; its
/// step's shapes stand at 1 and mean nothing.
inline constexpr llvm::StringLiteral kStepMissingAttrName = "tfm.step_missing";

/// The range of one of AdamW's real settings, as a model spec's optimizer
/// and the `tfm.optimizer` attribute both take it.
struct OptimizerRealRange {
  llvm::StringLiteral key;
  double min, max;
  bool minExclusive, maxExclusive;
  bool contains(double v) const {
    return (minExclusive ? v > min : v >= min) &&
           (maxExclusive ? v < max : v <= max);
  }
};
inline constexpr OptimizerRealRange kOptimizerReals[] = {
    {"lr", 0, 1, true, false},
    {"min_lr", 0, 1, false, false},
    // A beta of 1 never forgets: the moments, and the step, run to NaN.
    {"beta1", 0, 1, false, true},
    {"beta2", 0, 1, false, true},
    {"eps", 0, 1, true, false},
    {"weight_decay", 0, 10, false, false},
    {"clip_norm", 0, 1e9, false, false}};
/// Its settings counted in steps (at least 0), and the decays it knows.
inline constexpr llvm::StringRef kOptimizerStepCounts[] = {"warmup_steps",
                                                           "decay_steps"};
inline constexpr llvm::StringRef kOptimizerDecays[] = {"cosine", "linear",
                                                       "constant"};

/// The range of the real setting `key`; null when `key` is none of
/// kOptimizerReals.
const OptimizerRealRange *findOptimizerReal(llvm::StringRef key);

/// The fields of #tfm.rope_scaling. A field its kind does not use keeps
/// the default here, which the parser gives the fields the printed form
/// omits, so that an attribute prints and parses back as itself.
struct RopeScalingFields {
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 1.0;
  int64_t originalMaxPositions = 0;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  bool truncate = true;
  double attentionFactor = 1.0;
  llvm::SmallVector<double> shortFactor;
  llvm::SmallVector<double> longFactor;
};

} // namespace partita::tfm

#endif // PARTITA_DIALECTS_TFM_TFMDIALECT_H
