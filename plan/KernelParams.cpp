//===- KernelParams.cpp - A kernel launch's params, typed -----------------===//

#include "partita/plan/KernelParams.h"

#include <algorithm>
#include <cmath>

namespace partita::plan {

namespace {

RopeScaling scalingNamed(const std::string &name) {
  if (name == "linear")
    return RopeScaling::Linear;
  if (name == "llama3")
    return RopeScaling::Llama3;
  if (name == "yarn")
    return RopeScaling::Yarn;
  if (name == "longrope")
    return RopeScaling::LongRope;
  return RopeScaling::None;
}

RotaryParams decodeRotary(const nlohmann::json &p) {
  RotaryParams r;
  r.rotaryDim = p.value("rotary_dim", int64_t(0));
  r.theta = p.value("theta", 10000.0);
  r.scaling = scalingNamed(p.value("scaling", std::string()));
  r.factor = p.value("scaling_factor", 1.0);
  r.lowFreqFactor = p.value("low_freq_factor", 0.0);
  r.highFreqFactor = p.value("high_freq_factor", 0.0);
  r.originalMaxPositions = p.value("original_max_positions", 0.0);
  r.betaFast = p.value("beta_fast", 0.0);
  r.betaSlow = p.value("beta_slow", 0.0);
  r.truncate = p.value("truncate", false);
  r.attentionFactor = p.value("attention_factor", 1.0);
  r.frequencyFactors = p.value("frequency_factors", std::vector<double>{});
  return r;
}

/// Hugging Face's YaRN: pairs below `low` turn often enough over the
/// pretrained length to keep their frequency, those above `high` are
/// interpolated, and a linear ramp over the index blends those between.
void applyYarn(const RotaryParams &r, std::vector<double> &inv) {
  double rd = double(r.rotaryDim), old = r.originalMaxPositions;
  auto pairTurning = [&](double turns) {
    return rd * std::log(old / (turns * 2 * M_PI)) / (2 * std::log(r.theta));
  };
  double low = pairTurning(r.betaFast), high = pairTurning(r.betaSlow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, rd - 1);
  if (low == high)
    high += 0.001;
  for (size_t i = 0; i < inv.size(); ++i) {
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    inv[i] = inv[i] / r.factor * ramp + inv[i] * (1 - ramp);
  }
}

void applyLlama3(const RotaryParams &r, std::vector<double> &inv) {
  double low = r.lowFreqFactor, high = r.highFreqFactor,
         old = r.originalMaxPositions;
  for (double &f : inv) {
    double wavelen = 2 * M_PI / f;
    if (wavelen > old / low) {
      f /= r.factor;
    } else if (wavelen >= old / high) {
      double smooth = (old / wavelen - low) / (high - low);
      f = (1 - smooth) * f / r.factor + smooth * f;
    }
  }
}

} // namespace

std::vector<double> rotaryInverseFrequencies(const RotaryParams &r) {
  int64_t rd = r.rotaryDim;
  std::vector<double> inv(rd / 2);
  for (int64_t i = 0; i < rd / 2; ++i)
    inv[i] = 1.0 / std::pow(r.theta, double(2 * i) / rd);
  switch (r.scaling) {
  case RopeScaling::None:
    break;
  case RopeScaling::Linear:
    for (double &f : inv)
      f /= r.factor;
    break;
  case RopeScaling::Llama3:
    applyLlama3(r, inv);
    break;
  case RopeScaling::Yarn:
    applyYarn(r, inv);
    break;
  case RopeScaling::LongRope:
    for (size_t i = 0; i < inv.size() && i < r.frequencyFactors.size(); ++i)
      inv[i] /= r.frequencyFactors[i];
    break;
  }
  return inv;
}

double rotaryMagnitude(const RotaryParams &r) {
  return r.scaling == RopeScaling::Yarn || r.scaling == RopeScaling::LongRope
             ? r.attentionFactor
             : 1.0;
}

KernelParams decodeParams(const nlohmann::json &p) {
  KernelParams k;
  if (!p.is_object())
    return k;
  k.eps = p.value("eps", 0.0);
  k.weightOffset = p.value("weight_offset", 0.0);
  k.numHeads = p.value("num_heads", int64_t(0));
  k.numKvHeads = p.value("num_kv_heads", int64_t(0));
  k.causal = p.value("causal", false);
  k.window = p.value("window", int64_t(0));
  k.rotary = decodeRotary(p);
  k.rotary.inverseFrequencies = rotaryInverseFrequencies(k.rotary);
  k.tanhGelu = p.value("approximate", std::string()) == "tanh";
  k.scale = p.value("scale", 1.0);
  k.vocabParts = p.value("vocab_parts", int64_t(1));
  k.vocabSize = p.value("vocab_size", int64_t(0));
  k.dim = p.value("dim", int64_t(-1));
  k.group = p.value("group", std::string());
  k.weights = p.value("weights", std::vector<double>{});
  k.dpShard = p.value("dp_shard", false);
  k.weightDecay = p.value("weight_decay", false);
  return k;
}

} // namespace partita::plan
