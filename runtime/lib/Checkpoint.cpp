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
#include <map>
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

std::string globalEntry(const std::string &param, Trainer::StateKind kind) {
  switch (kind) {
  case Trainer::StateKind::Value:
    return param;
  case Trainer::StateKind::AdamM:
    return "adam_m:" + param;
  case Trainer::StateKind::AdamV:
    return "adam_v:" + param;
  case Trainer::StateKind::Master:
    break;
  }
  return "master:" + param;
}

/// The states a plan keeps per parameter: its value, AdamW's moments, and,
/// trained below f32, the f32 master copy.
std::vector<Trainer::StateKind> stateKinds(const Plan &plan) {
  using Kind = Trainer::StateKind;
  std::vector<Kind> kinds = {Kind::Value, Kind::AdamM, Kind::AdamV};
  if (plan.dtype != "f32")
    kinds.push_back(Kind::Master);
  return kinds;
}

/// The entries of a checkpoint file: name -> (offset of the values, count).
using FileIndex = std::map<std::string, std::pair<size_t, int64_t>>;

/// Reads the index of a checkpoint file that saveCheckpoint wrote after
/// `steps` steps into `index`, and returns why it cannot (empty when it
/// can). The manifest's size and CRC-32 match a file only as it was
/// written: a file written by something else could still name entries
/// past its end.
std::string readIndex(const std::string &bytes, int64_t steps,
                      FileIndex &index) {
  size_t at = 0;
  auto take = [&](void *to, size_t n) {
    if (bytes.size() - at < n)
      return false;
    std::memcpy(to, bytes.data() + at, n);
    at += n;
    return true;
  };
  char magic[4];
  uint32_t version, count;
  int64_t written;
  if (!take(magic, 4) || !take(&version, 4) || !take(&written, 8) ||
      !take(&count, 4))
    return "shorter than a checkpoint file's header";
  if (std::memcmp(magic, kMagic, 4) != 0)
    return "not a checkpoint file (no PTCK magic)";
  if (version != kVersion)
    return "format version " + std::to_string(version) + ", expected " +
           std::to_string(kVersion);
  if (written != steps)
    return "written after step " + std::to_string(written) +
           ", the manifest says " + std::to_string(steps);
  for (uint32_t k = 0; k < count; ++k) {
    std::string entry = "entry " + std::to_string(k);
    uint32_t length;
    int64_t n;
    if (!take(&length, 4) || bytes.size() - at < length)
      return entry + ": its name runs past the end of the file";
    std::string name = bytes.substr(at, length);
    at += length;
    if (!take(&n, 8) || n < 0 || uint64_t(n) > (bytes.size() - at) / 4)
      return entry + " (" + name + "): " + std::to_string(n) +
             " values run past the end of the file";
    if (!index.emplace(name, std::make_pair(at, n)).second)
      return entry + ": a second " + name;
    at += size_t(n) * 4;
  }
  if (at != bytes.size())
    return std::to_string(bytes.size() - at) + " bytes after the last entry";
  return "";
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

/// One line to stderr in one write, so that lines of ranks that print at
/// the same time do not interleave mid-line.
void say(const std::string &line) {
  std::string whole = line + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, whole.data(), whole.size());
  (void)ignored;
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

/// A checkpoint file being built: the header, then named f32 entries.
class FileWriter {
public:
  void add(const std::string &name, const float *values, int64_t count) {
    put(body, uint32_t(name.size()));
    body += name;
    put(body, count);
    body.append(reinterpret_cast<const char *>(values), count * 4);
    ++entries;
  }
  std::string bytes(int64_t steps) const {
    std::string out(kMagic, 4);
    put(out, kVersion);
    put(out, steps);
    put(out, entries);
    return out + body;
  }

private:
  std::string body;
  uint32_t entries = 0;
};

} // namespace

