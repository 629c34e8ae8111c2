//===- CpuKernels.h - fp32 kernels of the plan format -----------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_CPU_CPUKERNELS_H
#define PARTITA_RUNTIME_CPU_CPUKERNELS_H

#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <nlohmann/json.hpp>

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
                  const nlohmann::json &params, const KernelContext &ctx);

/// The rotary kernels' inverse frequencies (rotary_dim / 2 of them) from
/// their parameters, with linear, llama3, yarn or longrope scaling.
std::vector<double> rotaryInverseFrequencies(const nlohmann::json &params);

/// What the rotary kernels multiply the rotated channels by: yarn's and
/// longrope's attention_factor, else 1.
double rotaryMagnitude(const nlohmann::json &params);

/// What rms_norm adds to its weights: `weight_offset` (Gemma's 1), else 0.
double normWeightOffset(const nlohmann::json &params);

/// What the embedding multiplies its rows by: `scale`, else 1.
double embeddingScale(const nlohmann::json &params);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_CPU_CPUKERNELS_H
