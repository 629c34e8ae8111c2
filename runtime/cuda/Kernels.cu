//===- Kernels.cu - CUDA kernels of the plan format -----------------------===//
//
// f32 arithmetic (double where the CPU kernels use double, but for the
// cross-entropy's exponentials and the norm backward's terms of each
// element) on f32 or bf16 operands read in place, so that a plan's losses
// on the GPU track the CPU backend's in either dtype. Every kernel writes each
// output element from one thread, after reading what that element depends on,
// so outputs may alias inputs element for element.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.cuh"
#include "Kernels.h"
#include "LaunchConfig.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

namespace partita::runtime::cuda {

namespace {

int64_t elementBytes(bool bf16) { return bf16 ? 2 : 4; }

#define GRID_STRIDE(i, n)                                                      \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

__device__ __forceinline__ float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__device__ float unaryValue(Unary f, float x) {
  switch (f) {
  case Unary::Gelu:
    return 0.5f * x * (1 + erff(x * 0.70710678118654752f));
  case Unary::GeluTanh:
    return 0.5f * x * (1 + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
  case Unary::Silu:
    return x * sigmoidf(x);
  }
  return 0;
}

__device__ float unaryGrad(Unary f, float x) {
  switch (f) {
  case Unary::Gelu: {
    float cdf = 0.5f * (1 + erff(x * 0.70710678118654752f));
    return cdf + x * expf(-0.5f * x * x) * 0.3989422804014327f;
  }
  case Unary::GeluTanh: {
    float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(u);
    return 0.5f * (1 + t) +
           0.5f * x * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * x * x);
  }
  case Unary::Silu: {
    float s = sigmoidf(x);
    return s + x * s * (1 - s);
  }
  }
  return 0;
}

// The elementwise kernels take a pack of kPack elements a thread
// (KernelSupport.cuh).

__global__ void unaryKernel(Unary f, In x, Out y, int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack p = loadPack(x, i, count);
    EACH_ELEMENT(e) p.v[e] = unaryValue(f, p.v[e]);
    storePack(y, i, count, p);
  });
}

__global__ void unaryBackwardKernel(Unary f, In dy, In x, Out dx, int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack d = loadPack(dy, i, count), p = loadPack(x, i, count);
    EACH_ELEMENT(e) p.v[e] = d.v[e] * unaryGrad(f, p.v[e]);
    storePack(dx, i, count, p);
  });
}

__global__ void gatedKernel(Unary f, In gate, In up, Out y, int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack g = loadPack(gate, i, count), u = loadPack(up, i, count);
    EACH_ELEMENT(e) g.v[e] = unaryValue(f, g.v[e]) * u.v[e];
    storePack(y, i, count, g);
  });
}

__global__ void gatedBackwardKernel(Unary f, In dy, In gate, In up, Out dgate,
                                    Out dup, int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack d = loadPack(dy, i, count), g = loadPack(gate, i, count),
         u = loadPack(up, i, count), dg, du;
    EACH_ELEMENT(e) {
      dg.v[e] = d.v[e] * u.v[e] * unaryGrad(f, g.v[e]);
      du.v[e] = d.v[e] * unaryValue(f, g.v[e]);
    }
    storePack(dgate, i, count, dg);
    storePack(dup, i, count, du);
  });
}

struct Inputs {
  In x[kMaxSumInputs];
  int count;
};

__global__ void sumKernel(Inputs in, Out y, int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack s{};
    for (int k = 0; k < in.count; ++k) {
      Pack x = loadPack(in.x[k], i, count);
      EACH_ELEMENT(e) s.v[e] += x.v[e];
    }
    storePack(y, i, count, s);
  });
}

/// Where `period` is a multiple of kPack, a pack's bias elements are one
/// pack too.
__global__ void addPeriodicKernel(In x, In bias, int64_t period, Out y,
                                  int64_t n) {
  forEachPack(n, [&](int64_t i, int count) {
    Pack p = loadPack(x, i, count), b;
    if (period % kPack == 0) {
      b = loadPack(bias, i % period, count);
    } else {
      EACH_ELEMENT(e) b.v[e] = e < count ? load(bias, (i + e) % period) : 0.0f;
    }
    EACH_ELEMENT(e) p.v[e] += b.v[e];
    storePack(y, i, count, p);
  });
}

/// Column sums of a [rows][period] matrix into `sums` (f32), a slab of rows
/// per blockIdx.y and a pack of columns a thread.
__global__ void sumPeriodicKernel(In x, int64_t period, int64_t rows,
                                  int64_t rowsPerSlab, float *sums) {
  int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kPack;
  if (c >= period)
    return;
  int count = packCount(period - c);
  int64_t begin = blockIdx.y * rowsPerSlab;
  int64_t end = min(rows, begin + rowsPerSlab);
  Pack s{};
  for (int64_t r = begin; r < end; ++r) {
    Pack p = loadPack(x, r * period + c, count);
    EACH_ELEMENT(e) s.v[e] += p.v[e];
  }
  EACH_ELEMENT(e) {
    if (e < count)
      atomicAdd(sums + c + e, s.v[e]);
  }
}

/// out[c] (+)= sums[c] for c < period, and 0 after it.
__global__ void storeSumsKernel(const float *sums, int64_t period, Out out,
                                int64_t outCount) {
  GRID_STRIDE(c, outCount) store(out, c, c < period ? sums[c] : 0.0f);
}

/// A thread per pack of a block of `inner` elements: block (i, j) of src,
/// [a][b] blocks, to block (j, i) of dst.
__global__ void transposeBlocksKernel(In src, Out dst, int64_t a, int64_t b,
                                      int64_t inner) {
  int64_t packsPerBlock = packsOf(inner);
  GRID_STRIDE(u, a * b * packsPerBlock) {
    int64_t block = u / packsPerBlock, k = u % packsPerBlock * kPack;
    int64_t i = block / b, j = block % b;
    int count = packCount(inner - k);
    storePack(dst, (j * a + i) * inner + k, count,
              loadPack(src, block * inner + k, count));
  }
}

/// A thread per pack of an output row of `width` columns.
__global__ void sliceColumnsKernel(In x, int64_t outer, int64_t inner,
                                   int64_t begin, int64_t width, Out y) {
  int64_t packsPerRow = packsOf(width);
  GRID_STRIDE(u, outer * packsPerRow) {
    int64_t o = u / packsPerRow, k = u % packsPerRow * kPack;
    int count = packCount(width - k);
    storePack(y, o * width + k, count,
              loadPack(x, o * inner + begin + k, count));
  }
}

// -- Reductions --------------------------------------------------------------

