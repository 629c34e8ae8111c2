//===- CudaDevice.cpp - The CUDA backend's device half --------------------===//
//
// Reads a launch's parameters (docs/plan-format.md) as the CPU backend
// does and hands the arithmetic to Kernels.cu and cuBLASLt. NVTX ranges name
// every launch, so Nsight Systems shows the plan's kernels by name.
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"

#include "Kernels.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

namespace partita::runtime {

std::optional<GemmPrecision> parseGemmPrecision(const std::string &name) {
  if (name == "fp32")
    return GemmPrecision::FP32;
  if (name == "tf32")
    return GemmPrecision::TF32;
  if (name == "bf16")
    return GemmPrecision::BF16;
  return std::nullopt;
}

const char *gemmPrecisionName(GemmPrecision precision) {
  switch (precision) {
  case GemmPrecision::FP32:
    return "fp32";
  case GemmPrecision::TF32:
    return "tf32";
  case GemmPrecision::BF16:
    return "bf16";
  }
  return "?";
}

int cudaDeviceCount(std::string *why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why)
      *why = cudaGetErrorString(status);
    cudaGetLastError(); // not sticky: clear it
    return 0;
  }
  if (count == 0 && why)
    *why = "the driver reports no CUDA device";
  return count;
}

std::unique_ptr<Device> createCudaDevice(int index, GemmPrecision precision) {
  return std::make_unique<cuda::CudaDevice>(index, precision);
}

namespace cuda {

void check(cudaError_t status, const std::string &what) {
  if (status != cudaSuccess)
    throw std::runtime_error("CUDA error in " + what + ": " +
                             cudaGetErrorString(status));
}

namespace {

void checkLt(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt error in ") + what +
                             " (status " + std::to_string(int(status)) + ")");
}

constexpr size_t kGemmWorkspaceBytes = 32 << 20;

/// The largest power of two up to 256 that divides the address.
uint32_t alignment(const void *p) {
  uint32_t bytes = 256;
  while (bytes > 1 && reinterpret_cast<uintptr_t>(p) % bytes)
    bytes /= 2;
  return bytes;
}

} // namespace

Gemm::Gemm(GemmPrecision precision, cudaStream_t stream)
    : precision(precision), stream(stream) {
  checkLt(cublasLtCreate(&handle), "cublasLtCreate");
  check(cudaMalloc(&workspace, kGemmWorkspaceBytes), "the GEMM workspace");
}

Gemm::~Gemm() {
  for (auto &[key, s] : shapes) {
    cublasLtMatrixLayoutDestroy(s.a);
    cublasLtMatrixLayoutDestroy(s.b);
    cublasLtMatrixLayoutDestroy(s.c);
    cublasLtMatmulDescDestroy(s.desc);
  }
  cudaFree(workspace);
  cublasLtDestroy(handle);
}

Gemm::Shape &Gemm::shape(const Key &key, const void *biasData) {
  auto found = shapes.find(key);
  if (found != shapes.end())
    return found->second;
  auto [transA, transB, m, n, k, lda, ldb, ldc, biasAlignment, alignA, alignB,
        alignC, bf16Inputs, bf16Output] = key;
  // bf16 inputs multiply on tensor cores as they are; f32 ones at the
  // chosen precision.
  cublasComputeType_t compute =
      bf16Inputs || precision == GemmPrecision::FP32 ? CUBLAS_COMPUTE_32F
      : precision == GemmPrecision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                         : CUBLAS_COMPUTE_32F_FAST_16BF;
  cudaDataType_t inputType = bf16Inputs ? CUDA_R_16BF : CUDA_R_32F;
  cudaDataType_t outputType = bf16Output ? CUDA_R_16BF : CUDA_R_32F;
  Shape s;
  checkLt(cublasLtMatmulDescCreate(&s.desc, compute, CUDA_R_32F),
          "cublasLtMatmulDescCreate");
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkLt(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &opA, sizeof(opA)),
          "TRANSA");
  checkLt(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &opB, sizeof(opB)),
          "TRANSB");
  if (biasAlignment > 0) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    checkLt(cublasLtMatmulDescSetAttribute(s.desc,
                                           CUBLASLT_MATMUL_DESC_EPILOGUE,
                                           &epilogue, sizeof(epilogue)),
            "EPILOGUE");
    // cuBLASLt documents that the heuristic takes the bias's alignment from
    // this pointer.
    checkLt(cublasLtMatmulDescSetAttribute(s.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &biasData, sizeof(biasData)),
            "BIAS_POINTER");
  }
  // Column-major layouts of the stored matrices.
  checkLt(cublasLtMatrixLayoutCreate(&s.a, inputType, transA ? k : m,
                                     transA ? m : k, lda),
          "layout A");
  checkLt(cublasLtMatrixLayoutCreate(&s.b, inputType, transB ? n : k,
                                     transB ? k : n, ldb),
          "layout B");
  checkLt(cublasLtMatrixLayoutCreate(&s.c, outputType, m, n, ldc), "layout C");
  cublasLtMatmulPreference_t preference;
  checkLt(cublasLtMatmulPreferenceCreate(&preference), "preference");
  size_t bytes = kGemmWorkspaceBytes;
  checkLt(cublasLtMatmulPreferenceSetAttribute(
              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
              sizeof(bytes)),
          "workspace preference");
  // The heuristic assumes 256-byte alignment unless told otherwise.
  for (auto [attribute, bytes] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}})
    checkLt(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes,
                                                 sizeof(bytes)),
            "alignment preference");
  cublasLtMatmulHeuristicResult_t result;
  int found_count = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, s.desc, s.a, s.b, s.c, s.c, preference, 1, &result, &found_count);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found_count == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for a " +
                             std::to_string(m) + " x " + std::to_string(n) +
                             " x " + std::to_string(k) + " GEMM");
  s.algo = result.algo;
  return shapes.emplace(key, s).first->second;
}

