//===- CostModelTest.cpp - Hand-computed cost-model values ----------------===//

#include "compiler/CostModel/CostModel.h"
#include "compiler/CostModel/PipelineSchedule.h"
#include "compiler/Import/GraphBuilder.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <numeric>

using namespace partita;

namespace {

const std::string kExamples = PARTITA_EXAMPLES_DIR;

/// A GPT layer in Megatron's shape: h, 4h MLP, MHA, GELU, LayerNorm.
constexpr const char *kGpt = R"({
  "version": 1, "name": "gpt",
  "model": {"vocab_size": 256, "hidden_size": 64, "num_layers": 4,
            "num_heads": 4, "ffn_hidden_size": 256, "norm": "layer_norm",
            "activation": "gelu", "position_embedding": "learned",
            "max_position_embeddings": 32, "qkv_bias": true,
            "attn_out_bias": true, "mlp_bias": true, "tie_embeddings": true},
  "training": {"seq_len": 32, "global_batch": 16}})";

struct Fixture {
  mlir::MLIRContext context;
  ModelProfile profile;

  explicit Fixture(llvm::Expected<ModelSpec> spec) {
    EXPECT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
    mlir::OwningOpRef<mlir::ModuleOp> module = buildModelModule(*spec, context);
    module->walk([&](tfm::ModelOp model) { profile = profileModel(model); });
  }
};

/// The estimate for `strategy` completed on `topology`; its parallel
/// configuration lands in `config` when asked.
CostEstimate estimate(const ModelProfile &profile, const Topology &topology,
                      llvm::StringRef strategy, const CostParams &params = {},
                      ParallelConfig *config = nullptr) {
  TopologyGraph graph(topology);
  auto partial = parseParallelConfig(strategy);
  EXPECT_TRUE(bool(partial));
  auto completed =
      completeParallelConfig(*partial, topology.numDevices(),
                             profile.globalBatch, profile.layers.size());
  EXPECT_TRUE(bool(completed)) << llvm::toString(completed.takeError());
  if (config)
    *config = *completed;
  auto e = estimateCost(profile, graph, *completed, params);
  EXPECT_TRUE(bool(e)) << llvm::toString(e.takeError());
  return *e;
}

TEST(CostModel, FlopsFollowMegatronEquation3) {
  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  double B = 16, s = 32, l = 4, h = 64, V = 256;
  Topology node = *presetTopology("dgx-a100", 1);
  // Full recomputation as Megatron-LM runs it: 96 B s l h^2 (1 + s/6h +
  // V/16lh) (Narayanan et al. 2021, Eq. 3). Partita's skips each layer's
  // MLP output GEMM, 2 B s 4h h FLOPs. Without: forward + backward = 72 B s
  // l h^2 (1 + s/6h + V/12lh).
  CostParams megatron;
  megatron.recomputeOutputs = true;
  double equation3 =
      96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  CostEstimate rerun =
      estimate(f.profile, node, "dp=8,recompute=full", megatron);
  EXPECT_NEAR(rerun.hardwareFlops / equation3, 1.0, 1e-12);
  CostEstimate full = estimate(f.profile, node, "dp=8,recompute=full");
  EXPECT_NEAR(full.hardwareFlops / (equation3 - 8 * B * s * l * h * h), 1.0,
              1e-12);
  CostEstimate none = estimate(f.profile, node, "dp=8");
  EXPECT_NEAR(none.modelFlops / (72 * B * s * l * h * h *
                                 (1 + s / (6 * h) + V / (12 * l * h))),
              1.0, 1e-12);
  EXPECT_DOUBLE_EQ(none.hardwareFlops, none.modelFlops);
  EXPECT_DOUBLE_EQ(full.modelFlops, none.modelFlops);
}

