//===- LaunchConfig.h - Grid and tile sizes of the CUDA kernels -*- C++ -*-===//
//
// Plain arithmetic shared by the kernels and their host-side tests, which
// run without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_LAUNCHCONFIG_H
#define PARTITA_RUNTIME_CUDA_LAUNCHCONFIG_H

#include <cstddef>
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define PARTITA_HOST_DEVICE __host__ __device__
#else
#define PARTITA_HOST_DEVICE
#endif

namespace partita::runtime::cuda {

/// Threads per block of the elementwise kernels.
constexpr int kThreads = 256;
/// At most this many blocks; grid-stride loops cover the rest.
constexpr int64_t kMaxBlocks = 65535 * 16;

/// Blocks for n elements, one per thread: at least 1, at most kMaxBlocks.
inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

/// Elements a thread of the memory-bound kernels reads and writes together:
/// one 16-byte access of bf16 (two of f32). Accesses of 2 or 4 bytes a
/// thread keep too few bytes in flight to fill an H100's memory bandwidth.
constexpr int kPack = 8;
/// Packs of n elements, the last one partial.
PARTITA_HOST_DEVICE inline int64_t packsOf(int64_t n) {
  return (n + kPack - 1) / kPack;
}
/// Heads a thread of the rotary kernel takes: it forms a pack's angles
/// once for all of them, since by arithmetic an H200 takes about twice as
/// long for 8 f64 sines and cosines as for the 64 bytes of a head's pack
/// pair to move.
constexpr int64_t kRotaryHeadsPerThread = 8;
/// The rotary kernel's groups of heads.
PARTITA_HOST_DEVICE inline int64_t rotaryHeadGroups(int64_t heads) {
  return (heads + kRotaryHeadsPerThread - 1) / kRotaryHeadsPerThread;
}
/// Blocks for n elements, a pack per thread.
inline unsigned blocksForPacks(int64_t n, int threads = kThreads) {
  return blocksFor(packsOf(n), threads);
}

/// The norm kernels: a block per row (forward) or slab of rows (backward);
/// a thread owns packs t, t + threads, ... of a row, at most
/// kNormColumnsPerThread columns.
constexpr int kNormThreads = 512, kNormColumnsPerThread = 32;
constexpr int64_t kNormRowsPerBlock = 16;
constexpr int64_t kMaxNormWidth = int64_t(kNormThreads) * kNormColumnsPerThread;
/// Threads of the norm kernels over h columns: a pack each, in whole
/// warps, at most kNormThreads.
inline int normThreads(int64_t h) {
  int64_t packs = packsOf(h);
  return packs >= kNormThreads ? kNormThreads : int((packs + 31) / 32 * 32);
}
/// Rows of at most kNarrowNormPacks packs (a head's query or key norm) go
/// instead normRowLanes(h) lanes of a warp to a row, a pack a lane, in
/// blocks of kNarrowNormThreads; the backward's lane groups take
/// kNarrowNormRowsPerGroup rows each.
constexpr int kNarrowNormPacks = 32, kNarrowNormThreads = 256;
constexpr int64_t kNarrowNormRowsPerGroup = 16;
/// The lanes of a narrow row: a power of two, at least its packs; 0 for
/// rows wider than kNarrowNormPacks packs.
inline int normRowLanes(int64_t h) {
  int64_t packs = packsOf(h);
  if (packs > kNarrowNormPacks)
    return 0;
  int lanes = 1;
  while (lanes < packs)
    lanes *= 2;
  return lanes;
}

/// The CUDA-core attention: rowLanes<D>() lanes of a warp share a query (or
/// key) row, kColumnsPerLane columns each, kAttentionThreads threads a
/// block; the other side streams through two shared-memory tiles of
/// keyTile<D>() rows of D floats, 32 KiB together, under the 48 KiB of
/// static shared memory a block may have.
constexpr int kAttentionThreads = 256, kColumnsPerLane = 16;
constexpr int64_t kMaxHeadDim = 256;
template <int D> PARTITA_HOST_DEVICE constexpr int rowLanes() {
  static_assert(D % kColumnsPerLane == 0 && D / kColumnsPerLane <= 32,
                "a row's lanes lie within a warp");
  return D / kColumnsPerLane;
}
template <int D> PARTITA_HOST_DEVICE constexpr int attentionRowsPerBlock() {
  return kAttentionThreads / rowLanes<D>();
}
template <int D> PARTITA_HOST_DEVICE constexpr int keyTile() {
  return 4096 / D;
}
/// The head-dimension bucket (32, 64, 128 or 256) a head dimension runs in.
inline int headDimBucket(int64_t d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
}
/// Blocks along the rows of one (batch, head).
template <int D> unsigned attentionRowBlocks(int64_t s) {
  return unsigned((s + attentionRowsPerBlock<D>() - 1) /
                  attentionRowsPerBlock<D>());
}

/// Tensor-core attention (bf16, head dimension up to 128, run in tiles of
/// 32, 64 or 128 columns): 64 query (or key) rows a block, a warp per 16 of
/// them, the other side streamed in tiles of 64 rows. Shared-memory rows are
/// padded against bank conflicts and kept at multiples of 16 bytes, as WMMA
/// wants; each region starts 128-byte aligned.
constexpr int kTcRows = 64, kTcWarps = 4, kTcTile = 64;
constexpr int kTcThreads = kTcWarps * 32;
constexpr int64_t kMaxTcHeadDim = 128;
/// The opt-in dynamic shared memory of a block on sm_80 (163 KiB); sm_90
/// allows more.
constexpr int kMaxSharedBytes = 163 * 1024;
template <int D> struct TcLayout {
  static_assert(D % 16 == 0, "WMMA tiles are 16 wide");
  static constexpr int ldh = D + 8;       // a [64][D] bf16 tile
  static constexpr int lds = kTcTile + 4; // a warp's [16][64] f32 scores
  static constexpr int ldp = kTcTile + 8; // a warp's [16][64] bf16 values
  static constexpr int ldo = D + 4;       // a warp's [16][D] f32 rows
  static constexpr int region(int bytes) { return (bytes + 127) / 128 * 128; }
  static constexpr int tile = region(kTcRows * ldh * 2);
  static constexpr int scores = region(kTcWarps * 16 * lds * 4);
  static constexpr int probs = region(kTcWarps * 16 * ldp * 2);
  static constexpr int rows = region(kTcWarps * 16 * ldo * 4);
  static constexpr int column = region(kTcTile * 4);
  /// Forward (and the backward's statistics): q, k, v tiles, scores,
  /// probabilities, output rows.
  static constexpr int forwardBytes = 3 * tile + scores + probs + rows;
  /// dq: q, dO, k, v tiles, scores and dP, dS, dq rows.
  static constexpr int queryBytes = 4 * tile + 2 * scores + probs + rows;
  /// dk, dv: k, v, q, dO tiles, the queries' statistics, S^T and dP^T,
  /// P^T and dS^T, dk or dv rows.
  static constexpr int keyBytes =
      4 * tile + 2 * column + 2 * scores + 2 * probs + rows;
  /// The register-resident kernels keep scores, probabilities and output
  /// rows in registers: forward q, k, v tiles; dq q, dO, k, v tiles; dk, dv
  /// k, v, q, dO tiles and the queries' statistics.
  static constexpr int registerForwardBytes = 3 * tile;
  static constexpr int registerQueryBytes = 4 * tile;
  static constexpr int registerKeyBytes = 4 * tile + 2 * column;
  /// The one-pass backward's: those of dk, dv and the tile's dS^T.
  static constexpr int registerKeyQueryBytes = registerKeyBytes + probs;
};

/// Up to K tensors of one multi-tensor launch, passed by value among the
/// kernel's parameters (within the 4 KiB every driver takes), and where each
/// tensor ends in the launch's joined index space (in the units its kernel
/// counts: packs, packsOf, for AdamW and the gradient norm).
template <typename T, int K> struct TensorList {
  T tensors[K];
  int64_t end[K];
  int count;
};

/// Calls launch(list, length) for the tensors, K at a time, tensor t
/// taking length(t) of the joined index space.
template <int K, typename T, typename Length, typename Launch>
void forEachTensorList(const std::vector<T> &tensors, Length length,
                       Launch launch) {
  TensorList<T, K> list;
  list.count = 0;
  int64_t end = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    list.tensors[list.count] = tensors[k];
    end += length(tensors[k]);
    list.end[list.count++] = end;
    if (list.count == K || k + 1 == tensors.size()) {
      launch(list, end);
      list.count = 0;
      end = 0;
    }
  }
}

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_LAUNCHCONFIG_H
