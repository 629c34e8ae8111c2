//===- TensorCoreAttention.cu - Flash attention on tensor cores -----------===//
//
// For bf16 q, k, v (and dO) with head dimension up to 128, the products of
// attention - Q K^T and P V forward; dO V^T, dS K, P^T dO and dS^T Q
// backward - run on bf16 tensor cores with f32 accumulation. The softmax
// and its statistics stay f32; P and dS are rounded to bf16 for their
// products, as FlashAttention-2 does. The s x s scores are never stored:
// 64 query (or key) rows a block, a warp per 16 of them, stream the other
// side through shared memory 64 rows at a time (LaunchConfig.h).
//
// Two families of kernels do this (attentionKernels): the WMMA kernels
// multiply 16x16x16 WMMA tiles and stage scores and output rows in shared
// memory, where, within a warp's [16][64] score tile, lane l owns row l / 2
// and the columns of parity l % 2 (neighbouring lanes read neighbouring
// words, in different banks), both lanes of a row keeping its running max
// and sum, and likewise for a warp's [16][D] output rows; the register
// kernels (below them) keep both in registers.
//
// A head dimension d runs in the smallest D of 32, 64 and 128 that holds it:
// columns d to D of the tiles are zero, so the products are those of d
// columns, and only d are written.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "KernelSupport.cuh"
#include "LaunchConfig.h"
#include "WarpMatrix.cuh"

#include <mma.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace partita::runtime::cuda {

namespace {

using namespace nvcuda;
using bf16 = __nv_bfloat16;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kLaneColumns = kTcTile / 2;

/// The regions both dk, dv kernels begin with: the block's keys and
/// values, a tile of queries and of dO, and those queries' log-sum-exp and
/// D = dO . O.
struct KeyTiles {
  bf16 *ks, *vs, *qs, *dos;
  float *lse, *rowDot;
};

/// Successive regions of dynamic shared memory, each TcLayout-sized.
struct Carve {
  char *at;
  template <typename T> __device__ T *take(int bytes) {
    T *p = reinterpret_cast<T *>(at);
    at += bytes;
    return p;
  }
  template <int D> __device__ KeyTiles keyTiles() {
    using L = TcLayout<D>;
    KeyTiles t;
    t.ks = take<bf16>(L::tile);
    t.vs = take<bf16>(L::tile);
    t.qs = take<bf16>(L::tile);
    t.dos = take<bf16>(L::tile);
    t.lse = take<float>(L::column);
    t.rowDot = take<float>(L::column);
    return t;
  }
};

/// Rows [first, first + 64) of a bf16 tensor whose row r starts at element
/// base + r * stride and has d columns, into a [64][ldh] tile; rows at or
/// past `limit` and columns at or past d are zero (masked rows and padding:
/// zero keeps NaN out of the products and adds nothing to them). Async:
/// the tensor's values are copied asynchronously where the tensor is
/// 16-byte aligned (copy16Async: they land at the waitCopies covering the
/// caller's next commitCopies); the rest is stored at once.
template <int D, bool Async = false>
__device__ void loadRows(bf16 *tile, const bf16 *x, int64_t base,
                         int64_t stride, int64_t first, int64_t limit,
                         int64_t d) {
  if (d % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    // 8 values a load: base and stride are multiples of d, so every row
    // starts 16-byte aligned, in the tensor and in the tile.
    constexpr int perRow = D / 8;
    for (int e = threadIdx.x; e < kTcRows * perRow; e += blockDim.x) {
      int r = e / perRow, c = e % perRow * 8;
      int64_t row = first + r;
      bf16 *to = tile + r * TcLayout<D>::ldh + c;
      if (row < limit && c < d) {
        const bf16 *from = x + base + row * stride + c;
        if (Async)
          copy16Async(to, from);
        else
          *reinterpret_cast<uint4 *>(to) =
              *reinterpret_cast<const uint4 *>(from);
      } else {
        *reinterpret_cast<uint4 *>(to) = make_uint4(0, 0, 0, 0);
      }
    }
    return;
  }
  for (int e = threadIdx.x; e < kTcRows * D; e += blockDim.x) {
    int r = e / D, c = e % D;
    int64_t row = first + r;
    tile[r * TcLayout<D>::ldh + c] = row < limit && c < d
                                         ? x[base + row * stride + c]
                                         : __float2bfloat16_rn(0.0f);
  }
}

template <int N> __device__ void zero(FragC (&c)[N]) {
  for (int n = 0; n < N; ++n)
    wmma::fill_fragment(c[n], 0.0f);
}

/// c[n] += A B^T for a warp: A is [16][K] (row stride lda), B is [16 N][K]
/// (row stride ldb), so c[n] is columns [16 n, 16 n + 16) of the product.
template <int K, int N>
__device__ void multiplyTransposed(FragC (&c)[N], const bf16 *a, int lda,
                                   const bf16 *b, int ldb) {
  for (int k = 0; k < K / 16; ++k) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + k * 16, lda);
    for (int n = 0; n < N; ++n) {
      FragBT fb;
      wmma::load_matrix_sync(fb, b + n * 16 * ldb + k * 16, ldb);
      wmma::mma_sync(c[n], fa, fb, c[n]);
    }
  }
}

