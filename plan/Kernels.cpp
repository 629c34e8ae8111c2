//===- Kernels.cpp - The kernels a plan may launch ------------------------===//

#include "partita/plan/Kernels.h"

#include <algorithm>
#include <initializer_list>

namespace partita::plan {

namespace {

using K = Kernel;
using O = Operand;
using Table = std::array<KernelInfo, kKernelCount>;

/// `roles` in an array of N, the last repeated to the end.
template <size_t N>
constexpr std::array<Operand, N> rolesOf(std::initializer_list<Operand> roles) {
  std::array<Operand, N> all{};
  size_t i = 0;
  Operand last = Operand::MicroBatch;
  for (Operand role : roles)
    all[i++] = last = role;
  for (; i < N; ++i)
    all[i] = last;
  return all;
}

/// A kernel reading `minIns` to `ins.size()` buffers (or more, with
/// `variadic`) and writing `minOuts` to `outs.size()`.
constexpr KernelInfo entry(Kernel kernel, std::string_view name,
                           unsigned minIns, std::initializer_list<Operand> ins,
                           unsigned minOuts,
                           std::initializer_list<Operand> outs,
                           bool variadic = false) {
  KernelInfo k{kernel,
               name,
               minIns,
               variadic ? kAnyCount : unsigned(ins.size()),
               minOuts,
               unsigned(outs.size()),
               rolesOf<kMaxIns>(ins),
               rolesOf<kMaxOuts>(outs)};
  return k;
}

/// `backward` differentiates `forward`, reading `saved` of its operands
/// again (after the output's gradient, or where `saved` says).
constexpr void pair(Table &t, Kernel forward, Kernel backward,
                    std::initializer_list<SavedOperand> saved,
                    std::string_view ownParam = {}) {
  t[size_t(forward)].backward = backward;
  KernelInfo &b = t[size_t(backward)];
  b.forward = forward;
  for (const SavedOperand &s : saved)
    b.saved[b.savedCount++] = s;
  b.ownParam = ownParam;
}

constexpr Table makeTable() {
  const O MB = O::MicroBatch, V = O::Values, T = O::Tokens, W = O::Weight,
          G = O::Gradient, S = O::Scalar, H = O::Held, OS = O::OptimizerState;
  Table t{};
  auto add = [&t](KernelInfo k) { t[size_t(k.kernel)] = k; };
  add(entry(K::Embedding, "embedding", 2, {W, T}, 1, {MB}));
  add(entry(K::PositionEmbedding, "position_embedding", 2, {MB, W}, 1, {MB}));
  add(entry(K::ShardSlice, "shard_slice", 1, {MB}, 1, {MB}));
  add(entry(K::RmsNorm, "rms_norm", 2, {MB, W}, 1, {MB}));
  add(entry(K::LayerNorm, "layer_norm", 2, {MB, W, W}, 1, {MB}));
  add(entry(K::Linear, "linear", 2, {MB, W, W}, 1, {MB}));
  add(entry(K::BiasAdd, "bias_add", 2, {MB, W}, 1, {MB}));
  add(entry(K::Rotary, "rotary", 1, {MB}, 1, {MB}));
  add(entry(K::Attention, "attention", 3, {MB, MB, MB}, 1, {MB, MB}));
  add(entry(K::Gelu, "gelu", 1, {MB}, 1, {MB}));
  add(entry(K::Silu, "silu", 1, {MB}, 1, {MB}));
  add(entry(K::Swiglu, "swiglu", 2, {MB, MB}, 1, {MB}));
  add(entry(K::Geglu, "geglu", 2, {MB, MB}, 1, {MB}));
  add(entry(K::Add, "add", 2, {V, V, V}, 1, {V}));
  add(entry(K::CeMax, "ce_max", 1, {MB}, 1, {MB}));
  add(entry(K::CeStats, "ce_stats", 3, {MB, MB, T}, 1, {MB}));
  add(entry(K::CeLoss, "ce_loss", 2, {MB, MB}, 1, {S}));

  add(entry(K::EmbeddingBwd, "embedding_bwd", 2, {MB, T}, 1, {G}));
  add(entry(K::PositionEmbeddingBwd, "position_embedding_bwd", 1, {MB}, 1,
            {G}));
  add(entry(K::RmsNormBwd, "rms_norm_bwd", 3, {MB, MB, W}, 2, {MB, G}));
  add(entry(K::LayerNormBwd, "layer_norm_bwd", 3, {MB, MB, W}, 2, {MB, G, G}));
  add(entry(K::LinearBwd, "linear_bwd", 3, {MB, MB, W}, 2, {MB, G, G}));
  add(entry(K::BiasAddBwd, "bias_add_bwd", 1, {MB}, 2, {MB, G}));
  add(entry(K::RotaryBwd, "rotary_bwd", 1, {MB}, 1, {MB}));
  add(entry(K::AttentionBwd, "attention_bwd", 5, {MB, MB, MB, MB, MB, MB}, 3,
            {MB, MB, MB}));
  add(entry(K::GeluBwd, "gelu_bwd", 2, {MB, MB}, 1, {MB}));
  add(entry(K::SiluBwd, "silu_bwd", 2, {MB, MB}, 1, {MB}));
  add(entry(K::SwigluBwd, "swiglu_bwd", 3, {MB, MB, MB}, 2, {MB, MB}));
  add(entry(K::GegluBwd, "geglu_bwd", 3, {MB, MB, MB}, 2, {MB, MB}));
  add(entry(K::Copy, "copy", 1, {V}, 1, {V}));
  add(entry(K::CeBwd, "ce_bwd", 4, {MB, MB, MB, T}, 1, {MB}));

  add(entry(K::GradSumsq, "grad_sumsq", 1, {G}, 1, {S}, /*variadic=*/true));
  add(entry(K::ClipCoefficient, "clip_coefficient", 1, {S}, 1, {S}));
  add(entry(K::AdamW, "adamw", 5, {H, G, OS, OS, S, OS}, 3, {H, OS, OS, OS}));

  pair(t, K::Embedding, K::EmbeddingBwd, {{1, false, 1}});
  pair(t, K::PositionEmbedding, K::PositionEmbeddingBwd, {});
  pair(t, K::RmsNorm, K::RmsNormBwd, {{1, false, 0}, {2, false, 1}});
  pair(t, K::LayerNorm, K::LayerNormBwd, {{1, false, 0}, {2, false, 1}});
  pair(t, K::Linear, K::LinearBwd, {{1, false, 0}, {2, false, 1}});
  pair(t, K::BiasAdd, K::BiasAddBwd, {});
  pair(t, K::Rotary, K::RotaryBwd, {});
  // With its outputs: o and, where kept, the log-sum-exp.
  pair(t, K::Attention, K::AttentionBwd,
       {{1, false, 0},
        {2, false, 1},
        {3, false, 2},
        {4, true, 0},
        {5, true, 1}});
  pair(t, K::Gelu, K::GeluBwd, {{1, false, 0}});
  pair(t, K::Silu, K::SiluBwd, {{1, false, 0}});
  pair(t, K::Swiglu, K::SwigluBwd, {{1, false, 0}, {2, false, 1}});
  pair(t, K::Geglu, K::GegluBwd, {{1, false, 0}, {2, false, 1}});
  // The logits, their maxima, the statistics and the labels; the loss's
  // scale is the backward's own.
  pair(t, K::CeStats, K::CeBwd,
       {{0, false, 0}, {1, false, 1}, {2, true, 0}, {3, false, 2}}, "scale");
  return t;
}

constexpr Table kTable = makeTable();

constexpr bool everyKernelInPlace() {
  for (size_t i = 0; i < kKernelCount; ++i)
    if (size_t(kTable[i].kernel) != i || kTable[i].name.empty())
      return false;
  return true;
}
static_assert(everyKernelInPlace(), "every Kernel needs its one entry");

} // namespace

const KernelInfo &info(Kernel kernel) { return kTable[size_t(kernel)]; }

std::optional<Kernel> kernelNamed(std::string_view name) {
  for (const KernelInfo &k : kTable)
    if (k.name == name)
      return k.kernel;
  return std::nullopt;
}

double KernelWork::flops() const {
  double total = 0;
  for (const Gemm &g : gemms)
    total += 2 * g.m * g.n * g.k;
  if (attention) // Q K^T and P V
    total += 4 * attention->batchHeads * attention->queries *
             attention->context * attention->headDim * attention->passes;
  return total;
}

namespace {

double elements(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= double(d);
  return n;
}

} // namespace

std::optional<KernelWork>
kernelWork(Kernel kernel, const std::vector<std::vector<int64_t>> &inShapes,
           const WorkParams &params) {
  KernelWork work;
  bool backward = kernel == Kernel::LinearBwd || kernel == Kernel::AttentionBwd;
  unsigned first = backward ? 1 : 0; // past the output's gradient
  work.typedBy = first;
  if (kernel == Kernel::Linear || kernel == Kernel::LinearBwd) {
    // x, w [n, k] (after dy): y = x w^T; dx = dy w, dw = dy^T x.
    if (inShapes.size() < first + 2 || inShapes[first + 1].size() != 2)
      return std::nullopt;
    const std::vector<int64_t> &w = inShapes[first + 1];
    double n = double(w[0]), k = double(w[1]);
    double m = elements(inShapes[first]) / k;
    if (backward)
      work.gemms = {{m, k, n}, {n, k, m}};
    else
      work.gemms = {{m, n, k}};
  } else if (kernel == Kernel::Attention || kernel == Kernel::AttentionBwd) {
    // q, k, v (after do): heads of [batch, seq, width].
    if (inShapes.size() < first + 2 || params.numHeads <= 0 ||
        inShapes[first].size() != 3 || inShapes[first + 1].size() != 3)
      return std::nullopt;
    const std::vector<int64_t> &q = inShapes[first], &k = inShapes[first + 1];
    double context = double(k[1]);
    if (params.window)
      context = std::min(context, double(*params.window));
    work.attention = {double(q[0]) * double(params.numHeads), double(q[1]),
                      context, double(q[2]) / double(params.numHeads),
                      backward ? 2.0 : 1.0};
  }
  return work;
}

Operand operandRole(Kernel kernel, bool output, size_t i) {
  const KernelInfo &k = info(kernel);
  if (output)
    return k.outRoles[std::min<size_t>(i, kMaxOuts - 1)];
  return k.inRoles[std::min<size_t>(i, kMaxIns - 1)];
}

} // namespace partita::plan