struct Sum {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// `op` over each run of Lanes neighbouring lanes of a warp (every lane
/// gets its run's), over the whole warp by default. Every lane of the warp
/// must call it.
template <int Lanes = 32, typename T, typename Op>
__device__ T warpReduce(T v, Op op) {
  static_assert(Lanes > 0 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0,
                "a power of two of lanes within a warp");
  for (int o = Lanes / 2; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// `op` over the block, `identity` its neutral value (every thread gets the
/// result); `shared` holds 32 values.
template <typename T, typename Op>
__device__ T blockReduce(T v, T *shared, T identity, Op op) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpReduce(v, op);
  __syncthreads(); // `shared` may still be read from the last call
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? shared[threadIdx.x] : identity;
  if (warp == 0)
    v = warpReduce(v, op);
  if (threadIdx.x == 0)
    shared[0] = v;
  __syncthreads();
  return shared[0];
}

template <typename T> __device__ T blockSum(T v, T *shared) {
  return blockReduce(v, shared, T(0), Sum());
}

__device__ float blockMax(float v, float *shared) {
  return blockReduce(v, shared, -INFINITY, Max());
}

// -- Norms -------------------------------------------------------------------
//
// A block per row (forward) or slab of kNormRowsPerBlock rows (backward).
// Thread t owns packs t, t + blockDim, ... (columns 8 t to 8 t + 7, ...)
// of a row, P of them (at most kNormPacks, as the row's width needs:
// registers for more would cost blocks an SM), and keeps the row's x in
// registers from the statistics to the output, so that x is read once;
// but for the backward of rows over kNormBackwardPacks packs a thread,
// which goes column by column (normBackwardColumnsKernel).

constexpr int kNormPacks = kNormColumnsPerThread / kPack;
/// At most this many packs a thread, the backward keeps a row's packs in
/// registers.
constexpr int kNormBackwardPacks = 2;

/// The first column of this thread's pack c of a row.
__device__ __forceinline__ int64_t normColumn(int c) {
  return (threadIdx.x + int64_t(c) * blockDim.x) * kPack;
}

/// This thread's packs of the row at `row0` (zeros past h).
template <int P>
__device__ void loadRow(In x, int64_t row0, int64_t h, Pack (&packs)[P]) {
#pragma unroll
  for (int c = 0; c < P; ++c) {
    int64_t j = normColumn(c);
    packs[c] = loadPack(x, row0 + j, packCount(h - j));
  }
}

/// Mean (0 for RMSNorm) and 1 / sqrt(variance + eps) of a row of h
/// columns: sum() is this thread's part of the row's sum, deviations(mean)
/// its part of the sum of squared deviations from `mean`, and reduce(v)
/// the sum of v over the row's threads.
template <typename RowSum, typename Deviations, typename Reduce>
__device__ void rowStatistics(RowSum sum, Deviations deviations, Reduce reduce,
                              int64_t h, bool rms, double eps, double &mean,
                              double &inv) {
  mean = rms ? 0.0 : reduce(sum()) / h;
  inv = 1.0 / sqrt(reduce(deviations(mean)) / h + eps);
}

/// normColumn, as packStatistics takes it.
struct PackColumn {
  __device__ int64_t operator()(int c) const { return normColumn(c); }
};

/// The sum over the block, for rows a block holds.
struct BlockRowSum {
  double *shared;
  __device__ double operator()(double v) const { return blockSum(v, shared); }
};

/// rowStatistics of a row of which this thread holds the packs xs (zeros
/// past h), pack c starting at column(c).
template <int P, typename Column, typename Reduce>
__device__ void packStatistics(const Pack (&xs)[P], Column column,
                               Reduce reduce, int64_t h, bool rms, double eps,
                               double &mean, double &inv) {
  rowStatistics(
      [&] {
        double s = 0;
#pragma unroll
        for (int c = 0; c < P; ++c)
          EACH_ELEMENT(e) s += xs[c].v[e];
        return s;
      },
      [&](double mean) {
        double s = 0;
#pragma unroll
        for (int c = 0; c < P; ++c) {
          int64_t j = column(c);
          EACH_ELEMENT(e) {
            double d = j + e < h ? xs[c].v[e] - mean : 0.0;
            s += d * d;
          }
        }
        return s;
      },
      reduce, h, rms, eps, mean, inv);
}

template <int P>
__global__ void normKernel(In x, In w, In b, Out y, int64_t h, double eps,
                           bool rms, float offset) {
  PARTITA_SHARED(double, shared, [32]);
  int64_t row0 = blockIdx.x * h;
  Pack xs[P];
  loadRow(x, row0, h, xs);
  double mean, inv;
  packStatistics(xs, PackColumn{}, BlockRowSum{shared}, h, rms, eps, mean, inv);
#pragma unroll
  for (int c = 0; c < P; ++c) {
    int64_t j = normColumn(c);
    int count = packCount(h - j);
    if (count == 0)
      break;
    Pack wj = loadPack(w, j, count), bj{};
    if (b.data)
      bj = loadPack(b, j, count);
    EACH_ELEMENT(e) {
      xs[c].v[e] =
          float((xs[c].v[e] - mean) * inv) * (wj.v[e] + offset) + bj.v[e];
    }
    storePack(y, row0 + j, count, xs[c]);
  }
}

/// dx per row; dw and db summed over the block's rows in registers, then
/// added to sums[0, h) and sums[h, 2h). x stays in registers; dy and w are
/// read again for dx (from L1: a block reads a row at a time), since
/// beside x and the sums they would cost registers 512 threads a block do
/// not have.
template <int P, bool WithBias>
__global__ void __launch_bounds__(kNormThreads)
    normBackwardKernel(In dy, In x, In w, Out dx, int64_t rows, int64_t h,
                       double eps, bool rms, float offset, float *sums) {
  static_assert(P <= kNormBackwardPacks, "wider rows go column by column");
  PARTITA_SHARED(double, shared, [32]);
  Pack dwPart[P] = {}, dbPart[WithBias ? P : 1] = {};
  int64_t begin = blockIdx.x * kNormRowsPerBlock;
  int64_t end = min(rows, begin + kNormRowsPerBlock);
  for (int64_t r = begin; r < end; ++r) {
    int64_t row0 = r * h;
    Pack xs[P];
    loadRow(x, row0, h, xs);
    double mean, inv;
    packStatistics(xs, PackColumn{}, BlockRowSum{shared}, h, rms, eps, mean,
                   inv);
    // Element by element in f32, the row's sums in f64. Past h, dy and w
    // load as zeros, so dxhat and the sums' terms are 0. The two passes
    // below form the terms alike but stay written out: a shared loop over
    // them spilled 24 to 40 bytes with 2 packs and a bias (ptxas).
    float rowMean = float(mean), rowInv = float(inv), dot = 0, sum = 0;
#pragma unroll
    for (int c = 0; c < P; ++c) {
      int64_t j = normColumn(c);
      int count = packCount(h - j);
      Pack g = loadPack(dy, row0 + j, count), wj = loadPack(w, j, count),
           xc = xs[c];
      EACH_ELEMENT(e) {
        float xhat = (xc.v[e] - rowMean) * rowInv,
              dxhat = g.v[e] * (wj.v[e] + offset);
        dot += dxhat * xhat;
        sum += dxhat;
        dwPart[c].v[e] += g.v[e] * xhat;
        if constexpr (WithBias)
          dbPart[c].v[e] += g.v[e];
      }
    }
    float dotMean = float(blockSum(double(dot), shared) / h);
    float sumMean = rms ? 0.0f : float(blockSum(double(sum), shared) / h);
#pragma unroll
    for (int c = 0; c < P; ++c) {
      int64_t j = normColumn(c);
      int count = packCount(h - j);
      Pack g = loadPack(dy, row0 + j, count), wj = loadPack(w, j, count),
           xc = xs[c];
      EACH_ELEMENT(e) {
        float xhat = (xc.v[e] - rowMean) * rowInv,
              dxhat = g.v[e] * (wj.v[e] + offset);
        g.v[e] = rowInv * (dxhat - dotMean * xhat - sumMean);
      }
      storePack(dx, row0 + j, count, g);
    }
  }
#pragma unroll
  for (int c = 0; c < P; ++c) {
    int64_t j = normColumn(c);
    EACH_ELEMENT(e) {
      if (j + e < h) {
        atomicAdd(sums + j + e, dwPart[c].v[e]);
        if constexpr (WithBias)
          atomicAdd(sums + h + j + e, dbPart[c].v[e]);
      }
    }
  }
}

/// normBackwardKernel for rows of more than 2 packs a thread, column by
/// column after the statistics: there, packs beside the dw and db sums
/// spill under the 128 registers 512 threads a block have (ptxas: 64 to
/// 740 bytes for 3 or 4 packs, with x kept or read again).
__global__ void __launch_bounds__(kNormThreads)
    normBackwardColumnsKernel(In dy, In x, In w, Out dx, bool withBias,
                              int64_t rows, int64_t h, double eps, bool rms,
                              float offset, float *sums) {
  PARTITA_SHARED(double, shared, [32]);
  float dwPart[kNormColumnsPerThread], dbPart[kNormColumnsPerThread];
  for (int c = 0; c < kNormColumnsPerThread; ++c)
    dwPart[c] = dbPart[c] = 0;
  int64_t begin = blockIdx.x * kNormRowsPerBlock;
  int64_t end = min(rows, begin + kNormRowsPerBlock);
  for (int64_t r = begin; r < end; ++r) {
    int64_t row0 = r * h;
    double mean, inv;
    rowStatistics(
        [&] {
          double s = 0;
          for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
            s += load(x, row0 + j);
          return s;
        },
        [&](double mean) {
          double s = 0;
          for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
            double d = load(x, row0 + j) - mean;
            s += d * d;
          }
          return s;
        },
        BlockRowSum{shared}, h, rms, eps, mean, inv);
    double dot = 0, sum = 0;
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
      if (j >= h)
        break;
      float g = load(dy, row0 + j);
      double xhat = (load(x, row0 + j) - mean) * inv,
             dxhat = double(g) * (load(w, j) + offset);
      dot += dxhat * xhat;
      sum += dxhat;
      dwPart[c] += float(g * xhat);
      dbPart[c] += g;
    }
    dot = blockSum(dot, shared);
    if (!rms)
      sum = blockSum(sum, shared);
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
      if (j >= h)
        break;
      double xhat = (load(x, row0 + j) - mean) * inv,
             dxhat = double(load(dy, row0 + j)) * (load(w, j) + offset);
      double v = dxhat - dot / h * xhat - (rms ? 0.0 : sum / h);
      store(dx, row0 + j, float(inv * v));
    }
  }
  for (int c = 0; c < kNormColumnsPerThread; ++c) {
    int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
    if (j >= h)
      break;
    atomicAdd(sums + j, dwPart[c]);
    if (withBias)
      atomicAdd(sums + h + j, dbPart[c]);
  }
}

