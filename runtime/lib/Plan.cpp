//===- Plan.cpp - plan.json in memory -------------------------------------===//

#include "partita/runtime/Plan.h"

#include "KernelShapes.h"
#include "PlanWalk.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace partita::runtime {

namespace {

using json = nlohmann::json;

/// The most elements a buffer or parameter may have.
constexpr int64_t kMaxElements = int64_t(1) << 48;

/// Reads fields with errors that say where: "plan.json: /programs/0/...".
class Reader {
public:
  explicit Reader(std::string file) : file(std::move(file)) {}

  /// `path` is a JSON pointer; the document's root ("") is left out.
  [[noreturn]] void fail(const std::string &path, const std::string &what) {
    throw std::runtime_error(file + ": " + (path.empty() ? "" : path + ": ") +
                             what);
  }
  const json &at(const json &object, const std::string &path, const char *key) {
    if (!object.is_object() || !object.contains(key))
      fail(path, std::string("missing \"") + key + "\"");
    return object.at(key);
  }
  int64_t integer(const json &object, const std::string &path,
                  const char *key) {
    const json &v = at(object, path, key);
    if (!v.is_number_integer())
      fail(path + "/" + key, "expected an integer");
    return v.get<int64_t>();
  }
  double number(const json &object, const std::string &path, const char *key) {
    const json &v = at(object, path, key);
    if (!v.is_number())
      fail(path + "/" + key, "expected a number");
    return v.get<double>();
  }
  std::string string(const json &object, const std::string &path,
                     const char *key) {
    const json &v = at(object, path, key);
    if (!v.is_string())
      fail(path + "/" + key, "expected a string");
    return v.get<std::string>();
  }
  /// Fails on a key of `object` that `keys` does not name, so that a
  /// misspelt or misplaced field is not silently ignored.
  void known(const json &object, const std::string &path,
             std::initializer_list<const char *> keys) {
    if (!object.is_object())
      return;
    for (const auto &[key, value] : object.items())
      if (std::none_of(keys.begin(), keys.end(),
                       [&, &key = key](const char *k) { return key == k; })) {
        std::string expected;
        for (const char *k : keys)
          expected += (expected.empty() ? "" : ", ") + std::string(k);
        fail(path + "/" + key,
             "unknown key (expected one of " + expected + ")");
      }
  }
  const json &array(const json &object, const std::string &path,
                    const char *key) {
    const json &v = at(object, path, key);
    if (!v.is_array())
      fail(path + "/" + key, "expected an array");
    return v;
  }
  /// An optional field of type T (bool, int64_t or std::string), or
  /// `otherwise` when it is absent.
  template <typename T>
  T optional(const json &object, const std::string &path, const char *key,
             T otherwise) {
    if (!object.is_object() || !object.contains(key))
      return otherwise;
    const json &v = object.at(key);
    bool fits = std::is_same_v<T, bool>      ? v.is_boolean()
                : std::is_same_v<T, int64_t> ? v.is_number_integer()
                                             : v.is_string();
    if (!fits)
      fail(path + "/" + key, std::is_same_v<T, bool> ? "expected true or false"
                             : std::is_same_v<T, int64_t>
                                 ? "expected an integer"
                                 : "expected a string");
    return v.get<T>();
  }
  std::vector<int64_t> shape(const json &object, const std::string &path,
                             const char *key) {
    const json &v = at(object, path, key);
    if (!v.is_array())
      fail(path + "/" + key, "expected an array of sizes");
    std::vector<int64_t> out;
    // Positive, and a product a buffer of any dtype can address.
    int64_t elements = 1;
    for (const json &d : v) {
      if (!d.is_number_integer() || d.get<int64_t>() < 1)
        fail(path + "/" + key, "expected positive integer sizes");
      out.push_back(d.get<int64_t>());
      if (out.back() > kMaxElements / elements)
        fail(path + "/" + key, "more than 2^48 elements");
      elements *= out.back();
    }
    return out;
  }

private:
  std::string file;
};

BufferKind parseKind(Reader &r, const std::string &path,
                     const std::string &kind) {
  static const std::map<std::string, BufferKind> kinds = {
      {"tokens", BufferKind::Tokens},
      {"labels", BufferKind::Labels},
      {"activation", BufferKind::Activation},
      {"activation_grad", BufferKind::ActivationGrad},
      {"param", BufferKind::Param},
      {"param_shard", BufferKind::ParamShard},
      {"param_grad", BufferKind::ParamGrad},
      {"grad_shard", BufferKind::GradShard},
      {"optimizer_state", BufferKind::OptimizerState},
      {"scalar", BufferKind::Scalar},
      {"param_gathered", BufferKind::ParamGathered}};
  auto it = kinds.find(kind);
  if (it == kinds.end())
    r.fail(path, "unknown buffer kind \"" + kind + "\"");
  return it->second;
}

/// The program's kept sets: the arena ranges that hold a chunk's kept
/// activations, one range per micro-batch.
void readKeptSets(Reader &r, const json &p, const std::string &path,
                  int64_t numMicroBatches, Program &program) {
  if (!p.contains("kept_sets"))
    return;
  const json &sets = r.array(p, path, "kept_sets");
  for (size_t i = 0; i < sets.size(); ++i) {
    std::string at = path + "/kept_sets/" + std::to_string(i);
    r.known(sets[i], at, {"chunk", "bytes", "offsets"});
    KeptSet set;
    set.chunk = r.integer(sets[i], at, "chunk");
    set.bytes = r.integer(sets[i], at, "bytes");
    if (set.bytes < 0 || set.bytes > program.arenaBytes)
      r.fail(at + "/bytes", "expected a size from 0 to the arena's " +
                                std::to_string(program.arenaBytes) + " bytes");
    const json &offsets = r.array(sets[i], at, "offsets");
    if (int64_t(offsets.size()) != numMicroBatches)
      r.fail(at + "/offsets", "expected one offset per micro-batch (" +
                                  std::to_string(numMicroBatches) + ")");
    for (size_t k = 0; k < offsets.size(); ++k) {
      int64_t offset = offsets[k].is_number_integer()
                           ? offsets[k].get<int64_t>()
                           : int64_t(-1);
      if (offset < 0 || offset > program.arenaBytes - set.bytes)
        r.fail(at + "/offsets/" + std::to_string(k),
               "expected an offset at which the set's " +
                   std::to_string(set.bytes) + " bytes lie in the arena");
      set.offsets.push_back(offset);
    }
    program.keptSets.push_back(std::move(set));
  }
}

/// A buffer of the program (at `at`), against the arena and the kept sets
/// read before it.
BufferSpec readBuffer(Reader &r, const json &buffer, const std::string &at,
                      const Program &program) {
  r.known(buffer, at,
          {"name", "kind", "dtype", "shape", "bytes", "offset", "copies",
           "param", "dp_shard", "kept_set", "set_offset"});
  BufferSpec b;
  b.name = r.string(buffer, at, "name");
  b.kind = parseKind(r, at + "/kind", r.string(buffer, at, "kind"));
  std::string dtype = r.string(buffer, at, "dtype");
  b.isInt = dtype == "i32";
  b.isBf16 = dtype == "bf16";
  if (!b.isInt && !b.isBf16 && dtype != "f32")
    r.fail(at + "/dtype", "the runtime runs f32 and bf16 plans; this "
                          "buffer is " +
                              dtype + " (compile with --dtype=bf16 or f32)");
  b.shape = r.shape(buffer, at, "shape");
  b.param = r.optional<std::string>(buffer, at, "param", "");
  b.dpShard = r.optional<bool>(buffer, at, "dp_shard", false);
  if ((!b.param.empty() || b.dpShard) && !b.ofParameter())
    r.fail(at, "\"param\" and \"dp_shard\" belong to parameter, "
               "gradient and optimizer buffers, not to " +
                   r.string(buffer, at, "kind") + " buffer " + b.name);
  b.elements = 1;
  for (int64_t d : b.shape)
    b.elements *= d;
  if (buffer.contains("offset")) {
    b.offset = r.integer(buffer, at, "offset");
    b.copies = r.integer(buffer, at, "copies");
    if (b.offset < 0 || b.copies < 1 || b.copies > (int64_t(1) << 20))
      r.fail(at + "/offset", "a negative offset, or copies not from 1 to 2^20");
  }
  if (buffer.contains("kept_set")) {
    b.keptSet = r.integer(buffer, at, "kept_set");
    b.setOffset = r.integer(buffer, at, "set_offset");
    if (b.offset >= 0)
      r.fail(at, "both an offset and a kept set");
    if (b.keptSet < 0 || b.keptSet >= int64_t(program.keptSets.size()))
      r.fail(at + "/kept_set", "not an index into the program's kept_sets");
    const KeptSet &set = program.keptSets[size_t(b.keptSet)];
    if (b.setOffset < 0 || b.setOffset > set.bytes - b.bytes())
      r.fail(at + "/set_offset", std::to_string(b.bytes()) + " bytes from " +
                                     std::to_string(b.setOffset) +
                                     " end beyond the set's " +
                                     std::to_string(set.bytes) + " bytes");
  }
  if (program.arenaBytes > 0 && b.offset < 0 && b.keptSet < 0)
    r.fail(at, "no offset in the memory plan, which the program has");
  // (Divided, not multiplied: an offset near 2^63 must not wrap around.)
  if (program.arenaBytes > 0 && b.offset >= 0 &&
      (b.offset > program.arenaBytes ||
       (b.bytes() > 0 &&
        b.copies > (program.arenaBytes - b.offset) / b.bytes())))
    r.fail(at + "/offset", std::to_string(b.copies) + " x " +
                               std::to_string(b.bytes()) + " bytes from " +
                               std::to_string(b.offset) +
                               " end beyond the arena of " +
                               std::to_string(program.arenaBytes) + " bytes");
  return b;
}

/// The launches of one program: each against the program's buffers and
/// the plan's groups.
class LaunchReader {
public:
  LaunchReader(Reader &r, const Program &program,
               const decltype(Plan::groups) &groups)
      : r(r), program(program), groups(groups) {}

