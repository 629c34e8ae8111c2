//===- CudaDevice.h - The CUDA backend's device half ------------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_CUDA_CUDADEVICE_H
#define PARTITA_RUNTIME_CUDA_CUDADEVICE_H

#include "CudnnAttention.h"
#include "Kernels.h"
#include "partita/runtime/Cuda.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace partita::runtime::cuda {

/// Throws std::runtime_error "CUDA error in <what>: <why>" unless `status`
/// is cudaSuccess.
void check(cudaError_t status, const std::string &what);

/// C (+)= op(A) op(B) (+ bias per row of C), column-major, through
/// cuBLASLt with f32 accumulation: bf16 A and B on tensor cores as they
/// are, f32 ones at the chosen precision. Matmul descriptors and the chosen
/// algorithm are cached per shape and types.
class Gemm {
public:
  Gemm(GemmPrecision precision, cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;
  /// Whether cuBLASLt multiplies these types: A and B alike, and C f32
  /// unless A and B are bf16.
  static bool takes(In a, In b, Out c);
  void run(bool transA, bool transB, int64_t m, int64_t n, int64_t k, In a,
           int64_t lda, In b, int64_t ldb, Out c, int64_t ldc, In bias = In());

private:
  struct Shape {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo;
  };
  /// Transposes, m, n, k, leading dimensions, the alignment of the bias
  /// (0 without one), of A, B and C (arena buffers are only 4-byte
  /// aligned), and whether A and B, and C, are bf16.
  using Key =
      std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, uint32_t, uint32_t, uint32_t, uint32_t, bool, bool>;
  /// The descriptors of `key`; `bias` is one bias of its alignment, which
  /// the heuristic reads to choose an algorithm that takes it.
  Shape &shape(const Key &key, const void *bias);

  GemmPrecision precision;
  cudaStream_t stream;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  std::map<Key, Shape> shapes;
};

class CudaDevice : public Device {
public:
  CudaDevice(int index, GemmPrecision precision);
  ~CudaDevice() override;

  void *allocateArena(int64_t bytes) override;
  std::optional<Memory> memory() override;
  bool timesLaunches() const override { return true; }
  void markLaunch(const std::string &what) override;
  std::map<std::string, double> takeLaunchSeconds() override;
  bool hasKernel(Kernel kernel) const override;
  void launch(Kernel kernel, const std::vector<TensorRef> &ins,
              const std::vector<TensorRef> &outs,
              const std::vector<bool> &accumulate,
              const plan::KernelParams &params,
              const KernelContext &ctx) override;
  /// AdamW runs as a multi-tensor kernel.
  bool launchesTogether(Kernel kernel) const override {
    return kernel == Kernel::AdamW;
  }
  void launchAll(Kernel kernel, const std::vector<KernelCall> &calls,
                 const KernelContext &ctx) override;
  void synchronize() override;
  void upload(void *dst, const void *src, int64_t bytes) override;
  void download(void *dst, const void *src, int64_t bytes) override;
  void fillZero(void *dst, int64_t bytes, Stream stream) override;
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t bytes, int64_t rows, Stream stream) override;
  void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                       int64_t inner, bool accumulate, Stream stream) override;
  bool hasBf16() const override { return true; }
  void widen(float *dst, const uint16_t *src, int64_t n,
             Stream stream) override;
  void narrow(uint16_t *dst, const float *src, int64_t n, bool accumulate,
              Stream stream) override;

  int index() const { return device; }
  /// The compute stream, or a comm stream (created when first asked for).
  cudaStream_t stream(Stream s);
  Gemm &gemm() { return *matmul; }

private:
  /// One launch's operands, params and context, as the kernel families
  /// below take them.
  struct Args {
    Kernel kernel;
    const std::vector<TensorRef> &ins, &outs;
    const std::vector<bool> &acc;
    const plan::KernelParams &p;
    const KernelContext &ctx;
    In in(size_t k) const;
    Out out(size_t k) const;
  };
  void launchKernel(const Args &a);
  void launchGemm(const Args &a);
  void launchEmbedding(const Args &a);
  void launchNorm(const Args &a);
  void launchAttention(const Args &a);
  void launchElementwise(const Args &a);
  void launchCrossEntropy(const Args &a);
  void launchOptimizer(const Args &a);
  /// f32 scratch of `count` floats (workspace()).
  float *floats(int64_t count);
  /// Device scratch of at least `bytes`, reused across launches on the
  /// compute stream.
  void *workspace(int64_t bytes);
  /// A GEMM whose buffers mix dtypes in a way cuBLASLt does not take, run
  /// on f32 copies of its bf16 buffers (in `staging`) and rounded back
  /// once. Plans keep a GEMM's buffers in one dtype, so this is a fallback.
  void launchOnF32Copies(Kernel kernel, const std::vector<TensorRef> &ins,
                         const std::vector<TensorRef> &outs,
                         const std::vector<bool> &accumulate,
                         const plan::KernelParams &params,
                         const KernelContext &ctx);
  /// The AdamW launches `calls` as multi-tensor kernels.
  void adamwAll(const std::vector<KernelCall> &calls, const KernelContext &ctx);
  /// RoPE's inverse frequencies in device memory, made once per table.
  const double *inverseFrequencies(const plan::RotaryParams &rope);

  int device;
  /// The shared memory a block may opt into on this GPU.
  int sharedBytesOptIn = 0;
  cudaStream_t computeStream = nullptr;
  /// By lane (Stream::commLane); null where never used.
  std::vector<cudaStream_t> commStreams;
  Gemm *matmul = nullptr;
  /// Where attentionKernels() is cudnn (named, or the default of a build
  /// with cuDNN): the launches cuDNN takes.
  std::unique_ptr<CudnnAttention> cudnnAttention;
  /// Why cuDNN did not take launches, each said once.
  std::set<std::string> cudnnRefusals;
  std::list<void *> allocations;
  void *scratch = nullptr;
  int64_t scratchBytes = 0;
  /// Makes `buffer` (of `size` bytes, on the device) at least `bytes`
  /// long, after the compute stream's launches so far.
  void grow(void *&buffer, int64_t &size, int64_t bytes,
            const std::string &what);
  /// Makes `staging` at least `bytes` long.
  void growStaging(int64_t bytes);
  void *staging = nullptr;
  int64_t stagingBytes = 0;
  double *sumAccumulator = nullptr;
  std::map<std::vector<double>, double *> rotaryTables;
  /// Timing events on the compute stream, reused step after step: the
  /// first marks.size() carry the classes in `marks`.
  std::vector<cudaEvent_t> markEvents;
  std::vector<std::string> marks;
};

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_CUDADEVICE_H