TEST(CostModel, ActivationsFollowKorthikanti) {
  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  Topology node = *presetTopology("dgx-a100", 1);
  double s = 32, b = 2, h = 64, a = 4, V = 256, l = 4, t = 4;
  double logits = (2 + 4) * s * b * V / t;
  // Flash attention's log-sum-exp per query row and local head, f32.
  double lse = 4 * s * b * a / t;
  // Korthikanti et al. 2022, Table 2, without dropout: s b h (8 + 24/t)
  // bytes per layer with tensor parallelism, s b h 32/t with sequence
  // parallelism, 2 s b h (/t) with full recomputation plus one layer's set.
  CostEstimate tp = estimate(f.profile, node, "tp=4,dp=2,mbs=2");
  EXPECT_DOUBLE_EQ(tp.memory.activations,
                   l * (s * b * h * (8 + 24 / t) + lse) + logits);
  CostEstimate sp = estimate(f.profile, node, "tp=4,dp=2,mbs=2,sp=1");
  EXPECT_DOUBLE_EQ(sp.memory.activations,
                   l * (s * b * h * 32 / t + lse) + logits);
  CostEstimate full =
      estimate(f.profile, node, "tp=4,dp=2,mbs=2,sp=1,recompute=full");
  EXPECT_DOUBLE_EQ(full.memory.activations,
                   l * 2 * s * b * h / t + s * b * h * 32 / t + lse + logits);
}

TEST(CostModel, ZeroStagesDivideTheMixedPrecisionState) {
  // Llama-2-7B on 64 GPUs: 2 + 2 + 12 bytes per parameter (Rajbhandari et
  // al. 2020), each part divided by 64 from the stage that shards it;
  // ZeRO-1 reduces the full gradients into a shard of its own, as the
  // memory plan holds them (grad_shard).
  Fixture f(readModelSpecFile(kExamples + "/models/llama2-7b.json", {}));
  Topology cluster = *presetTopology("dgx-a100", 8);
  const double P = 6738415616.0;
  CostEstimate z0 = estimate(f.profile, cluster, "dp=64,zero=0");
  EXPECT_DOUBLE_EQ(z0.memory.parameters + z0.memory.gradients +
                       z0.memory.optimizerStates,
                   16 * P);
  CostEstimate z1 = estimate(f.profile, cluster, "dp=64,zero=1");
  EXPECT_DOUBLE_EQ(z1.memory.optimizerStates, 12 * P / 64);
  EXPECT_DOUBLE_EQ(z1.memory.gradients, 2 * P + 2 * P / 64);
  CostEstimate z2 = estimate(f.profile, cluster, "dp=64,zero=2");
  EXPECT_DOUBLE_EQ(z2.memory.gradients, 2 * P / 64);
  // With one data-parallel rank there is nothing to shard (the plan holds
  // no ZeRO state).
  CostEstimate single = estimate(f.profile, cluster, "dp=1,zero=1");
  EXPECT_DOUBLE_EQ(single.memory.gradients, 2 * P);
  EXPECT_DOUBLE_EQ(single.memory.optimizerStates, 12 * P);
  CostEstimate z3 = estimate(f.profile, cluster, "dp=64,zero=3");
  EXPECT_DOUBLE_EQ(z3.memory.parameters + z3.memory.gradients +
                       z3.memory.optimizerStates,
                   16 * P / 64);
}

