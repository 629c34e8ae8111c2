//===- StrategySearch.cpp - The fastest parallel plan that fits -----------===//

#include "compiler/Search/StrategySearch.h"
#include "compiler/Search/SearchReport.h"

#include "support/Format.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace partita {

//===----------------------------------------------------------------------===//
// Stage cuts
//===----------------------------------------------------------------------===//

namespace {

/// Greedy cut with stage loads <= limit, keeping a layer for every stage
/// still to come; empty if the limit cannot be met.
std::vector<int64_t> greedyCut(const std::vector<double> &costs,
                               double firstExtra, double lastExtra,
                               int64_t stages, double limit) {
  const int64_t n = costs.size();
  std::vector<int64_t> cut;
  double load = firstExtra;
  int64_t inStage = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t stage = cut.size();
    // Every later stage needs one of the remaining n - i layers.
    bool mustClose = inStage > 0 && n - i == stages - stage - 1;
    bool wouldOverflow = inStage > 0 && load + costs[i] > limit;
    if ((mustClose || wouldOverflow) && stage < stages - 1) {
      cut.push_back(inStage);
      load = 0;
      inStage = 0;
    }
    load += costs[i];
    ++inStage;
    if (load > limit + 1e-12 * std::fabs(limit))
      return {};
  }
  cut.push_back(inStage);
  if (static_cast<int64_t>(cut.size()) != stages ||
      load + lastExtra > limit + 1e-12 * std::fabs(limit))
    return {};
  return cut;
}

} // namespace

std::vector<int64_t> balancedStageCut(const std::vector<double> &costs,
                                      double firstExtra, double lastExtra,
                                      int64_t stages) {
  const int64_t n = costs.size();
  if (stages <= 1 || n < stages)
    return {n};
  double total = firstExtra + lastExtra;
  for (double c : costs)
    total += c;
  double lo = 0, hi = total;
  std::vector<int64_t> best =
      greedyCut(costs, firstExtra, lastExtra, stages, hi);
  for (int iteration = 0; iteration < 100 && hi - lo > 1e-12 * total;
       ++iteration) {
    double mid = (lo + hi) / 2;
    std::vector<int64_t> cut =
        greedyCut(costs, firstExtra, lastExtra, stages, mid);
    if (cut.empty()) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(cut);
    }
  }
  return best;
}

//===----------------------------------------------------------------------===//
// The search
//===----------------------------------------------------------------------===//

namespace {

std::vector<int64_t> divisors(int64_t n, int64_t max = INT64_MAX) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n && d <= max; ++d)
    if (n % d == 0)
      result.push_back(d);
  return result;
}