  Launch read(const json &l, const std::string &lat) {
    std::string op = r.string(l, lat, "op");
    checkKeysAndStream(l, lat, op);
    Launch launch;
    if (op == "kernel") {
      kernel(l, lat, launch);
    } else if (op == "collective") {
      collective(l, lat, launch);
    } else if (op == "wait") {
      launch.op = Launch::Op::Wait;
      launch.input = buffer(r.at(l, lat, "buffer"), lat + "/buffer");
      launch.firstMicroBatch = r.optional(l, lat, "first_micro_batch", false);
    } else if (op == "send" || op == "recv") {
      launch.op = op == "send" ? Launch::Op::Send : Launch::Op::Recv;
      launch.input = buffer(r.at(l, lat, "buffer"), lat + "/buffer");
      std::string peer = r.string(l, lat, "peer");
      if (peer != "next" && peer != "prev")
        r.fail(lat + "/peer", "expected next or prev, got \"" + peer + "\"");
      launch.toNext = peer == "next";
    } else {
      r.fail(lat + "/op", "unknown launch \"" + op + "\"");
    }
    return launch;
  }

private:
  int buffer(const json &name, const std::string &at) {
    if (!name.is_string())
      r.fail(at, "expected a buffer name");
    auto it = program.bufferIndex.find(name.get<std::string>());
    if (it == program.bufferIndex.end())
      r.fail(at, "no buffer \"" + name.get<std::string>() + "\"");
    return it->second;
  }

  void kernel(const json &l, const std::string &lat, Launch &launch) {
    launch.op = Launch::Op::Kernel;
    std::string name = r.string(l, lat, "kernel");
    std::optional<Kernel> known = plan::kernelNamed(name);
    if (!known)
      r.fail(lat + "/kernel", "unknown kernel \"" + name + "\"");
    launch.kernel = *known;
    const plan::KernelInfo &kernel = plan::info(*known);
    for (const json &n : r.array(l, lat, "ins"))
      launch.ins.push_back(buffer(n, lat + "/ins"));
    for (const json &n : r.array(l, lat, "outs"))
      launch.outs.push_back(buffer(n, lat + "/outs"));
    auto count = [&](const char *what, size_t n, unsigned min, unsigned max) {
      if (!plan::countWithin(n, min, max))
        r.fail(lat + "/" + what,
               launch.kernelName() + " takes " + std::to_string(min) +
                   (max == min               ? ""
                    : max == plan::kAnyCount ? " or more"
                                             : " to " + std::to_string(max)) +
                   " " + what + ", got " + std::to_string(n));
    };
    count("ins", launch.ins.size(), kernel.minIns, kernel.maxIns);
    count("outs", launch.outs.size(), kernel.minOuts, kernel.maxOuts);
    launch.accumulate.assign(launch.outs.size(), false);
    if (l.contains("accumulate")) {
      const json &flags = l["accumulate"];
      if (!flags.is_array() || flags.size() != launch.outs.size() ||
          !std::all_of(flags.begin(), flags.end(),
                       [](const json &f) { return f.is_boolean(); }))
        r.fail(lat + "/accumulate", "expected a true or false per output");
      for (size_t k = 0; k < launch.outs.size(); ++k)
        launch.accumulate[k] = flags[k].get<bool>();
    }
    launch.params = l.value("params", json::object());
    if (!launch.params.is_object())
      r.fail(lat + "/params", "expected an object");
    if (l.contains("layer")) {
      launch.layer = r.integer(l, lat, "layer");
      if (*launch.layer < 0)
        r.fail(lat + "/layer", "expected a decoder layer, from 0");
    }
  }

  void collective(const json &l, const std::string &lat, Launch &launch) {
    launch.op = Launch::Op::Collective;
    std::string kind = r.string(l, lat, "collective");
    launch.collective = kind == "all_reduce"   ? Launch::Collective::AllReduce
                        : kind == "all_gather" ? Launch::Collective::AllGather
                        : kind == "reduce_scatter"
                            ? Launch::Collective::ReduceScatter
                            : (r.fail(lat + "/collective",
                                      "unknown collective \"" + kind + "\""),
                               Launch::Collective::AllReduce);
    launch.group = r.string(l, lat, "group");
    if (!groups.count(launch.group))
      r.fail(lat + "/group",
             "no group \"" + launch.group + "\" in the plan's groups");
    launch.input = buffer(r.at(l, lat, "input"), lat + "/input");
    launch.output = buffer(r.at(l, lat, "output"), lat + "/output");
    if (launch.collective == Launch::Collective::AllReduce &&
        launch.input != launch.output)
      r.fail(lat + "/output", "an all_reduce runs in place: its output "
                              "must be its input");
    std::string reduction = r.optional(l, lat, "reduction", std::string("sum"));
    if (reduction != "sum" && reduction != "max")
      r.fail(lat + "/reduction",
             "expected sum or max, got \"" + reduction + "\"");
    launch.reduceMax = reduction == "max";
    if (launch.reduceMax && launch.collective != Launch::Collective::AllReduce)
      r.fail(lat + "/reduction", "only an all_reduce takes max (the "
                                 "runtime's reduce_scatter sums)");
    if (l.contains("dim"))
      launch.dim = r.integer(l, lat, "dim");
    launch.accumulateOutput = r.optional(l, lat, "accumulate", false);
    if (l.contains("bucket")) {
      launch.bucket = r.integer(l, lat, "bucket");
      // Its members run as one on every rank of the group: a group
      // whose ranks run other programs would not agree.
      if (launch.group != "dp")
        r.fail(lat + "/bucket", "only data-parallel (dp) collectives "
                                "form buckets, not " +
                                    launch.group);
    }
    if (launch.collective == Launch::Collective::AllReduce &&
        launch.accumulateOutput)
      r.fail(lat + "/accumulate",
             "an all_reduce runs in place: it cannot add to its output");
    launch.async = r.optional(l, lat, "async", false);
    launch.lastMicroBatch = r.optional(l, lat, "last_micro_batch", false);
    launch.nextStep = r.optional(l, lat, "next_step", false);
    if (launch.nextStep && !launch.async)
      r.fail(lat + "/next_step", "a next_step collective is async: the next "
                                 "step's forward waits for it");
  }

  /// Each kind of launch's keys, and the stream it runs on: compute for
  /// kernels and waits, comm for collectives and messages.
  void checkKeysAndStream(const json &l, const std::string &lat,
                          const std::string &op) {
    if (op == "kernel")
      r.known(l, lat,
              {"op", "stream", "kernel", "ins", "outs", "accumulate", "params",
               "layer"});
    else if (op == "collective")
      r.known(l, lat,
              {"op", "stream", "collective", "group", "input", "output",
               "reduction", "dim", "accumulate", "async", "last_micro_batch",
               "next_step", "bucket"});
    else if (op == "wait")
      r.known(l, lat, {"op", "stream", "buffer", "first_micro_batch"});
    else if (op == "send" || op == "recv")
      r.known(l, lat, {"op", "stream", "buffer", "peer"});
    std::string stream = r.optional(l, lat, "stream", std::string());
    const char *expected = op == "kernel" || op == "wait" ? "compute" : "comm";
    if (!stream.empty() && stream != expected)
      r.fail(lat + "/stream", "a " + op + " runs on the " + expected +
                                  " stream, not \"" + stream + "\"");
  }

