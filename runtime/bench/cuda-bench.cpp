//===- cuda-bench.cpp - GEMM and NCCL throughput of the CUDA backend ------===//
//
//   partita-cuda-bench gemm [--tokens T]   our GEMM path against plain cuBLAS
//   partita-cuda-bench attention [--seq S]  each family of attention kernels
//   partita-cuda-bench memory [--tokens T] [--hidden H]
//                                            memory-bound kernels' bandwidth
//   mpirun -np N partita-cuda-bench allreduce   NCCL all-reduce bus bandwidth
//
// Prints one JSON object. The GEMMs are the linear layers of a
// Llama-3-8B block over T tokens (default 8192): our path (cuBLASLt on the
// runtime's fp32 buffers, at each --gemm-precision) against cublasGemmEx
// on the same buffers and precision, and against cublasGemmEx on bf16
// buffers, the ceiling for a bf16 runtime. The attention is that block's
// (32 heads, 8 kv heads of 128, causal, bf16, seq S, default 8192),
// forward and backward, with each PARTITA_CUDA_ATTENTION family; its
// TFLOP/s count the causal half of the products, as
// bench/gpu/torch_attention.py does for PyTorch's. The memory-bound
// kernels run on that block's shapes over T tokens in bf16 (AdamW and the
// gradient norm over its parameters, with f32 moments and master copy;
// the cross-entropy over Llama-3's vocabulary), or on a block of hidden
// size H shaped like it:
// the bytes each reads and writes, over its time, against a
// device-to-device copy's.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaDevice.h"
#include "cuda/Kernels.h"

#ifndef PARTITA_CUDA_EMULATOR
#include <cublas_v2.h>
#endif
#include <cuda_bf16.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

using namespace partita::runtime;
using json = nlohmann::json;

namespace {

/// Median milliseconds of `run` over `reps` after `warmup` runs.
double timeMs(const std::function<void()> &run, cudaStream_t stream,
              int warmup = 3, int reps = 10) {
  for (int i = 0; i < warmup; ++i)
    run();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start, stream);
    run();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// `count` zeroed elements of device memory.
template <typename T> T *deviceArray(int64_t count, const char *what) {
  void *p = nullptr;
  cuda::check(cudaMalloc(&p, count * sizeof(T)), what);
  cuda::check(cudaMemset(p, 0, count * sizeof(T)), what);
  return static_cast<T *>(p);
}

/// `count` elements of device memory holding small finite values (0.0115
/// as bf16 and as f32): the kernels' time does not depend on them.
template <typename T> T *filledArray(int64_t count, const char *what) {
  T *p = deviceArray<T>(count, what);
  cuda::check(cudaMemset(p, 0x3c, count * sizeof(T)), what);
  return p;
}

#ifdef PARTITA_CUDA_EMULATOR
// The emulator has cuBLASLt (our path) but not cuBLAS (the reference).
json gemmBench(int64_t) {
  return {{"skipped", "the CUDA emulator has no cuBLAS to compare with"}};
}
#else
void checkBlas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what);
}

