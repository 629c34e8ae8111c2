//===- Kernels.h - The kernels a plan may launch ----------------*- C++ -*-===//
//
// The one registry of the plan format's kernels: for each, its name, the
// buffers it reads and writes and what each holds, and how forward and
// backward kernels pair (which backward differentiates which forward, and
// which of the forward's operands it reads again). The exec dialect's
// verifier, the backward builder, the plan loader and both backends read
// it. docs/plan-format.md documents what each kernel computes. Plain C++:
// no MLIR, CUDA or MPI, so that the runtime builds without them.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_PLAN_KERNELS_H
#define PARTITA_PLAN_KERNELS_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace partita::plan {

enum class Kernel : uint8_t {
  // Forward.
  Embedding,
  PositionEmbedding,
  ShardSlice,
  RmsNorm,
  LayerNorm,
  Linear,
  BiasAdd,
  Rotary,
  Attention,
  Gelu,
  Silu,
  Swiglu,
  Geglu,
  Add,
  CeMax,
  CeStats,
  CeLoss,
  // Backward.
  EmbeddingBwd,
  PositionEmbeddingBwd,
  RmsNormBwd,
  LayerNormBwd,
  LinearBwd,
  BiasAddBwd,
  RotaryBwd,
  AttentionBwd,
  GeluBwd,
  SiluBwd,
  SwigluBwd,
  GegluBwd,
  Copy,
  CeBwd,
  // Optimizer.
  GradSumsq,
  ClipCoefficient,
  AdamW,
};

/// How many kernels there are: tables indexed by Kernel have this size.
inline constexpr size_t kKernelCount = size_t(Kernel::AdamW) + 1;

/// A variadic list's upper bound.
inline constexpr unsigned kAnyCount = ~0u;

/// What a kernel's operand holds.
enum class Operand : uint8_t {
  MicroBatch,     // a micro-batch's activations or their gradients
  Values,         // the same, or scalars (copy, add)
  Tokens,         // tokens or labels (int32)
  Weight,         // a parameter's values (held or gathered)
  Held,           // a parameter's values as the rank holds them (adamw)
  Gradient,       // a parameter's gradient, whole or a shard
  Scalar,         // the loss, the gradient norm, the clip coefficient
  OptimizerState, // AdamW's moments, master weights
};

/// An operand a backward kernel reads again from its forward launch: its
/// input `backwardIn` is the forward's input (or, `ofOutput`, output)
/// `forwardOperand`.
struct SavedOperand {
  unsigned backwardIn;
  bool ofOutput;
  unsigned forwardOperand;
};

inline constexpr unsigned kMaxIns = 6, kMaxOuts = 4, kMaxSaved = 5;

struct KernelInfo {
  Kernel kernel;
  std::string_view name;
  /// Inclusive bounds on the buffers read and written.
  unsigned minIns, maxIns, minOuts, maxOuts;
  /// What each input and output holds; past the last entry of a variadic
  /// list, its last entry's role (the tables below fill every slot).
  std::array<Operand, kMaxIns> inRoles;
  std::array<Operand, kMaxOuts> outRoles;
  /// A forward's backward kernel; a backward kernel's forward.
  std::optional<Kernel> backward = std::nullopt, forward = std::nullopt;
  /// A backward kernel's operands read again from its forward.
  std::array<SavedOperand, kMaxSaved> saved = {};
  unsigned savedCount = 0;
  /// Params a backward kernel takes and its forward does not.
  std::string_view ownParam = {};
};

/// The kernel's entry.
const KernelInfo &info(Kernel kernel);
/// The kernel's name in plan.json and the exec dialect.
inline std::string_view name(Kernel kernel) { return info(kernel).name; }
/// The kernel called `name`, if any.
std::optional<Kernel> kernelNamed(std::string_view name);

/// What input `i` (or, `output`, output `i`) of `kernel` holds.
Operand operandRole(Kernel kernel, bool output, size_t i);

/// What one launch computes, for costing it: its GEMMs and its attention
/// core, which run at the device's compute rate; a kernel with neither is
/// bound by memory, every operand read or written once.
struct KernelWork {
  /// C[m, n] = A[m, k] B[k, n]: 2 m n k FLOPs.
  struct Gemm {
    double m, n, k;
  };
  /// Softmax(Q K^T) V over `batchHeads` heads of `queries` rows, each
  /// attending to `context` keys of `headDim`; a backward core is two
  /// forward passes' work.
  struct Attention {
    double batchHeads, queries, context, headDim, passes;
  };
  std::vector<Gemm> gemms;
  std::optional<Attention> attention;
  /// The input whose element type the GEMMs and the core run in.
  unsigned typedBy = 0;

  bool memoryBound() const { return gemms.empty() && !attention; }
  /// The GEMMs' and the attention core's FLOPs (causal masks not halved).
  double flops() const;
};

/// The params of a launch that its work depends on.
struct WorkParams {
  int64_t numHeads = 0;
  std::optional<int64_t> window;
};

/// The work of a launch of `kernel` reading buffers of `inShapes`, or
/// nullopt where the shapes or params do not describe one (attention
/// needs num_heads and [batch, seq, width] inputs).
std::optional<KernelWork>
kernelWork(Kernel kernel, const std::vector<std::vector<int64_t>> &inShapes,
           const WorkParams &params);

/// Whether `count` is within [min, max].
inline bool countWithin(size_t count, unsigned min, unsigned max) {
  return count >= min && (max == kAnyCount || count <= max);
}

} // namespace partita::plan

#endif // PARTITA_PLAN_KERNELS_H