  Reader &r;
  const Program &program;
  const decltype(Plan::groups) &groups;
};

/// The order the program runs its phases in, by micro-batch.
void readSchedule(Reader &r, const json &p, const std::string &path,
                  Program &program) {
  const json &schedule = r.array(p, path, "schedule");
  for (size_t i = 0; i < schedule.size(); ++i) {
    std::string at = path + "/schedule/" + std::to_string(i);
    r.known(schedule[i], at, {"phase", "chunk", "micro_batch"});
    std::string kind = r.string(schedule[i], at, "phase");
    int64_t chunk = r.integer(schedule[i], at, "chunk");
    Run run{-1, r.integer(schedule[i], at, "micro_batch")};
    for (size_t k = 0; k < program.phases.size(); ++k)
      if (program.phases[k].kind == kind && program.phases[k].chunk == chunk)
        run.phase = k;
    if (run.phase < 0)
      r.fail(at, "no " + kind + " phase of chunk " + std::to_string(chunk));
    program.schedule.push_back(run);
  }
}

/// An async collective of the step phase is waited for later in that
/// phase, or else, marked next_step, by a first_micro_batch wait in a
/// forward phase; no other collective is next_step.
void checkNextStep(Reader &r, const Program &program, const std::string &path) {
  auto waitedIn = [&](const Phase &phase, size_t from, int buffer,
                      bool firstMicroBatch) {
    for (size_t k = from; k < phase.launches.size(); ++k) {
      const Launch &w = phase.launches[k];
      if (w.op == Launch::Op::Wait && w.input == buffer &&
          w.firstMicroBatch == firstMicroBatch)
        return true;
    }
    return false;
  };
  for (size_t i = 0; i < program.phases.size(); ++i) {
    const Phase &phase = program.phases[i];
    for (size_t j = 0; j < phase.launches.size(); ++j) {
      const Launch &l = phase.launches[j];
      if (l.op != Launch::Op::Collective || !l.async)
        continue;
      std::string lat = path + "/phases/" + std::to_string(i) + "/launches/" +
                        std::to_string(j);
      const std::string &name = program.buffers[size_t(l.output)].name;
      if (l.nextStep && phase.kind != "step")
        r.fail(lat + "/next_step", "only a collective of the step phase "
                                   "waits for the next step");
      if (phase.kind != "step")
        continue;
      bool here = waitedIn(phase, j + 1, l.output, false);
      bool next = std::any_of(
          program.phases.begin(), program.phases.end(), [&](const Phase &f) {
            return f.kind == "forward" && waitedIn(f, 0, l.output, true);
          });
      if (l.nextStep && (here || !next))
        r.fail(lat + "/next_step",
               "the collective into " + name + " is " +
                   (here ? "waited for later in the step phase"
                         : "waited for by no first_micro_batch wait of a "
                           "forward phase"));
      if (!l.nextStep && !here)
        r.fail(lat, "the async collective into " + name +
                        " is waited for neither later in the step phase "
                        "nor, with next_step, in the next step's forward");
    }
  }
}

Program readProgram(Reader &r, const json &p, const std::string &path,
                    const decltype(Plan::groups) &groups,
                    int64_t numMicroBatches) {
  r.known(p, path,
          {"pp_rank", "max_in_flight", "arena_bytes", "runtime_bytes",
           "kept_sets", "buffers", "phases", "schedule"});
  Program program;
  program.ppRank = r.integer(p, path, "pp_rank");
  program.maxInFlight = r.integer(p, path, "max_in_flight");
  // A copy of each per-micro-batch buffer per micro-batch in flight: never
  // more than the step's micro-batches.
  if (program.maxInFlight < 1 || program.maxInFlight > numMicroBatches)
    r.fail(path + "/max_in_flight",
           "expected from 1 to the number of micro-batches (" +
               std::to_string(numMicroBatches) + ")");
  program.arenaBytes = r.optional(p, path, "arena_bytes", int64_t(0));
  program.runtimeBytes = r.optional(p, path, "runtime_bytes", int64_t(0));
  if (program.arenaBytes < 0)
    r.fail(path + "/arena_bytes", "expected a size in bytes, at least 0");
  if (program.runtimeBytes < 0)
    r.fail(path + "/runtime_bytes", "expected a size in bytes, at least 0");
  readKeptSets(r, p, path, numMicroBatches, program);
  const json &buffers = r.array(p, path, "buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string at = path + "/buffers/" + std::to_string(i);
    BufferSpec b = readBuffer(r, buffers[i], at, program);
    if (!program.bufferIndex.emplace(b.name, i).second)
      r.fail(at + "/name", "buffer \"" + b.name + "\" appears twice");
    program.buffers.push_back(std::move(b));
  }
  LaunchReader launchReader(r, program, groups);
  const json &phases = r.array(p, path, "phases");
  for (size_t i = 0; i < phases.size(); ++i) {
    std::string at = path + "/phases/" + std::to_string(i);
    r.known(phases[i], at, {"kind", "chunk", "launches"});
    Phase phase;
    phase.kind = r.string(phases[i], at, "kind");
    if (phase.kind == "step")
      program.stepPhase = i;
    else
      phase.chunk = r.integer(phases[i], at, "chunk");
    const json &launches = r.array(phases[i], at, "launches");
    for (size_t j = 0; j < launches.size(); ++j)
      phase.launches.push_back(launchReader.read(
          launches[j], at + "/launches/" + std::to_string(j)));
    program.phases.push_back(std::move(phase));
  }
  if (program.stepPhase < 0)
    r.fail(path, "the program has no step phase");
  checkNextStep(r, program, path);
  readSchedule(r, p, path, program);
  return program;
}

} // namespace

