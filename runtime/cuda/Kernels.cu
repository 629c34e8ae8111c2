//===- Kernels.cu - CUDA kernels of the plan format -----------------------===//
//
// fp32 storage, fp32 arithmetic (double where the CPU kernels use double),
// so that a plan's losses on the GPU track the CPU backend's. Every kernel
// writes each output element from one thread, after reading what that
// element depends on, so outputs may alias inputs element for element.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "LaunchConfig.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace partita::runtime::cuda {

namespace {

__device__ __forceinline__ void store(float *y, int64_t i, float v, bool acc) {
  y[i] = acc ? y[i] + v : v;
}

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

__global__ void unaryKernel(Unary f, const float *x, float *y, bool acc,
                            int64_t n) {
  GRID_STRIDE(i, n) store(y, i, unaryValue(f, x[i]), acc);
}

__global__ void unaryBackwardKernel(Unary f, const float *dy, const float *x,
                                    float *dx, bool acc, int64_t n) {
  GRID_STRIDE(i, n) store(dx, i, dy[i] * unaryGrad(f, x[i]), acc);
}

__global__ void swigluKernel(const float *gate, const float *up, float *y,
                             bool acc, int64_t n) {
  GRID_STRIDE(i, n) {
    float g = gate[i];
    store(y, i, g * sigmoidf(g) * up[i], acc);
  }
}

__global__ void swigluBackwardKernel(const float *dy, const float *gate,
                                     const float *up, float *dgate,
                                     bool accGate, float *dup, bool accUp,
                                     int64_t n) {
  GRID_STRIDE(i, n) {
    float d = dy[i], g = gate[i], u = up[i], s = sigmoidf(g);
    store(dgate, i, d * u * (s + g * s * (1 - s)), accGate);
    store(dup, i, d * g * s, accUp);
  }
}

struct Inputs {
  const float *x[8];
  int count;
};

__global__ void sumKernel(Inputs in, float *y, bool acc, int64_t n) {
  GRID_STRIDE(i, n) {
    float s = 0;
    for (int k = 0; k < in.count; ++k)
      s += in.x[k][i];
    store(y, i, s, acc);
  }
}

__global__ void addPeriodicKernel(const float *x, const float *bias,
                                  int64_t period, float *y, bool acc,
                                  int64_t n) {
  GRID_STRIDE(i, n) store(y, i, x[i] + bias[i % period], acc);
}

/// Column sums of a [rows][period] matrix, a slab of rows per blockIdx.y.
__global__ void sumPeriodicKernel(const float *x, int64_t period, int64_t rows,
                                  int64_t rowsPerSlab, float *out) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= period)
    return;
  int64_t begin = blockIdx.y * rowsPerSlab;
  int64_t end = min(rows, begin + rowsPerSlab);
  float s = 0;
  for (int64_t r = begin; r < end; ++r)
    s += x[r * period + c];
  atomicAdd(out + c, s);
}

__global__ void transposeBlocksKernel(float *dst, const float *src, int64_t a,
                                      int64_t b, int64_t inner, bool acc) {
  int64_t n = a * b * inner;
  GRID_STRIDE(e, n) {
    int64_t i = e / (b * inner), j = (e / inner) % b, k = e % inner;
    store(dst, (j * a + i) * inner + k, src[e], acc);
  }
}

__global__ void widenKernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(e, n) { dst[e] = __bfloat162float(__ushort_as_bfloat16(src[e])); }
}

