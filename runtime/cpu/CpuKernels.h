//===- CpuKernels.h - fp32 kernels of the plan format -----------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_CPU_CPUKERNELS_H
#define PARTITA_RUNTIME_CPU_CPUKERNELS_H

#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partita::runtime {

/// Whether the CPU backend has `kernel`.
bool hasCpuKernel(Kernel kernel);

/// Runs `kernel` (docs/plan-format.md): reads `ins`, writes `outs`, adding
/// to those flagged in `accumulate`. Throws std::runtime_error for a kernel
/// it does not have.
void runCpuKernel(Kernel kernel, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs,
                  const std::vector<bool> &accumulate,
                  const plan::KernelParams &params, const KernelContext &ctx);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_CPU_CPUKERNELS_H
