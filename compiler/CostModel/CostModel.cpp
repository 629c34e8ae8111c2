//===- CostModel.cpp - Analytical cost of a parallel configuration --------===//
//
// Notation as in docs/cost-model.md: t, d, p, v the tensor, data, pipeline
// and virtual-pipeline sizes; b the micro-batch size, s the sequence length,
// m the number of micro-batches, h the hidden size, V the vocabulary.
//
//===----------------------------------------------------------------------===//

#include "compiler/CostModel/CostModel.h"
#include "compiler/CostModel/PipelineSchedule.h"
#include "compiler/Import/GraphBuilder.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

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
  os << "gemm_efficiency=" << gemmEfficiency << ",gemm_half_dim=" << gemmHalfDim
     << ",attention_efficiency=" << attentionEfficiency
     << ",hbm_efficiency=" << hbmEfficiency
     << ",collective_efficiency=" << collectiveEfficiency
     << ",gradient_bytes=" << gradientBytes
     << ",overlap_grad_reduce=" << (overlapGradientReduction ? 1 : 0)
     << ",overlap_p2p=" << (overlapP2P ? 1 : 0)
     << ",overlap_tp=" << (overlapTensorParallel ? 1 : 0)
     << ",attention=" << (flashAttention ? "flash" : "unfused")
     << ",recompute_outputs=" << (recomputeOutputs ? 1 : 0);
  // Unset ones stay unset: the device decides.
  if (runtimeGib)
    os << ",runtime_gib=" << *runtimeGib;
  if (ncclCollectiveGib)
    os << ",nccl_collective_gib=" << *ncclCollectiveGib;
  if (ncclP2PGib)
    os << ",nccl_p2p_gib=" << *ncclP2PGib;
  os << ",bucket_mb=" << bucketMb;
  return s;
}

llvm::Expected<CostParams> parseCostParams(llvm::StringRef text) {
  return parseCostParams(text, CostParams());
}

llvm::Expected<CostParams> costParamsFor(const Topology &topology,
                                         llvm::StringRef text) {
  CostParams measured;
  const Calibration &c = topology.calibration;
  measured.gemmEfficiency = c.gemmEfficiency.value_or(measured.gemmEfficiency);
  measured.gemmHalfDim = c.gemmHalfDim.value_or(measured.gemmHalfDim);
  measured.attentionEfficiency =
      c.attentionEfficiency.value_or(measured.attentionEfficiency);
  measured.hbmEfficiency = c.hbmEfficiency.value_or(measured.hbmEfficiency);
  measured.collectiveEfficiency =
      c.collectiveEfficiency.value_or(measured.collectiveEfficiency);
  if (!c.empty())
    measured.overrides.push_back("topology '" + topology.name +
                                 "' calibration");
  return parseCostParams(text, measured);
}

llvm::Expected<CostParams> parseCostParams(llvm::StringRef text,
                                           const CostParams &base) {
  CostParams p = base;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  llvm::StringSet<> given;
  for (llvm::StringRef item : items) {
    auto [key, value] = item.trim().split('=');
    key = key.trim();
    value = value.trim();
    if (!given.insert(key).second)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          ("--cost-params: " + key + " is given twice").str());
    auto fail = [&](const llvm::Twine &expected) {
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          ("--cost-params: " + key + "=" + value + ": expected " + expected)
              .str());
    };
    if (key == "attention") {
      if (value != "flash" && value != "unfused")
        return fail("flash or unfused");
      p.flashAttention = value == "flash";
      continue;
    }
    double number;
    if (value.getAsDouble(number) || !std::isfinite(number))
      return fail("a finite number");
    // Efficiencies divide every time; at least 1e-6, as the topology's
    // rates (docs/topology.md), so that no time overflows to inf.
    auto fraction = [&](double &field) -> llvm::Error {
      if (!(number >= 1e-6 && number <= 1))
        return fail("a number from 1e-6 to 1");
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
    else if (key == "gemm_half_dim" && number >= 0 && number <= 1e6)
      p.gemmHalfDim = number;
    else if (key == "gradient_bytes" && (number == 2 || number == 4))
      p.gradientBytes = number;
    else if (key == "overlap_grad_reduce" && (number == 0 || number == 1))
      p.overlapGradientReduction = number == 1;
    else if (key == "overlap_p2p" && (number == 0 || number == 1))
      p.overlapP2P = number == 1;
    else if (key == "overlap_tp" && (number == 0 || number == 1))
      p.overlapTensorParallel = number == 1;
    else if (key == "recompute_outputs" && (number == 0 || number == 1))
      p.recomputeOutputs = number == 1;
    else if (key == "runtime_gib" || key == "nccl_collective_gib" ||
             key == "nccl_p2p_gib") {
      if (!(number >= 0 && number <= 1024))
        return fail("a number of GiB from 0 to 1024");
      (key == "runtime_gib"           ? p.runtimeGib
       : key == "nccl_collective_gib" ? p.ncclCollectiveGib
                                      : p.ncclP2PGib) = number;
    } else if (key == "bucket_mb" && number > 0 && number <= 1e6)
      p.bucketMb = number;
    else if (key == "gemm_half_dim" || key == "gradient_bytes" ||
             key == "overlap_grad_reduce" || key == "overlap_p2p" ||
             key == "overlap_tp" || key == "recompute_outputs" ||
             key == "bucket_mb")
      return fail(key == "gemm_half_dim"    ? "a number from 0 to 1e6"
                  : key == "bucket_mb"      ? "MiB over 0, up to 1e6"
                  : key == "gradient_bytes" ? "2 or 4"
                                            : "0 or 1");
    else
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          ("--cost-params: unknown key '" + key +
           "'; keys: gemm_efficiency, gemm_half_dim, attention_efficiency, "
           "hbm_efficiency, collective_efficiency, gradient_bytes, "
           "overlap_grad_reduce, overlap_p2p, overlap_tp, recompute_outputs, "
           "attention, "
           "runtime_gib, nccl_collective_gib, nccl_p2p_gib, bucket_mb")
              .str());
    if (err)
      return std::move(err);
  }
  return p;
}

//===----------------------------------------------------------------------===//
// The runtime's own device memory
//===----------------------------------------------------------------------===//

Communicators communicatorsOf(const ParallelConfig &c, int64_t stage,
                              bool tiedEmbedding, bool keyValueGroup) {
  Communicators n;
  n.collective =
      (c.tp > 1) + (c.dp > 1) + (c.numDevices() > 1) +
      (keyValueGroup && c.tp > 1) +
      (tiedEmbedding && c.pp > 1 && (stage == 0 || stage == c.pp - 1));
  // Activations go forward and their gradients back: both directions to
  // each neighbour. The interleaved schedule also joins the last stage to
  // the first.
  bool end = stage == 0 || stage == c.pp - 1;
  int64_t neighbours = c.pp == 1           ? 0
                       : c.pp == 2         ? 1
                       : c.vpp > 1 || !end ? 2
                                           : 1;
  n.p2p = 2 * neighbours;
  return n;
}

