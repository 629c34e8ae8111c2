//===- SearchTest.cpp - Stage cuts and the strategy search ----------------===//

#include "compiler/Import/GraphBuilder.h"
#include "compiler/Search/StrategySearch.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <random>

using namespace partita;

namespace {

double maxLoad(const std::vector<double> &costs, double first, double last,
               const std::vector<int64_t> &cut) {
  double worst = 0;
  size_t i = 0;
  for (size_t k = 0; k < cut.size(); ++k) {
    double load = k == 0 ? first : 0;
    for (int64_t j = 0; j < cut[k]; ++j)
      load += costs[i++];
    if (k + 1 == cut.size())
      load += last;
    worst = std::max(worst, load);
  }
  return worst;
}

/// Every way to cut n layers into `stages` non-empty contiguous stages.
double bruteForce(const std::vector<double> &costs, double first, double last,
                  int64_t stages) {
  int64_t n = costs.size();
  double best = INFINITY;
  std::vector<int64_t> cut(stages);
  std::function<void(int64_t, int64_t)> place = [&](int64_t k, int64_t left) {
    if (k == stages - 1) {
      cut[k] = left;
      best = std::min(best, maxLoad(costs, first, last, cut));
      return;
    }
    for (int64_t take = 1; take <= left - (stages - 1 - k); ++take) {
      cut[k] = take;
      place(k + 1, left - take);
    }
  };
  place(0, n);
  return best;
}

TEST(StageCut, OptimalOnSmallCases) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t n = 1 + rng() % 10;
    int64_t stages = 1 + rng() % n;
    std::vector<double> costs(n);
    for (double &c : costs)
      c = cost(rng);
    double first = (rng() % 2) ? cost(rng) : 0;
    double last = (rng() % 2) ? 2 * cost(rng) : 0;
    std::vector<int64_t> cut = balancedStageCut(costs, first, last, stages);
    ASSERT_EQ(static_cast<int64_t>(cut.size()), stages);
    int64_t total = 0;
    for (int64_t c : cut) {
      EXPECT_GE(c, 1);
      total += c;
    }
    EXPECT_EQ(total, n);
    EXPECT_NEAR(maxLoad(costs, first, last, cut),
                bruteForce(costs, first, last, stages), 1e-9)
        << "trial " << trial;
  }
}

TEST(StageCut, HeavyHeadGetsFewerLayers) {
  // Eight equal layers and an LM head worth three: the last stage takes
  // fewer layers.
  std::vector<double> costs(8, 1.0);
  std::vector<int64_t> cut = balancedStageCut(costs, 0, 3, 2);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_LT(cut[1], cut[0]);
  EXPECT_DOUBLE_EQ(maxLoad(costs, 0, 3, cut), 6.0);
}

struct Fixture {
  mlir::MLIRContext context;
  ModelProfile profile;
  explicit Fixture(const char *spec) {
    auto s = readModelSpec(spec, "m.json", "", {});
    EXPECT_TRUE(bool(s)) << llvm::toString(s.takeError());
    auto module = buildModelModule(*s, context);
    module->walk([&](tfm::ModelOp m) { profile = profileModel(m); });
  }
};

constexpr const char *kSmall = R"({"version": 1, "name": "small",
  "model": {"vocab_size": 1024, "hidden_size": 256, "num_layers": 4,
            "num_heads": 8, "num_kv_heads": 4, "ffn_hidden_size": 768,
            "norm": "rms_norm", "activation": "swiglu",
            "position_embedding": "rope"},
  "training": {"seq_len": 512, "global_batch": 16}})";

