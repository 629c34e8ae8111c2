//===- PlanMemory.cpp - exec-plan-memory ----------------------------------===//

#include "compiler/CostModel/CostModel.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "compiler/Export/PlanExport.h"
#include "compiler/Topology/Topology.h"
#include "dialects/exec/ExecDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace partita {
#define GEN_PASS_DEF_EXECPLANMEMORY
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

int64_t aligned(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

int64_t bufferBytes(exec::BufferOp buf) {
  return tensorBytes(buf.getTensorType());
}

bool persistent(exec::BufferKind kind) {
  using K = exec::BufferKind;
  return kind == K::param || kind == K::param_shard || kind == K::param_grad ||
         kind == K::grad_shard || kind == K::optimizer_state ||
         kind == K::scalar;
}

/// Where a buffer is used in one phase: launch positions [first, last],
/// and whether the first use writes it afresh.
struct Use {
  int64_t first = -1, last = -1;
  bool writtenFirst = false;
};

struct MemoryPlan {
  int64_t persistentBytes = 0, keptBytes = 0, localBytes = 0;
  int64_t copies = 1;
  int64_t mostKeptSets = 0; // live at once, when chunks share kept sets
  int64_t arena() const { return persistentBytes + keptBytes + localBytes; }
};

/// Where each (model chunk, micro-batch)'s set of kept buffers lives in one
/// region that the sets share. A set is live from the chunk's forward run
/// of the micro-batch to its backward (or the step's end), and goes at the
/// lowest offset free of the sets live with it (as run-local buffers are
/// placed). Sets within 1/8 of each other's size are placed as one size,
/// their largest, in run order, which packs equal sets into as few as are
/// live at once (a chunk's few extra bytes, such as the tokens, would
/// otherwise keep the others out of its holes); larger sizes go first.
struct SetPlacement {
  int64_t bytes = 0, mostLive = 0;
  /// By chunk, each micro-batch's set's offset in the region (-1: none).
  std::map<int64_t, SmallVector<int64_t>> offsets;
};

SetPlacement placeKeptSets(exec::ScheduleOp schedule,
                           const std::map<int64_t, int64_t> &setBytes) {
  struct Set {
    int64_t chunk, microBatch, size, begin, end = INT64_MAX, offset = 0;
  };
  std::vector<Set> sets;
  std::map<std::pair<int64_t, int64_t>, size_t> setOf;
  int64_t position = 0;
  for (auto run : schedule.getBody().front().getOps<exec::RunOp>()) {
    ++position;
    auto size = setBytes.find(int64_t(run.getChunk()));
    if (size == setBytes.end())
      continue;
    std::pair<int64_t, int64_t> key{int64_t(run.getChunk()),
                                    int64_t(run.getMicroBatch())};
    if (run.getPhase() == exec::PhaseKind::forward) {
      setOf[key] = sets.size();
      sets.push_back({key.first, key.second, size->second, position});
    } else if (auto it = setOf.find(key); it != setOf.end()) {
      sets[it->second].end = position;
    }
  }
  std::set<int64_t, std::greater<>> sizes;
  for (const Set &set : sets)
    sizes.insert(set.size);
  std::map<int64_t, int64_t> padded; // size -> its class's largest
  int64_t largest = 0;
  for (int64_t size : sizes) {
    if (largest == 0 || size * 9 < largest * 8)
      largest = size;
    padded[size] = largest;
  }
  for (Set &set : sets)
    set.size = padded[set.size];
  std::vector<size_t> order(sets.size());
  std::iota(order.begin(), order.end(), size_t(0));
  llvm::stable_sort(
      order, [&](size_t x, size_t y) { return sets[x].size > sets[y].size; });
  SetPlacement placement;
  std::map<int64_t, int64_t> change; // run position -> sets live after it
  for (const Set &set : sets) {
    ++change[set.begin];
    --change[set.end];
  }
  int64_t live = 0;
  for (auto [position, delta] : change)
    placement.mostLive = std::max(placement.mostLive, live += delta);
  std::vector<size_t> placed;
  for (size_t i : order) {
    Set &set = sets[i];
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t k : placed)
      if (sets[k].begin < set.end && set.begin < sets[k].end)
        taken.push_back({sets[k].offset, sets[k].offset + sets[k].size});
    llvm::sort(taken);
    for (auto [begin, end] : taken) {
      if (set.offset + set.size <= begin)
        break;
      set.offset = std::max(set.offset, end);
    }
    placed.push_back(i);
    SmallVector<int64_t> &offsets = placement.offsets[set.chunk];
    offsets.resize(std::max<size_t>(offsets.size(), set.microBatch + 1), -1);
    offsets[set.microBatch] = set.offset;
    placement.bytes = std::max(placement.bytes, set.offset + set.size);
  }
  return placement;
}