__global__ void narrowKernel(uint16_t *dst, const float *src, int64_t n,
                             bool acc) {
  GRID_STRIDE(e, n) {
    float x = src[e];
    if (acc)
      x += __bfloat162float(__ushort_as_bfloat16(dst[e]));
    dst[e] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
}

__global__ void sliceColumnsKernel(const float *x, int64_t outer, int64_t inner,
                                   int64_t begin, int64_t width, float *y,
                                   bool acc) {
  GRID_STRIDE(e, outer * width) {
    int64_t o = e / width, k = e % width;
    store(y, e, x[o * inner + begin + k], acc);
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

/// `op` over the 32 lanes of a warp (every lane gets it).
template <typename T, typename Op> __device__ T warpReduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1)
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
// A block per slab of rows; thread t owns columns t, t + blockDim, ... of
// every row, so that it can keep its columns' dw and db sums in registers
// and add them to the output once per slab.

/// Mean (0 for RMSNorm) and 1 / sqrt(variance + eps) of row `xr`.
__device__ void rowStatistics(const float *xr, int64_t h, bool rms, double eps,
                              double *shared, double &mean, double &inv) {
  double s = 0;
  if (!rms) {
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
      s += xr[j];
    s = blockSum(s, shared) / h;
  }
  mean = rms ? 0.0 : s;
  double var = 0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    double c = xr[j] - mean;
    var += c * c;
  }
  var = blockSum(var, shared);
  inv = 1.0 / sqrt(var / h + eps);
}

__global__ void normKernel(const float *x, const float *w, const float *b,
                           float *y, bool acc, int64_t h, double eps,
                           bool rms) {
  __shared__ double shared[32];
  int64_t r = blockIdx.x;
  const float *xr = x + r * h;
  double mean, inv;
  rowStatistics(xr, h, rms, eps, shared, mean, inv);
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x)
    store(y, r * h + j, float((xr[j] - mean) * inv) * w[j] + (b ? b[j] : 0.0f),
          acc);
}

__global__ void __launch_bounds__(kNormThreads)
    normBackwardKernel(const float *dy, const float *x, const float *w,
                       float *dx, bool accDx, float *dw, float *db,
                       int64_t rows, int64_t h, double eps, bool rms) {
  __shared__ double shared[32];
  float dwPart[kNormColumnsPerThread], dbPart[kNormColumnsPerThread];
  for (int c = 0; c < kNormColumnsPerThread; ++c)
    dwPart[c] = dbPart[c] = 0;
  int64_t begin = blockIdx.x * kNormRowsPerBlock;
  int64_t end = min(rows, begin + kNormRowsPerBlock);
  for (int64_t r = begin; r < end; ++r) {
    const float *xr = x + r * h, *g = dy + r * h;
    double mean, inv;
    rowStatistics(xr, h, rms, eps, shared, mean, inv);
    double dot = 0, sum = 0;
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
      if (j >= h)
        break;
      double xhat = (xr[j] - mean) * inv, dxhat = double(g[j]) * w[j];
      dot += dxhat * xhat;
      sum += dxhat;
      dwPart[c] += float(g[j] * xhat);
      dbPart[c] += g[j];
    }
    dot = blockSum(dot, shared);
    if (!rms)
      sum = blockSum(sum, shared);
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
      if (j >= h)
        break;
      double xhat = (xr[j] - mean) * inv, dxhat = double(g[j]) * w[j];
      double v = dxhat - dot / h * xhat - (rms ? 0.0 : sum / h);
      store(dx, r * h + j, float(inv * v), accDx);
    }
  }
  for (int c = 0; c < kNormColumnsPerThread; ++c) {
    int64_t j = threadIdx.x + int64_t(c) * blockDim.x;
    if (j >= h)
      break;
    atomicAdd(dw + j, dwPart[c]);
    if (db)
      atomicAdd(db + j, dbPart[c]);
  }
}

// -- Rotary ------------------------------------------------------------------

__global__ void rotaryKernel(const float *x, float *y, bool acc, int64_t b,
                             int64_t s, int64_t heads, int64_t d, int64_t rd,
                             const double *invFreq, float sign) {
  int64_t half = rd / 2, width = heads * d;
  // One thread per (row, head, column of the rotated half) and one per
  // column outside the rotated part.
  int64_t perHead = half + (d - 2 * half), n = b * s * heads * perHead;
  GRID_STRIDE(e, n) {
    int64_t row = e / (heads * perHead), hh = (e / perHead) % heads;
    int64_t i = e % perHead, t = row % s;
    int64_t base = row * width + hh * d;
    if (i >= half) { // not rotated
      int64_t at = base + 2 * half + (i - half);
      store(y, at, x[at], acc);
      continue;
    }
    double angle = double(t) * invFreq[i];
    float cs = float(cos(angle)), sn = sign * float(sin(angle));
    float x1 = x[base + i], x2 = x[base + half + i];
    store(y, base + i, x1 * cs - x2 * sn, acc);
    store(y, base + half + i, x2 * cs + x1 * sn, acc);
  }
}

// -- Embedding ---------------------------------------------------------------

__global__ void embeddingKernel(const float *table, const int32_t *tokens,
                                int64_t count, int64_t rows, int64_t h,
                                int64_t start, float *y, bool acc) {
  GRID_STRIDE(e, count * h) {
    int64_t t = e / h, j = e % h, local = int64_t(tokens[t]) - start;
    float v = local >= 0 && local < rows ? table[local * h + j] : 0.0f;
    store(y, e, v, acc);
  }
}

