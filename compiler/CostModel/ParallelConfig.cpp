//===- ParallelConfig.cpp - A parallel training configuration -------------===//

#include "compiler/CostModel/ParallelConfig.h"

#include "dialects/dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using llvm::StringRef;

namespace partita {

StringRef toString(Recompute recompute) {
  switch (recompute) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "";
}

StringRef toString(Schedule schedule) {
  switch (schedule) {
  case Schedule::GPipe:
    return "gpipe";
  case Schedule::OneFOneB:
    return "1f1b";
  case Schedule::Interleaved:
    return "interleaved";
  }
  return "";
}

std::vector<int64_t> ParallelConfig::layersOfRank(int64_t rank,
                                                  int64_t numLayers) const {
  std::vector<int64_t> result;
  if (!stageLayers.empty()) {
    int64_t first = 0;
    for (int64_t k = 0; k < rank; ++k)
      first += stageLayers[k];
    for (int64_t i = 0; i < stageLayers[rank]; ++i)
      result.push_back(first + i);
    return result;
  }
  int64_t chunk = numLayers / (pp * vpp);
  for (int64_t j = 0; j < vpp; ++j)
    for (int64_t i = 0; i < chunk; ++i)
      result.push_back((j * pp + rank) * chunk + i);
  return result;
}

mlir::Attribute toStrategyAttr(const ParallelConfig &c, int64_t numLayers,
                               mlir::MLIRContext *context) {
  context->getOrLoadDialect<dist::DistDialect>();
  std::vector<int64_t> chunks = c.stageLayers;
  if (chunks.empty())
    chunks.assign(c.pp * c.vpp, numLayers / (c.pp * c.vpp));
  auto recompute = c.recompute == Recompute::Full ? dist::RecomputeKind::full
                   : c.recompute == Recompute::Selective
                       ? dist::RecomputeKind::selective
                       : dist::RecomputeKind::none;
  auto schedule = c.schedule == Schedule::GPipe ? dist::ScheduleKind::gpipe
                  : c.schedule == Schedule::Interleaved
                      ? dist::ScheduleKind::interleaved
                      : dist::ScheduleKind::one_f_one_b;
  return dist::StrategyAttr::get(context, c.dp, c.tp, c.pp, c.vpp, c.zero,
                                 c.microBatchSize, c.numMicroBatches, recompute,
                                 c.sequenceParallel ? 1 : 0, schedule,
                                 mlir::DenseI64ArrayAttr::get(context, chunks));
}

ParallelConfig fromStrategyAttr(mlir::Attribute attr) {
  auto s = llvm::cast<dist::StrategyAttr>(attr);
  ParallelConfig c;
  c.dp = s.getDp();
  c.tp = s.getTp();
  c.pp = s.getPp();
  c.vpp = s.getVpp();
  c.zero = s.getZero();
  c.microBatchSize = s.getMicroBatchSize();
  c.numMicroBatches = s.getNumMicroBatches();
  c.recompute = s.getRecompute() == dist::RecomputeKind::full ? Recompute::Full
                : s.getRecompute() == dist::RecomputeKind::selective
                    ? Recompute::Selective
                    : Recompute::None;
  c.sequenceParallel = s.getSequenceParallel() == 1;
  c.schedule = s.getSchedule() == dist::ScheduleKind::gpipe ? Schedule::GPipe
               : s.getSchedule() == dist::ScheduleKind::interleaved
                   ? Schedule::Interleaved
                   : Schedule::OneFOneB;
  // The cost model checks a stage cut against the model's layers.
  llvm::ArrayRef<int64_t> chunks = s.getStageLayers().asArrayRef();
  if (c.vpp == 1)
    c.stageLayers.assign(chunks.begin(), chunks.end());
  return c;
}

std::string ParallelConfig::str() const {
  return "dp=" + std::to_string(dp) + ",tp=" + std::to_string(tp) +
         ",pp=" + std::to_string(pp) + ",vpp=" + std::to_string(vpp) +
         ",zero=" + std::to_string(zero) +
         ",mbs=" + std::to_string(microBatchSize) +
         ",recompute=" + toString(recompute).str() +
         ",sp=" + (sequenceParallel ? "1" : "0") +
         ",schedule=" + toString(schedule).str();
}

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--strategy: " + message.str());
}

PartialParallelConfig overlay(const PartialParallelConfig &base,
                              const PartialParallelConfig &over) {
  PartialParallelConfig c = base;
  auto take = [](auto &field, const auto &value) {
    if (value)
      field = value;
  };
  take(c.dp, over.dp);
  take(c.tp, over.tp);
  take(c.pp, over.pp);
  take(c.vpp, over.vpp);
  take(c.zero, over.zero);
  take(c.microBatchSize, over.microBatchSize);
  take(c.recompute, over.recompute);
  take(c.sequenceParallel, over.sequenceParallel);
  take(c.schedule, over.schedule);
  return c;
}