/// The search's space enumerated without any pruning: every combination,
/// each checked by the cost model alone.
TEST(Search, PrunesNothingFeasible) {
  Fixture f(kSmall);
  Topology topo = *presetTopology("cpu", 8);
  topo.device.memoryBytes = 0.05 * 1073741824.0; // make memory bind
  TopologyGraph graph(topo);
  SearchOptions options;
  options.topK = 1000000;
  auto result = searchStrategy(f.profile, graph, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());

  int64_t feasible = 0;
  double best = INFINITY;
  for (int64_t tp : {1, 2, 4, 8})
    for (int64_t pp : {1, 2, 4, 8})
      for (int64_t dp : {1, 2, 4, 8})
        for (int64_t mbs : {1, 2, 4, 8, 16})
          for (int64_t vpp : {1, 2, 4})
            for (Schedule sch :
                 {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
              for (int64_t zero : {0, 1, 2, 3})
                for (Recompute rc :
                     {Recompute::None, Recompute::Selective, Recompute::Full})
                  for (bool sp : {false, true}) {
                    if (dp * tp * pp != 8 || 16 % (dp * mbs) != 0)
                      continue;
                    if ((pp == 1 && sch != Schedule::OneFOneB) ||
                        (vpp > 1) != (sch == Schedule::Interleaved) ||
                        (sp && tp == 1) || (dp == 1 && zero > 0))
                      continue;
                    ParallelConfig c;
                    c.dp = dp, c.tp = tp, c.pp = pp, c.vpp = vpp;
                    c.zero = zero, c.microBatchSize = mbs;
                    c.numMicroBatches = 16 / (dp * mbs);
                    c.recompute = rc, c.sequenceParallel = sp;
                    c.schedule = sch;
                    if (vpp > 1 && c.numMicroBatches % pp != 0)
                      continue;
                    auto e = estimateCost(f.profile, graph, c);
                    if (!e) {
                      llvm::consumeError(e.takeError());
                      continue;
                    }
                    if (!e->fits())
                      continue;
                    ++feasible;
                    best = std::min(best, e->stepTimeS);
                  }
  EXPECT_GT(feasible, 0);
  EXPECT_GT(result->rejectedOutOfMemory, 0);
  EXPECT_EQ(1 + static_cast<int64_t>(result->runnersUp.size()), feasible);
  EXPECT_DOUBLE_EQ(result->best.estimate.stepTimeS, best);
}

TEST(Search, DeterministicAndPinned) {
  Fixture f(kSmall);
  TopologyGraph graph(*presetTopology("dgx-h100", 1));
  SearchOptions options;
  auto a = searchStrategy(f.profile, graph, options);
  auto b = searchStrategy(f.profile, graph, options);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->best.config.str(), b->best.config.str());
  EXPECT_EQ(a->why, b->why);
  options.pins = *parseParallelConfig("tp=2,recompute=full");
  auto pinned = searchStrategy(f.profile, graph, options);
  ASSERT_TRUE(bool(pinned));
  EXPECT_EQ(pinned->best.config.tp, 2);
  EXPECT_EQ(pinned->best.config.recompute, Recompute::Full);
}

TEST(Search, NothingFitsSaysWhatWould) {
  Fixture f(kSmall);
  Topology topo = *presetTopology("cpu", 2);
  topo.device.memoryBytes = 2 * 1048576.0; // 2 MiB
  TopologyGraph graph(topo);
  std::string message =
      llvm::toString(searchStrategy(f.profile, graph, {}).takeError());
  EXPECT_NE(message.find("no parallel configuration of small fits: the "
                         "smallest needs"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("and a device has 2 MiB; needs at least"),
            std::string::npos)
      << message;
}

TEST(Search, ConstraintsRejectAndSayWhy) {
  Fixture f(kSmall);
  TopologyGraph graph(*presetTopology("dgx-h100", 1));
  SearchOptions options;
  options.constraints.push_back(
      {"no-pipelines",
       [](const ParallelConfig &c) -> std::optional<std::string> {
         if (c.pp == 1)
           return std::nullopt;
         return "pp=" + std::to_string(c.pp);
       }});
  auto result = searchStrategy(f.profile, graph, options);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->best.config.pp, 1);
  for (const Candidate &c : result->runnersUp)
    EXPECT_EQ(c.config.pp, 1);
  ASSERT_EQ(result->rejectedByConstraint.count("no-pipelines"), 1u);
  auto [count, first] = result->rejectedByConstraint.at("no-pipelines");
  EXPECT_GT(count, 0);
  EXPECT_EQ(first.rfind("pp=", 0), 0u) << first;

  // A rule that rejects everything is named in the error.
  options.constraints = {
      {"nothing", [](const ParallelConfig &) -> std::optional<std::string> {
         return "never";
       }}};
  std::string message =
      llvm::toString(searchStrategy(f.profile, graph, options).takeError());
  EXPECT_NE(message.find("meets the constraints: nothing rejected"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(first: never)"), std::string::npos) << message;
}

} // namespace