__global__ void embeddingBackwardKernel(const float *dy, const int32_t *tokens,
                                        int64_t count, int64_t rows, int64_t h,
                                        int64_t start, float *dtable) {
  GRID_STRIDE(e, count * h) {
    int64_t t = e / h, j = e % h, local = int64_t(tokens[t]) - start;
    if (local >= 0 && local < rows)
      atomicAdd(dtable + local * h + j, dy[e]);
  }
}

// -- Attention ---------------------------------------------------------------
//
// Flash-style: a thread per query row (forward, dq) or key row (dk, dv)
// streams the other side through shared memory in tiles and keeps its
// softmax statistics online, so memory is O(s) per row. fp32 throughout.

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
};

/// Loads rows [first, first + T) of a [*, ld]-strided tensor into `tile`.
template <int D, int T>
__device__ void loadTile(float (*tile)[D], const float *base, int64_t first,
                         int64_t limit, int64_t stride, int64_t d) {
  for (int e = threadIdx.x; e < T * D; e += blockDim.x) {
    int r = e / D, k = e % D;
    int64_t row = first + r;
    tile[r][k] = row < limit && k < d ? base[row * stride + k] : 0.0f;
  }
}

/// Streams keys and values [jBegin, jEnd) through the block's shared
/// tiles and calls visit(key row, value row) for each key query row i sees.
/// Every thread of the block must call it (it synchronises the block).
template <int D, typename Visit>
__device__ void forEachKey(const AttentionDims &a, int64_t i, bool valid,
                           const float *kBase, const float *vBase,
                           int64_t jBegin, int64_t jEnd, float (*kTile)[D],
                           float (*vTile)[D], Visit visit) {
  constexpr int T = keyTile<D>();
  int64_t stride = a.kvHeads * a.d;
  for (int64_t j0 = jBegin; j0 < jEnd; j0 += T) {
    __syncthreads();
    loadTile<D, T>(kTile, kBase, j0, jEnd, stride, a.d);
    loadTile<D, T>(vTile, vBase, j0, jEnd, stride, a.d);
    __syncthreads();
    if (!valid)
      continue;
    for (int jj = 0; jj < T && j0 + jj < jEnd; ++jj)
      if (!a.masked(i, j0 + jj))
        visit(kTile[jj], vTile[jj]);
  }
}

/// One query row against keys [jBegin, jEnd): the running max m, the
/// denominator l and the unnormalised output o.
template <int D>
__device__ void attendRow(const AttentionDims &a, const float *q, int64_t i,
                          bool valid, const float *kBase, const float *vBase,
                          int64_t jBegin, int64_t jEnd, float (*kTile)[D],
                          float (*vTile)[D], float &m, float &l, float *o) {
  m = -INFINITY;
  l = 0;
  for (int k = 0; k < D; ++k)
    o[k] = 0;
  forEachKey<D>(a, i, valid, kBase, vBase, jBegin, jEnd, kTile, vTile,
                [&](const float *kRow, const float *vRow) {
                  float score = 0;
                  for (int k = 0; k < D; ++k)
                    score += q[k] * kRow[k];
                  float mNew = fmaxf(m, score);
                  float correction = expf(m - mNew), p = expf(score - mNew);
                  l = l * correction + p;
                  for (int k = 0; k < D; ++k)
                    o[k] = o[k] * correction + p * vRow[k];
                  m = mNew;
                });
}

/// The keys query rows [first, last] of a block can see.
__device__ void keyRange(const AttentionDims &a, int64_t first, int64_t last,
                         int64_t &begin, int64_t &end) {
  begin = a.window > 0 ? max(int64_t(0), first - a.window + 1) : 0;
  end = a.causal ? min(a.s, last + 1) : a.s;
}

