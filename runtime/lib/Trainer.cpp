//===- Trainer.cpp - Runs a plan's training steps on one rank -------------===//

#include "partita/runtime/Trainer.h"
#include "partita/runtime/Bf16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace partita::runtime {

namespace {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(const std::string &text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text)
    h = (h ^ c) * 0x100000001B3ull;
  return h;
}

/// Element `index` of the unsharded parameter (docs/plan-format.md).
float initialValue(const ParameterSpec &p, uint64_t key, uint64_t index) {
  if (p.init == "zeros")
    return 0;
  if (p.init == "ones")
    return 1;
  uint64_t z = splitmix64(key + 2 * index), w = splitmix64(key + 2 * index + 1);
  double u1 = (double(z >> 11) + 1) * 0x1.0p-53;
  double u2 = double(w >> 11) * 0x1.0p-53;
  return float(p.initStd * std::sqrt(-2 * std::log(u1)) *
               std::cos(2 * M_PI * u2));
}

class Synthetic : public TokenSource {
public:
  Synthetic(int64_t vocab) : vocab(vocab) {}
  void sequence(int64_t index, int32_t *out, int64_t length) override {
    uint64_t h = splitmix64(0x5EED + uint64_t(index));
    uint64_t start = h % uint64_t(vocab), stride = 1 + (h >> 32) % 4;
    for (int64_t k = 0; k < length; ++k)
      out[k] = int32_t((start + uint64_t(k) * stride) % uint64_t(vocab));
  }

private:
  int64_t vocab;
};

double microseconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch())
      .count();
}

/// How a launch appears in the trace: the kernel, or the collective and
/// its group.
std::string traceName(const Launch &l) {
  switch (l.op) {
  case Launch::Op::Kernel:
    return l.kernelName();
  case Launch::Op::Send:
    return "send";
  case Launch::Op::Recv:
    return "recv";
  case Launch::Op::Wait:
    return "wait";
  case Launch::Op::Collective:
    break;
  }
  return std::string(l.collectiveName()) + " " + l.group;
}

} // namespace

std::unique_ptr<TokenSource> syntheticTokens(int64_t vocab) {
  return std::make_unique<Synthetic>(vocab);
}

namespace {
class TokenFile : public TokenSource {
public:
  TokenFile(const std::string &path, int bytesPerToken, int64_t vocab,
            int64_t sequences, int64_t length)
      : path(path), width(bytesPerToken), vocab(vocab) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
      throw std::runtime_error(path + ": cannot open the data file");
    int64_t size = in.tellg();
    if (size % width != 0)
      throw std::runtime_error(path + ": " + std::to_string(size) +
                               " bytes is not a whole number of " +
                               std::to_string(width * 8) + "-bit tokens");
    int64_t needed;
    bool past = __builtin_mul_overflow(sequences, length - 1, &needed) ||
                __builtin_add_overflow(needed, 1, &needed);
    if (past || size / width < needed)
      throw std::runtime_error(
          path + ": holds " + std::to_string(size / width) +
          " tokens; the run needs " +
          (past ? "more than 2^63" : std::to_string(needed)) + " (" +
          std::to_string(sequences) + " sequences of " +
          std::to_string(length - 1) + " tokens and one more)");
    bytes.resize(size);
    in.seekg(0);
    in.read(bytes.data(), size);
    // Every token the run reads, checked before its first step.
    for (int64_t at = 0; at < needed; ++at)
      if (uint32_t t = token(at); t >= uint64_t(vocab))
        throw std::runtime_error(path + ": token " + std::to_string(t) +
                                 " at position " + std::to_string(at) +
                                 " is outside the vocabulary of " +
                                 std::to_string(vocab));
  }
  void sequence(int64_t index, int32_t *out, int64_t length) override {
    int64_t first = index * (length - 1);
    for (int64_t k = 0; k < length; ++k)
      out[k] = int32_t(token(first + k));
  }

private:
  /// The little-endian token at position `at`.
  uint32_t token(int64_t at) const {
    const auto *p =
        reinterpret_cast<const unsigned char *>(bytes.data() + at * width);
    uint32_t t = p[0] | (p[1] << 8);
    if (width == 4)
      t |= uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    return t;
  }

  std::string path;
  int width;
  int64_t vocab;
  std::vector<char> bytes;
};
} // namespace