template <typename T>
std::vector<T> pinnedOr(const std::optional<T> &pin, std::vector<T> all) {
  if (pin)
    return {*pin};
  return all;
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

/// Forward FLOPs per token of each layer (with the full-recomputation
/// forward when asked, without the GEMMs it skips unless
/// `recomputeOutputs`), and of the LM head: the weights a stage cut
/// balances.
struct FlopWeights {
  std::vector<double> layers;
  double head = 0;
};

FlopWeights flopWeights(const ModelProfile &profile, bool fullRecompute,
                        bool recomputeOutputs) {
  FlopWeights w;
  double s = profile.seqLen;
  for (const LayerProfile &layer : profile.layers) {
    double flops = 0, skipped = 0;
    for (const GemmProfile &g : layer.gemms) {
      flops += 2.0 * g.n * g.k;
      if (g.unreadByBackward && !recomputeOutputs)
        skipped += 2.0 * g.n * g.k;
    }
    double context = layer.window ? std::min<double>(s, layer.window) : s;
    flops += 4.0 * context * layer.heads * layer.headDim;
    w.layers.push_back(3 * flops + (fullRecompute ? flops - skipped : 0));
  }
  w.head = 3 * 2.0 * profile.hidden * profile.vocab;
  return w;
}

std::string gib(double bytes) {
  double g = bytes / kGiB;
  if (g < 0.1)
    return formatNumber(std::round(bytes / 1048576.0 * 10) / 10) + " MiB";
  return formatNumber(std::round(g * 10) / 10) + " GiB";
}

/// The winner's settings that `pins` fixed, as "tp=2, pp=2".
std::vector<std::string> pinnedSettings(const PartialParallelConfig &pins,
                                        const ParallelConfig &c) {
  std::map<std::string, bool> pinned = {
      {"dp", pins.dp.has_value()},
      {"tp", pins.tp.has_value()},
      {"pp", pins.pp.has_value()},
      {"vpp", pins.vpp.has_value()},
      {"zero", pins.zero.has_value()},
      {"mbs", pins.microBatchSize.has_value()},
      {"recompute", pins.recompute.has_value()},
      {"sp", pins.sequenceParallel.has_value()},
      {"schedule", pins.schedule.has_value()}};
  std::vector<std::string> settings;
  llvm::SmallVector<llvm::StringRef> parts;
  std::string text = c.str();
  llvm::StringRef(text).split(parts, ',');
  for (llvm::StringRef part : parts)
    if (pinned[part.split('=').first.str()])
      settings.push_back(part.str());
  return settings;
}

/// Why the winner's pipeline is as deep as it is.
enum class PipelineDepthReason { Faster, Memory, Divisibility };

/// Did shallower pipelines than `pp` fit, or run out of memory, or not
/// divide at all?
PipelineDepthReason depthReason(const SearchResult &r, int64_t pp) {
  PipelineDepthReason depth = PipelineDepthReason::Divisibility;
  for (const auto &[depthTried, fits] : r.fitsAtPp) {
    if (depthTried >= pp)
      continue;
    if (fits)
      depth = PipelineDepthReason::Faster;
    else if (depth == PipelineDepthReason::Divisibility)
      depth = PipelineDepthReason::Memory;
  }
  return depth;
}

/// The reasons for the winner's chosen (not pinned) tp, pp, ZeRO stage and
/// recomputation.
std::vector<std::string> choiceReasons(const SearchResult &r,
                                       const ModelProfile &profile,
                                       const Topology &topo,
                                       const PartialParallelConfig &pins) {
  const ParallelConfig &c = r.best.config;
  std::vector<std::string> reasons;
  if (c.tp > 1 && !pins.tp) {
    bool inNode = c.tp <= topo.devicesPerNode;
    reasons.push_back("tp=" + std::to_string(c.tp) +
                      (inNode ? " keeps the per-layer all-reduces inside a "
                                "node"
                              : " spreads the layers' weights across nodes"));
  }
  PipelineDepthReason depth = depthReason(r, c.pp);
  if (c.pp > 1 && !pins.pp) {
    if (depth == PipelineDepthReason::Memory)
      reasons.push_back("pp=" + std::to_string(c.pp) + " is needed to fit " +
                        profile.name + " in " + gib(r.memoryCapBytes));
    else if (depth == PipelineDepthReason::Divisibility)
      reasons.push_back("pp=" + std::to_string(c.pp) +
                        " is the shallowest pipeline that divides the "
                        "devices and the batch");
    else
      reasons.push_back(
          "pp=" + std::to_string(c.pp) + " leaves a bubble of " +
          formatNumber(std::round(r.best.estimate.bubbleFraction * 1000) / 10) +
          "% yet beats shallower pipelines");
  }
  if (c.zero > 0 && !pins.zero)
    reasons.push_back(
        "zero=" + std::to_string(c.zero) + " shards the optimizer state" +
        (c.zero >= 2 ? std::string(c.zero == 3 ? ", gradients and parameters"
                                               : " and gradients")
                     : std::string()) +
        " over dp=" + std::to_string(c.dp));
  if (c.recompute != Recompute::None && !pins.recompute)
    reasons.push_back("recompute=" + toString(c.recompute).str() +
                      " trades compute for activation memory");
  return reasons;
}

} // namespace