std::string BufferSpec::typeWords() const {
  std::string s = isInt ? "i32 [" : isBf16 ? "bf16 [" : "f32 [";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

std::string ParameterSpec::stateBufferStem() const {
  std::string buffer = holders.front().buffer;
  const std::string shard = ".shard";
  if (buffer.size() > shard.size() &&
      buffer.compare(buffer.size() - shard.size(), shard.size(), shard) == 0)
    buffer.resize(buffer.size() - shard.size());
  return buffer;
}

std::vector<std::vector<int>> Program::phaseInputs() const {
  std::map<int64_t, std::set<int>> chunkInputs;
  for (const Phase &phase : phases)
    for (const Launch &l : phase.launches)
      for (int k :
           l.op == Launch::Op::Kernel ? l.ins : std::vector<int>{l.input})
        if (k >= 0 && (buffers[size_t(k)].kind == BufferKind::Tokens ||
                       buffers[size_t(k)].kind == BufferKind::Labels))
          chunkInputs[phase.chunk].insert(k);
  std::vector<std::vector<int>> inputs;
  for (const Phase &phase : phases) {
    const std::set<int> &chunk = chunkInputs[phase.chunk];
    inputs.emplace_back(chunk.begin(), chunk.end());
  }
  return inputs;
}

ArenaLayout arenaLayout(const Program &program) {
  bool planned = program.arenaBytes > 0;
  ArenaLayout layout;
  layout.bytes = program.arenaBytes;
  for (const BufferSpec &b : program.buffers) {
    std::vector<int64_t> &at = layout.copyOffsets.emplace_back();
    if (b.keptSet >= 0) {
      // A copy per micro-batch, where its chunk's set is (checked on load).
      for (int64_t set : program.keptSets[size_t(b.keptSet)].offsets)
        at.push_back(set + b.setOffset);
      continue;
    }
    if (planned && b.offset < 0)
      throw std::runtime_error("buffer " + b.name +
                               " has no offset in the memory plan");
    int64_t copies = planned             ? b.copies
                     : b.perMicroBatch() ? program.maxInFlight
                                         : 1;
    int64_t first = planned ? b.offset : layout.bytes;
    for (int64_t c = 0; c < copies; ++c)
      at.push_back(first + c * b.bytes());
    int64_t end = first + copies * b.bytes();
    if (planned && end > program.arenaBytes)
      throw std::runtime_error("buffer " + b.name +
                               " ends beyond the memory plan's arena");
    // Without a plan, each buffer starts 64-byte aligned (as the memory
    // plan's offsets do), whatever the element sizes before it.
    if (!planned)
      layout.bytes = (end + 63) / 64 * 64;
  }
  return layout;
}

double Optimizer::learningRate(int64_t step) const {
  if (step < warmupSteps)
    return lr * double(step + 1) / double(warmupSteps);
  if (decaySteps == 0 || decay == "constant")
    return lr;
  double done = std::min(1.0, double(step - warmupSteps) / decaySteps);
  double shape =
      decay == "cosine" ? 0.5 * (1 + std::cos(M_PI * done)) : 1 - done;
  return minLr + (lr - minLr) * shape;
}

namespace {

/// AdamW's settings: ones that would train on silently to nonsense (a
/// negative rate, beta at 1, a misspelt decay) are errors.
void checkOptimizer(Reader &r, const Optimizer &o) {
  auto require = [&](bool ok, const char *key, const char *what) {
    if (!ok)
      r.fail(std::string("/optimizer/") + key, what);
  };
  auto finite = [](double v) { return std::isfinite(v); };
  require(finite(o.lr) && o.lr >= 0, "lr", "expected a finite rate >= 0");
  require(finite(o.minLr) && o.minLr >= 0, "min_lr",
          "expected a finite rate >= 0");
  require(o.beta1 >= 0 && o.beta1 < 1, "beta1", "expected 0 <= beta1 < 1");
  require(o.beta2 >= 0 && o.beta2 < 1, "beta2", "expected 0 <= beta2 < 1");
  require(finite(o.eps) && o.eps > 0, "eps", "expected a finite eps > 0");
  require(finite(o.weightDecay) && o.weightDecay >= 0, "weight_decay",
          "expected a finite weight decay >= 0");
  require(finite(o.clipNorm) && o.clipNorm >= 0, "clip_norm",
          "expected a finite norm >= 0 (0: no clipping)");
  require(o.warmupSteps >= 0, "warmup_steps", "expected steps >= 0");
  require(o.decaySteps >= 0, "decay_steps", "expected steps >= 0");
  require(o.decay == "cosine" || o.decay == "linear" || o.decay == "constant",
          "decay", "expected cosine, linear or constant");
}

/// Why kernel launch `l` of `phase` touches parameter buffers it cannot
/// mean, or empty. A decoder layer's kernels read that layer's parameters
/// and write their gradients, other kernels none of a layer's (the step,
/// which updates every parameter, aside), where the plan gives parameters
/// their layers; a backward kernel's weight gradient is the gradient of the
/// weight it reads; an adamw launch's buffers are one parameter's, and it
/// runs in the step.
std::string kernelParameterError(const Launch &l, const Phase &phase,
                                 const Program &program, const Plan &plan,
                                 bool layered) {
  auto parameterOf = [&](int b) -> const ParameterSpec * {
    const BufferSpec &spec = program.buffers[b];
    return spec.ofParameter() ? plan.findParameter(spec.param) : nullptr;
  };
  auto layerWords = [](std::optional<int64_t> layer) {
    return layer ? "layer " + std::to_string(*layer)
                 : std::string("no decoder layer");
  };
  // Inputs, then outputs.
  size_t operands = l.ins.size() + l.outs.size();
  auto operand = [&](size_t k) {
    return k < l.ins.size() ? l.ins[k] : l.outs[k - l.ins.size()];
  };
  // (Its operands' kinds keep the other kernels from writing parameters
  // and their state: kernelLaunchError.)
  if (l.kernel == Kernel::AdamW && phase.kind != "step")
    return "adamw in a " + phase.kind +
           " phase: parameters are updated once a step, in the step phase";
  if (layered && phase.kind != "step")
    for (size_t k = 0; k < operands; ++k) {
      bool read = k < l.ins.size();
      int b = operand(k);
      const ParameterSpec *p = parameterOf(b);
      if (p && p->layer != l.layer)
        return l.kernelName() + " of " + layerWords(l.layer) +
               (read ? " reads " : " writes ") + program.buffers[b].name +
               ", of parameter " + p->name + " of " + layerWords(p->layer);
    }
  // Pairs of buffers of one parameter: a weight read and the gradient
  // written, or an update's.
  std::vector<std::pair<int, int>> sameParameter;
  if (l.kernel == Kernel::LinearBwd || l.kernel == Kernel::RmsNormBwd ||
      l.kernel == Kernel::LayerNormBwd)
    sameParameter.push_back({l.ins[2], l.outs[1]});
  if (l.kernel == Kernel::AdamW)
    for (size_t k = 1; k < operands; ++k)
      sameParameter.push_back({l.ins[0], operand(k)});
  for (auto [a, b] : sameParameter) {
    const ParameterSpec *pa = parameterOf(a), *pb = parameterOf(b);
    if (pa && pb && pa != pb)
      return l.kernelName() + " pairs " + program.buffers[a].name +
             " (of parameter " + pa->name + ") with " +
             program.buffers[b].name + " (of parameter " + pb->name + ")" +
             (l.kernel == Kernel::AdamW
                  ? ": an update's buffers are one parameter's"
                  : ": the weight gradient it writes is of the weight it "
                    "reads");
  }
  return "";
}

/// Why grad_sumsq launch `l` would not give the global gradient norm, or
/// empty: it reads each gradient the rank's updates apply (`applied`) once,
/// weighted so that every copy of a gradient counts once over the mesh:
/// 1 / tp for a part held by tp / tp_parts ranks, 1 / dp for a whole
/// (unsharded) gradient every data-parallel rank holds, 1 / 2 for a tied
/// parameter's two holders.
std::string gradientNormError(const Launch &l, const Program &program,
                              const Plan &plan,
                              const std::multiset<int> &applied) {
  std::multiset<int> read(l.ins.begin(), l.ins.end());
  for (int b : read)
    if (read.count(b) != applied.count(b))
      return "grad_sumsq reads " + program.buffers[b].name + " " +
             std::to_string(read.count(b)) + " times, and adamw applies it " +
             std::to_string(applied.count(b)) +
             " times: the norm counts each applied gradient once";
  for (int b : applied)
    if (!read.count(b))
      return "grad_sumsq does not read " + program.buffers[b].name +
             ", which adamw applies: the norm counts each applied gradient "
             "once";
  const json &weights = l.params["weights"];
  for (size_t k = 0; k < l.ins.size(); ++k) {
    const BufferSpec &g = program.buffers[l.ins[k]];
    const ParameterSpec *p = plan.findParameter(g.param);
    if (!p)
      continue; // a plan without `param` on gradients
    bool shard = g.kind == BufferKind::GradShard || g.dpShard;
    double expected = double(p->tpParts) / double(plan.tp) /
                      double(shard ? 1 : plan.dp) / double(p->holders.size());
    double given = weights[k].get<double>();
    if (std::abs(given - expected) > 1e-12 * expected)
      return "params.weights[" + std::to_string(k) + "] is " +
             std::to_string(given) + " for " + g.name + "; expected " +
             std::to_string(expected) +
             " (tp_parts / tp, / dp for a whole gradient, / holders), so "
             "that each copy of a gradient counts once";
  }
  return "";
}

/// The settings a parameter's launches must share: a norm's `eps` in its
/// forward, backward and recomputation (else the backward differentiates
/// another function than the forward computed), and `weight_decay` in the
/// updates of every copy of it (else a tied parameter's copies drift
/// apart).
class ParameterAgreement {
public:
  /// Why kernel launch `l` (at `at`) disagrees with an earlier launch of
  /// its parameter, or empty.
  std::string disagreement(const Launch &l, const std::string &at,
                           const Program &program, const Plan &plan) {
    const char *key = nullptr;
    size_t weight = 0;
    if (l.kernel == Kernel::RmsNorm || l.kernel == Kernel::LayerNorm) {
      key = "eps";
      weight = 1;
    } else if (l.kernel == Kernel::RmsNormBwd ||
               l.kernel == Kernel::LayerNormBwd) {
      key = "eps";
      weight = 2;
    } else if (l.kernel == Kernel::AdamW) {
      key = "weight_decay";
    } else {
      return "";
    }
    const ParameterSpec *p =
        plan.findParameter(program.buffers[l.ins[weight]].param);
    if (!p || !l.params.contains(key))
      return "";
    const json &value = l.params[key];
    auto [first, isFirst] = given.try_emplace({p, key}, value, at);
    const auto &[firstValue, firstAt] = first->second;
    if (isFirst || firstValue == value)
      return "";
    return "params." + std::string(key) + " is " + value.dump() +
           " for parameter " + p->name + ", but " + firstAt + " gives it " +
           firstValue.dump() + ": " +
           (std::string(key) == "eps"
                ? "a norm's backward and recomputation normalise as its "
                  "forward does"
                : "every copy of a parameter is updated alike");
  }

private:
  /// By parameter and key: the value the first launch gave, and where.
  std::map<std::pair<const ParameterSpec *, std::string>,
           std::pair<json, std::string>>
      given;
};

/// Each parameter buffer a rank holds is updated at most once a step
/// (adamw runs in the step phase only: kernelParameterError). The
/// gradients the updates apply, which the global gradient norm counts once
/// each.
std::multiset<int> checkUpdates(Reader &r, const Program &program,
                                const std::string &at) {
  std::vector<int> updates(program.buffers.size(), 0);
  std::multiset<int> applied;
  for (const Phase &phase : program.phases)
    for (const Launch &l : phase.launches)
      if (l.op == Launch::Op::Kernel && l.kernel == Kernel::AdamW) {
        ++updates[l.outs[0]];
        applied.insert(l.ins[1]);
      }
  for (size_t k = 0; k < program.buffers.size(); ++k) {
    const BufferSpec &b = program.buffers[k];
    if (updates[k] > 1)
      r.fail(at + "/buffers/" + std::to_string(k),
             b.name + " is updated by " + std::to_string(updates[k]) +
                 " adamw launches a step; a parameter by one (or none, "
                 "when nothing differentiates it)");
  }
  return applied;
}

/// What a program must agree on with the rest of the plan: its inputs'
/// sizes, its schedule's micro-batches, and its launches against their
/// buffers (kernels: KernelShapes.cpp; collectives: the group's size).
/// Every parameter buffer is some parameter's (else it would start as
/// zeros), and the token embedding's table has the vocabulary's rows.
void checkParameterBuffers(Reader &r, const Plan &plan) {
  std::map<std::pair<int64_t, std::string>, const ParameterSpec *> holderOf;
  // The optimizer's buffers each rank's parameters have (the Trainer's
  // names for them).
  std::map<std::pair<int64_t, std::string>, const ParameterSpec *> states;
  // The parameters each pipeline rank holds, by name.
  std::set<std::pair<int64_t, std::string>> held;
  // Plans that give no parameter a layer (older ones) skip the layer rule.
  bool layered =
      std::any_of(plan.parameters.begin(), plan.parameters.end(),
                  [](const ParameterSpec &p) { return p.layer.has_value(); });
  for (const ParameterSpec &p : plan.parameters)
    for (const ParameterHolder &h : p.holders) {
      holderOf[{h.ppRank, h.buffer}] = &p;
      held.insert({h.ppRank, p.name});
      for (const char *prefix : kOptimizerStatePrefixes)
        states[{h.ppRank, prefix + p.stateBufferStem()}] = &p;
    }
  // A parameter's settings that every launch of it shares, with the first
  // launch that gave each.
  ParameterAgreement agreement;
  for (const Program &program : plan.programs) {
    std::string at = "/programs/" + std::to_string(program.ppRank);
    for (size_t k = 0; k < program.buffers.size(); ++k) {
      const BufferSpec &b = program.buffers[k];
      std::string bat = at + "/buffers/" + std::to_string(k);
      auto holder = holderOf.find({program.ppRank, b.name});
      if ((b.kind == BufferKind::Param || b.kind == BufferKind::ParamShard) &&
          holder == holderOf.end())
        r.fail(bat, "parameter buffer " + b.name +
                        " is no parameter's in /parameters (it would start "
                        "as zeros)");
      auto state = states.find({program.ppRank, b.name});
      if (b.kind == BufferKind::OptimizerState && state == states.end())
        r.fail(bat, "optimizer state " + b.name +
                        " is no parameter's adam_m., adam_v. or master. "
                        "buffer (by which names master weights start from "
                        "the parameter's values and checkpoints keep the "
                        "states)");
      if (b.param.empty())
        continue;
      // The runtime's checks of what a collective combines go by `param`.
      if (!held.count({program.ppRank, b.param}))
        r.fail(bat + "/param",
               "\"" + b.param + "\" is no parameter that pipeline rank " +
                   std::to_string(program.ppRank) + " holds in /parameters");
      const ParameterSpec *named = holder != holderOf.end() ? holder->second
                                   : state != states.end()  ? state->second
                                                            : nullptr;
      if (named && named->name != b.param)
        r.fail(bat + "/param", b.name + " is parameter " + named->name +
                                   "'s buffer, not " + b.param + "'s");
    }
    std::multiset<int> applied = checkUpdates(r, program, at);
    // Then each kernel against the parameters it touches.
    for (size_t i = 0; i < program.phases.size(); ++i)
      for (size_t j = 0; j < program.phases[i].launches.size(); ++j) {
        const Launch &l = program.phases[i].launches[j];
        if (l.op != Launch::Op::Kernel)
          continue;
        std::string problem =
            kernelParameterError(l, program.phases[i], program, plan, layered);
        std::string lat = at + "/phases/" + std::to_string(i) + "/launches/" +
                          std::to_string(j);
        if (problem.empty() && l.kernel == Kernel::GradSumsq)
          problem = gradientNormError(l, program, plan, applied);
        if (problem.empty())
          problem = agreement.disagreement(l, lat, program, plan);
        if (!problem.empty())
          r.fail(lat, problem);
      }
    // The parameter's global rows are the vocabulary; the table a launch
    // reads or writes (its slice, or the table gathered for it, ZeRO-3)
    // holds it padded to a multiple of vocab_parts.
    for (const Phase &phase : program.phases)
      for (const Launch &l : phase.launches) {
        bool forward = l.kernel == Kernel::Embedding;
        if (l.op != Launch::Op::Kernel ||
            (!forward && l.kernel != Kernel::EmbeddingBwd) ||
            (forward ? l.ins : l.outs).empty())
          continue;
        const BufferSpec &table =
            program.buffers[forward ? l.ins[0] : l.outs[0]];
        auto p = holderOf.find({program.ppRank, table.name});
        int64_t parts = l.params.value("vocab_parts", int64_t(0));
        std::string rows;
        // (A scalar parameter, global shape [], has no rows.)
        int64_t globalRows =
            p == holderOf.end() || p->second->globalShape.empty()
                ? 0
                : p->second->globalShape[0];
        if (p != holderOf.end() && globalRows != plan.vocabSize)
          rows = std::to_string(globalRows) + " rows";
        else if (parts > 0 && !table.shape.empty() &&
                 table.shape[0] != (plan.vocabSize + parts - 1) / parts)
          rows = std::to_string(table.shape[0]) + " rows in each of " +
                 std::to_string(parts) + " vocabulary parts";
        if (!rows.empty())
          r.fail("/training/vocab_size",
                 std::to_string(plan.vocabSize) +
                     " tokens, but the embedding table " + table.name +
                     " has " + rows);
      }
  }
}

/// The messages each pipeline rank sends to a neighbour, in the order its
/// schedule sends them, are the ones the neighbour receives from it, in
/// its order, buffer for buffer of one size, shape and dtype, and
/// micro-batch for micro-batch: else the ranks would wait for each other
/// until the collective timeout, or a micro-batch would go on with another
/// tensor, or another micro-batch's.
void checkPipelineMessages(Reader &r, const Plan &plan) {
  struct Message {
    int64_t bytes, microBatch;
    std::string buffer;
    const BufferSpec *spec;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Message>> sent,
      received; // by (from, to)
  for (const Program &program : plan.programs) {
    auto visit = [&](const Phase &phase, int64_t microBatch) {
      for (const Launch &l : phase.launches) {
        bool message = l.op == Launch::Op::Send || l.op == Launch::Op::Recv;
        if (!message || !l.runsIn(microBatch, plan.numMicroBatches))
          continue;
        int64_t peer =
            (program.ppRank + (l.toNext ? 1 : plan.pp - 1)) % plan.pp;
        const BufferSpec &b = program.buffers[l.input];
        if (l.op == Launch::Op::Send)
          sent[{program.ppRank, peer}].push_back(
              {b.bytes(), microBatch, b.name, &b});
        else
          received[{peer, program.ppRank}].push_back(
              {b.bytes(), microBatch, b.name, &b});
      }
    };
    for (const Run &run : program.schedule)
      visit(program.phases[run.phase], run.microBatch);
    visit(program.phases[program.stepPhase], 0);
  }
  std::set<std::pair<int64_t, int64_t>> directions;
  for (const auto &[d, list] : sent)
    directions.insert(d);
  for (const auto &[d, list] : received)
    directions.insert(d);
  for (auto [from, to] : directions) {
    const auto &out = sent[{from, to}], &in = received[{from, to}];
    std::string at = "/programs/" + std::to_string(to) + "/schedule";
    std::string pair =
        "pipeline rank " + std::to_string(from) + " to " + std::to_string(to);
    if (out.size() != in.size())
      r.fail(at, std::to_string(out.size()) + " messages from " + pair +
                     " are sent and " + std::to_string(in.size()) +
                     " received: the ranks would wait for each other");
    for (size_t k = 0; k < out.size(); ++k) {
      std::string message = "message " + std::to_string(k + 1) + " from " +
                            pair + ": " + out[k].buffer;
      if (out[k].bytes != in[k].bytes)
        r.fail(at, message + " (" + std::to_string(out[k].bytes) +
                       " bytes) is received into " + in[k].buffer + " (" +
                       std::to_string(in[k].bytes) + " bytes)");
      if (out[k].spec->typeWords() != in[k].spec->typeWords())
        r.fail(at, message + " (" + out[k].spec->typeWords() +
                       ") is received into " + in[k].buffer + " (" +
                       in[k].spec->typeWords() + ")");
      if (out[k].microBatch != in[k].microBatch)
        r.fail(at, message + " of micro-batch " +
                       std::to_string(out[k].microBatch) +
                       " is received into " + in[k].buffer +
                       " of micro-batch " + std::to_string(in[k].microBatch));
    }
  }
}

/// Why pipeline send `send` of `phase` (at JSON path `phasePath`) cannot
/// be its chunk's result, or empty. A message carries a micro-batch's
/// activations or their gradients, computed last in the phase: no other
/// launch of the phase reads them (one that does reads an intermediate
/// value, such as the residual stream before a layer's MLP, which a send
/// pointed at would give the next stage to train on).
std::string sendLaunchError(const Launch &send, const Phase &phase,
                            const Program &program,
                            const std::string &phasePath) {
  const BufferSpec &b = program.buffers[send.input];
  if (b.kind != BufferKind::Activation && b.kind != BufferKind::ActivationGrad)
    return "sends " + b.name +
           ", which is not a micro-batch's activation or activation gradient";
  for (size_t k = 0; k < phase.launches.size(); ++k) {
    const Launch &other = phase.launches[k];
    // (An in-place collective writes its buffer's value: it does not
    // consume it.)
    bool reads =
        other.op == Launch::Op::Kernel
            ? std::find(other.ins.begin(), other.ins.end(), send.input) !=
                  other.ins.end()
            : other.op == Launch::Op::Collective && other.input == send.input &&
                  other.output != send.input;
    if (reads)
      return "sends " + b.name + ", which launch " + phasePath + "/launches/" +
             std::to_string(k) +
             " of its phase reads: a chunk sends its result, which nothing "
             "else in its phase reads";
  }
  return "";
}

void checkProgram(Reader &r, const Plan &plan, const Program &program,
                  const std::string &path) {
  for (size_t k = 0; k < program.buffers.size(); ++k) {
    const BufferSpec &b = program.buffers[k];
    if ((b.kind == BufferKind::Tokens || b.kind == BufferKind::Labels) &&
        (!b.isInt || b.elements != plan.microBatchSize * plan.seqLen))
      r.fail(path + "/buffers/" + std::to_string(k),
             b.name + ": a tokens or labels buffer holds micro_batch_size x "
                      "seq_len i32 values");
  }
  std::set<int64_t> runs;
  for (size_t k = 0; k < program.schedule.size(); ++k) {
    int64_t mb = program.schedule[k].microBatch;
    if (mb < 0 || mb >= plan.numMicroBatches)
      r.fail(path + "/schedule/" + std::to_string(k) + "/micro_batch",
             "not a micro-batch of the step");
    runs.insert(mb);
  }
  // The schedule's micro-batches are in range: the first one missing is
  // the first whose number differs from its rank among them.
  if (int64_t(runs.size()) < plan.numMicroBatches) {
    int64_t missing = 0;
    for (int64_t mb : runs)
      if (mb == missing)
        ++missing;
    r.fail(path + "/schedule", "micro-batch " + std::to_string(missing) +
                                   " of the step never runs");
  }
  // Each chunk runs each micro-batch forward once, then backward once:
  // else a gradient would be summed twice, or missed, or taken from
  // another micro-batch's activations.
  std::map<std::pair<int64_t, int64_t>, int> passes; // (chunk, mb) -> runs
  for (size_t k = 0; k < program.schedule.size(); ++k) {
    const Phase &phase = program.phases[program.schedule[k].phase];
    int64_t mb = program.schedule[k].microBatch;
    std::string which = "micro-batch " + std::to_string(mb) + " of chunk " +
                        std::to_string(phase.chunk);
    int &runs = passes[{phase.chunk, mb}];
    if (phase.kind == "forward" && runs != 0)
      r.fail(path + "/schedule/" + std::to_string(k),
             which + " runs forward " +
                 (runs == 1 ? "again before its backward" : "again"));
    else if (phase.kind == "backward" && runs != 1)
      r.fail(path + "/schedule/" + std::to_string(k),
             which + (runs == 0 ? " runs backward before its forward"
                                : " runs backward again"));
    else if (phase.kind != "forward" && phase.kind != "backward")
      r.fail(path + "/schedule/" + std::to_string(k),
             "the schedule runs forward and backward phases, not " +
                 phase.kind);
    ++runs;
  }
  for (const Phase &phase : program.phases)
    if (phase.kind == "forward")
      for (int64_t mb = 0; mb < plan.numMicroBatches; ++mb)
        if (passes[{phase.chunk, mb}] != 2)
          r.fail(path + "/schedule",
                 "micro-batch " + std::to_string(mb) + " of chunk " +
                     std::to_string(phase.chunk) + " never runs " +
                     (passes[{phase.chunk, mb}] == 0 ? "forward" : "backward"));
  for (size_t j = 0; j < program.phases.size(); ++j)
    for (size_t k = 0; k < program.phases[j].launches.size(); ++k) {
      const Launch &l = program.phases[j].launches[k];
      std::string at = path + "/phases/" + std::to_string(j) + "/launches/" +
                       std::to_string(k);
      bool kernel = l.op == Launch::Op::Kernel;
      std::string error =
          kernel ? kernelLaunchError(l, program, plan)
          : l.op == Launch::Op::Collective
              ? collectiveLaunchError(l, program, plan)
          : l.op == Launch::Op::Send
              ? sendLaunchError(l, program.phases[j], program,
                                path + "/phases/" + std::to_string(j))
              : "";
      if (!error.empty())
        r.fail(at, (kernel ? l.kernelName() + ": " : "") + error);
    }
}

/// Each backward kernel of `program` against the forward launches (their
/// operands known good, and the parameters each touches).
void checkBackwardPairs(Reader &r, const Program &program,
                        const std::string &path) {
  ForwardLaunches forwards(program);
  for (size_t j = 0; j < program.phases.size(); ++j)
    for (size_t k = 0; k < program.phases[j].launches.size(); ++k) {
      const Launch &l = program.phases[j].launches[k];
      if (l.op != Launch::Op::Kernel)
        continue;
      std::string error = forwards.unpairedError(l);
      if (!error.empty())
        r.fail(path + "/phases/" + std::to_string(j) + "/launches/" +
                   std::to_string(k),
               l.kernelName() + ": " + error);
    }
}

/// /training: the batch, the sequence and the vocabulary, and the dtype.
void readTraining(Reader &r, const json &doc, Plan &plan) {
  const json &t = r.at(doc, "", "training");
  r.known(t, "/training",
          {"seq_len", "vocab_size", "global_batch", "micro_batch_size",
           "num_micro_batches", "dtype"});
  plan.seqLen = r.integer(t, "/training", "seq_len");
  plan.vocabSize = r.integer(t, "/training", "vocab_size");
  plan.globalBatch = r.integer(t, "/training", "global_batch");
  plan.microBatchSize = r.integer(t, "/training", "micro_batch_size");
  plan.numMicroBatches = r.integer(t, "/training", "num_micro_batches");
  // Tokens are int32; every size the executor divides by is positive.
  for (auto [key, value] : {std::pair{"seq_len", plan.seqLen},
                            {"vocab_size", plan.vocabSize},
                            {"global_batch", plan.globalBatch},
                            {"micro_batch_size", plan.microBatchSize},
                            {"num_micro_batches", plan.numMicroBatches}})
    if (value < 1 || value > std::numeric_limits<int32_t>::max())
      r.fail(std::string("/training/") + key,
             "expected a positive 32-bit integer");
  plan.dtype = r.string(t, "/training", "dtype");
  if (plan.dtype != "f32" && plan.dtype != "bf16")
    r.fail("/training/dtype", "the runtime runs f32 and bf16 plans, not " +
                                  plan.dtype +
                                  " (compile with --dtype=bf16 or f32)");
}

/// /mesh and /devices: the parallel layout and each rank's place in it.
void readMesh(Reader &r, const json &doc, Plan &plan) {
  const json &mesh = r.at(doc, "", "mesh");
  r.known(mesh, "/mesh", {"world_size", "dp", "tp", "pp", "order", "kv_parts"});
  plan.dp = r.integer(mesh, "/mesh", "dp");
  plan.tp = r.integer(mesh, "/mesh", "tp");
  plan.pp = r.integer(mesh, "/mesh", "pp");
  plan.worldSize = r.integer(mesh, "/mesh", "world_size");
  constexpr int64_t kMaxAxis = int64_t(1) << 20;
  if (plan.dp < 1 || plan.tp < 1 || plan.pp < 1 || plan.dp > kMaxAxis ||
      plan.tp > kMaxAxis || plan.pp > kMaxAxis)
    r.fail("/mesh", "expected dp, tp and pp from 1 to 2^20");
  if (plan.worldSize != plan.dp * plan.tp * plan.pp)
    r.fail("/mesh", "world_size is not dp x tp x pp");
  // The layout ranks find their peers by (below).
  if (r.at(mesh, "/mesh", "order") != json::array({"pp", "dp", "tp"}))
    r.fail("/mesh/order", "expected [\"pp\", \"dp\", \"tp\"]: tp fastest, "
                          "then dp, then pp");
  plan.kvParts = r.integer(mesh, "/mesh", "kv_parts");
  if (plan.kvParts < 1 || plan.tp % plan.kvParts != 0)
    r.fail("/mesh/kv_parts",
           "expected a divisor of tp (" + std::to_string(plan.tp) + ")");
  const json &devices = r.array(doc, "", "devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    std::string at = "/devices/" + std::to_string(i);
    r.known(devices[i], at, {"rank", "node", "local_device", "pp", "dp", "tp"});
    Coordinates c{
        r.integer(devices[i], at, "pp"), r.integer(devices[i], at, "dp"),
        r.integer(devices[i], at, "tp"), r.integer(devices[i], at, "node"),
        r.integer(devices[i], at, "local_device")};
    if (r.integer(devices[i], at, "rank") != int64_t(i))
      r.fail(at + "/rank",
             "expected " + std::to_string(i) + ": devices are listed by rank");
    if (c.node < 0)
      r.fail(at + "/node", "expected a node number, at least 0");
    if (c.localDevice < 0)
      r.fail(at + "/local_device", "expected a device number, at least 0");
    // Ranks find their peers by these: the layout is tp fastest, then dp,
    // then pp.
    int64_t rank = int64_t(i);
    if (c.pp != rank / (plan.dp * plan.tp) ||
        c.dp != rank / plan.tp % plan.dp || c.tp != rank % plan.tp)
      r.fail(at, "rank " + std::to_string(rank) + " is at pp " +
                     std::to_string(rank / (plan.dp * plan.tp)) + ", dp " +
                     std::to_string(rank / plan.tp % plan.dp) + ", tp " +
                     std::to_string(rank % plan.tp) +
                     " of the mesh (tp fastest, then dp, then pp), not pp " +
                     std::to_string(c.pp) + ", dp " + std::to_string(c.dp) +
                     ", tp " + std::to_string(c.tp));
    plan.devices.push_back(c);
  }
  if (int64_t(plan.devices.size()) != plan.worldSize)
    r.fail("/devices", "expected one entry per rank");
}

/// /groups: each group's lists of world ranks, one size for all.
void readGroups(Reader &r, const json &doc, Plan &plan) {
  const json &groups = r.at(doc, "", "groups");
  if (!groups.is_object())
    r.fail("/groups", "expected an object of group names");
  r.known(groups, "/groups", {"tp", "tp_kv", "dp", "pp", "tied", "world"});
  for (auto &[name, lists] : groups.items()) {
    auto &out = plan.groups[name];
    auto bad = [&, name = name] {
      r.fail("/groups/" + name, "expected lists of world ranks");
    };
    if (!lists.is_array())
      bad();
    for (const json &list : lists) {
      if (!list.is_array())
        bad();
      out.emplace_back();
      for (const json &rank : list) {
        if (!rank.is_number_integer() || rank.get<int64_t>() < 0 ||
            rank.get<int64_t>() >= plan.worldSize)
          bad();
        out.back().push_back(rank.get<int64_t>());
      }
    }
    // Every member sizes its collectives by its own list: one size for all.
    if (name == "tp_kv" && !out.empty() &&
        int64_t(out.front().size()) != plan.tp / plan.kvParts)
      r.fail("/groups/tp_kv", "expected lists of tp / kv_parts = " +
                                  std::to_string(plan.tp / plan.kvParts) +
                                  " ranks");
    if (out.empty())
      r.fail("/groups/" + name, "expected at least one list of ranks");
    std::set<int64_t> seen;
    for (const auto &list : out) {
      if (list.empty() || list.size() != out.front().size())
        r.fail("/groups/" + name, "expected non-empty lists of one size");
      for (int64_t rank : list)
        if (!seen.insert(rank).second)
          r.fail("/groups/" + name,
                 "rank " + std::to_string(rank) + " is in two of its lists");
    }
  }
}

/// Parameter `i` (at `at`): its shapes, initialisation, tp split, the
/// buffers that hold it and its layer.
ParameterSpec readParameter(Reader &r, const json &p, const std::string &at,
                            const Plan &plan) {
  r.known(p, at,
          {"name", "global_shape", "local_shape", "dtype", "init", "init_std",
           "tp_dim", "tp_parts", "padded_from", "holders", "layer"});
  ParameterSpec spec;
  spec.name = r.string(p, at, "name");
  spec.globalShape = r.shape(p, at, "global_shape");
  spec.localShape = r.shape(p, at, "local_shape");
  spec.init = r.string(p, at, "init");
  if (spec.init != "zeros" && spec.init != "ones" && spec.init != "normal")
    r.fail(at + "/init",
           "expected zeros, ones or normal, got \"" + spec.init + "\"");
  if (p.contains("init_std"))
    spec.initStd = r.number(p, at, "init_std");
  if (!(spec.initStd >= 0) || !std::isfinite(spec.initStd))
    r.fail(at + "/init_std", "expected a finite standard deviation >= 0");
  if (!r.at(p, at, "tp_dim").is_null())
    spec.tpDim = r.integer(p, at, "tp_dim");
  spec.tpParts = r.integer(p, at, "tp_parts");
  if (spec.globalShape.size() != spec.localShape.size())
    r.fail(at + "/local_shape", "expected as many dimensions as "
                                "global_shape");
  if (spec.tpDim >= int64_t(spec.localShape.size()) || spec.tpParts < 1 ||
      spec.tpParts > (int64_t(1) << 20))
    r.fail(at + "/tp_dim", "not a dimension of the parameter, or "
                           "tp_parts not from 1 to 2^20");
  // The local tensor is the global one, split in tp_parts along tp_dim
  // (padded up to a multiple of them, as the vocabulary is).
  for (size_t d = 0; d < spec.localShape.size(); ++d) {
    int64_t local = spec.localShape[d], global = spec.globalShape[d];
    bool split = int64_t(d) == spec.tpDim;
    if (split ? local != (global + spec.tpParts - 1) / spec.tpParts
              : local != global)
      r.fail(at + "/local_shape",
             "dimension " + std::to_string(d) + " holds " +
                 std::to_string(local) + " of the global " +
                 std::to_string(global) +
                 (split ? " in " + std::to_string(spec.tpParts) + " parts"
                        : std::string()));
  }
  // The unpadded rows of a vocabulary split in parts that do not divide it.
  if (p.contains("padded_from")) {
    int64_t from = r.integer(p, at, "padded_from");
    bool split =
        spec.tpDim >= 0 && spec.tpDim < int64_t(spec.globalShape.size());
    if (!split || from != spec.globalShape[size_t(spec.tpDim)] ||
        from % spec.tpParts == 0)
      r.fail(at + "/padded_from",
             "expected the unpadded rows along tp_dim, given only where "
             "tp_parts does not divide them");
  }
  const json &holders = r.array(p, at, "holders");
  for (size_t k = 0; k < holders.size(); ++k) {
    std::string hat = at + "/holders/" + std::to_string(k);
    const json &h = holders[k];
    r.known(h, hat, {"pp_rank", "buffer", "dp_shard"});
    const json &shard = r.at(h, hat, "dp_shard");
    if (!shard.is_boolean())
      r.fail(hat + "/dp_shard", "expected true or false");
    spec.holders.push_back({r.integer(h, hat, "pp_rank"),
                            r.string(h, hat, "buffer"), shard.get<bool>()});
    if (spec.holders.back().ppRank < 0 || spec.holders.back().ppRank >= plan.pp)
      r.fail(hat + "/pp_rank", "not a pipeline rank of the mesh");
  }
  if (spec.holders.empty())
    r.fail(at + "/holders", "a parameter needs a holder");
  if (p.contains("layer")) {
    spec.layer = r.integer(p, at, "layer");
    if (*spec.layer < 0)
      r.fail(at + "/layer", "expected a decoder layer, from 0");
  }
  return spec;
}

/// Each parameter's holders against the buffers of their programs: the
/// local tensor, or (ZeRO-3) a rank's 1/dp slice of it.
void checkHolders(Reader &r, const Plan &plan) {
  for (size_t i = 0; i < plan.parameters.size(); ++i) {
    const ParameterSpec &p = plan.parameters[i];
    int64_t local = 1;
    for (int64_t d : p.localShape)
      local *= d;
    for (size_t k = 0; k < p.holders.size(); ++k) {
      const ParameterHolder &h = p.holders[k];
      std::string at = "/parameters/" + std::to_string(i) + "/holders/" +
                       std::to_string(k) + "/buffer";
      const Program &program = plan.programs[h.ppRank];
      auto b = program.bufferIndex.find(h.buffer);
      if (b == program.bufferIndex.end())
        r.fail(at, "no buffer \"" + h.buffer + "\" in program " +
                       std::to_string(h.ppRank));
      // The local tensor, or (ZeRO-3) this rank's 1/dp slice of it.
      int64_t held = program.buffers[b->second].elements;
      if (held != local && !(held < local && held * plan.dp >= local))
        r.fail(at, h.buffer + " holds " + std::to_string(held) +
                       " elements, for a local_shape of " +
                       std::to_string(local));
    }
  }
}

/// The checks of the whole plan, which need every program read: kernels,
/// parameters, backward pairs, pipeline messages, then two steps walked.
void checkPlan(Reader &r, Plan &plan) {
  if (plan.globalBatch != plan.microBatchSize * plan.numMicroBatches * plan.dp)
    r.fail("/training/global_batch",
           "expected micro_batch_size x num_micro_batches x dp");
  for (size_t i = 0; i < plan.programs.size(); ++i) {
    std::string at = "/programs/" + std::to_string(i);
    const Program &program = plan.programs[i];
    if (program.ppRank != int64_t(i))
      r.fail(at, "programs out of order");
    checkProgram(r, plan, program, at);
  }
  // The params checked, the backends' typed copy of them.
  for (Program &program : plan.programs)
    for (Phase &phase : program.phases)
      for (Launch &l : phase.launches)
        if (l.op == Launch::Op::Kernel)
          l.kernelParams = plan::decodeParams(l.params);
  checkParameterBuffers(r, plan);
  for (size_t i = 0; i < plan.programs.size(); ++i)
    checkBackwardPairs(r, plan.programs[i], "/programs/" + std::to_string(i));
  checkPipelineMessages(r, plan);
  // Then the walks through steps, which assume the launches are sound.
  for (size_t i = 0; i < plan.programs.size(); ++i)
    if (std::optional<PlanProblem> problem = walkProgramSteps(
            plan, plan.programs[i], "/programs/" + std::to_string(i)))
      r.fail(problem->at, problem->what);
  if (std::optional<PlanProblem> problem = findPipelineDeadlock(plan))
    r.fail(problem->at, problem->what);
}

/// /strategy: the parallel configuration, as the mesh and the training
/// settings give it, and the search's other choices.
void readStrategy(Reader &r, const json &doc, Plan &plan) {
  const json &s = r.at(doc, "", "strategy");
  r.known(s, "/strategy",
          {"dp", "tp", "pp", "vpp", "zero", "micro_batch_size",
           "num_micro_batches", "global_batch", "recompute",
           "sequence_parallel", "schedule", "stage_layers"});
  auto same = [&](const char *key, int64_t expected, const char *from) {
    if (r.integer(s, "/strategy", key) != expected)
      r.fail(std::string("/strategy/") + key, "expected " +
                                                  std::to_string(expected) +
                                                  ", as " + from + " gives it");
  };
  same("dp", plan.dp, "/mesh");
  same("tp", plan.tp, "/mesh");
  same("pp", plan.pp, "/mesh");
  same("micro_batch_size", plan.microBatchSize, "/training");
  same("num_micro_batches", plan.numMicroBatches, "/training");
  same("global_batch", plan.globalBatch, "/training");
  int64_t vpp = r.integer(s, "/strategy", "vpp");
  int64_t zero = r.integer(s, "/strategy", "zero");
  if (vpp < 1)
    r.fail("/strategy/vpp", "expected at least 1 model chunk per rank");
  if (zero < 0 || zero > 3)
    r.fail("/strategy/zero", "expected a ZeRO stage from 0 to 3");
  std::string recompute = r.string(s, "/strategy", "recompute");
  if (recompute != "none" && recompute != "selective" && recompute != "full")
    r.fail("/strategy/recompute", "expected none, selective or full");
  if (!r.at(s, "/strategy", "sequence_parallel").is_boolean())
    r.fail("/strategy/sequence_parallel", "expected true or false");
  std::string schedule = r.string(s, "/strategy", "schedule");
  if (schedule != "1f1b" && schedule != "gpipe" && schedule != "interleaved")
    r.fail("/strategy/schedule", "expected 1f1b, gpipe or interleaved");
  const json &layers = r.array(s, "/strategy", "stage_layers");
  if (int64_t(layers.size()) != plan.pp * vpp ||
      std::any_of(layers.begin(), layers.end(), [](const json &n) {
        return !n.is_number_integer() || n.get<int64_t>() < 1;
      }))
    r.fail("/strategy/stage_layers",
           "expected the layers of each of the pp x vpp = " +
               std::to_string(plan.pp * vpp) + " model chunks, at least 1");
  plan.strategy =
      "dp=" + std::to_string(plan.dp) + ",tp=" + std::to_string(plan.tp) +
      ",pp=" + std::to_string(plan.pp) + ",vpp=" + std::to_string(vpp) +
      ",zero=" + std::to_string(zero);
}

/// /topology: the machines the devices' node and local_device count in.
void readTopology(Reader &r, const json &doc, const Plan &plan) {
  if (!doc.contains("topology"))
    return;
  const json &t = doc["topology"];
  r.known(t, "/topology", {"name", "nodes", "devices_per_node", "device"});
  r.string(t, "/topology", "name");
  r.string(t, "/topology", "device");
  int64_t nodes = r.integer(t, "/topology", "nodes");
  int64_t perNode = r.integer(t, "/topology", "devices_per_node");
  if (nodes < 1 || perNode < 1)
    r.fail("/topology", "expected at least 1 node and 1 device per node");
  for (size_t i = 0; i < plan.devices.size(); ++i)
    if (plan.devices[i].node >= nodes || plan.devices[i].localDevice >= perNode)
      r.fail("/devices/" + std::to_string(i),
             "node " + std::to_string(plan.devices[i].node) + ", device " +
                 std::to_string(plan.devices[i].localDevice) +
                 " lies outside the topology's " + std::to_string(nodes) +
                 " nodes of " + std::to_string(perNode) + " devices");
}

Plan readPlan(Reader &r, const json &doc) {
  if (!doc.is_object() || doc.value("format", "") != "partita-plan")
    r.fail("/format", "not a Partita plan (expected \"partita-plan\")");
  int64_t version = r.integer(doc, "", "version");
  if (version != kPlanVersion)
    r.fail("/version", "plan format version " + std::to_string(version) +
                           "; this runtime executes version " +
                           std::to_string(kPlanVersion));
  r.known(doc, "",
          {"format", "version", "model", "training", "strategy", "mesh",
           "topology", "devices", "groups", "optimizer", "parameters",
           "programs", "predicted", "simulated", "memory"});
  Plan plan;
  plan.model = r.string(doc, "", "model");
  readTraining(r, doc, plan);
  readMesh(r, doc, plan);
  readGroups(r, doc, plan);
  const json &o = r.at(doc, "", "optimizer");
  r.known(o, "/optimizer",
          {"lr", "min_lr", "warmup_steps", "decay_steps", "decay", "beta1",
           "beta2", "eps", "weight_decay", "clip_norm"});
  plan.optimizer = {r.number(o, "/optimizer", "lr"),
                    r.number(o, "/optimizer", "min_lr"),
                    r.number(o, "/optimizer", "beta1"),
                    r.number(o, "/optimizer", "beta2"),
                    r.number(o, "/optimizer", "eps"),
                    r.number(o, "/optimizer", "weight_decay"),
                    r.number(o, "/optimizer", "clip_norm"),
                    r.integer(o, "/optimizer", "warmup_steps"),
                    r.integer(o, "/optimizer", "decay_steps"),
                    r.string(o, "/optimizer", "decay")};
  checkOptimizer(r, plan.optimizer);
  const json &params = r.array(doc, "", "parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    std::string at = "/parameters/" + std::to_string(i);
    ParameterSpec spec = readParameter(r, params[i], at, plan);
    if (!plan.parameterIndex.try_emplace(spec.name, i).second)
      r.fail(at + "/name", "parameter \"" + spec.name + "\" appears twice");
    plan.parameters.push_back(std::move(spec));
  }
  const json &programs = r.array(doc, "", "programs");
  for (size_t i = 0; i < programs.size(); ++i)
    plan.programs.push_back(readProgram(r, programs[i],
                                        "/programs/" + std::to_string(i),
                                        plan.groups, plan.numMicroBatches));
  if (int64_t(plan.programs.size()) != plan.pp)
    r.fail("/programs", "expected one program per pipeline rank");
  checkHolders(r, plan);
  checkPlan(r, plan);
  if (doc.contains("predicted")) {
    plan.predictedStepTimeS = doc["predicted"].value("step_time_s", 0.0);
    plan.predictedPeakBytes =
        doc["predicted"].value("peak_memory_bytes_per_gpu", 0.0);
  }
  readStrategy(r, doc, plan);
  readTopology(r, doc, plan);
  return plan;
}

} // namespace

Plan loadPlan(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(path + ": a directory, not a plan");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(path + ": cannot open the plan");
  std::ostringstream text;
  text << in.rdbuf();
  return parsePlan(text.str(), path);
}

Plan parsePlan(const std::string &text, const std::string &name) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception &e) {
    throw std::runtime_error(name + ": not valid JSON: " + e.what());
  }
  Reader r(name);
  try {
    return readPlan(r, doc);
  } catch (const json::exception &e) {
    // A field of the wrong type the reader does not check by name.
    throw std::runtime_error(name + ": malformed plan: " + e.what());
  }
}

} // namespace partita::runtime
