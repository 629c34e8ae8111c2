//===- CostModel.cpp - Analytical cost of a parallel configuration --------===//
//
// Notation as in docs/cost-model.md: t, d, p, v the tensor, data, pipeline
// and virtual-pipeline sizes; b the micro-batch size, s the sequence length,
// m the number of micro-batches, h the hidden size, V the vocabulary.
//
//===----------------------------------------------------------------------===//

#include "compiler/CostModel/CostModel.h"

#include <algorithm>
#include <cmath>

namespace partita {

llvm::StringRef toString(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::SendRecv:
    return "send_recv";
  case CollectiveKind::Broadcast:
    return "broadcast";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

std::string CostParams::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "gemm_efficiency=" << gemmEfficiency
     << ",gemm_half_dim=" << gemmHalfDim
     << ",attention_efficiency=" << attentionEfficiency
     << ",hbm_efficiency=" << hbmEfficiency
     << ",collective_efficiency=" << collectiveEfficiency
     << ",gradient_bytes=" << gradientBytes
     << ",overlap_grad_reduce=" << (overlapGradientReduction ? 1 : 0)
     << ",attention=" << (flashAttention ? "flash" : "unfused");
  return s;
}

llvm::Expected<CostParams> parseCostParams(llvm::StringRef text) {
  CostParams p;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    key = key.trim();
    value = value.trim();
    auto fail = [&](const llvm::Twine &expected) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     ("--cost-params: " + key + "=" + value +
                                      ": expected " + expected)
                                         .str());
    };
    if (key == "attention") {
      if (value != "flash" && value != "unfused")
        return fail("flash or unfused");
      p.flashAttention = value == "flash";
      continue;
    }
    double number;
    if (value.getAsDouble(number))
      return fail("a number");
    auto fraction = [&](double &field) -> llvm::Error {
      if (!(number > 0 && number <= 1))
        return fail("a number in (0, 1]");
      field = number;
      return llvm::Error::success();
    };
    llvm::Error err = llvm::Error::success();
    if (key == "gemm_efficiency")
      err = fraction(p.gemmEfficiency);
    else if (key == "attention_efficiency")
      err = fraction(p.attentionEfficiency);
    else if (key == "hbm_efficiency")
      err = fraction(p.hbmEfficiency);
    else if (key == "collective_efficiency")
      err = fraction(p.collectiveEfficiency);
    else if (key == "gemm_half_dim" && number >= 0)
      p.gemmHalfDim = number;
    else if (key == "gradient_bytes" && (number == 2 || number == 4))
      p.gradientBytes = number;
    else if (key == "overlap_grad_reduce" && (number == 0 || number == 1))
      p.overlapGradientReduction = number == 1;
    else if (key == "gemm_half_dim" || key == "gradient_bytes" ||
             key == "overlap_grad_reduce")
      return fail(key == "gemm_half_dim"    ? "a number >= 0"
                  : key == "gradient_bytes" ? "2 or 4"
                                            : "0 or 1");
    else
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          ("--cost-params: unknown key '" + key +
           "'; keys: gemm_efficiency, gemm_half_dim, attention_efficiency, "
           "hbm_efficiency, collective_efficiency, gradient_bytes, "
           "overlap_grad_reduce, attention")
              .str());
    if (err)
      return std::move(err);
  }
  return p;
}

//===----------------------------------------------------------------------===//
// Collectives: alpha-beta over the topology graph
//===----------------------------------------------------------------------===//

