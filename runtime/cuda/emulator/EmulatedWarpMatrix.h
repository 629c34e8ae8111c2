//===- EmulatedWarpMatrix.h - ldmatrix and mma.sync on the CPU --*- C++ -*-===//
//
// The two PTX instructions of the register-resident attention
// (WarpMatrix.cuh), with the register layouts the PTX ISA gives them:
// every lane passes its own registers, and each lane's results are computed
// from the whole warp's, as on the GPU. So a kernel that puts an element in
// the wrong lane or register half gets a wrong product here.
//
// In a lane l of a warp, g = l / 4 and t = l % 4; a 32-bit register holds
// two bf16 values, the lower-indexed in its low half.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_EMULATOR_EMULATEDWARPMATRIX_H
#define PARTITA_RUNTIME_CUDA_EMULATOR_EMULATEDWARPMATRIX_H

#include "Emulator.h"
#include "partita/runtime/Bf16.h"

#include <cstdint>
#include <cstring>

namespace partita::runtime::cuda::emulator {

inline uint16_t halfOf(uint32_t r, int high) {
  return uint16_t(high ? r >> 16 : r & 0xffffu);
}

/// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lanes 8i to 8i + 7
/// give the addresses of rows 0 to 7 of matrix i (16 bytes each, 16-byte
/// aligned). Register i of lane l gets matrix i's elements (g, 2t) and
/// (g, 2t + 1); with `transpose`, (2t, g) and (2t + 1, g).
inline void loadMatrices(uint32_t (&r)[4], const void *row, bool transpose) {
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
    fail("an ldmatrix row address not 16-byte aligned");
  void *const *lanes = shareInWarp(kFullWarp, const_cast<void *>(row));
  unsigned l = lane(), g = l / 4, t = l % 4;
  auto element = [&](int matrix, unsigned rowIndex, unsigned column) {
    uint16_t bits;
    std::memcpy(&bits,
                static_cast<const char *>(lanes[matrix * 8 + rowIndex]) +
                    2 * column,
                2);
    return uint32_t(bits);
  };
  uint32_t result[4];
  for (int i = 0; i < 4; ++i)
    result[i] = transpose
                    ? element(i, 2 * t, g) | element(i, 2 * t + 1, g) << 16
                    : element(i, g, 2 * t) | element(i, g, 2 * t + 1) << 16;
  syncWarp(kFullWarp); // every lane has read the others' addresses
  for (int i = 0; i < 4; ++i)
    r[i] = result[i];
}

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d = A B + d for a
/// [16][16] A, a [16][8] B and a [16][8] d. Lane l holds A's (g, 2t..2t+1)
/// in a[0], (g + 8, 2t..) in a[1], (g, 2t + 8..) in a[2] and (g + 8,
/// 2t + 8..) in a[3]; B's (2t..2t+1, g) in b[0] and (2t + 8.., g) in b[1];
/// d's (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) in d[0..3].
/// Products of bf16 values are exact in f32; they are summed in f32.
inline void multiplyAccumulate(float (&d)[4], const uint32_t (&a)[4],
                               const uint32_t (&b)[2]) {
  struct Operands {
    const uint32_t *a, *b;
  } mine{a, b};
  void *const *lanes = shareInWarp(kFullWarp, &mine);
  auto operands = [&](unsigned l) {
    return static_cast<const Operands *>(lanes[l]);
  };
  auto aAt = [&](unsigned row, unsigned k) {
    unsigned owner = (row % 8) * 4 + (k % 8) / 2;
    unsigned index = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return fromBf16(halfOf(operands(owner)->a[index], k % 2));
  };
  auto bAt = [&](unsigned k, unsigned column) {
    unsigned owner = column * 4 + (k % 8) / 2;
    return fromBf16(halfOf(operands(owner)->b[k >= 8 ? 1 : 0], k % 2));
  };
  unsigned l = lane(), g = l / 4, t = l % 4;
  float result[4];
  for (int e = 0; e < 4; ++e) {
    unsigned row = g + (e >= 2 ? 8 : 0), column = 2 * t + e % 2;
    float sum = d[e];
    for (unsigned k = 0; k < 16; ++k)
      sum += aAt(row, k) * bAt(k, column);
    result[e] = sum;
  }
  syncWarp(kFullWarp); // every lane has read the others' operands
  for (int e = 0; e < 4; ++e)
    d[e] = result[e];
}

} // namespace partita::runtime::cuda::emulator

#endif // PARTITA_RUNTIME_CUDA_EMULATOR_EMULATEDWARPMATRIX_H
