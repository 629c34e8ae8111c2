//===- gemm-bench.cpp - OpenBLAS sgemm FLOP/s on this machine -------------===//
//
// The yardstick of bench/cpu_efficiency.py: the sgemm throughput the CPU
// backend's GEMMs could reach, on the shapes of a model's projections.
//
//   partita-gemm-bench M N K [repeats]
//
//===----------------------------------------------------------------------===//

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: partita-gemm-bench M N K [repeats]\n");
    return 2;
  }
  long m = std::atol(argv[1]), n = std::atol(argv[2]), k = std::atol(argv[3]);
  int repeats = argc > 4 ? std::atoi(argv[4]) : 10;
  if (m < 1 || n < 1 || k < 1 || repeats < 1) {
    std::fprintf(stderr, "partita-gemm-bench: sizes must be positive\n");
    return 2;
  }
  std::vector<float> a(m * k, 0.5f), b(n * k, 0.25f), c(m * n);
  double best = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {
    auto start = std::chrono::steady_clock::now();
    // y = x w^T, as the linear kernel runs it.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
                a.data(), k, b.data(), k, 0.0f, c.data(), n);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r > 0) // the first call warms up
      best = std::min(best, s);
  }
  std::printf("%.3f GFLOP/s\n", 2.0 * m * n * k / best / 1e9);
  return 0;
}
