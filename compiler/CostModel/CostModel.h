//===- CostModel.h - Analytical cost of a parallel plan ---------*- C++ -*-===//
//
// Closed-form estimates of one training step of a profiled model under a
// ParallelConfig on a topology: FLOPs, time (roofline compute, alpha-beta
// collectives over the topology graph, pipeline bubble, overlap) and memory
// per device. Every formula and its source is in docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_COSTMODEL_COSTMODEL_H
#define PARTITA_COMPILER_COSTMODEL_COSTMODEL_H

#include "compiler/CostModel/ModelProfile.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "compiler/Topology/TopologyGraph.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace partita {

/// Physical efficiencies: the only parameters calibrated against
/// measurements (docs/cost-model.md, "Calibration").
struct CostParams {
  /// Fraction of peak a large GEMM reaches.
  double gemmEfficiency = 0.74;
  /// GEMM efficiency falls as d / (d + gemmHalfDim) in each of m, n, k.
  double gemmHalfDim = 64;
  /// Fraction of peak of the (flash-style) attention core.
  double attentionEfficiency = 0.55;
  /// Fraction of HBM bandwidth memory-bound kernels reach.
  double hbmEfficiency = 0.70;
  /// Fraction of the link bandwidth a collective reaches (bus bandwidth).
  double collectiveEfficiency = 0.70;
  /// Bytes per gradient element held and reduced over dp; 4 also makes a
  /// bf16 plan's gradients f32 (gradientDtype()).
  double gradientBytes = 2;
  /// Largest bucket of data-parallel collectives in MiB, as
  /// exec-overlap-communication forms them (PyTorch DDP's default). At
  /// large data-parallel widths, where each call pays the ring's latency
  /// once a rank, larger buckets pay off (Megatron-LM scales its buckets
  /// with the width).
  double bucketMb = 25;
  double bucketBytes() const { return bucketMb * 1048576.0; }
  /// exec-build-backward's gradient-dtype for the gradients counted.
  const char *gradientDtype() const {
    return gradientBytes == 4 ? "f32" : "param";
  }
  /// Data-parallel gradient reduction overlaps the last backward pass.
  bool overlapGradientReduction = true;
  /// Pipeline sends and receives overlap compute in the steady state.
  bool overlapP2P = true;
  /// A parallel residual's tensor-parallel collectives overlap the other
  /// branch (dist-overlap-collectives).
  bool overlapTensorParallel = true;
  /// Flash-style attention (scores never leave on-chip memory); otherwise
  /// the score matrix is written, softmaxed and read back (Megatron-LM 2021).
  bool flashAttention = true;
  /// A full recomputation forms the block's output GEMMs again, whose
  /// products the backward never reads, as Megatron-LM does; Partita's
  /// plans skip them (exec-build-backward), the default.
  bool recomputeOutputs = false;
  /// Device memory the runtime holds outside the plan's buffers, in GiB:
  /// the CUDA context with its kernels and library handles, and the
  /// runtime's workspaces; per NCCL communicator that carries collectives;
  /// per pipeline direction's two-rank communicator. Unset: the device's
  /// defaults (runtimeReserveBytes).
  std::optional<double> runtimeGib, ncclCollectiveGib, ncclP2PGib;
  /// Replaces the closed-form GEMM efficiency (gemmEfficiency scaled by
  /// gemmHalfDim) with, say, a table measured on the user's GPU; set by
  /// cost-model overrides (passes/SearchExtensions.h).
  std::function<double(double m, double n, double k)> gemmEfficiencyFn;
  /// Names of the overrides applied, for the reports.
  std::vector<std::string> overrides;

  /// The keys and values as "key=value,...", the form parseCostParams reads.
  std::string str() const;
};

/// Overrides the defaults with "gemm_efficiency=0.8,attention=unfused,...";
/// errors name the key.
llvm::Expected<CostParams> parseCostParams(llvm::StringRef text);
/// Overrides `base` with `text`, as above.
llvm::Expected<CostParams> parseCostParams(llvm::StringRef text,
                                           const CostParams &base);