template <int D>
__global__ void attentionKernel(AttentionDims a, const float *q, const float *k,
                                const float *v, float *o, bool acc) {
  int64_t bb = blockIdx.z, hh = blockIdx.y, kh = hh / (a.heads / a.kvHeads);
  int64_t first = int64_t(blockIdx.x) * blockDim.x, i = first + threadIdx.x;
  bool valid = i < a.s;
  constexpr int T = keyTile<D>();
  __shared__ float kTile[T][D], vTile[T][D];
  float qr[D], out[D], m, l;
  for (int c = 0; c < D; ++c)
    qr[c] = valid && c < a.d ? q[a.qOffset(bb, i, hh) + c] * a.scale : 0.0f;
  int64_t jBegin, jEnd;
  keyRange(a, first, min(a.s - 1, first + int64_t(blockDim.x) - 1), jBegin,
           jEnd);
  attendRow<D>(a, qr, i, valid, k + a.kOffset(bb, 0, kh),
               v + a.kOffset(bb, 0, kh), jBegin, jEnd, kTile, vTile, m, l, out);
  if (!valid)
    return;
  for (int c = 0; c < D && c < a.d; ++c)
    store(o, a.qOffset(bb, i, hh) + c, out[c] / l, acc);
}

/// Per query row: the log-sum-exp and D = dO . O into `stats`, then dq.
template <int D>
__global__ void attentionBackwardQueryKernel(AttentionDims a, const float *dout,
                                             const float *q, const float *k,
                                             const float *v, float *dq,
                                             bool accDq, float *stats) {
  constexpr int T = keyTile<D>();
  __shared__ float kTile[T][D], vTile[T][D];
  int64_t bb = blockIdx.z, hh = blockIdx.y, kh = hh / (a.heads / a.kvHeads);
  int64_t first = int64_t(blockIdx.x) * blockDim.x, i = first + threadIdx.x;
  bool valid = i < a.s;
  float qr[D], acc[D], m, l;
  for (int c = 0; c < D; ++c)
    qr[c] = valid && c < a.d ? q[a.qOffset(bb, i, hh) + c] * a.scale : 0.0f;
  int64_t jBegin, jEnd;
  keyRange(a, first, min(a.s - 1, first + int64_t(blockDim.x) - 1), jBegin,
           jEnd);
  const float *kBase = k + a.kOffset(bb, 0, kh),
              *vBase = v + a.kOffset(bb, 0, kh);
  attendRow<D>(a, qr, i, valid, kBase, vBase, jBegin, jEnd, kTile, vTile, m, l,
               acc);
  float dor[D] = {}, lse = 0, rowD = 0;
  if (valid) {
    lse = m + logf(l);
    for (int c = 0; c < D; ++c) {
      dor[c] = c < a.d ? dout[a.qOffset(bb, i, hh) + c] : 0.0f;
      rowD += dor[c] * acc[c] / l;
    }
    int64_t row = (bb * a.heads + hh) * a.s + i;
    stats[2 * row] = lse;
    stats[2 * row + 1] = rowD;
  }
  // dq = scale * sum_j p_ij (dO_i . v_j - D_i) k_j.
  for (int c = 0; c < D; ++c)
    acc[c] = 0;
  forEachKey<D>(a, i, valid, kBase, vBase, jBegin, jEnd, kTile, vTile,
                [&](const float *kRow, const float *vRow) {
                  float score = 0, dp = 0;
                  for (int c = 0; c < D; ++c) {
                    score += qr[c] * kRow[c];
                    dp += dor[c] * vRow[c];
                  }
                  float ds = expf(score - lse) * (dp - rowD);
                  for (int c = 0; c < D; ++c)
                    acc[c] += ds * kRow[c];
                });
  if (!valid)
    return;
  for (int c = 0; c < D && c < a.d; ++c)
    store(dq, a.qOffset(bb, i, hh) + c, acc[c] * a.scale, accDq);
}

