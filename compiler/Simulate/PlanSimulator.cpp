//===- PlanSimulator.cpp - Discrete-event simulation of exec plans --------===//

#include "compiler/Simulate/PlanSimulator.h"

#include "compiler/Export/PlanExport.h"
#include "compiler/Import/GraphBuilder.h"
#include "compiler/Topology/Topology.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "partita/plan/Kernels.h"

#include <deque>

namespace partita {

using llvm::json::Array;
using llvm::json::Object;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

/// The state of one pipeline rank's representative as it runs its step.
struct RankState {
  exec::ProgramOp program;
  int64_t pp = 0, rank = 0;
  llvm::StringMap<mlir::RankedTensorType> buffers;
  std::map<std::pair<int64_t, int64_t>, exec::PhaseOp> phases; // kind, chunk
  exec::PhaseOp step;
  std::vector<exec::RunOp> runs;
  size_t run = 0;       // runs.size(): the step phase
  bool inPhase = false; // launches of runs[run] (or the step) loaded
  std::vector<mlir::Operation *> launches;
  size_t next = 0;
  bool done = false;
  double computeFree = 0; // when the compute stream is next free
  /// When each group's comm stream is next free.
  std::map<std::string, double> commFree;
  double linkFree = 0; // when the outgoing pipeline link is next free
  /// Async collectives in flight: when each ends and its group, by output.
  std::map<std::string, std::pair<double, std::string>> inFlight;
  std::map<std::string, CollectiveGroup> groups;
  SimulatedRank stats;
};

class Simulator {
public:
  Simulator(const ParallelConfig &config, const TopologyGraph &graph,
            const DeviceRoofline &device, const CostParams &params,
            int64_t kvParts, bool record)
      : config(config), graph(graph), device(device), params(params),
        kvParts(kvParts), record(record) {}

  llvm::Error load(mlir::ModuleOp module);
  llvm::Error run();
  SimulationResult result;

private:
  enum class Step { Advanced, Blocked, Finished };
  llvm::Expected<Step> advance(RankState &r);
  llvm::Expected<double> kernelTime(RankState &r, exec::KernelOp kernel);
  double bytes(RankState &r, llvm::StringRef buffer) const;
  const CollectiveGroup &group(RankState &r, llvm::StringRef name);
  void span(RankState &r, llvm::StringRef stream, std::string name,
            double start, double duration);
  llvm::StringRef phaseName(RankState &r) const;
  int64_t microBatch(RankState &r) const;
  /// Runs collective `launches[at]` (and the rest of its bucket) on its
  /// group's comm stream, no earlier than `notBefore`; returns when it ends.
  double issueCollective(RankState &r,
                         llvm::ArrayRef<mlir::Operation *> launches, size_t at,
                         double notBefore);
  /// The step phase's next_step collectives, started at the end of the
  /// previous step: in the steady state they are in flight as a step
  /// begins.
  void carryFromLastStep(RankState &r);

