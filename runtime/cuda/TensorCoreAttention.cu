//===- TensorCoreAttention.cu - Flash attention on tensor cores -----------===//
//
// For bf16 q, k, v (and dO) with head dimension up to 128, the products of
// attention - Q K^T and P V forward; dO V^T, dS K, P^T dO and dS^T Q
// backward - run as 16x16x16 bf16 WMMA tiles with f32 accumulation. The
// softmax and its statistics stay f32; P and dS are rounded to bf16 for
// their products, as FlashAttention-2 does. The s x s scores are never
// stored: 64 query (or key) rows a block, a warp per 16 of them, stream the
// other side through shared memory 64 rows at a time (LaunchConfig.h).
//
// Within a warp's [16][64] score tile, lane l owns row l / 2 and the
// columns of parity l % 2 (neighbouring lanes read neighbouring words, in
// different banks); both lanes of a row keep its running max and sum. The
// same holds for a warp's [16][D] output rows.
//
// A head dimension d runs in the smallest D of 32, 64 and 128 that holds it:
// columns d to D of the tiles are zero, so the products are those of d
// columns, and only d are written.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.cuh"
#include "LaunchConfig.h"

#include <mma.h>

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

/// Successive regions of dynamic shared memory, each TcLayout-sized.
struct Carve {
  char *at;
  template <typename T> __device__ T *take(int bytes) {
    T *p = reinterpret_cast<T *>(at);
    at += bytes;
    return p;
  }
};

/// Rows [first, first + 64) of a bf16 tensor whose row r starts at element
/// base + r * stride and has d columns, into a [64][ldh] tile; rows at or
/// past `limit` and columns at or past d are zero (masked rows and padding:
/// zero keeps NaN out of the products and adds nothing to them).
template <int D>
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
      uint4 v =
          row < limit && c < d
              ? *reinterpret_cast<const uint4 *>(x + base + row * stride + c)
              : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4 *>(tile + r * TcLayout<D>::ldh + c) = v;
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
  bf16 *ks = carve.take<bf16>(L::tile), *vs = carve.take<bf16>(L::tile),
       *qs = carve.take<bf16>(L::tile), *dos = carve.take<bf16>(L::tile);
  float *lseTile = carve.take<float>(L::column);
  float *dTile = carve.take<float>(L::column);
  float *scores = carve.take<float>(L::scores) + warp * 16 * L::lds;
  float *dp = carve.take<float>(L::scores) + warp * 16 * L::lds;
  bf16 *probs = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  bf16 *ds = carve.take<bf16>(L::probs) + warp * 16 * L::ldp;
  float *out = carve.take<float>(L::rows) + warp * 16 * L::ldo;

  int64_t bb = blockIdx.z, kh = blockIdx.y, group = a.heads / a.kvHeads;
  int64_t first = int64_t(blockIdx.x) * kTcRows;
  int64_t last = min(a.s - 1, first + kTcRows - 1);
  int64_t kvBase = a.kOffset(bb, 0, kh), kvStride = a.kvHeads * a.d;
  loadRows<D>(ks, k, kvBase, kvStride, first, a.s, a.d);
  loadRows<D>(vs, v, kvBase, kvStride, first, a.s, a.d);
  int r = lane / 2, parity = lane % 2;
  int64_t j = first + warp * 16 + r;
  FragC dkAcc[D / 16], dvAcc[D / 16];
  zero(dkAcc);
  zero(dvAcc);
  int64_t iBegin, iEnd;
  a.queryRange(first, last, iBegin, iEnd);
  for (int64_t hh = kh * group; hh < (kh + 1) * group; ++hh) {
    int64_t qBase = a.qOffset(bb, 0, hh), qStride = a.heads * a.d;
    int64_t statsBase = a.statsRow(bb, hh, 0);
    for (int64_t i0 = iBegin; i0 < iEnd; i0 += kTcTile) {
      __syncthreads();
      loadRows<D>(qs, q, qBase, qStride, i0, iEnd, a.d);
      loadRows<D>(dos, dout, qBase, qStride, i0, iEnd, a.d);
      for (int t = threadIdx.x; t < kTcTile; t += blockDim.x) {
        bool in = i0 + t < iEnd;
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
        bool seen = j < a.s && i < iEnd && !a.masked(i, j);
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
  int64_t at = valid ? a.kOffset(bb, j, kh) : 0;
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
  dim3 grid(unsigned((a.s + kTcRows - 1) / kTcRows), unsigned(a.heads),
            unsigned(a.b));
  if (o.data)
    launch(forwardKernel<D, true>, grid, TcLayout<D>::forwardBytes, stream, a,
           bf16s(q), bf16s(k), bf16s(v), o, lse);
  else
    launch(forwardKernel<D, false>, grid, TcLayout<D>::forwardBytes, stream, a,
           bf16s(q), bf16s(k), bf16s(v), o, lse);
}

template <int D>
void backward(const AttentionDims &a, In dout, In q, In k, In v,
              const float *lse, const float *rowDot, Out dq, Out dk, Out dv,
              cudaStream_t stream) {
  using L = TcLayout<D>;
  unsigned tiles = unsigned((a.s + kTcRows - 1) / kTcRows);
  launch(queryGradientKernel<D>, dim3(tiles, unsigned(a.heads), unsigned(a.b)),
         L::queryBytes, stream, a, bf16s(dout), bf16s(q), bf16s(k), bf16s(v),
         dq, lse, rowDot);
  launch(keyGradientKernel<D>, dim3(tiles, unsigned(a.kvHeads), unsigned(a.b)),
         L::keyBytes, stream, a, bf16s(dout), bf16s(q), bf16s(k), bf16s(v), dk,
         dv, lse, rowDot);
}

} // namespace

bool attentionOnTensorCores(const AttentionShape &a, In q, In k, In v) {
  if (!q.bf16 || !k.bf16 || !v.bf16 || a.d > kMaxTcHeadDim)
    return false;
  // The dk, dv kernel takes the most.
  int bytes = 0;
  byHeadDimBucket<kMaxTcHeadDim>(
      a.d, [&](auto D) { bytes = TcLayout<decltype(D)::value>::keyBytes; });
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
                                 cudaStream_t stream) {
  AttentionDims a = attentionDims(shape);
  byHeadDimBucket<kMaxTcHeadDim>(a.d, [&](auto D) {
    backward<decltype(D)::value>(a, dout, q, k, v, lse, rowDot, dq, dk, dv,
                                 stream);
  });
}

} // namespace partita::runtime::cuda