std::unique_ptr<TokenSource> fileTokens(const std::string &path,
                                        int bytesPerToken, int64_t vocab,
                                        int64_t sequences, int64_t length) {
  return std::make_unique<TokenFile>(path, bytesPerToken, vocab, sequences,
                                     length);
}

Trainer::Trainer(const Plan &plan, Device &device, Communicator &comm,
                 TokenSource &data, int64_t collectiveChunk)
    : plan(plan), device(device), comm(comm), data(data),
      program(plan.programs[plan.devices[comm.worldRank()].pp]),
      coords(plan.devices[comm.worldRank()]),
      collectiveChunk(std::max<int64_t>(1, collectiveChunk)) {
  for (const Phase &phase : program.phases)
    for (const Launch &l : phase.launches)
      if (l.op == Launch::Op::Kernel && !device.hasKernel(l.kernel))
        throw std::runtime_error("the plan launches kernel \"" +
                                 l.kernelName() +
                                 "\", which the device does not have");
  bool bf16 = false;
  for (const BufferSpec &b : program.buffers)
    bf16 |= b.isBf16;
  if (bf16 && !device.hasBf16())
    throw std::runtime_error("the plan has bf16 buffers, which this device "
                             "does not run yet (compile with --dtype=f32)");
  ArenaLayout layout = arenaLayout(program);
  const std::vector<std::vector<int64_t>> &copyOffsets = layout.copyOffsets;
  bytes = layout.bytes;
  // Collectives reorder blocks, and widen bf16, through workspace: one
  // area per stream they run on (the compute stream for those run in line,
  // a group's comm stream for its async ones), since collectives on
  // different streams may run at once. It is allocated with the arena, so
  // that a device without room for all of them says so before the first
  // step.
  std::map<int, int64_t> work; // f32 elements, by stream lane
  for (const Phase &phase : program.phases)
    for (size_t k = 0; k < phase.launches.size(); ++k) {
      const Launch &l = phase.launches[k];
      if (l.op != Launch::Op::Collective)
        continue;
      CollectiveRun run{collectiveRun(phase, k)};
      run.inPlace = l.input;
      std::optional<std::pair<int, int64_t>> span;
      if (l.collective == Launch::Collective::AllReduce &&
          run.members.size() > 1)
        span = inPlaceSpan(run.members, copyOffsets);
      if (span) {
        run.inPlace = span->first;
        run.chunking.rows = 1;
        run.chunking.columns = span->second;
      } else {
        run.chunking = chunking(run.members);
      }
      int64_t &w = work[collectiveStream(l).commLane()];
      w = std::max(w, run.chunking.workspace);
      k += run.members.size() - 1;
      runs.emplace(&l, std::move(run));
    }
  // Each workspace 256-byte aligned, as an allocation of its own would be.
  auto aligned = [](int64_t n) { return (n + 255) / 256 * 256; };
  std::map<int, int64_t> workAt;
  int64_t end = aligned(bytes);
  for (auto [lane, elements] : work)
    if (elements > 0) {
      workAt[lane] = aligned(end);
      end = workAt[lane] + 4 * elements;
    }
  workspaceBytes = end - aligned(bytes);
  char *arena = static_cast<char *>(device.allocateArena(end));
  for (auto [lane, at] : workAt)
    workspaces[lane] = reinterpret_cast<float *>(arena + at);
  for (size_t k = 0; k < program.buffers.size(); ++k) {
    const BufferSpec &b = program.buffers[k];
    std::vector<Storage> s(copyOffsets[k].size());
    for (size_t c = 0; c < s.size(); ++c) {
      char *at = arena + copyOffsets[k][c];
      if (b.isInt)
        s[c].i = {reinterpret_cast<int32_t *>(at), b.elements};
      else if (b.isBf16)
        s[c].h = {reinterpret_cast<uint16_t *>(at), b.elements};
      else
        s[c].f = {reinterpret_cast<float *>(at), b.elements};
    }
    buffers.push_back(std::move(s));
  }
  phaseInputs = program.phaseInputs();
  initialise();
}

Trainer::Storage &Trainer::storage(int index, int64_t microBatch) {
  std::vector<Storage> &s = buffers[index];
  return s.size() == 1 ? s[0] : s[microBatch % s.size()];
}

