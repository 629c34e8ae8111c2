//===- PlanExport.cpp - exec programs to plan.json ------------------------===//

#include "compiler/Export/PlanExport.h"

#include "compiler/CostModel/CostReport.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "compiler/Import/ModelSpec.h"
#include "compiler/Topology/Topology.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/tfm/TfmDialect.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using llvm::json::Array;
using llvm::json::Object;
using JsonValue = llvm::json::Value;

namespace partita {

namespace {

JsonValue toJson(Attribute attr) {
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.getValue();
  if (auto r = dyn_cast<FlatSymbolRefAttr>(attr))
    return r.getValue();
  if (isa<UnitAttr>(attr))
    return true;
  if (auto a = dyn_cast<ArrayAttr>(attr)) {
    Array out;
    for (Attribute e : a)
      out.push_back(toJson(e));
    return out;
  }
  if (auto d = dyn_cast<DictionaryAttr>(attr)) {
    Object out;
    for (NamedAttribute n : d)
      out[n.getName().getValue()] = toJson(n.getValue());
    return out;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

std::string dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return "unknown";
}

Array shapeJson(ArrayRef<int64_t> shape) {
  Array out;
  for (int64_t d : shape)
    out.push_back(d);
  return out;
}

Object bufferJson(exec::BufferOp buf) {
  RankedTensorType type = buf.getTensorType();
  Object out{{"name", buf.getSymName()},
             {"kind", exec::stringifyBufferKind(buf.getKind())},
             {"dtype", dtypeName(type.getElementType())},
             {"shape", shapeJson(type.getShape())},
             {"bytes", tensorBytes(type)}};
  if (auto param = buf.getParam())
    out["param"] = *param;
  if (buf.getDpShard())
    out["dp_shard"] = true;
  if (auto offset = buf->getAttrOfType<IntegerAttr>("offset")) {
    out["offset"] = offset.getInt();
    out["copies"] = buf->getAttrOfType<IntegerAttr>("copies").getInt();
  }
  if (auto set = buf->getAttrOfType<IntegerAttr>("kept_set")) {
    out["kept_set"] = set.getInt();
    out["set_offset"] = buf->getAttrOfType<IntegerAttr>("set_offset").getInt();
  }
  return out;
}

Object launchJson(Operation *op) {
  if (auto k = dyn_cast<exec::KernelOp>(op)) {
    Object out{{"op", "kernel"},
               {"stream", "compute"},
               {"kernel", k.getKernelName()},
               {"ins", toJson(k.getIns())},
               {"outs", toJson(k.getOuts())}};
    if (auto acc = k.getAccumulate()) {
      Array flags;
      for (bool f : *acc)
        flags.push_back(f);
      out["accumulate"] = std::move(flags);
    }
    out["params"] = k.getParamsAttr() ? toJson(k.getParamsAttr()) : Object();
    if (auto layer = op->getAttrOfType<IntegerAttr>("layer"))
      out["layer"] = layer.getInt();
    return out;
  }
  if (auto c = dyn_cast<exec::CollectiveOp>(op)) {
    Object out{{"op", "collective"},
               {"stream", "comm"},
               {"collective", exec::stringifyCollectiveKind(c.getKind())},
               {"group", exec::stringifyGroup(c.getGroup())},
               {"input", c.getInput()},
               {"output", c.getOutput()},
               {"reduction", exec::stringifyReduction(c.getReduction())}};
    if (auto dim = c.getDim())
      out["dim"] = static_cast<int64_t>(*dim);
    if (c.getAccumulate())
      out["accumulate"] = true;
    if (c.getAsync())
      out["async"] = true;
    if (c.getLastMicroBatch())
      out["last_micro_batch"] = true;
    if (c.getNextStep())
      out["next_step"] = true;
    if (auto bucket = op->getAttrOfType<IntegerAttr>("bucket"))
      out["bucket"] = bucket.getInt();
    return out;
  }
  if (auto w = dyn_cast<exec::WaitOp>(op)) {
    Object out{
        {"op", "wait"}, {"stream", "compute"}, {"buffer", w.getBuffer()}};
    if (w.getFirstMicroBatch())
      out["first_micro_batch"] = true;
    return out;
  }
  if (auto s = dyn_cast<exec::SendOp>(op))
    return Object{{"op", "send"},
                  {"stream", "comm"},
                  {"buffer", s.getBuffer()},
                  {"peer", exec::stringifyPeer(s.getPeer())}};
  auto r = cast<exec::RecvOp>(op);
  return Object{{"op", "recv"},
                {"stream", "comm"},
                {"buffer", r.getBuffer()},
                {"peer", exec::stringifyPeer(r.getPeer())}};
}

Object programJson(exec::ProgramOp program) {
  // Reserved: json::Value's move is not noexcept, so a growing Array
  // copies every object already in it.
  Array buffers, phases, schedule;
  buffers.reserve(program.getBody().front().getOperations().size());
  int64_t inFlight = 1;
  for (Operation &op : program.getBody().front()) {
    if (auto buf = dyn_cast<exec::BufferOp>(op)) {
      buffers.push_back(bufferJson(buf));
    } else if (auto phase = dyn_cast<exec::PhaseOp>(op)) {
      Array launches;
      launches.reserve(phase.getBody().front().getOperations().size());
      for (Operation &launch : phase.getBody().front())
        launches.push_back(launchJson(&launch));
      Object p{{"kind", exec::stringifyPhaseKind(phase.getKind())},
               {"launches", std::move(launches)}};
      if (auto chunk = phase.getChunk())
        p["chunk"] = static_cast<int64_t>(*chunk);
      phases.push_back(std::move(p));
    } else if (auto sched = dyn_cast<exec::ScheduleOp>(op)) {
      for (auto run : sched.getBody().front().getOps<exec::RunOp>())
        schedule.push_back(
            Object{{"phase", exec::stringifyPhaseKind(run.getPhase())},
                   {"micro_batch", static_cast<int64_t>(run.getMicroBatch())},
                   {"chunk", static_cast<int64_t>(run.getChunk())}});
      inFlight = maxInFlight(sched);
    }
  }
  Object out{{"pp_rank", static_cast<int64_t>(program.getPpRank())},
             {"max_in_flight", inFlight},
             {"buffers", std::move(buffers)},
             {"phases", std::move(phases)},
             {"schedule", std::move(schedule)}};
  if (auto arena = program->getAttrOfType<IntegerAttr>("arena_bytes"))
    out["arena_bytes"] = arena.getInt();
  if (auto sets = program->getAttrOfType<ArrayAttr>("kept_sets")) {
    Array keptSets;
    for (auto set : sets.getAsRange<DictionaryAttr>()) {
      Array offsets;
      for (int64_t offset :
           set.getAs<DenseI64ArrayAttr>("offsets").asArrayRef())
        offsets.push_back(offset);
      keptSets.push_back(
          Object{{"chunk", set.getAs<IntegerAttr>("chunk").getInt()},
                 {"bytes", set.getAs<IntegerAttr>("bytes").getInt()},
                 {"offsets", std::move(offsets)}});
    }
    out["kept_sets"] = std::move(keptSets);
  }
  if (auto runtime = program->getAttrOfType<IntegerAttr>("runtime_bytes"))
    out["runtime_bytes"] = runtime.getInt();
  return out;
}

/// Every group of `name`'s kind as lists of ranks, each listed once (by
/// its first member).
Array groupsJson(StringRef name, const ParallelConfig &c, int64_t kvParts) {
  Array groups;
  // A rank belongs to one group of a kind: once listed, its group is not
  // built again (which made this quadratic in the data-parallel width).
  std::vector<bool> listed(size_t(c.numDevices()), false);
  for (int64_t p = 0; p < c.pp; ++p)
    for (int64_t d = 0; d < c.dp; ++d)
      for (int64_t t = 0; t < c.tp; ++t) {
        if (listed[size_t(meshRank(p, d, t, c.dp, c.tp))])
          continue;
        std::vector<int64_t> members = groupMembers(name, c, kvParts, p, d, t);
        if (members.empty() || members.front() != meshRank(p, d, t, c.dp, c.tp))
          continue;
        for (int64_t r : members)
          listed[size_t(r)] = true;
        Array g;
        for (int64_t r : members)
          g.push_back(r);
        groups.push_back(std::move(g));
      }
  return groups;
}

} // namespace

int64_t maxInFlight(exec::ScheduleOp schedule, std::optional<int64_t> chunk) {
  llvm::DenseMap<int64_t, int64_t> open; // micro-batch -> chunks forwarded
  int64_t inFlight = 0, peak = 0;
  for (auto run : schedule.getBody().front().getOps<exec::RunOp>()) {
    if (chunk && run.getChunk() != *chunk)
      continue;
    int64_t mb = run.getMicroBatch();
    if (run.getPhase() == exec::PhaseKind::forward) {
      if (open[mb]++ == 0)
        peak = std::max(peak, ++inFlight);
    } else if (--open[mb] == 0) {
      --inFlight;
    }
  }
  return peak;
}

int64_t tensorBytes(RankedTensorType type) {
  return type.getNumElements() *
         std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

double numberAt(DictionaryAttr dict, StringRef key) {
  Attribute value = dict ? dict.get(key) : Attribute();
  if (auto f = dyn_cast_or_null<FloatAttr>(value))
    return f.getValueAsDouble();
  if (auto i = dyn_cast_or_null<IntegerAttr>(value))
    return double(i.getInt());
  return NAN;
}

DictionaryAttr numbersToAttr(const Object &object, MLIRContext *context) {
  Builder b(context);
  SmallVector<NamedAttribute> fields;
  for (const auto &[key, value] : object) {
    Attribute attr;
    if (auto *nested = value.getAsObject())
      attr = numbersToAttr(*nested, context);
    else if (auto i = value.getAsInteger())
      attr = b.getI64IntegerAttr(*i);
    else if (auto d = value.getAsNumber())
      attr = b.getF64FloatAttr(*d);
    else
      continue;
    fields.push_back(b.getNamedAttr(key.str(), attr));
  }
  return b.getDictionaryAttr(fields);
}

int64_t keyValueParts(ModuleOp module, const ParallelConfig &c) {
  int64_t parts = c.tp;
  module.walk([&](exec::BufferOp buf) {
    if (auto p = buf.getShardingParts(); p && *p < c.tp)
      parts = std::min<int64_t>(parts, *p);
  });
  return parts;
}

std::vector<int64_t> groupMembers(llvm::StringRef name, const ParallelConfig &c,
                                  int64_t kvParts, int64_t p, int64_t d,
                                  int64_t t) {
  std::vector<int64_t> members;
  if (name == "tp") {
    for (int64_t u = 0; u < c.tp; ++u)
      members.push_back(meshRank(p, d, u, c.dp, c.tp));
  } else if (name == "tp_kv") {
    int64_t size = c.tp / kvParts, first = t - t % size;
    for (int64_t u = first; u < first + size; ++u)
      members.push_back(meshRank(p, d, u, c.dp, c.tp));
  } else if (name == "dp") {
    for (int64_t e = 0; e < c.dp; ++e)
      members.push_back(meshRank(p, e, t, c.dp, c.tp));
  } else if (name == "pp") {
    for (int64_t q = 0; q < c.pp; ++q)
      members.push_back(meshRank(q, d, t, c.dp, c.tp));
  } else if (name == "tied") {
    if (c.pp > 1 && (p == 0 || p == c.pp - 1))
      members = {meshRank(0, d, t, c.dp, c.tp),
                 meshRank(c.pp - 1, d, t, c.dp, c.tp)};
  } else if (name == "world") {
    for (int64_t r = 0; r < c.numDevices(); ++r)
      members.push_back(r);
  }
  return members;
}

namespace {

/// The parameters, once each in program order, with every buffer that
/// holds them; and the dtype they are trained in.
struct ExportedParameters {
  Array parameters;
  std::optional<std::string> dtype;
};

Object parameterJson(exec::BufferOp buf, RankedTensorType local) {
  SmallVector<int64_t> global(local.getShape());
  int64_t dim = buf.getShardingDim().value_or(0);
  int64_t parts = buf.getShardingParts().value_or(1);
  if (buf.getShardingDim())
    global[dim] =
        buf.getPaddedFrom() ? *buf.getPaddedFrom() : global[dim] * parts;
  Object p{
      {"name", buf.getParam()->str()},
      {"global_shape", shapeJson(global)},
      {"local_shape", shapeJson(local.getShape())},
      {"dtype", dtypeName(local.getElementType())},
      {"init", buf.getInit() ? buf.getInit()->str() : "zeros"},
      {"tp_dim", buf.getShardingDim() ? JsonValue(dim) : JsonValue(nullptr)},
      {"tp_parts", parts},
      {"holders", Array()}};
  if (auto std = buf.getInitStd())
    p["init_std"] = std->convertToDouble();
  if (auto padded = buf.getPaddedFrom())
    p["padded_from"] = static_cast<int64_t>(*padded);
  if (auto layer = buf.getLayer())
    p["layer"] = static_cast<int64_t>(*layer);
  return p;
}

ExportedParameters parametersJson(ModuleOp module) {
  ExportedParameters exported;
  llvm::StringMap<Object> parameters;
  std::vector<std::string> order;
  for (auto program : module.getOps<exec::ProgramOp>())
    for (auto buf : program.getBody().front().getOps<exec::BufferOp>()) {
      if (buf.getKind() != exec::BufferKind::param &&
          buf.getKind() != exec::BufferKind::param_shard)
        continue;
      auto local =
          buf.getKind() == exec::BufferKind::param_shard
              ? cast<RankedTensorType>(
                    buf->getAttrOfType<TypeAttr>("local_type").getValue())
              : buf.getTensorType();
      exported.dtype = dtypeName(local.getElementType());
      std::string name = buf.getParam()->str();
      auto [it, inserted] = parameters.try_emplace(name);
      if (inserted) {
        order.push_back(name);
        it->second = parameterJson(buf, local);
      }
      it->second.getArray("holders")->push_back(
          Object{{"pp_rank", static_cast<int64_t>(program.getPpRank())},
                 {"buffer", buf.getSymName()},
                 {"dp_shard", buf.getDpShard()}});
    }
  exported.parameters.reserve(order.size());
  for (const std::string &name : order)
    exported.parameters.push_back(std::move(parameters[name]));
  return exported;
}

/// The mesh axes always; tied and tp_kv where a collective uses them.
Object allGroupsJson(ModuleOp module, const ParallelConfig &config,
                     int64_t kvParts) {
  llvm::StringSet<> used = {"tp", "dp", "pp", "world"};
  module.walk([&](exec::CollectiveOp c) {
    used.insert(exec::stringifyGroup(c.getGroup()));
  });
  Object groups;
  for (StringRef name : {"tp", "dp", "pp", "world", "tied", "tp_kv"})
    if (used.contains(name))
      groups[name] = groupsJson(name, config, kvParts);
  return groups;
}

Array devicesJson(const ParallelConfig &config, const Topology &topology) {
  Array devices;
  for (int64_t r = 0; r < config.numDevices(); ++r) {
    int64_t p = r / (config.dp * config.tp);
    int64_t d = (r / config.tp) % config.dp, t = r % config.tp;
    devices.push_back(Object{{"rank", r},
                             {"node", topology.nodeOf(r)},
                             {"local_device", r % topology.devicesPerNode},
                             {"pp", p},
                             {"dp", d},
                             {"tp", t}});
  }
  return devices;
}

/// Optimizer settings: the spec's (as imported), or the defaults.
Object optimizerJson(ModuleOp module) {
  OptimizerConfig defaults;
  Object optimizer{{"lr", defaults.lr},
                   {"min_lr", defaults.minLr},
                   {"warmup_steps", defaults.warmupSteps},
                   {"decay_steps", defaults.decaySteps},
                   {"decay", defaults.decay},
                   {"beta1", defaults.beta1},
                   {"beta2", defaults.beta2},
                   {"eps", defaults.eps},
                   {"weight_decay", defaults.weightDecay},
                   {"clip_norm", defaults.clipNorm}};
  if (auto given =
          module->getAttrOfType<DictionaryAttr>(tfm::kOptimizerAttrName))
    for (NamedAttribute n : given)
      optimizer[n.getName().getValue()] = toJson(n.getValue());
  return optimizer;
}

/// The unpadded vocabulary, as the loss sees it (synthetic data draws
/// tokens below it).
int64_t lossVocabSize(ModuleOp module) {
  int64_t vocabSize = 0;
  module.walk([&](exec::KernelOp k) {
    if (k.getKernel() == plan::Kernel::CeMax)
      if (auto v = k.getParamsAttr().getAs<IntegerAttr>("vocab_size"))
        vocabSize = v.getInt();
  });
  return vocabSize;
}

} // namespace

llvm::Expected<Object> exportPlan(ModuleOp module) {
  auto strategy =
      module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
  auto topologyAttr =
      module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName);
  auto model = module->getAttrOfType<StringAttr>("exec.model");
  auto seqLen = module->getAttrOfType<IntegerAttr>("exec.seq_len");
  if (!strategy || !topologyAttr || !model || !seqLen)
    return llvm::createStringError(
        "the module has no %s to export; compile it with dist-lower-to-exec, "
        "exec-build-backward and exec-schedule-pipeline first",
        !strategy       ? "dist.strategy"
        : !topologyAttr ? "dist.topology"
                        : "exec programs");
  ParallelConfig config = fromStrategyAttr(strategy);
  Topology topology = fromAttr(topologyAttr);
  if (config.numDevices() > topology.numDevices())
    return llvm::createStringError(
        "the strategy needs %lld devices but topology '%s' has %lld",
        (long long)config.numDevices(), topology.name.c_str(),
        (long long)topology.numDevices());
  Array programs;
  for (auto program : module.getOps<exec::ProgramOp>()) {
    if (program.getBody().front().getOps<exec::ScheduleOp>().empty())
      return llvm::createStringError(
          "exec.program @%s has no schedule; run exec-schedule-pipeline",
          program.getSymName().str().c_str());
    programs.push_back(programJson(program));
  }
  // The decoder layers, as the launches number them: an even cut (the
  // interleaved schedule's) gives no stage_layers to count.
  int64_t numLayers = 0;
  module.walk([&](Operation *op) {
    if (std::optional<int64_t> layer = exec::launchLayer(op))
      numLayers = std::max(numLayers, *layer + 1);
  });
  int64_t kvParts = keyValueParts(module, config);
  ExportedParameters parameters = parametersJson(module);
  Object plan{{"format", "partita-plan"},
              {"version", kPlanFormatVersion},
              {"model", model.getValue()},
              {"training", Object{{"seq_len", seqLen.getInt()},
                                  {"vocab_size", lossVocabSize(module)},
                                  {"global_batch", config.globalBatch()},
                                  {"micro_batch_size", config.microBatchSize},
                                  {"num_micro_batches", config.numMicroBatches},
                                  {"dtype", parameters.dtype.value_or("f32")}}},
              {"strategy", strategyJson(config, numLayers)},
              {"mesh", Object{{"world_size", config.numDevices()},
                              {"dp", config.dp},
                              {"tp", config.tp},
                              {"pp", config.pp},
                              {"order", Array{"pp", "dp", "tp"}},
                              {"kv_parts", kvParts}}},
              {"topology", Object{{"name", topology.name},
                                  {"nodes", topology.nodes},
                                  {"devices_per_node", topology.devicesPerNode},
                                  {"device", topology.device.kind}}},
              {"devices", devicesJson(config, topology)},
              {"groups", allGroupsJson(module, config, kvParts)},
              {"optimizer", optimizerJson(module)},
              {"parameters", std::move(parameters.parameters)},
              {"programs", std::move(programs)}};
  if (auto predicted = module->getAttrOfType<DictionaryAttr>("dist.predicted"))
    plan["predicted"] = toJson(predicted);
  if (auto simulated = module->getAttrOfType<DictionaryAttr>("exec.simulated"))
    plan["simulated"] = toJson(simulated);
  if (auto memory = module->getAttrOfType<DictionaryAttr>("exec.memory"))
    plan["memory"] = toJson(memory);
  return plan;
}

} // namespace partita