/// c[n] += A B for a warp: A is [16][K] (row stride lda), B is [K][16 N]
/// (row stride ldb).
template <int K, int N>
__device__ void multiply(FragC (&c)[N], const bf16 *a, int lda, const bf16 *b,
                         int ldb) {
  for (int k = 0; k < K / 16; ++k) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + k * 16, lda);
    for (int n = 0; n < N; ++n) {
      FragB fb;
      wmma::load_matrix_sync(fb, b + k * 16 * ldb + n * 16, ldb);
      wmma::mma_sync(c[n], fa, fb, c[n]);
    }
  }
}

template <int N>
__device__ void storeFragments(float *to, int ld, const FragC (&c)[N]) {
  for (int n = 0; n < N; ++n)
    wmma::store_matrix_sync(to + n * 16, c[n], ld, wmma::mem_row_major);
}

/// scores ([16][64] f32) = A B^T for a warp: A is 16 rows of a [*][D] tile,
/// B a whole [64][D] tile.
template <int D>
__device__ void scoreTile(float *scores, const bf16 *a, const bf16 *b) {
  using L = TcLayout<D>;
  FragC s[kTcTile / 16];
  zero(s);
  multiplyTransposed<D>(s, a, L::ldh, b, L::ldh);
  storeFragments(scores, L::lds, s);
}

/// A block of 64 query rows of one head (blockIdx: the rows, the head, the
/// batch entry): where its rows and its kv head's keys are, and which keys
/// its rows see.
struct QueryBlock {
  int64_t bb, hh, first, qBase, qStride, kvBase, kvStride, jBegin, jEnd, d;
  __device__ QueryBlock(const AttentionDims &a) : d(a.d) {
    bb = blockIdx.z;
    hh = blockIdx.y;
    first = int64_t(blockIdx.x) * kTcRows;
    qBase = a.qOffset(bb, 0, hh);
    qStride = a.heads * a.d;
    kvBase = a.kOffset(bb, 0, hh / (a.heads / a.kvHeads));
    kvStride = a.kvHeads * a.d;
    a.keyRange(first, min(a.s - 1, first + kTcRows - 1), jBegin, jEnd);
  }
  /// Starts loading keys (or values) [j0, j0 + 64) into `tile`
  /// (loadRows, asynchronously).
  template <int D>
  __device__ void startTile(bf16 *tile, const bf16 *x, int64_t j0) const {
    loadRows<D, true>(tile, x, kvBase, kvStride, j0, jEnd, d);
  }
  /// Whether some key of the tile at j0 is past the block's keys or masked
  /// for some row of the block (the same for every thread of it).
  __device__ bool partialTile(const AttentionDims &a, int64_t j0) const {
    return j0 + kTcTile > jEnd || (a.causal && j0 + kTcTile - 1 > first) ||
           (a.window > 0 && j0 <= first + kTcRows - 1 - a.window);
  }
  /// Keys and values [j0, j0 + 64) into the block's tiles.
  template <int D>
  __device__ void loadKeys(bf16 *ks, bf16 *vs, const bf16 *k, const bf16 *v,
                           int64_t j0) const {
    __syncthreads(); // the last tile's readers are done
    loadRows<D>(ks, k, kvBase, kvStride, j0, jEnd, d);
    loadRows<D>(vs, v, kvBase, kvStride, j0, jEnd, d);
    __syncthreads();
  }
};

/// A block of 64 key rows of one kv head (blockIdx: the rows, the kv head,
/// the batch entry): where its keys are, and which query rows see them.
struct KeyBlock {
  int64_t bb, kh, group, first, kvBase, kvStride, iBegin, iEnd;
  __device__ KeyBlock(const AttentionDims &a) {
    bb = blockIdx.z;
    kh = blockIdx.y;
    group = a.heads / a.kvHeads;
    first = int64_t(blockIdx.x) * kTcRows;
    kvBase = a.kOffset(bb, 0, kh);
    kvStride = a.kvHeads * a.d;
    a.queryRange(first, min(a.s - 1, first + kTcRows - 1), iBegin, iEnd);
  }
  /// The block's keys and values into their tiles.
  template <int D>
  __device__ void loadKeys(bf16 *ks, bf16 *vs, const bf16 *k, const bf16 *v,
                           const AttentionDims &a) const {
    loadRows<D>(ks, k, kvBase, kvStride, first, a.s, a.d);
    loadRows<D>(vs, v, kvBase, kvStride, first, a.s, a.d);
  }
};