void Trainer::fillFromGlobal(const ParameterSpec &p, const std::string &buffer,
                             const std::function<float(uint64_t)> &global) {
  drain(); // a gather in flight would overwrite what is filled in
  // The local (tp) tensor, element by element from its global index;
  // padding rows are zero.
  int64_t n = 1;
  for (int64_t d : p.localShape)
    n *= d;
  int64_t part = p.tpDim >= 0 ? coords.tp * p.tpParts / plan.tp : 0;
  std::vector<float> local(n);
  size_t rank = p.localShape.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < n; ++e) {
    uint64_t index = 0;
    bool padding = false;
    for (size_t k = 0; k < rank; ++k) {
      int64_t g = idx[k];
      if (int64_t(k) == p.tpDim)
        g += part * p.localShape[k];
      padding |= g >= p.globalShape[k];
      index = index * p.globalShape[k] + g;
    }
    local[e] = padding ? 0.0f : global(index);
    for (size_t k = rank; k-- > 0;)
      if (++idx[k] < p.localShape[k])
        break;
      else
        idx[k] = 0;
  }
  auto it = program.bufferIndex.find(buffer);
  if (it == program.bufferIndex.end())
    throw std::runtime_error("parameter " + p.name + ": no buffer " + buffer);
  int64_t held = program.buffers[it->second].elements;
  if (held < n) { // this rank's flat 1/dp slice (ZeRO)
    int64_t begin = coords.dp * held;
    std::vector<float> slice(held, 0.0f);
    for (int64_t i = 0; i < held && begin + i < n; ++i)
      slice[i] = local[begin + i];
    local = std::move(slice);
  }
  uploadF32(it->second, local);
}

std::vector<float> Trainer::downloadF32(int index) {
  const BufferSpec &b = program.buffers[index];
  const Storage &s = storage(index, 0);
  std::vector<float> values(b.elements);
  if (!b.isBf16) {
    device.download(values.data(), s.data(), b.bytes());
    return values;
  }
  std::vector<uint16_t> half(b.elements);
  device.download(half.data(), s.data(), b.bytes());
  widenBf16(half.data(), values.data(), b.elements);
  return values;
}

void Trainer::uploadF32(int index, const std::vector<float> &values) {
  const BufferSpec &b = program.buffers[index];
  const Storage &s = storage(index, 0);
  if (!b.isBf16) {
    device.upload(s.data(), values.data(), b.bytes());
    return;
  }
  std::vector<uint16_t> half(b.elements);
  narrowBf16(values.data(), half.data(), b.elements);
  device.upload(s.data(), half.data(), b.bytes());
}

void Trainer::initialise() {
  for (const ParameterSpec &p : plan.parameters) {
    uint64_t key = fnv1a64(p.name);
    for (const ParameterHolder &h : p.holders)
      if (h.ppRank == coords.pp)
        fillFromGlobal(p, h.buffer, [&](uint64_t index) {
          return initialValue(p, key, index);
        });
    // Below f32, the master copy starts from the same (unrounded) values.
    std::string master = stateBuffer(p, StateKind::Master);
    if (program.bufferIndex.count(master))
      fillFromGlobal(p, master, [&](uint64_t index) {
        return initialValue(p, key, index);
      });
  }
}

int64_t Trainer::peer(bool next) const {
  int64_t p = (coords.pp + (next ? 1 : plan.pp - 1)) % plan.pp;
  return (p * plan.dp + coords.dp) * plan.tp + coords.tp;
}

void Trainer::fillInputs(int64_t step, int64_t microBatch, int phase) {
  int64_t b = plan.microBatchSize, s = plan.seqLen;
  std::vector<int32_t> seq(s + 1);
  for (int k : phaseInputs[size_t(phase)]) {
    const BufferSpec &spec = program.buffers[size_t(k)];
    std::vector<int32_t> tokens(b * s);
    for (int64_t r = 0; r < b; ++r) {
      int64_t j = (coords.dp * plan.numMicroBatches + microBatch) * b + r;
      data.sequence(step * plan.globalBatch + j, seq.data(), s + 1);
      int64_t offset = spec.kind == BufferKind::Tokens ? 0 : 1;
      std::copy(seq.begin() + offset, seq.begin() + offset + s,
                tokens.begin() + r * s);
    }
    device.upload(storage(k, microBatch).i.data(), tokens.data(),
                  int64_t(tokens.size()) * 4);
  }
}