CollectiveGroup::CollectiveGroup(const TopologyGraph &graph,
                                 std::vector<int64_t> groupRanks)
    : ranks(std::move(groupRanks)) {
  flat = graph.ring(ranks);
  const Topology &topo = graph.topology();
  // Ranks per node, in group order.
  std::map<int64_t, std::vector<int64_t>> byNode;
  for (int64_t r : ranks)
    byNode[topo.nodeOf(r)].push_back(r);
  numNodes = static_cast<int64_t>(byNode.size());
  perNode = static_cast<int64_t>(byNode.begin()->second.size());
  bool uniform = llvm::all_of(byNode, [&](const auto &entry) {
    return static_cast<int64_t>(entry.second.size()) == perNode;
  });
  hierarchical = uniform && numNodes > 1 && perNode > 1;
  if (!hierarchical)
    return;
  std::vector<std::vector<int64_t>> intraRings, interRings(perNode);
  for (const auto &[node, local] : byNode) {
    intraRings.push_back(local);
    for (int64_t i = 0; i < perNode; ++i)
      interRings[i].push_back(local[i]);
  }
  intra = graph.concurrentRings(intraRings);
  inter = graph.concurrentRings(interRings);
}

namespace {

/// Ring algorithms (Thakur, Rabenseifner, Gropp 2005; NCCL's bus-bandwidth
/// factors): an all-reduce moves 2(p-1)/p of the buffer over the slowest
/// link, an all-gather or reduce-scatter (p-1)/p, in 2(p-1) or p-1 steps.
double ringTime(CollectiveKind kind, double bytes, int64_t p,
                const RingCost &ring, double efficiency) {
  if (p <= 1)
    return 0;
  double bw = ring.bytesPerS * efficiency;
  double frac = double(p - 1) / p;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * frac * bytes / bw + 2 * (p - 1) * ring.latencyS;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return frac * bytes / bw + (p - 1) * ring.latencyS;
  case CollectiveKind::Broadcast:
    return bytes / bw + (p - 1) * ring.latencyS;
  case CollectiveKind::SendRecv:
    return bytes / bw + ring.latencyS;
  }
  return 0;
}

} // namespace