/// Forward over a block of 64 query rows: o = softmax(Q K^T scale) V
/// WithOutput, and each row's log-sum-exp into `lse` unless it is null
/// (without the output, the P V products are skipped).
template <int D, bool WithOutput>
__global__ void __launch_bounds__(kTcThreads)
    forwardKernel(AttentionDims a, const bf16 *q, const bf16 *k, const bf16 *v,
                  Out o, float *lse) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  bf16 *qs = carve.take<bf16>(L::tile), *ks = carve.take<bf16>(L::tile),
       *vs = carve.take<bf16>(L::tile);
  float *scores = carve.take<float>(L::scores) + warp * 16 * L::lds;
  bf16 *probs = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  float *out = carve.take<float>(L::rows) + warp * 16 * L::ldo;

  QueryBlock block(a);
  loadRows<D>(qs, q, block.qBase, block.qStride, block.first, a.s, a.d);
  for (int e = lane; e < 16 * D; e += 32)
    out[(e / D) * L::ldo + e % D] = 0;
  int r = lane / 2, parity = lane % 2;
  int64_t i = block.first + warp * 16 + r;
  float m = -INFINITY, l = 0;
  int64_t jEnd = block.jEnd;
  for (int64_t j0 = block.jBegin; j0 < jEnd; j0 += kTcTile) {
    block.loadKeys<D>(ks, vs, k, v, j0);
    scoreTile<D>(scores, qs + warp * 16 * L::ldh, ks);
    __syncwarp();
    // Online softmax of row i over this tile's keys.
    float x[kLaneColumns], tileMax = -INFINITY;
#pragma unroll
    for (int c = 0; c < kLaneColumns; ++c) {
      int col = 2 * c + parity;
      int64_t j = j0 + col;
      bool seen = i < a.s && j < jEnd && !a.masked(i, j);
      x[c] = seen ? scores[r * L::lds + col] * a.scale : -INFINITY;
      tileMax = fmaxf(tileMax, x[c]);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullWarp, tileMax, 1));
    float mNew = fmaxf(m, tileMax);
    // Rows that have seen no key yet keep zeros (and no NaN).
    float reference = mNew == -INFINITY ? 0.0f : mNew;
    float correction = expf(m - reference), sum = 0;
#pragma unroll
    for (int c = 0; c < kLaneColumns; ++c) {
      float p = expf(x[c] - reference);
      sum += p;
      probs[r * L::ldp + 2 * c + parity] = __float2bfloat16_rn(p);
    }
    sum += __shfl_xor_sync(kFullWarp, sum, 1);
    l = l * correction + sum;
    m = mNew;
    if constexpr (WithOutput) {
      for (int c = parity; c < D; c += 2)
        out[r * L::ldo + c] *= correction;
      __syncwarp();
      FragC acc[D / 16];
      for (int n = 0; n < D / 16; ++n)
        wmma::load_matrix_sync(acc[n], out + n * 16, L::ldo,
                               wmma::mem_row_major);
      multiply<kTcTile>(acc, probs, L::ldp, vs, L::ldh);
      storeFragments(out, L::ldo, acc);
    }
    __syncwarp();
  }
  if (i >= a.s)
    return;
  if (lse && parity == 0)
    lse[a.statsRow(block.bb, block.hh, i)] = m + logf(l);
  if constexpr (WithOutput) {
    int64_t at = a.qOffset(block.bb, i, block.hh);
    for (int c = parity; c < a.d; c += 2)
      store(o, at + c, out[r * L::ldo + c] / l);
  }
}

/// dq for a block of 64 query rows: sum over keys of dS K scale, with
/// dS = P (dO V^T - D).
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    queryGradientKernel(AttentionDims a, const bf16 *dout, const bf16 *q,
                        const bf16 *k, const bf16 *v, Out dq, const float *lse,
                        const float *rowDot) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  bf16 *qs = carve.take<bf16>(L::tile), *dos = carve.take<bf16>(L::tile),
       *ks = carve.take<bf16>(L::tile), *vs = carve.take<bf16>(L::tile);
  float *scores = carve.take<float>(L::scores) + warp * 16 * L::lds;
  float *dp = carve.take<float>(L::scores) + warp * 16 * L::lds;
  bf16 *ds = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  float *out = carve.take<float>(L::rows) + warp * 16 * L::ldo;

  QueryBlock block(a);
  loadRows<D>(qs, q, block.qBase, block.qStride, block.first, a.s, a.d);
  loadRows<D>(dos, dout, block.qBase, block.qStride, block.first, a.s, a.d);
  int r = lane / 2, parity = lane % 2;
  int64_t i = block.first + warp * 16 + r;
  bool valid = i < a.s;
  int64_t row = valid ? a.statsRow(block.bb, block.hh, i) : 0;
  float rowLse = valid ? lse[row] : 0.0f, rowD = valid ? rowDot[row] : 0.0f;
  FragC acc[D / 16];
  zero(acc);
  int64_t jEnd = block.jEnd;
  for (int64_t j0 = block.jBegin; j0 < jEnd; j0 += kTcTile) {
    block.loadKeys<D>(ks, vs, k, v, j0);
    scoreTile<D>(scores, qs + warp * 16 * L::ldh, ks);
    scoreTile<D>(dp, dos + warp * 16 * L::ldh, vs);
    __syncwarp();
    for (int c = 0; c < kLaneColumns; ++c) {
      int col = 2 * c + parity;
      int64_t j = j0 + col;
      bool seen = valid && j < jEnd && !a.masked(i, j);
      float p = seen ? expf(scores[r * L::lds + col] * a.scale - rowLse) : 0.0f;
      ds[r * L::ldp + col] =
          __float2bfloat16_rn(p * (dp[r * L::lds + col] - rowD));
    }
    __syncwarp();
    multiply<kTcTile>(acc, ds, L::ldp, ks, L::ldh);
  }
  storeFragments(out, L::ldo, acc);
  __syncwarp();
  if (valid)
    for (int c = parity; c < a.d; c += 2)
      store(dq, a.qOffset(block.bb, i, block.hh) + c,
            out[r * L::ldo + c] * a.scale);
}

