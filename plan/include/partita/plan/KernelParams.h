//===- KernelParams.h - A kernel launch's params, typed ---------*- C++ -*-===//
//
// The params of a kernel launch (docs/plan-format.md, the kernel table) as
// the backends read them: decoded once, when a plan is loaded, from the
// launch's `params` object, which the plan loader has checked first
// (KernelShapes.cpp). A kernel reads the fields its row of the table
// names; the others keep their defaults.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_PLAN_KERNELPARAMS_H
#define PARTITA_PLAN_KERNELPARAMS_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace partita::plan {

enum class RopeScaling { None, Linear, Llama3, Yarn, LongRope };

/// RoPE's frequencies: a base and, where the model names one, a scaling
/// with its fields (Hugging Face's rope_scaling, resolved by the importer).
struct RotaryParams {
  int64_t rotaryDim = 0;
  double theta = 10000;
  RopeScaling scaling = RopeScaling::None;
  double factor = 1;                    // scaling_factor
  double lowFreqFactor = 0;             // llama3
  double highFreqFactor = 0;            // llama3
  double originalMaxPositions = 0;      // llama3, yarn
  double betaFast = 0, betaSlow = 0;    // yarn
  bool truncate = false;                // yarn
  double attentionFactor = 1;           // yarn, longrope
  std::vector<double> frequencyFactors; // longrope, rotary_dim / 2
  /// rotaryInverseFrequencies of the above, made once by decodeParams.
  std::vector<double> inverseFrequencies;
};

/// The rotary_dim / 2 inverse frequencies of `rope`.
std::vector<double> rotaryInverseFrequencies(const RotaryParams &rope);
/// What the rotary kernels multiply the rotated channels by: yarn's and
/// longrope's attention_factor, else 1.
double rotaryMagnitude(const RotaryParams &rope);

struct KernelParams {
  // rms_norm, layer_norm and their backward.
  double eps = 0;
  double weightOffset = 0; // added to the weights (Gemma's 1)
  // attention, rotary and their backward.
  int64_t numHeads = 0, numKvHeads = 0;
  bool causal = false;
  int64_t window = 0; // keys a query sees; 0: all
  RotaryParams rotary;
  // gelu, geglu and their backward: the tanh approximation.
  bool tanhGelu = false;
  // embedding: what rows are multiplied by; ce_loss, ce_bwd: the loss's
  // scale, 1 / (global batch x sequence).
  double scale = 1;
  // embedding, ce_*: the vocabulary's parts over tp, and its whole size.
  int64_t vocabParts = 1, vocabSize = 0;
  // shard_slice: the dimension sliced and the group sliced over.
  int64_t dim = -1;
  std::string group;
  // grad_sumsq: each input's weight in the sum.
  std::vector<double> weights;
  // adamw.
  bool dpShard = false, weightDecay = false;
};

/// `params` as the backends read them. Throws nlohmann::json::exception
/// where a field has the wrong type (the plan loader reports it first).
KernelParams decodeParams(const nlohmann::json &params);

} // namespace partita::plan

#endif // PARTITA_PLAN_KERNELPARAMS_H