// -- Norms of narrow rows ----------------------------------------------------
//
// Rows of at most kNarrowNormPacks packs (a head's query or key norm): a
// row to each group of G = normRowLanes(h) lanes of a warp, a pack a lane,
// so that a block holds kNarrowNormThreads / G rows and a row's sums are
// shuffles among its lanes. (A block a row left 16 of its 32 lanes idle on
// heads of 128 and synchronised the block for every sum: an H200 ran the
// backward at 6% of a copy's bandwidth.) Every lane of a warp takes part in
// its group's shuffles, past the last row too, with zeros. Registers are
// capped so that 4 blocks an SM run forward (64) and 3 backward (80; with a
// bias, whose sums spill there, 2): on heads of 128 an H200 then ran them
// at 49% and 46% of a copy's bandwidth, against 42% and 38% uncapped.

/// This lane's first column: lane g of its group owns columns 8 g to 8 g + 7.
template <int G> struct LaneColumn {
  __device__ int64_t operator()(int) const {
    return int64_t(threadIdx.x % G) * kPack;
  }
};

/// The sum over a row's G lanes.
template <int G> struct LaneRowSum {
  __device__ double operator()(double v) const {
    return warpReduce<G>(v, Sum());
  }
};

template <int G>
__global__ void __launch_bounds__(kNarrowNormThreads, 4)
    narrowNormKernel(In x, In w, In b, Out y, int64_t rows, int64_t h,
                     double eps, bool rms, float offset) {
  constexpr int kRowsPerBlock = kNarrowNormThreads / G;
  int64_t j = LaneColumn<G>()(0);
  int count = packCount(h - j);
  Pack wj = loadPack(w, j, count), bj{};
  if (b.data)
    bj = loadPack(b, j, count);
  // Bounds the whole block shares, so that no lane leaves its group.
  for (int64_t first = int64_t(blockIdx.x) * kRowsPerBlock; first < rows;
       first += int64_t(gridDim.x) * kRowsPerBlock) {
    int64_t row = first + threadIdx.x / G;
    int rowCount = row < rows ? count : 0;
    Pack xs[1] = {loadPack(x, row * h + j, rowCount)};
    double mean, inv;
    packStatistics(xs, LaneColumn<G>(), LaneRowSum<G>(), h, rms, eps, mean,
                   inv);
    EACH_ELEMENT(e) {
      xs[0].v[e] =
          float((xs[0].v[e] - mean) * inv) * (wj.v[e] + offset) + bj.v[e];
    }
    storePack(y, row * h + j, rowCount, xs[0]);
  }
}

/// dx per row, as normBackwardKernel forms it; each lane group takes
/// kNarrowNormRowsPerGroup rows, summing its columns' dw and db over them
/// in registers, then the block sums its groups' through shared memory and
/// adds them to sums[0, h) and sums[h, 2h).
template <int G, bool WithBias>
__global__ void __launch_bounds__(kNarrowNormThreads, WithBias ? 2 : 3)
    narrowNormBackwardKernel(In dy, In x, In w, Out dx, int64_t rows, int64_t h,
                             double eps, bool rms, float offset, float *sums) {
  constexpr int kGroups = kNarrowNormThreads / G;
  PARTITA_SHARED(float, parts, [WithBias ? 2 : 1][kNarrowNormThreads * kPack]);
  int64_t j = LaneColumn<G>()(0);
  int count = packCount(h - j);
  Pack wj = loadPack(w, j, count), dwPart{}, dbPart{};
  int64_t first = int64_t(blockIdx.x) * kGroups * kNarrowNormRowsPerGroup;
  for (int64_t slot = 0; slot < kNarrowNormRowsPerGroup; ++slot) {
    int64_t row = first + slot * kGroups + threadIdx.x / G;
    int rowCount = row < rows ? count : 0;
    int64_t at = row * h + j;
    Pack xs[1] = {loadPack(x, at, rowCount)}, g = loadPack(dy, at, rowCount);
    double mean, inv;
    packStatistics(xs, LaneColumn<G>(), LaneRowSum<G>(), h, rms, eps, mean,
                   inv);
    // Past h, dy loads as zeros, so the terms are 0.
    float rowMean = float(mean), rowInv = float(inv), dot = 0, sum = 0;
    Pack xhat, dxhat;
    EACH_ELEMENT(e) {
      xhat.v[e] = (xs[0].v[e] - rowMean) * rowInv;
      dxhat.v[e] = g.v[e] * (wj.v[e] + offset);
      dot += dxhat.v[e] * xhat.v[e];
      sum += dxhat.v[e];
    }
    // Not past the last row, where a tiny eps could make xhat 0 * inf.
    if (rowCount > 0) {
      EACH_ELEMENT(e) {
        dwPart.v[e] += g.v[e] * xhat.v[e];
        if constexpr (WithBias)
          dbPart.v[e] += g.v[e];
      }
    }
    float dotMean = float(LaneRowSum<G>()(double(dot)) / h);
    float sumMean = rms ? 0.0f : float(LaneRowSum<G>()(double(sum)) / h);
    EACH_ELEMENT(e) {
      g.v[e] = rowInv * (dxhat.v[e] - dotMean * xhat.v[e] - sumMean);
    }
    storePack(dx, at, rowCount, g);
  }
  // Thread t's pack holds its group's (t / G) sums of columns 8 (t mod G)
  // to 8 (t mod G) + 7.
  EACH_ELEMENT(e) {
    parts[0][threadIdx.x * kPack + e] = dwPart.v[e];
    if constexpr (WithBias)
      parts[1][threadIdx.x * kPack + e] = dbPart.v[e];
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float dw = 0, db = 0;
    for (int group = 0; group < kGroups; ++group) {
      dw += parts[0][group * G * kPack + c];
      if constexpr (WithBias)
        db += parts[1][group * G * kPack + c];
    }
    atomicAdd(sums + c, dw);
    if constexpr (WithBias)
      atomicAdd(sums + h + c, db);
  }
}

// -- Rotary ------------------------------------------------------------------

/// A thread per pack of a row's rotated pairs (columns i and half + i of
/// each head) or of the columns past them, which are copied, in up to
/// kRotaryHeadsPerThread heads.
__global__ void rotaryKernel(In x, Out y, int64_t b, int64_t s, int64_t heads,
                             int64_t d, int64_t rd, const double *invFreq,
                             double magnitude, float sign) {
  int64_t half = rd / 2, rest = d - 2 * half;
  int64_t rotatedPacks = packsOf(half), perRow = rotatedPacks + packsOf(rest);
  int64_t headGroups = rotaryHeadGroups(heads);
  GRID_STRIDE(u, b * s * headGroups * perRow) {
    int64_t p = u % perRow, group = u / perRow % headGroups;
    int64_t row = u / perRow / headGroups, t = row % s;
    int64_t firstHead = group * kRotaryHeadsPerThread;
    int64_t endHead = min(heads, firstHead + kRotaryHeadsPerThread);
    if (p >= rotatedPacks) {
      int64_t i = 2 * half + (p - rotatedPacks) * kPack;
      int count = packCount(d - i);
      for (int64_t h = firstHead; h < endHead; ++h) {
        int64_t at = (row * heads + h) * d + i;
        storePack(y, at, count, loadPack(x, at, count));
      }
      continue;
    }
    int64_t i = p * kPack;
    int count = packCount(half - i);
    float cs[kPack], sn[kPack];
    EACH_ELEMENT(e) {
      double sv = 0, cv = 1;
      if (e < count)
        sincos(double(t) * invFreq[i + e], &sv, &cv);
      cs[e] = float(magnitude * cv);
      sn[e] = sign * float(magnitude * sv);
    }
    for (int64_t h = firstHead; h < endHead; ++h) {
      int64_t at = (row * heads + h) * d + i;
      Pack x1 = loadPack(x, at, count), x2 = loadPack(x, at + half, count);
      EACH_ELEMENT(e) {
        float a = x1.v[e];
        x1.v[e] = a * cs[e] - x2.v[e] * sn[e];
        x2.v[e] = x2.v[e] * cs[e] + a * sn[e];
      }
      storePack(y, at, count, x1);
      storePack(y, at + half, count, x2);
    }
  }
}