/// The parameters for `topology`: the defaults, the efficiencies measured
/// on it (its calibration) over them, and `text` (--cost-params) over those.
llvm::Expected<CostParams> costParamsFor(const Topology &topology,
                                         llvm::StringRef text);

/// One device's speed: roofline times of GEMMs, attention and memory-bound
/// kernels under the calibrated efficiencies. The cost model and the plan
/// simulator both time work with it.
struct DeviceRoofline {
  double peakFlops, hbmBytesPerS;
  const CostParams &params;

  /// Fraction of peak an m x n x k GEMM reaches.
  double gemmEfficiency(double m, double n, double k) const;
  /// The slower of the math and the operand traffic.
  double gemmTime(double m, double n, double k, double elementBytes) const;
  double memoryTime(double bytes) const;
  /// Forward attention core of `batchHeads` heads over s queries and
  /// `context` keys each (the full square, as Megatron-LM counts it).
  double attentionTime(double batchHeads, double s, double context,
                       double headDim, double elementBytes) const;
};

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  SendRecv,
  Broadcast
};
llvm::StringRef toString(CollectiveKind kind);

/// The ranks of one communicator and what the topology offers them.
class CollectiveGroup {
public:
  CollectiveGroup() = default;
  /// `ranks`, and `concurrent` - 1 groups like it, each `shift` ranks on
  /// from the one before, that run the same collectives at the same time
  /// (a stage's dp groups, one per tp rank): those on the same nodes share
  /// these nodes' links with it.
  CollectiveGroup(const TopologyGraph &graph, std::vector<int64_t> ranks,
                  int64_t concurrent = 1, int64_t shift = 0);

  int64_t size() const { return static_cast<int64_t>(ranks.size()); }
  bool intraNode() const { return flat.intraNode; }
  /// Time of one collective moving `bytes` (the full buffer: the input of
  /// an all-reduce or reduce-scatter, the output of an all-gather) and the
  /// algorithm chosen: ring, hierarchical (intra-node then inter-node),
  /// tree (all-reduce) or pat (all-gather and reduce-scatter over one rank
  /// a node), whichever is fastest.
  double time(CollectiveKind kind, double bytes, double efficiency,
              std::string *algorithm = nullptr) const;

  std::vector<int64_t> ranks;
  /// CPU ranks run MPI's collectives as rings (plan-run asks OpenMPI for
  /// ring all-reduces): none of NCCL's hierarchical, tree or PAT.
  bool ringOnly = false;
  RingCost flat;
  /// Hierarchical decomposition, when the group spans nodes with more than
  /// one rank in each: rings inside the nodes and concurrent rings across.
  bool hierarchical = false;
  int64_t perNode = 1, numNodes = 1;
  RingCost intra, inter;
};

/// One row of the per-layer table (per device, per micro-batch).
struct OpClassCost {
  double forwardFlops = 0;
  double forwardTimeS = 0;
  double backwardTimeS = 0;
};

struct CollectiveCost {
  CollectiveKind kind;
  std::string group; // "tp", "dp", "pp", ...
  std::string algorithm;
  int64_t groupSize = 0;
  double bytesPerCall = 0;
  double callsPerStep = 0;
  double timePerCallS = 0;
  double totalTimeS() const { return timePerCallS * callsPerStep; }
};

/// Bytes of optimizer state per parameter: Adam's two f32 moments, and,
/// when training below f32, an f32 master copy of the weights
/// (exec-build-backward lays them out so).
inline double optimizerStateBytes(double elementBytes) {
  return elementBytes >= 4 ? 8.0 : 12.0;
}