std::vector<const Launch *> Trainer::collectiveRun(const Phase &phase,
                                                   size_t first) const {
  const Launch &l = phase.launches[first];
  std::vector<const Launch *> run = {&l};
  if (!l.bucket || l.dim)
    return run;
  std::set<int> touched = {l.input, l.output};
  for (size_t k = first + 1; k < phase.launches.size(); ++k) {
    const Launch &m = phase.launches[k];
    bool alike = m.op == Launch::Op::Collective && m.bucket == l.bucket &&
                 !m.dim && m.collective == l.collective && m.group == l.group &&
                 m.async == l.async && m.reduceMax == l.reduceMax &&
                 m.accumulateOutput == l.accumulateOutput &&
                 m.lastMicroBatch == l.lastMicroBatch &&
                 m.firstMicroBatch == l.firstMicroBatch &&
                 movesAsBf16(m) == movesAsBf16(l);
    if (!alike || touched.count(m.input) || touched.count(m.output))
      break;
    touched.insert({m.input, m.output});
    run.push_back(&m);
  }
  return run;
}

std::optional<std::pair<int, int64_t>> Trainer::inPlaceSpan(
    const std::vector<const Launch *> &members,
    const std::vector<std::vector<int64_t>> &copyOffsets) const {
  const BufferSpec &first = program.buffers[members.front()->input];
  int64_t elementBytes = first.elementBytes();
  std::vector<std::pair<int64_t, int>> starts; // offset, buffer
  std::set<int> inSpan;
  for (const Launch *m : members) {
    const BufferSpec &b = program.buffers[m->input];
    if (m->input != m->output || copyOffsets[m->input].size() != 1 || b.isInt ||
        b.isBf16 != first.isBf16 ||
        copyOffsets[m->input][0] % elementBytes != 0 ||
        !inSpan.insert(m->input).second)
      return std::nullopt;
    starts.push_back({copyOffsets[m->input][0], m->input});
  }
  std::sort(starts.begin(), starts.end());
  int64_t begin = starts.front().first, end = begin;
  for (auto [at, k] : starts) {
    // Each member starts where the one before ends, or at the next 64 bytes.
    if (at < end || at > (end + 63) / 64 * 64)
      return std::nullopt;
    end = at + program.buffers[k].bytes();
  }
  for (size_t k = 0; k < program.buffers.size(); ++k)
    if (!inSpan.count(int(k)))
      for (int64_t at : copyOffsets[k])
        if (at < end && begin < at + program.buffers[k].bytes() &&
            program.buffers[k].bytes() > 0)
          return std::nullopt;
  return std::make_pair(starts.front().second, (end - begin) / elementBytes);
}

int64_t Trainer::flatShard(const Launch &l, int64_t g) const {
  int64_t whole = program.buffers[l.output].elements;
  return l.collective == Launch::Collective::AllGather ? (whole + g - 1) / g
                                                       : whole;
}

