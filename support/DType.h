//===- DType.h - The element types a model trains in ------------*- C++ -*-===//
//
// Shared by the importer (the spec's `dtype`), the topology (peak FLOPs by
// type), the cost model and the simulator. Plain C++.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_SUPPORT_DTYPE_H
#define PARTITA_SUPPORT_DTYPE_H

#include <optional>
#include <string_view>

namespace partita {

enum class DType { BF16, F16, F32 };

/// The type's name in specs, reports and plans: bf16, f16 or f32.
inline const char *dtypeName(DType type) {
  switch (type) {
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "f32";
  }
  return "";
}

/// The type a spec names (bf16/bfloat16, f16/fp16/float16,
/// f32/fp32/float32), if any.
inline std::optional<DType> parseDType(std::string_view name) {
  for (auto [spelling, type] : {std::pair{"bf16", DType::BF16},
                                {"bfloat16", DType::BF16},
                                {"f16", DType::F16},
                                {"fp16", DType::F16},
                                {"float16", DType::F16},
                                {"f32", DType::F32},
                                {"fp32", DType::F32},
                                {"float32", DType::F32}})
    if (name == spelling)
      return type;
  return std::nullopt;
}

} // namespace partita

#endif // PARTITA_SUPPORT_DTYPE_H