void saveCheckpoint(const Plan &plan, Trainer &trainer, Communicator &comm,
                    const std::string &dir, int64_t steps) {
  std::string here = stepDir(dir, steps);
  int64_t rank = comm.worldRank();
  if (rank == 0)
    fs::create_directories(here);
  comm.barrier();
  FileWriter state;
  trainer.readState([&](const BufferSpec &b, const float *data) {
    state.add(b.name, data, b.elements);
  });
  std::string bytes = state.bytes(steps);
  writeAtomically((fs::path(here) / rankFile(rank)).string(), bytes);
  // The unsharded parameters, moments and master weights, which any other
  // plan of the model can be sliced from.
  FileWriter global;
  for (const ParameterSpec &p : plan.parameters)
    for (Trainer::StateKind kind : stateKinds(plan)) {
      std::vector<float> values =
          trainer.gatherGlobal(p, trainer.stateBuffer(p, kind));
      if (rank == 0)
        global.add(globalEntry(p.name, kind), values.data(), values.size());
    }
  std::string globalFile;
  if (rank == 0) {
    globalFile = global.bytes(steps);
    writeAtomically((fs::path(here) / "global.bin").string(), globalFile);
  }
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
    files["global.bin"] = {{"bytes", int64_t(globalFile.size())},
                           {"crc32", int64_t(crc32(globalFile))}};
    nlohmann::json manifest = {
        {"format", "partita-checkpoint"},
        {"version", kVersion},
        {"steps", steps},
        {"model", plan.model},
        {"strategy", plan.strategy},
        {"dtype", plan.dtype},
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
    std::vector<std::string> complete = completeCheckpoints(dir);
    for (size_t i = 2; i < complete.size(); ++i)
      fs::remove_all(complete[i]);
  }
}

std::vector<std::string> completeCheckpoints(const std::string &dir) {
  std::vector<std::string> complete;
  if (fs::is_directory(dir))
    for (const auto &entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().rfind("step-", 0) == 0 &&
          fs::exists(entry.path() / "manifest.json"))
        complete.push_back(entry.path().string());
  // step-NNNNNNNN: newest first.
  std::sort(complete.rbegin(), complete.rend());
  return complete;
}

namespace {

/// Why a manifest is not one saveCheckpoint writes (empty when it is): a
/// damaged one is skipped like a damaged rank file.
std::string manifestProblem(const nlohmann::json &m) {
  auto is = [&](const char *key, bool (nlohmann::json::*kind)() const) {
    return m.is_object() && m.contains(key) && (m[key].*kind)();
  };
  if (!is("files", &nlohmann::json::is_object))
    return "manifest.json: no \"files\" object";
  for (const auto &[name, file] : m["files"].items())
    if (!file.is_object() || !file.contains("bytes") ||
        !file["bytes"].is_number_integer() || !file.contains("crc32") ||
        !file["crc32"].is_number_integer())
      return "manifest.json: files/" + name + " lacks integer bytes and crc32";
  if (!is("model", &nlohmann::json::is_string) ||
      !is("strategy", &nlohmann::json::is_string) ||
      !is("world_size", &nlohmann::json::is_number_integer))
    return "manifest.json: model, strategy or world_size missing";
  if (!is("steps", &nlohmann::json::is_number_integer) ||
      m["steps"].get<int64_t>() < 0)
    return "manifest.json: steps is not a count of steps";
  // Absent in checkpoints from before it was recorded (f32).
  if (m.contains("dtype") && m["dtype"] != "f32" && m["dtype"] != "bf16")
    return "manifest.json: dtype is neither f32 nor bf16";
  return "";
}

/// A tensor this rank takes from a checkpoint file: entry `entry` of the
/// file's index, into buffer `buffer` (of parameter `param`, resliced from
/// the unsharded tensor, when resharding).
struct Take {
  const ParameterSpec *param = nullptr;
  std::string buffer;
  FileIndex::const_iterator entry;
};

/// Finds the entries this rank restores from its own `file` (same plan) or
/// from global.bin (resharding a checkpoint of dtype `dtype`), or says
/// which is missing: before the ranks agree to load a checkpoint, so that
/// a file lacking an entry is skipped like a damaged one on every rank.
/// Throws std::runtime_error for a tensor of another size.
std::string findTakes(const Plan &plan, const Trainer &trainer,
                      const std::string &file, const FileIndex &index,
                      int64_t rank, bool samePlan, const std::string &dtype,
                      std::vector<Take> &takes) {
  const Coordinates &c = plan.devices[size_t(rank)];
  if (samePlan) {
    for (const BufferSpec &b : plan.programs[size_t(c.pp)].buffers) {
      if (!b.isState())
        continue;
      auto it = index.find(b.name);
      if (it == index.end() || it->second.second != b.elements)
        return "has no " + std::to_string(b.elements) + "-element buffer " +
               b.name;
      takes.push_back({nullptr, b.name, it});
    }
    return "";
  }
  using Kind = Trainer::StateKind;
  for (const ParameterSpec &p : plan.parameters) {
    int64_t elements = 1;
    for (int64_t d : p.globalShape)
      elements *= d;
    for (const ParameterHolder &h : p.holders) {
      if (h.ppRank != c.pp)
        continue;
      for (Kind kind : stateKinds(plan)) {
        // The most precise copy of the weights there is: an f32 plan takes
        // a bf16 run's master weights, a bf16 plan's master starts from an
        // f32 run's values.
        Kind stored = kind == Kind::Value && dtype != "f32"    ? Kind::Master
                      : kind == Kind::Master && dtype == "f32" ? Kind::Value
                                                               : kind;
        std::string entry = globalEntry(p.name, stored);
        auto it = index.find(entry);
        if (it == index.end())
          return "has no " + entry;
        // Another shape under the same model name is another model: an
        // error, where a missing entry is damage.
        if (it->second.second != elements)
          throw std::runtime_error(file + ": " + entry + " has " +
                                   std::to_string(it->second.second) +
                                   " elements, this plan's " + p.name + " " +
                                   std::to_string(elements));
        takes.push_back(
            {&p, kind == Kind::Value ? h.buffer : trainer.stateBuffer(p, kind),
             it});
      }
    }
  }
  return "";
}

} // namespace