bool Gemm::takes(In a, In b, Out c) {
  return a.bf16 == b.bf16 && (a.bf16 || !c.bf16);
}

void Gemm::run(bool transA, bool transB, int64_t m, int64_t n, int64_t k, In a,
               int64_t lda, In b, int64_t ldb, Out c, int64_t ldc, In bias) {
  if (!takes(a, b, c))
    throw std::logic_error("a GEMM of operand types cuBLASLt does not take");
  if (m == 0 || n == 0)
    return;
  // A bias the epilogue cannot read (it wants 16-byte alignment and C's
  // type) is added by a kernel after the GEMM, which rounds a bf16 C twice.
  In addBias;
  uint32_t biasAlignment = bias.data ? alignment(bias.data) : 0;
  if (bias.data && (biasAlignment < 16 || bias.bf16 != c.bf16)) {
    addBias = bias;
    bias = In();
    biasAlignment = 0;
  }
  Shape &s = shape({transA, transB, m, n, k, lda, ldb, ldc, biasAlignment,
                    alignment(a.data), alignment(b.data), alignment(c.data),
                    a.bf16, c.bf16},
                   bias.data);
  if (bias.data)
    checkLt(cublasLtMatmulDescSetAttribute(s.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &bias.data, sizeof(bias.data)),
            "BIAS_POINTER");
  float alpha = 1.0f, beta = c.acc ? 1.0f : 0.0f;
  checkLt(cublasLtMatmul(handle, s.desc, &alpha, a.data, s.a, b.data, s.b,
                         &beta, c.data, s.c, c.data, s.c, &s.algo, workspace,
                         kGemmWorkspaceBytes, stream),
          "cublasLtMatmul");
  if (addBias.data) // C is column-major m x n: the bias runs down each column
    cuda::addPeriodic(cuda::asInput(c), addBias, m, {c.data, c.bf16, false},
                      m * n, stream);
}

namespace {

int64_t rowsOf(const TensorRef &t) { return t.n / t.dim(-1); }

/// The activation of a gelu, silu, swiglu or geglu kernel (or their
/// backward): the GELUs' form is the plan's `approximate`.
cuda::Unary activation(Kernel kernel, const plan::KernelParams &p) {
  if (kernel == Kernel::Silu || kernel == Kernel::SiluBwd ||
      kernel == Kernel::Swiglu || kernel == Kernel::SwigluBwd)
    return cuda::Unary::Silu;
  return p.tanhGelu ? cuda::Unary::GeluTanh : cuda::Unary::Gelu;
}

/// The width a norm `kernel` works over, that of its weight `w` (the last
/// dimension, or a head of it), within the kernels' limit.
int64_t normWidth(Kernel kernel, const TensorRef &w) {
  int64_t h = w.n;
  if (h > maxNormWidth())
    throw std::runtime_error(std::string(plan::name(kernel)) + " over " +
                             std::to_string(h) +
                             " columns: the CUDA kernel takes at most " +
                             std::to_string(maxNormWidth()));
  return h;
}

/// A buffer of the plan as a kernel operand, in its own dtype.
In operand(const TensorRef &t) { return t.h ? In{t.h, true} : In{t.f, false}; }
Out result(const TensorRef &t, bool acc) {
  return t.h ? Out{t.h, true, acc} : Out{t.f, false, acc};
}

/// Whether cuBLASLt takes the GEMMs of a launch of `kernel` on its buffers
/// as they are (anything but a GEMM always runs on them as they are).
bool gemmTakes(Kernel kernel, const std::vector<TensorRef> &ins,
               const std::vector<TensorRef> &outs) {
  if (kernel == Kernel::Linear)
    return Gemm::takes(operand(ins[1]), operand(ins[0]),
                       result(outs[0], false));
  if (kernel == Kernel::LinearBwd)
    return Gemm::takes(operand(ins[2]), operand(ins[0]),
                       result(outs[0], false)) &&
           Gemm::takes(operand(ins[1]), operand(ins[0]),
                       result(outs[1], false));
  return true;
}

/// The first vocabulary index of this rank's slice of `rows` entries.
int64_t vocabStart(const plan::KernelParams &p, const KernelContext &ctx,
                   int64_t rows) {
  return p.vocabParts > 1 ? ctx.tpRank * rows : 0;
}

/// In a handler of cuDNN's error `e`: cuDNN asked for by name stops the
/// run (rethrown); as the default, a note says that our own kernels run
/// attention from here on.
void fallBackFromCudnn(const std::runtime_error &e) {
  if (attentionKernelsNamed())
    throw;
  std::fprintf(stderr,
               "plan-run: note: %s; attention runs on our own kernels "
               "(PARTITA_CUDA_ATTENTION=mma)\n",
               e.what());
}

} // namespace