// -- Embedding ---------------------------------------------------------------

/// A thread per pack of a token's row.
__global__ void embeddingKernel(In table, const int32_t *tokens, int64_t count,
                                int64_t rows, int64_t h, int64_t start,
                                float scale, Out y) {
  int64_t packsPerRow = packsOf(h);
  GRID_STRIDE(u, count * packsPerRow) {
    int64_t t = u / packsPerRow, j = u % packsPerRow * kPack;
    int64_t local = int64_t(tokens[t]) - start;
    int n = packCount(h - j);
    Pack p{};
    if (local >= 0 && local < rows)
      p = loadPack(table, local * h + j, n);
    EACH_ELEMENT(e) p.v[e] *= scale;
    storePack(y, t * h + j, n, p);
  }
}

/// The sort keys of the embedding backward: a token's row of this rank's
/// table, or `rows` for a token another rank holds; the values are the
/// tokens' positions.
__global__ void tokenKeysKernel(const int32_t *tokens, int64_t count,
                                int64_t rows, int64_t start, uint32_t *keys,
                                uint32_t *positions) {
  GRID_STRIDE(t, count) {
    int64_t local = int64_t(tokens[t]) - start;
    keys[t] = uint32_t(local >= 0 && local < rows ? local : rows);
    positions[t] = uint32_t(t);
  }
}

/// A block per run of equal sorted keys and slice of blockDim.x packs of
/// columns (blockIdx.y): the run's dy rows summed, in token order, into
/// that row of dtable.
__global__ void embeddingBackwardKernel(In dy, const uint32_t *keys,
                                        const uint32_t *positions,
                                        int64_t count, int64_t rows, int64_t h,
                                        float scale, Out dtable) {
  int64_t j = (blockIdx.y * int64_t(blockDim.x) + threadIdx.x) * kPack;
  if (j >= h)
    return;
  int n = packCount(h - j);
  for (int64_t first = blockIdx.x; first < count; first += gridDim.x) {
    uint32_t key = keys[first];
    if (key >= rows || (first > 0 && keys[first - 1] == key))
      continue;
    Pack s{};
    for (int64_t p = first; p < count && keys[p] == key; ++p) {
      Pack g = loadPack(dy, int64_t(positions[p]) * h + j, n);
      EACH_ELEMENT(e) s.v[e] += scale * g.v[e];
    }
    storePack(dtable, int64_t(key) * h + j, n, s);
  }
}

// -- Attention ---------------------------------------------------------------
//
// Flash-style on CUDA cores, f32 arithmetic: rowLanes<D>() neighbouring
// lanes of a warp share a query row (forward, dq) or key row (dk, dv), each
// holding kColumnsPerLane of its columns in registers, and sum the row's dot
// products by shuffles. The other side streams through shared memory in
// tiles and the softmax statistics are kept online, so memory is O(s) per
// row. Every thread takes every key (or query) of a tile, masked or not,
// so that the shuffles find their whole warp.

/// Loads rows [first, first + T) of a [*, stride]-strided tensor starting
/// at element `base` of x into `tile` (as f32).
template <int D, int T>
__device__ void loadTile(float (*tile)[D], In x, int64_t base, int64_t first,
                         int64_t limit, int64_t stride, int64_t d) {
  for (int e = threadIdx.x; e < T * D; e += blockDim.x) {
    int r = e / D, k = e % D;
    int64_t row = first + r;
    tile[r][k] = row < limit && k < d ? load(x, base + row * stride + k) : 0.0f;
  }
}

/// The row a thread works on, and which of its columns the thread holds:
/// lane, lane + lanes, ... (neighbouring lanes read neighbouring words of a
/// shared tile's row).
template <int D> struct RowSlice {
  static constexpr int lanes = rowLanes<D>(), rows = attentionRowsPerBlock<D>();
  int lane = int(threadIdx.x) % lanes;
  int64_t first = int64_t(blockIdx.x) * rows;
  int64_t row = first + int64_t(threadIdx.x) / lanes;
  __device__ int column(int k) const { return lane + lanes * k; }
  /// Element `base` + column of x for each held column (zero past d or
  /// when !valid), times `scale`.
  __device__ void gather(float *to, In x, int64_t base, bool valid, int64_t d,
                         float scale = 1.0f) const {
    for (int k = 0; k < kColumnsPerLane; ++k)
      to[k] = valid && column(k) < d ? load(x, base + column(k)) * scale : 0.0f;
  }
  /// The row's x . y, x held by the row's lanes and y a whole shared row
  /// (every lane of the row gets it).
  __device__ float dot(const float *x, const float *y) const {
    float sum = 0;
    for (int k = 0; k < kColumnsPerLane; ++k)
      sum += x[k] * y[column(k)];
    return warpReduce<lanes>(sum, Sum());
  }
};

/// Streams keys and values [jBegin, jEnd) (of the head at element `kvBase`)
/// through the block's shared tiles and calls visit(key, key row, value
/// row) for each of them. Every thread of the block must call it (it
/// synchronises the block).
template <int D, typename Visit>
__device__ void forEachKey(const AttentionDims &a, In k, In v, int64_t kvBase,
                           int64_t jBegin, int64_t jEnd, float (*kTile)[D],
                           float (*vTile)[D], Visit visit) {
  constexpr int T = keyTile<D>();
  int64_t stride = a.kvHeads * a.d;
  for (int64_t j0 = jBegin; j0 < jEnd; j0 += T) {
    __syncthreads();
    loadTile<D, T>(kTile, k, kvBase, j0, jEnd, stride, a.d);
    loadTile<D, T>(vTile, v, kvBase, j0, jEnd, stride, a.d);
    __syncthreads();
    for (int jj = 0; jj < T && j0 + jj < jEnd; ++jj)
      visit(j0 + jj, kTile[jj], vTile[jj]);
  }
}

/// One query row (its held columns q) against keys [jBegin, jEnd): the
/// running max m, the denominator l and, WithOutput, the held columns of
/// the unnormalised output o.
template <int D, bool WithOutput>
__device__ void
attendRow(const AttentionDims &a, const RowSlice<D> &r, const float *q,
          bool valid, In k, In v, int64_t kvBase, int64_t jBegin, int64_t jEnd,
          float (*kTile)[D], float (*vTile)[D], float &m, float &l, float *o) {
  m = -INFINITY;
  l = 0;
  for (int c = 0; c < kColumnsPerLane; ++c)
    o[c] = 0;
  forEachKey<D>(a, k, v, kvBase, jBegin, jEnd, kTile, vTile,
                [&](int64_t j, const float *kRow, const float *vRow) {
                  float score = r.dot(q, kRow);
                  if (!valid || a.masked(r.row, j))
                    return;
                  float mNew = fmaxf(m, score);
                  float correction = expf(m - mNew), p = expf(score - mNew);
                  l = l * correction + p;
                  if constexpr (WithOutput)
                    for (int c = 0; c < kColumnsPerLane; ++c)
                      o[c] = o[c] * correction + p * vRow[r.column(c)];
                  m = mNew;
                });
}