/// One program's arena, laid out in three regions: persistent buffers
/// (parameters, their gradients and optimizer states, with a bucket's
/// in-place all-reduces side by side), buffers kept between the runs of a
/// micro-batch (a copy per micro-batch in flight, or per-chunk sets that
/// share a region), and run-local buffers packed by their live ranges.
class MemoryPlanner {
public:
  explicit MemoryPlanner(exec::ProgramOp program)
      : program(program), body(program.getBody().front()),
        buffers(body.getOps<exec::BufferOp>()),
        phases(body.getOps<exec::PhaseOp>()), b(program.getContext()) {
    for (auto [i, buf] : llvm::enumerate(buffers))
      index[buf.getSymName()] = i;
  }

  MemoryPlan run() {
    collectUses();
    countInFlight();
    classify();
    placeKept();
    placeRunLocal();
    program->setAttr("arena_bytes", b.getI64IntegerAttr(plan.arena()));
    return plan;
  }

private:
  void collectUses();
  void countInFlight();
  void collectBucketSpans();
  void classify();
  void placeKept();
  void placeKeptSetRegion(const std::map<int64_t, int64_t> &setBytes,
                          llvm::ArrayRef<std::pair<size_t, int64_t>> members);
  void placeRunLocal();
  bool runLocal(size_t i) const;
  void place(exec::BufferOp buf, int64_t offset, int64_t copies) {
    buf->setAttr("offset", b.getI64IntegerAttr(offset));
    buf->setAttr("copies", b.getI64IntegerAttr(copies));
  }
  void placePersistent(size_t i) {
    placedPersistent[i] = true;
    place(buffers[i], plan.persistentBytes, 1);
    plan.persistentBytes += aligned(bufferBytes(buffers[i]));
  }

  exec::ProgramOp program;
  Block &body;
  SmallVector<exec::BufferOp> buffers;
  llvm::StringMap<size_t> index;
  SmallVector<exec::PhaseOp> phases;
  Builder b;
  MemoryPlan plan;
  /// usesOf[buffer][phase]
  std::vector<std::map<size_t, Use>> usesOf;
  /// Micro-batches in flight, of the program and of each model chunk.
  int64_t inFlight = 1;
  std::map<int64_t, int64_t> chunkInFlight;
  /// Buffer -> its bucket's entry in spans (collectBucketSpans).
  std::map<size_t, size_t> spanOf;
  std::vector<SmallVector<size_t>> spans;
  std::vector<bool> placedPersistent;
  std::vector<size_t> local, kept;
};

void MemoryPlanner::collectUses() {
  usesOf.resize(buffers.size());
  for (auto [p, phase] : llvm::enumerate(phases)) {
    SmallVector<Operation *> launches;
    for (Operation &op : phase.getBody().front())
      launches.push_back(&op);
    // The input of an async collective is read until its wait.
    llvm::StringMap<int64_t> waitAt;
    for (auto [i, op] : llvm::enumerate(launches))
      if (auto wait = dyn_cast<exec::WaitOp>(op))
        waitAt[wait.getBuffer()] = i;
    for (auto [i, op] : llvm::enumerate(launches)) {
      SmallVector<StringRef> reads, writes;
      exec::getLaunchAccesses(op, reads, writes);
      int64_t until = i;
      // (waited for in the step phase: to the end of this one).
      if (auto c = dyn_cast<exec::CollectiveOp>(op); c && c.getAsync())
        until = waitAt.count(c.getOutput()) ? waitAt.lookup(c.getOutput())
                                            : int64_t(launches.size()) - 1;
      auto touch = [&](StringRef name, bool write, int64_t end) {
        Use &u = usesOf[index.lookup(name)][p];
        if (u.first < 0) {
          u.first = i;
          u.writtenFirst = write;
        }
        u.last = std::max(u.last, end);
      };
      for (StringRef r : reads)
        touch(r, false, until);
      for (StringRef w : writes)
        touch(w, !llvm::is_contained(reads, w), until);
    }
  }
}

/// A buffer kept between the runs of one chunk needs one copy per
/// micro-batch that chunk holds at once.
void MemoryPlanner::countInFlight() {
  for (auto schedule : body.getOps<exec::ScheduleOp>()) {
    inFlight = std::max<int64_t>(1, maxInFlight(schedule));
    for (exec::PhaseOp phase : phases)
      if (auto chunk = phase.getChunk())
        chunkInFlight[*chunk] =
            std::max<int64_t>(1, maxInFlight(schedule, int64_t(*chunk)));
  }
  plan.copies = inFlight;
}