double runtimeReserveBytes(const Topology &topology, const CostParams &params,
                           Communicators communicators) {
  // CPU ranks keep everything in host memory the plan does not model.
  bool gpu = topology.intraNode.kind != dist::LinkKind::shared_memory;
  // A rank on one H200 (CUDA 13.0, driver 580) had 2.67 GiB in use beside
  // its arena after the first step, whatever the plan (a Llama-3-8B-shaped
  // block and GPT-2 small alike), and 2.92 GiB with cuDNN's attention: the
  // CUDA context with its kernels and the libraries', the cuBLASLt
  // workspace (32 MiB), collective workspaces (one per stream that runs
  // collectives, up to 128 MiB at the default --collective-chunk) and
  // kernel scratch. NCCL's channel buffers are estimates still (one GPU
  // measured none): a few hundred MiB per communicator that runs
  // collectives, far less per point-to-point peer. NCCL (2.22 on) connects
  // a communicator at its first operation, so those never used (the
  // world's parent, one-rank splits) cost next to nothing.
  double runtime = params.runtimeGib.value_or(gpu ? 3.0 : 0.0);
  double collective = params.ncclCollectiveGib.value_or(gpu ? 0.5 : 0.0);
  double p2p = params.ncclP2PGib.value_or(gpu ? 1.0 / 16 : 0.0);
  return kGiB * (runtime + collective * double(communicators.collective) +
                 p2p * double(communicators.p2p)) +
         (gpu ? communicators.sendStagingBytes : 0);
}

//===----------------------------------------------------------------------===//
// Collectives: alpha-beta over the topology graph
//===----------------------------------------------------------------------===//

/// Up to this many nodes a group is routed as it is; beyond, a group that
/// repeats one pattern on every node it touches is routed on this many.
constexpr int64_t kRoutedNodes = 4;

