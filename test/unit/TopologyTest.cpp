//===- TopologyTest.cpp - Topologies, their graph and collectives ---------===//

#include "compiler/CostModel/CostModel.h"
#include "compiler/Topology/TopologyGraph.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace partita;

namespace {

Topology preset(const char *name, int64_t n) {
  llvm::Expected<Topology> t = presetTopology(name, n);
  EXPECT_TRUE(bool(t));
  return *t;
}

std::vector<int64_t> iota(int64_t n, int64_t stride = 1) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(i * stride);
  return v;
}

TEST(Topology, PresetsUseSIUnits) {
  Topology h100 = preset("dgx-h100", 4);
  EXPECT_EQ(h100.numDevices(), 32);
  EXPECT_DOUBLE_EQ(h100.device.bf16Flops, 989e12);
  EXPECT_DOUBLE_EQ(h100.device.memoryBytes, 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(h100.intraNode.bytesPerS, 450e9);
  // 400 Gb/s per NIC is 50 GB/s.
  EXPECT_DOUBLE_EQ(h100.interNode.bytesPerSPerNic, 50e9);
  Topology cpu = preset("cpu", 4);
  EXPECT_EQ(cpu.nodes, 1);
  EXPECT_EQ(cpu.devicesPerNode, 4);
}

TEST(Topology, OptionSyntax) {
  EXPECT_EQ(parseTopologyOption("dgx-a100:16")->nodes, 16);
  EXPECT_EQ(parseTopologyOption("hgx-h200")->nodes, 1);
  std::string bad =
      llvm::toString(parseTopologyOption("dgx-a100:x").takeError());
  EXPECT_NE(bad.find("expected NAME:N"), std::string::npos) << bad;
  std::string unknown =
      llvm::toString(parseTopologyOption("tpu-v5").takeError());
  EXPECT_NE(unknown.find("unknown topology preset 'tpu-v5'"),
            std::string::npos);
}

TEST(Topology, JsonFieldsAndErrors) {
  auto t = readTopology(R"({"version": 1, "preset": "dgx-a100", "nodes": 3,
      "inter_node": {"nics_per_node": 4, "gbits_per_s": 100}})",
                        "mine.json");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->nodes, 3);
  EXPECT_EQ(t->interNode.nicsPerNode, 4);
  EXPECT_DOUBLE_EQ(t->interNode.bytesPerSPerNic, 12.5e9);
  EXPECT_DOUBLE_EQ(t->device.bf16Flops, 312e12); // from the preset

  auto bad = readTopology(R"({"version": 1, "nodes": 2,
      "device": {"kind": "x", "bf16_tflops": "fast"}})",
                          "bad.json");
  std::string text = llvm::toString(bad.takeError());
  EXPECT_NE(text.find("bad.json: /devices_per_node: required field is missing"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("bad.json: /device/bf16_tflops: expected a number, got "
                      "string \"fast\""),
            std::string::npos)
      << text;

  // Sizes no machine has would overflow the reports' numbers to inf.
  auto huge = readTopology(R"({"version": 1, "preset": "cpu",
      "device": {"memory_gib": 1e300}})",
                           "huge.json");
  text = llvm::toString(huge.takeError());
  EXPECT_NE(text.find("huge.json: /device/memory_gib: must be >= 1e-06 and <= "
                      "1e+09, got 1e+300"),
            std::string::npos)
      << text;

  // #dist.device needs a kind: an empty one made an attribute that did not
  // parse back (found by the topology fuzzer).
  auto nameless = readTopology(R"({"version": 1, "preset": "dgx-h100",
      "device": {"kind": ""}})",
                               "nameless.json");
  text = llvm::toString(nameless.takeError());
  EXPECT_NE(text.find("nameless.json: /device/kind: must not be empty"),
            std::string::npos)
      << text;
}

TEST(Topology, AttributeRoundTrip) {
  mlir::MLIRContext context;
  Topology t = preset("dgx-a100", 2);
  Topology back = fromAttr(toAttr(t, &context));
  EXPECT_EQ(back.name, t.name);
  EXPECT_EQ(back.nodes, 2);
  EXPECT_DOUBLE_EQ(back.device.fp32Flops, t.device.fp32Flops);
  EXPECT_DOUBLE_EQ(back.interNode.bytesPerSPerNic, t.interNode.bytesPerSPerNic);
  EXPECT_DOUBLE_EQ(back.intraNode.latencyS, t.intraNode.latencyS);
}

