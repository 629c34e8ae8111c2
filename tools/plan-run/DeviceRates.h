//===- DeviceRates.h - A CPU rank's speed, measured -------------*- C++ -*-===//
//
// plan-run --bandwidth-test's device part: the CPU backend's own kernels,
// timed on every rank at once (ranks that share a host's cores slow each
// other down, as they do in training), and fitted to the cost model's
// roofline (docs/cost-model.md): a GEMM peak and the size at which GEMM
// efficiency halves, attention's fraction of that peak, and the bandwidth
// memory-bound kernels reach.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_TOOLS_PLANRUN_DEVICERATES_H
#define PARTITA_TOOLS_PLANRUN_DEVICERATES_H

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace partita {

struct DeviceRates {
  /// FLOP/s of square GEMMs by size, the mean over the ranks.
  std::vector<std::pair<int64_t, double>> gemm;
  /// The fit: rate(d) = gemmPeak * (d / (d + gemmHalfDim))^3.
  double gemmPeak = 0, gemmHalfDim = 0;
  /// Causal attention's FLOP/s (the full square, as the cost model counts
  /// it) over gemmPeak.
  double attentionEfficiency = 0;
  /// Bytes read and written per second by element-wise kernels.
  double memoryBytesPerS = 0;
};

/// Measures every rank of `world` at once; every rank gets the means.
DeviceRates measureDeviceRates(MPI_Comm world);

/// Rank 0's table of what was measured.
void printDeviceRates(const DeviceRates &rates, const std::string &title);

} // namespace partita

#endif // PARTITA_TOOLS_PLANRUN_DEVICERATES_H