TEST(CostModel, RuntimeMemoryCountsTheCommunicatorsOfEachStage) {
  // The GPT ties its embedding. pp=4, dp=2 on 8 GPUs: the first stage
  // reduces over dp, the world and the tied pair, and talks to one
  // neighbour both ways; a middle stage has no tied group and two
  // neighbours. The interleaved schedule joins the ends too.
  ParallelConfig c;
  c.dp = 2;
  c.pp = 4;
  EXPECT_EQ(communicatorsOf(c, 0, true, false).collective, 3);
  EXPECT_EQ(communicatorsOf(c, 0, true, false).p2p, 2);
  EXPECT_EQ(communicatorsOf(c, 1, true, false).collective, 2);
  EXPECT_EQ(communicatorsOf(c, 1, true, false).p2p, 4);
  c.vpp = 2;
  EXPECT_EQ(communicatorsOf(c, 0, true, false).p2p, 4);
  // tp_kv exists only with tensor parallelism.
  ParallelConfig tp, dp;
  tp.tp = dp.dp = 8;
  EXPECT_EQ(communicatorsOf(tp, 0, false, true).collective, 3);
  EXPECT_EQ(communicatorsOf(dp, 0, false, true).collective, 2);

  Topology gpus = *presetTopology("dgx-a100", 1);
  Topology cpus = *presetTopology("cpu", 8);
  Communicators n{3, 2};
  EXPECT_DOUBLE_EQ(runtimeReserveBytes(gpus, {}, n),
                   kGiB * (3 + 3 * 0.5 + 2 / 16.0));
  EXPECT_DOUBLE_EQ(runtimeReserveBytes(cpus, {}, n), 0);
  CostParams set = *parseCostParams("runtime_gib=2,nccl_p2p_gib=1");
  EXPECT_DOUBLE_EQ(runtimeReserveBytes(cpus, set, n), kGiB * (2 + 2));

  // The estimate adds it to the stage that needs the most.
  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  CostEstimate e = estimate(f.profile, gpus, "dp=2,pp=4");
  EXPECT_GE(e.memory.runtime, kGiB * (3 + 2 * 0.5 + 4 / 16.0));
  EXPECT_LE(e.memory.runtime, kGiB * (3 + 3 * 0.5 + 4 / 16.0));
  EXPECT_DOUBLE_EQ(e.memory.total(), e.memory.parameters + e.memory.gradients +
                                         e.memory.optimizerStates +
                                         e.memory.activations +
                                         e.memory.buffers + e.memory.runtime);
}

TEST(CostModel, PipelineBubble) {
  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  Topology node = *presetTopology("dgx-a100", 1);
  // (p - 1) / v micro-batch times of the slowest stage: pp=2, dp=4, mbs=1
  // gives m = 16 / 4 = 4 micro-batches, and interleaving halves the bubble.
  CostEstimate plain = estimate(f.profile, node, "pp=2,dp=4");
  CostEstimate interleaved = estimate(f.profile, node, "pp=2,dp=4,vpp=2");
  double perMicroBatch =
      (plain.forwardS + plain.backwardS + plain.recomputeS + plain.tpCommS) / 4;
  EXPECT_NEAR(plain.bubbleS, perMicroBatch, 1e-9 * perMicroBatch);
  EXPECT_NEAR(interleaved.bubbleS, plain.bubbleS / 2, 1e-9 * plain.bubbleS);
  // The fraction is the bubble's share of the step, under 1 even with fewer
  // micro-batches than stages: pp=4 with one micro-batch idles each stage
  // for 3 of its 4 micro-batch times (against the ideal time, 300%).
  EXPECT_DOUBLE_EQ(plain.bubbleFraction, plain.bubbleS / plain.stepTimeS);
  CostEstimate deep = estimate(f.profile, node, "pp=4,tp=2,mbs=16");
  EXPECT_GT(deep.bubbleFraction, 0.6);
  EXPECT_LT(deep.bubbleFraction, 1.0);
}

TEST(CostModel, PipelineTransfersHideOnlyWhereTheScheduleStreams) {
  // Stages on two nodes joined by a slow network: a transfer takes longer
  // than any difference between the stages.
  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  Topology slow = *presetTopology("dgx-a100", 2);
  slow.interNode.bytesPerSPerNic = 1e6;
  // m = 16 / dp = 8 micro-batches, one transfer each on either rank of a
  // two-stage pipeline.
  CostEstimate gpipe =
      estimate(f.profile, slow, "pp=2,tp=4,dp=2,schedule=gpipe");
  CostEstimate oneF = estimate(f.profile, slow, "pp=2,tp=4,dp=2,schedule=1f1b");
  double perTransfer = oneF.ppCommS / 8;
  EXPECT_GT(perTransfer, 1e-3);
  // GPipe's forwards stream: only filling and draining the pipeline waits.
  EXPECT_NEAR(gpipe.ppCommExposedS, 2 * perTransfer, 1e-9);
  // 1F1B's stages wait for each other's transfers every micro-batch.
  EXPECT_NEAR(oneF.ppCommExposedS, oneF.ppCommS, 1e-9);
  EXPECT_NEAR(oneF.stepTimeS - gpipe.stepTimeS,
              oneF.ppCommS - gpipe.ppCommExposedS +
                  (oneF.bubbleS - gpipe.bubbleS),
              1e-6 * oneF.stepTimeS);
}