CudaDevice::CudaDevice(int index, GemmPrecision precision) : device(index) {
  std::string why;
  int count = cudaDeviceCount(&why);
  if (count == 0)
    throw std::runtime_error("no CUDA device: " + why);
  if (index >= count)
    throw std::runtime_error("CUDA device " + std::to_string(index) +
                             " requested but this machine has " +
                             std::to_string(count));
  attentionKernels(); // a bad PARTITA_CUDA_ATTENTION stops the run here
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  // Before anything is allocated, so that its error leaks nothing. cuDNN
  // asked for by name must run; as the default, where it cannot (another
  // cuDNN loaded than the build's, say), our kernels run instead.
  if (attentionKernels() == AttentionKernels::Cudnn) {
    try {
      cudnnAttention = std::make_unique<CudnnAttention>();
    } catch (const std::runtime_error &e) {
      fallBackFromCudnn(e);
    }
  }
  check(cudaDeviceGetAttribute(&sharedBytesOptIn,
                               cudaDevAttrMaxSharedMemoryPerBlockOptin, index),
        "the shared memory a block may have");
  check(cudaStreamCreateWithFlags(&computeStream, cudaStreamNonBlocking),
        "the compute stream");
  check(cudaMalloc(reinterpret_cast<void **>(&sumAccumulator), sizeof(double)),
        "a reduction scalar");
  matmul = new Gemm(precision, computeStream);
}

CudaDevice::~CudaDevice() {
  cudaDeviceSynchronize();
  cudnnAttention.reset();
  delete matmul;
  for (void *p : allocations)
    cudaFree(p);
  for (auto &[key, table] : rotaryTables)
    cudaFree(table);
  cudaFree(scratch);
  cudaFree(staging);
  cudaFree(sumAccumulator);
  for (cudaEvent_t e : markEvents)
    cudaEventDestroy(e);
  cudaStreamDestroy(computeStream);
  for (cudaStream_t s : commStreams)
    if (s)
      cudaStreamDestroy(s);
}

cudaStream_t CudaDevice::stream(Stream s) {
  if (!s.isComm())
    return computeStream;
  if (size_t(s.commLane()) >= commStreams.size())
    commStreams.resize(size_t(s.commLane()) + 1, nullptr);
  cudaStream_t &comm = commStreams[size_t(s.commLane())];
  if (!comm)
    check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking),
          "comm stream " + std::to_string(s.commLane()));
  return comm;
}

void *CudaDevice::allocateArena(int64_t bytes) {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (size_t(bytes) > free)
    throw std::runtime_error("the plan needs " + std::to_string(bytes / kGiB) +
                             " GiB on CUDA device " + std::to_string(device) +
                             ", which has " + std::to_string(free / kGiB) +
                             " GiB free of " + std::to_string(total / kGiB));
  void *p = nullptr;
  check(cudaMalloc(&p, bytes > 0 ? bytes : 4), "cudaMalloc of the arena");
  allocations.push_back(p);
  check(cudaMemsetAsync(p, 0, bytes, computeStream), "zeroing the arena");
  return p;
}

std::optional<Device::Memory> CudaDevice::memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return Memory{int64_t(total), int64_t(total - free)};
}

void CudaDevice::markLaunch(const std::string &what) {
  if (marks.size() == markEvents.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDefault), "a timing event");
    markEvents.push_back(e);
  }
  check(cudaEventRecord(markEvents[marks.size()], computeStream),
        "a timing event");
  marks.push_back(what);
}

