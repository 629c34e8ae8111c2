//===- Cuda.h - The CUDA + NCCL backend -------------------------*- C++ -*-===//
//
// Built when CUDA, cuBLASLt and NCCL are found (PARTITA_HAVE_CUDA); it runs
// wherever a driver and a GPU are present and says why not elsewhere.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_H
#define PARTITA_RUNTIME_CUDA_H

#include "partita/runtime/Communicator.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <memory>
#include <optional>
#include <string>

namespace partita::runtime {

/// How the GEMMs multiply fp32 buffers: exactly, or on tensor cores with
/// inputs rounded to tf32 or bf16 (fp32 accumulation either way).
enum class GemmPrecision { FP32, TF32, BF16 };
std::optional<GemmPrecision> parseGemmPrecision(const std::string &name);
const char *gemmPrecisionName(GemmPrecision precision);

/// The number of usable CUDA devices; 0 with `why` set when there are none
/// (no driver, no device).
int cudaDeviceCount(std::string *why = nullptr);

/// The kernels of the plan format on CUDA device `index`: fp32 buffers in
/// one cudaMalloc'ed arena, GEMMs through cuBLASLt, a compute stream and a
/// comm stream per plan group. Throws std::runtime_error naming the device when
/// it cannot.
std::unique_ptr<Device> createCudaDevice(int index, GemmPrecision precision);

/// The plan's groups as NCCL communicators split from one world
/// communicator (its id broadcast over MPI, which must be initialised);
/// a group's collectives run on `device`'s comm stream for that group,
/// ordered against its compute stream by events. `device` must come from
/// createCudaDevice.
std::unique_ptr<Communicator> createNcclCommunicator(const Plan &plan,
                                                     Device &device);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_CUDA_H