/// Per key row of a kv head: dk and dv over every query row of the heads
/// that share it.
template <int D>
__global__ void attentionBackwardKeyKernel(AttentionDims a, const float *dout,
                                           const float *q, const float *k,
                                           const float *v, float *dk,
                                           bool accDk, float *dv, bool accDv,
                                           const float *stats) {
  constexpr int T = keyTile<D>();
  __shared__ float qTile[T][D], doTile[T][D];
  __shared__ float lseTile[T], dTile[T];
  int64_t bb = blockIdx.z, kh = blockIdx.y, group = a.heads / a.kvHeads;
  int64_t first = int64_t(blockIdx.x) * blockDim.x, j = first + threadIdx.x;
  int64_t last = min(a.s - 1, first + int64_t(blockDim.x) - 1);
  bool valid = j < a.s;
  float kr[D], vr[D], dkAcc[D], dvAcc[D];
  for (int c = 0; c < D; ++c) {
    bool in = valid && c < a.d;
    kr[c] = in ? k[a.kOffset(bb, j, kh) + c] : 0.0f;
    vr[c] = in ? v[a.kOffset(bb, j, kh) + c] : 0.0f;
    dkAcc[c] = dvAcc[c] = 0;
  }
  // The query rows that can see keys [first, last].
  int64_t iBegin = a.causal ? first : 0;
  int64_t iEnd = a.window > 0 ? min(a.s, last + a.window) : a.s;
  int64_t stride = a.heads * a.d;
  for (int64_t hh = kh * group; hh < (kh + 1) * group; ++hh) {
    const float *qBase = q + a.qOffset(bb, 0, hh);
    const float *doBase = dout + a.qOffset(bb, 0, hh);
    const float *rowStats = stats + 2 * (bb * a.heads + hh) * a.s;
    for (int64_t i0 = iBegin; i0 < iEnd; i0 += T) {
      __syncthreads();
      loadTile<D, T>(qTile, qBase, i0, iEnd, stride, a.d);
      loadTile<D, T>(doTile, doBase, i0, iEnd, stride, a.d);
      for (int r = threadIdx.x; r < T; r += blockDim.x) {
        bool in = i0 + r < iEnd;
        lseTile[r] = in ? rowStats[2 * (i0 + r)] : 0.0f;
        dTile[r] = in ? rowStats[2 * (i0 + r) + 1] : 0.0f;
      }
      __syncthreads();
      if (!valid)
        continue;
      for (int ii = 0; ii < T && i0 + ii < iEnd; ++ii) {
        int64_t i = i0 + ii;
        if (a.masked(i, j))
          continue;
        float score = 0, dp = 0;
        for (int c = 0; c < D; ++c) {
          score += qTile[ii][c] * kr[c];
          dp += doTile[ii][c] * vr[c];
        }
        float p = expf(score * a.scale - lseTile[ii]);
        float ds = p * (dp - dTile[ii]) * a.scale;
        for (int c = 0; c < D; ++c) {
          dvAcc[c] += p * doTile[ii][c];
          dkAcc[c] += ds * qTile[ii][c];
        }
      }
    }
  }
  if (!valid)
    return;
  for (int c = 0; c < D && c < a.d; ++c) {
    store(dk, a.kOffset(bb, j, kh) + c, dkAcc[c], accDk);
    store(dv, a.kOffset(bb, j, kh) + c, dvAcc[c], accDv);
  }
}

AttentionDims dims(const AttentionShape &s) {
  return {s.b, s.s,      s.heads,  s.kvHeads,
          s.d, s.causal, s.window, float(1.0 / std::sqrt(double(s.d)))};
}

template <template <int> class Launch, typename... Args>
void byHeadDim(int64_t d, Args &&...args) {
  switch (headDimBucket(d)) {
  case 32:
    return Launch<32>::run(args...);
  case 64:
    return Launch<64>::run(args...);
  case 128:
    return Launch<128>::run(args...);
  default:
    return Launch<256>::run(args...);
  }
}

template <int D> struct LaunchForward {
  static void run(const AttentionDims &a, const float *q, const float *k,
                  const float *v, float *o, bool acc, cudaStream_t stream) {
    dim3 grid(rowBlocks(a.s), unsigned(a.heads), unsigned(a.b));
    attentionKernel<D><<<grid, kRowsPerBlock, 0, stream>>>(a, q, k, v, o, acc);
  }
};

template <int D> struct LaunchBackward {
  static void run(const AttentionDims &a, const float *dout, const float *q,
                  const float *k, const float *v, float *dq, bool accDq,
                  float *dk, bool accDk, float *dv, bool accDv, float *stats,
                  cudaStream_t stream) {
    unsigned tiles = rowBlocks(a.s);
    attentionBackwardQueryKernel<D>
        <<<dim3(tiles, unsigned(a.heads), unsigned(a.b)), kRowsPerBlock, 0,
           stream>>>(a, dout, q, k, v, dq, accDq, stats);
    attentionBackwardKeyKernel<D>
        <<<dim3(tiles, unsigned(a.kvHeads), unsigned(a.b)), kRowsPerBlock, 0,
           stream>>>(a, dout, q, k, v, dk, accDk, dv, accDv, stats);
  }
};

// -- Cross-entropy -----------------------------------------------------------