json gemmBench(int64_t tokens) {
  struct Shape {
    const char *name;
    int64_t out, in;
  };
  // The linear layers of a Llama-3-8B block (hidden 4096, 8 kv heads of
  // 128, ffn 14336).
  std::vector<Shape> shapes = {{"attn.q", 4096, 4096},
                               {"attn.kv", 1024, 4096},
                               {"attn.o", 4096, 4096},
                               {"mlp.gate_up", 14336, 4096},
                               {"mlp.down", 4096, 14336}};
  json rows = json::array();
  cudaStream_t stream;
  cuda::check(cudaStreamCreate(&stream), "a stream");
  cublasHandle_t blas;
  checkBlas(cublasCreate(&blas), "cublasCreate");
  checkBlas(cublasSetStream(blas, stream), "cublasSetStream");
  for (const Shape &s : shapes) {
    int64_t m = s.out, n = tokens, k = s.in;
    double flop = 2.0 * m * n * k;
    float *w = deviceArray<float>(m * k, "W"),
          *x = deviceArray<float>(n * k, "x"),
          *y = deviceArray<float>(m * n, "y");
    json row = {{"gemm", s.name}, {"m", m}, {"n", n}, {"k", k}};
    for (GemmPrecision p :
         {GemmPrecision::FP32, GemmPrecision::TF32, GemmPrecision::BF16}) {
      cuda::Gemm ours(p, stream);
      double oursMs = timeMs(
          [&] {
            ours.run(true, false, m, n, k, cuda::f32In(w), k, cuda::f32In(x), k,
                     cuda::f32Out(y), m);
          },
          stream);
      cublasComputeType_t compute =
          p == GemmPrecision::FP32   ? CUBLAS_COMPUTE_32F
          : p == GemmPrecision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                     : CUBLAS_COMPUTE_32F_FAST_16BF;
      float alpha = 1, beta = 0;
      double plainMs = timeMs(
          [&] {
            checkBlas(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(m),
                                   int(n), int(k), &alpha, w, CUDA_R_32F,
                                   int(k), x, CUDA_R_32F, int(k), &beta, y,
                                   CUDA_R_32F, int(m), compute,
                                   CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
          },
          stream);
      std::string key = gemmPrecisionName(p);
      row["ours_" + key + "_tflops"] = flop / oursMs / 1e9;
      row["cublas_" + key + "_tflops"] = flop / plainMs / 1e9;
      row["ours_vs_cublas_" + key] = plainMs / oursMs;
    }
    // bf16 buffers, as bf16 plans keep them: ours against plain cuBLAS.
    auto *wb = deviceArray<__nv_bfloat16>(m * k, "W bf16");
    auto *xb = deviceArray<__nv_bfloat16>(n * k, "x bf16");
    auto *yb = deviceArray<__nv_bfloat16>(m * n, "y bf16");
    float alpha = 1, beta = 0;
    double bf16Ms = timeMs(
        [&] {
          checkBlas(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n),
                                 int(k), &alpha, wb, CUDA_R_16BF, int(k), xb,
                                 CUDA_R_16BF, int(k), &beta, yb, CUDA_R_16BF,
                                 int(m), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    "cublasGemmEx bf16");
        },
        stream);
    cuda::Gemm ours(GemmPrecision::BF16, stream);
    double oursBf16Ms = timeMs(
        [&] {
          ours.run(true, false, m, n, k, {wb, true}, k, {xb, true}, k,
                   {yb, true, false}, m);
        },
        stream);
    row["cublas_bf16_buffers_tflops"] = flop / bf16Ms / 1e9;
    row["ours_bf16_buffers_tflops"] = flop / oursBf16Ms / 1e9;
    row["ours_vs_cublas_bf16_buffers"] = bf16Ms / oursBf16Ms;
    rows.push_back(row);
    cudaFree(w);
    cudaFree(x);
    cudaFree(y);
    cudaFree(wb);
    cudaFree(xb);
    cudaFree(yb);
  }
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  return {{"tokens", tokens}, {"gemms", rows}};
}
#endif

/// cuDNN's fused attention on `shape`, in a workspace of its own, through
/// `timings(forwardMs, backwardMs)`; why not, in its row, where it cannot
/// run (so that the other families' times still come back).
template <typename Timings>
json cudnnAttentionTimes(const cuda::AttentionShape &shape,
                         const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                         const __nv_bfloat16 *v, __nv_bfloat16 *o,
                         const __nv_bfloat16 *dout, __nv_bfloat16 *dq,
                         __nv_bfloat16 *dk, __nv_bfloat16 *dv, float *lse,
                         cudaStream_t stream, const Timings &timings) {
  if (!cuda::cudnnBuilt())
    return {{"skipped", "this build has no cuDNN"}};
  void *scratch = nullptr;
  int64_t scratchBytes = 0;
  try {
    cuda::CudnnAttention cudnn;
    std::string why = cudnn.refusal(
        shape, {{q, true}, {k, true}, {v, true}, {o, true}, {dout, true}},
        {{dq, true, false}, {dk, true, false}, {dv, true, false}}, lse, true);
    if (!why.empty())
      return {{"skipped", why}};
    auto grow = [&](int64_t bytes) {
      if (bytes > scratchBytes) {
        cuda::check(cudaStreamSynchronize(stream), "the cuDNN workspace");
        cudaFree(scratch);
        scratch = deviceArray<char>(bytes, "the cuDNN workspace");
        scratchBytes = bytes;
      }
      return scratch;
    };
    double forwardMs = timeMs(
        [&] {
          cudnn.forward(shape, {q, true}, {k, true}, {v, true},
                        {o, true, false}, lse, grow, stream);
        },
        stream);
    double backwardMs = timeMs(
        [&] {
          cudnn.backward(shape, {dout, true}, {q, true}, {k, true}, {v, true},
                         {o, true}, lse, {dq, true, false}, {dk, true, false},
                         {dv, true, false}, grow, stream);
        },
        stream);
    cuda::check(cudaGetLastError(), "cuDNN attention");
    cudaFree(scratch);
    return timings(forwardMs, backwardMs);
  } catch (const std::exception &e) {
    cudaFree(scratch);
    return {{"skipped", std::string("failed: ") + e.what()}};
  }
}

