//===- mma.h - WMMA for the CUDA emulator -----------------------*- C++ -*-===//
//
// The 16x16x16 bf16 tiles with f32 accumulation that the tensor-core
// attention uses. As on the GPU, each lane holds only its share of a
// fragment (here element e belongs to lane e % 32): a lane loads and stores
// its own elements, and mma_sync gathers the others' from the warp. So a
// lane that reads shared memory another lane wrote without a __syncwarp
// between sees the old values, as it may on the GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_EMULATOR_MMA_H
#define PARTITA_RUNTIME_CUDA_EMULATOR_MMA_H

#include "Emulator.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a;
struct matrix_b;
struct accumulator;
struct row_major;
struct col_major;
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has 16x16x16");

public:
  static constexpr int num_elements = 256;
  /// Element (row, column) of the tile at row * 16 + column; a lane uses
  /// only its own.
  T x[256];
};

namespace detail {

inline unsigned lane() { return ::partita::runtime::cuda::emulator::lane(); }

/// Element e of a tile in memory at `p` with leading dimension `ld`.
template <typename T> T &at(T *p, int e, unsigned ld, bool rowMajor) {
  int r = e / 16, c = e % 16;
  return rowMajor ? p[r * ld + c] : p[c * ld + r];
}

template <typename Layout> constexpr bool rowMajor() {
  return std::is_same_v<Layout, row_major>;
}

/// What the PTX ISA asks of a WMMA load or store: a 256-bit aligned
/// address and a leading dimension of a multiple of 16 bytes.
template <typename T> void checkTile(const T *p, unsigned ld) {
  namespace emu = ::partita::runtime::cuda::emulator;
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    emu::fail("a WMMA load or store at an address not 256-bit aligned");
  if (ld * sizeof(T) % 16 != 0)
    emu::fail("a WMMA leading dimension of " + std::to_string(ld) +
              " elements, not a multiple of 16 bytes");
}

} // namespace detail

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ld) {
  detail::checkTile(p, ld);
  for (int e = int(detail::lane()); e < 256; e += 32)
    f.x[e] = detail::at(p, e, ld, detail::rowMajor<Layout>());
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ld, layout_t layout) {
  detail::checkTile(p, ld);
  for (int e = int(detail::lane()); e < 256; e += 32)
    f.x[e] = detail::at(p, e, ld, layout == mem_row_major);
}

inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  detail::checkTile(p, ld);
  for (int e = int(detail::lane()); e < 256; e += 32)
    detail::at(p, e, ld, layout == mem_row_major) = f.x[e];
}

template <typename T>
void fill_fragment(fragment<accumulator, 16, 16, 16, T> &f, T value) {
  for (int e = int(detail::lane()); e < 256; e += 32)
    f.x[e] = value;
}

/// d = a b + c: bf16 products, exact in f32, summed in f32.
template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  namespace emu = ::partita::runtime::cuda::emulator;
  struct Operands {
    const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> *a;
    const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> *b;
  } mine{&a, &b};
  void *const *lanes = emu::shareInWarp(emu::kFullWarp, &mine);
  auto operands = [&](int e) {
    return static_cast<const Operands *>(lanes[e % 32]);
  };
  float result[256];
  for (int e = int(detail::lane()); e < 256; e += 32) {
    int r = e / 16, col = e % 16;
    float sum = c.x[e];
    for (int k = 0; k < 16; ++k)
      sum += __bfloat162float(operands(r * 16 + k)->a->x[r * 16 + k]) *
             __bfloat162float(operands(k * 16 + col)->b->x[k * 16 + col]);
    result[e] = sum;
  }
  emu::syncWarp(emu::kFullWarp); // every lane has read the others' operands
  for (int e = int(detail::lane()); e < 256; e += 32)
    d.x[e] = result[e];
}

} // namespace nvcuda::wmma

#endif // PARTITA_RUNTIME_CUDA_EMULATOR_MMA_H