/// o = softmax(q k^T scale) v (WithOutput), and each row's log-sum-exp
/// into `lse` unless it is null.
template <int D, bool WithOutput>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionKernel(AttentionDims a, In q, In k, In v, Out o, float *lse) {
  constexpr int T = keyTile<D>();
  PARTITA_SHARED(float, kTile, [T][D]);
  PARTITA_SHARED(float, vTile, [T][D]);
  RowSlice<D> r;
  int64_t bb = blockIdx.z, hh = blockIdx.y, kh = hh / (a.heads / a.kvHeads);
  bool valid = r.row < a.s;
  int64_t at = valid ? a.qOffset(bb, r.row, hh) : 0;
  float qr[kColumnsPerLane], out[kColumnsPerLane], m, l;
  r.gather(qr, q, at, valid, a.d, a.scale);
  int64_t jBegin, jEnd;
  a.keyRange(r.first, min(a.s - 1, r.first + r.rows - 1), jBegin, jEnd);
  attendRow<D, WithOutput>(a, r, qr, valid, k, v, a.kOffset(bb, 0, kh), jBegin,
                           jEnd, kTile, vTile, m, l, out);
  if (!valid)
    return;
  if (lse && r.lane == 0)
    lse[a.statsRow(bb, hh, r.row)] = m + logf(l);
  if constexpr (WithOutput)
    for (int c = 0; c < kColumnsPerLane; ++c)
      if (r.column(c) < a.d)
        store(o, at + r.column(c), out[c] / l);
}

/// D = dO . O of every query row, a warp a row, into rowDot.
__global__ void rowDotKernel(AttentionDims a, In dout, In o, float *rowDot) {
  int64_t rows = a.b * a.s * a.heads;
  int lane = int(threadIdx.x) % 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < rows; row += int64_t(gridDim.x) * blockDim.x / 32) {
    float sum = 0;
    for (int64_t c = lane; c < a.d; c += 32)
      sum += load(dout, row * a.d + c) * load(o, row * a.d + c);
    sum = warpReduce<32>(sum, Sum());
    // row = (bb s + i) heads + hh, as the tensors lay their heads out.
    int64_t hh = row % a.heads, i = row / a.heads % a.s,
            bb = row / (a.heads * a.s);
    if (lane == 0)
      rowDot[a.statsRow(bb, hh, i)] = sum;
  }
}

/// dq of each query row, from its log-sum-exp and D = dO . O.
template <int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionBackwardQueryKernel(AttentionDims a, In dout, In q, In k, In v,
                                 Out dq, const float *lse,
                                 const float *rowDot) {
  constexpr int T = keyTile<D>();
  PARTITA_SHARED(float, kTile, [T][D]);
  PARTITA_SHARED(float, vTile, [T][D]);
  RowSlice<D> r;
  int64_t bb = blockIdx.z, hh = blockIdx.y, kh = hh / (a.heads / a.kvHeads);
  int64_t i = r.row;
  bool valid = i < a.s;
  int64_t at = valid ? a.qOffset(bb, i, hh) : 0;
  float qr[kColumnsPerLane], dor[kColumnsPerLane], acc[kColumnsPerLane] = {};
  r.gather(qr, q, at, valid, a.d, a.scale);
  r.gather(dor, dout, at, valid, a.d);
  int64_t jBegin, jEnd;
  a.keyRange(r.first, min(a.s - 1, r.first + r.rows - 1), jBegin, jEnd);
  int64_t row = valid ? a.statsRow(bb, hh, i) : 0;
  float rowLse = valid ? lse[row] : 0.0f, rowD = valid ? rowDot[row] : 0.0f;
  // dq = scale * sum_j p_ij (dO_i . v_j - D_i) k_j.
  forEachKey<D>(a, k, v, a.kOffset(bb, 0, kh), jBegin, jEnd, kTile, vTile,
                [&](int64_t j, const float *kRow, const float *vRow) {
                  float score = r.dot(qr, kRow), dp = r.dot(dor, vRow);
                  if (!valid || a.masked(i, j))
                    return;
                  float ds = expf(score - rowLse) * (dp - rowD);
                  for (int c = 0; c < kColumnsPerLane; ++c)
                    acc[c] += ds * kRow[r.column(c)];
                });
  if (!valid)
    return;
  for (int c = 0; c < kColumnsPerLane; ++c)
    if (r.column(c) < a.d)
      store(dq, at + r.column(c), acc[c] * a.scale);
}

/// Per key row of a kv head: dk and dv over every query row of the heads
/// that share it.
template <int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionBackwardKeyKernel(AttentionDims a, In dout, In q, In k, In v,
                               Out dk, Out dv, const float *lse,
                               const float *rowDot) {
  constexpr int T = keyTile<D>();
  PARTITA_SHARED(float, qTile, [T][D]);
  PARTITA_SHARED(float, doTile, [T][D]);
  PARTITA_SHARED(float, lseTile, [T]);
  PARTITA_SHARED(float, dTile, [T]);
  RowSlice<D> r;
  int64_t bb = blockIdx.z, kh = blockIdx.y, group = a.heads / a.kvHeads;
  int64_t j = r.row, last = min(a.s - 1, r.first + r.rows - 1);
  bool valid = j < a.s;
  int64_t at = valid ? a.kOffset(bb, j, kh) : 0;
  float kr[kColumnsPerLane], vr[kColumnsPerLane], dkAcc[kColumnsPerLane] = {},
                                                  dvAcc[kColumnsPerLane] = {};
  r.gather(kr, k, at, valid, a.d);
  r.gather(vr, v, at, valid, a.d);
  int64_t iBegin, iEnd;
  a.queryRange(r.first, last, iBegin, iEnd);
  int64_t stride = a.heads * a.d;
  for (int64_t hh = kh * group; hh < (kh + 1) * group; ++hh) {
    int64_t qBase = a.qOffset(bb, 0, hh), statsBase = a.statsRow(bb, hh, 0);
    for (int64_t i0 = iBegin; i0 < iEnd; i0 += T) {
      __syncthreads();
      loadTile<D, T>(qTile, q, qBase, i0, iEnd, stride, a.d);
      loadTile<D, T>(doTile, dout, qBase, i0, iEnd, stride, a.d);
      for (int t = threadIdx.x; t < T; t += blockDim.x) {
        bool in = i0 + t < iEnd;
        lseTile[t] = in ? lse[statsBase + i0 + t] : 0.0f;
        dTile[t] = in ? rowDot[statsBase + i0 + t] : 0.0f;
      }
      __syncthreads();
      for (int ii = 0; ii < T && i0 + ii < iEnd; ++ii) {
        float score = r.dot(kr, qTile[ii]), dp = r.dot(vr, doTile[ii]);
        if (!valid || a.masked(i0 + ii, j))
          continue;
        float p = expf(score * a.scale - lseTile[ii]);
        float ds = p * (dp - dTile[ii]) * a.scale;
        for (int c = 0; c < kColumnsPerLane; ++c) {
          dvAcc[c] += p * doTile[ii][r.column(c)];
          dkAcc[c] += ds * qTile[ii][r.column(c)];
        }
      }
    }
  }
  if (!valid)
    return;
  for (int c = 0; c < kColumnsPerLane; ++c)
    if (r.column(c) < a.d) {
      store(dk, at + r.column(c), dkAcc[c]);
      store(dv, at + r.column(c), dvAcc[c]);
    }
}

template <int D>
void launchAttention(const AttentionDims &a, In q, In k, In v, Out o,
                     float *lse, cudaStream_t stream) {
  dim3 grid(attentionRowBlocks<D>(a.s), unsigned(a.heads), unsigned(a.b));
  if (o.data)
    launchKernel(attentionKernel<D, true>, grid, kAttentionThreads, 0, stream,
                 a, q, k, v, o, lse);
  else
    launchKernel(attentionKernel<D, false>, grid, kAttentionThreads, 0, stream,
                 a, q, k, v, o, lse);
}

template <int D>
void launchAttentionBackward(const AttentionDims &a, In dout, In q, In k, In v,
                             const float *lse, const float *rowDot, Out dq,
                             Out dk, Out dv, cudaStream_t stream) {
  unsigned tiles = attentionRowBlocks<D>(a.s);
  launchKernel(attentionBackwardQueryKernel<D>,
               dim3(tiles, unsigned(a.heads), unsigned(a.b)), kAttentionThreads,
               0, stream, a, dout, q, k, v, dq, lse, rowDot);
  launchKernel(attentionBackwardKeyKernel<D>,
               dim3(tiles, unsigned(a.kvHeads), unsigned(a.b)),
               kAttentionThreads, 0, stream, a, dout, q, k, v, dk, dv, lse,
               rowDot);
}