llvm::Expected<PartialParallelConfig> parseParallelConfig(StringRef text) {
  PartialParallelConfig c;
  llvm::SmallVector<StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  llvm::StringSet<> seen;
  for (StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    key = key.trim();
    value = value.trim();
    if (!item.contains('=') || value.empty())
      return error("'" + item + "' is not key=value");
    // One value per key: "tp=2,...,tp=4" is a typo, not an override.
    if (!seen.insert(key).second)
      return error(key + " is given twice");
    auto integer = [&](std::optional<int64_t> &field, int64_t min,
                       int64_t max) -> llvm::Error {
      int64_t v;
      if (value.getAsInteger(10, v) || v < min || v > max)
        return error(key + "=" + value + ": expected an integer from " +
                     llvm::Twine(min) + " to " + llvm::Twine(max));
      field = v;
      return llvm::Error::success();
    };
    llvm::Error err = llvm::Error::success();
    if (key == "dp")
      err = integer(c.dp, 1, 1 << 24);
    else if (key == "tp")
      err = integer(c.tp, 1, 1 << 16);
    else if (key == "pp")
      err = integer(c.pp, 1, 1 << 16);
    else if (key == "vpp")
      err = integer(c.vpp, 1, 1 << 10);
    else if (key == "zero")
      err = integer(c.zero, 0, 3);
    else if (key == "mbs")
      err = integer(c.microBatchSize, 1, 1 << 20);
    else if (key == "sp") {
      std::optional<int64_t> sp;
      err = integer(sp, 0, 1);
      if (sp)
        c.sequenceParallel = *sp == 1;
    } else if (key == "recompute") {
      c.recompute = llvm::StringSwitch<std::optional<Recompute>>(value)
                        .Case("none", Recompute::None)
                        .Case("selective", Recompute::Selective)
                        .Case("full", Recompute::Full)
                        .Default(std::nullopt);
      if (!c.recompute)
        err =
            error("recompute=" + value + ": expected none, selective or full");
    } else if (key == "schedule") {
      c.schedule = llvm::StringSwitch<std::optional<Schedule>>(value)
                       .Case("gpipe", Schedule::GPipe)
                       .Case("1f1b", Schedule::OneFOneB)
                       .Case("interleaved", Schedule::Interleaved)
                       .Default(std::nullopt);
      if (!c.schedule)
        err = error("schedule=" + value +
                    ": expected gpipe, 1f1b or interleaved");
    } else {
      err = error("unknown key '" + key +
                  "'; keys: dp, tp, pp, vpp, zero, mbs, recompute, sp, "
                  "schedule");
    }
    if (err)
      return std::move(err);
  }
  return c;
}

llvm::Expected<ParallelConfig>
completeParallelConfig(const PartialParallelConfig &p, int64_t numDevices,
                       int64_t globalBatch, int64_t numLayers) {
  ParallelConfig c;
  c.tp = p.tp.value_or(1);
  c.pp = p.pp.value_or(1);
  c.vpp = p.vpp.value_or(1);
  c.zero = p.zero.value_or(0);
  c.microBatchSize = p.microBatchSize.value_or(1);
  c.recompute = p.recompute.value_or(Recompute::None);
  c.sequenceParallel = p.sequenceParallel.value_or(false);
  c.schedule = p.schedule.value_or(c.vpp > 1 ? Schedule::Interleaved
                                             : Schedule::OneFOneB);
  if (p.dp) {
    c.dp = *p.dp;
  } else {
    if (numDevices % (c.tp * c.pp) != 0)
      return error("tp * pp = " + llvm::Twine(c.tp * c.pp) +
                   " does not divide the " + llvm::Twine(numDevices) +
                   " devices of the topology");
    c.dp = numDevices / (c.tp * c.pp);
  }
  if (c.numDevices() > numDevices)
    return error("dp * tp * pp = " + llvm::Twine(c.numDevices()) +
                 " exceeds the " + llvm::Twine(numDevices) +
                 " devices of the topology");
  if (c.schedule == Schedule::Interleaved && c.pp == 1)
    return error("schedule=interleaved needs pp > 1");
  if (c.vpp > 1 && c.schedule != Schedule::Interleaved)
    return error("vpp=" + llvm::Twine(c.vpp) + " needs schedule=interleaved");
  if (numLayers % (c.pp * c.vpp) != 0)
    return error("pp * vpp = " + llvm::Twine(c.pp * c.vpp) +
                 " does not divide the " + llvm::Twine(numLayers) + " layers");
  if (c.sequenceParallel && c.tp == 1)
    return error("sp=1 needs tp > 1");
  int64_t perStep = c.dp * c.microBatchSize;
  if (globalBatch % perStep != 0)
    return error("dp * mbs = " + llvm::Twine(perStep) +
                 " does not divide the global batch of " +
                 llvm::Twine(globalBatch) + " sequences");
  c.numMicroBatches = globalBatch / perStep;
  if (c.schedule == Schedule::Interleaved && c.numMicroBatches % c.pp != 0)
    return error(
        "interleaved 1F1B needs the " + llvm::Twine(c.numMicroBatches) +
        " micro-batches to be a multiple of pp = " + llvm::Twine(c.pp));
  return c;
}

} // namespace partita