std::map<std::string, double> CudaDevice::takeLaunchSeconds() {
  std::map<std::string, double> seconds;
  if (!marks.empty())
    check(cudaEventSynchronize(markEvents[marks.size() - 1]), "a timing event");
  for (size_t i = 0; i + 1 < marks.size(); ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, markEvents[i], markEvents[i + 1]),
          "the time between two launches");
    if (!marks[i].empty())
      seconds[marks[i]] += ms / 1e3;
  }
  marks.clear();
  return seconds;
}

// launchKernel's switch covers every kernel of the registry (-Wswitch).
bool CudaDevice::hasKernel(Kernel) const { return true; }

void CudaDevice::synchronize() {
  for (cudaStream_t s : commStreams)
    if (s)
      check(cudaStreamSynchronize(s), "a comm stream");
  check(cudaStreamSynchronize(computeStream), "the compute stream");
}

void CudaDevice::upload(void *dst, const void *src, int64_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, computeStream),
        "an upload");
}

void CudaDevice::download(void *dst, const void *src, int64_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, computeStream),
        "a download");
  check(cudaStreamSynchronize(computeStream), "a download");
}

void CudaDevice::fillZero(void *dst, int64_t bytes, Stream s) {
  check(cudaMemsetAsync(dst, 0, bytes, stream(s)), "fillZero");
}

void CudaDevice::copyRows(void *dst, int64_t dstPitch, const void *src,
                          int64_t srcPitch, int64_t bytes, int64_t rows,
                          Stream s) {
  // A 2D copy's pitch is limited (cudaDevAttrMaxPitch, 2 GiB - 1): one
  // row, or rows further apart, go as plain copies.
  constexpr int64_t kMaxPitch = (int64_t(1) << 31) - 1;
  if (rows > 1 && std::max(dstPitch, srcPitch) <= kMaxPitch) {
    check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, bytes, rows,
                            cudaMemcpyDeviceToDevice, stream(s)),
          "a device copy");
    return;
  }
  for (int64_t k = 0; k < rows; ++k)
    check(cudaMemcpyAsync(static_cast<char *>(dst) + k * dstPitch,
                          static_cast<const char *>(src) + k * srcPitch, bytes,
                          cudaMemcpyDeviceToDevice, stream(s)),
          "a device copy");
}

void CudaDevice::transposeBlocks(float *dst, const float *src, int64_t a,
                                 int64_t b, int64_t inner, bool accumulate,
                                 Stream s) {
  cuda::transposeBlocks(f32In(src), f32Out(dst, accumulate), a, b, inner,
                        stream(s));
  check(cudaGetLastError(), "transposeBlocks");
}

void CudaDevice::widen(float *dst, const uint16_t *src, int64_t n, Stream s) {
  cuda::transposeBlocks({src, true}, f32Out(dst), 1, 1, n, stream(s));
  check(cudaGetLastError(), "widen");
}

void CudaDevice::narrow(uint16_t *dst, const float *src, int64_t n,
                        bool accumulate, Stream s) {
  cuda::transposeBlocks(f32In(src), {dst, true, accumulate}, 1, 1, n,
                        stream(s));
  check(cudaGetLastError(), "narrow");
}

void CudaDevice::grow(void *&buffer, int64_t &size, int64_t bytes,
                      const std::string &what) {
  if (bytes <= size)
    return;
  // Grown rarely (the first steps), in the order of the compute stream, the
  // only one that uses these buffers: the host does not wait. cudaFree
  // would wait for the whole device, pipeline sends included, and a send
  // completes only once its receiver's host gets that far, which may be
  // waiting for this rank in turn.
  if (buffer)
    check(cudaFreeAsync(buffer, computeStream), "freeing " + what);
  buffer = nullptr;
  size = 0;
  check(cudaMallocAsync(&buffer, bytes, computeStream), what);
  size = bytes;
}

void CudaDevice::growStaging(int64_t bytes) {
  grow(staging, stagingBytes, bytes, "the bf16 staging");
}