/// Run-local: every phase that uses the buffer writes it first.
bool MemoryPlanner::runLocal(size_t i) const {
  exec::BufferKind kind = exec::BufferOp(buffers[i]).getKind();
  // Gradients written afresh in every run that uses them (reduced to
  // their ZeRO-2/3 shards at once) are run-local too.
  bool local = kind != exec::BufferKind::tokens &&
               kind != exec::BufferKind::labels &&
               (!persistent(kind) || kind == exec::BufferKind::param_grad);
  for (auto &[p, use] : usesOf[i])
    local &= use.writtenFirst;
  return local && !usesOf[i].empty();
}

/// The buffers of a bucket of in-place all-reduces (ZeRO-0's gradients),
/// in the bucket's order: persistent ones go side by side, so that the
/// runtime reduces the bucket where it lies, as one span, instead of
/// copying it into a collective workspace and back.
void MemoryPlanner::collectBucketSpans() {
  for (exec::PhaseOp phase : phases) {
    std::map<int64_t, size_t> spanOfBucket;
    for (auto c : phase.getBody().front().getOps<exec::CollectiveOp>()) {
      auto bucket = c->getAttrOfType<IntegerAttr>("bucket");
      if (!bucket || c.getKind() != exec::CollectiveKind::all_reduce ||
          c.getInput() != c.getOutput())
        continue;
      size_t buffer = index.lookup(c.getInput());
      auto [entry, added] =
          spanOfBucket.try_emplace(bucket.getInt(), spans.size());
      if (added)
        spans.emplace_back();
      if (spanOf.try_emplace(buffer, entry->second).second)
        spans[entry->second].push_back(buffer);
    }
  }
}

/// Places the persistent buffers and sorts the others into run-local and
/// kept.
void MemoryPlanner::classify() {
  collectBucketSpans();
  placedPersistent.assign(buffers.size(), false);
  for (auto [i, buf] : llvm::enumerate(buffers)) {
    if (runLocal(i)) {
      local.push_back(i);
    } else if (persistent(buf.getKind())) {
      auto span = spanOf.find(i);
      if (span == spanOf.end()) {
        placePersistent(i);
        continue;
      }
      for (size_t member : spans[span->second])
        if (!placedPersistent[member] && !runLocal(member) &&
            persistent(buffers[member].getKind()))
          placePersistent(member);
    } else {
      kept.push_back(i);
    }
  }
}

/// Kept buffers used by one model chunk's phases only have one copy per
/// micro-batch that chunk holds at once. In a program of several chunks
/// (the interleaved schedule) a chunk's such buffers form a set per
/// micro-batch instead, and the sets of all chunks share one region
/// (placeKeptSets): a chunk's copies are free while the others' fill, so
/// the region needs the schedule's fullest moment, not every chunk's
/// fullest at once.
void MemoryPlanner::placeKept() {
  std::set<int64_t> chunks;
  for (exec::PhaseOp phase : phases)
    if (auto chunk = phase.getChunk())
      chunks.insert(*chunk);
  bool shareChunks =
      chunks.size() > 1 && !body.getOps<exec::ScheduleOp>().empty();
  std::map<int64_t, int64_t> setBytes;
  std::vector<std::pair<size_t, int64_t>> setMembers; // buffer, its chunk
  int64_t keptStart = plan.persistentBytes;
  for (size_t i : kept) {
    // The chunk whose phases use it, when only one does.
    std::optional<int64_t> chunk;
    bool oneChunk = true;
    for (auto &[p, use] : usesOf[i]) {
      std::optional<int64_t> c = phases[p].getChunk();
      oneChunk &= c && (!chunk || *chunk == *c);
      chunk = c;
    }
    int64_t size = aligned(bufferBytes(buffers[i]));
    if (oneChunk && chunk && shareChunks) {
      buffers[i]->setAttr("set_offset", b.getI64IntegerAttr(setBytes[*chunk]));
      setBytes[*chunk] += size;
      setMembers.push_back({i, *chunk});
      continue;
    }
    int64_t copies = oneChunk && chunk ? chunkInFlight[*chunk] : inFlight;
    place(buffers[i], keptStart + plan.keptBytes, copies);
    plan.keptBytes += copies * size;
  }
  if (!setBytes.empty())
    placeKeptSetRegion(setBytes, setMembers);
}