// -- Cross-entropy -----------------------------------------------------------

/// Columns of a cross-entropy row within the vocabulary (past them, the
/// last rank's part of the table is padding).
__device__ int64_t ceValidColumns(const CrossEntropyShape &c) {
  return min(c.v, c.vocabSize - c.start);
}

__global__ void ceMaxKernel(CrossEntropyShape c, In logits, Out max) {
  PARTITA_SHARED(float, shared, [32]);
  int64_t r = blockIdx.x;
  float m = -INFINITY;
  forEachRowPack(ceValidColumns(c), [&](int64_t j, int count) {
    Pack p = loadPack(logits, r * c.v + j, count);
    EACH_ELEMENT(e) {
      if (e < count)
        m = fmaxf(m, p.v[e]);
    }
  });
  m = blockMax(m, shared);
  if (threadIdx.x == 0)
    store(max, r, m);
}

__global__ void ceStatsKernel(CrossEntropyShape c, In logits, In max,
                              const int32_t *labels, Out stats) {
  PARTITA_SHARED(double, shared, [32]);
  int64_t r = blockIdx.x;
  // exp in f32, as the backward takes it, each pack's terms summed in f32
  // and the packs' sums in f64: an f64 exp takes more f64 instructions
  // than an H200 issues in the time an element's 2 bytes take (about 7).
  float rowMax = load(max, r);
  double s = 0;
  forEachRowPack(ceValidColumns(c), [&](int64_t j, int count) {
    Pack p = loadPack(logits, r * c.v + j, count);
    float packSum = 0;
    EACH_ELEMENT(e) {
      if (e < count)
        packSum += expf(p.v[e] - rowMax);
    }
    s += packSum;
  });
  s = blockSum(s, shared);
  if (threadIdx.x == 0) {
    int64_t local = int64_t(labels[r]) - c.start;
    store(stats, 2 * r, float(s));
    store(stats, 2 * r + 1,
          local >= 0 && local < c.v ? load(logits, r * c.v + local) : 0.0f);
  }
}

__global__ void __launch_bounds__(1024)
    ceLossKernel(In max, In stats, int64_t rows, double scale, Out loss) {
  PARTITA_SHARED(double, shared, [32]);
  double s = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    s +=
        log(double(load(stats, 2 * r))) + load(max, r) - load(stats, 2 * r + 1);
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    store(loss, 0, float(scale * s));
}

/// A block per row (grid-stride): the row's maximum, sum and label are
/// read once, its logits a pack a thread.
__global__ void ceBackwardKernel(CrossEntropyShape c, In logits, In max,
                                 In stats, const int32_t *labels, float scale,
                                 Out dlogits) {
  int64_t valid = ceValidColumns(c);
  for (int64_t r = blockIdx.x; r < c.rows; r += gridDim.x) {
    float rowMax = load(max, r), sum = load(stats, 2 * r);
    int64_t row0 = r * c.v, label = int64_t(labels[r]) - c.start;
    forEachRowPack(c.v, [&](int64_t j, int count) {
      Pack p = loadPack(logits, row0 + j, count);
      EACH_ELEMENT(e) {
        p.v[e] = j + e < valid ? scale * expf(p.v[e] - rowMax) / sum : 0.0f;
        if (j + e == label)
          p.v[e] -= scale;
      }
      storePack(dlogits, row0 + j, count, p);
    });
  }
}

// -- Optimizer ---------------------------------------------------------------

/// visit(tensor, t) for each of this thread's packs of the joined index
/// space, in which each tensor takes its length in packs (packsOf), so that
/// a pack lies within one tensor: elements [t, t + kPack) of it. A
/// thread's packs only move forward, so its tensor is found by stepping on.
template <typename T, int K, typename Visit>
__device__ void forEachTensorPack(const TensorList<T, K> &list, Visit visit) {
  int k = 0;
  int64_t start = 0;
  GRID_STRIDE(i, list.end[list.count - 1]) {
    while (i >= list.end[k]) {
      start = list.end[k];
      ++k;
    }
    visit(list.tensors[k], (i - start) * kPack);
  }
}

constexpr int kSquaresPerLaunch = 64, kAdamWPerLaunch = 16;
using SquaresList = TensorList<SquaresTerm, kSquaresPerLaunch>;
using AdamWList = TensorList<AdamWTensor, kAdamWPerLaunch>;
static_assert(sizeof(SquaresList) + sizeof(double *) <= 4096 &&
                  sizeof(AdamWList) + sizeof(AdamWStep) <= 4096,
              "kernel parameters past 4 KiB need a newer driver");

// __grid_constant__: the list is read where the parameters are, not copied
// per thread.
__global__ void sumSquaresKernel(const __grid_constant__ SquaresList list,
                                 double *acc64) {
  PARTITA_SHARED(double, shared, [32]);
  double s = 0;
  forEachTensorPack(list, [&](const SquaresTerm &term, int64_t t) {
    Pack x = loadPack(term.x, t, packCount(term.n - t));
    EACH_ELEMENT(e) s += term.weight * double(x.v[e]) * x.v[e];
  });
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    atomicAdd(acc64, s);
}

__global__ void storeScalarKernel(const double *acc64, Out out) {
  store(out, 0, float(*acc64));
}

__global__ void clipCoefficientKernel(In sumsq, double clip, Out out) {
  double norm = sqrt(double(load(sumsq, 0)));
  store(out, 0, clip == 0 ? 1.0f : float(fmin(1.0, clip / (norm + 1e-6))));
}

__global__ void adamwKernel(AdamWStep s,
                            const __grid_constant__ AdamWList list) {
  forEachTensorPack(list, [&](const AdamWTensor &a, int64_t t) {
    bool master = a.w.data != nullptr;
    // The pack's elements in this rank's slice, and of those the ones
    // before the last shard's padding, at `at` in the parameter.
    int sliced = packCount(a.chunk - t);
    int64_t at = a.begin + t;
    int unpadded = min(sliced, packCount(a.pn - at));
    if (sliced > 0) {
      float clip = load(a.clip, 0);
      Pack g = loadPack(a.g, t, sliced), m = loadPack(a.m, t, sliced),
           v = loadPack(a.v, t, sliced);
      // Below f32 the update applies to the master copy w; the padding's
      // master elements keep their value.
      Pack w = master ? loadPack(a.w, t, sliced) : loadPack(a.p, at, unpadded);
      EACH_ELEMENT(e) {
        double gi = double(g.v[e]) * clip;
        double mi = s.beta1 * m.v[e] + (1 - s.beta1) * gi;
        double vi = s.beta2 * v.v[e] + (1 - s.beta2) * gi * gi;
        m.v[e] = float(mi);
        v.v[e] = float(vi);
        double pi = w.v[e];
        if (a.decay)
          pi *= 1 - s.lr * s.weightDecay;
        pi -= s.lr * (mi / s.c1) / (sqrt(vi / s.c2) + s.eps);
        if (e < unpadded)
          w.v[e] = float(pi);
      }
      storePack(a.nm, t, sliced, m);
      storePack(a.nv, t, sliced, v);
      storePack(a.np, at, unpadded, w);
      if (master)
        storePack(a.nw, t, sliced, w);
    }
    // Elements outside this rank's slice keep their value: copied unless
    // the update is in place, as plans make it.
    if (a.np.data != a.p.data) {
      EACH_ELEMENT(e) {
        int64_t u = t + e;
        if (u < a.pn && (u < a.begin || u >= a.begin + a.chunk))
          store(a.np, u, load(a.p, u));
      }
    }
  });
}

} // namespace

void unary(Unary f, In x, Out y, int64_t n, cudaStream_t stream) {
  launchKernel(unaryKernel, blocksForPacks(n), kThreads, 0, stream, f, x, y, n);
}

void unaryBackward(Unary f, In dy, In x, Out dx, int64_t n,
                   cudaStream_t stream) {
  launchKernel(unaryBackwardKernel, blocksForPacks(n), kThreads, 0, stream, f,
               dy, x, dx, n);
}

void gated(Unary f, In gate, In up, Out y, int64_t n, cudaStream_t stream) {
  launchKernel(gatedKernel, blocksForPacks(n), kThreads, 0, stream, f, gate, up,
               y, n);
}

