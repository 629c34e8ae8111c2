//===- RotaryTest.cpp - RoPE frequencies of each scaling ------------------===//
//
// The inverse frequencies and magnitude every backend rotates by, against
// values worked out by hand from the published rules (transformers'
// modeling_rope_utils.py) on a head rotating 8 channels with base 10^4:
// unscaled, frequency i is 10^(-i): 1, 0.1, 0.01, 0.001.
//
//===----------------------------------------------------------------------===//

#include "partita/plan/KernelParams.h"

#include <gtest/gtest.h>

#include <cmath>

using json = nlohmann::json;

namespace {

/// The frequencies and magnitude of a rotary launch's params.
std::vector<double> rotaryInverseFrequencies(const json &params) {
  return partita::plan::rotaryInverseFrequencies(
      partita::plan::decodeParams(params).rotary);
}
double rotaryMagnitude(const json &params) {
  return partita::plan::rotaryMagnitude(
      partita::plan::decodeParams(params).rotary);
}

json yarn(bool truncate) {
  return {{"rotary_dim", 8},         {"theta", 1e4},
          {"scaling", "yarn"},       {"scaling_factor", 4.0},
          {"beta_fast", 32.0},       {"beta_slow", 1.0},
          {"truncate", truncate},    {"original_max_positions", 64},
          {"attention_factor", 1.25}};
}

void expectFrequencies(const json &params, std::vector<double> expected) {
  std::vector<double> inv = rotaryInverseFrequencies(params);
  ASSERT_EQ(inv.size(), expected.size());
  for (size_t i = 0; i < inv.size(); ++i)
    EXPECT_NEAR(inv[i], expected[i], 1e-15) << "pair " << i;
}

TEST(RotaryFrequencies, Yarn) {
  // A pair turns 64 theta^(-2i/8) / 2pi times over the 64 pretrained
  // positions: 32 turns at i = 8 ln(64 / 64pi) / (2 ln 10^4) = -0.497, one
  // at 1.008. Truncated to whole pairs, the ramp runs from 0 to 2, so pair
  // 0 keeps its frequency, pair 1 takes half of it and half of it / 4, and
  // pairs 2 and 3 are divided by 4.
  expectFrequencies(yarn(true), {1.0, 0.1 * (0.5 + 0.5 / 4), 0.0025, 0.00025});
  // Untruncated, the ramp ends at 1.008: pair 1 is 1 / 1.008 of the way.
  double high = 8 * std::log(64 / (2 * M_PI)) / (2 * std::log(1e4));
  EXPECT_NEAR(high, 1.008, 1e-3);
  double share = 1 / high;
  expectFrequencies(yarn(false),
                    {1.0, 0.1 * (share / 4 + (1 - share)), 0.0025, 0.00025});
  EXPECT_EQ(rotaryMagnitude(yarn(true)), 1.25);
}

TEST(RotaryFrequencies, LongRope) {
  json p = {
      {"rotary_dim", 8},         {"theta", 1e4},
      {"scaling", "longrope"},   {"original_max_positions", 16},
      {"attention_factor", 1.5}, {"frequency_factors", {1.0, 2.0, 4.0, 8.0}}};
  expectFrequencies(p, {1.0, 0.05, 0.0025, 0.000125});
  EXPECT_EQ(rotaryMagnitude(p), 1.5);
}

TEST(RotaryFrequencies, OtherScalingsKeepTheMagnitude) {
  json p = {{"rotary_dim", 8}, {"theta", 1e4}};
  expectFrequencies(p, {1.0, 0.1, 0.01, 0.001});
  EXPECT_EQ(rotaryMagnitude(p), 1.0);
  p["scaling"] = "linear";
  p["scaling_factor"] = 2.0;
  // A stray attention_factor is not yarn's or longrope's: it scales nothing.
  p["attention_factor"] = 3.0;
  expectFrequencies(p, {0.5, 0.05, 0.005, 0.0005});
  EXPECT_EQ(rotaryMagnitude(p), 1.0);
}

} // namespace