Trainer::Chunking
Trainer::chunking(const std::vector<const Launch *> &members) const {
  const Launch &l = *members.front();
  const BufferSpec &in = program.buffers[l.input];
  const BufferSpec &out = program.buffers[l.output];
  int64_t g = comm.groupSize(l.group);
  Chunking c;
  bool gather = l.collective == Launch::Collective::AllGather;
  bool asBf16 = movesAsBf16(l), acc = l.accumulateOutput;
  // The workspace a chunk may take, in halves: one spare for rounding a
  // bf16 part up to whole f32 elements.
  constexpr int64_t kMost = std::numeric_limits<int64_t>::max();
  int64_t budget =
      collectiveChunk > kMost / 2 ? kMost : 2 * collectiveChunk - 1;
  if (l.collective == Launch::Collective::AllReduce) {
    c.rows = 1;
    for (const Launch *m : members)
      c.columns += program.buffers[m->input].elements;
    if (members.size() == 1) // in place, f32 or bf16 (Plan.cpp checks): whole
      return c;
    // A bucket: its members side by side in the workspace.
    int64_t halves = asBf16 ? 1 : 2;
    c.inColumns = true;
    c.columnsPerChunk = std::clamp<int64_t>(budget / halves, 1,
                                            std::max<int64_t>(1, c.columns));
    c.workspace = (c.columnsPerChunk * halves + 1) / 2;
    return c;
  }
  // Workspace in halves (2 bytes) per column of a chunk, and in f32
  // elements for a chunk of n columns (see collective() for the layouts):
  // f32, this rank's shard and every rank's; bf16, the same at half the
  // size, and to add a reduce-scatter's result to the output, its f32
  // widening.
  int64_t halvesPerColumn = !asBf16 ? 2 * (g + 1) : g + 1 + (acc ? 2 : 0);
  auto columnsWorkspace = [&](int64_t n) {
    return asBf16 ? ((g + 1) * n + 1) / 2 + (acc ? n : 0) : (g + 1) * n;
  };
  auto byColumns = [&](int64_t rows, int64_t columns) {
    c.inColumns = true;
    c.rows = rows;
    c.columns = columns;
    c.columnsPerChunk = std::clamp<int64_t>(budget / halvesPerColumn, 1,
                                            std::max<int64_t>(1, columns));
    c.workspace = columnsWorkspace(c.columnsPerChunk);
    return c;
  };
  if (!l.dim) { // a row of shards per member, side by side
    int64_t columns = 0;
    for (const Launch *m : members)
      columns += flatShard(*m, g);
    return byColumns(1, columns);
  }
  // [rows][g][inner] on the gathered side, [rows][inner] on the other.
  const BufferSpec &whole = gather ? out : in;
  int64_t rows = 1;
  for (int64_t k = 0; k < *l.dim; ++k)
    rows *= whole.shape[k];
  int64_t inner = rows > 0 ? whole.elements / rows / g : 0;
  // Whole rows, in halves per row. f32: the shard's rows widened (bf16),
  // the rank blocks reordered, and the result (an all-gather's reordered
  // again to round it to bf16). bf16: the rank blocks.
  int64_t halvesPerRow =
      asBf16   ? g * inner
      : gather ? 2 * ((in.isBf16 ? inner : 0) + g * inner +
                      (out.isBf16 ? g * inner : 0))
               : 2 * ((in.isBf16 ? g * inner : 0) + g * inner + inner);
  if (halvesPerRow == 0 || halvesPerRow > budget || rows <= 1) // in columns
    return byColumns(rows, inner);
  c.rows = rows;
  c.columns = inner;
  c.rowsPerChunk = std::clamp<int64_t>(budget / halvesPerRow, 1, rows);
  c.workspace = (c.rowsPerChunk * halvesPerRow + 1) / 2;
  return c;
}

bool Trainer::movesAsBf16(const Launch &l) const {
  return program.buffers[l.input].isBf16 && program.buffers[l.output].isBf16 &&
         (!l.accumulateOutput ||
          (l.collective == Launch::Collective::ReduceScatter && !l.dim));
}

