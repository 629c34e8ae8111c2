//===- DeviceRates.cpp - A CPU rank's speed, measured ---------------------===//

#include "DeviceRates.h"

#include "../../runtime/cpu/CpuKernels.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace partita {

namespace {

using runtime::Kernel;
using runtime::TensorRef;

/// A tensor of `shape` filled with small values.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  explicit Tensor(std::vector<int64_t> dims) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.resize(n);
    for (int64_t i = 0; i < n; ++i)
      data[i] = 0.01f * float(i % 97) - 0.5f;
  }
  TensorRef ref() {
    TensorRef t;
    t.f = data.data();
    t.shape = &shape;
    t.n = int64_t(data.size());
    return t;
  }
};

/// Seconds per run of `kernel` on `ins` into `outs`: one run to warm up,
/// then runs for about 50 ms (at least 3), every rank of `world` starting
/// together.
double timeKernel(MPI_Comm world, Kernel kernel, std::vector<Tensor> &ins,
                  std::vector<Tensor> &outs, const plan::KernelParams &params) {
  std::vector<TensorRef> in, out;
  for (Tensor &t : ins)
    in.push_back(t.ref());
  for (Tensor &t : outs)
    out.push_back(t.ref());
  std::vector<bool> accumulate(out.size(), false);
  runtime::KernelContext ctx;
  auto run = [&] {
    runtime::runCpuKernel(kernel, in, out, accumulate, params, ctx);
  };
  run();
  MPI_Barrier(world);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  int runs = 0;
  double seconds = 0;
  while (runs < 3 || seconds < 0.05) {
    run();
    ++runs;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return seconds / runs;
}

double meanOverRanks(MPI_Comm world, double value) {
  double sum;
  int size;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, world);
  MPI_Comm_size(world, &size);
  return sum / size;
}

/// Least squares in log space of rate(d) = peak (d / (d + half))^3 over
/// half from 0 to 4096.
std::pair<double, double>
fitGemm(const std::vector<std::pair<int64_t, double>> &rates) {
  double bestError = std::numeric_limits<double>::infinity(), bestPeak = 0,
         bestHalf = 0;
  for (double half = 0; half <= 4096; half += 0.25) {
    double logPeak = 0;
    for (auto [d, rate] : rates)
      logPeak += std::log(rate) - 3 * std::log(d / (d + half));
    logPeak /= double(rates.size());
    double error = 0;
    for (auto [d, rate] : rates) {
      double r = std::log(rate) - logPeak - 3 * std::log(d / (d + half));
      error += r * r;
    }
    if (error < bestError) {
      bestError = error;
      bestPeak = std::exp(logPeak);
      bestHalf = half;
    }
  }
  return {bestPeak, bestHalf};
}

} // namespace

DeviceRates measureDeviceRates(MPI_Comm world) {
  DeviceRates r;
  plan::KernelParams none;
  // The linear kernel (y = x w^T) on square shapes.
  for (int64_t d : {16, 32, 64, 128, 256, 512}) {
    std::vector<Tensor> ins{Tensor({d, d}), Tensor({d, d})},
        outs{Tensor({d, d})};
    double seconds = timeKernel(world, Kernel::Linear, ins, outs, none);
    r.gemm.emplace_back(d, meanOverRanks(world, 2.0 * d * d * d / seconds));
  }
  std::tie(r.gemmPeak, r.gemmHalfDim) = fitGemm(r.gemm);

  // Causal attention of one sequence of 128 tokens, 4 heads of 32.
  {
    const int64_t s = 128, heads = 4, d = 32;
    plan::KernelParams attention;
    attention.numHeads = attention.numKvHeads = heads;
    attention.causal = true;
    std::vector<Tensor> ins{Tensor({1, s, heads * d}),
                            Tensor({1, s, heads * d}),
                            Tensor({1, s, heads * d})},
        outs{Tensor({1, s, heads * d})};
    double seconds = timeKernel(world, Kernel::Attention, ins, outs, attention);
    double flops = 4.0 * heads * s * s * d;
    r.attentionEfficiency =
        std::min(1.0, meanOverRanks(world, flops / seconds) / r.gemmPeak);
  }

  // Element-wise kernels on 64 Ki elements a tensor: the bytes they read
  // and write over their time.
  {
    const int64_t n = 65536;
    double bytes = 0, seconds = 0;
    for (auto [kernel, inputs, outputs] : {std::tuple{Kernel::Add, 2, 1},
                                           {Kernel::Swiglu, 2, 1},
                                           {Kernel::SwigluBwd, 3, 2}}) {
      std::vector<Tensor> ins(inputs, Tensor({n})), outs(outputs, Tensor({n}));
      seconds += timeKernel(world, kernel, ins, outs, none);
      bytes += 4.0 * n * (inputs + outputs);
    }
    r.memoryBytesPerS = meanOverRanks(world, bytes / seconds);
  }
  return r;
}

void printDeviceRates(const DeviceRates &r, const std::string &title) {
  std::printf("# device: the CPU backend's kernels on %s\n", title.c_str());
  std::printf("# %12s %12s %12s\n", "gemm size", "GFLOP/s", "fit GFLOP/s");
  for (auto [d, rate] : r.gemm)
    std::printf("  %12lld %12.2f %12.2f\n", (long long)d, rate / 1e9,
                r.gemmPeak * std::pow(d / (d + r.gemmHalfDim), 3) / 1e9);
  std::printf("plan-run: each rank: GEMM peak %.2f GFLOP/s, half of it at "
              "%.1f in each dimension; causal attention at %.0f%% of the "
              "peak; element-wise kernels %.2f GB/s\n",
              r.gemmPeak / 1e9, r.gemmHalfDim, 100 * r.attentionEfficiency,
              r.memoryBytesPerS / 1e9);
}

} // namespace partita
