//===- WarpMatrix.cuh - A warp's bf16 tensor-core products -----*- CUDA -*-===//
//
// The register-resident attention's building blocks: ldmatrix loads a
// warp's operands from shared memory and mma.sync.m16n8k16 multiplies them
// (bf16 in, f32 accumulated, sm_80 and later), so that a product's result
// stays in registers, where the softmax reads it and whence it becomes the
// next product's operand without a trip through shared memory. The CPU
// emulator runs the same instructions with the PTX ISA's register layouts
// (emulator/EmulatedWarpMatrix.h, which spells them out).
//
// The helpers below take a warp's 16 rows X of a [*][ld] bf16 tile and the
// 64 rows Y of another (ld elements a row, 16-byte aligned rows):
//   scores:     S (16 x 64, f32) = X Y^T over D columns;
//   accumulate: acc (16 x D, f32) += P Y, with P a 16 x 64 bf16 operand.
// A lane holds the [16][8] column tiles of S and acc as mma.sync's
// accumulator: c[n][0..1] at row g, columns 8 n + 2 t and + 1; c[n][2..3] at
// row g + 8 (lane l: g = l / 4, t = l % 4).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_WARPMATRIX_CUH
#define PARTITA_RUNTIME_CUDA_WARPMATRIX_CUH

#include <cuda_bf16.h>

#include <cstdint>

#ifdef PARTITA_CUDA_EMULATOR
#include "EmulatedWarpMatrix.h"
#endif

namespace partita::runtime::cuda {

/// Four 8x8 bf16 matrices, rows given by lanes 8 i to 8 i + 7 for matrix i;
/// with Transpose, each is loaded transposed.
template <bool Transpose>
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4],
                                             const __nv_bfloat16 *row) {
#ifdef PARTITA_CUDA_EMULATOR
  emulator::loadMatrices(r, row, Transpose);
#else
  unsigned address = unsigned(__cvta_generic_to_shared(row));
  if constexpr (Transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
#endif
}

/// d += A B for a [16][16] A and a [16][8] B (layouts above and in
/// EmulatedWarpMatrix.h).
__device__ __forceinline__ void multiplyAccumulate(float (&d)[4],
                                                   const uint32_t (&a)[4],
                                                   const uint32_t (&b)[2]) {
#ifdef PARTITA_CUDA_EMULATOR
  emulator::multiplyAccumulate(d, a, b);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

/// Two floats as a register of bf16 values, `low` in the low half.
__device__ __forceinline__ uint32_t packBf16(float low, float high) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(low))) |
         uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(high))) << 16;
}

/// A [16][64] f32 accumulator (8 column tiles) as the A operands of four
/// 16-column steps: an accumulator's rows and columns are where the A
/// operand wants them.
__device__ __forceinline__ void toOperands(uint32_t (&a)[4][4],
                                           const float (&c)[8][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    a[k][0] = packBf16(c[2 * k][0], c[2 * k][1]);
    a[k][1] = packBf16(c[2 * k][2], c[2 * k][3]);
    a[k][2] = packBf16(c[2 * k + 1][0], c[2 * k + 1][1]);
    a[k][3] = packBf16(c[2 * k + 1][2], c[2 * k + 1][3]);
  }
}

template <int N> __device__ __forceinline__ void zeroTiles(float (&c)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
    c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
}

/// The A operand of this warp's 16 rows at `x` (a row stride of ld
/// elements), columns [16 k, 16 k + 16): matrices (rows 0-7, columns 0-7),
/// (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are its registers 0 to 3.
__device__ __forceinline__ void
loadOperand(uint32_t (&a)[4], const __nv_bfloat16 *x, int ld, int k) {
  int lane = threadIdx.x % 32, matrix = lane / 8, row = lane % 8;
  loadMatrices<false>(a, x + (matrix % 2 * 8 + row) * ld + k * 16 +
                             matrix / 2 * 8);
}
/// Every 16-column step's A operand of those rows, D columns.
template <int D>
__device__ __forceinline__ void loadOperands(uint32_t (&a)[D / 16][4],
                                             const __nv_bfloat16 *x, int ld) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k)
    loadOperand(a[k], x, ld, k);
}

