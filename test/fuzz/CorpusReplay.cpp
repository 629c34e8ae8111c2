//===- CorpusReplay.cpp - Run a fuzzer's corpus as a test -----------------===//
//
// Without libFuzzer, runs LLVMFuzzerTestOneInput on every file named on the
// command line (or in directories named there), so the crash-free corpus
// stays crash-free in every build.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/// What the target made of the inputs, where it says (a weak symbol).
__attribute__((weak)) std::string fuzzTargetSummary();

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (!fs::is_directory(argv[i], ec)) {
      files.push_back(argv[i]);
      continue;
    }
    for (fs::directory_iterator it(argv[i], ec), end; it != end && !ec;
         it.increment(ec))
      if (it->is_regular_file(ec))
        files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << argv[0] << ": no input files\n";
    return 1;
  }
  for (const std::string &file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::cerr << file << ": cannot read it\n";
      return 1;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                           bytes.size());
  }
  std::cout << "replayed " << files.size() << " inputs";
  if (fuzzTargetSummary)
    std::cout << ": " << fuzzTargetSummary();
  std::cout << "\n";
  return 0;
}