/// dk and dv for a block of 64 key rows of one kv head, over every query
/// row of the heads that share it: dv = P^T dO, dk = dS^T Q scale.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    keyGradientKernel(AttentionDims a, const bf16 *dout, const bf16 *q,
                      const bf16 *k, const bf16 *v, Out dk, Out dv,
                      const float *lse, const float *rowDot) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  auto [ks, vs, qs, dos, lseTile, dTile] = carve.keyTiles<D>();
  float *scores = carve.take<float>(L::scores) + warp * 16 * L::lds;
  float *dp = carve.take<float>(L::scores) + warp * 16 * L::lds;
  bf16 *probs = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  bf16 *ds = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  float *out = carve.take<float>(L::rows) + warp * 16 * L::ldo;

  KeyBlock block(a);
  block.loadKeys<D>(ks, vs, k, v, a);
  int r = lane / 2, parity = lane % 2;
  int64_t j = block.first + warp * 16 + r;
  FragC dkAcc[D / 16], dvAcc[D / 16];
  zero(dkAcc);
  zero(dvAcc);
  for (int64_t hh = block.kh * block.group; hh < (block.kh + 1) * block.group;
       ++hh) {
    int64_t qBase = a.qOffset(block.bb, 0, hh), qStride = a.heads * a.d;
    int64_t statsBase = a.statsRow(block.bb, hh, 0);
    for (int64_t i0 = block.iBegin; i0 < block.iEnd; i0 += kTcTile) {
      __syncthreads();
      loadRows<D>(qs, q, qBase, qStride, i0, block.iEnd, a.d);
      loadRows<D>(dos, dout, qBase, qStride, i0, block.iEnd, a.d);
      for (int t = threadIdx.x; t < kTcTile; t += blockDim.x) {
        bool in = i0 + t < block.iEnd;
        lseTile[t] = in ? lse[statsBase + i0 + t] : 0.0f;
        dTile[t] = in ? rowDot[statsBase + i0 + t] : 0.0f;
      }
      __syncthreads();
      // S^T and dP^T: this warp's 16 keys against the tile's 64 queries.
      scoreTile<D>(scores, ks + warp * 16 * L::ldh, qs);
      scoreTile<D>(dp, vs + warp * 16 * L::ldh, dos);
      __syncwarp();
      for (int c = 0; c < kLaneColumns; ++c) {
        int col = 2 * c + parity;
        int64_t i = i0 + col;
        bool seen = j < a.s && i < block.iEnd && !a.masked(i, j);
        float p = seen ? expf(scores[r * L::lds + col] * a.scale - lseTile[col])
                       : 0.0f;
        probs[r * L::ldp + col] = __float2bfloat16_rn(p);
        ds[r * L::ldp + col] =
            __float2bfloat16_rn(p * (dp[r * L::lds + col] - dTile[col]));
      }
      __syncwarp();
      multiply<kTcTile>(dvAcc, probs, L::ldp, dos, L::ldh);
      multiply<kTcTile>(dkAcc, ds, L::ldp, qs, L::ldh);
    }
  }
  bool valid = j < a.s;
  int64_t at = valid ? a.kOffset(block.bb, j, block.kh) : 0;
  storeFragments(out, L::ldo, dkAcc);
  __syncwarp();
  if (valid)
    for (int c = parity; c < a.d; c += 2)
      store(dk, at + c, out[r * L::ldo + c] * a.scale);
  __syncwarp();
  storeFragments(out, L::ldo, dvAcc);
  __syncwarp();
  if (valid)
    for (int c = parity; c < a.d; c += 2)
      store(dv, at + c, out[r * L::ldo + c]);
}

// The register-resident kernels (WarpMatrix.cuh): the same blocks, tiles
// and arithmetic as the WMMA kernels above, but scores, probabilities and
// accumulators stay in registers. Lane l holds rows g = l / 4 and g + 8 of
// its warp's 16, at columns 8 n + 2 t and + 1 of each [16][8] column tile
// (t = l % 4): a row's statistics are complete across its 4 lanes.

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// The maximum (or sum) of a row over the 4 lanes that hold it.
__device__ __forceinline__ float rowMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullWarp, x, 2));
}
__device__ __forceinline__ float rowSum(float x) {
  x += __shfl_xor_sync(kFullWarp, x, 1);
  return x + __shfl_xor_sync(kFullWarp, x, 2);
}

/// The column of element e of column tile n in lane `lane`'s share.
__device__ __forceinline__ int tileColumn(int lane, int n, int e) {
  return 8 * n + 2 * (lane % 4) + e % 2;
}

/// Writes the lane's two rows of a [16][D] accumulator, row r times
/// factor[r], to y from element base + row[r] * stride on, columns below
/// d; rows at or past `limit` are not written.
template <int D>
__device__ void storeRows(Out y, const float (&acc)[D / 8][4],
                          const int64_t (&row)[2], int64_t base, int64_t stride,
                          const float (&factor)[2], int64_t limit, int64_t d) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= limit)
      continue;
    int64_t at = base + row[r] * stride;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        int c = tileColumn(lane, n, e);
        if (c < d)
          store(y, at + c, acc[n][e] * factor[r]);
      }
  }
}