TEST(CostModel, MicroBatchesInFlightFollowTheSchedule) {
  auto config = [](int64_t m, int64_t p, int64_t v, Schedule schedule) {
    ParallelConfig c;
    c.numMicroBatches = m;
    c.pp = p;
    c.vpp = v;
    c.schedule = schedule;
    return c;
  };
  // Each chunk's most micro-batches in flight at any moment: those of the
  // fullest moments, chunk by chunk.
  auto chunkMicroBatchesInFlight = [](const ParallelConfig &c, int64_t rank) {
    std::vector<int64_t> most(c.vpp, 0);
    for (const std::vector<int64_t> &moment : fullestMoments(c, rank))
      for (int64_t k = 0; k < c.vpp; ++k)
        most[k] = std::max(most[k], moment[k]);
    return most;
  };
  // 1F1B: the warm-up's p - k - 1 forwards and one more; GPipe: all m.
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_EQ(chunkMicroBatchesInFlight(config(8, 4, 1, Schedule::OneFOneB), k),
              std::vector<int64_t>{4 - k});
    EXPECT_EQ(chunkMicroBatchesInFlight(config(2, 4, 1, Schedule::OneFOneB), k),
              std::vector<int64_t>{std::min<int64_t>(4 - k, 2)});
    EXPECT_EQ(chunkMicroBatchesInFlight(config(8, 4, 2, Schedule::GPipe), k),
              (std::vector<int64_t>{8, 8}));
  }
  // Interleaved, p = 8, v = 6, m = 16: the first rank's 54 warm-up forwards
  // fill its first three chunks with all 16 micro-batches before their
  // first backward; the last rank's warm-up is 40 forwards. Each chunk's
  // most at some moment sum to 72 chunk copies on the first rank, but never
  // more than 55 are held at once (the warm-up and one more forward): 9.2
  // micro-batches' worth of its layers, Narayanan et al.'s 8 (1 + 7/48).
  ParallelConfig interleaved = config(16, 8, 6, Schedule::Interleaved);
  EXPECT_EQ(chunkMicroBatchesInFlight(interleaved, 0),
            (std::vector<int64_t>{16, 16, 16, 8, 8, 8}));
  EXPECT_EQ(chunkMicroBatchesInFlight(interleaved, 7),
            (std::vector<int64_t>{16, 16, 9, 8, 8, 1}));
  auto fullest = [&](int64_t rank) {
    int64_t most = 0;
    for (const std::vector<int64_t> &moment : fullestMoments(interleaved, rank))
      most = std::max(
          most, std::accumulate(moment.begin(), moment.end(), int64_t(0)));
    return most;
  };
  EXPECT_EQ(fullest(0), 55);
  EXPECT_EQ(fullest(7), 41);
  // No moment covers another, and 1F1B has one: its warm-up and one more.
  for (const auto &a : fullestMoments(interleaved, 3))
    for (const auto &b : fullestMoments(interleaved, 3))
      EXPECT_TRUE(a == b ||
                  llvm::any_of(llvm::seq<size_t>(0, 6),
                               [&](size_t k) { return a[k] < b[k]; }));
  EXPECT_EQ(fullestMoments(config(8, 4, 1, Schedule::OneFOneB), 1),
            (std::vector<std::vector<int64_t>>{{3}}));
  // Every run of every chunk once forward and once backward.
  std::vector<PipelineRun> runs = pipelineRuns(interleaved, 3);
  EXPECT_EQ(runs.size(), size_t(2 * 16 * 6));
  EXPECT_EQ(llvm::count_if(runs,
                           [](const PipelineRun &r) {
                             return r.forward && r.chunk == 5 * 8 + 3 &&
                                    r.microBatch == 15;
                           }),
            1);
}