void gatedBackward(Unary f, In dy, In gate, In up, Out dgate, Out dup,
                   int64_t n, cudaStream_t stream) {
  launchKernel(gatedBackwardKernel, blocksForPacks(n), kThreads, 0, stream, f,
               dy, gate, up, dgate, dup, n);
}

void sum(const In *xs, int count, Out y, int64_t n, cudaStream_t stream) {
  Inputs in{};
  in.count = std::min(count, kMaxSumInputs);
  for (int k = 0; k < in.count; ++k)
    in.x[k] = xs[k];
  launchKernel(sumKernel, blocksForPacks(n), kThreads, 0, stream, in, y, n);
}

void addPeriodic(In x, In bias, int64_t period, Out y, int64_t n,
                 cudaStream_t stream) {
  launchKernel(addPeriodicKernel, blocksForPacks(n), kThreads, 0, stream, x,
               bias, period, y, n);
}

void sumPeriodic(In x, int64_t period, int64_t n, Out out, int64_t outCount,
                 float *workspace, cudaStream_t stream) {
  cudaMemsetAsync(workspace, 0, period * sizeof(float), stream);
  // At least 256 rows a slab, and at most 65535 slabs (gridDim.y).
  int64_t rows = n / period;
  int64_t rowsPerSlab = std::max<int64_t>(256, (rows + 65534) / 65535);
  dim3 grid(unsigned((packsOf(period) + kThreads - 1) / kThreads),
            unsigned((rows + rowsPerSlab - 1) / rowsPerSlab));
  if (rows > 0)
    launchKernel(sumPeriodicKernel, grid, kThreads, 0, stream, x, period, rows,
                 rowsPerSlab, workspace);
  launchKernel(storeSumsKernel, blocksFor(outCount), kThreads, 0, stream,
               workspace, period, out, outCount);
}

void transposeBlocks(In src, Out dst, int64_t a, int64_t b, int64_t inner,
                     cudaStream_t stream) {
  int64_t n = a * b * inner;
  if (n == 0)
    return;
  if ((a == 1 || b == 1) && !dst.acc && src.bf16 == dst.bf16) {
    if (dst.data != src.data)
      cudaMemcpyAsync(dst.data, src.data, n * elementBytes(src.bf16),
                      cudaMemcpyDeviceToDevice, stream);
    return;
  }
  launchKernel(transposeBlocksKernel, blocksFor(a * b * packsOf(inner)),
               kThreads, 0, stream, src, dst, a, b, inner);
}

void sliceColumns(In x, int64_t outer, int64_t inner, int64_t begin,
                  int64_t width, Out y, cudaStream_t stream) {
  launchKernel(sliceColumnsKernel, blocksFor(outer * packsOf(width)), kThreads,
               0, stream, x, outer, inner, begin, width, y);
}

int64_t maxNormWidth() { return kMaxNormWidth; }

/// f(std::integral_constant<int, C>()) for C the one of Choices that is
/// `value`, which must be one of them: a kernel's template argument from a
/// launch's shape.
template <int... Choices, typename F> void withConstant(int value, F f) {
  bool found = ((value == Choices &&
                 (f(std::integral_constant<int, Choices>()), true)) ||
                ...);
  if (!found)
    throw std::logic_error("no kernel for " + std::to_string(value));
}

/// f(std::integral_constant<int, P>) for P, the packs a thread of the
/// norm kernels takes of a row of h columns on `threads` threads.
template <typename F> void byRowPacks(int64_t h, int threads, F f) {
  static_assert(kNormPacks == 4, "a choice per pack count");
  int64_t packs = (packsOf(h) + threads - 1) / threads;
  withConstant<1, 2, 3, 4>(int(std::min<int64_t>(packs, kNormPacks)), f);
}

/// f(std::integral_constant<int, G>()) for the lanes a narrow row takes.
template <typename F> void byRowLanes(int lanes, F f) {
  static_assert(kNarrowNormPacks == 32, "a choice per power of two");
  withConstant<1, 2, 4, 8, 16, 32>(lanes, f);
}

void norm(In x, In w, In b, Out y, int64_t rows, int64_t h, double eps,
          bool rms, float weightOffset, cudaStream_t stream) {
  if (rows == 0 || h == 0)
    return;
  if (int lanes = normRowLanes(h)) {
    int64_t perBlock = kNarrowNormThreads / lanes;
    byRowLanes(lanes, [&](auto G) {
      launchKernel(narrowNormKernel<decltype(G)::value>,
                   blocksFor(rows, int(perBlock)), kNarrowNormThreads, 0,
                   stream, x, w, b, y, rows, h, eps, rms, weightOffset);
    });
    return;
  }
  int threads = normThreads(h);
  auto launch = [&](auto kernel) {
    launchKernel(kernel, unsigned(rows), threads, 0, stream, x, w, b, y, h, eps,
                 rms, weightOffset);
  };
  byRowPacks(h, threads,
             [&](auto P) { launch(normKernel<decltype(P)::value>); });
}

void normBackward(In dy, In x, In w, Out dx, Out dw, Out db, int64_t rows,
                  int64_t h, double eps, bool rms, float weightOffset,
                  float *workspace, cudaStream_t stream) {
  bool withBias = db.data != nullptr;
  cudaMemsetAsync(workspace, 0, normBackwardWorkspace(h) * sizeof(float),
                  stream);
  int lanes = h > 0 ? normRowLanes(h) : 0;
  if (rows > 0 && lanes) {
    int64_t perBlock = kNarrowNormThreads / lanes * kNarrowNormRowsPerGroup;
    byRowLanes(lanes, [&](auto G) {
      constexpr int kLanes = decltype(G)::value;
      launchKernel(withBias ? narrowNormBackwardKernel<kLanes, true>
                            : narrowNormBackwardKernel<kLanes, false>,
                   unsigned((rows + perBlock - 1) / perBlock),
                   kNarrowNormThreads, 0, stream, dy, x, w, dx, rows, h, eps,
                   rms, weightOffset, workspace);
    });
  } else if (rows > 0 && h > 0) {
    unsigned blocks =
        unsigned((rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock);
    int threads = normThreads(h);
    int64_t packs = (packsOf(h) + threads - 1) / threads;
    static_assert(kNormBackwardPacks == 2, "a kernel per pack count");
    if (packs > kNormBackwardPacks) {
      launchKernel(normBackwardColumnsKernel, blocks, kNormThreads, 0, stream,
                   dy, x, w, dx, withBias, rows, h, eps, rms, weightOffset,
                   workspace);
    } else {
      auto kernel = packs == 1 ? withBias ? normBackwardKernel<1, true>
                                          : normBackwardKernel<1, false>
                    : withBias ? normBackwardKernel<2, true>
                               : normBackwardKernel<2, false>;
      launchKernel(kernel, blocks, threads, 0, stream, dy, x, w, dx, rows, h,
                   eps, rms, weightOffset, workspace);
    }
  }
  launchKernel(storeSumsKernel, blocksFor(h), kThreads, 0, stream, workspace, h,
               dw, h);
  if (withBias)
    launchKernel(storeSumsKernel, blocksFor(h), kThreads, 0, stream,
                 workspace + h, h, db, h);
}

void rotary(In x, Out y, int64_t b, int64_t s, int64_t heads, int64_t d,
            int64_t rd, const double *invFreq, double magnitude, float sign,
            cudaStream_t stream) {
  int64_t half = rd / 2;
  int64_t threads =
      b * s * rotaryHeadGroups(heads) * (packsOf(half) + packsOf(d - 2 * half));
  launchKernel(rotaryKernel, blocksFor(threads), kThreads, 0, stream, x, y, b,
               s, heads, d, rd, invFreq, magnitude, sign);
}

void embedding(In table, const int32_t *tokens, int64_t count, int64_t rows,
               int64_t h, int64_t start, float scale, Out y,
               cudaStream_t stream) {
  launchKernel(embeddingKernel, blocksFor(count * packsOf(h)), kThreads, 0,
               stream, table, tokens, count, rows, h, start, scale, y);
}

namespace {

/// The embedding backward's workspace: keys and positions before and after
/// the sort, then the sort's own scratch, each 256-byte aligned.
struct EmbeddingWorkspace {
  uint32_t *keys[2], *positions[2];
  void *sortScratch;
  size_t sortBytes;
};

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// The key bits of the embedding backward's sort: keys run up to `rows`
/// (other ranks' tokens), and only those bits are sorted.
int sortBits(int64_t rows) {
  int bits = 1;
  while (bits < 32 && (int64_t(1) << bits) <= rows)
    ++bits;
  return bits;
}

size_t sortScratchBytes(int64_t count, int64_t rows) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), count, 0, sortBits(rows));
  return bytes;
}