void explainChoice(SearchResult &r, const ModelProfile &profile,
                   const Topology &topo, const PartialParallelConfig &pins,
                   llvm::StringRef against) {
  std::vector<std::string> reasons;
  std::vector<std::string> pinned = pinnedSettings(pins, r.best.config);
  if (!pinned.empty())
    reasons.push_back(llvm::join(pinned, ", ") +
                      (pinned.size() == 1 ? " is" : " are") + " pinned");
  for (std::string &reason : choiceReasons(r, profile, topo, pins))
    reasons.push_back(std::move(reason));
  // The nearest alternative and by how much it loses.
  if (!against.empty()) {
    reasons.push_back(against.str());
  } else if (!r.runnersUp.empty()) {
    const Candidate &next = r.runnersUp.front();
    double slower =
        100 * (next.estimate.stepTimeS / r.best.estimate.stepTimeS - 1);
    if (slower < 0.05)
      reasons.push_back("the runner-up (" + candidateText(next.config) +
                        ") is as fast");
    else
      reasons.push_back("the runner-up (" + candidateText(next.config) +
                        ") is " + formatNumber(std::round(slower * 10) / 10) +
                        "% slower");
  }
  if (reasons.empty()) {
    r.why = "plain data parallelism fits and needs no model parallelism.";
    return;
  }
  std::string sentence;
  for (size_t i = 0; i < reasons.size(); ++i)
    sentence += (i == 0                    ? ""
                 : i + 1 == reasons.size() ? "; and "
                                           : "; ") +
                reasons[i];
  r.why = sentence + ".";
}

namespace {

/// Pins and limits that can never work: errors, not empty searches.
llvm::Error pinError(const ModelProfile &profile, const Topology &topo,
                     const SearchOptions &options, double cap) {
  const PartialParallelConfig &pins = options.pins;
  const LayerProfile &layer = profile.layers.front();
  const int64_t N = topo.numDevices(), L = profile.layers.size();
  if (!(cap >= 1 << 20))
    return makeError(
        cap < topo.device.memoryBytes
            ? "--memory-cap-gib: the cap must be at least 1 MiB per device"
            : "the topology's device memory (memory_gib " +
                  formatNumber(topo.device.memoryBytes / kGiB) +
                  ") is under 1 MiB: no plan can fit");
  if (pins.tp && (layer.heads % *pins.tp != 0))
    return makeError("--strategy: tp=" + llvm::Twine(*pins.tp) +
                     " does not divide the " + llvm::Twine(layer.heads) +
                     " attention heads");
  if (pins.tp && *pins.tp > 1 && layer.normSpansHeads)
    return makeError("--strategy: tp=" + llvm::Twine(*pins.tp) +
                     ": a norm spans the whole query or key projection "
                     "(qk_norm_span projection), which tensor parallelism "
                     "would split; use tp=1");
  if (pins.pp && *pins.pp > L)
    return makeError("--strategy: pp=" + llvm::Twine(*pins.pp) +
                     " exceeds the " + llvm::Twine(L) + " layers");
  int64_t pinnedDevices =
      pins.dp.value_or(1) * pins.tp.value_or(1) * pins.pp.value_or(1);
  if (pinnedDevices > N)
    return makeError(
        "--strategy: the pinned dp * tp * pp = " + llvm::Twine(pinnedDevices) +
        " exceeds the " + llvm::Twine(N) + " devices of topology '" +
        topo.name + "'");
  if (pins.tp && !options.allowTpAcrossNodes &&
      topo.devicesPerNode % *pins.tp != 0)
    return makeError("--strategy: tp=" + llvm::Twine(*pins.tp) +
                     " crosses nodes of " + llvm::Twine(topo.devicesPerNode) +
                     " devices; allow it with --allow-tp-across-nodes");
  return llvm::Error::success();
}

/// One search: walks the space dimension by dimension (tp, pp and dp; the
/// micro-batch; the interleaving and schedule; recomputation, stage cut,
/// sequence parallelism and ZeRO), costs each configuration, and keeps the
/// best topK + 1 and what the nothing-fits error needs.
class Searcher {
public:
  Searcher(const ModelProfile &profile, const TopologyGraph &graph,
           const SearchOptions &options, double cap)
      : profile(profile), graph(graph), topo(graph.topology()),
        options(options), pins(options.pins), layer(profile.layers.front()),
        L(profile.layers.size()), B(profile.globalBatch), cap(cap),
        plainWeights(
            flopWeights(profile, false, options.costParams.recomputeOutputs)),
        recomputeWeights(
            flopWeights(profile, true, options.costParams.recomputeOutputs)) {
    result.memoryCapBytes = cap;
  }