double CollectiveGroup::time(CollectiveKind kind, double bytes,
                             double efficiency, std::string *algorithm) const {
  int64_t p = size();
  double best = ringTime(kind, bytes, p, flat, efficiency);
  std::string chosen = "ring";
  if (hierarchical && kind != CollectiveKind::SendRecv) {
    // Reduce-scatter inside nodes, the collective on 1/perNode of the data
    // across nodes (perNode rings at once), all-gather inside nodes.
    double across = ringTime(kind, bytes / perNode, numNodes, inter,
                             efficiency);
    double inside = 0;
    if (kind == CollectiveKind::AllReduce)
      inside = ringTime(CollectiveKind::ReduceScatter, bytes, perNode, intra,
                        efficiency) +
               ringTime(CollectiveKind::AllGather, bytes, perNode, intra,
                        efficiency);
    else
      inside = ringTime(kind, bytes, perNode, intra, efficiency);
    if (inside + across < best) {
      best = inside + across;
      chosen = "hierarchical";
    }
  }
  if (!flat.intraNode && kind == CollectiveKind::AllReduce && p > 2) {
    // NCCL's double binary tree: logarithmic latency, ring-like bandwidth.
    double tree = 2 * double(p - 1) / p * bytes /
                      (flat.bytesPerS * efficiency) +
                  2 * std::ceil(std::log2(double(p))) * flat.latencyS;
    if (tree < best) {
      best = tree;
      chosen = "tree";
    }
  }
  if (algorithm)
    *algorithm = chosen;
  return best;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

namespace {

struct Device {
  double peakFlops, hbmBytesPerS;
  const CostParams &params;

  double gemmEfficiency(double m, double n, double k) const {
    double d0 = params.gemmHalfDim;
    return params.gemmEfficiency * (m / (m + d0)) * (n / (n + d0)) *
           (k / (k + d0));
  }
  /// Roofline: the slower of the math and the operand traffic.
  double gemmTime(double m, double n, double k, double elementBytes) const {
    double flops = 2 * m * n * k;
    double math = flops / (peakFlops * gemmEfficiency(m, n, k));
    double memory =
        elementBytes * (m * k + k * n + m * n) / (hbmBytesPerS *
                                                  params.hbmEfficiency);
    return std::max(math, memory);
  }
  double memoryTime(double bytes) const {
    return bytes / (hbmBytesPerS * params.hbmEfficiency);
  }
};

} // namespace

llvm::Expected<CostEstimate> estimateCost(const ModelProfile &profile,
                                          const TopologyGraph &graph,
                                          const ParallelConfig &c,
                                          const CostParams &params) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  const Topology &topo = graph.topology();
  if (profile.layers.empty())
    return fail("the model has no tfm.block layers to cost");
  const LayerProfile &layer = profile.layers.front();
  const int64_t t = c.tp, p = c.pp, v = c.vpp, m = c.numMicroBatches;
  const int64_t L = profile.layers.size();
  if (c.numDevices() > topo.numDevices())
    return fail("the configuration needs " + llvm::Twine(c.numDevices()) +
                " devices; topology '" + topo.name + "' has " +
                llvm::Twine(topo.numDevices()));
  if (layer.heads % t != 0)
    return fail("tp=" + llvm::Twine(t) + " does not divide the " +
                llvm::Twine(layer.heads) + " attention heads");
  if (layer.kvHeads % t != 0 && t % layer.kvHeads != 0)
    return fail("tp=" + llvm::Twine(t) + " neither divides nor is a multiple "
                "of the " + llvm::Twine(layer.kvHeads) + " key/value heads");
  if (L % (p * v) != 0)
    return fail("pp * vpp = " + llvm::Twine(p * v) + " does not divide the " +
                llvm::Twine(L) + " layers");

  CostEstimate e;
  e.config = c;
  e.topologyName = topo.name;
  e.devices = c.numDevices();
  e.deviceMemoryBytes = topo.device.memoryBytes;

  mlir::Type elem = profile.elementType;
  DType dtype = !elem || elem.isBF16() ? DType::BF16
                : elem.isF16()        ? DType::F16
                                      : DType::F32;
  Device dev{topo.device.peakFlops(dtype), topo.device.hbmBytesPerS, params};
  const double eb = profile.elementBytes;
  const double s = profile.seqLen, b = c.microBatchSize, tokens = b * s;
  const double h = profile.hidden, V = profile.vocab;
  const double sp = c.sequenceParallel ? t : 1; // split of boundary tensors

  // --- Per-layer forward costs on one device for one micro-batch ----------
  double gemmFwd = 0, attnFwd = 0, eltFwd = 0;
  double layerFlopsFwd = 0; // per device
  for (const GemmProfile &g : layer.gemms) {
    double n = g.rowParallel ? g.n : double(g.n) / t;
    double k = g.rowParallel ? double(g.k) / t : g.k;
    double time = dev.gemmTime(tokens, n, k, eb);
    OpClassCost &row = e.layerOps[g.name];
    row.forwardFlops += 2 * tokens * n * k;
    row.forwardTimeS += time;
    row.backwardTimeS += 2 * time; // input and weight gradients
    gemmFwd += time;
    layerFlopsFwd += 2 * tokens * n * k;
  }
  // Attention scores and context: 4 b s s_eff (heads * head_dim) FLOPs,
  // counted over the full s x s_eff square as Megatron-LM does.
  double context = layer.window ? std::min<double>(s, layer.window) : s;
  double localHeads = double(layer.heads) / t;
  double attnFlops = 4 * b * s * context * localHeads * layer.headDim;
  double scores = b * localHeads * s * context; // elements of the s x s map
  if (params.flashAttention) {
    attnFwd = attnFlops / (dev.peakFlops * params.attentionEfficiency);
  } else {
    // Two batched GEMMs (QK^T, PV), and the score matrix written, read and
    // rewritten by the softmax, and read by PV: four passes.
    double bh = b * localHeads;
    attnFwd = bh * (dev.gemmTime(s, context, layer.headDim, eb) +
                    dev.gemmTime(s, layer.headDim, context, eb)) +
              dev.memoryTime(4 * eb * scores);
  }
  layerFlopsFwd += attnFlops;
  e.layerOps["attention"] = {attnFlops, attnFwd, 2 * attnFwd};
  double eltBytes = eb * tokens *
                    (layer.boundaryTraffic / sp + layer.shardedTraffic / t);
  eltFwd = dev.memoryTime(eltBytes);
  e.layerOps["elementwise"] = {0, eltFwd, 2 * eltFwd};
  double layerFwd = gemmFwd + attnFwd + eltFwd;
  double layerBwd = 2 * layerFwd;
  double layerRecompute = c.recompute == Recompute::Full ? layerFwd
                          : c.recompute == Recompute::Selective ? attnFwd
                                                                : 0;

  // --- Embedding (first stage) and LM head + loss (last stage) -----------
  double headFlops = 2 * tokens * h * V / t;
  double headFwd = dev.gemmTime(tokens, V / t, h, eb) +
                   dev.memoryTime(eb * tokens * (3 * V / t + 2 * h / sp));
  double embedFwd = dev.memoryTime(eb * tokens * 2 * h / sp);
  e.layerOps["lm_head"] = {headFlops, headFwd, 2 * headFwd};

  // --- Tensor-parallel collectives -----------------------------------------
  const int64_t dp = c.dp;
  std::vector<int64_t> tpRanks, dpRanks;
  for (int64_t i = 0; i < t; ++i)
    tpRanks.push_back(i);
  for (int64_t i = 0; i < dp; ++i)
    dpRanks.push_back(i * t);
  CollectiveGroup tpGroup(graph, tpRanks), dpGroup(graph, dpRanks);
  const double eff = params.collectiveEfficiency;
  double activationBytes = eb * tokens * h;
  int64_t layersPerStage = L / p;
  double tpPerLayerFwd = 0;
  if (t > 1) {
    std::string algo;
    CollectiveCost cc;
    if (c.sequenceParallel) {
      // Each all-reduce becomes an all-gather and a reduce-scatter.
      double ag = tpGroup.time(CollectiveKind::AllGather, activationBytes,
                               eff, &algo);
      double rs = tpGroup.time(CollectiveKind::ReduceScatter, activationBytes,
                               eff);
      tpPerLayerFwd = layer.rowParallelGemms * (ag + rs);
      double calls = double(layer.rowParallelGemms) * layersPerStage * m *
                     (2 + (c.recompute == Recompute::Full ? 1 : 0));
      e.collectives.push_back({CollectiveKind::AllGather, "tp", algo, t,
                               activationBytes, calls, ag});
      e.collectives.push_back({CollectiveKind::ReduceScatter, "tp", algo, t,
                               activationBytes, calls, rs});
    } else {
      double ar = tpGroup.time(CollectiveKind::AllReduce, activationBytes,
                               eff, &algo);
      tpPerLayerFwd = layer.rowParallelGemms * ar;
      double calls = double(layer.rowParallelGemms) * layersPerStage * m *
                     (2 + (c.recompute == Recompute::Full ? 1 : 0));
      e.collectives.push_back({CollectiveKind::AllReduce, "tp", algo, t,
                               activationBytes, calls, ar});
    }
  }
  double tpPerLayerBwd = tpPerLayerFwd;
  double tpPerLayerRecompute =
      c.recompute == Recompute::Full ? tpPerLayerFwd : 0;

  // --- One micro-batch on the busiest stage --------------------------------
  // The embedding runs on the first stage, the head on the last; the
  // slower end stage sets the pace.
  bool oneStage = p == 1;
  double endsFwd = oneStage ? headFwd + embedFwd : std::max(headFwd, embedFwd);
  double stageFwd = layersPerStage * layerFwd + endsFwd;
  double stageBwd = layersPerStage * layerBwd + 2 * endsFwd;
  double stageRecompute = layersPerStage * layerRecompute;
  // Tensor-parallel collectives sit on the critical path between GEMMs.
  double stageTp =
      layersPerStage * (tpPerLayerFwd + tpPerLayerBwd + tpPerLayerRecompute);

  // --- Pipeline: p2p and the bubble ----------------------------------------
  double p2pTime = 0;
  if (p > 1) {
    // With sequence parallelism (or Megatron's scatter/gather) each tp rank
    // sends 1/t of the activation.
    double bytes = activationBytes / (c.sequenceParallel ? t : 1);
    CollectiveGroup pair(graph, {0, dp * t});
    p2pTime = pair.time(CollectiveKind::SendRecv, bytes, eff);
    // Forward activations and backward gradients cross each of the v stage
    // boundaries a micro-batch meets on this rank.
    double calls = 2.0 * m * v;
    e.collectives.push_back({CollectiveKind::SendRecv, "pp", "p2p", 2, bytes,
                             calls, p2pTime});
    e.ppCommS = calls * p2pTime;
  }
  double perMicroBatch = stageFwd + stageBwd + stageRecompute + stageTp;
  e.forwardS = m * stageFwd;
  e.backwardS = m * stageBwd;
  e.recomputeS = m * stageRecompute;
  e.bubbleFraction = double(p - 1) / (double(v) * m);
  e.bubbleS = double(p - 1) / v * perMicroBatch;
  e.tpCommS = m * stageTp;

  // --- Parameters on the busiest device ------------------------------------
  double layerParams = double(layer.params) / t;
  double firstStageParams = layersPerStage * layerParams +
                            double(profile.embeddingParams) / t;
  double lastStageParams = layersPerStage * layerParams +
                           double(profile.headParams) / t +
                           profile.finalNormParams;
  if (oneStage)
    firstStageParams = lastStageParams = firstStageParams +
                                         double(profile.headParams) / t +
                                         profile.finalNormParams;
  double stageParams = std::max(firstStageParams, lastStageParams);

  // --- Data parallelism and ZeRO -------------------------------------------
  if (dp > 1) {
    double gradBytes = params.gradientBytes * stageParams;
    std::string algo;
    double dpTime;
    if (c.zero == 0) {
      dpTime = dpGroup.time(CollectiveKind::AllReduce, gradBytes, eff, &algo);
      e.collectives.push_back({CollectiveKind::AllReduce, "dp", algo, dp,
                               gradBytes, 1, dpTime});
    } else {
      double rs =
          dpGroup.time(CollectiveKind::ReduceScatter, gradBytes, eff, &algo);
      e.collectives.push_back({CollectiveKind::ReduceScatter, "dp", algo, dp,
                               gradBytes, 1, rs});
      dpTime = rs;
      if (c.zero < 3) {
        // Updated parameter shards gathered once per step.
        std::string agAlgo;
        double ag = dpGroup.time(CollectiveKind::AllGather, eb * stageParams,
                                 eff, &agAlgo);
        e.collectives.push_back({CollectiveKind::AllGather, "dp", agAlgo, dp,
                                 eb * stageParams, 1, ag});
        dpTime += ag;
      }
    }
    e.dpCommS = dpTime;
    // Buckets of gradients reduce while the last backward pass runs.
    e.dpCommExposedS = params.overlapGradientReduction
                           ? std::max(0.0, dpTime - stageBwd)
                           : dpTime;
    if (c.zero == 3) {
      // Each layer's parameters are gathered before its forward and its
      // backward of every micro-batch, prefetched one layer ahead.
      double bytes = eb * layerParams;
      double ag = dpGroup.time(CollectiveKind::AllGather, bytes, eff, &algo);
      double calls = 2.0 * m * layersPerStage;
      e.collectives.push_back(
          {CollectiveKind::AllGather, "dp", algo, dp, bytes, calls, ag});
      e.dpCommS += calls * ag;
      e.zero3GatherExposedS = m * layersPerStage *
                              (std::max(0.0, ag - layerFwd) +
                               std::max(0.0, ag - layerBwd));
    }
  }

  // AdamW reads and writes parameters, gradients and states once.
  double shard = c.zero >= 1 ? dp : 1;
  e.optimizerS = dev.memoryTime(2 * (eb + params.gradientBytes + 12.0) *
                                stageParams / shard);

  // --- Step ------------------------------------------------------------------
  double pipeline = m * perMicroBatch + e.bubbleS;
  e.exposedCommS =
      e.tpCommS + e.ppCommS + e.dpCommExposedS + e.zero3GatherExposedS;
  e.stepTimeS = pipeline + e.ppCommS + e.dpCommExposedS +
                e.zero3GatherExposedS + e.optimizerS;

  // --- FLOPs: forward, backward = 2 x forward, recomputation ---------------
  double tokensPerStep = double(profile.globalBatch) * s;
  double flopsPerTokenFwd =
      (L * layerFlopsFwd * t + headFlops * t) / tokens; // undo the tp split
  e.modelFlops = 3 * flopsPerTokenFwd * tokensPerStep;
  double recomputeFlopsPerToken =
      c.recompute == Recompute::Full        ? L * layerFlopsFwd * t / tokens
      : c.recompute == Recompute::Selective ? L * attnFlops * t / tokens
                                            : 0;
  e.hardwareFlops = e.modelFlops + recomputeFlopsPerToken * tokensPerStep;
  e.tokensPerS = tokensPerStep / e.stepTimeS;
  e.modelTflopsPerDevice = e.modelFlops / e.stepTimeS / e.devices / 1e12;
  e.hardwareTflopsPerDevice =
      e.hardwareFlops / e.stepTimeS / e.devices / 1e12;
  e.mfu = e.modelTflopsPerDevice * 1e12 / dev.peakFlops;

  // --- Memory on the busiest device ------------------------------------------
  MemoryBreakdown &mem = e.memory;
  mem.parameters = eb * stageParams / (c.zero >= 3 ? dp : 1);
  mem.gradients = params.gradientBytes * stageParams / (c.zero >= 2 ? dp : 1);
  // fp32 master weights and Adam's two moments.
  mem.optimizerStates = 12.0 * stageParams / (c.zero >= 1 ? dp : 1);
  // Kept per layer and micro-batch; full recomputation keeps only the
  // layer's input and rebuilds one layer's tensors at a time.
  // Unfused attention also keeps its softmax output (Korthikanti et al.'s
  // 5as/h term, without dropout), which selective recomputation drops.
  double layerTensors =
      eb * tokens * (layer.savedBoundary / sp + layer.savedSharded / t);
  double fullLayer =
      layerTensors + (params.flashAttention ? 0 : eb * scores);
  double kept = c.recompute == Recompute::Full        ? eb * tokens * h / sp
                : c.recompute == Recompute::Selective ? layerTensors
                                                      : fullLayer;
  double workingSet = c.recompute == Recompute::Full ? fullLayer : 0;
  // Micro-batches in flight: all m for GPipe; p on the first stage of 1F1B,
  // times 1 + (p-1)/(p v) when interleaved (Narayanan et al. 2021); one on
  // the last stage.
  double firstInFlight =
      c.schedule == Schedule::GPipe
          ? double(m)
          : std::min<double>(p, m) *
                (c.schedule == Schedule::Interleaved
                     ? 1 + double(p - 1) / (double(p) * v)
                     : 1.0);
  double lastInFlight = c.schedule == Schedule::GPipe ? double(m) : 1.0;
  // Logits of the loss on the last stage, with fp32 softmax work.
  double logits = (eb + 4) * tokens * V / t;
  double firstStage = firstInFlight * layersPerStage * kept + workingSet;
  double lastStage = lastInFlight * layersPerStage * kept + workingSet + logits;
  mem.activations = oneStage ? firstStage + logits
                             : std::max(firstStage, lastStage);
  // Collective buffers: the gathered activation of sp/tp, a gradient bucket,
  // ZeRO-3's prefetched layer.
  mem.buffers = (t > 1 ? activationBytes : 0) +
                (dp > 1 ? std::min(params.gradientBytes * stageParams,
                                   25e6 * params.gradientBytes)
                        : 0) +
                (c.zero == 3 ? 2 * eb * layerParams : 0);
  return e;
}

} // namespace partita