/// Forward over a block of 64 query rows, as forwardKernel, in base 2 (the
/// scores times log2 e), whose log-sum-exp is converted back. Keys and
/// values stream through one tile each, as in FlashAttention-2: the values
/// of a tile load while its scores are formed, the next tile's keys while
/// P V is.
template <int D, bool WithOutput>
__global__ void __launch_bounds__(kTcThreads)
    registerForwardKernel(AttentionDims a, const bf16 *q, const bf16 *k,
                          const bf16 *v, Out o, float *lse) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  bf16 *qs = carve.take<bf16>(L::tile), *ks = carve.take<bf16>(L::tile),
       *vs = carve.take<bf16>(L::tile);

  QueryBlock block(a);
  loadRows<D>(qs, q, block.qBase, block.qStride, block.first, a.s, a.d);
  block.startTile<D>(ks, k, block.jBegin);
  commitCopies();
  __syncthreads();
  // The warp's query rows stay in registers (D / 2 a lane) for every tile.
  uint32_t rows[D / 16][4];
  loadOperands<D>(rows, qs + warp * 16 * L::ldh, L::ldh);
  int64_t i[2] = {block.first + warp * 16 + lane / 4,
                  block.first + warp * 16 + lane / 4 + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  float acc[D / 8][4];
  zeroTiles(acc);
  float scale = a.scale * kLog2e;
  for (int64_t j0 = block.jBegin; j0 < block.jEnd; j0 += kTcTile) {
    if constexpr (WithOutput)
      block.startTile<D>(vs, v, j0);
    commitCopies();
    waitCopies<1>(); // this tile's keys
    __syncthreads();
    float s[8][4];
    scores<D>(s, rows, ks, L::ldh);
    bool partial = block.partialTile(a, j0);
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t j = j0 + tileColumn(lane, n, e);
        bool seen = !partial || (j < block.jEnd && !a.masked(i[e / 2], j));
        s[n][e] = seen ? s[n][e] * scale : -INFINITY;
        tileMax[e / 2] = fmaxf(tileMax[e / 2], s[n][e]);
      }
    float reference[2], correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mNew = fmaxf(m[r], rowMax(tileMax[r]));
      // Rows that have seen no key yet keep zeros (and no NaN).
      reference[r] = mNew == -INFINITY ? 0.0f : mNew;
      correction[r] = exp2f(m[r] - reference[r]);
      m[r] = mNew;
      l[r] *= correction[r];
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2f(s[n][e] - reference[e / 2]);
        l[e / 2] += s[n][e];
      }
    __syncthreads(); // every warp is done with the keys
    if (j0 + kTcTile < block.jEnd)
      block.startTile<D>(ks, k, j0 + kTcTile);
    commitCopies();
    if constexpr (WithOutput) {
      waitCopies<1>(); // this tile's values
      __syncthreads();
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[n][e] *= correction[e / 2];
      uint32_t p[4][4];
      toOperands(p, s);
      accumulate<D>(acc, p, vs, L::ldh);
      __syncthreads(); // every warp is done with the values
    }
  }
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = rowSum(l[r]);
    inverse[r] = 1.0f / l[r];
    if (lse && lane % 4 == 0 && i[r] < a.s)
      lse[a.statsRow(block.bb, block.hh, i[r])] = (m[r] + log2f(l[r])) * kLn2;
  }
  if constexpr (WithOutput)
    storeRows<D>(o, acc, i, block.qBase, block.qStride, inverse, a.s, a.d);
}

/// dq for a block of 64 query rows, as queryGradientKernel. The values of
/// the next tile load while dS K is formed, its keys while dO V^T is.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    registerQueryGradientKernel(AttentionDims a, const bf16 *dout,
                                const bf16 *q, const bf16 *k, const bf16 *v,
                                Out dq, const float *lse, const float *rowDot) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  bf16 *qs = carve.take<bf16>(L::tile), *dos = carve.take<bf16>(L::tile),
       *ks = carve.take<bf16>(L::tile), *vs = carve.take<bf16>(L::tile);

  QueryBlock block(a);
  loadRows<D>(qs, q, block.qBase, block.qStride, block.first, a.s, a.d);
  loadRows<D>(dos, dout, block.qBase, block.qStride, block.first, a.s, a.d);
  block.startTile<D>(vs, v, block.jBegin);
  commitCopies();
  block.startTile<D>(ks, k, block.jBegin);
  commitCopies();
  int64_t i[2] = {block.first + warp * 16 + lane / 4,
                  block.first + warp * 16 + lane / 4 + 8};
  float rowLse[2], rowD[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int64_t row = a.statsRow(block.bb, block.hh, min(i[r], a.s - 1));
    rowLse[r] = lse[row];
    rowD[r] = rowDot[row];
  }
  float acc[D / 8][4];
  zeroTiles(acc);
  for (int64_t j0 = block.jBegin; j0 < block.jEnd; j0 += kTcTile) {
    bool more = j0 + kTcTile < block.jEnd;
    waitCopies<1>(); // this tile's values
    __syncthreads();
    float dp[8][4];
    scores<D>(dp, dos + warp * 16 * L::ldh, vs, L::ldh);
    __syncthreads(); // every warp is done with the values
    if (more)
      block.startTile<D>(vs, v, j0 + kTcTile);
    commitCopies();
    waitCopies<1>(); // this tile's keys
    __syncthreads();
    float s[8][4];
    scores<D>(s, qs + warp * 16 * L::ldh, ks, L::ldh);
    bool partial = block.partialTile(a, j0);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t j = j0 + tileColumn(lane, n, e);
        bool seen = !partial || (j < block.jEnd && !a.masked(i[e / 2], j));
        float p = seen ? expf(s[n][e] * a.scale - rowLse[e / 2]) : 0.0f;
        s[n][e] = p * (dp[n][e] - rowD[e / 2]); // dS
      }
    uint32_t ds[4][4];
    toOperands(ds, s);
    accumulate<D>(acc, ds, ks, L::ldh);
    __syncthreads(); // every warp is done with the keys
    if (more)
      block.startTile<D>(ks, k, j0 + kTcTile);
    commitCopies();
  }
  float scale[2] = {a.scale, a.scale};
  storeRows<D>(dq, acc, i, block.qBase, block.qStride, scale, a.s, a.d);
}

