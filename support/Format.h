//===- Format.h - Numbers in messages ---------------------------*- C++ -*-===//

#ifndef PARTITA_SUPPORT_FORMAT_H
#define PARTITA_SUPPORT_FORMAT_H

#include <cstdio>
#include <string>

namespace partita {

/// Formats a number for a message the way users write it: 0.5, 1e-05, 4096.
inline std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

} // namespace partita

#endif // PARTITA_SUPPORT_FORMAT_H