json attentionBench(int64_t seq) {
  int64_t b = 1, heads = 32, kvHeads = 8, d = 128;
  int sharedBytes = 0;
  cuda::check(cudaDeviceGetAttribute(
                  &sharedBytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
              "the shared memory a block may have");
  cuda::AttentionShape shape{b, seq, heads, kvHeads, d, true, 0, sharedBytes};
  int64_t qCount = b * seq * heads * d, kvCount = b * seq * kvHeads * d;
  using bf16 = __nv_bfloat16;
  bf16 *q = filledArray<bf16>(qCount, "q"),
       *k = filledArray<bf16>(kvCount, "k"),
       *v = filledArray<bf16>(kvCount, "v"),
       *o = filledArray<bf16>(qCount, "o"),
       *dout = filledArray<bf16>(qCount, "dO");
  auto *dq = deviceArray<__nv_bfloat16>(qCount, "dq"),
       *dk = deviceArray<__nv_bfloat16>(kvCount, "dk"),
       *dv = deviceArray<__nv_bfloat16>(kvCount, "dv");
  float *lse = deviceArray<float>(b * heads * seq, "lse");
  setenv("PARTITA_CUDA_ATTENTION", "mma-atomic", 1);
  float *workspace = deviceArray<float>(
      cuda::attentionBackwardWorkspace(shape, {dout, true}, {q, true},
                                       {k, true}, {v, true}, true),
      "the backward's workspace (the most a family takes)");
  cudaStream_t stream;
  cuda::check(cudaStreamCreate(&stream), "a stream");
  double flop = 2.0 * b * heads * seq * seq * d;
  auto timings = [&](double forwardMs, double backwardMs) {
    return json{{"forward_ms", forwardMs},
                {"backward_ms", backwardMs},
                {"forward_tflops", flop / forwardMs / 1e9},
                {"backward_tflops", 2 * flop / backwardMs / 1e9}};
  };
  json families = json::object();
  for (const char *family : {"wmma", "mma", "mma-atomic"}) {
    setenv("PARTITA_CUDA_ATTENTION", family, 1);
    if (!cuda::attentionOnTensorCores(shape, {q, true}, {k, true}, {v, true})) {
      families[family] = {
          {"skipped", "this GPU gives a block " + std::to_string(sharedBytes) +
                          " bytes of shared memory, too few for its tiles"}};
      continue;
    }
    double forwardMs = timeMs(
        [&] {
          cuda::attention(shape, {q, true}, {k, true}, {v, true},
                          {o, true, false}, lse, stream);
        },
        stream);
    double backwardMs = timeMs(
        [&] {
          cuda::attentionBackward(shape, {dout, true}, {q, true}, {k, true},
                                  {v, true}, {o, true}, lse, {dq, true, false},
                                  {dk, true, false}, {dv, true, false},
                                  workspace, stream);
        },
        stream);
    cuda::check(cudaGetLastError(), std::string(family) + " attention");
    families[family] = timings(forwardMs, backwardMs);
  }
  unsetenv("PARTITA_CUDA_ATTENTION");
  families["cudnn"] = cudnnAttentionTimes(shape, q, k, v, o, dout, dq, dk, dv,
                                          lse, stream, timings);
  for (void *p :
       std::vector<void *>{q, k, v, o, dout, dq, dk, dv, lse, workspace})
    cudaFree(p);
  cudaStreamDestroy(stream);
  return {{"shape",
           {{"batch", b},
            {"seq", seq},
            {"heads", heads},
            {"kv_heads", kvHeads},
            {"head_dim", d},
            {"causal", true},
            {"dtype", "bf16"}}},
          {"attention", families},
          {"cudnn_version", cuda::cudnnVersion()}};
}

json memoryBench(int64_t tokens, int64_t hidden) {
  cudaStream_t stream;
  cuda::check(cudaStreamCreate(&stream), "a stream");
  std::vector<void *> allocations;
  auto values = [&](int64_t bytes, const char *what) {
    char *p = filledArray<char>(bytes, what);
    allocations.push_back(p);
    return p;
  };
  auto bf16 = [&](int64_t n, const char *what) {
    return cuda::Out{values(2 * n, what), true, false};
  };
  json kernels = json::object();
  int64_t ffn = hidden * 7 / 2, kvWidth = hidden / 4;
  int64_t act = tokens * ffn, res = tokens * hidden;
  // Bytes per second of a device-to-device copy of one of the largest
  // operands (the MLP's activations), counting what it reads and what it
  // writes.
  int64_t copyBytes = 2 * act;
  char *from = values(copyBytes, "copy source"),
       *to = values(copyBytes, "copy");
  double copyMs = timeMs(
      [&] {
        cuda::check(cudaMemcpyAsync(to, from, copyBytes,
                                    cudaMemcpyDeviceToDevice, stream),
                    "a device-to-device copy");
      },
      stream);
  double copyRate = 2.0 * copyBytes / (copyMs * 1e-3);
  auto measure = [&](const char *name, int64_t bytes,
                     const std::function<void()> &run) {
    double ms = timeMs(run, stream);
    cuda::check(cudaGetLastError(), name);
    double rate = bytes / (ms * 1e-3);
    kernels[name] = {{"bytes", bytes},
                     {"ms", ms},
                     {"gbytes_per_s", rate / 1e9},
                     {"of_copy", rate / copyRate}};
  };

  cuda::Out gate = bf16(act, "gate"), up = bf16(act, "up"), y = bf16(act, "y"),
            dy = bf16(act, "dy"), dgate = bf16(act, "dgate"),
            dup = bf16(act, "dup");
  measure("swiglu", 3 * 2 * act, [&] {
    cuda::gated(cuda::Unary::Silu, cuda::asInput(gate), cuda::asInput(up), y,
                act, stream);
  });
  measure("swiglu_bwd", 5 * 2 * act, [&] {
    cuda::gatedBackward(cuda::Unary::Silu, cuda::asInput(dy),
                        cuda::asInput(gate), cuda::asInput(up), dgate, dup, act,
                        stream);
  });
  cuda::In addends[2] = {cuda::asInput(bf16(res, "x")),
                         cuda::asInput(bf16(res, "residual"))};
  cuda::Out total = bf16(res, "sum");
  measure("add", 3 * 2 * res,
          [&] { cuda::sum(addends, 2, total, res, stream); });

  // The block's RMSNorm and its backward, and rotary on its queries (heads
  // of 128, or one head under that, all columns rotated, Llama-3's theta).
  cuda::Out x = bf16(res, "norm input"), normed = bf16(res, "norm output"),
            w = bf16(hidden, "norm weight"),
            dnormed = bf16(res, "norm output gradient"),
            dx = bf16(res, "norm input gradient"),
            dw = bf16(hidden, "norm weight gradient");
  float *normSums =
      deviceArray<float>(cuda::normBackwardWorkspace(hidden), "norm sums");
  allocations.push_back(normSums);
  // The norm over rows of `width` columns (the hidden size, or a head of
  // Qwen3's query norm, whose weight is one head wide) and its backward.
  auto measureNorm = [&](const std::string &name, int64_t width) {
    int64_t rows = res / width;
    measure(name.c_str(), 2 * (2 * res + width), [&] {
      cuda::norm(cuda::asInput(x), cuda::asInput(w), cuda::In(), normed, rows,
                 width, 1e-5, true, 0.0f, stream);
    });
    measure((name + "_bwd").c_str(), 2 * (3 * res + 2 * width), [&] {
      cuda::normBackward(cuda::asInput(dnormed), cuda::asInput(x),
                         cuda::asInput(w), dx, dw, cuda::Out(), rows, width,
                         1e-5, true, 0.0f, normSums, stream);
    });
  };
  int64_t headDim = std::min<int64_t>(128, hidden);
  measureNorm("rms_norm", hidden);
  measureNorm("rms_norm_per_head", headDim);
  std::vector<double> frequencies(headDim / 2);
  for (size_t i = 0; i < frequencies.size(); ++i)
    frequencies[i] = std::pow(500000.0, -2.0 * double(i) / double(headDim));
  auto *invFreq = deviceArray<double>(headDim / 2, "rotary frequencies");
  allocations.push_back(invFreq);
  cuda::check(cudaMemcpy(invFreq, frequencies.data(), headDim / 2 * 8,
                         cudaMemcpyHostToDevice),
              "rotary frequencies");
  measure("rotary", 2 * 2 * res, [&] {
    cuda::rotary(cuda::asInput(x), normed, 1, tokens, hidden / headDim, headDim,
                 headDim, invFreq, /*magnitude=*/1.0, 1.0f, stream);
  });

  // The cross-entropy's passes over the logits, with a vocabulary as much
  // larger than the hidden size as Llama-3's (128256 for 4096).
  int64_t vocab = hidden * 128256 / 4096, logitCount = tokens * vocab;
  cuda::CrossEntropyShape ce{tokens, vocab, 0, vocab};
  cuda::Out logits = bf16(logitCount, "logits"),
            dlogits = bf16(logitCount, "logit gradients");
  cuda::Out rowMax{values(4 * tokens, "row maxima"), false, false},
      stats{values(8 * tokens, "row sums"), false, false};
  auto *labels = deviceArray<int32_t>(tokens, "labels");
  allocations.push_back(labels);
  measure("ce_stats", 2 * logitCount, [&] {
    cuda::crossEntropyStats(ce, cuda::asInput(logits), cuda::asInput(rowMax),
                            labels, stats, stream);
  });
  measure("ce_bwd", 2 * 2 * logitCount, [&] {
    cuda::crossEntropyBackward(ce, cuda::asInput(logits), cuda::asInput(rowMax),
                               cuda::asInput(stats), labels, 1.0f / tokens,
                               dlogits, stream);
  });

  // The block's parameters, updated in place.
  std::vector<int64_t> sizes = {
      hidden * hidden, hidden * kvWidth, hidden * kvWidth,
      hidden * hidden, hidden * ffn,     hidden * ffn,
      ffn * hidden,    hidden,           hidden};
  float *clip = deviceArray<float>(1, "clip coefficient");
  allocations.push_back(clip);
  float one = 1;
  cuda::check(cudaMemcpy(clip, &one, 4, cudaMemcpyHostToDevice), "clip");
  std::vector<cuda::AdamWTensor> adam;
  std::vector<cuda::SquaresTerm> squares;
  int64_t parameters = 0;
  for (int64_t n : sizes) {
    cuda::AdamWTensor a;
    cuda::Out p = bf16(n, "parameter"), g = bf16(n, "gradient");
    cuda::Out m{values(4 * n, "adam_m"), false, false},
        v{values(4 * n, "adam_v"), false, false},
        w{values(4 * n, "master"), false, false};
    a.p = cuda::asInput(p);
    a.np = p;
    a.g = cuda::asInput(g);
    a.m = cuda::asInput(m);
    a.nm = m;
    a.v = cuda::asInput(v);
    a.nv = v;
    a.w = cuda::asInput(w);
    a.nw = w;
    a.clip = {clip, false};
    a.pn = a.chunk = n;
    a.decay = true;
    adam.push_back(a);
    squares.push_back({cuda::asInput(g), n, 1.0});
    parameters += n;
  }
  cuda::AdamWStep step{1e-4, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05};
  // Reads the gradient (bf16), moments and master (f32); writes the
  // moments, master and parameter.
  measure("adamw", (2 + 4 + 4 + 4) * parameters + (4 + 4 + 4 + 2) * parameters,
          [&] { cuda::adamw(step, adam, stream); });
  auto *acc64 = deviceArray<double>(1, "sum of squares");
  allocations.push_back(acc64);
  measure("grad_sumsq", 2 * parameters,
          [&] { cuda::sumSquares(squares, acc64, stream); });

  for (void *p : allocations)
    cudaFree(p);
  cudaStreamDestroy(stream);
  return {{"tokens", tokens},
          {"hidden", hidden},
          {"parameters", parameters},
          {"copy_gbytes_per_s", copyRate / 1e9},
          {"memory_bound", kernels}};
}

/// NCCL all-reduce bus bandwidth over every rank of the job (nccl-tests'
/// definition: 2 (n - 1) / n x bytes / time).
json allReduceBench(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // A plan with one group over the world, for the communicator.
  Plan plan;
  plan.dp = size;
  plan.tp = plan.pp = 1;
  plan.worldSize = size;
  std::vector<int64_t> all;
  for (int r = 0; r < size; ++r) {
    all.push_back(r);
    plan.devices.push_back({0, r, 0, 0, r});
  }
  plan.groups["dp"] = {all};
  // A rank per GPU of its node: the device is the rank among the node's.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int localRank;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_free(&node);
  auto device = createCudaDevice(localRank, GemmPrecision::BF16);
  auto comm = createNcclCommunicator(plan, *device);
  auto *cudaDevice = static_cast<cuda::CudaDevice *>(device.get());
  json rows = json::array();
  for (int64_t bytes : {int64_t(1) << 20, int64_t(16) << 20, int64_t(256) << 20,
                        int64_t(1) << 30}) {
    float *data =
        static_cast<float *>(device->allocateArena(bytes)); // zero-filled
    double ms = timeMs([&] { comm->allReduce("dp", data, bytes / 4, false); },
                       cudaDevice->stream(Stream::Compute), 2, 5);
    double bus = 2.0 * (size - 1) / size * bytes / (ms * 1e-3) / 1e9;
    rows.push_back(
        {{"bytes", bytes}, {"time_ms", ms}, {"bus_gbytes_per_s", bus}});
  }
  comm.reset();
  MPI_Finalize();
  if (rank != 0)
    std::exit(0);
  return {{"ranks", size}, {"all_reduce", rows}};
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "gemm" && mode != "attention" && mode != "memory" &&
      mode != "allreduce") {
    std::cerr << "usage: partita-cuda-bench gemm [--tokens T]\n"
                 "       partita-cuda-bench attention [--seq S]\n"
                 "       partita-cuda-bench memory [--tokens T] [--hidden H]\n"
                 "       mpirun -np N partita-cuda-bench allreduce\n";
    return 2;
  }
  try {
    std::string why;
    if (cudaDeviceCount(&why) == 0) {
      std::cout << json{{"skipped", "no CUDA device: " + why}}.dump() << "\n";
      return 0;
    }
    json result;
    if (mode == "gemm" || mode == "memory") {
      int64_t tokens = 8192, hidden = 4096;
      for (int i = 2; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--tokens") == 0)
          tokens = std::stoll(argv[i + 1]);
        if (std::strcmp(argv[i], "--hidden") == 0)
          hidden = std::stoll(argv[i + 1]);
      }
      result = mode == "gemm" ? gemmBench(tokens) : memoryBench(tokens, hidden);
    } else if (mode == "attention") {
      int64_t seq = 8192;
      for (int i = 2; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--seq") == 0)
          seq = std::stoll(argv[i + 1]);
      result = attentionBench(seq);
    } else {
      result = allReduceBench(argc, argv);
    }
    std::cout << result.dump(2) << "\n";
  } catch (const std::exception &e) {
    std::cerr << "partita-cuda-bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