/// The A operand of this warp's 16 rows where the tile at `xt` holds X^T
/// (a row of it per column of X, ld elements apart): columns [16 k, 16 k +
/// 16) of X are rows [16 k, 16 k + 16) of the tile, loaded transposed.
__device__ __forceinline__ void loadOperandTransposed(uint32_t (&a)[4],
                                                      const __nv_bfloat16 *xt,
                                                      int ld, int k) {
  int lane = threadIdx.x % 32, matrix = lane / 8, row = lane % 8;
  loadMatrices<true>(a, xt + (16 * k + matrix / 2 * 8 + row) * ld +
                            matrix % 2 * 8);
}

/// Stores A operands of this warp's 16 rows (toOperands' layout) into the
/// [16][ld] bf16 rows at x: the inverse of loadOperands.
template <int K>
__device__ __forceinline__ void storeOperands(__nv_bfloat16 *x, int ld,
                                              const uint32_t (&a)[K][4]) {
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      *reinterpret_cast<uint32_t *>(x + (lane / 4 + r % 2 * 8) * ld + 16 * k +
                                    r / 2 * 8 + 2 * (lane % 4)) = a[k][r];
}

/// s += X Y^T over columns [16 k, 16 k + 16): `a` holds that step of X's
/// rows (loadOperands), Y is the 64 rows at `y` (a row stride of ld).
__device__ __forceinline__ void scoreStep(float (&s)[8][4],
                                          const uint32_t (&a)[4],
                                          const __nv_bfloat16 *y, int ld,
                                          int k) {
  int lane = threadIdx.x % 32, matrix = lane / 8, row = lane % 8;
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    // B = Y^T for Y rows 16 n to 16 n + 15: matrices (Y rows 0-7, columns
    // 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15), so that b[0..1] are the
    // first column tile's and b[2..3] the second's.
    uint32_t b[4];
    loadMatrices<false>(b, y + (16 * n + matrix / 2 * 8 + row) * ld + k * 16 +
                               matrix % 2 * 8);
    multiplyAccumulate(s[2 * n], a, {b[0], b[1]});
    multiplyAccumulate(s[2 * n + 1], a, {b[2], b[3]});
  }
}

/// s = X Y^T: X is this warp's 16 rows, as operands (loadOperands) or at
/// `x`, Y the 64 rows at `y`; D columns, a row stride of ld elements.
template <int D>
__device__ __forceinline__ void scores(float (&s)[8][4],
                                       const uint32_t (&a)[D / 16][4],
                                       const __nv_bfloat16 *y, int ld) {
  zeroTiles(s);
#pragma unroll
  for (int k = 0; k < D / 16; ++k)
    scoreStep(s, a[k], y, ld, k);
}
template <int D>
__device__ __forceinline__ void scores(float (&s)[8][4], const __nv_bfloat16 *x,
                                       const __nv_bfloat16 *y, int ld) {
  zeroTiles(s);
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    uint32_t a[4];
    loadOperand(a, x, ld, k);
    scoreStep(s, a, y, ld, k);
  }
}

/// acc += P Y: P is 16 x 64 (toOperands), Y the 64 rows at `y` with D
/// columns and a row stride of ld elements.
template <int D>
__device__ __forceinline__ void accumulate(float (&acc)[D / 8][4],
                                           const uint32_t (&p)[4][4],
                                           const __nv_bfloat16 *y, int ld) {
  int lane = threadIdx.x % 32, matrix = lane / 8, row = lane % 8;
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      // B = Y rows 16 k to 16 k + 15, columns 16 n to 16 n + 15, loaded
      // transposed: matrices (rows 0-7, columns 0-7), (8-15, 0-7), (0-7,
      // 8-15), (8-15, 8-15), so that b[0..1] are the first column tile's.
      uint32_t b[4];
      loadMatrices<true>(b, y + (16 * k + matrix % 2 * 8 + row) * ld + 16 * n +
                                matrix / 2 * 8);
      multiplyAccumulate(acc[2 * n], p[k], {b[0], b[1]});
      multiplyAccumulate(acc[2 * n + 1], p[k], {b[2], b[3]});
    }
}

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_WARPMATRIX_CUH