TEST(Topology, CalibrationOverridesTheDefaultsAndYieldsToCostParams) {
  mlir::MLIRContext context;
  auto t = readTopology(R"({"version": 1, "preset": "cpu", "nodes": 2,
      "calibration": {"gemm_efficiency": 1, "gemm_half_dim": 12.5,
                      "collective_efficiency": 1}})",
                        "measured.json");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  // Through the attribute and back, as passes read it.
  Topology back = fromAttr(toAttr(*t, &context));
  EXPECT_EQ(back.calibration.gemmHalfDim, 12.5);
  EXPECT_FALSE(back.calibration.hbmEfficiency);
  llvm::Expected<CostParams> params =
      costParamsFor(back, "collective_efficiency=0.5");
  ASSERT_TRUE(bool(params)) << llvm::toString(params.takeError());
  CostParams defaults;
  EXPECT_EQ(params->gemmEfficiency, 1);
  EXPECT_EQ(params->gemmHalfDim, 12.5);
  EXPECT_EQ(params->hbmEfficiency, defaults.hbmEfficiency);
  EXPECT_EQ(params->collectiveEfficiency, 0.5);
  ASSERT_EQ(params->overrides.size(), 1u);
  EXPECT_EQ(params->overrides[0], "topology 'measured' calibration");
  // A topology without one leaves the defaults and adds no override.
  params = costParamsFor(preset("cpu", 2), "");
  ASSERT_TRUE(bool(params));
  EXPECT_EQ(params->gemmEfficiency, defaults.gemmEfficiency);
  EXPECT_TRUE(params->overrides.empty());

  auto bad = readTopology(R"({"version": 1, "preset": "cpu",
      "calibration": {"hbm_efficiency": 2, "gemm": 1}})",
                          "bad.json");
  std::string text = llvm::toString(bad.takeError());
  EXPECT_NE(text.find("bad.json: /calibration/hbm_efficiency"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("bad.json: /calibration/gemm: unknown field"),
            std::string::npos)
      << text;
}

TEST(TopologyGraph, RingsInsideAndAcrossNodes) {
  TopologyGraph g(preset("dgx-h100", 2));
  // 16 devices, 2 NVSwitches, 16 NICs (two vertices each), 8 rail leaves,
  // 1 spine.
  EXPECT_EQ(g.numVertices(), 16u + 2 + 2 * 16 + 8 + 1);
  RingCost node = g.ring(iota(8));
  EXPECT_TRUE(node.intraNode);
  EXPECT_DOUBLE_EQ(node.bytesPerS, 450e9);
  EXPECT_DOUBLE_EQ(node.latencyS, 3e-6);
  // All 16 ranks in one ring: one hop leaves each node on one NIC.
  RingCost all = g.ring(iota(16));
  EXPECT_FALSE(all.intraNode);
  EXPECT_DOUBLE_EQ(all.bytesPerS, 50e9);
  // Eight rings of two ranks each, one per rail, share nothing.
  std::vector<std::vector<int64_t>> rails;
  for (int64_t i = 0; i < 8; ++i)
    rails.push_back({i, 8 + i});
  EXPECT_DOUBLE_EQ(g.concurrentRings(rails).bytesPerS, 50e9);
  // Two flows through one NIC halve its bandwidth.
  EXPECT_DOUBLE_EQ(g.concurrentRings({{0, 8}, {0, 8}}).bytesPerS, 25e9);
}

TEST(TopologyGraph, DevicesSharingANicTalkThroughTheirFabric) {
  // Two hosts of two ranks with one slow NIC each (what plan-run
  // --write-topology measures on a cluster of CPU hosts): ranks of a host
  // must not be routed out to their NIC and back.
  Topology t = preset("cpu", 2);
  t.nodes = 2;
  t.intraNode.latencyS = 50e-6;
  t.interNode.bytesPerSPerNic = 12.5e6;
  TopologyGraph g(t);
  RingCost host = g.ring({0, 1});
  EXPECT_TRUE(host.intraNode);
  EXPECT_DOUBLE_EQ(host.bytesPerS, t.intraNode.bytesPerS);
  EXPECT_DOUBLE_EQ(host.latencyS, 50e-6);
  EXPECT_DOUBLE_EQ(g.path(0, 1).bytesPerS, t.intraNode.bytesPerS);
  // Across hosts, the two ranks of a host share its NIC.
  RingCost across = g.ring({0, 2, 1, 3});
  EXPECT_FALSE(across.intraNode);
  EXPECT_DOUBLE_EQ(across.bytesPerS, 12.5e6 / 2);
}

TEST(TopologyGraph, NVLinkMeshSharesLinksPerPair) {
  Topology t = preset("dgx-a100", 1);
  t.intraNode.kind = dist::LinkKind::nvlink;
  TopologyGraph g(t);
  EXPECT_DOUBLE_EQ(g.path(0, 1).bytesPerS, 300e9 / 7);
}

