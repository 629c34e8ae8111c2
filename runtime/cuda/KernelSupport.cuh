//===- KernelSupport.cuh - Device helpers of the kernels -------*- CUDA -*-===//
//
// Reading and writing In / Out operands, asynchronous copies, the attention
// kernels' shape and masks, and the one place a kernel is launched, for
// Kernels.cu and TensorCoreAttention.cu.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_KERNELSUPPORT_CUH
#define PARTITA_RUNTIME_CUDA_KERNELSUPPORT_CUH

#include "Kernels.h"
#include "LaunchConfig.h"

#include <cuda_bf16.h>

#include <cmath>
#include <type_traits>

namespace partita::runtime::cuda {

#ifndef PARTITA_CUDA_EMULATOR
/// Launches `kernel` on `stream`. Kernels are launched here only, and
/// their dynamic shared memory declared with PARTITA_DYNAMIC_SHARED, so
/// that the CPU emulator (runtime/cuda/emulator) can run the same source.
template <typename... Params, typename... Args>
void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                  size_t sharedBytes, cudaStream_t stream, Args... args) {
  kernel<<<grid, block, sharedBytes, stream>>>(args...);
}

#define PARTITA_DYNAMIC_SHARED(name)                                           \
  extern __shared__ __align__(128) char name[]
/// A static shared variable: `type name extents`. Declared this way (never
/// with a bare __shared__) so that the emulator can fill it with junk for
/// each block, as a GPU leaves it.
#define PARTITA_SHARED(type, name, extents) __shared__ type name extents
#endif

/// Starts copying 16 bytes from device memory to shared memory, both
/// 16-byte aligned (cp.async, sm_80 and later): they land for this thread
/// at its waitCopies that covers their group (commitCopies), and for the
/// others after a barrier past that.
__device__ __forceinline__ void copy16Async(void *shared, const void *global) {
#ifdef PARTITA_CUDA_EMULATOR
  emulator::copyAsync(shared, global, 16);
#else
  unsigned address = unsigned(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address),
               "l"(global)
               : "memory");
