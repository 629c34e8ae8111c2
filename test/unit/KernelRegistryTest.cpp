//===- KernelRegistryTest.cpp - The kernel registry holds together --------===//

#include "partita/plan/Kernels.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace partita::plan;

namespace {

std::vector<Kernel> allKernels() {
  std::vector<Kernel> all;
  for (size_t i = 0; i < kKernelCount; ++i)
    all.push_back(Kernel(i));
  return all;
}

} // namespace

TEST(KernelRegistry, NamesAreUniqueAndFindTheirKernel) {
  std::set<std::string_view> names;
  for (Kernel k : allKernels()) {
    EXPECT_TRUE(names.insert(name(k)).second) << name(k);
    EXPECT_EQ(kernelNamed(name(k)), k) << name(k);
  }
  EXPECT_FALSE(kernelNamed("lienar"));
}

TEST(KernelRegistry, ForwardsAndBackwardsPairBothWays) {
  for (Kernel k : allKernels()) {
    const KernelInfo &i = info(k);
    SCOPED_TRACE(std::string(i.name));
    if (i.backward)
      EXPECT_EQ(info(*i.backward).forward, k);
    if (i.forward)
      EXPECT_EQ(info(*i.forward).backward, k);
    EXPECT_FALSE(i.forward && i.backward);
  }
}

TEST(KernelRegistry, SavedOperandsAreOperandsOfBoth) {
  for (Kernel k : allKernels()) {
    const KernelInfo &b = info(k);
    SCOPED_TRACE(std::string(b.name));
    EXPECT_LE(b.savedCount, kMaxSaved);
    if (!b.forward) {
      EXPECT_EQ(b.savedCount, 0u);
      continue;
    }
    const KernelInfo &f = info(*b.forward);
    for (unsigned s = 0; s < b.savedCount; ++s) {
      const SavedOperand &saved = b.saved[s];
      EXPECT_LT(saved.backwardIn, b.maxIns);
      EXPECT_LT(saved.forwardOperand, saved.ofOutput ? f.maxOuts : f.maxIns);
      // The same kind of value on both sides.
      EXPECT_EQ(operandRole(k, false, saved.backwardIn),
                operandRole(*b.forward, saved.ofOutput, saved.forwardOperand));
    }
  }
}

TEST(KernelRegistry, AritiesFitTheRoleTables) {
  for (Kernel k : allKernels()) {
    const KernelInfo &i = info(k);
    SCOPED_TRACE(std::string(i.name));
    EXPECT_LE(i.minIns, i.maxIns);
    EXPECT_LE(i.minOuts, i.maxOuts);
    EXPECT_TRUE(i.maxIns == kAnyCount || i.maxIns <= kMaxIns);
    EXPECT_LE(i.maxOuts, kMaxOuts);
    EXPECT_GE(i.minOuts, 1u);
  }
  EXPECT_TRUE(countWithin(40, 1, kAnyCount));
  EXPECT_FALSE(countWithin(4, 2, 3));
}

TEST(KernelRegistry, WorkOfGemmsAndAttention) {
  // x [2, 3, 8], w [16, 8]: 6 rows; the backward is twice the forward.
  std::vector<int64_t> x = {2, 3, 8}, w = {16, 8}, y = {2, 3, 16};
  auto linear = kernelWork(Kernel::Linear, {x, w}, {});
  ASSERT_TRUE(linear);
  EXPECT_DOUBLE_EQ(linear->flops(), 2.0 * 6 * 16 * 8);
  auto linearBwd = kernelWork(Kernel::LinearBwd, {y, x, w}, {});
  ASSERT_TRUE(linearBwd);
  EXPECT_DOUBLE_EQ(linearBwd->flops(), 2 * linear->flops());
  EXPECT_EQ(linearBwd->typedBy, 1u);

  // 4 heads of 8 over 128 tokens, a window of 32 keys.
  std::vector<int64_t> q = {2, 128, 32};
  WorkParams heads{4, 32};
  auto attention = kernelWork(Kernel::Attention, {q, q, q}, heads);
  ASSERT_TRUE(attention);
  EXPECT_DOUBLE_EQ(attention->flops(), 4.0 * (2 * 4) * 128 * 32 * 8);
  auto attentionBwd = kernelWork(Kernel::AttentionBwd, {q, q, q, q, q}, heads);
  ASSERT_TRUE(attentionBwd);
  EXPECT_DOUBLE_EQ(attentionBwd->flops(), 2 * attention->flops());
  EXPECT_FALSE(kernelWork(Kernel::Attention, {q, q, q}, {}));

  auto add = kernelWork(Kernel::Add, {x, x}, {});
  ASSERT_TRUE(add);
  EXPECT_TRUE(add->memoryBound());
  EXPECT_EQ(add->flops(), 0);
}