  const ParallelConfig &config;
  const TopologyGraph &graph;
  const DeviceRoofline &device;
  const CostParams &params;
  int64_t kvParts;
  bool record;
  std::vector<RankState> ranks;
  /// Arrival times of pipeline messages in flight, per (from, to) pp rank.
  std::map<std::pair<int64_t, int64_t>, std::deque<double>> inFlight;
};

llvm::Error Simulator::load(mlir::ModuleOp module) {
  for (auto program : module.getOps<exec::ProgramOp>()) {
    RankState r;
    r.program = program;
    r.pp = program.getPpRank();
    r.rank = meshRank(r.pp, 0, 0, config.dp, config.tp);
    r.stats.ppRank = r.pp;
    r.stats.rank = r.rank;
    mlir::Block &body = program.getBody().front();
    for (auto buf : body.getOps<exec::BufferOp>())
      r.buffers[buf.getSymName()] = buf.getType();
    for (auto phase : body.getOps<exec::PhaseOp>()) {
      if (phase.getKind() == exec::PhaseKind::step)
        r.step = phase;
      else
        r.phases[{int64_t(phase.getKind()), phase.getChunk().value_or(0)}] =
            phase;
    }
    for (auto schedule : body.getOps<exec::ScheduleOp>())
      for (auto run : schedule.getBody().front().getOps<exec::RunOp>())
        r.runs.push_back(run);
    if (r.runs.empty())
      return fail("exec.program @" + program.getSymName() +
                  " has no schedule; run exec-schedule-pipeline first");
    ranks.push_back(std::move(r));
  }
  if (ranks.empty())
    return fail("the module has no exec programs; compile it with "
                "dist-lower-to-exec, exec-build-backward and "
                "exec-schedule-pipeline first");
  return llvm::Error::success();
}

double Simulator::bytes(RankState &r, llvm::StringRef buffer) const {
  auto type = r.buffers.lookup(buffer);
  return type ? double(tensorBytes(type)) : 0;
}

const CollectiveGroup &Simulator::group(RankState &r, llvm::StringRef name) {
  auto it = r.groups.find(name.str());
  if (it == r.groups.end()) {
    // The stage's groups of the kind run at once, as the cost model has
    // them: a dp group per tp rank, a tp group per dp rank.
    int64_t concurrent = name == "dp"   ? config.tp
                         : name == "tp" ? config.dp
                                        : 1;
    int64_t shift = name == "tp" ? config.tp : 1;
    it =
        r.groups
            .emplace(name.str(),
                     CollectiveGroup(
                         graph, groupMembers(name, config, kvParts, r.pp, 0, 0),
                         concurrent, shift))
            .first;
  }
  return it->second;
}

llvm::StringRef Simulator::phaseName(RankState &r) const {
  if (r.run == r.runs.size())
    return "step";
  return exec::stringifyPhaseKind(r.runs[r.run].getPhase());
}

int64_t Simulator::microBatch(RankState &r) const {
  return r.run == r.runs.size() ? -1 : r.runs[r.run].getMicroBatch();
}

void Simulator::span(RankState &r, llvm::StringRef stream, std::string name,
                     double start, double duration) {
  if (!record || duration <= 0)
    return;
  result.spans.push_back({r.pp, r.rank, stream.str(), std::move(name),
                          phaseName(r).str(), microBatch(r), start, duration});
}

llvm::Expected<double> Simulator::kernelTime(RankState &r,
                                             exec::KernelOp kernel) {
  plan::Kernel which = kernel.getKernel();
  std::vector<std::vector<int64_t>> shapes;
  for (mlir::Attribute ref : kernel.getIns()) {
    mlir::RankedTensorType t =
        r.buffers.lookup(llvm::cast<mlir::FlatSymbolRefAttr>(ref).getValue());
    shapes.emplace_back(t.getShape().begin(), t.getShape().end());
  }
  plan::WorkParams params;
  if (mlir::DictionaryAttr dict = kernel.getParamsAttr()) {
    if (auto heads = dict.getAs<mlir::IntegerAttr>("num_heads"))
      params.numHeads = heads.getInt();
    if (auto window = dict.getAs<mlir::IntegerAttr>("window"))
      params.window = window.getInt();
  }
  std::optional<plan::KernelWork> work =
      plan::kernelWork(which, shapes, params);
  if (!work)
    return fail("exec.program @" + r.program.getSymName() + ": kernel '" +
                kernel.getKernelName() +
                "' needs num_heads and [batch, seq, width] inputs");
  if (!work->memoryBound()) {
    auto typed = r.buffers.lookup(
        llvm::cast<mlir::FlatSymbolRefAttr>(kernel.getIns()[work->typedBy])
            .getValue());
    double elementBytes = typed.getElementType().getIntOrFloatBitWidth() / 8.0;
    double time = 0;
    for (const plan::KernelWork::Gemm &g : work->gemms)
      time += device.gemmTime(g.m, g.n, g.k, elementBytes);
    if (const auto &a = work->attention)
      time += a->passes * device.attentionTime(a->batchHeads, a->queries,
                                               a->context, a->headDim,
                                               elementBytes);
    return time;
  }
  // Everything else is bound by memory: every operand read or written once.
  double traffic = 0;
  for (auto refs : {kernel.getIns(), kernel.getOuts()})
    for (auto ref : refs)
      traffic += bytes(r, llvm::cast<mlir::FlatSymbolRefAttr>(ref).getValue());
  return device.memoryTime(traffic);
}

llvm::Expected<Simulator::Step> Simulator::advance(RankState &r) {
  if (r.done)
    return Step::Finished;
  if (!r.inPhase) {
    exec::PhaseOp phase = r.step;
    if (r.run < r.runs.size()) {
      exec::RunOp run = r.runs[r.run];
      phase = r.phases.count({int64_t(run.getPhase()), run.getChunk()})
                  ? r.phases[{int64_t(run.getPhase()), run.getChunk()}]
                  : exec::PhaseOp();
      if (!phase)
        return fail("exec.program @" + r.program.getSymName() +
                    ": the schedule runs a " +
                    exec::stringifyPhaseKind(run.getPhase()) +
                    " phase of chunk " + llvm::Twine(run.getChunk()) +
                    " that the program does not have");
    }
    r.launches.clear();
    if (phase)
      for (mlir::Operation &op : phase.getBody().front())
        r.launches.push_back(&op);
    r.next = 0;
    r.inPhase = true;
  }
  if (r.next == r.launches.size()) {
    r.inPhase = false;
    if (r.run == r.runs.size()) {
      r.done = true;
      r.stats.finishS = std::max(r.computeFree, r.linkFree);
      for (const auto &[group, free] : r.commFree)
        r.stats.finishS = std::max(r.stats.finishS, free);
      return Step::Finished;
    }
    ++r.run;
    return Step::Advanced;
  }
  mlir::Operation *op = r.launches[r.next];
  int64_t P = static_cast<int64_t>(ranks.size());
  auto peerOf = [&](exec::Peer peer) {
    return peer == exec::Peer::next ? (r.pp + 1) % P : (r.pp + P - 1) % P;
  };
  if (auto kernel = llvm::dyn_cast<exec::KernelOp>(op)) {
    llvm::Expected<double> time = kernelTime(r, kernel);
    if (!time)
      return time.takeError();
    span(r, "compute", kernel.getKernelName().str(), r.computeFree, *time);
    r.computeFree += *time;
    r.stats.computeBusyS += *time;
  } else if (auto collective = llvm::dyn_cast<exec::CollectiveOp>(op);
             collective && collective.getLastMicroBatch() &&
             microBatch(r) != config.numMicroBatches - 1) {
    // Runs in the last micro-batch only.
  } else if (auto collective = llvm::dyn_cast<exec::CollectiveOp>(op);
             collective && collective.getNextStep()) {
    // Started here for the next step; this step's copy came from the last.
  } else if (auto collective = llvm::dyn_cast<exec::CollectiveOp>(op)) {
    // A group's comm stream runs its collectives in launch order; the compute
    // stream waits for a synchronous one at once, for an async one at its wait.
    std::string groupName = exec::stringifyGroup(collective.getGroup()).str();
    double commFree = issueCollective(r, r.launches, r.next, r.computeFree);
    if (collective.getAsync()) {
      r.inFlight[collective.getOutput().str()] = {commFree, groupName};
    } else {
      r.stats.exposedCommS[groupName] += commFree - r.computeFree;
      r.computeFree = commFree;
    }
  } else if (auto wait = llvm::dyn_cast<exec::WaitOp>(op);
             wait && wait.getFirstMicroBatch() && microBatch(r) != 0) {
    // Waits in the first micro-batch only.
  } else if (auto wait = llvm::dyn_cast<exec::WaitOp>(op)) {
    auto it = r.inFlight.find(wait.getBuffer().str());
    if (it == r.inFlight.end())
      return fail("exec.program @" + r.program.getSymName() + ": exec.wait @" +
                  wait.getBuffer() + " has no collective in flight");
    auto [end, groupName] = it->second;
    r.inFlight.erase(it);
    double waited = std::max(0.0, end - r.computeFree);
    span(r, "compute", "wait " + groupName, r.computeFree, waited);
    r.stats.exposedCommS[groupName] += waited;
    r.computeFree += waited;
  } else if (auto send = llvm::dyn_cast<exec::SendOp>(op)) {
    // Sends are buffered: the compute stream goes on; messages to one peer
    // leave one after another.
    int64_t peer = peerOf(send.getPeer());
    double size = bytes(r, send.getBuffer());
    int64_t peerRank = meshRank(peer, 0, 0, config.dp, config.tp);
    double time =
        CollectiveGroup(graph, {r.rank, peerRank})
            .time(CollectiveKind::SendRecv, size, params.collectiveEfficiency);
    double start = std::max(r.computeFree, r.linkFree);
    span(r, "p2p", "send", start, time);
    r.linkFree = start + time;
    r.stats.commBusyS += time;
    inFlight[{r.pp, peer}].push_back(start + time);
  } else if (auto recv = llvm::dyn_cast<exec::RecvOp>(op)) {
    int64_t peer = peerOf(recv.getPeer());
    std::deque<double> &queue = inFlight[{peer, r.pp}];
    if (queue.empty())
      return Step::Blocked;
    double arrival = queue.front();
    queue.pop_front();
    double wait = std::max(0.0, arrival - r.computeFree);
    span(r, "p2p", "recv", r.computeFree, wait);
    r.computeFree += wait;
    r.stats.pipelineWaitS += wait;
  }
  ++r.next;
  return Step::Advanced;
}

double Simulator::issueCollective(RankState &r,
                                  llvm::ArrayRef<mlir::Operation *> launches,
                                  size_t at, double notBefore) {
  auto collective = llvm::cast<exec::CollectiveOp>(launches[at]);
  CollectiveKind kind =
      collective.getKind() == exec::CollectiveKind::all_gather
          ? CollectiveKind::AllGather
      : collective.getKind() == exec::CollectiveKind::reduce_scatter
          ? CollectiveKind::ReduceScatter
          : CollectiveKind::AllReduce;
  auto moved = [&](exec::CollectiveOp c) {
    return bytes(r, kind == CollectiveKind::AllGather ? c.getOutput()
                                                      : c.getInput());
  };
  // A bucket (adjacent collectives with one `bucket` number) runs as one
  // collective of all its bytes, timed at its first member.
  auto bucketOf = [](mlir::Operation *o) {
    auto b =
        o ? o->getAttrOfType<mlir::IntegerAttr>("bucket") : mlir::IntegerAttr();
    return b ? b.getInt() : -1;
  };
  int64_t bucket = bucketOf(collective);
  std::string groupName = exec::stringifyGroup(collective.getGroup()).str();
  double &commFree = r.commFree[groupName];
  if (bucket >= 0 && at > 0 && bucketOf(launches[at - 1]) == bucket)
    return commFree; // timed with the bucket's first member
  double size = moved(collective), members = 1;
  for (size_t i = at + 1;
       bucket >= 0 && i < launches.size() && bucketOf(launches[i]) == bucket;
       ++i, ++members)
    size += moved(llvm::cast<exec::CollectiveOp>(launches[i]));
  const CollectiveGroup &g =
      group(r, exec::stringifyGroup(collective.getGroup()));
  double time =
      g.size() > 1 ? g.time(kind, size, params.collectiveEfficiency) : 0;
  double start = std::max(notBefore, commFree);
  commFree = start + time;
  std::string name = (exec::stringifyCollectiveKind(collective.getKind()) +
                      " " + exec::stringifyGroup(collective.getGroup()))
                         .str();
  if (members > 1)
    name += " (bucket of " + std::to_string(int64_t(members)) + ")";
  if (collective.getNextStep())
    name += " (from the last step)";
  span(r, "comm " + groupName, name, start, time);
  r.stats.commBusyS += time;
  return commFree;
}

void Simulator::carryFromLastStep(RankState &r) {
  if (!r.step)
    return;
  std::vector<mlir::Operation *> carried;
  for (auto c : r.step.getBody().front().getOps<exec::CollectiveOp>())
    if (c.getNextStep())
      carried.push_back(c);
  for (size_t i = 0; i < carried.size(); ++i) {
    auto c = llvm::cast<exec::CollectiveOp>(carried[i]);
    r.inFlight[c.getOutput().str()] = {
        issueCollective(r, carried, i, 0),
        exec::stringifyGroup(c.getGroup()).str()};
  }
}

llvm::Error Simulator::run() {
  for (RankState &r : ranks)
    carryFromLastStep(r);
  // Each rank runs until it waits for a message not yet sent; a round in
  // which no rank moves is a deadlock of the schedule.
  while (true) {
    bool moved = false, allDone = true;
    for (RankState &r : ranks) {
      while (true) {
        llvm::Expected<Step> step = advance(r);
        if (!step)
          return step.takeError();
        if (*step != Step::Advanced)
          break;
        moved = true;
      }
      allDone &= r.done;
    }
    if (allDone)
      break;
    if (!moved) {
      std::string waiting;
      for (RankState &r : ranks)
        if (!r.done)
          waiting += (waiting.empty() ? "@" : ", @") +
                     r.program.getSymName().str() + " (" + phaseName(r).str() +
                     " of micro-batch " + std::to_string(microBatch(r)) + ")";
      return fail("the schedules deadlock: " + waiting +
                  " each wait for a message never sent");
    }
  }
  for (RankState &r : ranks)
    result.stepTimeS = std::max(result.stepTimeS, r.stats.finishS);
  const SimulatedRank *busiest = nullptr;
  for (RankState &r : ranks) {
    double exposed = 0;
    for (const auto &[group, time] : r.stats.exposedCommS)
      exposed += time;
    double idle = result.stepTimeS - r.stats.computeBusyS - exposed;
    result.bubbleS += idle / ranks.size();
    if (!busiest || r.stats.computeBusyS + exposed >
                        busiest->computeBusyS + result.exposedCommTotalS) {
      busiest = &r.stats;
      result.exposedCommTotalS = exposed;
    }
    result.ranks.push_back(r.stats);
  }
  result.exposedCommS = busiest->exposedCommS;
  result.bubbleFraction =
      result.stepTimeS > 0 ? result.bubbleS / result.stepTimeS : 0;
  return llvm::Error::success();
}

} // namespace