/// The GPT of kGpt with a parallel residual (GPT-NeoX's block).
std::string parallelResidualGpt() {
  std::string parallel = kGpt;
  parallel.replace(parallel.find(R"("tie_embeddings")"), 0,
                   R"("parallel_residual": true, )");
  return parallel;
}

TEST(CostModel, ParallelResidualHidesTheAttentionReduction) {
  Fixture seq(readModelSpec(kGpt, "gpt.json", "", {}));
  Fixture par(readModelSpec(parallelResidualGpt(), "neox.json", "", {}));
  EXPECT_TRUE(seq.profile.layers[0].parallelBranches.empty());
  // The attention branch (q, k, v, out and the core), then the MLP (up,
  // down).
  const auto &branches = par.profile.layers[0].parallelBranches;
  ASSERT_EQ(branches.size(), 2u);
  EXPECT_TRUE(branches[0].attention);
  EXPECT_EQ(branches[0].gemms.size(), 4u);
  EXPECT_FALSE(branches[1].attention);
  EXPECT_EQ(branches[1].gemms.size(), 2u);

  // tp=4: in every layer the attention's all-reduce runs during the MLP's
  // forward, and the MLP input's gradient all-reduce during the attention's
  // backward, each hiding at most its own time.
  Topology node = *presetTopology("dgx-a100", 1);
  ParallelConfig config;
  CostEstimate s = estimate(seq.profile, node, "tp=4,dp=2");
  CostEstimate p = estimate(par.profile, node, "tp=4,dp=2", {}, &config);
  double allReduce = 0;
  for (const CollectiveCost &c : p.collectives)
    if (c.group == "tp" && c.kind == CollectiveKind::AllReduce)
      allReduce = c.timePerCallS;
  ASSERT_GT(allReduce, 0);
  double layers = double(par.profile.layers.size()),
         microBatches = double(config.numMicroBatches);
  EXPECT_LT(p.tpCommS, s.tpCommS);
  EXPECT_LE(s.tpCommS - p.tpCommS,
            2 * layers * microBatches * allReduce * (1 + 1e-12));
  // Without the overlap (overlap_tp=0), the parallel residual costs as much
  // as the sequential block.
  auto sync = parseCostParams("overlap_tp=0");
  ASSERT_TRUE(bool(sync));
  CostEstimate unhidden = estimate(par.profile, node, "tp=4,dp=2", *sync);
  EXPECT_DOUBLE_EQ(unhidden.tpCommS, s.tpCommS);
}