void CudaDevice::launchOnF32Copies(Kernel kernel,
                                   const std::vector<TensorRef> &ins,
                                   const std::vector<TensorRef> &outs,
                                   const std::vector<bool> &accumulate,
                                   const plan::KernelParams &params,
                                   const KernelContext &ctx) {
  // One f32 copy per distinct bf16 buffer, 256-byte aligned for cuBLASLt.
  std::map<uint16_t *, int64_t> offsetOf;
  int64_t bytes = 0;
  for (const std::vector<TensorRef> *refs : {&ins, &outs})
    for (const TensorRef &t : *refs)
      if (t.h && offsetOf.try_emplace(t.h, bytes).second)
        bytes += (t.n * int64_t(sizeof(float)) + 255) / 256 * 256;
  growStaging(bytes);
  std::set<uint16_t *> loaded;
  auto copyOf = [&](TensorRef t, bool load) {
    if (!t.h)
      return t;
    float *copy = reinterpret_cast<float *>(static_cast<char *>(staging) +
                                            offsetOf.at(t.h));
    if (load && loaded.insert(t.h).second)
      cuda::transposeBlocks({t.h, true}, f32Out(copy), 1, 1, t.n,
                            computeStream);
    t.f = copy;
    t.h = nullptr;
    return t;
  };
  std::vector<TensorRef> wideIns, wideOuts;
  for (const TensorRef &t : ins)
    wideIns.push_back(copyOf(t, true));
  for (size_t k = 0; k < outs.size(); ++k)
    wideOuts.push_back(copyOf(outs[k], accumulate[k]));
  launchKernel({kernel, wideIns, wideOuts, accumulate, params, ctx});
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].h)
      cuda::transposeBlocks(f32In(wideOuts[k].f), {outs[k].h, true, false}, 1,
                            1, outs[k].n, computeStream);
}

void *CudaDevice::workspace(int64_t bytes) {
  grow(scratch, scratchBytes, bytes, "the kernel workspace");
  return scratch;
}

const double *CudaDevice::inverseFrequencies(const plan::RotaryParams &rope) {
  const std::vector<double> &inv = rope.inverseFrequencies;
  auto found = rotaryTables.find(inv);
  if (found != rotaryTables.end())
    return found->second;
  double *table = nullptr;
  // Made during the first forward, in the order of the compute stream,
  // which the rotary kernels run on, as grow() allocates. A copy
  // from pageable memory has taken the data when it returns.
  check(cudaMallocAsync(reinterpret_cast<void **>(&table),
                        inv.size() * sizeof(double) + 8, computeStream),
        "rotary table");
  check(cudaMemcpyAsync(table, inv.data(), inv.size() * sizeof(double),
                        cudaMemcpyHostToDevice, computeStream),
        "rotary table");
  rotaryTables[inv] = table;
  return table;
}

void CudaDevice::launch(Kernel kernel, const std::vector<TensorRef> &ins,
                        const std::vector<TensorRef> &outs,
                        const std::vector<bool> &accumulate,
                        const plan::KernelParams &params,
                        const KernelContext &ctx) {
  std::string name(plan::name(kernel));
  nvtxRangePushA(name.c_str());
  if (!gemmTakes(kernel, ins, outs))
    launchOnF32Copies(kernel, ins, outs, accumulate, params, ctx);
  else
    launchKernel({kernel, ins, outs, accumulate, params, ctx});
  nvtxRangePop();
  check(cudaGetLastError(), "kernel " + name);
}

void CudaDevice::launchAll(Kernel kernel, const std::vector<KernelCall> &calls,
                           const KernelContext &ctx) {
  if (kernel != Kernel::AdamW) {
    Device::launchAll(kernel, calls, ctx);
    return;
  }
  nvtxRangePushA("adamw");
  adamwAll(calls, ctx);
  nvtxRangePop();
  check(cudaGetLastError(), "kernel adamw");
}

void CudaDevice::adamwAll(const std::vector<KernelCall> &calls,
                          const KernelContext &ctx) {
  const Optimizer &o = *ctx.optimizer;
  AdamWStep step;
  step.lr = o.learningRate(ctx.step);
  step.beta1 = o.beta1;
  step.beta2 = o.beta2;
  step.eps = o.eps;
  step.weightDecay = o.weightDecay;
  double t = double(ctx.step + 1);
  step.c1 = 1 - std::pow(o.beta1, t);
  step.c2 = 1 - std::pow(o.beta2, t);
  std::vector<AdamWTensor> tensors;
  for (const KernelCall &c : calls) {
    auto in = [&](size_t k) { return operand(c.ins[k]); };
    auto out = [&](size_t k) { return result(c.outs[k], c.accumulate[k]); };
    bool master = c.ins.size() > 5;
    AdamWTensor a;
    a.p = in(0);
    a.g = in(1);
    a.m = in(2);
    a.v = in(3);
    a.clip = in(4);
    a.np = out(0);
    a.nm = out(1);
    a.nv = out(2);
    if (master) {
      a.w = in(5);
      a.nw = out(3);
    }
    a.pn = c.ins[0].n;
    a.chunk = c.ins[2].n;
    a.begin = c.params->dpShard ? ctx.dpRank * a.chunk : 0;
    a.decay = c.params->weightDecay;
    tensors.push_back(a);
  }
  adamw(step, tensors, computeStream);
}

In CudaDevice::Args::in(size_t k) const { return operand(ins[k]); }
Out CudaDevice::Args::out(size_t k) const { return result(outs[k], acc[k]); }

float *CudaDevice::floats(int64_t count) {
  return static_cast<float *>(workspace(count * int64_t(sizeof(float))));
}

