//===- CpuKernels.h - fp32 kernels of the plan format -----------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_CPU_CPUKERNELS_H
#define PARTITA_RUNTIME_CPU_CPUKERNELS_H

#include "partita/runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace partita::runtime {

/// A buffer as a kernel sees it.
struct TensorRef {
  float *f = nullptr;   // f32 buffers
  int32_t *i = nullptr; // token buffers
  const std::vector<int64_t> *shape = nullptr;
  int64_t n = 0;
  int64_t dim(int k) const { return (*shape)[k < 0 ? shape->size() + k : k]; }
};

struct KernelContext {
  int64_t step = 0;
  const Optimizer *optimizer = nullptr;
  int64_t tpRank = 0, dpRank = 0, dp = 1;
  /// Group rank and size for shard_slice.
  int64_t groupRank = 0, groupSize = 1;
};

/// Whether the CPU backend has kernel `name`.
bool hasCpuKernel(const std::string &name);

/// Runs kernel `name` (docs/plan-format.md): reads `ins`, writes `outs`,
/// adding to those flagged in `accumulate`. Throws std::runtime_error for
/// an unknown kernel.
void runCpuKernel(const std::string &name, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs,
                  const std::vector<bool> &accumulate,
                  const nlohmann::json &params, const KernelContext &ctx);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_CPU_CPUKERNELS_H