TEST(CostModel, FullRecomputationSkipsWhatTheBackwardNeverReads) {
  Fixture seq(readModelSpec(kGpt, "gpt.json", "", {}));
  Fixture par(readModelSpec(parallelResidualGpt(), "neox.json", "", {}));
  // A sequential block's MLP output projection adds only into the block's
  // output; a parallel residual's two output projections both do.
  auto unread = [](const LayerProfile &layer) {
    std::vector<std::string> names;
    for (const GemmProfile &g : layer.gemms)
      if (g.unreadByBackward)
        names.push_back(g.name);
    return names;
  };
  EXPECT_EQ(unread(seq.profile.layers[0]),
            std::vector<std::string>({"mlp.down"}));
  EXPECT_EQ(unread(par.profile.layers[0]),
            std::vector<std::string>({"attn.out", "mlp.down"}));
  // So is the residual addition after them: two inputs and a result of
  // the hidden width (for the parallel residual, one addition of three).
  const LayerProfile &seqLayer = seq.profile.layers[0];
  double hidden = double(seq.profile.hidden);
  EXPECT_DOUBLE_EQ(seqLayer.unreadBoundaryTraffic, 3 * hidden);
  EXPECT_DOUBLE_EQ(seqLayer.unreadShardedTraffic, 0);
  EXPECT_DOUBLE_EQ(par.profile.layers[0].unreadBoundaryTraffic, 4 * hidden);

  // Megatron-LM's recomputation (recompute_outputs=1) re-runs them and
  // their reductions: one all-reduce, and the MLP output GEMM's and the
  // addition's forward time more per layer and micro-batch (elementwise
  // time goes as the bytes moved).
  Topology node = *presetTopology("dgx-a100", 1);
  ParallelConfig config;
  auto rerun = parseCostParams("recompute_outputs=1");
  ASSERT_TRUE(bool(rerun));
  CostEstimate skips =
      estimate(seq.profile, node, "tp=4,dp=2,recompute=full", {}, &config);
  CostEstimate reruns =
      estimate(seq.profile, node, "tp=4,dp=2,recompute=full", *rerun);
  auto allReduces = [](const CostEstimate &e) -> const CollectiveCost & {
    return *llvm::find_if(e.collectives, [](const CollectiveCost &c) {
      return c.group == "tp" && c.kind == CollectiveKind::AllReduce;
    });
  };
  double perMicroBatch =
      double(seq.profile.layers.size()) * double(config.numMicroBatches);
  EXPECT_DOUBLE_EQ(allReduces(reruns).callsPerStep -
                       allReduces(skips).callsPerStep,
                   perMicroBatch);
  double additionS =
      skips.layerOps.at("elementwise").forwardTimeS *
      seqLayer.unreadBoundaryTraffic /
      (seqLayer.boundaryTraffic + seqLayer.shardedTraffic / config.tp);
  EXPECT_NEAR(reruns.recomputeS - skips.recomputeS,
              (skips.layerOps.at("mlp.down").forwardTimeS + additionS) *
                  perMicroBatch,
              1e-9 * reruns.recomputeS);
  EXPECT_NEAR(reruns.tpCommS - skips.tpCommS,
              allReduces(skips).timePerCallS * perMicroBatch,
              1e-9 * reruns.tpCommS);
  EXPECT_LT(skips.stepTimeS, reruns.stepTimeS);
}

TEST(CostModel, QueryAndKeyNormsStayWithTheirHeads) {
  const char *llama = R"({
    "version": 1, "name": "llama",
    "model": {"vocab_size": 256, "hidden_size": 64, "num_layers": 2,
              "num_heads": 4, "num_kv_heads": 2, "ffn_hidden_size": 128,
              "norm": "rms_norm", "activation": "swiglu",
              "position_embedding": "rope"QK},
    "training": {"seq_len": 32, "global_batch": 16}})";
  std::string plain = llama, qk = llama;
  plain.replace(plain.find("QK"), 2, "");
  qk.replace(qk.find("QK"), 2, R"(, "qk_norm": true)");
  Fixture without(readModelSpec(plain, "llama.json", "", {}));
  Fixture with(readModelSpec(qk, "qwen.json", "", {}));
  const LayerProfile &a = without.profile.layers[0],
                     &b = with.profile.layers[0];
  // Each norm reads and writes its projection's width (q: 64, k: 32), on
  // this rank's heads; it keeps its input for the backward, and its weight
  // of one head (16) is replicated. The key projection still counts as a
  // key/value GEMM through its norm.
  double heads = 64 + 32;
  EXPECT_DOUBLE_EQ(b.shardedTraffic - a.shardedTraffic, 2 * heads);
  EXPECT_DOUBLE_EQ(b.boundaryTraffic, a.boundaryTraffic);
  EXPECT_DOUBLE_EQ(b.savedSharded - a.savedSharded, heads);
  EXPECT_DOUBLE_EQ(b.savedBoundary, a.savedBoundary);
  EXPECT_EQ(b.replicatedParams - a.replicatedParams, 2 * 16);
  EXPECT_EQ(b.keyValueParams, a.keyValueParams);
  EXPECT_EQ(with.profile.numParameters - without.profile.numParameters,
            2 * 2 * 16);
}