  /// Configurations on `devices` of the topology's devices; whether one
  /// fits.
  bool searchOn(int64_t devices);
  /// The best, or the error that says why nothing fits.
  llvm::Expected<SearchResult> finish(double seconds);

private:
  bool tpSplitsLayers(int64_t tp) const;
  void searchBatch(int64_t tp, int64_t pp, int64_t dp);
  void searchSchedules(const ParallelConfig &base);
  void searchLayouts(const ParallelConfig &base);
  void consider(const ParallelConfig &c);
  bool breaksConstraint(const ParallelConfig &c);
  bool better(const CostEstimate &a, const CostEstimate &b) const;
  void rank(Candidate candidate);
  void noteMemory(const ParallelConfig &c, const CostEstimate &e);
  llvm::Error nothingFits();

  const ModelProfile &profile;
  const TopologyGraph &graph;
  const Topology &topo;
  const SearchOptions &options;
  const PartialParallelConfig &pins;
  const LayerProfile &layer;
  const int64_t L, B;
  const double cap;
  const FlopWeights plainWeights, recomputeWeights;

  SearchResult result;
  std::vector<Candidate> ranked; // best first, at most topK + 1
  // The least memory any configuration needs, for the nothing-fits error;
  // configurations pruned on their model states are costed there if they
  // might need less.
  double smallestMemory = INFINITY;
  // The runtime's share of it, which more devices do not shrink; and the
  // smallest share of any configuration.
  double smallestRuntime = 0, leastRuntime = INFINITY;
  std::vector<ParallelConfig> prunedOnStates;
  ParallelConfig smallestConfig;
  // What became of each pipeline depth: some configuration fit, or all that
  // could be built ran out of memory.
  enum class Depth { OutOfMemory, Fits };
  std::map<int64_t, Depth> atPp;
};

/// Whether tensor parallelism of `tp` splits the layers evenly (heads,
/// key/value heads, norms) within the topology's nodes.
bool Searcher::tpSplitsLayers(int64_t tp) const {
  // A tensor-parallel group must fill whole nodes or share one.
  if (!options.allowTpAcrossNodes && topo.devicesPerNode % tp != 0)
    return false;
  return layer.heads % tp == 0 &&
         (layer.kvHeads % tp == 0 || tp % layer.kvHeads == 0) &&
         !(tp > 1 && layer.normSpansHeads);
}

bool Searcher::searchOn(int64_t devices) {
  int64_t tpMax =
      options.allowTpAcrossNodes ? topo.numDevices() : topo.devicesPerNode;
  for (int64_t tp : pinnedOr(pins.tp, divisors(devices, tpMax))) {
    if (!tpSplitsLayers(tp) || devices % tp != 0) {
      ++result.rejectedIndivisible;
      continue;
    }
    for (int64_t pp : pinnedOr(pins.pp, divisors(devices / tp, L))) {
      int64_t dp = pins.dp.value_or(devices / (tp * pp));
      if (dp * tp * pp != devices ||
          (B % dp != 0 && !options.freeGlobalBatch)) {
        ++result.rejectedIndivisible;
        continue;
      }
      searchBatch(tp, pp, dp);
    }
  }
  return !ranked.empty();
}

void Searcher::searchBatch(int64_t tp, int64_t pp, int64_t dp) {
  std::vector<int64_t> mbsChoices = divisors(B / dp, 16);
  if (options.freeGlobalBatch) {
    mbsChoices.clear();
    for (int64_t mbs = 1; mbs <= 16; ++mbs)
      mbsChoices.push_back(mbs);
  }
  for (int64_t mbs : pinnedOr(pins.microBatchSize, mbsChoices)) {
    // The global batch is fixed, or moves to the nearest multiple of
    // dp * mbs (at least one micro-batch).
    if (!options.freeGlobalBatch && (B / dp) % mbs != 0) {
      ++result.rejectedIndivisible;
      continue;
    }
    ParallelConfig c;
    c.dp = dp;
    c.tp = tp;
    c.pp = pp;
    c.microBatchSize = mbs;
    c.numMicroBatches = std::max<int64_t>(1, (B + dp * mbs / 2) / (dp * mbs));
    searchSchedules(c);
  }
}

void Searcher::searchSchedules(const ParallelConfig &base) {
  int64_t pp = base.pp, m = base.numMicroBatches;
  std::vector<int64_t> vpps{1};
  if (pp > 1 && L % pp == 0)
    for (int64_t v : divisors(L / pp, 8))
      if (v > 1 && m % pp == 0)
        vpps.push_back(v);
  for (int64_t vpp : pinnedOr(pins.vpp, vpps)) {
    if (vpp > 1 && pp == 1) {
      ++result.rejectedIndivisible;
      continue;
    }
    std::vector<Schedule> schedules;
    if (vpp > 1)
      schedules = {Schedule::Interleaved};
    else if (pp > 1)
      schedules = {Schedule::OneFOneB, Schedule::GPipe};
    else
      schedules = {Schedule::OneFOneB};
    for (Schedule schedule : pinnedOr(pins.schedule, schedules)) {
      if ((vpp > 1) != (schedule == Schedule::Interleaved) ||
          (vpp > 1 && (m % pp != 0 || L % (pp * vpp) != 0))) {
        ++result.rejectedIndivisible;
        continue;
      }
      ParallelConfig c = base;
      c.vpp = vpp;
      c.schedule = schedule;
      searchLayouts(c);
    }
  }
}

void Searcher::searchLayouts(const ParallelConfig &base) {
  int64_t tp = base.tp, pp = base.pp, dp = base.dp;
  for (Recompute recompute :
       pinnedOr(pins.recompute,
                {Recompute::None, Recompute::Selective, Recompute::Full})) {
    // The cut that balances compute; and the even cut, which loads the
    // first stage (holding the most micro-batches) less.
    std::vector<std::vector<int64_t>> cuts{{}};
    if (pp > 1 && base.vpp == 1) {
      const FlopWeights &w =
          recompute == Recompute::Full ? recomputeWeights : plainWeights;
      cuts = {balancedStageCut(w.layers, 0, w.head, pp)};
      if (L % pp == 0 && cuts[0] != std::vector<int64_t>(pp, L / pp))
        cuts.push_back(std::vector<int64_t>(pp, L / pp));
    }
    for (const std::vector<int64_t> &stageLayers : cuts)
      for (bool sp : pinnedOr(pins.sequenceParallel,
                              tp > 1 ? std::vector<bool>{false, true}
                                     : std::vector<bool>{false})) {
        if (sp && tp == 1) {
          ++result.rejectedIndivisible;
          continue;
        }
        for (int64_t zero :
             pinnedOr(pins.zero, dp > 1 ? std::vector<int64_t>{0, 1, 2, 3}
                                        : std::vector<int64_t>{0})) {
          ParallelConfig c = base;
          c.zero = zero;
          c.recompute = recompute;
          c.sequenceParallel = sp;
          c.stageLayers = stageLayers;
          consider(c);
        }
      }
  }
}

bool Searcher::breaksConstraint(const ParallelConfig &c) {
  for (const StrategyConstraint &constraint : options.constraints) {
    std::optional<std::string> why = constraint.check(c);
    if (!why)
      continue;
    auto &[count, first] = result.rejectedByConstraint[constraint.name];
    if (count++ == 0)
      first = *why;
    return true;
  }
  return false;
}

bool Searcher::better(const CostEstimate &a, const CostEstimate &b) const {
  if (options.objective == SearchObjective::Memory)
    return a.memory.total() < b.memory.total() ||
           (a.memory.total() == b.memory.total() && a.stepTimeS < b.stepTimeS);
  // Time per sequence: the step time when the batch is fixed.
  return a.stepTimeS / a.config.globalBatch() <
         b.stepTimeS / b.config.globalBatch();
}

void Searcher::noteMemory(const ParallelConfig &c, const CostEstimate &e) {
  leastRuntime = std::min(leastRuntime, e.memory.runtime);
  if (e.memory.total() < smallestMemory) {
    smallestMemory = e.memory.total();
    smallestRuntime = e.memory.runtime;
    smallestConfig = c;
  }
}

void Searcher::rank(Candidate candidate) {
  auto pos =
      std::find_if(ranked.begin(), ranked.end(), [&](const Candidate &o) {
        return better(candidate.estimate, o.estimate);
      });
  if (pos - ranked.begin() > options.topK) {
    ++result.rejectedSlower;
    return;
  }
  ranked.insert(pos, std::move(candidate));
  if (static_cast<int64_t>(ranked.size()) > options.topK + 1) {
    ranked.pop_back();
    ++result.rejectedSlower;
  }
}

void Searcher::consider(const ParallelConfig &c) {
  if (breaksConstraint(c))
    return;
  // Model states alone (parameters, gradients and optimizer state, divided
  // as ZeRO divides them) bound the memory from below: no need to cost
  // what they already overflow.
  double params = double(profile.numParameters) / (c.tp * c.pp);
  double states =
      params * modelStateBytes(double(profile.elementBytes),
                               options.costParams.gradientBytes, c.zero, c.dp)
                   .total();
  if (states > cap) {
    atPp.try_emplace(c.pp, Depth::OutOfMemory);
    ++result.rejectedOutOfMemory;
    prunedOnStates.push_back(c);
    return;
  }
  llvm::Expected<CostEstimate> e =
      estimateCost(profile, graph, c, options.costParams);
  if (!e) {
    llvm::consumeError(e.takeError());
    ++result.rejectedIndivisible;
    return;
  }
  ++result.costed;
  noteMemory(c, *e);
  if (e->memory.total() > cap) {
    atPp.try_emplace(c.pp, Depth::OutOfMemory);
    ++result.rejectedOutOfMemory;
    return;
  }
  atPp[c.pp] = Depth::Fits;
  rank(Candidate{c, std::move(*e)});
}

llvm::Error Searcher::nothingFits() {
  const int64_t N = topo.numDevices();
  // Only now does the exact least memory matter: cost what was pruned.
  for (const ParallelConfig &c : prunedOnStates) {
    llvm::Expected<CostEstimate> e =
        estimateCost(profile, graph, c, options.costParams);
    if (!e) {
      llvm::consumeError(e.takeError());
      continue;
    }
    noteMemory(c, *e);
  }
  if (result.costed == 0 && smallestMemory == INFINITY &&
      !result.rejectedByConstraint.empty()) {
    std::string rules;
    for (const auto &[name, rejected] : result.rejectedByConstraint)
      rules += (rules.empty() ? "" : "; ") + name + " rejected " +
               std::to_string(rejected.first) + " (first: " + rejected.second +
               ")";
    return makeError("no parallel configuration of " + profile.name + " on " +
                     llvm::Twine(N) +
                     " devices meets the constraints: " + rules);
  }
  if (result.costed == 0 && smallestMemory == INFINITY)
    return makeError(
        "no parallel configuration of " + profile.name + " divides evenly on " +
        llvm::Twine(N) + " devices with the given pins (" +
        llvm::Twine(result.rejectedIndivisible) + " rejected as indivisible)");
  if (leastRuntime >= cap)
    return makeError(
        "no parallel configuration of " + profile.name +
        " fits: the runtime alone needs " + gib(leastRuntime) +
        " per device (CUDA context, workspaces and NCCL buffers: "
        "runtime_gib, nccl_collective_gib, nccl_p2p_gib) and a device has " +
        gib(cap) +
        "; more devices do not shrink it (where this machine "
        "needs less, say so with --cost-params)");
  // Memory of model states scales with 1/devices at best, the runtime's
  // not at all: a lower bound on the devices needed.
  int64_t needed = static_cast<int64_t>(
      std::min(1e15, smallestRuntime < cap
                         ? std::ceil(N * (smallestMemory - smallestRuntime) /
                                     (cap - smallestRuntime))
                         : std::ceil(N * smallestMemory / cap)));
  int64_t nodes = (needed + topo.devicesPerNode - 1) / topo.devicesPerNode;
  // ZeRO needs data parallelism to shard over.
  bool zeroWouldHelp = smallestConfig.dp > 1 && smallestConfig.zero < 3;
  std::string hint = zeroWouldHelp
                         ? "add nodes, or allow zero=3 with recompute=full"
                         : "add nodes";
  return makeError("no parallel configuration of " + profile.name +
                   " fits: the " + "smallest needs " + gib(smallestMemory) +
                   " per device (" + smallestConfig.str() +
                   ") and a device has " + gib(cap) + "; needs at least " +
                   llvm::Twine(nodes * topo.devicesPerNode) + " devices of " +
                   gib(cap) + " (" + llvm::Twine(nodes) + " nodes); " + hint);
}

llvm::Expected<SearchResult> Searcher::finish(double seconds) {
  result.searchTimeS = seconds;
  if (ranked.empty())
    return nothingFits();
  result.best = std::move(ranked.front());
  result.runnersUp.assign(std::make_move_iterator(ranked.begin() + 1),
                          std::make_move_iterator(ranked.end()));
  for (const auto &[pp, state] : atPp)
    result.fitsAtPp[pp] = state == Depth::Fits;
  explainChoice(result, profile, topo, options.pins);
  return std::move(result);
}

} // namespace

llvm::Expected<SearchResult> searchStrategy(const ModelProfile &profile,
                                            const TopologyGraph &graph,
                                            const SearchOptions &options) {
  auto start = std::chrono::steady_clock::now();
  const Topology &topo = graph.topology();
  const PartialParallelConfig &pins = options.pins;
  if (profile.layers.empty())
    return makeError("the model has no tfm.block layers to plan");
  // A cap lowers the memory a device may use; it cannot add any.
  const double cap =
      std::min(options.memoryCapBytes.value_or(topo.device.memoryBytes),
               topo.device.memoryBytes);
  if (llvm::Error error = pinError(profile, topo, options, cap))
    return std::move(error);
  Searcher searcher(profile, graph, options, cap);
  // Every device if possible; otherwise the most that divide the model and
  // the batch (a global batch smaller than the cluster, say).
  std::vector<int64_t> deviceCounts = divisors(topo.numDevices());
  std::reverse(deviceCounts.begin(), deviceCounts.end());
  if (pins.dp && pins.tp && pins.pp)
    deviceCounts = {*pins.dp * *pins.tp * *pins.pp};
  for (int64_t devices : deviceCounts)
    if (searcher.searchOn(devices))
      break;
  return searcher.finish(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
}

} // namespace partita