CollectiveGroup::CollectiveGroup(const TopologyGraph &fullGraph,
                                 std::vector<int64_t> groupRanks,
                                 int64_t concurrent, int64_t shift)
    : ranks(std::move(groupRanks)) {
  const Topology &topo = fullGraph.topology();
  ringOnly = topo.intraNode.kind == dist::LinkKind::shared_memory;
  // The concurrent groups whose every rank shares its node with this
  // group's: shifts, in ranks.
  std::vector<int64_t> siblings;
  for (int64_t k = 1; k < concurrent; ++k)
    if (llvm::all_of(ranks, [&](int64_t r) {
          return r + k * shift < topo.numDevices() &&
                 topo.nodeOf(r + k * shift) == topo.nodeOf(r);
        }))
      siblings.push_back(k * shift);
  // Ranks a, a + s, a + 2s, ... (the groups of a mesh) with a the first
  // on its node's share of the pattern load every node they touch alike,
  // and identical nodes make the node numbers irrelevant: such a group
  // spanning many nodes is routed on its first few, renumbered. (Routing
  // it whole costs a search of the graph per member: quadratic in nodes.)
  bool progression = !ranks.empty();
  int64_t stride = ranks.size() > 1 ? ranks[1] - ranks[0] : 1;
  for (size_t i = 1; progression && i < ranks.size(); ++i)
    progression = ranks[i] - ranks[i - 1] == stride;
  bool uniformNodes = stride < topo.devicesPerNode
                          ? topo.devicesPerNode % stride == 0 &&
                                ranks.front() % topo.devicesPerNode < stride
                          : stride % topo.devicesPerNode == 0;
  std::map<int64_t, int64_t> compactNode;
  for (int64_t r : ranks)
    compactNode.try_emplace(topo.nodeOf(r), compactNode.size());
  bool reduce = progression && uniformNodes &&
                static_cast<int64_t>(compactNode.size()) > kRoutedNodes;
  const TopologyGraph &graph =
      reduce ? fullGraph.withNodes(kRoutedNodes) : fullGraph;
  std::vector<int64_t> routed;
  for (int64_t r : ranks) {
    if (!reduce) {
      routed.push_back(r);
      continue;
    }
    int64_t node = compactNode[topo.nodeOf(r)];
    if (node < kRoutedNodes)
      routed.push_back(node * topo.devicesPerNode + r % topo.devicesPerNode);
  }
  // The group's ring and its siblings' (renumbering keeps a rank's node
  // and its place in it, so a sibling shifts the routed ranks alike).
  auto withSiblings = [&](std::vector<std::vector<int64_t>> rings) {
    size_t own = rings.size();
    for (int64_t s : siblings)
      for (size_t i = 0; i < own; ++i) {
        rings.push_back(rings[i]);
        for (int64_t &r : rings.back())
          r += s;
      }
    return rings;
  };
  flat = graph.concurrentRings(withSiblings({routed}));
  flat.hops = size();
  // Ranks per node, in group order.
  std::map<int64_t, std::vector<int64_t>> byNode;
  for (int64_t r : routed)
    byNode[topo.nodeOf(r)].push_back(r);
  std::set<int64_t> nodes;
  for (int64_t r : ranks)
    nodes.insert(topo.nodeOf(r));
  numNodes = static_cast<int64_t>(nodes.size());
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
  intra = graph.concurrentRings(withSiblings(intraRings));
  inter = graph.concurrentRings(withSiblings(interRings));
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
  if (ringOnly) {
    if (algorithm)
      *algorithm = chosen;
    return best;
  }
  if (hierarchical && kind != CollectiveKind::SendRecv) {
    // Reduce-scatter inside nodes, the collective on 1/perNode of the data
    // across nodes (perNode rings at once), all-gather inside nodes.
    double across =
        ringTime(kind, bytes / perNode, numNodes, inter, efficiency);
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
  if (numNodes == p && p > 2 &&
      (kind == CollectiveKind::AllGather ||
       kind == CollectiveKind::ReduceScatter)) {
    // NCCL's PAT (2.23 on), for groups of one rank per node: Bruck-like
    // exchanges in log2(p) steps, at 3/4 of the ring's bus bandwidth and a
    // cost per rank that NCCL's tuning model puts at 2.8 us.
    constexpr double kPatPerRankS = 2.8e-6;
    double pat =
        double(p - 1) / p * bytes / (0.75 * flat.bytesPerS * efficiency) +
        std::ceil(std::log2(double(p))) * flat.latencyS + p * kPatPerRankS;
    if (pat < best) {
      best = pat;
      chosen = "pat";
    }
  }
  if (!flat.intraNode && kind == CollectiveKind::AllReduce && p > 2) {
    // NCCL's double binary tree: logarithmic latency, ring-like bandwidth.
    double tree =
        2 * double(p - 1) / p * bytes / (flat.bytesPerS * efficiency) +
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

double DeviceRoofline::gemmEfficiency(double m, double n, double k) const {
  if (params.gemmEfficiencyFn)
    return params.gemmEfficiencyFn(m, n, k);
  double d0 = params.gemmHalfDim;
  return params.gemmEfficiency * (m / (m + d0)) * (n / (n + d0)) *
         (k / (k + d0));
}

double DeviceRoofline::gemmTime(double m, double n, double k,
                                double elementBytes) const {
  double math = 2 * m * n * k / (peakFlops * gemmEfficiency(m, n, k));
  double memory = elementBytes * (m * k + k * n + m * n) /
                  (hbmBytesPerS * params.hbmEfficiency);
  return std::max(math, memory);
}

double DeviceRoofline::memoryTime(double bytes) const {
  return bytes / (hbmBytesPerS * params.hbmEfficiency);
}

double DeviceRoofline::attentionTime(double batchHeads, double s,
                                     double context, double headDim,
                                     double elementBytes) const {
  double scores = batchHeads * s * context;
  if (params.flashAttention)
    return 4 * scores * headDim / (peakFlops * params.attentionEfficiency);
  // Two batched GEMMs (QK^T, PV), and the score matrix written, read and
  // rewritten by the softmax, and read by PV: four passes through HBM.
  return batchHeads * (gemmTime(s, context, headDim, elementBytes) +
                       gemmTime(s, headDim, context, elementBytes)) +
         memoryTime(4 * elementBytes * scores);
}

namespace {

/// One layer on one device for one micro-batch.
struct LayerCost {
  double forwardS = 0, backwardS = 0, recomputeS = 0;
  double attentionForwardS = 0;
  double forwardFlops = 0, attentionFlops = 0, recomputeFlops = 0;
  double tpForwardS = 0; // collectives of one forward pass
  /// Of which a parallel residual's branches hide (dist-overlap-collectives),
  /// and of the backward pass's (exec-overlap-communication).
  double tpForwardHiddenS = 0, tpBackwardHiddenS = 0;
  /// The collectives of the recomputed forward, and of those hidden.
  double tpRecomputeS = 0, tpRecomputeHiddenS = 0;
  /// Sequence parallelism: backward all-gathers each GEMM input again from
  /// its kept shard (unless full recomputation re-runs the forward).
  double tpRegatherS = 0;
  double params = 0; // on this device
  /// Its parameter tensors on this device, in elements, in the order
  /// backward completes their gradients (the GEMMs' weights last to first,
  /// then norms and biases as one).
  llvm::SmallVector<double, 12> tensorParams;
  /// Bytes kept for backward (under the recomputation choice) and the
  /// layer's full set (the working set of a recomputation).
  double keptBytes = 0, fullBytes = 0;
};

/// Parameter tensors (elements) in the order backward completes their
/// gradients: a layer's, or one tensor outside the layers; `newRun` where
/// a data-parallel bucket cannot reach back past it.
struct GradientPiece {
  llvm::ArrayRef<double> tensors;
  double single = 0; // where `tensors` is empty
  bool newRun = false;
};

/// Data-parallel collectives over tensors of `elementBytes` an element,
/// bucketed as exec-overlap-communication buckets them: a bucket takes the
/// tensors in order while they fit in `limit` bytes (a larger one goes
/// alone) and never spans two runs; each bucket is one call.
struct Bucketed {
  double calls = 0, bytes = 0, seconds = 0;
  /// The last bucket's: it starts only when backward has finished.
  double lastSeconds = 0;
};
Bucketed bucketed(const CollectiveGroup &group, CollectiveKind kind,
                  llvm::ArrayRef<GradientPiece> pieces, double elementBytes,
                  double limit, double efficiency) {
  Bucketed b;
  // Layers alike make buckets alike: time each size once.
  llvm::SmallVector<std::pair<double, double>, 8> timeOf;
  auto call = [&](double bytes) {
    if (bytes <= 0)
      return;
    b.calls += 1;
    b.bytes += bytes;
    auto known =
        llvm::find_if(timeOf, [&](auto &e) { return e.first == bytes; });
    if (known == timeOf.end()) {
      timeOf.emplace_back(bytes, group.time(kind, bytes, efficiency));
      known = timeOf.end() - 1;
    }
    b.seconds += known->second;
    b.lastSeconds = known->second;
  };
  double bucket = 0;
  auto add = [&](double params) {
    double bytes = elementBytes * params;
    if (bucket > 0 && bucket + bytes > limit) {
      call(bucket);
      bucket = 0;
    }
    bucket += bytes;
  };
  for (const GradientPiece &piece : pieces) {
    if (piece.newRun) {
      call(bucket);
      bucket = 0;
    }
    if (piece.tensors.empty())
      add(piece.single);
    for (double params : piece.tensors)
      add(params);
  }
  call(bucket);
  return b;
}

/// The same tensors as the step phase gathers them after AdamW (ZeRO-1/2):
/// in the model's order, the reverse of backward's, and in one run, since
/// only AdamW launches, which touch none of the gathers' buffers, lie
/// between them.
std::vector<double> inStepOrder(llvm::ArrayRef<GradientPiece> pieces) {
  std::vector<double> tensors;
  for (const GradientPiece &piece : llvm::reverse(pieces)) {
    if (piece.tensors.empty())
      tensors.push_back(piece.single);
    for (double params : llvm::reverse(piece.tensors))
      tensors.push_back(params);
  }
  return tensors;
}

/// Everything a configuration fixes for costing layers.
struct LayerCoster {
  const DeviceRoofline &dev;
  const CostParams &params;
  const ParallelConfig &c;
  double eb, s, b, tokens, h, sp;
  const CollectiveGroup &tpGroup;
  /// Per op class of the first layer, for the report.
  std::map<std::string, OpClassCost> *table = nullptr;

  LayerCost cost(const LayerProfile &layer) const {
    LayerCost lc;
    std::vector<double> gemmTimes = costCompute(layer, lc);
    if (c.tp > 1)
      costTensorParallel(layer, gemmTimes, lc);
    costParamsAndActivations(layer, lc);
    return lc;
  }

private:
  /// Key/value projections split over the kv heads when tp exceeds them
  /// (each rank holds one, replicated), like dist-partition-tensors.
  double kvParts(const LayerProfile &layer) const {
    return layer.kvHeads ? std::min<double>(c.tp, layer.kvHeads) : c.tp;
  }
  /// Whether a full recomputation skips the GEMMs whose outputs backward
  /// does not read (GemmProfile::unreadByBackward).
  bool skipUnread() const { return !params.recomputeOutputs; }
  void record(const std::string &name, double flops, double time) const {
    if (!table)
      return;
    OpClassCost &row = (*table)[name];
    row.forwardFlops += flops;
    row.forwardTimeS += time;
    row.backwardTimeS += 2 * time; // input and weight gradients
  }

  /// Forward, backward and recomputation times and FLOPs; each GEMM's
  /// forward time.
  std::vector<double> costCompute(const LayerProfile &layer,
                                  LayerCost &lc) const {
    const double t = c.tp;
    std::vector<double> gemmTimes;
    double skippedS = 0, skippedFlops = 0;
    for (const GemmProfile &g : layer.gemms) {
      double n = g.rowParallel ? g.n : g.n / (g.keyValue ? kvParts(layer) : t);
      double k = g.rowParallel ? g.k / t : g.k;
      double time = dev.gemmTime(tokens, n, k, eb);
      gemmTimes.push_back(time);
      record(g.name, 2 * tokens * n * k, time);
      lc.forwardS += time;
      lc.forwardFlops += 2 * tokens * n * k;
      if (skipUnread() && g.unreadByBackward) {
        skippedS += time;
        skippedFlops += 2 * tokens * n * k;
      }
    }
    // Scores and context: 4 b s s' (heads * head_dim) FLOPs over the full
    // s x s' square, as Megatron-LM counts them.
    double context = layer.window ? std::min<double>(s, layer.window) : s;
    double localHeads = layer.heads / t;
    double scores = b * localHeads * s * context;
    lc.attentionFlops = 4 * scores * layer.headDim;
    lc.attentionForwardS =
        dev.attentionTime(b * localHeads, s, context, layer.headDim, eb);
    record("attention", lc.attentionFlops, lc.attentionForwardS);
    double elementwise = dev.memoryTime(
        eb * tokens * (layer.boundaryTraffic / sp + layer.shardedTraffic / t));
    record("elementwise", 0, elementwise);
    if (skipUnread())
      skippedS += dev.memoryTime(
          eb * tokens *
          (layer.unreadBoundaryTraffic / sp + layer.unreadShardedTraffic / t));
    lc.forwardS += lc.attentionForwardS + elementwise;
    lc.forwardFlops += lc.attentionFlops;
    lc.backwardS = 2 * lc.forwardS;
    lc.recomputeS = c.recompute == Recompute::Full ? lc.forwardS - skippedS
                    : c.recompute == Recompute::Selective ? lc.attentionForwardS
                                                          : 0;
    lc.recomputeFlops =
        c.recompute == Recompute::Full        ? lc.forwardFlops - skippedFlops
        : c.recompute == Recompute::Selective ? lc.attentionFlops
                                              : 0;
    return gemmTimes;
  }

  /// Tensor parallelism: a reduction after each row-parallel GEMM (or an
  /// all-gather plus a reduce-scatter with sequence parallelism), and what
  /// of them a parallel residual's branches hide.
  void costTensorParallel(const LayerProfile &layer,
                          llvm::ArrayRef<double> gemmTimes,
                          LayerCost &lc) const {
    double bytes = eb * tokens * h;
    double gather = tpGroup.time(CollectiveKind::AllGather, bytes,
                                 params.collectiveEfficiency);
    double scatter = tpGroup.time(CollectiveKind::ReduceScatter, bytes,
                                  params.collectiveEfficiency);
    double reduce = tpGroup.time(CollectiveKind::AllReduce, bytes,
                                 params.collectiveEfficiency);
    double perGemm = c.sequenceParallel ? gather + scatter : reduce;
    lc.tpForwardS = layer.rowParallelGemms * perGemm;
    // A parallel residual: the first branch's output reduction runs during
    // the second branch, and with sequence parallelism the second branch's
    // input gather during the first (the same in a recomputed forward).
    // With sequence parallelism, backward gathers the first branch's
    // output gradient during the second's backward. A full recomputation
    // that skips the branches' output projections and their reductions
    // overlaps only the second branch's input gather.
    double recomputeHiddenS = 0;
    if (layer.parallelBranches.size() == 2 && params.overlapTensorParallel) {
      auto branchTime = [&](const LayerProfile::Branch &branch,
                            bool recomputed) {
        double time = branch.attention ? lc.attentionForwardS : 0;
        for (size_t i : branch.gemms)
          if (!recomputed || !skipUnread() || !layer.gemms[i].unreadByBackward)
            time += gemmTimes[i];
        return time;
      };
      double first = branchTime(layer.parallelBranches[0], false);
      double second = branchTime(layer.parallelBranches[1], false);
      if (c.sequenceParallel)
        recomputeHiddenS =
            std::min(gather, branchTime(layer.parallelBranches[0], true));
      lc.tpForwardHiddenS = c.sequenceParallel ? std::min(gather, first) +
                                                     std::min(scatter, second)
                                               : std::min(reduce, second);
      // Backward: the branches' norms run first in forward, so the second
      // branch's input-gradient reduction (scatter) runs during the first
      // branch's backward.
      lc.tpBackwardHiddenS =
          c.sequenceParallel
              ? std::min(gather, 2 * second) + std::min(scatter, 2 * first)
              : std::min(reduce, 2 * first);
    }
    if (c.regathersInputs())
      lc.tpRegatherS = layer.rowParallelGemms * gather;
    // A full recomputation runs them again, but the reductions of the
    // GEMMs it skips (their input gathers stay).
    if (c.recompute == Recompute::Full) {
      int64_t skipped = skipUnread() ? layer.unreadRowParallelGemms() : 0;
      lc.tpRecomputeS =
          lc.tpForwardS - skipped * (c.sequenceParallel ? scatter : reduce);
      lc.tpRecomputeHiddenS = skipped ? recomputeHiddenS : lc.tpForwardHiddenS;
    }
  }

  /// The parameters on this device, tensor by tensor in backward's order,
  /// and the activations kept for backward.
  void costParamsAndActivations(const LayerProfile &layer,
                                LayerCost &lc) const {
    const double t = c.tp, kv = kvParts(layer);
    lc.params =
        (layer.params - layer.keyValueParams - layer.replicatedParams) / t +
        layer.keyValueParams / kv + layer.replicatedParams;
    double others = lc.params;
    for (const GemmProfile &g : llvm::reverse(layer.gemms)) {
      double weight = double(g.n) * double(g.k) / (g.keyValue ? kv : t);
      lc.tensorParams.push_back(weight);
      others -= weight;
    }
    if (others > 0)
      lc.tensorParams.push_back(others);
    // Kept tensors; unfused attention also keeps its softmax output
    // (Korthikanti et al.'s 5as/h term, without dropout), flash attention
    // each query row's log-sum-exp (f32), unless recomputed.
    double context = layer.window ? std::min<double>(s, layer.window) : s;
    double localHeads = layer.heads / t;
    double scores = b * localHeads * s * context;
    double tensors =
        eb * tokens * (layer.savedBoundary / sp + layer.savedSharded / t);
    lc.fullBytes = tensors + (params.flashAttention ? 4 * b * localHeads * s
                                                    : eb * scores);
    lc.keptBytes = c.recompute == Recompute::Full        ? eb * tokens * h / sp
                   : c.recompute == Recompute::Selective ? tensors
                                                         : lc.fullBytes;
  }
};

/// One pipeline rank for one micro-batch (times), and what it holds.
struct RankCost {
  double fwd = 0, bwd = 0, recompute = 0, tp = 0, params = 0;
  double kept = 0, working = 0;
  double layerParamsMax = 0;
  std::vector<GradientPiece> gradients;

  double perMicroBatch() const { return fwd + bwd + recompute + tp; }
};

/// Why the cost model cannot cost `c` for this model on this topology, or
/// success.
llvm::Error checkConfig(const ModelProfile &profile, const Topology &topo,
                        const ParallelConfig &c) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  if (profile.layers.empty())
    return fail("the model has no tfm.block layers to cost");
  // Sizes beyond these are not configurations but overflows.
  constexpr int64_t kMaxSize = int64_t(1) << 24;
  int64_t product;
  if (llvm::any_of(std::initializer_list<int64_t>{c.dp, c.tp, c.pp, c.vpp,
                                                  c.microBatchSize,
                                                  c.numMicroBatches},
                   [](int64_t x) { return x < 1 || x > kMaxSize; }) ||
      llvm::MulOverflow(c.dp, c.tp, product) ||
      llvm::MulOverflow(product, c.pp, product) || product > kMaxSize)
    return fail("dp, tp, pp, vpp, micro-batch size and count must be "
                "between 1 and " +
                llvm::Twine(kMaxSize) + ", and so must dp * tp * pp");
  const int64_t t = c.tp, p = c.pp, v = c.vpp, m = c.numMicroBatches;
  const int64_t L = profile.layers.size();
  if (c.numDevices() > topo.numDevices())
    return fail("the configuration needs " + llvm::Twine(c.numDevices()) +
                " devices; topology '" + topo.name + "' has " +
                llvm::Twine(topo.numDevices()));
  for (const LayerProfile &layer : profile.layers) {
    if (layer.heads % t != 0)
      return fail("tp=" + llvm::Twine(t) + " does not divide the " +
                  llvm::Twine(layer.heads) + " attention heads");
    if (layer.kvHeads % t != 0 && t % layer.kvHeads != 0)
      return fail("tp=" + llvm::Twine(t) +
                  " neither divides nor is a multiple of the " +
                  llvm::Twine(layer.kvHeads) + " key/value heads");
    if (t > 1 && layer.normSpansHeads)
      return fail("tp=" + llvm::Twine(t) +
                  ": a norm spans the whole query or key projection, which "
                  "tensor parallelism would split");
  }
  if (c.sequenceParallel && profile.seqLen % t != 0)
    return fail("sequence parallelism: tp=" + llvm::Twine(t) +
                " does not divide the sequence length " +
                llvm::Twine(profile.seqLen));
  if (c.schedule == Schedule::Interleaved && p == 1)
    return fail("the interleaved schedule needs pp > 1");
  if (c.schedule == Schedule::Interleaved && m % p != 0)
    return fail("the interleaved schedule needs a number of micro-batches (" +
                llvm::Twine(m) + ") divisible by pp (" + llvm::Twine(p) + ")");
  if (c.stageLayers.empty() && L % (p * v) != 0)
    return fail("pp * vpp = " + llvm::Twine(p * v) + " does not divide the " +
                llvm::Twine(L) + " layers");
  if (!c.stageLayers.empty()) {
    int64_t total = 0;
    for (int64_t n : c.stageLayers)
      total += n;
    if (v != 1 || static_cast<int64_t>(c.stageLayers.size()) != p ||
        total != L ||
        llvm::any_of(c.stageLayers, [](int64_t n) { return n < 1; }))
      return fail("stage_layers has " + llvm::Twine(c.stageLayers.size()) +
                  " stages of " + llvm::Twine(total) +
                  " layers in all; it "
                  "needs pp = " +
                  llvm::Twine(p) +
                  " stages of at least one "
                  "layer covering the " +
                  llvm::Twine(L) + " layers (and vpp = 1)");
  }
  return llvm::Error::success();
}

/// A training step of a configuration checkConfig accepts, costed section
/// by section into one CostEstimate: the layers, each pipeline rank, the
/// tensor-parallel, pipeline and data-parallel collectives, the step's
/// time and FLOPs, and the memory of the device that needs the most.
class StepCoster {
public:
  StepCoster(const ModelProfile &profile, const TopologyGraph &graph,
             const ParallelConfig &c, const CostParams &params);

  CostEstimate run() {
    costLayers();
    for (int64_t k = 0; k < p; ++k)
      ranks.push_back(costRank(k));
    busiestRank =
        std::max_element(ranks.begin(), ranks.end(),
                         [](const RankCost &x, const RankCost &y) {
                           return x.perMicroBatch() < y.perMicroBatch();
                         }) -
        ranks.begin();
    reportTensorParallel();
    if (p > 1)
      costPipelineTransfers();
    if (dp > 1)
      costDataParallel();
    if (profile.headParams == 0 && p > 1)
      costTiedEmbedding();
    costStep();
    costFlops();
    costMemory();
    return e;
  }

private:
  void costLayers();
  RankCost costRank(int64_t k) const;
  void orderGradients(RankCost &r, int64_t k,
                      llvm::ArrayRef<int64_t> rankLayers,
                      size_t chunkLength) const;
  void reportTensorParallel();
  void costPipelineTransfers();
  void costDataParallel();
  Bucketed reportSlowestRank(CollectiveKind kind, double elementBytes,
                             double timesPerStep);
  void costZero3Gathers(bool overlap);
  void costTiedEmbedding();
  void costStep();
  void costFlops();
  void costMemory();

  const RankCost &busiest() const { return ranks[busiestRank]; }

  const ModelProfile &profile;
  const TopologyGraph &graph;
  const Topology &topo;
  const ParallelConfig &c;
  const CostParams &params;
  const int64_t t, p, v, m, dp, L;
  DeviceRoofline dev;
  /// Bytes of an element, and of a gradient's: gradients are never
  /// narrower than the parameters (f32 training keeps f32 gradients).
  const double eb, gradientBytes;
  const double s, b, tokens;
  /// The vocabulary is padded to a multiple of tp (dist-partition-tensors).
  const double h, V;
  const double sp; // split of boundary tensors
  const double eff;
  /// The token embedding as one tp rank holds it (the vocabulary padded to
  /// a multiple of t): what a tied LM head copies to the last stage.
  const double tiedParams;
  CollectiveGroup tpGroup, dpGroup;

  CostEstimate e;
  std::vector<LayerCost> layers;
  double headFlops = 0, headFwd = 0, embedFwd = 0;
  /// Per micro-batch on each end rank: the tp collectives of the
  /// embedding's output and the LM head's input, and the LM head input's
  /// gather again in backward (sequence parallelism).
  double endTp = 0, headRegather = 0;
  std::vector<RankCost> ranks;
  int64_t busiestRank = 0;
};

/// Rank layout: tp innermost, then dp, then pp.
std::vector<int64_t> strided(int64_t count, int64_t stride) {
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < count; ++i)
    ranks.push_back(i * stride);
  return ranks;
}

StepCoster::StepCoster(const ModelProfile &profile, const TopologyGraph &graph,
                       const ParallelConfig &c, const CostParams &params)
    : profile(profile), graph(graph), topo(graph.topology()), c(c),
      params(params), t(c.tp), p(c.pp), v(c.vpp), m(c.numMicroBatches),
      dp(c.dp), L(int64_t(profile.layers.size())),
      dev{topo.device.peakFlops(
              profile.elementType ? dtypeOf(profile.elementType) : DType::BF16),
          topo.device.hbmBytesPerS, params},
      eb(profile.elementBytes),
      gradientBytes(std::max(params.gradientBytes, eb)), s(profile.seqLen),
      b(c.microBatchSize), tokens(b * s), h(profile.hidden),
      V(double((profile.vocab + t - 1) / t * t)),
      sp(c.sequenceParallel ? t : 1), eff(params.collectiveEfficiency),
      tiedParams(double((profile.vocab + t - 1) / t) * double(profile.hidden)),
      tpGroup(graph, strided(t, 1), dp, t),
      dpGroup(graph, strided(dp, t), t, 1) {
  e.config = c;
  e.topologyName = topo.name;
  e.costOverrides = params.overrides;
  e.devices = c.numDevices();
  e.deviceMemoryBytes = topo.device.memoryBytes;
}

void StepCoster::costLayers() {
  LayerCoster coster{dev, params, c, eb, s, b, tokens, h, sp, tpGroup};
  for (const LayerProfile &layer : profile.layers) {
    coster.table = layers.empty() ? &e.layerOps : nullptr;
    layers.push_back(coster.cost(layer));
  }
  // Embedding (first rank) and LM head + loss (last rank); the loss reads
  // and writes the vocabulary-parallel logits three times.
  headFlops = 2 * tokens * h * V / t;
  headFwd = dev.gemmTime(tokens, V / t, h, eb) +
            dev.memoryTime(eb * tokens * (3 * V / t + 2 * h / sp));
  embedFwd = dev.memoryTime(eb * tokens * 2 * h / sp);
  e.layerOps["lm_head"] = {headFlops, headFwd, 2 * headFwd};
  // The vocab-parallel embedding reduces its output (a reduce-scatter with
  // sequence parallelism, whose backward is an all-gather), and the LM
  // head's input needs the mirror image in backward (or an all-gather
  // forward and a reduce-scatter backward): one reduction unit per micro-batch
  // on each end rank.
  // With sequence parallelism, backward gathers the LM head's input again
  // too.
  if (t > 1) {
    double bytes = eb * tokens * h;
    endTp = c.sequenceParallel
                ? tpGroup.time(CollectiveKind::AllGather, bytes, eff) +
                      tpGroup.time(CollectiveKind::ReduceScatter, bytes, eff)
                : tpGroup.time(CollectiveKind::AllReduce, bytes, eff);
    if (c.regathersInputs())
      headRegather = tpGroup.time(CollectiveKind::AllGather, bytes, eff);
  }
}

RankCost StepCoster::costRank(int64_t k) const {
  RankCost r;
  std::vector<int64_t> rankLayers = c.layersOfRank(k, L);
  // layersOfRank lists the rank's chunks in order, equal in size.
  size_t chunkLength = std::max<size_t>(1, rankLayers.size() / v);
  std::vector<double> chunkKept(v, 0);
  for (auto [position, i] : llvm::enumerate(rankLayers)) {
    const LayerCost &lc = layers[i];
    r.fwd += lc.forwardS;
    r.bwd += lc.backwardS;
    r.recompute += lc.recomputeS;
    // Backward's collectives mirror forward's; recomputation's are
    // forward's but the skipped GEMMs' (tpRecomputeS).
    r.tp += 2 * lc.tpForwardS + lc.tpRecomputeS + lc.tpRegatherS -
            lc.tpForwardHiddenS - lc.tpRecomputeHiddenS - lc.tpBackwardHiddenS;
    r.params += lc.params;
    chunkKept[std::min<size_t>(position / chunkLength, v - 1)] += lc.keptBytes;
    r.layerParamsMax = std::max(r.layerParamsMax, lc.params);
    if (c.recompute == Recompute::Full)
      r.working = std::max(r.working, lc.fullBytes);
  }
  // Kept activations as the memory plan keeps them, micro-batches in
  // flight counted on the schedule: all m for GPipe, min(p - k, m) for
  // 1F1B; an interleaved rank's chunks share one region, whose peak is the
  // schedule's fullest moment.
  for (const std::vector<int64_t> &moment : fullestMoments(c, k)) {
    double kept = 0;
    for (int64_t chunk = 0; chunk < v; ++chunk)
      kept += double(moment[chunk]) * chunkKept[chunk];
    r.kept = std::max(r.kept, kept);
  }
  orderGradients(r, k, rankLayers, chunkLength);
  if (k == 0) {
    r.fwd += embedFwd;
    r.bwd += 2 * embedFwd;
    r.tp += endTp;
    r.params += double(profile.embeddingParams) / t;
  }
  if (k == p - 1) {
    r.fwd += headFwd;
    r.bwd += 2 * headFwd;
    r.tp += endTp + headRegather;
    r.params += double(profile.headParams) / t + profile.finalNormParams;
    // A tied LM head keeps its own copy of the embedding on the last
    // stage (dist-split-stages).
    if (profile.headParams == 0 && p > 1)
      r.params += tiedParams;
    // Logits with the fp32 softmax work.
    r.working += (eb + 4) * tokens * V / t;
  }
  return r;
}

/// Backward runs the rank's chunks last to first and each one's layers
/// last to first, the LM head and final norm before them and the embedding
/// after; other collectives between layers (tp's, ZeRO-3's gathers) close
/// buckets there, as do the chunk's ends.
void StepCoster::orderGradients(RankCost &r, int64_t k,
                                llvm::ArrayRef<int64_t> rankLayers,
                                size_t chunkLength) const {
  bool layersCloseBuckets = t > 1 || c.zero == 3;
  r.gradients.reserve(rankLayers.size() + 3);
  for (int64_t chunk = v - 1; chunk >= 0; --chunk) {
    bool newRun = true;
    if (k == p - 1 && chunk == v - 1) {
      double head = profile.headParams == 0 ? (p > 1 ? tiedParams : 0)
                                            : double(profile.headParams) / t;
      for (double params : {head, double(profile.finalNormParams)}) {
        if (params == 0)
          continue;
        r.gradients.push_back({{}, params, newRun});
        newRun = layersCloseBuckets;
      }
    }
    size_t begin = std::min(rankLayers.size(), chunk * chunkLength);
    size_t end = chunk == v - 1
                     ? rankLayers.size()
                     : std::min(rankLayers.size(), (chunk + 1) * chunkLength);
    for (size_t position = end; position-- > begin;) {
      r.gradients.push_back(
          {layers[rankLayers[position]].tensorParams, 0, newRun});
      newRun = layersCloseBuckets;
    }
    // The embedding joins the first layer's bucket, but under sequence
    // parallelism its output gradient is gathered over tp first.
    if (k == 0 && chunk == 0)
      r.gradients.push_back({{},
                             double(profile.embeddingParams) / t,
                             begin == end || (c.sequenceParallel && t > 1)});
  }
}

/// The busiest rank's tensor-parallel collectives, for the report.
void StepCoster::reportTensorParallel() {
  if (t == 1)
    return;
  double bytes = eb * tokens * h;
  // Row-parallel GEMMs on the busiest rank, each with a reduction (and,
  // with sequence parallelism, its input's gather) in forward and
  // backward; a full recomputation runs them again but for the
  // reductions of the GEMMs it skips.
  double gemms = 0, skipped = 0;
  for (int64_t i : c.layersOfRank(busiestRank, L)) {
    gemms += profile.layers[i].rowParallelGemms;
    if (c.recompute == Recompute::Full && !params.recomputeOutputs)
      skipped += profile.layers[i].unreadRowParallelGemms();
  }
  double passes = c.forwardPasses() + 1;
  // The embedding's (and, on one stage, the LM head's) reductions.
  double ends = m * (p == 1 ? 2 : busiestRank == 0 || busiestRank == p - 1);
  double calls = (gemms * passes - skipped) * m + ends;
  double gatherCalls = gemms * passes * m + ends;
  std::string algo;
  if (c.sequenceParallel) {
    // And the backward re-gathers of the GEMM inputs (and of the LM
    // head's input on the last rank).
    double regathers =
        c.regathersInputs() ? m * (gemms + (busiestRank == p - 1)) : 0;
    double ag = tpGroup.time(CollectiveKind::AllGather, bytes, eff, &algo);
    e.collectives.push_back({CollectiveKind::AllGather, "tp", algo, t, bytes,
                             gatherCalls + regathers, ag});
    double rs = tpGroup.time(CollectiveKind::ReduceScatter, bytes, eff, &algo);
    e.collectives.push_back(
        {CollectiveKind::ReduceScatter, "tp", algo, t, bytes, calls, rs});
  } else {
    double ar = tpGroup.time(CollectiveKind::AllReduce, bytes, eff, &algo);
    e.collectives.push_back(
        {CollectiveKind::AllReduce, "tp", algo, t, bytes, calls, ar});
  }
}

/// Scatter/gather (Narayanan et al. 2021, Section 4.1): each tp rank sends
/// 1/t of the activation over its own NIC, and the receivers all-gather it
/// over the node's links (unnecessary with sequence parallelism, whose
/// activations are already split). Forward activations and backward
/// gradients cross each of the v boundaries a micro-batch meets on this
/// rank.
void StepCoster::costPipelineTransfers() {
  double full = eb * tokens * h;
  double bytes = full / t;
  CollectiveGroup pair(graph, {0, dp * t});
  double p2p = pair.time(CollectiveKind::SendRecv, bytes, eff);
  // A rank sends and receives at once, so it spends one transfer time per
  // message in its busier direction: 2 m v on a middle rank, and
  // m (2v - 1) on the end ranks of a two-rank pipeline, which has no
  // middle.
  double calls = p == 2 ? m * (2.0 * v - 1) : 2.0 * m * v;
  e.collectives.push_back(
      {CollectiveKind::SendRecv, "pp", "p2p", 2, bytes, calls, p2p});
  double gather = 0;
  if (t > 1 && !c.sequenceParallel) {
    std::string algo;
    gather = tpGroup.time(CollectiveKind::AllGather, full, eff, &algo);
    e.collectives.push_back(
        {CollectiveKind::AllGather, "tp", algo, t, full, calls, gather});
  }
  double perTransfer = p2p + gather;
  e.ppCommS = calls * perTransfer;
  // GPipe's forwards stream, as do the interleaved schedule's chunks: a
  // transfer overlaps the next micro-batch's (or chunk's) compute in the
  // steady state, and only those that fill and drain the pipeline (p - 1
  // hops each way, per model chunk) wait. 1F1B streams only as far as its
  // stages differ: a stage's backward of micro-batch i waits for the next
  // stage's forward and backward of i and both transfers, with one forward
  // of its own in between, so with stages alike every transfer adds to the
  // step, and a stage faster than the slowest hides that much of its
  // transfers.
  double fillAndDrain = 2.0 * (p - 1) * v * perTransfer;
  double steady = 0;
  if (c.schedule == Schedule::OneFOneB && v == 1) {
    double slowest = 0, fastest = std::numeric_limits<double>::infinity();
    for (const RankCost &r : ranks) {
      slowest = std::max(slowest, r.perMicroBatch());
      fastest = std::min(fastest, r.perMicroBatch());
    }
    steady = m * std::max(0.0, calls / m * perTransfer - (slowest - fastest));
  }
  e.ppCommExposedS = params.overlapP2P
                         ? std::min(e.ppCommS, fillAndDrain + steady)
                         : e.ppCommS;
}

/// The bucketed collectives of the rank they take longest on, each
/// `timesPerStep` times, recorded for the report (per call: the mean
/// bucket).
Bucketed StepCoster::reportSlowestRank(CollectiveKind kind, double elementBytes,
                                       double timesPerStep) {
  Bucketed worst;
  for (const RankCost &r : ranks) {
    // The step phase's gathers go in model order, as one run.
    std::vector<double> stepOrder;
    GradientPiece inStep;
    llvm::ArrayRef<GradientPiece> pieces = r.gradients;
    if (kind == CollectiveKind::AllGather) {
      stepOrder = inStepOrder(r.gradients);
      inStep.tensors = stepOrder;
      pieces = inStep;
    }
    Bucketed rankBuckets = bucketed(dpGroup, kind, pieces, elementBytes,
                                    params.bucketBytes(), eff);
    if (rankBuckets.seconds > worst.seconds)
      worst = rankBuckets;
  }
  std::string algo;
  double perCall = worst.calls ? worst.bytes / worst.calls : 0;
  dpGroup.time(kind, perCall, eff, &algo);
  e.collectives.push_back({kind, "dp", algo, dp, perCall,
                           worst.calls * timesPerStep,
                           worst.calls ? worst.seconds / worst.calls : 0});
  return worst;
}

/// Data parallelism and ZeRO: the gradient reductions, the parameter
/// gathers, and what of them the backward pass does not hide.
void StepCoster::costDataParallel() {
  // ZeRO-0 all-reduces once per step, ZeRO-1 reduce-scatters once per
  // step, ZeRO-2/3 after every micro-batch's backward, into the gradient
  // shards they keep.
  double reductions = c.zero >= 2 ? m : 1;
  Bucketed reduction = reportSlowestRank(
      c.zero == 0 ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter,
      gradientBytes, reductions);
  double dpTime = reduction.seconds * reductions;
  // ZeRO-1/2 gather the updated parameter shards once per step. The
  // gathers need the optimizer's output: they cannot hide behind the
  // backward pass, but run into the next step, behind its first
  // micro-batch's forward (exec-overlap-communication).
  double afterStep =
      c.zero == 1 || c.zero == 2
          ? reportSlowestRank(CollectiveKind::AllGather, eb, 1).seconds
          : 0;
  e.dpCommS = dpTime + afterStep;
  // Gradient buckets reduce while a backward pass runs: the last one, or
  // (ZeRO-2/3) each backward run of a model chunk, whose reductions end
  // with it (their gradients are the run's own). A run's last layer's
  // gradients come when its compute ends, so their reduction shows
  // whatever else hides: with one layer a chunk, all of it.
  // ZeRO-0/1: the last bucket's gradients are final when backward ends.
  double perPass = 1, lastLayers = reduction.lastSeconds,
         hiding = busiest().bwd;
  if (c.zero >= 2) {
    perPass = double(m) * v;
    double chunkLayers =
        std::max<double>(1, double(c.layersOfRank(busiestRank, L).size()) / v);
    lastLayers = dpTime / perPass / chunkLayers;
    hiding = busiest().bwd / v * (chunkLayers - 1) / chunkLayers;
  }
  const bool overlap = params.overlapGradientReduction;
  e.dpCommExposedS =
      !overlap     ? dpTime + afterStep
      : c.zero < 3 ? perPass * std::max(lastLayers, dpTime / perPass - hiding) +
                         std::max(0.0, afterStep - busiest().fwd)
                   // ZeRO-3's reductions share the dp stream with the gathers:
                   // counted with them (costZero3Gathers), but for the last
                   // layer of each backward run.
                   : perPass * lastLayers;
  if (c.zero == 3)
    costZero3Gathers(overlap);
}

/// ZeRO-3: each layer's parameters are gathered before its forward and its
/// backward in every micro-batch, prefetched one layer ahead: what the
/// previous layer's compute does not cover is exposed. In backward the dp
/// stream also reduces the gradients of the layer before, one bucket (or
/// more) per layer. The dp group has a comm stream of its own, so with
/// tp > 1 a gather starts ahead of the previous layer's tp collectives
/// (exec-overlap-communication) and hides alike.
void StepCoster::costZero3Gathers(bool overlap) {
  double calls = 0;
  for (int64_t i : c.layersOfRank(busiestRank, L)) {
    const LayerCost &layer = layers[i];
    double ag = dpGroup.time(CollectiveKind::AllGather, eb * layer.params, eff);
    double rs = overlap ? bucketed(dpGroup, CollectiveKind::ReduceScatter,
                                   GradientPiece{layer.tensorParams},
                                   gradientBytes, params.bucketBytes(), eff)
                              .seconds
                        : 0;
    double backward = layer.backwardS + layer.recomputeS;
    e.dpCommS += 2 * m * ag;
    e.zero3GatherExposedS += m * (std::max(0.0, ag - layer.forwardS) +
                                  std::max(0.0, ag + rs - backward));
    calls += 2 * m;
  }
  double bytes = eb * layers.front().params;
  std::string algo;
  double ag = dpGroup.time(CollectiveKind::AllGather, bytes, eff, &algo);
  e.collectives.push_back(
      {CollectiveKind::AllGather, "dp", algo, dp, bytes, calls, ag});
  // The embedding, final norm and LM head are gathered too, with no layer
  // before them to hide behind: before their forward, and before their
  // backward but for the embedding tables, which no backward reads (unless
  // the LM head, tied on the same rank, reads the token table). Biases,
  // which no backward reads either, are a few vectors a layer: counted in
  // both.
  double outside = busiest().params;
  for (int64_t i : c.layersOfRank(busiestRank, L))
    outside -= layers[i].params;
  double tables = 0;
  if (busiestRank == 0)
    tables = std::max(
        0.0, double(profile.embeddingParams) / t -
                 (profile.headParams == 0 && p == 1 ? tiedParams : 0.0));
  auto gatherOutside = [&](double params, double calls) {
    if (params <= 0)
      return;
    ag = dpGroup.time(CollectiveKind::AllGather, eb * params, eff, &algo);
    e.collectives.push_back(
        {CollectiveKind::AllGather, "dp", algo, dp, eb * params, calls, ag});
    e.dpCommS += calls * ag;
    e.zero3GatherExposedS += calls * ag;
  };
  if (tables == 0) {
    gatherOutside(outside, 2.0 * m);
  } else {
    gatherOutside(outside, double(m));
    gatherOutside(outside - tables, double(m));
  }
}

/// A tied embedding's two copies (first and last stage) sum their
/// gradients once per step.
void StepCoster::costTiedEmbedding() {
  // ZeRO-1/2/3 sum the copies' gradient shards (reduced over dp first).
  double bytes = gradientBytes * tiedParams / (c.zero >= 1 ? dp : 1);
  CollectiveGroup ends(graph, {0, (p - 1) * dp * t});
  std::string algo;
  double tied = ends.time(CollectiveKind::AllReduce, bytes, eff, &algo);
  e.collectives.push_back(
      {CollectiveKind::AllReduce, "tied", algo, 2, bytes, 1, tied});
  e.dpCommS += tied;
  e.dpCommExposedS += tied;
}

/// The optimizer, then the step: m micro-batches of the busiest rank, the
/// pipeline's bubble, and the communication nothing hides.
void StepCoster::costStep() {
  // AdamW reads and writes parameters, gradients and states once.
  double stageParams = 0;
  for (const RankCost &r : ranks)
    stageParams = std::max(stageParams, r.params);
  double shard = c.zero >= 1 ? dp : 1;
  e.optimizerS = dev.memoryTime(
      2 * (eb + gradientBytes + optimizerStateBytes(eb)) * stageParams / shard);
  double slowest = busiest().perMicroBatch();
  e.forwardS = m * busiest().fwd;
  e.backwardS = m * busiest().bwd;
  e.recomputeS = m * busiest().recompute;
  e.tpCommS = m * busiest().tp;
  e.bubbleS = double(p - 1) / v * slowest;
  e.exposedCommS =
      e.tpCommS + e.ppCommExposedS + e.dpCommExposedS + e.zero3GatherExposedS;
  e.stepTimeS = m * slowest + e.bubbleS + e.ppCommExposedS + e.dpCommExposedS +
                e.zero3GatherExposedS + e.optimizerS;
  // The bubble's share of the step, as the simulator reports it (Narayanan
  // et al.'s (p-1)/(v m) is against the ideal time, and passes 100% when
  // m < p).
  e.bubbleFraction = e.bubbleS / e.stepTimeS;
}

/// FLOPs: forward, backward = 2 x forward, and recomputation.
void StepCoster::costFlops() {
  double forward = headFlops, recomputed = 0;
  for (const LayerCost &lc : layers) {
    forward += lc.forwardFlops;
    recomputed += lc.recomputeFlops;
  }
  // Per device and micro-batch of `tokens`; undo the tensor-parallel split.
  double scale = t * double(c.globalBatch()) * s / tokens;
  e.modelFlops = 3 * forward * scale;
  e.hardwareFlops = e.modelFlops + recomputed * scale;
  e.tokensPerS = double(c.globalBatch()) * s / e.stepTimeS;
  e.modelTflopsPerDevice = e.modelFlops / e.stepTimeS / e.devices / 1e12;
  e.hardwareTflopsPerDevice = e.hardwareFlops / e.stepTimeS / e.devices / 1e12;
  e.mfu = e.modelTflopsPerDevice * 1e12 / dev.peakFlops;
}

/// Memory on the device that needs the most.
void StepCoster::costMemory() {
  const bool tiedEmbedding = profile.headParams == 0;
  const bool keyValueGroup =
      llvm::any_of(profile.layers, [&](const LayerProfile &layer) {
        return layer.kvHeads && layer.kvHeads < t;
      });
  // With one data-parallel rank there is nothing to shard: the plan holds
  // no ZeRO state (exec-build-backward).
  const int64_t zero = dp > 1 ? c.zero : 0;
  for (auto [k, r] : llvm::enumerate(ranks)) {
    MemoryBreakdown mem;
    Communicators comms = communicatorsOf(c, k, tiedEmbedding, keyValueGroup);
    // Each direction sent in is half the directions: one boundary
    // activation (or its gradient) staged.
    comms.sendStagingBytes = double(comms.p2p / 2) * eb * tokens * h / sp;
    mem.runtime = runtimeReserveBytes(topo, params, comms);
    ModelStateBytes states = modelStateBytes(eb, gradientBytes, zero, dp);
    mem.parameters = states.parameters * r.params;
    mem.gradients = states.gradients * r.params;
    mem.optimizerStates = states.optimizerStates * r.params;
    mem.activations = r.kept + r.working;
    // The gathered activation of tp/sp collectives; under ZeRO 2 and 3,
    // which keep only gradient shards, the full gradients on their way to a
    // reduction (a bucket, or two layers', one reducing while the next is
    // computed); ZeRO-3's two prefetched layers. ZeRO 0 and 1 reduce the
    // gradients counted above where they lie (a reduce-scatter bucket goes
    // through the runtime's collective workspace, in its reserve).
    double reducing = zero >= 2 ? std::max(params.bucketBytes(),
                                           2 * gradientBytes * r.layerParamsMax)
                                : 0.0;
    mem.buffers = (t > 1 ? eb * tokens * h : 0) +
                  (dp > 1 ? std::min(gradientBytes * r.params, reducing) : 0) +
                  (zero == 3 ? 2 * eb * r.layerParamsMax : 0);
    if (mem.total() > e.memory.total())
      e.memory = mem;
  }
}

} // namespace

llvm::Expected<CostEstimate> estimateCost(const ModelProfile &profile,
                                          const TopologyGraph &graph,
                                          const ParallelConfig &c,
                                          const CostParams &params) {
  if (llvm::Error error = checkConfig(profile, graph.topology(), c))
    return std::move(error);
  return StepCoster(profile, graph, c, params).run();
}

} // namespace partita