llvm::Expected<SimulationResult>
simulatePlan(mlir::ModuleOp module, const SimulationOptions &options) {
  auto strategy =
      module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
  auto topologyAttr =
      module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName);
  if (!strategy || !topologyAttr)
    return fail(llvm::Twine("the module has no ") +
                (!strategy ? "dist.strategy" : "dist.topology") +
                " to simulate with");
  ParallelConfig config = fromStrategyAttr(strategy);
  Topology topology = fromAttr(topologyAttr);
  // A plan on a few nodes of a large cluster is routed on those alone.
  TopologyGraph graph(topology, config.numDevices());
  // The training element type: that of the first whole parameter.
  DType dtype = DType::F32;
  module.walk([&](exec::BufferOp buf) {
    if (buf.getKind() != exec::BufferKind::param &&
        buf.getKind() != exec::BufferKind::param_gathered)
      return mlir::WalkResult::advance();
    dtype = dtypeOf(buf.getType().getElementType());
    return mlir::WalkResult::interrupt();
  });
  DeviceRoofline device{topology.device.peakFlops(dtype),
                        topology.device.hbmBytesPerS, options.costParams};
  Simulator simulator(config, graph, device, options.costParams,
                      keyValueParts(module, config), options.recordSpans);
  if (llvm::Error error = simulator.load(module))
    return std::move(error);
  if (llvm::Error error = simulator.run())
    return std::move(error);
  return std::move(simulator.result);
}