/// Adds this warp's share of dS K scale for a tile of queries to their
/// f32 sums in dqSum (laid out as q): dS^T, [64 keys][64 queries], is at
/// dsT (a row stride of ldp), the block's keys at ks; the warp takes the
/// tile's queries 16 w to 16 w + 15, which are rows from `first` of
/// [b, s, heads * d] at `base`, and skips those at or past `limit`. 32
/// columns at a time, so that the sums take 16 registers, not D / 2.
template <int D>
__device__ void addQueryGradient(const AttentionDims &a, const bf16 *dsT,
                                 const bf16 *ks, float *dqSum, int64_t base,
                                 int64_t first, int64_t limit) {
  using L = TcLayout<D>;
  constexpr int kColumns = 32;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t ds[4][4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    loadOperandTransposed(ds[k], dsT + warp * 16, L::ldp, k);
  int64_t stride = a.heads * a.d;
  int64_t row[2] = {first + warp * 16 + lane / 4,
                    first + warp * 16 + lane / 4 + 8};
#pragma unroll 1
  for (int c0 = 0; c0 < D; c0 += kColumns) {
    float part[kColumns / 8][4];
    zeroTiles(part);
    accumulate<kColumns>(part, ds, ks + c0, L::ldh);
    if (kQuadAtomics && a.d % 4 == 0) {
      // Lanes 2i and 2i + 1 hold 4 neighbouring columns of rows g and g + 8
      // (g = lane / 4) between them: the even lane gathers row g's, the odd
      // lane row g + 8's, and each adds its 4 by one atomic. Every row
      // starts, and so does each lane's first column, on 4 floats.
      bool odd = lane % 2;
      int64_t gathered = odd ? row[1] : row[0]; // a select, not a local array
      float *at = dqSum + base + gathered * stride;
#pragma unroll
      for (int n = 0; n < kColumns / 8; ++n) {
        float x[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          x[e] = part[n][e] * a.scale;
        float given[2] = {odd ? x[0] : x[2], odd ? x[1] : x[3]}, got[2];
#pragma unroll
        for (int e = 0; e < 2; ++e)
          got[e] = __shfl_xor_sync(kFullWarp, given[e], 1);
        int c = c0 + tileColumn(lane, n, 0) / 4 * 4;
        if (gathered < limit && c < a.d)
          atomicAddQuad(at + c, odd ? make_float4(got[0], got[1], x[2], x[3])
                                    : make_float4(x[0], x[1], got[0], got[1]));
      }
      continue;
    }
    // Else an atomic a value.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (row[r] >= limit)
        continue;
      float *at = dqSum + base + row[r] * stride;
#pragma unroll
      for (int n = 0; n < kColumns / 8; ++n) {
        int c = c0 + tileColumn(lane, n, 0);
        float x = part[n][2 * r] * a.scale, y = part[n][2 * r + 1] * a.scale;
        if (c >= a.d)
          continue;
        atomicAdd(at + c, x);
        if (c + 1 < a.d)
          atomicAdd(at + c + 1, y);
      }
    }
  }
}

/// dk and dv for a block of 64 key rows of one kv head, as
/// keyGradientKernel: S^T and dP^T have the warp's keys as rows, so P^T and
/// dS^T are the A operands of dv += P^T dO and dk += dS^T Q. The tiles of
/// queries (of every head sharing the kv head, one after another) stream
/// as keys do forward: the next Q tile loads while P^T dO is formed, the
/// next dO tile while S^T is. SumQueryGradient: dq too, in the same pass
/// (FlashAttention-2's backward), so S and dP are formed once, not again by
/// a dq kernel (5 products a tile, not 7): dS^T goes to shared memory, and
/// each warp adds dS K for 16 of the tile's queries to dqSum by f32 atomics
/// (addQueryGradient), whose order varies from run to run on a GPU.
template <int D, bool SumQueryGradient>
__global__ void __launch_bounds__(kTcThreads)
    registerKeyGradientKernel(AttentionDims a, const bf16 *dout, const bf16 *q,
                              const bf16 *k, const bf16 *v, Out dk, Out dv,
                              const float *lse, const float *rowDot,
                              float *dqSum) {
  using L = TcLayout<D>;
  PARTITA_DYNAMIC_SHARED(shared);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Carve carve{shared};
  auto [ks, vs, qs, dos, lseTile, dTile] = carve.keyTiles<D>();
  bf16 *dsTile = SumQueryGradient ? carve.take<bf16>(L::probs) : nullptr;

  KeyBlock block(a);
  block.loadKeys<D>(ks, vs, k, v, a);
  // Tile t: the block's query rows from iBegin + 64 (t % perHead), of head
  // kh group + t / perHead.
  int64_t perHead = (block.iEnd - block.iBegin + kTcTile - 1) / kTcTile;
  int64_t tiles = block.group * perHead;
  auto head = [&](int64_t t) { return block.kh * block.group + t / perHead; };
  auto rowsFrom = [&](int64_t t) {
    return block.iBegin + t % perHead * kTcTile;
  };
  // A tile's rows of x and, at once, their statistics from `stats` into
  // `column`.
  auto startTile = [&](bf16 *tile, const bf16 *x, float *column,
                       const float *stats, int64_t t) {
    int64_t hh = head(t), i0 = rowsFrom(t);
    loadRows<D, true>(tile, x, a.qOffset(block.bb, 0, hh), a.heads * a.d, i0,
                      block.iEnd, a.d);
    for (int c = threadIdx.x; c < kTcTile; c += blockDim.x)
      column[c] =
          i0 + c < block.iEnd ? stats[a.statsRow(block.bb, hh, i0 + c)] : 0.0f;
  };
  if (tiles > 0)
    startTile(qs, q, lseTile, lse, 0);
  commitCopies();
  if (tiles > 0)
    startTile(dos, dout, dTile, rowDot, 0);
  commitCopies();
  int64_t j[2] = {block.first + warp * 16 + lane / 4,
                  block.first + warp * 16 + lane / 4 + 8};
  float dkAcc[D / 8][4], dvAcc[D / 8][4];
  zeroTiles(dkAcc);
  zeroTiles(dvAcc);
  for (int64_t t = 0; t < tiles; ++t) {
    int64_t i0 = rowsFrom(t);
    bool more = t + 1 < tiles;
    // Some query of the tile is past the block's or masked for some key.
    bool partial = i0 + kTcTile > block.iEnd ||
                   (a.causal && block.first + kTcRows - 1 > i0) ||
                   (a.window > 0 && block.first <= i0 + kTcTile - 1 - a.window);
    waitCopies<1>(); // this tile's queries (and the block's keys, values)
    __syncthreads();
    float p[8][4];
    scores<D>(p, ks + warp * 16 * L::ldh, qs, L::ldh);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int c = tileColumn(lane, n, e);
        bool seen =
            !partial || (i0 + c < block.iEnd && !a.masked(i0 + c, j[e / 2]));
        p[n][e] = seen ? expf(p[n][e] * a.scale - lseTile[c]) : 0.0f;
      }
    waitCopies<0>(); // this tile's dO
    __syncthreads();
    float ds[8][4];
    scores<D>(ds, vs + warp * 16 * L::ldh, dos, L::ldh);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ds[n][e] = p[n][e] * (ds[n][e] - dTile[tileColumn(lane, n, e)]);
    uint32_t operand[4][4];
    toOperands(operand, ds);
    accumulate<D>(dkAcc, operand, qs, L::ldh);
    if constexpr (SumQueryGradient)
      storeOperands(dsTile + warp * 16 * L::ldp, L::ldp, operand);
    __syncthreads(); // every warp is done with the queries (and has its dS^T)
    if (more)
      startTile(qs, q, lseTile, lse, t + 1);
    commitCopies();
    __syncwarp(); // the warp's lanes meet before its ldmatrix and mma.sync
    toOperands(operand, p);
    accumulate<D>(dvAcc, operand, dos, L::ldh);
    __syncthreads(); // every warp is done with dO
    if (more)
      startTile(dos, dout, dTile, rowDot, t + 1);
    commitCopies();
    // The next tile's dS^T is stored after the __syncthreads above its S^T.
    if constexpr (SumQueryGradient)
      addQueryGradient<D>(a, dsTile, ks, dqSum, a.qOffset(block.bb, 0, head(t)),
                          i0, block.iEnd);
  }
  float scale[2] = {a.scale, a.scale}, one[2] = {1.0f, 1.0f};
  storeRows<D>(dk, dkAcc, j, block.kvBase, block.kvStride, scale, a.s, a.d);
  storeRows<D>(dv, dvAcc, j, block.kvBase, block.kvStride, one, a.s, a.d);
}