/// The region the chunks' kept sets share, after the other kept buffers:
/// one entry per chunk in the program's kept_sets, with its set's bytes
/// and where each micro-batch's set starts in the arena.
void MemoryPlanner::placeKeptSetRegion(
    const std::map<int64_t, int64_t> &setBytes,
    llvm::ArrayRef<std::pair<size_t, int64_t>> members) {
  SetPlacement placement =
      placeKeptSets(*body.getOps<exec::ScheduleOp>().begin(), setBytes);
  int64_t regionStart = plan.persistentBytes + plan.keptBytes;
  SmallVector<Attribute> sets;
  std::map<int64_t, int64_t> setIndex;
  for (auto [chunk, bytes] : setBytes) {
    SmallVector<int64_t> offsets = placement.offsets[chunk];
    for (int64_t &offset : offsets)
      if (offset >= 0)
        offset += regionStart;
    setIndex[chunk] = int64_t(sets.size());
    sets.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("chunk", b.getI64IntegerAttr(chunk)),
         b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes)),
         b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offsets))}));
  }
  program->setAttr("kept_sets", b.getArrayAttr(sets));
  for (auto [i, chunk] : members)
    buffers[i]->setAttr("kept_set", b.getI64IntegerAttr(setIndex[chunk]));
  plan.keptBytes += placement.bytes;
  plan.mostKeptSets = placement.mostLive;
}

/// Run-local buffers, largest first, each at the lowest offset free of
/// the buffers placed so far that are live with it in some phase. Each
/// phase keeps, per launch position, the placed buffers live there, so
/// finding a buffer's neighbours costs its live range, not every buffer
/// placed before it.
void MemoryPlanner::placeRunLocal() {
  llvm::sort(local, [&](size_t x, size_t y) {
    return bufferBytes(buffers[x]) > bufferBytes(buffers[y]);
  });
  struct Placed {
    size_t buffer;
    int64_t offset, size;
  };
  std::vector<Placed> placed;
  std::vector<std::vector<std::vector<uint32_t>>> liveAt(phases.size());
  for (auto &bufferUses : usesOf)
    for (auto &[p, use] : bufferUses)
      if (int64_t(liveAt[p].size()) <= use.last)
        liveAt[p].resize(use.last + 1);
  // seenBy[k]: the last buffer that found placed buffer k live with it.
  std::vector<size_t> seenBy(local.size(), SIZE_MAX);
  for (size_t i : local) {
    int64_t size = aligned(bufferBytes(buffers[i]));
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (auto &[p, use] : usesOf[i])
      for (int64_t t = use.first; t <= use.last; ++t)
        for (uint32_t k : liveAt[p][t])
          if (seenBy[k] != i) {
            seenBy[k] = i;
            taken.push_back(
                {placed[k].offset, placed[k].offset + placed[k].size});
          }
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, end);
    }
    for (auto &[p, use] : usesOf[i])
      for (int64_t t = use.first; t <= use.last; ++t)
        liveAt[p][t].push_back(uint32_t(placed.size()));
    placed.push_back({i, offset, size});
    plan.localBytes = std::max(plan.localBytes, offset + size);
  }
  int64_t localStart = plan.persistentBytes + plan.keptBytes;
  for (const Placed &p : placed)
    place(buffers[p.buffer], localStart + p.offset, 1);
}

MemoryPlan planProgram(exec::ProgramOp program) {
  return MemoryPlanner(program).run();
}

/// The NCCL communicators `program` uses: the groups of its collectives
/// that span more than one rank, and each pipeline direction it sends or
/// receives in (two-rank communicators, one per direction and peer); and a
/// staging copy of the largest buffer it sends in each direction.
Communicators communicatorsOf(exec::ProgramOp program,
                              const ParallelConfig &config, int64_t kvParts) {
  int64_t stage = program.getPpRank();
  llvm::StringSet<> groups;
  std::set<std::pair<int64_t, bool>> directions; // (peer stage, sends)
  std::map<int64_t, int64_t> largestSent;        // by peer stage
  auto peerStage = [&](exec::Peer peer) {
    return (stage + (peer == exec::Peer::next ? 1 : config.pp - 1)) % config.pp;
  };
  program.walk([&](Operation *op) {
    if (auto c = dyn_cast<exec::CollectiveOp>(op))
      groups.insert(exec::stringifyGroup(c.getGroup()));
    else if (auto send = dyn_cast<exec::SendOp>(op)) {
      int64_t peer = peerStage(send.getPeer());
      directions.insert({peer, true});
      auto buffer = SymbolTable::lookupNearestSymbolFrom<exec::BufferOp>(
          send, send.getBufferAttr());
      if (buffer)
        largestSent[peer] = std::max(largestSent[peer], bufferBytes(buffer));
    } else if (auto recv = dyn_cast<exec::RecvOp>(op))
      directions.insert({peerStage(recv.getPeer()), false});
  });
  Communicators n;
  for (const auto &group : groups)
    n.collective +=
        groupMembers(group.getKey(), config, kvParts, stage, 0, 0).size() > 1;
  n.p2p = int64_t(directions.size());
  for (auto [peer, bytes] : largestSent)
    n.sendStagingBytes += double(bytes);
  return n;
}