void CudaDevice::launchKernel(const Args &a) {
  switch (a.kernel) {
  case Kernel::Linear:
  case Kernel::LinearBwd:
    return launchGemm(a);
  case Kernel::Embedding:
  case Kernel::EmbeddingBwd:
  case Kernel::PositionEmbedding:
  case Kernel::PositionEmbeddingBwd:
  case Kernel::ShardSlice:
    return launchEmbedding(a);
  case Kernel::RmsNorm:
  case Kernel::LayerNorm:
  case Kernel::RmsNormBwd:
  case Kernel::LayerNormBwd:
  case Kernel::BiasAdd:
  case Kernel::BiasAddBwd:
    return launchNorm(a);
  case Kernel::Attention:
  case Kernel::AttentionBwd:
    return launchAttention(a);
  case Kernel::Rotary:
  case Kernel::RotaryBwd:
  case Kernel::Gelu:
  case Kernel::Silu:
  case Kernel::Swiglu:
  case Kernel::Geglu:
  case Kernel::GeluBwd:
  case Kernel::SiluBwd:
  case Kernel::SwigluBwd:
  case Kernel::GegluBwd:
  case Kernel::Add:
  case Kernel::Copy:
    return launchElementwise(a);
  case Kernel::CeMax:
  case Kernel::CeStats:
  case Kernel::CeBwd:
  case Kernel::CeLoss:
    return launchCrossEntropy(a);
  case Kernel::GradSumsq:
  case Kernel::ClipCoefficient:
  case Kernel::AdamW:
    return launchOptimizer(a);
  }
}

void CudaDevice::launchGemm(const Args &a) {
  const auto &ins = a.ins;
  if (a.kernel == Kernel::Linear) {
    const TensorRef &x = ins[0], &w = ins[1];
    int64_t width = w.dim(0), inner = x.dim(-1), rows = x.n / inner;
    matmul->run(true, false, width, rows, inner, a.in(1), inner, a.in(0), inner,
                a.out(0), width, ins.size() > 2 ? a.in(2) : In());
    return;
  }
  const TensorRef &dy = ins[0], &x = ins[1], &w = ins[2];
  int64_t width = w.dim(0), inner = x.dim(-1), rows = x.n / inner;
  matmul->run(false, false, inner, rows, width, a.in(2), inner, a.in(0), width,
              a.out(0), inner);
  matmul->run(false, true, inner, width, rows, a.in(1), inner, a.in(0), width,
              a.out(1), inner);
  if (a.outs.size() > 2)
    sumPeriodic(a.in(0), width, dy.n, a.out(2), width,
                floats(sumPeriodicWorkspace(width)), computeStream);
}

void CudaDevice::launchEmbedding(const Args &a) {
  cudaStream_t s = computeStream;
  const auto &ins = a.ins, &outs = a.outs;
  const plan::KernelParams &p = a.p;
  switch (a.kernel) {
  case Kernel::Embedding: {
    const TensorRef &table = ins[0], &tokens = ins[1];
    int64_t rows = table.dim(0), h = table.dim(1);
    embedding(a.in(0), tokens.i, tokens.n, rows, h, vocabStart(p, a.ctx, rows),
              float(p.scale), a.out(0), s);
    return;
  }
  case Kernel::EmbeddingBwd: {
    const TensorRef &tokens = ins[1];
    int64_t rows = outs[0].dim(0), h = outs[0].dim(1);
    embeddingBackward(a.in(0), tokens.i, tokens.n, rows, h,
                      vocabStart(p, a.ctx, rows), float(p.scale), a.out(0),
                      workspace(embeddingBackwardWorkspace(tokens.n, rows)), s);
    return;
  }
  case Kernel::PositionEmbedding: {
    const TensorRef &x = ins[0];
    addPeriodic(a.in(0), a.in(1), x.dim(1) * x.dim(2), a.out(0), x.n, s);
    return;
  }
  case Kernel::PositionEmbeddingBwd: {
    const TensorRef &dy = ins[0];
    // The table has max_positions rows, the gradient only s of them.
    int64_t period = dy.dim(1) * dy.dim(2);
    sumPeriodic(a.in(0), period, dy.n, a.out(0), outs[0].n,
                floats(sumPeriodicWorkspace(period)), s);
    return;
  }
  default: { // shard_slice
    const TensorRef &x = ins[0];
    int64_t dim = p.dim, outer = 1, inner = 1;
    for (int64_t k = 0; k < dim; ++k)
      outer *= x.dim(int(k));
    for (size_t k = dim; k < x.shape->size(); ++k)
      inner *= x.dim(int(k));
    int64_t part = inner / a.ctx.groupSize;
    sliceColumns(a.in(0), outer, inner, a.ctx.groupRank * part, part, a.out(0),
                 s);
  }
  }
}