/// Launches `kernel` with `bytes` of dynamic shared memory, above the
/// 48 KiB a launch gets without asking.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, int bytes, cudaStream_t stream,
            Args... args) {
  cudaError_t status = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess)
    throw std::runtime_error(
        "the tensor-core attention's " + std::to_string(bytes) +
        " bytes of shared memory: " + cudaGetErrorString(status));
  launchKernel(kernel, grid, kTcThreads, bytes, stream, args...);
}

const bf16 *bf16s(In x) { return static_cast<const bf16 *>(x.data); }

template <int D>
void forward(const AttentionDims &a, In q, In k, In v, Out o, float *lse,
             cudaStream_t stream) {
  using L = TcLayout<D>;
  dim3 grid(unsigned((a.s + kTcRows - 1) / kTcRows), unsigned(a.heads),
            unsigned(a.b));
  auto run = [&](auto kernel, int bytes) {
    launch(kernel, grid, bytes, stream, a, bf16s(q), bf16s(k), bf16s(v), o,
           lse);
  };
  // mma and mma-atomic share the register-resident forward.
  bool registers = ownAttentionKernels() != AttentionKernels::Wmma;
  if (registers && o.data)
    run(registerForwardKernel<D, true>, L::registerForwardBytes);
  else if (registers)
    run(registerForwardKernel<D, false>, L::registerForwardBytes);
  else if (o.data)
    run(forwardKernel<D, true>, L::forwardBytes);
  else
    run(forwardKernel<D, false>, L::forwardBytes);
}

