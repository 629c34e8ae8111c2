//===- Bf16Test.cpp - bf16 storage on the CPU device ----------------------===//

#include "partita/runtime/Bf16.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

using namespace partita::runtime;

namespace {

float bitsToFloat(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// A view of `values` (f32 or bf16) shaped `shape`.
template <typename T>
TensorRef tensor(std::vector<T> &values, const std::vector<int64_t> &shape) {
  TensorRef t;
  if constexpr (std::is_same_v<T, float>)
    t.f = values.data();
  else
    t.h = values.data();
  t.n = int64_t(values.size());
  t.shape = &shape;
  return t;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(toBf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(toBf16(bitsToFloat(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(toBf16(bitsToFloat(0x3f818000u)), 0x3f82);
  // Just above halfway rounds up.
  EXPECT_EQ(toBf16(bitsToFloat(0x3f808001u)), 0x3f81);
  EXPECT_EQ(toBf16(-2.5f), 0xc020);
  EXPECT_EQ(fromBf16(toBf16(0.15625f)), 0.15625f); // exact in bf16
}

TEST(Bf16, KeepsSpecialValues) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fromBf16(toBf16(inf)), inf);
  EXPECT_EQ(fromBf16(toBf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(std::nanf("")))));
  EXPECT_EQ(toBf16(-std::nanf("")), 0x7fff); // canonical, as on the GPU
  // A NaN whose payload sits in the low half stays a NaN.
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(bitsToFloat(0x7f800001u)))));
  // The largest f32 is beyond bf16's largest finite value: infinity.
  EXPECT_EQ(fromBf16(toBf16(std::numeric_limits<float>::max())), inf);
}

TEST(Bf16, CpuKernelsComputeOnF32CopiesAndRoundOnce) {
  std::unique_ptr<Device> cpu = createCpuDevice();
  ASSERT_TRUE(cpu->hasBf16());
  std::vector<int64_t> shape = {4};
  // add: the output accumulates; a + b + out is rounded once.
  std::vector<uint16_t> a = {toBf16(1.0f), toBf16(2.0f), toBf16(-1.0f),
                             toBf16(0.5f)};
  std::vector<uint16_t> b = {toBf16(bitsToFloat(0x3b800000u)), // 2^-8
                             toBf16(0.25f), toBf16(1.0f), toBf16(0.5f)};
  std::vector<uint16_t> out = {toBf16(bitsToFloat(0x3b800000u)), 0, 0, 0};
  cpu->launch(Kernel::Add, {tensor(a, shape), tensor(b, shape)},
              {tensor(out, shape)}, {true}, partita::plan::KernelParams{},
              KernelContext{});
  // 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly; rounding each addition to bf16
  // would have lost both halves.
  EXPECT_EQ(out[0], toBf16(1.0f + 2 * bitsToFloat(0x3b800000u)));
  EXPECT_EQ(fromBf16(out[1]), 2.25f);
  EXPECT_EQ(fromBf16(out[2]), 0.0f);
  EXPECT_EQ(fromBf16(out[3]), 1.0f);
}

TEST(Bf16, AdamWUpdatesTheMasterCopyAndRoundsTheParameter) {
  std::unique_ptr<Device> cpu = createCpuDevice();
  std::vector<int64_t> shape = {3}, scalar = {};
  std::vector<float> w = {0.1f, -0.2f, 0.3f}, m(3, 0.0f), v(3, 0.0f);
  std::vector<uint16_t> p, g = {toBf16(0.5f), toBf16(-1.0f), toBf16(0.0f)};
  for (float x : w)
    p.push_back(toBf16(x));
  std::vector<float> clip = {1.0f};
  Optimizer o{1e-3, 1e-4, 0.9, 0.95, 1e-8, 0.0, 1.0, 0, 0, "constant"};
  KernelContext ctx;
  ctx.optimizer = &o;
  std::vector<float> before = w;
  cpu->launch(
      Kernel::AdamW,
      {tensor(p, shape), tensor(g, shape), tensor(m, shape), tensor(v, shape),
       tensor(clip, scalar), tensor(w, shape)},
      {tensor(p, shape), tensor(m, shape), tensor(v, shape), tensor(w, shape)},
      {false, false, false, false}, partita::plan::KernelParams{},
      ctx); // no decay, not sharded
  // The first step moves each weight with a gradient by lr (Adam's
  // normalised step), in f32: below bf16's resolution at 0.1.
  EXPECT_NEAR(w[0], before[0] - 1e-3, 1e-6);
  EXPECT_NEAR(w[1], before[1] + 1e-3, 1e-6);
  EXPECT_EQ(w[2], before[2]);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(p[k], toBf16(w[k])) << k;
}

} // namespace