TEST(TopologyGraph, APlansNodesRouteAsTheWholeCluster) {
  // Rails behind a spine that carries a quarter of the NICs' line rate:
  // 8 nodes x 50 GB/s / 4 = 100 GB/s from each leaf.
  Topology t = preset("dgx-h100", 8);
  t.interNode.oversubscription = 4;
  TopologyGraph whole(t);
  // Ranks 0-19 fill 3 nodes: 24 devices, 3 NVSwitches, 24 NICs (two
  // vertices each), 8 leaves and the spine.
  TopologyGraph used(t, 20);
  EXPECT_EQ(used.numVertices(), 24u + 3 + 2 * 24 + 8 + 1);
  EXPECT_EQ(used.topology().nodes, 8);
  // Three cross-rail flows leave leaf 0 for the spine: its capacity is the
  // whole cluster's, however few nodes the plan uses.
  std::vector<std::vector<int64_t>> crossRail{{0, 9}, {8, 17}, {16, 1}};
  EXPECT_DOUBLE_EQ(used.concurrentRings(crossRail).bytesPerS, 100e9 / 3);
  EXPECT_DOUBLE_EQ(whole.concurrentRings(crossRail).bytesPerS, 100e9 / 3);
  for (const std::vector<int64_t> &ranks :
       {iota(8), iota(3, 8), iota(20), std::vector<int64_t>{3, 17, 12}}) {
    RingCost a = used.ring(ranks), b = whole.ring(ranks);
    EXPECT_DOUBLE_EQ(a.bytesPerS, b.bytesPerS);
    EXPECT_DOUBLE_EQ(a.latencyS, b.latencyS);
    EXPECT_EQ(a.intraNode, b.intraNode);
  }
  EXPECT_DOUBLE_EQ(used.path(5, 19).latencyS, whole.path(5, 19).latencyS);
  EXPECT_DEATH(used.path(0, 24), "a route from rank 0 to rank 24 in a graph "
                                 "of ranks 0 to 23");
}

// Hand-computed alpha-beta times (docs/cost-model.md, "Collectives").
TEST(Collectives, AllReduceOneGigabyte) {
  const double gb = 1e9, eff = 0.8;
  TopologyGraph node(preset("dgx-h100", 1));
  CollectiveGroup eight(node, iota(8));
  // Ring: 2 (p-1)/p S / B + 2 (p-1) alpha over NVSwitch.
  double ring = 2 * 7.0 / 8 * gb / (450e9 * eff) + 14 * 3e-6;
  std::string algorithm;
  EXPECT_NEAR(eight.time(CollectiveKind::AllReduce, gb, eff, &algorithm), ring,
              1e-12);
  EXPECT_EQ(algorithm, "ring");

  // 16 nodes, one rank each on rail 0: ring over 50 GB/s NICs with a 5 us
  // hop, or the tree with 2 log2(16) latency steps; the tree wins.
  TopologyGraph cluster(preset("dgx-h100", 16));
  CollectiveGroup sixteen(cluster, iota(16, 8));
  double ringAcross = 2 * 15.0 / 16 * gb / (50e9 * eff) + 30 * 5e-6;
  double tree = 2 * 15.0 / 16 * gb / (50e9 * eff) + 2 * 4 * 5e-6;
  EXPECT_NEAR(sixteen.time(CollectiveKind::AllReduce, gb, eff, &algorithm),
              std::min(ringAcross, tree), 1e-12);
  EXPECT_EQ(algorithm, "tree");

  // All 128 GPUs: reduce-scatter in the node, 8 concurrent rail rings on
  // 1/8 of the data, all-gather in the node.
  CollectiveGroup all(cluster, iota(128));
  double inside = 2 * (7.0 / 8 * gb / (450e9 * eff) + 7 * 3e-6);
  double across = 2 * 15.0 / 16 * (gb / 8) / (50e9 * eff) + 30 * 5e-6;
  EXPECT_NEAR(all.time(CollectiveKind::AllReduce, gb, eff, &algorithm),
              inside + across, 1e-12);
  EXPECT_EQ(algorithm, "hierarchical");
}