struct ExecPlanMemoryPass : impl::ExecPlanMemoryBase<ExecPlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::Expected<CostParams> params = parseCostParams(costParams);
    if (!params) {
      module.emitError("exec-plan-memory: ")
          << llvm::toString(params.takeError());
      return signalPassFailure();
    }
    // The runtime's own memory depends on the target and the mesh: a
    // hand-built module without them has only its arenas counted.
    auto topologyAttr =
        module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName);
    auto strategy =
        module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
    std::optional<ParallelConfig> config;
    Topology topology;
    if (topologyAttr && strategy) {
      config = fromStrategyAttr(strategy);
      topology = fromAttr(topologyAttr);
    }
    int64_t kvParts = config ? keyValueParts(module, *config) : 1;

    int64_t peak = 0, runtimePeak = 0, devicePeak = 0;
    std::string lines;
    llvm::raw_string_ostream os(lines);
    for (auto program : module.getOps<exec::ProgramOp>()) {
      MemoryPlan plan = planProgram(program);
      int64_t runtime = 0;
      Communicators comms;
      if (config) {
        comms = communicatorsOf(program, *config, kvParts);
        runtime = int64_t(runtimeReserveBytes(topology, *params, comms));
        program->setAttr("runtime_bytes",
                         Builder(program).getI64IntegerAttr(runtime));
      }
      peak = std::max(peak, plan.arena());
      runtimePeak = std::max(runtimePeak, runtime);
      devicePeak = std::max(devicePeak, plan.arena() + runtime);
      std::string sets =
          plan.mostKeptSets > 0
              ? ", " + std::to_string(plan.mostKeptSets) + " chunk sets at once"
              : "";
      os << llvm::format("  pp rank %lld: %.3f GiB = persistent %.3f + kept "
                         "activations %.3f (%lld micro-batches%s) + run-local "
                         "%.3f",
                         static_cast<long long>(program.getPpRank()),
                         plan.arena() / kGiB, plan.persistentBytes / kGiB,
                         plan.keptBytes / kGiB,
                         static_cast<long long>(plan.copies), sets.c_str(),
                         plan.localBytes / kGiB);
      if (config)
        os << llvm::format("; runtime %.3f (%lld collective and %lld "
                           "pipeline NCCL communicators)",
                           runtime / kGiB,
                           static_cast<long long>(comms.collective),
                           static_cast<long long>(comms.p2p));
      os << "\n";
    }
    Builder b(module.getContext());
    module->setAttr(
        "exec.memory",
        b.getDictionaryAttr(
            {b.getNamedAttr("peak_bytes_per_rank", b.getI64IntegerAttr(peak)),
             b.getNamedAttr("runtime_bytes_per_rank",
                            b.getI64IntegerAttr(runtimePeak)),
             b.getNamedAttr("device_bytes_per_rank",
                            b.getI64IntegerAttr(devicePeak))}));
    if (quiet)
      return;
    llvm::errs() << llvm::format("memory plan: peak %.3f GiB per rank",
                                 peak / kGiB);
    if (config)
      llvm::errs() << llvm::format(", %.3f GiB of device memory with the "
                                   "runtime's",
                                   devicePeak / kGiB);
    else
      llvm::errs() << " (no dist.topology and dist.strategy: the runtime's "
                      "own memory not counted)";
    // The arenas against the cost model's tensors: both add the same
    // runtime share, which would only dilute the difference.
    auto predicted = module->getAttrOfType<DictionaryAttr>("dist.predicted");
    double estimate = numberAt(predicted, "peak_memory_bytes_per_gpu");
    double runtime =
        numberAt(predicted ? predicted.getAs<DictionaryAttr>("memory_breakdown")
                           : DictionaryAttr(),
                 "runtime");
    if (!std::isnan(runtime))
      estimate -= runtime;
    if (!std::isnan(estimate))
      llvm::errs() << llvm::format(" (cost model %.3f GiB beside the runtime, "
                                   "arena %+.1f%%)",
                                   estimate / kGiB,
                                   100 * (peak - estimate) / estimate);
    llvm::errs() << "\n" << lines;
  }
};

} // namespace
} // namespace partita