void CudaDevice::launchNorm(const Args &a) {
  cudaStream_t s = computeStream;
  const auto &ins = a.ins;
  const plan::KernelParams &p = a.p;
  switch (a.kernel) {
  case Kernel::RmsNorm:
  case Kernel::LayerNorm: {
    int64_t h = normWidth(a.kernel, ins[1]);
    norm(a.in(0), a.in(1), ins.size() > 2 ? a.in(2) : In(), a.out(0),
         ins[0].n / h, h, p.eps, a.kernel == Kernel::RmsNorm,
         float(p.weightOffset), s);
    return;
  }
  case Kernel::RmsNormBwd:
  case Kernel::LayerNormBwd: {
    int64_t h = normWidth(a.kernel, ins[2]);
    normBackward(a.in(0), a.in(1), a.in(2), a.out(0), a.out(1),
                 a.outs.size() > 2 ? a.out(2) : Out(), ins[1].n / h, h, p.eps,
                 a.kernel == Kernel::RmsNormBwd, float(p.weightOffset),
                 floats(normBackwardWorkspace(h)), s);
    return;
  }
  case Kernel::BiasAdd: {
    int64_t h = ins[0].dim(-1);
    addPeriodic(a.in(0), a.in(1), h, a.out(0), ins[0].n, s);
    return;
  }
  default: { // bias_add_bwd
    int64_t h = ins[0].dim(-1);
    cuda::transposeBlocks(a.in(0), a.out(0), 1, 1, ins[0].n, s);
    sumPeriodic(a.in(0), h, ins[0].n, a.out(1), h,
                floats(sumPeriodicWorkspace(h)), s);
  }
  }
}

void CudaDevice::launchAttention(const Args &args) {
  cudaStream_t s = computeStream;
  const auto &ins = args.ins, &outs = args.outs;
  const plan::KernelParams &p = args.p;
  auto in = [&](size_t k) { return args.in(k); };
  auto out = [&](size_t k) { return args.out(k); };
  std::string name(plan::name(args.kernel));
  bool forward = args.kernel == Kernel::Attention;
  const TensorRef &q = ins[forward ? 0 : 1];
  AttentionShape a;
  a.b = q.dim(0);
  a.s = q.dim(1);
  a.heads = p.numHeads;
  a.kvHeads = p.numKvHeads;
  a.d = q.dim(2) / a.heads;
  a.causal = p.causal;
  a.window = p.window;
  a.sharedBytes = sharedBytesOptIn;
  if (a.d > maxHeadDim())
    throw std::runtime_error(
        name + " with head dimension " + std::to_string(a.d) +
        ": the CUDA kernel takes at most " + std::to_string(maxHeadDim()));
  // The log-sum-exp of each query row: the forward's second output, the
  // backward's sixth input (f32), in plans that keep it.
  float *lse = forward ? (outs.size() > 1 ? outs[1].f : nullptr)
                       : (ins.size() > 5 ? ins[5].f : nullptr);
  auto bytes = [&](int64_t n) { return workspace(n); };
  bool onCudnn = false;
  // The device keeps cuDNN for its life; PARTITA_CUDA_ATTENTION, read at
  // every launch, says whether it runs this one.
  if (cudnnAttention && attentionKernels() == AttentionKernels::Cudnn) {
    std::string why =
        forward
            ? cudnnAttention->refusal(a, {in(0), in(1), in(2)}, {out(0)}, lse,
                                      false)
            : cudnnAttention->refusal(a, {in(0), in(1), in(2), in(3), in(4)},
                                      {out(0), out(1), out(2)}, lse, true);
    onCudnn = why.empty();
    // Said once per kernel and reason, so that a run that asked for
    // `cudnn` shows what fell back.
    if (!onCudnn && attentionKernelsNamed() &&
        cudnnRefusals.insert(name + ": " + why).second)
      std::fprintf(stderr,
                   "plan-run: note: cuDNN does not take %s (%s); our own "
                   "kernels run it\n",
                   name.c_str(), why.c_str());
  }
  if (onCudnn) {
    // cuDNN builds its plan for a shape at the first launch of it. Asked
    // for by name, a failure stops the run; as the default, our own
    // kernels take this launch and every later one.
    try {
      if (forward)
        cudnnAttention->forward(a, in(0), in(1), in(2), out(0), lse, bytes, s);
      else
        cudnnAttention->backward(a, in(0), in(1), in(2), in(3), in(4), lse,
                                 out(0), out(1), out(2), bytes, s);
    } catch (const std::runtime_error &e) {
      fallBackFromCudnn(e);
      cudnnAttention.reset();
      onCudnn = false;
    }
  }
  if (!onCudnn && forward)
    attention(a, in(0), in(1), in(2), out(0), lse, s);
  else if (!onCudnn)
    attentionBackward(a, in(0), in(1), in(2), in(3), in(4), lse, out(0), out(1),
                      out(2),
                      floats(attentionBackwardWorkspace(a, in(0), in(1), in(2),
                                                        in(3), lse != nullptr)),
                      s);
}

