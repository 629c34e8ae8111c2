//===- HostMemory.h - The host's memory, from /proc/meminfo -----*- C++ -*-===//

#ifndef PARTITA_RUNTIME_HOSTMEMORY_H
#define PARTITA_RUNTIME_HOSTMEMORY_H

#include <cstdint>
#include <fstream>
#include <string>

namespace partita::runtime {

/// Bytes of the host's /proc/meminfo field `field` ("MemAvailable",
/// "MemTotal"), or -1 where there is no such field.
inline int64_t hostMemoryBytes(const std::string &field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib;
  while (meminfo >> key >> kib) {
    if (key == field + ":")
      return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return -1;
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_HOSTMEMORY_H