int64_t loadNewestCheckpoint(const Plan &plan, Trainer &trainer,
                             Communicator &comm, const std::string &dir) {
  std::vector<std::string> candidates = completeCheckpoints(dir);
  int64_t rank = comm.worldRank();
  for (const std::string &here : candidates) {
    nlohmann::json manifest;
    std::string problem;
    try {
      manifest = nlohmann::json::parse(readAll(here + "/manifest.json"));
      problem = manifestProblem(manifest);
    } catch (const std::exception &e) {
      problem = "manifest.json: " + std::string(e.what());
    }
    // The same plan resumes from this rank's file; another plan of the
    // model (other ranks, strategy or dtype) re-slices the unsharded
    // tensors, whatever files its ranks wrote.
    // Checkpoints from before the dtype was recorded are f32.
    std::string dtype =
        problem.empty() ? manifest.value("dtype", std::string("f32")) : "";
    bool samePlan = problem.empty() && manifest["strategy"] == plan.strategy &&
                    manifest["world_size"] == plan.worldSize &&
                    dtype == plan.dtype;
    // Every rank reads the same manifest: another model is an error on all.
    if (problem.empty() && manifest["model"] != plan.model)
      throw std::runtime_error("checkpoint " + here + " is of model " +
                               manifest["model"].get<std::string>() +
                               ", this plan's is " + plan.model);
    std::string file = samePlan ? rankFile(rank) : "global.bin", bytes;
    FileIndex index;
    std::vector<Take> takes;
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
      else if (std::string why =
                   readIndex(bytes, manifest["steps"].get<int64_t>(), index);
               !why.empty())
        problem = file + ": " + why;
      else if (std::string why = findTakes(plan, trainer, here + "/" + file,
                                           index, rank, samePlan, dtype, takes);
               !why.empty())
        problem = file + ": " + why;
    }
    // Every rank must find its file intact, or none loads this one.
    if (!problem.empty())
      say("plan-run: checkpoint " + here + ": " + problem +
          "; trying an older one");
    if (comm.anyRank(!problem.empty()))
      continue;
    // Entries follow their names: not 4-byte aligned in the file.
    auto values = [&](const Take &t) {
      return bytes.data() + t.entry->second.first;
    };
    if (samePlan) {
      std::map<std::string, const Take *> byBuffer;
      for (const Take &t : takes)
        byBuffer[t.buffer] = &t;
      trainer.writeState([&](const BufferSpec &b, float *data) {
        std::memcpy(data, values(*byBuffer.at(b.name)), b.elements * 4);
      });
    } else {
      for (const Take &t : takes)
        trainer.fillFromGlobal(*t.param, t.buffer, [&](uint64_t i) {
          float value;
          std::memcpy(&value, values(t) + 4 * i, 4);
          return value;
        });
      if (rank == 0)
        say("plan-run: resharded checkpoint " + here + " from " +
            manifest["strategy"].get<std::string>() + " (" + dtype + ") to " +
            plan.strategy + " (" + plan.dtype + ")");
    }
    return manifest["steps"].get<int64_t>();
  }
  return 0;
}

} // namespace partita::runtime