Object simulationJson(const SimulationResult &r) {
  Object exposed;
  for (const auto &[group, time] : r.exposedCommS)
    exposed[group] = time;
  Array ranks;
  for (const SimulatedRank &s : r.ranks) {
    Object waits;
    for (const auto &[group, time] : s.exposedCommS)
      waits[group] = time;
    ranks.push_back(Object{{"pp_rank", s.ppRank},
                           {"rank", s.rank},
                           {"compute_busy_s", s.computeBusyS},
                           {"comm_busy_s", s.commBusyS},
                           {"exposed_comm_s", std::move(waits)},
                           {"pipeline_wait_s", s.pipelineWaitS},
                           {"finish_s", s.finishS}});
  }
  return Object{{"step_time_s", r.stepTimeS},
                {"exposed_comm_s", std::move(exposed)},
                {"exposed_comm_total_s", r.exposedCommTotalS},
                {"bubble_s", r.bubbleS},
                {"bubble_fraction", r.bubbleFraction},
                {"ranks", std::move(ranks)}};
}

llvm::json::Value chromeTrace(const SimulationResult &r) {
  // A thread per stream, compute first, the same numbers on every rank.
  std::map<std::string, int64_t> tids{{"compute", 0}};
  for (const SimulatedSpan &s : r.spans)
    tids.emplace(s.stream, 0);
  int64_t next = 1;
  for (auto &[stream, tid] : tids)
    if (stream != "compute")
      tid = next++;
  Array events;
  for (const SimulatedRank &s : r.ranks) {
    events.push_back(Object{
        {"ph", "M"},
        {"name", "process_name"},
        {"pid", s.rank},
        {"args",
         Object{{"name", "rank " + std::to_string(s.rank) + " (pp " +
                             std::to_string(s.ppRank) + ", predicted)"}}}});
    for (const auto &[stream, tid] : tids)
      events.push_back(Object{{"ph", "M"},
                              {"name", "thread_name"},
                              {"pid", s.rank},
                              {"tid", tid},
                              {"args", Object{{"name", stream}}}});
  }
  for (const SimulatedSpan &s : r.spans)
    events.push_back(Object{{"ph", "X"},
                            {"name", s.name},
                            {"pid", s.rank},
                            {"tid", tids[s.stream]},
                            {"ts", s.startS * 1e6},
                            {"dur", s.durationS * 1e6},
                            {"args", Object{{"step", 0},
                                            {"micro_batch", s.microBatch},
                                            {"phase", s.phase}}}});
  return Object{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

} // namespace partita
