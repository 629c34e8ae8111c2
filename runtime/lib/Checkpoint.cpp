//===- Checkpoint.cpp - Sharded, atomic checkpoints -----------------------===//

#include "partita/runtime/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace partita::runtime {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[4] = {'P', 'T', 'C', 'K'};
constexpr uint32_t kVersion = 1;

uint32_t crc32(const std::string &bytes) {
  static uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes)
    c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string stepDir(const std::string &dir, int64_t steps) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", (long long)steps);
  return (fs::path(dir) / name).string();
}

std::string rankFile(int64_t rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05lld.bin", (long long)rank);
  return name;
}

/// Writes `bytes` to `path` atomically: a temporary, fsync, rename, and
/// fsync of the directory.
void writeAtomically(const std::string &path, const std::string &bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw std::runtime_error(tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      ::close(fd);
      throw std::runtime_error(tmp + ": " + std::strerror(errno));
    }
    done += n;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    throw std::runtime_error(tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(path + ": " + std::strerror(errno));
  int dfd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

template <typename T> void put(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(T));
}

} // namespace

void saveCheckpoint(const Plan &plan, Trainer &trainer, Communicator &comm,
                    const std::string &dir, int64_t steps) {
  std::string here = stepDir(dir, steps);
  int64_t rank = comm.worldRank();
  if (rank == 0)
    fs::create_directories(here);
  comm.barrier();
  std::string bytes(kMagic, 4);
  put(bytes, kVersion);
  put(bytes, int64_t(steps));
  std::string body;
  uint32_t count = 0;
  trainer.forEachState([&](const BufferSpec &b, float *data) {
    put(body, uint32_t(b.name.size()));
    body += b.name;
    put(body, int64_t(b.elements));
    body.append(reinterpret_cast<const char *>(data), b.elements * 4);
    ++count;
  });
  put(bytes, count);
  bytes += body;
  writeAtomically((fs::path(here) / rankFile(rank)).string(), bytes);
  // Rank 0 learns every file's size and checksum, then writes the manifest.
  int64_t mine[2] = {int64_t(bytes.size()), int64_t(crc32(bytes))};
  comm.send(0, mine, sizeof(mine));
  if (rank == 0) {
    nlohmann::json files = nlohmann::json::object();
    for (int64_t r = 0; r < comm.worldSize(); ++r) {
      int64_t info[2];
      comm.recv(r, info, sizeof(info));
      files[rankFile(r)] = {{"bytes", info[0]}, {"crc32", info[1]}};
    }
    nlohmann::json manifest = {
        {"format", "partita-checkpoint"},
        {"version", kVersion},
        {"steps", steps},
        {"model", plan.model},
        {"strategy", plan.strategy},
        {"world_size", plan.worldSize},
        // Data is a function of the step (synthetic stream or file
        // position); no kernel draws random numbers.
        {"next_data_step", steps},
        {"rng", "none: training draws no random numbers"},
        {"files", files}};
    writeAtomically((fs::path(here) / "manifest.json").string(),
                    manifest.dump(1) + "\n");
  }
  comm.finishSends();
  comm.barrier();
  // Only now, with the new one complete, older ones go (the newest of them
  // stays, in case this one is damaged later).
  if (rank == 0) {
    std::vector<std::string> complete;
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().rfind("step-", 0) == 0 &&
          fs::exists(entry.path() / "manifest.json"))
        complete.push_back(entry.path().string());
    std::sort(complete.begin(), complete.end());
    for (size_t i = 0; i + 2 < complete.size(); ++i)
      fs::remove_all(complete[i]);
  }
}

int64_t loadNewestCheckpoint(const Plan &plan, Trainer &trainer,
                             Communicator &comm, const std::string &dir) {
  std::vector<std::string> candidates;
  if (fs::is_directory(dir))
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().rfind("step-", 0) == 0 &&
          fs::exists(entry.path() / "manifest.json"))
        candidates.push_back(entry.path().string());
  std::sort(candidates.rbegin(), candidates.rend());
  int64_t rank = comm.worldRank();
  for (const std::string &here : candidates) {
    nlohmann::json manifest;
    std::string problem;
    try {
      manifest = nlohmann::json::parse(readAll(here + "/manifest.json"));
    } catch (const std::exception &e) {
      problem = "manifest.json: " + std::string(e.what());
    }
    std::string file = rankFile(rank), bytes;
    if (problem.empty()) {
      bytes = readAll(here + "/" + file);
      const nlohmann::json &expect = manifest["files"][file];
      if (!expect.is_object())
        problem = file + ": not in the manifest";
      else if (int64_t(bytes.size()) != expect["bytes"].get<int64_t>())
        problem = file + ": " + std::to_string(bytes.size()) +
                  " bytes, the manifest says " +
                  std::to_string(expect["bytes"].get<int64_t>()) +
                  " (truncated?)";
      else if (int64_t(crc32(bytes)) != expect["crc32"].get<int64_t>())
        problem = file + ": checksum mismatch (corrupted)";
    }
    // Every rank must find its file intact, or none loads this one.
    float bad = problem.empty() ? 0.0f : 1.0f;
    if (!problem.empty())
      std::cerr << "plan-run: checkpoint " << here << ": " << problem
                << "; trying an older one\n";
    comm.allReduce("world", &bad, 1, true);
    if (bad > 0)
      continue;
    if (manifest["strategy"] != plan.strategy ||
        manifest["world_size"] != plan.worldSize)
      throw std::runtime_error("checkpoint " + here + " was saved under " +
                               manifest["strategy"].get<std::string>() +
                               " and this plan is " + plan.strategy +
                               "; loading it under another plan is not "
                               "supported yet");
    // Restore this rank's state buffers in order.
    size_t at = 4 + sizeof(uint32_t) + sizeof(int64_t) + sizeof(uint32_t);
    trainer.forEachState([&](const BufferSpec &b, float *data) {
      uint32_t length;
      std::memcpy(&length, bytes.data() + at, 4);
      std::string name = bytes.substr(at + 4, length);
      at += 4 + length;
      int64_t count;
      std::memcpy(&count, bytes.data() + at, 8);
      at += 8;
      if (name != b.name || count != b.elements)
        throw std::runtime_error(here + "/" + file + ": holds " + name +
                                 " where the plan has " + b.name);
      std::memcpy(data, bytes.data() + at, count * 4);
      at += count * 4;
    });
    return manifest["steps"].get<int64_t>();
  }
  return 0;
}

} // namespace partita::runtime