EmbeddingWorkspace embeddingWorkspace(void *base, int64_t count, int64_t rows) {
  EmbeddingWorkspace w;
  char *at = static_cast<char *>(base);
  for (uint32_t **array :
       {&w.keys[0], &w.keys[1], &w.positions[0], &w.positions[1]}) {
    *array = reinterpret_cast<uint32_t *>(at);
    at += aligned(count * int64_t(sizeof(uint32_t)));
  }
  w.sortScratch = at;
  w.sortBytes = sortScratchBytes(count, rows);
  return w;
}

} // namespace

int64_t embeddingBackwardWorkspace(int64_t count, int64_t rows) {
  return 4 * aligned(count * int64_t(sizeof(uint32_t))) +
         int64_t(sortScratchBytes(count, rows));
}

void embeddingBackward(In dy, const int32_t *tokens, int64_t count,
                       int64_t rows, int64_t h, int64_t start, float scale,
                       Out dtable, void *workspace, cudaStream_t stream) {
  if (!dtable.acc)
    cudaMemsetAsync(dtable.data, 0, rows * h * elementBytes(dtable.bf16),
                    stream);
  dtable.acc = true;
  if (count == 0)
    return;
  EmbeddingWorkspace w = embeddingWorkspace(workspace, count, rows);
  launchKernel(tokenKeysKernel, blocksFor(count), kThreads, 0, stream, tokens,
               count, rows, start, w.keys[0], w.positions[0]);
  // The sort is stable, so each run of a key keeps token order.
  cudaError_t sorted = cub::DeviceRadixSort::SortPairs(
      w.sortScratch, w.sortBytes, w.keys[0], w.keys[1], w.positions[0],
      w.positions[1], count, 0, sortBits(rows), stream);
  if (sorted != cudaSuccess)
    throw std::runtime_error(std::string("sorting the embedding's tokens: ") +
                             cudaGetErrorString(sorted));
  dim3 blocks(unsigned(std::min<int64_t>(count, kMaxBlocks)),
              unsigned((packsOf(h) + kThreads - 1) / kThreads));
  launchKernel(embeddingBackwardKernel, blocks, kThreads, 0, stream, dy,
               w.keys[1], w.positions[1], count, rows, h, scale, dtable);
}

int64_t maxHeadDim() { return kMaxHeadDim; }

void attention(const AttentionShape &s, In q, In k, In v, Out o, float *lse,
               cudaStream_t stream) {
  if (attentionOnTensorCores(s, q, k, v))
    return tensorCoreAttention(s, q, k, v, o, lse, stream);
  byHeadDimBucket(s.d, [&](auto D) {
    launchAttention<decltype(D)::value>(attentionDims(s), q, k, v, o, lse,
                                        stream);
  });
}

namespace {

bool backwardOnTensorCores(const AttentionShape &s, In dout, In q, In k, In v) {
  return dout.bf16 && attentionOnTensorCores(s, q, k, v);
}

/// Floats of the backward's row statistics: D, and the log-sum-exp where
/// the forward kept none.
int64_t rowStatistics(const AttentionShape &s, bool lseKept) {
  return (lseKept ? 1 : 2) * s.b * s.heads * s.s;
}

/// Where dq's f32 sums start in attentionBackward's workspace, past the
/// row statistics (16-byte aligned); -1 where the backward takes none.
int64_t queryGradientSums(const AttentionShape &s, In dout, In q, In k, In v,
                          bool lseKept) {
  if (ownAttentionKernels() != AttentionKernels::RegistersSummedDq ||
      !backwardOnTensorCores(s, dout, q, k, v))
    return -1;
  return (rowStatistics(s, lseKept) + 3) / 4 * 4;
}

} // namespace

int64_t attentionBackwardWorkspace(const AttentionShape &s, In dout, In q, In k,
                                   In v, bool lseKept) {
  int64_t sums = queryGradientSums(s, dout, q, k, v, lseKept);
  return sums < 0 ? rowStatistics(s, lseKept)
                  : sums + s.b * s.s * s.heads * s.d;
}

void attentionBackward(const AttentionShape &s, In dout, In q, In k, In v, In o,
                       const float *lse, Out dq, Out dk, Out dv,
                       float *workspace, cudaStream_t stream) {
  AttentionDims a = attentionDims(s);
  int64_t rows = s.b * s.heads * s.s;
  int64_t sums = queryGradientSums(s, dout, q, k, v, lse != nullptr);
  float *rowDot = workspace;
  launchKernel(rowDotKernel, blocksFor(rows * 32), kThreads, 0, stream, a, dout,
               o, rowDot);
  if (!lse) {
    float *computed = workspace + rows;
    attention(s, q, k, v, Out(), computed, stream);
    lse = computed;
  }
  if (backwardOnTensorCores(s, dout, q, k, v))
    return tensorCoreAttentionBackward(
        s, dout, q, k, v, lse, rowDot, dq, dk, dv,
        sums < 0 ? nullptr : workspace + sums, stream);
  byHeadDimBucket(s.d, [&](auto D) {
    launchAttentionBackward<decltype(D)::value>(a, dout, q, k, v, lse, rowDot,
                                                dq, dk, dv, stream);
  });
}

void crossEntropyMax(const CrossEntropyShape &c, In logits, Out max,
                     cudaStream_t stream) {
  if (c.rows == 0)
    return;
  launchKernel(ceMaxKernel, unsigned(c.rows), kThreads, 0, stream, c, logits,
               max);
}

void crossEntropyStats(const CrossEntropyShape &c, In logits, In max,
                       const int32_t *labels, Out stats, cudaStream_t stream) {
  if (c.rows == 0)
    return;
  launchKernel(ceStatsKernel, unsigned(c.rows), kThreads, 0, stream, c, logits,
               max, labels, stats);
}

void crossEntropyLoss(In max, In stats, int64_t rows, double scale, Out loss,
                      cudaStream_t stream) {
  launchKernel(ceLossKernel, 1, 1024, 0, stream, max, stats, rows, scale, loss);
}

void crossEntropyBackward(const CrossEntropyShape &c, In logits, In max,
                          In stats, const int32_t *labels, float scale,
                          Out dlogits, cudaStream_t stream) {
  if (c.rows == 0)
    return;
  launchKernel(ceBackwardKernel,
               unsigned(std::min<int64_t>(c.rows, kMaxBlocks)), kThreads, 0,
               stream, c, logits, max, stats, labels, scale, dlogits);
}

void sumSquares(const std::vector<SquaresTerm> &terms, double *acc64,
                cudaStream_t stream) {
  forEachTensorList<kSquaresPerLaunch>(
      terms, [](const SquaresTerm &t) { return packsOf(t.n); },
      [&](const SquaresList &list, int64_t packs) {
        unsigned blocks = std::min(blocksFor(packs), 1024u);
        launchKernel(sumSquaresKernel, blocks, kThreads, 0, stream, list,
                     acc64);
      });
}

void storeScalar(const double *acc64, Out out, cudaStream_t stream) {
  launchKernel(storeScalarKernel, 1, 1, 0, stream, acc64, out);
}

void clipCoefficient(In sumsq, double clip, Out out, cudaStream_t stream) {
  launchKernel(clipCoefficientKernel, 1, 1, 0, stream, sumsq, clip, out);
}

void adamw(const AdamWStep &s, const std::vector<AdamWTensor> &tensors,
           cudaStream_t stream) {
  forEachTensorList<kAdamWPerLaunch>(
      tensors,
      [](const AdamWTensor &t) { return packsOf(std::max(t.pn, t.chunk)); },
      [&](const AdamWList &list, int64_t packs) {
        launchKernel(adamwKernel, blocksFor(packs), kThreads, 0, stream, s,
                     list);
      });
}

} // namespace partita::runtime::cuda
