//===- Prelude.h - The CUDA dialect of the kernels, in C++ ------*- C++ -*-===//
//
// Included before a .cu file that the emulator compiles as C++: CUDA's own
// headers give the host types (dim3, uint4, __nv_bfloat16 and its host
// conversions) and, outside nvcc, define __global__, __device__ and
// __launch_bounds__ away; this header gives the rest of what the kernels
// use a CPU meaning. emulator/include holds the WMMA and CUB headers the
// kernels include.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_EMULATOR_PRELUDE_H
#define PARTITA_RUNTIME_CUDA_EMULATOR_PRELUDE_H

#include "Emulator.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <type_traits>

#ifndef PARTITA_CUDA_EMULATOR
#error "compile the emulated kernels with PARTITA_CUDA_EMULATOR defined"
#endif

// One block runs at a time on a host thread, so a block's shared variables
// can be statics of that thread, filled with junk for each block. Only
// PARTITA_SHARED declares them, since a bare __shared__ cannot be filled.
#undef __shared__
#define __shared__                                                             \
  static_assert(false, "declare static shared memory with PARTITA_SHARED");
#define PARTITA_SHARED(type, name, extents)                                    \
  static thread_local type name extents;                                       \
  ::partita::runtime::cuda::emulator::declareStaticShared(&name, sizeof name)
#undef __launch_bounds__
#define __launch_bounds__(...)
#define threadIdx (::partita::runtime::cuda::emulator::threadIndex)
#define blockIdx (::partita::runtime::cuda::emulator::blockIndex)
#define blockDim (::partita::runtime::cuda::emulator::blockDimension)
#define gridDim (::partita::runtime::cuda::emulator::gridDimension)
#define PARTITA_DYNAMIC_SHARED(name)                                           \
  char *name = ::partita::runtime::cuda::emulator::dynamicShared()

// CUDA's device min and max take any arithmetic type.
using std::max;
using std::min;

inline void __syncthreads() {
  ::partita::runtime::cuda::emulator::syncThreads();
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::partita::runtime::cuda::emulator::syncWarp(mask);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  if (width != 32)
    ::partita::runtime::cuda::emulator::fail("a shuffle narrower than a warp");
  return ::partita::runtime::cuda::emulator::shuffleXor(mask, value, laneMask);
}
// Threads run one at a time: an atomic is a plain update.
template <typename T> T atomicAdd(T *address, T value) {
  T old = *address;
  *address = old + value;
  return old;
}

// nvcc's cuda_runtime.h takes a kernel where the C API takes a pointer.
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...),
                                 cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel), attr,
                                value);
}

namespace partita::runtime::cuda {

/// The emulator's kernel launch: a configuration a GPU refuses is refused
/// the same way, at once; otherwise the arguments are converted to the
/// kernel's parameter types once, as a launch copies them, and the kernel
/// runs on every thread when its stream is needed (Emulator.h's Work).
template <typename... Params, typename... Args>
void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                  size_t sharedBytes, cudaStream_t stream, Args... args) {
  namespace emu = ::partita::runtime::cuda::emulator;
  size_t limit =
      emu::dynamicSharedLimit(reinterpret_cast<const void *>(kernel));
  if (sharedBytes > limit) {
    emu::refuseLaunch(std::to_string(sharedBytes) +
                      " bytes of dynamic shared memory, above the " +
                      std::to_string(limit) + " the kernel may have");
    return;
  }
  emu::Index gridShape{grid.x, grid.y, grid.z},
      blockShape{block.x, block.y, block.z};
  std::string refusal = emu::launchRefusal(gridShape, blockShape);
  if (!refusal.empty()) {
    emu::refuseLaunch(refusal);
    return;
  }
  std::tuple<std::decay_t<Params>...> params(args...);
  emu::enqueue(stream, [=] {
    if (!emu::kernelFaults())
      emu::run(gridShape, blockShape, sharedBytes,
               [&] { std::apply(kernel, params); });
  });
}

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_EMULATOR_PRELUDE_H
