//===- Paths.h - The files a tool reads and writes --------------*- C++ -*-===//
//
// Header-only and C++17, for the compiler's tools and the runtime's alike.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_SUPPORT_PATHS_H
#define PARTITA_SUPPORT_PATHS_H

#include <filesystem>
#include <string>
#include <vector>

namespace partita {

/// Whether two paths name one file: the same file where both exist
/// (through links, `.` and `..`), else the same path once normalised.
inline bool samePath(const std::string &a, const std::string &b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec))
    return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

/// A file a tool reads or writes, with how messages name it ("--trace",
/// "the plan").
struct NamedFile {
  std::string name, path;
};

/// Why a tool cannot write `outputs`, or empty: two at one path would
/// overwrite each other, and one at an input's path the input (`writer`
/// names who would: "the run"). Empty paths, "-" (a standard stream) and
/// devices are left out.
inline std::string outputClash(const std::vector<NamedFile> &outputs,
                               const std::vector<NamedFile> &inputs,
                               const std::string &writer) {
  // /dev/null and other devices take any number of writers.
  auto isFile = [](const std::string &path) {
    std::error_code ec;
    return !path.empty() && path != "-" &&
           (!std::filesystem::exists(path, ec) ||
            std::filesystem::is_regular_file(path, ec));
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedFile &out = outputs[i];
    if (!isFile(out.path))
      continue;
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (isFile(outputs[j].path) && samePath(out.path, outputs[j].path))
        return out.name + " and " + outputs[j].name + " both write " + out.path;
    for (const NamedFile &in : inputs)
      if (isFile(in.path) && samePath(out.path, in.path))
        return out.name + ": " + out.path + " is " + in.name + "; " + writer +
               " would overwrite it";
  }
  return "";
}

} // namespace partita

#endif // PARTITA_SUPPORT_PATHS_H