__global__ void ceMaxKernel(CrossEntropyShape c, const float *logits,
                            float *max, bool acc) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x, valid = min(c.v, c.vocabSize - c.start);
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    m = fmaxf(m, logits[r * c.v + j]);
  m = blockMax(m, shared);
  if (threadIdx.x == 0)
    store(max, r, m, acc);
}

__global__ void ceStatsKernel(CrossEntropyShape c, const float *logits,
                              const float *max, const int32_t *labels,
                              float *stats, bool acc) {
  __shared__ double shared[32];
  int64_t r = blockIdx.x, valid = min(c.v, c.vocabSize - c.start);
  double s = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    s += exp(double(logits[r * c.v + j]) - max[r]);
  s = blockSum(s, shared);
  if (threadIdx.x == 0) {
    int64_t local = int64_t(labels[r]) - c.start;
    store(stats, 2 * r, float(s), acc);
    store(stats, 2 * r + 1,
          local >= 0 && local < c.v ? logits[r * c.v + local] : 0.0f, acc);
  }
}

__global__ void __launch_bounds__(1024)
    ceLossKernel(const float *max, const float *stats, int64_t rows,
                 double scale, float *loss, bool acc) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    s += log(double(stats[2 * r])) + max[r] - stats[2 * r + 1];
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    store(loss, 0, float(scale * s), acc);
}

__global__ void ceBackwardKernel(CrossEntropyShape c, const float *logits,
                                 const float *max, const float *stats,
                                 const int32_t *labels, float scale,
                                 float *dlogits, bool acc) {
  GRID_STRIDE(e, c.rows * c.v) {
    int64_t r = e / c.v, j = e % c.v;
    float g = c.start + j < c.vocabSize
                  ? scale * expf(logits[e] - max[r]) / stats[2 * r]
                  : 0.0f;
    if (j == int64_t(labels[r]) - c.start)
      g -= scale;
    store(dlogits, e, g, acc);
  }
}

// -- Optimizer ---------------------------------------------------------------

__global__ void sumSquaresKernel(const float *x, int64_t n, double weight,
                                 double *acc64) {
  __shared__ double shared[32];
  double s = 0;
  GRID_STRIDE(i, n) s += double(x[i]) * x[i];
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    atomicAdd(acc64, weight * s);
}

__global__ void storeScalarKernel(const double *acc64, float *out, bool acc) {
  store(out, 0, float(*acc64), acc);
}

__global__ void clipCoefficientKernel(const float *sumsq, double clip,
                                      float *out, bool acc) {
  double norm = sqrt(double(sumsq[0]));
  store(out, 0, clip == 0 ? 1.0f : float(fmin(1.0, clip / (norm + 1e-6))), acc);
}

__global__ void adamwKernel(AdamWStep s, const float *p, int64_t pn,
                            const float *g, const float *m, const float *v,
                            int64_t chunk, const float *clip, const float *w,
                            float *np, bool accP, float *nm, bool accM,
                            float *nv, bool accV, float *nw, bool accW) {
  float coefficient = clip[0];
  GRID_STRIDE(t, max(pn, chunk)) {
    if (t < chunk) {
      double gi = double(g[t]) * coefficient;
      double mi = s.beta1 * m[t] + (1 - s.beta1) * gi;
      double vi = s.beta2 * v[t] + (1 - s.beta2) * gi * gi;
      store(nm, t, float(mi), accM);
      store(nv, t, float(vi), accV);
      int64_t at = s.begin + t;
      if (at < pn) { // else the padding of the last shard
        // Below f32 the update applies to the master copy w.
        double pi = w ? w[t] : p[at];
        if (s.decay)
          pi *= 1 - s.lr * s.weightDecay;
        pi -= s.lr * (mi / s.c1) / (sqrt(vi / s.c2) + s.eps);
        store(np, at, float(pi), accP);
        if (w)
          store(nw, t, float(pi), accW);
      } else if (w) {
        store(nw, t, w[t], accW);
      }
    }
    // Elements outside this rank's slice keep their value.
    if (t < pn && (t < s.begin || t >= s.begin + chunk))
      store(np, t, p[t], accP);
  }
}

} // namespace

void unary(Unary f, const float *x, float *y, bool acc, int64_t n,
           cudaStream_t stream) {
  unaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(f, x, y, acc, n);
}

void unaryBackward(Unary f, const float *dy, const float *x, float *dx,
                   bool acc, int64_t n, cudaStream_t stream) {
  unaryBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(f, dy, x, dx, acc,
                                                             n);
}