template <int D>
void backward(const AttentionDims &a, In dout, In q, In k, In v,
              const float *lse, const float *rowDot, Out dq, Out dk, Out dv,
              float *dqSum, cudaStream_t stream) {
  using L = TcLayout<D>;
  unsigned tiles = unsigned((a.s + kTcRows - 1) / kTcRows);
  dim3 queryGrid(tiles, unsigned(a.heads), unsigned(a.b)),
      keyGrid(tiles, unsigned(a.kvHeads), unsigned(a.b));
  auto queries = [&](auto kernel, int bytes) {
    launch(kernel, queryGrid, bytes, stream, a, bf16s(dout), bf16s(q), bf16s(k),
           bf16s(v), dq, lse, rowDot);
  };
  auto keys = [&](auto kernel, int bytes, auto... sums) {
    launch(kernel, keyGrid, bytes, stream, a, bf16s(dout), bf16s(q), bf16s(k),
           bf16s(v), dk, dv, lse, rowDot, sums...);
  };
  switch (ownAttentionKernels()) {
  case AttentionKernels::Cudnn:
  case AttentionKernels::Wmma:
    queries(queryGradientKernel<D>, L::queryBytes);
    keys(keyGradientKernel<D>, L::keyBytes);
    break;
  case AttentionKernels::Registers:
    queries(registerQueryGradientKernel<D>, L::registerQueryBytes);
    keys(registerKeyGradientKernel<D, false>, L::registerKeyBytes,
         static_cast<float *>(nullptr));
    break;
  case AttentionKernels::RegistersSummedDq: {
    int64_t n = a.b * a.s * a.heads * a.d;
    cudaError_t zeroed = cudaMemsetAsync(dqSum, 0, n * sizeof(float), stream);
    if (zeroed != cudaSuccess)
      throw std::runtime_error(
          std::string("zeroing the attention's dq sums: ") +
          cudaGetErrorString(zeroed));
    keys(registerKeyGradientKernel<D, true>, L::registerKeyQueryBytes, dqSum);
    transposeBlocks(f32In(dqSum), dq, 1, 1, n, stream);
    break;
  }
  }
}

} // namespace

AttentionKernels attentionKernels() {
  const char *choice = std::getenv("PARTITA_CUDA_ATTENTION");
  if (!choice)
    return cudnnBuilt() ? AttentionKernels::Cudnn : AttentionKernels::Registers;
  if (std::string(choice) == "wmma")
    return AttentionKernels::Wmma;
  if (std::string(choice) == "mma")
    return AttentionKernels::Registers;
  if (std::string(choice) == "mma-atomic")
    return AttentionKernels::RegistersSummedDq;
  if (std::string(choice) == "cudnn")
    return AttentionKernels::Cudnn;
  throw std::runtime_error(std::string("PARTITA_CUDA_ATTENTION=") + choice +
                           ": expected wmma, mma, mma-atomic or cudnn");
}

bool attentionKernelsNamed() {
  return std::getenv("PARTITA_CUDA_ATTENTION") != nullptr;
}

AttentionKernels ownAttentionKernels() {
  AttentionKernels kernels = attentionKernels();
  return kernels == AttentionKernels::Cudnn ? AttentionKernels::Registers
                                            : kernels;
}

bool attentionOnTensorCores(const AttentionShape &a, In q, In k, In v) {
  if (!q.bf16 || !k.bf16 || !v.bf16 || a.d > kMaxTcHeadDim)
    return false;
  // The dk, dv kernel takes the most.
  AttentionKernels kernels = ownAttentionKernels();
  int bytes = 0;
  byHeadDimBucket<kMaxTcHeadDim>(a.d, [&](auto D) {
    using L = TcLayout<decltype(D)::value>;
    bytes = kernels == AttentionKernels::Wmma        ? L::keyBytes
            : kernels == AttentionKernels::Registers ? L::registerKeyBytes
                                                     : L::registerKeyQueryBytes;
  });
  return a.sharedBytes >= bytes;
}

void tensorCoreAttention(const AttentionShape &shape, In q, In k, In v, Out o,
                         float *lse, cudaStream_t stream) {
  AttentionDims a = attentionDims(shape);
  byHeadDimBucket<kMaxTcHeadDim>(a.d, [&](auto D) {
    forward<decltype(D)::value>(a, q, k, v, o, lse, stream);
  });
}

void tensorCoreAttentionBackward(const AttentionShape &shape, In dout, In q,
                                 In k, In v, const float *lse,
                                 const float *rowDot, Out dq, Out dk, Out dv,
                                 float *dqSum, cudaStream_t stream) {
  AttentionDims a = attentionDims(shape);
  byHeadDimBucket<kMaxTcHeadDim>(a.d, [&](auto D) {
    backward<decltype(D)::value>(a, dout, q, k, v, lse, rowDot, dq, dk, dv,
                                 dqSum, stream);
  });
}

} // namespace partita::runtime::cuda