void Trainer::runPhase(const Phase &phase, int64_t microBatch, int64_t step) {
  KernelContext ctx;
  ctx.step = step;
  ctx.optimizer = &plan.optimizer;
  ctx.tpRank = coords.tp;
  ctx.dpRank = coords.dp;
  auto ref = [&](int index) {
    const BufferSpec &spec = program.buffers[index];
    Storage &s = storage(index, microBatch);
    TensorRef t;
    t.shape = &spec.shape;
    t.n = spec.elements;
    t.f = s.f.data();
    t.h = s.h.data();
    t.i = s.i.data();
    return t;
  };
  auto call = [&](const Launch &l) {
    KernelCall c;
    for (int i : l.ins)
      c.ins.push_back(ref(i));
    for (int o : l.outs)
      c.outs.push_back(ref(o));
    c.accumulate = l.accumulate;
    c.params = &l.kernelParams;
    return c;
  };
  for (size_t k = 0; k < phase.launches.size(); ++k) {
    const Launch &l = phase.launches[k];
    // A run of collectives (a bucket) goes as one.
    const CollectiveRun *run =
        l.op == Launch::Op::Collective ? &runs.at(&l) : nullptr;
    if (run)
      k += run->members.size() - 1;
    if (!l.runsIn(microBatch, plan.numMicroBatches))
      continue;
    const char *what = l.op == Launch::Op::Kernel ? plan::name(l.kernel).data()
                       : l.op == Launch::Op::Collective ? "collective"
                       : l.op == Launch::Op::Wait       ? "wait"
                                                        : "p2p";
    if (deviceTiming)
      device.markLaunch(what);
    auto start = std::chrono::steady_clock::now();
    int64_t together = 1;
    switch (l.op) {
    case Launch::Op::Kernel: {
      if (device.launchesTogether(l.kernel)) {
        size_t end = runTogether(phase, k, microBatch);
        std::vector<KernelCall> calls;
        for (size_t j = k; j < end; ++j)
          calls.push_back(call(phase.launches[j]));
        device.launchAll(l.kernel, calls, ctx);
        together = int64_t(end - k);
        k = end - 1;
        break;
      }
      if (l.kernel == Kernel::ShardSlice) {
        ctx.groupRank = comm.groupRank(l.kernelParams.group);
        ctx.groupSize = comm.groupSize(l.kernelParams.group);
      }
      KernelCall c = call(l);
      device.launch(l.kernel, c.ins, c.outs, c.accumulate, l.kernelParams, ctx);
    } break;
    case Launch::Op::Collective: {
      together = int64_t(run->members.size());
      if (!l.async) {
        collective(*run, microBatch, comm, Stream::Compute);
        break;
      }
      auto ranUs = std::make_shared<std::pair<double, double>>();
      std::shared_future<void> done = comm.start(
          l.group, [this, &l, run, microBatch, ranUs](Communicator &c) {
            ranUs->first = microseconds(std::chrono::steady_clock::now());
            collective(*run, microBatch, c, collectiveStream(l));
            ranUs->second = microseconds(std::chrono::steady_clock::now());
          });
      // Each member is waited for on its own; the run is traced once.
      for (const Launch *m : run->members)
        inFlight[m->output] = {done, ranUs, m, m == &l ? together : 0};
      break;
    }
    case Launch::Op::Wait: {
      auto it = inFlight.find(l.input);
      if (it == inFlight.end() && l.firstMicroBatch)
        break; // the first step: the previous one started nothing
      if (it == inFlight.end())
        throw std::runtime_error("wait for buffer " +
                                 program.buffers[l.input].name +
                                 " with no collective in flight");
      finish(it, microBatch, phase.kind);
      break;
    }
    case Launch::Op::Send: {
      comm.send(peer(l.toNext), storage(l.input, microBatch).data(),
                program.buffers[l.input].bytes());
      break;
    }
    case Launch::Op::Recv: {
      comm.recv(peer(l.toNext), storage(l.input, microBatch).data(),
                program.buffers[l.input].bytes());
      break;
    }
    }
    auto end = std::chrono::steady_clock::now();
    if (!deviceTiming)
      seconds[what] += std::chrono::duration<double>(end - start).count();
    // An async collective appears where it ran, when it is waited for.
    if (trace && !(l.op == Launch::Op::Collective && l.async))
      trace->push_back(
          {traceName(l), l.op != Launch::Op::Kernel && l.op != Launch::Op::Wait,
           microseconds(start), microseconds(end) - microseconds(start),
           currentStep, microBatch, phase.kind, together});
  }
}

size_t Trainer::runTogether(const Phase &phase, size_t first,
                            int64_t microBatch) const {
  Kernel kernel = phase.launches[first].kernel;
  std::set<int> read, written;
  size_t end = first;
  for (; end < phase.launches.size(); ++end) {
    const Launch &l = phase.launches[end];
    if (l.op != Launch::Op::Kernel || l.kernel != kernel ||
        !l.runsIn(microBatch, plan.numMicroBatches))
      break;
    auto touches = [](const std::vector<int> &buffers,
                      const std::set<int> &set) {
      return std::any_of(buffers.begin(), buffers.end(),
                         [&](int b) { return set.count(b) > 0; });
    };
    if (touches(l.ins, written) || touches(l.outs, written) ||
        touches(l.outs, read))
      break;
    read.insert(l.ins.begin(), l.ins.end());
    written.insert(l.outs.begin(), l.outs.end());
  }
  return end;
}

void Trainer::finish(std::map<int, InFlight>::iterator it, int64_t microBatch,
                     const std::string &phase) {
  it->second.done.get();
  if (trace && it->second.traced > 0)
    trace->push_back({traceName(*it->second.launch), true,
                      it->second.ranUs->first,
                      it->second.ranUs->second - it->second.ranUs->first,
                      currentStep, microBatch, phase, it->second.traced});
  inFlight.erase(it);
}

void Trainer::drain() {
  while (!inFlight.empty())
    finish(inFlight.begin(), 0, "step");
}

Trainer::~Trainer() {
  // The trace's vector may be gone, and a destructor must not throw.
  for (auto &[buffer, flight] : inFlight)
    flight.done.wait();
}