void swiglu(const float *gate, const float *up, float *y, bool acc, int64_t n,
            cudaStream_t stream) {
  swigluKernel<<<blocksFor(n), kThreads, 0, stream>>>(gate, up, y, acc, n);
}

void swigluBackward(const float *dy, const float *gate, const float *up,
                    float *dgate, bool accGate, float *dup, bool accUp,
                    int64_t n, cudaStream_t stream) {
  swigluBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      dy, gate, up, dgate, accGate, dup, accUp, n);
}

void sum(const float *const *xs, int count, float *y, bool acc, int64_t n,
         cudaStream_t stream) {
  Inputs in{};
  in.count = count;
  for (int k = 0; k < count; ++k)
    in.x[k] = xs[k];
  sumKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, y, acc, n);
}

void addPeriodic(const float *x, const float *bias, int64_t period, float *y,
                 bool acc, int64_t n, cudaStream_t stream) {
  addPeriodicKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, bias, period, y,
                                                           acc, n);
}

void sumPeriodic(const float *x, int64_t period, int64_t n, float *out,
                 int64_t outCount, bool acc, cudaStream_t stream) {
  if (!acc)
    cudaMemsetAsync(out, 0, outCount * sizeof(float), stream);
  // At least 256 rows a slab, and at most 65535 slabs (gridDim.y).
  int64_t rows = n / period;
  int64_t rowsPerSlab = std::max<int64_t>(256, (rows + 65534) / 65535);
  dim3 grid(unsigned((period + kThreads - 1) / kThreads),
            unsigned((rows + rowsPerSlab - 1) / rowsPerSlab));
  if (rows > 0)
    sumPeriodicKernel<<<grid, kThreads, 0, stream>>>(x, period, rows,
                                                     rowsPerSlab, out);
}

void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                     int64_t inner, bool acc, cudaStream_t stream) {
  int64_t n = a * b * inner;
  if (n == 0)
    return;
  if ((a == 1 || b == 1) && !acc) {
    if (dst != src)
      cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice,
                      stream);
    return;
  }
  transposeBlocksKernel<<<blocksFor(n), kThreads, 0, stream>>>(dst, src, a, b,
                                                               inner, acc);
}

void widen(float *dst, const uint16_t *src, int64_t n, cudaStream_t stream) {
  if (n > 0)
    widenKernel<<<blocksFor(n), kThreads, 0, stream>>>(dst, src, n);
}

void narrow(uint16_t *dst, const float *src, int64_t n, bool acc,
            cudaStream_t stream) {
  if (n > 0)
    narrowKernel<<<blocksFor(n), kThreads, 0, stream>>>(dst, src, n, acc);
}

void sliceColumns(const float *x, int64_t outer, int64_t inner, int64_t begin,
                  int64_t width, float *y, bool acc, cudaStream_t stream) {
  sliceColumnsKernel<<<blocksFor(outer * width), kThreads, 0, stream>>>(
      x, outer, inner, begin, width, y, acc);
}

int64_t maxNormWidth() { return kMaxNormWidth; }

void norm(const float *x, const float *w, const float *b, float *y, bool acc,
          int64_t rows, int64_t h, double eps, bool rms, cudaStream_t stream) {
  if (rows == 0)
    return;
  int threads = normThreads(h);
  normKernel<<<unsigned(rows), threads, 0, stream>>>(x, w, b, y, acc, h, eps,
                                                     rms);
}

void normBackward(const float *dy, const float *x, const float *w, float *dx,
                  bool accDx, float *dw, bool accDw, float *db, bool accDb,
                  int64_t rows, int64_t h, double eps, bool rms,
                  cudaStream_t stream) {
  if (!accDw)
    cudaMemsetAsync(dw, 0, h * sizeof(float), stream);
  if (db && !accDb)
    cudaMemsetAsync(db, 0, h * sizeof(float), stream);
  if (rows == 0)
    return;
  unsigned blocks =
      unsigned((rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock);
  normBackwardKernel<<<blocks, kNormThreads, 0, stream>>>(
      dy, x, w, dx, accDx, dw, db, rows, h, eps, rms);
}

void rotary(const float *x, float *y, bool acc, int64_t b, int64_t s,
            int64_t heads, int64_t d, int64_t rd, const double *invFreq,
            float sign, cudaStream_t stream) {
  int64_t n = b * s * heads * (rd / 2 + d - rd / 2 * 2);
  rotaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, acc, b, s, heads, d,
                                                      rd, invFreq, sign);
}