#endif
}
/// Closes this thread's group of copies started since the last one (an
/// empty group is complete at once).
__device__ __forceinline__ void commitCopies() {
#ifdef PARTITA_CUDA_EMULATOR
  emulator::commitCopies();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Waits until at most Pending of this thread's latest groups are in
/// flight.
template <int Pending> __device__ __forceinline__ void waitCopies() {
#ifdef PARTITA_CUDA_EMULATOR
  emulator::waitCopies(Pending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

__device__ __forceinline__ float load(In x, int64_t i) {
  return x.bf16
             ? __bfloat162float(static_cast<const __nv_bfloat16 *>(x.data)[i])
             : static_cast<const float *>(x.data)[i];
}

/// y[i] = v, or y[i] + v with y.acc; a bf16 element is rounded once, to
/// nearest even.
__device__ __forceinline__ void store(Out y, int64_t i, float v) {
  if (y.bf16) {
    auto *h = static_cast<__nv_bfloat16 *>(y.data);
    if (y.acc)
      v += __bfloat162float(h[i]);
    h[i] = __float2bfloat16_rn(v);
  } else {
    auto *f = static_cast<float *>(y.data);
    f[i] = y.acc ? f[i] + v : v;
  }
}

/// Whether atomicAddQuad is one instruction: on sm_90 and later, and on
/// the emulator, so that its tests cover that path (kernels fall back to
/// an atomic a value where 16-byte ones would not be aligned).
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) ||                        \
    defined(PARTITA_CUDA_EMULATOR)
constexpr bool kQuadAtomics = true;
#else
constexpr bool kQuadAtomics = false;
#endif

/// at[0, 4) += v atomically (at 16-byte aligned): one 16-byte atomic on
/// sm_90 and later, four 4-byte ones before.
__device__ __forceinline__ void atomicAddQuad(float *at, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4 *>(at), v);
#else
#ifdef PARTITA_CUDA_EMULATOR
  // sm_90's 16-byte atomic faults where 4-byte ones would not.
  if (reinterpret_cast<uintptr_t>(at) % 16 != 0)
    ::partita::runtime::cuda::emulator::fail(
        "a 16-byte atomic add at an address off 16 bytes");
#endif
  atomicAdd(at, v.x);
  atomicAdd(at + 1, v.y);
  atomicAdd(at + 2, v.z);
  atomicAdd(at + 3, v.w);
#endif
}

/// kPack elements of a memory-bound kernel's operand, as f32.
struct Pack {
  float v[kPack];
};

/// A loop over a pack's elements, unrolled so that packs stay in registers.
#define EACH_ELEMENT(e) _Pragma("unroll") for (int e = 0; e < kPack; ++e)

/// How many of a pack's elements are among the `left` ahead of it.
__device__ __forceinline__ int packCount(int64_t left) {
  return int(max(int64_t(0), min(int64_t(kPack), left)));
}

/// x[i, i + count) as f32, the rest of the pack 0: by 16-byte loads when
/// the pack is whole and starts 16-byte aligned, else element by element.
__device__ __forceinline__ Pack loadPack(In x, int64_t i, int count) {
  Pack p;
  const char *at = static_cast<const char *>(x.data) + i * (x.bf16 ? 2 : 4);
  if (count == kPack && reinterpret_cast<uintptr_t>(at) % 16 == 0) {
    if (x.bf16) {
      alignas(16) __nv_bfloat16 h[kPack];
      *reinterpret_cast<uint4 *>(h) = *reinterpret_cast<const uint4 *>(at);
      EACH_ELEMENT(e) p.v[e] = __bfloat162float(h[e]);
    } else {
      const auto *f = reinterpret_cast<const float4 *>(at);
      float4 a = f[0], b = f[1];
      p = {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
    }
    return p;
  }
  EACH_ELEMENT(e) p.v[e] = e < count ? load(x, i + e) : 0.0f;
  return p;
}

/// y[i, i + count) = p (or y + p with y.acc), as `store` writes each
/// element, by 16-byte stores where loadPack would load.
__device__ __forceinline__ void storePack(Out y, int64_t i, int count, Pack p) {
  char *at = static_cast<char *>(y.data) + i * (y.bf16 ? 2 : 4);
  if (count == kPack && reinterpret_cast<uintptr_t>(at) % 16 == 0) {
    if (y.acc) {
      Pack old = loadPack(asInput(y), i, count);
      EACH_ELEMENT(e) p.v[e] += old.v[e];
    }
    if (y.bf16) {
      alignas(16) __nv_bfloat16 h[kPack];
      EACH_ELEMENT(e) h[e] = __float2bfloat16_rn(p.v[e]);
      *reinterpret_cast<uint4 *>(at) = *reinterpret_cast<const uint4 *>(h);
    } else {
      auto *f = reinterpret_cast<float4 *>(at);
      f[0] = {p.v[0], p.v[1], p.v[2], p.v[3]};
      f[1] = {p.v[4], p.v[5], p.v[6], p.v[7]};
    }
    return;
  }
  EACH_ELEMENT(e) {
    if (e < count)
      store(y, i + e, p.v[e]);
  }
}

/// visit(i, count) for each of this thread's packs of n elements, grid-
/// stride: elements [i, i + count), count = kPack but at the end.
template <typename Visit>
__device__ __forceinline__ void forEachPack(int64_t n, Visit visit) {
  int64_t stride = int64_t(gridDim.x) * blockDim.x * kPack;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kPack;
       i < n; i += stride)
    visit(i, int(min(int64_t(kPack), n - i)));
}

/// visit(j, count) for each of this thread's packs of the block's row of
/// n elements: packs t, t + blockDim.x, ... (elements [j, j + count)).
template <typename Visit>
__device__ __forceinline__ void forEachRowPack(int64_t n, Visit visit) {
  for (int64_t j = int64_t(threadIdx.x) * kPack; j < n;
       j += int64_t(blockDim.x) * kPack)
    visit(j, int(min(int64_t(kPack), n - j)));
}

/// An attention launch's shape on the device, with the softmax scale.
struct AttentionDims {
  int64_t b, s, heads, kvHeads, d;
  bool causal;
  int64_t window;
  float scale;
  __device__ bool masked(int64_t i, int64_t j) const {
    return (causal && j > i) || (window > 0 && j <= i - window);
  }
  __device__ int64_t qOffset(int64_t bb, int64_t i, int64_t hh) const {
    return ((bb * s + i) * heads + hh) * d;
  }
  __device__ int64_t kOffset(int64_t bb, int64_t j, int64_t kh) const {
    return ((bb * s + j) * kvHeads + kh) * d;
  }
  /// Where query row i of head hh is in the softmax statistics
  /// (log-sum-exp, D = dO . O), [b, heads, s] arrays.
  __device__ int64_t statsRow(int64_t bb, int64_t hh, int64_t i) const {
    return (bb * heads + hh) * s + i;
  }
  /// The keys query rows [first, last] can see: [begin, end).
  __device__ void keyRange(int64_t first, int64_t last, int64_t &begin,
                           int64_t &end) const {
    begin = window > 0 ? max(int64_t(0), first - window + 1) : 0;
    end = causal ? min(s, last + 1) : s;
  }
  /// The query rows that can see keys [first, last]: [begin, end).
  __device__ void queryRange(int64_t first, int64_t last, int64_t &begin,
                             int64_t &end) const {
    begin = causal ? first : 0;
    end = window > 0 ? min(s, last + window) : s;
  }
};

/// Calls run(std::integral_constant<int, D>()) with the head-dimension
/// bucket D that d runs in (headDimBucket), of those up to MaxD that a
/// family of kernels is compiled for; d must fit MaxD.
template <int MaxD = 256, typename Run>
void byHeadDimBucket(int64_t d, Run run) {
  int bucket = headDimBucket(d);
  if (bucket == 32)
    return run(std::integral_constant<int, 32>());
  if (bucket == 64)
    return run(std::integral_constant<int, 64>());
  if constexpr (MaxD >= 128)
    if (bucket == 128)
      return run(std::integral_constant<int, 128>());
  if constexpr (MaxD >= 256)
    return run(std::integral_constant<int, 256>());
}

inline AttentionDims attentionDims(const AttentionShape &s) {
  return {s.b, s.s,      s.heads,  s.kvHeads,
          s.d, s.causal, s.window, attentionScale(s.d)};
}

/// The tensor-core attention, for launches attentionOnTensorCores takes.
/// Without o's data only `lse` is written (the backward's statistics for a
/// forward that kept none).
void tensorCoreAttention(const AttentionShape &a, In q, In k, In v, Out o,
                         float *lse, cudaStream_t stream);
/// Its backward, from each query row's log-sum-exp and D = dO . O; with
/// the one-pass kernels (RegistersSummedDq), dq is summed in dqSum (f32,
/// as many elements as dq) first.
void tensorCoreAttentionBackward(const AttentionShape &a, In dout, In q, In k,
                                 In v, const float *lse, const float *rowDot,
                                 Out dq, Out dk, Out dv, float *dqSum,
                                 cudaStream_t stream);

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_KERNELSUPPORT_CUH