std::vector<float> Trainer::gatherGlobal(const ParameterSpec &p,
                                         const std::string &buffer) {
  drain();
  const ParameterHolder &h = p.holders.front();
  const Program &holder = plan.programs[h.ppRank];
  auto spec = holder.bufferIndex.find(buffer);
  if (spec == holder.bufferIndex.end())
    throw std::runtime_error("parameter " + p.name + ": no buffer " + buffer);
  int64_t me = comm.worldRank(), local = 1;
  for (int64_t d : p.localShape)
    local *= d;
  int64_t held = holder.buffers[spec->second].elements;
  bool sharded = held < local; // flat 1/dp slices (ZeRO)
  std::vector<std::vector<float>> parts;
  for (int64_t part = 0; part < p.tpParts; ++part) {
    int64_t t = part * plan.tp / p.tpParts;
    std::vector<float> whole;
    for (int64_t d = 0; d < (sharded ? plan.dp : 1); ++d) {
      int64_t owner = (h.ppRank * plan.dp + d) * plan.tp + t;
      std::vector<float> mine;
      if (owner == me) { // sent from host memory
        mine = downloadF32(program.bufferIndex.at(buffer));
        comm.send(0, mine.data(), mine.size() * 4);
      }
      if (me == 0) {
        std::vector<float> piece(held);
        comm.recv(owner, piece.data(), held * 4);
        whole.insert(whole.end(), piece.begin(), piece.end());
      }
    }
    comm.finishSends();
    whole.resize(local);
    parts.push_back(std::move(whole));
  }
  if (me != 0)
    return {};
  // Concatenate the parts along the tp dimension, then drop the padding
  // (trailing rows of the vocabulary).
  int64_t dim = p.tpDim >= 0 ? p.tpDim : 0, outer = 1, inner = 1;
  for (int64_t k = 0; k < dim; ++k)
    outer *= p.localShape[k];
  for (size_t k = dim; k < p.localShape.size(); ++k)
    inner *= p.localShape[k];
  std::vector<float> joined(outer * inner * p.tpParts);
  for (int64_t part = 0; part < p.tpParts; ++part)
    for (int64_t o = 0; o < outer; ++o)
      std::copy(parts[part].begin() + o * inner,
                parts[part].begin() + (o + 1) * inner,
                joined.begin() + (o * p.tpParts + part) * inner);
  int64_t n = 1;
  for (int64_t g : p.globalShape)
    n *= g;
  joined.resize(n);
  return joined;
}

std::string Trainer::stateBuffer(const ParameterSpec &p, StateKind kind) const {
  if (kind == StateKind::Value)
    return p.holders.front().buffer;
  // AdamM, AdamV and Master follow Value in the prefixes' order.
  return kOptimizerStatePrefixes[int(kind) - 1] + p.stateBufferStem();
}

std::map<std::string, std::vector<float>> Trainer::gatherParameters() {
  std::map<std::string, std::vector<float>> out;
  for (const ParameterSpec &p : plan.parameters) {
    std::vector<float> global =
        gatherGlobal(p, stateBuffer(p, StateKind::Value));
    if (comm.worldRank() == 0)
      out[p.name] = std::move(global);
  }
  return out;
}

std::string Trainer::gradientBuffer(const ParameterSpec &p,
                                    const ParameterHolder &h) const {
  const Program &holder = plan.programs[h.ppRank];
  int value = holder.bufferIndex.at(h.buffer);
  // The gradient is what the parameter's adamw launch reads beside it.
  for (const Launch &l : holder.phases[holder.stepPhase].launches)
    if (l.op == Launch::Op::Kernel && l.kernel == Kernel::AdamW &&
        l.ins.size() > 1 && l.ins[0] == value)
      return holder.buffers[l.ins[1]].name;
  throw std::runtime_error("parameter " + p.name +
                           ": no adamw launch updates " + h.buffer);
}

std::map<std::string, std::vector<float>> Trainer::gatherGradients() {
  std::map<std::string, std::vector<float>> out;
  for (const ParameterSpec &p : plan.parameters) {
    std::vector<float> global =
        gatherGlobal(p, gradientBuffer(p, p.holders.front()));
    if (comm.worldRank() == 0)
      out[p.name] = std::move(global);
  }
  return out;
}