/// Bytes per parameter of the model states a device holds under ZeRO stage
/// `zero` over `dp` ranks, as the plan lays them out: ZeRO 1 divides the
/// optimizer state and adds the shard that the full gradients reduce into,
/// ZeRO 2 keeps only that shard, ZeRO 3 also divides the parameters. With
/// one data-parallel rank nothing is sharded (exec-build-backward).
struct ModelStateBytes {
  double parameters = 0, gradients = 0, optimizerStates = 0;
  double total() const { return parameters + gradients + optimizerStates; }
};
inline ModelStateBytes modelStateBytes(double elementBytes,
                                       double gradientBytes, int64_t zero,
                                       int64_t dp) {
  if (dp <= 1)
    zero = 0;
  double shard = 1.0 / double(dp);
  ModelStateBytes b;
  b.parameters = elementBytes * (zero >= 3 ? shard : 1.0);
  b.gradients = gradientBytes * (zero >= 2   ? shard
                                 : zero == 1 ? 1.0 + shard
                                             : 1.0);
  b.optimizerStates =
      optimizerStateBytes(elementBytes) * (zero >= 1 ? shard : 1.0);
  return b;
}

struct MemoryBreakdown {
  double parameters = 0, gradients = 0, optimizerStates = 0, activations = 0,
         buffers = 0;
  /// What the runtime holds outside the plan's buffers (runtimeReserveBytes).
  double runtime = 0;
  double total() const {
    return parameters + gradients + optimizerStates + activations + buffers +
           runtime;
  }
};

/// The NCCL communicators one rank uses: groups of more than one rank that
/// carry collectives, and pipeline directions (a two-rank communicator
/// each, docs/gpu.md); and the staging copies its sends read, one of the
/// largest message per direction it sends in.
struct Communicators {
  int64_t collective = 0, p2p = 0;
  double sendStagingBytes = 0;
};

/// The communicators the ranks of pipeline stage `stage` use under `c`:
/// tp, dp and the world's gradient-norm reduction where they span more
/// than one rank, the tied embedding's first-and-last-stage group, tp_kv
/// where tp exceeds the key/value heads, and one per direction to each
/// pipeline neighbour that messages flow to or from.
Communicators communicatorsOf(const ParallelConfig &c, int64_t stage,
                              bool tiedEmbedding, bool keyValueGroup);

/// Device memory one rank's runtime holds outside the plan's buffers:
/// params.runtimeGib, plus the NCCL communicators' buffers and the send
/// staging copies. Unset
/// parameters take the device's defaults: 1 GiB, 0.5 GiB per collective
/// communicator and 1/16 GiB per pipeline direction on GPUs; nothing on CPU
/// ranks, whose messages go over MPI in host memory.
double runtimeReserveBytes(const Topology &topology, const CostParams &params,
                           Communicators communicators);

struct CostEstimate {
  ParallelConfig config;
  std::string topologyName;
  /// CostParams::overrides of the parameters it was costed with.
  std::vector<std::string> costOverrides;
  int64_t devices = 0;
  // FLOPs of one step, all devices: model (forward + backward) and hardware
  // (with recomputation).
  double modelFlops = 0, hardwareFlops = 0;
  // Per device, one micro-batch, for one layer of the heaviest stage.
  std::map<std::string, OpClassCost> layerOps;
  // Seconds per step.
  double forwardS = 0, backwardS = 0, recomputeS = 0, bubbleS = 0, tpCommS = 0,
         ppCommS = 0, ppCommExposedS = 0, dpCommS = 0, dpCommExposedS = 0,
         zero3GatherExposedS = 0, optimizerS = 0;
  double exposedCommS = 0;
  double stepTimeS = 0;
  double bubbleFraction = 0; // bubbleS / stepTimeS
  double tokensPerS = 0;
  double modelTflopsPerDevice = 0, hardwareTflopsPerDevice = 0, mfu = 0;
  std::vector<CollectiveCost> collectives;
  MemoryBreakdown memory; // the device with the largest total
  double deviceMemoryBytes = 0;
  bool fits() const { return memory.total() <= deviceMemoryBytes; }
};

/// Costs `config` for `profile` on the graph's topology. Errors name the
/// constraint the configuration breaks (heads not divisible by tp, ...).
llvm::Expected<CostEstimate> estimateCost(const ModelProfile &profile,
                                          const TopologyGraph &graph,
                                          const ParallelConfig &config,
                                          const CostParams &params = {});

} // namespace partita

#endif // PARTITA_COMPILER_COSTMODEL_COSTMODEL_H
