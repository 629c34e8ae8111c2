//===- PlanKernels.h - The kernels a plan may launch ------------*- C++ -*-===//
//
// One table of every kernel of the plan format, with the number of buffers
// each reads and writes: the exec dialect's verifier checks launches
// against it when the compiler emits them, and the runtime's plan loader
// when it reads plan.json. docs/plan-format.md documents what each kernel
// computes. Plain C++, so that the runtime builds without LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_PLANKERNELS_H
#define PARTITA_RUNTIME_PLANKERNELS_H

#include <iterator>
#include <string_view>

namespace partita::runtime {

/// A variadic list's upper bound.
constexpr unsigned kAnyCount = ~0u;

struct PlanKernel {
  std::string_view name;
  /// Inclusive bounds on the buffers read and written.
  unsigned minIns, maxIns, minOuts, maxOuts;
};

// Keep in step with the kernel table of docs/plan-format.md.
inline constexpr PlanKernel kPlanKernels[] = {
    // Forward.
    {"embedding", 2, 2, 1, 1},
    {"position_embedding", 2, 2, 1, 1},
    {"shard_slice", 1, 1, 1, 1},
    {"rms_norm", 2, 2, 1, 1},
    {"layer_norm", 2, 3, 1, 1},
    {"linear", 2, 3, 1, 1},
    {"bias_add", 2, 2, 1, 1},
    {"rotary", 1, 1, 1, 1},
    {"attention", 3, 3, 1, 2},
    {"gelu", 1, 1, 1, 1},
    {"silu", 1, 1, 1, 1},
    {"swiglu", 2, 2, 1, 1},
    {"geglu", 2, 2, 1, 1},
    {"add", 2, 3, 1, 1},
    {"ce_max", 1, 1, 1, 1},
    {"ce_stats", 3, 3, 1, 1},
    {"ce_loss", 2, 2, 1, 1},
    // Backward.
    {"embedding_bwd", 2, 2, 1, 1},
    {"position_embedding_bwd", 1, 1, 1, 1},
    {"rms_norm_bwd", 3, 3, 2, 2},
    {"layer_norm_bwd", 3, 3, 2, 3},
    {"linear_bwd", 3, 3, 2, 3},
    {"bias_add_bwd", 1, 1, 2, 2},
    {"rotary_bwd", 1, 1, 1, 1},
    {"attention_bwd", 5, 6, 3, 3},
    {"gelu_bwd", 2, 2, 1, 1},
    {"silu_bwd", 2, 2, 1, 1},
    {"swiglu_bwd", 3, 3, 2, 2},
    {"geglu_bwd", 3, 3, 2, 2},
    {"copy", 1, 1, 1, 1},
    {"ce_bwd", 4, 4, 1, 1},
    // Optimizer.
    {"grad_sumsq", 1, kAnyCount, 1, 1},
    {"clip_coefficient", 1, 1, 1, 1},
    {"adamw", 5, 6, 3, 4},
};

/// The kernel called `name`, or null.
inline const PlanKernel *findPlanKernel(std::string_view name) {
  for (const PlanKernel &k : kPlanKernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

/// Whether `count` is within [min, max].
inline bool countWithin(size_t count, unsigned min, unsigned max) {
  return count >= min && (max == kAnyCount || count <= max);
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_PLANKERNELS_H