TEST(CostModel, GemmEfficiencyOverrideReplacesTheClosedForm) {
  Fixture f(readModelSpecFile(kExamples + "/models/llama3-8b.json", {}));
  TopologyGraph graph(*presetTopology("dgx-h100", 1));
  ParallelConfig config =
      *completeParallelConfig(*parseParallelConfig("dp=8"), 8,
                              f.profile.globalBatch, f.profile.layers.size());
  CostParams params;
  CostEstimate closedForm = *estimateCost(f.profile, graph, config, params);
  // Half the closed form's efficiency at every shape: GEMMs that are bound
  // by math take twice as long; the attention core is no GEMM.
  params.gemmEfficiencyFn = [&](double m, double n, double k) {
    double d0 = params.gemmHalfDim;
    return 0.5 * params.gemmEfficiency * m / (m + d0) * n / (n + d0) * k /
           (k + d0);
  };
  params.overrides = {"half"};
  CostEstimate halved = *estimateCost(f.profile, graph, config, params);
  EXPECT_NEAR(halved.layerOps.at("attn.q").forwardTimeS /
                  closedForm.layerOps.at("attn.q").forwardTimeS,
              2.0, 1e-9);
  EXPECT_DOUBLE_EQ(halved.layerOps.at("attention").forwardTimeS,
                   closedForm.layerOps.at("attention").forwardTimeS);
  EXPECT_EQ(halved.costOverrides, std::vector<std::string>{"half"});
}

TEST(CostModel, StrategyErrorsNameTheConstraint) {
  auto check = [](llvm::StringRef text, int64_t devices, llvm::StringRef want) {
    std::string message;
    auto partial = parseParallelConfig(text);
    if (!partial) {
      message = llvm::toString(partial.takeError());
    } else {
      auto c = completeParallelConfig(*partial, devices, 16, 4);
      message = c ? "" : llvm::toString(c.takeError());
    }
    EXPECT_NE(message.find(want), std::string::npos) << message;
  };
  check("tp=3", 8, "tp * pp = 3 does not divide the 8 devices");
  check("dp=16,tp=2", 8, "dp * tp * pp = 32 exceeds the 8 devices");
  check("dp=8,mbs=4", 8, "dp * mbs = 32 does not divide the global batch");
  check("pp=3,dp=1", 8, "pp * vpp = 3 does not divide the 4 layers");
  check("vpp=2", 8, "schedule=interleaved needs pp > 1");
  check("pp=2,vpp=2,schedule=1f1b", 8, "vpp=2 needs schedule=interleaved");
  check("sp=1", 8, "sp=1 needs tp > 1");
  check("zero=4", 8, "zero=4: expected an integer from 0 to 3");
  check("recompute=some", 8,
        "recompute=some: expected none, selective or "
        "full");
  check("tpp=2", 8, "unknown key 'tpp'");

  Fixture f(readModelSpec(kGpt, "gpt.json", "", {}));
  Topology node = *presetTopology("dgx-a100", 1);
  TopologyGraph graph(node);
  ParallelConfig c;
  c.tp = 8;
  std::string message =
      llvm::toString(estimateCost(f.profile, graph, c).takeError());
  EXPECT_EQ(message, "tp=8 does not divide the 4 attention heads");
}

TEST(CostModel, ParallelConfigText) {
  auto partial = parseParallelConfig(
      "dp=64, tp=8,pp=2,vpp=1,zero=1,mbs=1,recompute=selective,sp=1,"
      "schedule=1f1b");
  ASSERT_TRUE(bool(partial));
  auto c = completeParallelConfig(*partial, 1024, 1024, 32);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->numMicroBatches, 16);
  EXPECT_EQ(c->str(), "dp=64,tp=8,pp=2,vpp=1,zero=1,mbs=1,recompute=selective,"
                      "sp=1,schedule=1f1b");
}

} // namespace