TEST(Collectives, CpuRanksRingAndShareTheirHostsNic) {
  // Two hosts of two CPU ranks, one 100 Mbit/s NIC each, no latency.
  Topology t = preset("cpu", 2);
  t.nodes = 2;
  t.intraNode.latencyS = 0;
  t.interNode.bytesPerSPerNic = 12.5e6;
  t.interNode.latencyS = 0;
  TopologyGraph g(t);
  // A dp group across the hosts, alone: 2 (p-1)/p S / B.
  CollectiveGroup alone(g, {0, 2});
  EXPECT_NEAR(alone.time(CollectiveKind::AllReduce, 1e6, 1.0), 1e6 / 12.5e6,
              1e-12);
  // With its sibling of the other tp rank ({1, 3}) at once: the two rings
  // share each host's NIC.
  CollectiveGroup withSibling(g, {0, 2}, 2, 1);
  EXPECT_NEAR(withSibling.time(CollectiveKind::AllReduce, 1e6, 1.0),
              2 * 1e6 / 12.5e6, 1e-12);
  // A sibling on other nodes shares nothing (the core is non-blocking).
  CollectiveGroup tpGroup(g, {0, 1}, 2, 2);
  EXPECT_NEAR(tpGroup.time(CollectiveKind::AllReduce, 1e6, 1.0),
              1e6 / t.intraNode.bytesPerS, 1e-12);
  // MPI's rings, not NCCL's hierarchical algorithm, for all four ranks:
  // (p-1)/p of twice the buffer over the NIC that two ring hops cross.
  std::string algorithm;
  CollectiveGroup world(g, iota(4));
  EXPECT_NEAR(world.time(CollectiveKind::AllReduce, 1e6, 1.0, &algorithm),
              2 * 3.0 / 4 * 1e6 / 12.5e6, 1e-12);
  EXPECT_EQ(algorithm, "ring");
  // The same cluster with a GPU's link inside the node may go hierarchical.
  t.intraNode.kind = dist::LinkKind::pcie;
  TopologyGraph gpus(t);
  CollectiveGroup(gpus, iota(4))
      .time(CollectiveKind::AllReduce, 1e6, 1.0, &algorithm);
  EXPECT_EQ(algorithm, "hierarchical");
}

TEST(Collectives, AllGatherAndSendRecv) {
  TopologyGraph g(preset("dgx-a100", 2));
  CollectiveGroup node(g, iota(8));
  EXPECT_NEAR(node.time(CollectiveKind::AllGather, 8e6, 1.0),
              7.0 / 8 * 8e6 / 300e9 + 7 * 3e-6, 1e-15);
  CollectiveGroup pair(g, {0, 8});
  // One message: S / B + alpha over the 200 Gb/s NIC and the network.
  EXPECT_NEAR(pair.time(CollectiveKind::SendRecv, 25e6, 1.0),
              25e6 / 25e9 + 5e-6, 1e-15);
  // The same between nodes 0 and 40 of a large cluster (groups spanning
  // many nodes are routed on a renumbered few: a pair must stay a pair).
  TopologyGraph large(preset("dgx-a100", 64));
  CollectiveGroup far(large, {0, 8 * 40});
  EXPECT_NEAR(far.time(CollectiveKind::SendRecv, 25e6, 1.0), 25e6 / 25e9 + 5e-6,
              1e-15);
  // A data-parallel ring over all 64 nodes costs what the same ring over
  // fewer nodes costs per hop, with 64 hops.
  std::vector<int64_t> dp;
  for (int64_t n = 0; n < 64; ++n)
    dp.push_back(8 * n);
  CollectiveGroup ring(large, dp);
  EXPECT_NEAR(ring.time(CollectiveKind::AllGather, 64e6, 1.0),
              63.0 / 64 * 64e6 / 25e9 + 63 * 5e-6, 1e-12);
}

// NCCL's PAT for all-gathers and reduce-scatters over one rank a node:
// 3/4 of the ring's bandwidth, log2(p) hops and 2.8 us a rank. It wins
// where the ring's p - 1 hops cost more than the bytes.
TEST(Collectives, PatOverOneRankANode) {
  TopologyGraph cluster(preset("dgx-h100", 2048));
  std::vector<int64_t> rail;
  for (int64_t n = 0; n < 2048; ++n)
    rail.push_back(8 * n);
  CollectiveGroup dp(cluster, rail);
  const double eff = 0.7, bw = 50e9 * eff, frac = 2047.0 / 2048;
  auto ring = [&](double bytes) { return frac * bytes / bw + 2047 * 5e-6; };
  auto pat = [&](double bytes) {
    return frac * bytes / (0.75 * bw) + 11 * 5e-6 + 2048 * 2.8e-6;
  };
  std::string algorithm;
  const double small = 25 * 1048576.0, large = 800e6;
  ASSERT_LT(pat(small), ring(small));
  EXPECT_NEAR(dp.time(CollectiveKind::ReduceScatter, small, eff, &algorithm),
              pat(small), 1e-12);
  EXPECT_EQ(algorithm, "pat");
  ASSERT_GT(pat(large), ring(large));
  EXPECT_NEAR(dp.time(CollectiveKind::AllGather, large, eff, &algorithm),
              ring(large), 1e-12);
  EXPECT_EQ(algorithm, "ring");
  // Not for all-reduce (the tree's), nor for groups with several ranks in a
  // node.
  dp.time(CollectiveKind::AllReduce, small, eff, &algorithm);
  EXPECT_EQ(algorithm, "tree");
  CollectiveGroup twoANode(cluster, {0, 1, 8, 9, 16, 17});
  twoANode.time(CollectiveKind::ReduceScatter, 1e3, eff, &algorithm);
  EXPECT_NE(algorithm, "pat");
}

} // namespace