void embedding(const float *table, const int32_t *tokens, int64_t count,
               int64_t rows, int64_t h, int64_t start, float *y, bool acc,
               cudaStream_t stream) {
  embeddingKernel<<<blocksFor(count * h), kThreads, 0, stream>>>(
      table, tokens, count, rows, h, start, y, acc);
}

void embeddingBackward(const float *dy, const int32_t *tokens, int64_t count,
                       int64_t rows, int64_t h, int64_t start, float *dtable,
                       bool acc, cudaStream_t stream) {
  if (!acc)
    cudaMemsetAsync(dtable, 0, rows * h * sizeof(float), stream);
  embeddingBackwardKernel<<<blocksFor(count * h), kThreads, 0, stream>>>(
      dy, tokens, count, rows, h, start, dtable);
}

int64_t maxHeadDim() { return kMaxHeadDim; }

void attention(const AttentionShape &s, const float *q, const float *k,
               const float *v, float *o, bool acc, cudaStream_t stream) {
  byHeadDim<LaunchForward>(s.d, dims(s), q, k, v, o, acc, stream);
}

int64_t attentionBackwardWorkspace(const AttentionShape &s) {
  return 2 * s.b * s.heads * s.s;
}

void attentionBackward(const AttentionShape &s, const float *dout,
                       const float *q, const float *k, const float *v,
                       float *dq, bool accDq, float *dk, bool accDk, float *dv,
                       bool accDv, float *workspace, cudaStream_t stream) {
  byHeadDim<LaunchBackward>(s.d, dims(s), dout, q, k, v, dq, accDq, dk, accDk,
                            dv, accDv, workspace, stream);
}

void crossEntropyMax(const CrossEntropyShape &c, const float *logits,
                     float *max, bool acc, cudaStream_t stream) {
  if (c.rows == 0)
    return;
  ceMaxKernel<<<unsigned(c.rows), kThreads, 0, stream>>>(c, logits, max, acc);
}

void crossEntropyStats(const CrossEntropyShape &c, const float *logits,
                       const float *max, const int32_t *labels, float *stats,
                       bool acc, cudaStream_t stream) {
  if (c.rows == 0)
    return;
  ceStatsKernel<<<unsigned(c.rows), kThreads, 0, stream>>>(c, logits, max,
                                                           labels, stats, acc);
}

void crossEntropyLoss(const float *max, const float *stats, int64_t rows,
                      double scale, float *loss, bool acc,
                      cudaStream_t stream) {
  ceLossKernel<<<1, 1024, 0, stream>>>(max, stats, rows, scale, loss, acc);
}

void crossEntropyBackward(const CrossEntropyShape &c, const float *logits,
                          const float *max, const float *stats,
                          const int32_t *labels, float scale, float *dlogits,
                          bool acc, cudaStream_t stream) {
  ceBackwardKernel<<<blocksFor(c.rows * c.v), kThreads, 0, stream>>>(
      c, logits, max, stats, labels, scale, dlogits, acc);
}

void sumSquares(const float *x, int64_t n, double weight, double *acc64,
                cudaStream_t stream) {
  unsigned blocks = blocksFor(n) > 1024 ? 1024 : blocksFor(n);
  sumSquaresKernel<<<blocks, kThreads, 0, stream>>>(x, n, weight, acc64);
}

void storeScalar(const double *acc64, float *out, bool acc,
                 cudaStream_t stream) {
  storeScalarKernel<<<1, 1, 0, stream>>>(acc64, out, acc);
}

void clipCoefficient(const float *sumsq, double clip, float *out, bool acc,
                     cudaStream_t stream) {
  clipCoefficientKernel<<<1, 1, 0, stream>>>(sumsq, clip, out, acc);
}

void adamw(const AdamWStep &s, const float *p, int64_t pn, const float *g,
           const float *m, const float *v, int64_t chunk, const float *clip,
           const float *w, float *np, bool accP, float *nm, bool accM,
           float *nv, bool accV, float *nw, bool accW, cudaStream_t stream) {
  int64_t n = pn > chunk ? pn : chunk;
  adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      s, p, pn, g, m, v, chunk, clip, w, np, accP, nm, accM, nv, accV, nw,
      accW);
}

} // namespace partita::runtime::cuda