std::string Trainer::differingCopies(const ParameterSpec &p, bool gradient) {
  drain();
  int64_t me = comm.worldRank(), local = 1;
  for (int64_t d : p.localShape)
    local *= d;
  // On rank 0: the first copy of each tensor-parallel part, and the first
  // copy that differs from it.
  std::map<int64_t, std::pair<int64_t, std::vector<float>>> first;
  std::string differs;
  for (const ParameterHolder &h : p.holders) {
    const Program &holder = plan.programs[h.ppRank];
    std::string buffer = gradient ? gradientBuffer(p, h) : h.buffer;
    int64_t held = holder.buffers[holder.bufferIndex.at(buffer)].elements;
    if (held < local)
      continue; // ZeRO shards: one copy of each element
    for (int64_t d = 0; d < plan.dp; ++d)
      for (int64_t t = 0; t < plan.tp; ++t) {
        int64_t owner = (h.ppRank * plan.dp + d) * plan.tp + t;
        if (owner == me) {
          std::vector<float> mine = downloadF32(program.bufferIndex.at(buffer));
          comm.send(0, mine.data(), mine.size() * 4);
        }
        if (me != 0)
          continue;
        std::vector<float> copy(held);
        comm.recv(owner, copy.data(), held * 4);
        int64_t part = t * p.tpParts / plan.tp;
        auto [it, isFirst] = first.try_emplace(part, owner, copy);
        if (isFirst || !differs.empty())
          continue;
        int64_t count = 0;
        double worst = 0;
        for (int64_t i = 0; i < held; ++i)
          if (std::memcmp(&copy[i], &it->second.second[i], 4) != 0) {
            ++count;
            worst = std::max(worst,
                             double(std::fabs(copy[i] - it->second.second[i])));
          }
        if (count)
          differs = "rank " + std::to_string(owner) + "'s copy of " + p.name +
                    (gradient ? "'s gradient" : "") + " differs from rank " +
                    std::to_string(it->second.first) + "'s in " +
                    std::to_string(count) + " of " + std::to_string(held) +
                    " elements (by up to " + std::to_string(worst) + ")";
      }
    comm.finishSends();
  }
  return differs;
}

void Trainer::forEachStateBuffer(const std::function<void(int)> &visit) {
  drain();
  for (size_t k = 0; k < program.buffers.size(); ++k) {
    if (program.buffers[k].isState())
      visit(int(k));
  }
}

void Trainer::readState(
    const std::function<void(const BufferSpec &, const float *)> &visit) {
  forEachStateBuffer([&](int k) {
    std::vector<float> host = downloadF32(k);
    visit(program.buffers[k], host.data());
  });
}

void Trainer::writeState(
    const std::function<void(const BufferSpec &, float *)> &fill) {
  forEachStateBuffer([&](int k) {
    std::vector<float> host(program.buffers[k].elements, 0.0f);
    fill(program.buffers[k], host.data());
    uploadF32(k, host);
  });
}

StepResult Trainer::step(int64_t step) {
  currentStep = step + 1;
  int64_t callsBefore = collectiveCalls.load();
  // The compute stream's work outside launches is timed as its own class.
  if (deviceTiming)
    device.markLaunch("fill_zero");
  for (size_t k = 0; k < program.buffers.size(); ++k)
    if (program.buffers[k].zeroedEachStep())
      for (Storage &s : buffers[k])
        device.fillZero(s.data(), program.buffers[k].bytes(), Stream::Compute);
  for (const Run &run : program.schedule) {
    if (program.phases[run.phase].kind == "forward" &&
        !phaseInputs[size_t(run.phase)].empty()) {
      if (deviceTiming)
        device.markLaunch("upload_tokens");
      fillInputs(step, run.microBatch, run.phase);
    }
    runPhase(program.phases[run.phase], run.microBatch, step);
  }
  runPhase(program.phases[program.stepPhase], 0, step);
  if (deviceTiming)
    device.markLaunch(""); // the end of the last launch's time
  comm.finishSends();
  StepResult result;
  auto scalar = [&](int index) { return downloadF32(index).at(0); };
  auto loss = program.bufferIndex.find("loss");
  if (loss != program.bufferIndex.end()) {
    result.loss = scalar(loss->second);
    result.hasLoss = true;
  }
  auto sumsq = program.bufferIndex.find("grad_sumsq");
  if (sumsq != program.bufferIndex.end())
    result.gradNorm = std::sqrt(double(scalar(sumsq->second)));
  device.synchronize(); // the step ends when its last launch has run
  result.collectiveCalls = collectiveCalls.load() - callsBefore;
  return result;
}

} // namespace partita::runtime
