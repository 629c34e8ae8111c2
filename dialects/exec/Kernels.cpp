//===- Kernels.cpp - The kernels a plan may launch ------------------------===//

#include "dialects/exec/Kernels.h"

#include "llvm/ADT/STLExtras.h"

namespace partita::exec {

namespace {
// Keep in step with the kernel table of docs/plan-format.md.
constexpr KernelSignature kKernels[] = {
    // Forward.
    {"embedding", 2, 2, 1, 1},
    {"position_embedding", 2, 2, 1, 1},
    {"shard_slice", 1, 1, 1, 1},
    {"rms_norm", 2, 2, 1, 1},
    {"layer_norm", 2, 3, 1, 1},
    {"linear", 2, 3, 1, 1},
    {"bias_add", 2, 2, 1, 1},
    {"rotary", 1, 1, 1, 1},
    {"attention", 3, 3, 1, 1},
    {"gelu", 1, 1, 1, 1},
    {"silu", 1, 1, 1, 1},
    {"swiglu", 2, 2, 1, 1},
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
    {"attention_bwd", 5, 5, 3, 3},
    {"gelu_bwd", 2, 2, 1, 1},
    {"silu_bwd", 2, 2, 1, 1},
    {"swiglu_bwd", 3, 3, 2, 2},
    {"copy", 1, 1, 1, 1},
    {"ce_bwd", 4, 4, 1, 1},
    // Optimizer.
    {"grad_sumsq", 1, kUnbounded, 1, 1},
    {"clip_coefficient", 1, 1, 1, 1},
    {"adamw", 5, 6, 3, 4},
};
} // namespace

llvm::ArrayRef<KernelSignature> kernelSignatures() { return kKernels; }

const KernelSignature *lookupKernel(llvm::StringRef name) {
  const auto *it = llvm::find_if(
      kKernels, [&](const KernelSignature &k) { return k.name == name; });
  return it == std::end(kKernels) ? nullptr : it;
}

} // namespace partita::exec
