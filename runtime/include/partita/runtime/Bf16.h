//===- Bf16.h - bfloat16 storage --------------------------------*- C++ -*-===//
//
// A bf16 value is the upper half of an f32's bits. Buffers the plan types
// bf16 are stored that way; kernels compute in f32 and round what they
// write once, to nearest even.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_BF16_H
#define PARTITA_RUNTIME_BF16_H

#include <cstdint>
#include <cstring>

namespace partita::runtime {

/// `x` rounded to the nearest bf16 (ties to even); a NaN becomes the
/// canonical NaN, as the GPU's conversion gives it.
inline uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// n bf16 values as f32, and n f32 values rounded to bf16.
inline void widenBf16(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    dst[e] = fromBf16(src[e]);
}
inline void narrowBf16(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    dst[e] = toBf16(src[e]);
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_BF16_H