void CudaDevice::launchElementwise(const Args &a) {
  cudaStream_t s = computeStream;
  const auto &ins = a.ins;
  const plan::KernelParams &p = a.p;
  int64_t n = ins[0].n;
  switch (a.kernel) {
  case Kernel::Rotary:
  case Kernel::RotaryBwd: {
    const TensorRef &x = ins[0];
    int64_t heads = p.numHeads;
    rotary(a.in(0), a.out(0), x.dim(0), x.dim(1), heads, x.dim(2) / heads,
           p.rotary.rotaryDim, inverseFrequencies(p.rotary),
           plan::rotaryMagnitude(p.rotary),
           a.kernel == Kernel::Rotary ? 1.0f : -1.0f, s);
    return;
  }
  case Kernel::Gelu:
  case Kernel::Silu:
    return unary(activation(a.kernel, p), a.in(0), a.out(0), n, s);
  case Kernel::Swiglu:
  case Kernel::Geglu:
    return gated(activation(a.kernel, p), a.in(0), a.in(1), a.out(0), n, s);
  case Kernel::GeluBwd:
  case Kernel::SiluBwd:
    return unaryBackward(activation(a.kernel, p), a.in(0), a.in(1), a.out(0), n,
                         s);
  case Kernel::SwigluBwd:
  case Kernel::GegluBwd:
    return gatedBackward(activation(a.kernel, p), a.in(0), a.in(1), a.in(2),
                         a.out(0), a.out(1), n, s);
  case Kernel::Add: {
    // kMaxSumInputs inputs a launch. More gather group by group in an f32
    // sum, which reaches the output once: rounded once, and read after
    // every input (the output may alias one).
    int64_t size = a.outs[0].n;
    bool grouped = ins.size() > size_t(kMaxSumInputs);
    float *partial = grouped ? floats(size) : nullptr;
    for (size_t first = 0; first < ins.size(); first += kMaxSumInputs) {
      In xs[kMaxSumInputs];
      int count = 0;
      for (size_t k = first; k < ins.size() && count < kMaxSumInputs; ++k)
        xs[count++] = a.in(k);
      sum(xs, count, grouped ? f32Out(partial, first > 0) : a.out(0), size, s);
    }
    if (grouped)
      cuda::transposeBlocks(f32In(partial), a.out(0), 1, 1, size, s);
    return;
  }
  default: // copy
    cuda::transposeBlocks(a.in(0), a.out(0), 1, 1, n, s);
  }
}

void CudaDevice::launchCrossEntropy(const Args &a) {
  cudaStream_t s = computeStream;
  const auto &ins = a.ins;
  const plan::KernelParams &p = a.p;
  if (a.kernel == Kernel::CeLoss) {
    crossEntropyLoss(a.in(0), a.in(1), ins[0].n, p.scale, a.out(0), s);
    return;
  }
  const TensorRef &l = ins[0];
  CrossEntropyShape c{rowsOf(l), l.dim(-1), 0, p.vocabSize};
  c.start = vocabStart(p, a.ctx, c.v);
  if (a.kernel == Kernel::CeMax)
    crossEntropyMax(c, a.in(0), a.out(0), s);
  else if (a.kernel == Kernel::CeStats)
    crossEntropyStats(c, a.in(0), a.in(1), ins[2].i, a.out(0), s);
  else
    crossEntropyBackward(c, a.in(0), a.in(1), a.in(2), ins[3].i, float(p.scale),
                         a.out(0), s);
}

void CudaDevice::launchOptimizer(const Args &a) {
  cudaStream_t s = computeStream;
  if (a.kernel == Kernel::AdamW) {
    adamwAll({{a.ins, a.outs, a.acc, &a.p}}, a.ctx);
  } else if (a.kernel == Kernel::ClipCoefficient) {
    clipCoefficient(a.in(0), a.ctx.optimizer->clipNorm, a.out(0), s);
  } else { // grad_sumsq
    const std::vector<double> &weights = a.p.weights;
    std::vector<SquaresTerm> terms;
    for (size_t k = 0; k < a.ins.size(); ++k)
      terms.push_back({a.in(k), a.ins[k].n, weights.at(k)});
    check(cudaMemsetAsync(sumAccumulator, 0, sizeof(double), s), "grad_sumsq");
    sumSquares(terms, sumAccumulator, s);
    storeScalar(sumAccumulator, a.out(0), s);
  }
}

} // namespace cuda
} // namespace partita::runtime
