//===- CudnnGraphTest.cpp - cuDNN's engines take our attention graphs -----===//
//
// Needs no GPU: for GPUs described by cuDNN's device-property JSON, cuDNN's
// heuristics propose engines for the forward and backward attention graphs
// of the shapes the GPU check runs, and at least one of them must accept
// its graph and build its kernel (loading it is the first step that needs
// a driver). What runs on a GPU is checked there, against the CPU
// (CudaBackendTest.cpp, PARTITA_CUDA_ATTENTION=cudnn).
//
//===----------------------------------------------------------------------===//

#include "cuda/CudnnAttention.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

using partita::runtime::cuda::AttentionShape;
using partita::runtime::cuda::CudnnAttention;
using partita::runtime::cuda::cudnnAttentionSupport;

/// cuDNN's device properties (the fields of its JSON) for a GPU of
/// compute capability `version` x 10 with `sms` multiprocessors, `optIn`
/// bytes of shared memory a block may opt into and `l2` bytes of L2, from
/// the GPUs' published figures.
std::string describedGpu(const std::string &name, int version, int sms,
                         int optIn, int64_t l2, int64_t memory) {
  return R"({"deviceName": ")" + name + R"(", "deviceVer": )" +
         std::to_string(version) +
         R"(, "driverVer": 13000, "cudaDeviceId": 0, "multiProcessorCount": )" +
         std::to_string(sms) + R"(, "maxSharedMemoryPerBlockOptin": )" +
         std::to_string(optIn) + R"(, "l2CacheSize": )" + std::to_string(l2) +
         R"(, "totalGlobalMem": )" + std::to_string(memory) +
         R"(, "maxGridSize": [2147483647, 65535, 65535],
         "maxBlockSize": [1024, 1024, 64], "regsPerBlock": 65536,
         "warpSize": 32, "maxSharedMemoryPerBlock": 49152,
         "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536,
         "maxCtasPerSM": 32, "maxThreadsPerBlock": 1024,
         "maxThreadsPerSM": 2048, "pciDeviceId": 0, "isTccDriver": 0,
         "supportCoopLaunch": 1, "smClockRateKHz": 1980000,
         "memClockRateKHz": 2619000})";
}

struct Gpu {
  const char *name;
  std::string json;
};

std::vector<Gpu> gpus() {
  return {{"H200", describedGpu("NVIDIA H200", 900, 132, 232448, 62914560,
                                150754820096)},
          {"A100", describedGpu("NVIDIA A100-SXM4-80GB", 800, 108, 166912,
                                41943040, 85899345920)}};
}

AttentionShape shape(int64_t b, int64_t s, int64_t heads, int64_t kvHeads,
                     int64_t d) {
  AttentionShape a{};
  a.b = b, a.s = s, a.heads = heads, a.kvHeads = kvHeads, a.d = d;
  a.causal = true;
  return a;
}

AttentionShape windowed(AttentionShape a, int64_t window) {
  a.window = window;
  return a;
}

/// The GPU check's attention shapes (scripts/gpu-plans.sh), and a
/// Mistral-7B-shaped one with a sliding window.
std::vector<std::pair<const char *, AttentionShape>> shapes() {
  return {{"llama3-8b-block", shape(1, 8192, 32, 8, 128)},
          {"gpt2-small", shape(8, 1024, 12, 12, 64)},
          {"small-llama-head128", shape(4, 200, 2, 1, 128)},
          {"tiny-llama-bf16", shape(8, 128, 4, 2, 16)},
          {"mistral-window", windowed(shape(1, 4096, 32, 8, 128), 1024)}};
}

void expectAccepted(bool backward) {
  for (const Gpu &gpu : gpus())
    for (const auto &[name, a] : shapes()) {
      // Shapes the runtime hands to cuDNN, but for the backward over
      // sequences off 128 that cuDNN before 9.16 gets wrong.
      std::string why = CudnnAttention::shapeRefusal(a, 80, backward);
      if (!why.empty()) {
        EXPECT_TRUE(backward && a.s % 128 != 0 &&
                    partita::runtime::cuda::cudnnVersion() < 91600)
            << name << ": " << why;
        continue;
      }
      auto support = cudnnAttentionSupport(gpu.json, a, backward);
      std::printf("%s, %s %s: %d of %d proposals accepted (%s)\n", gpu.name,
                  name, backward ? "backward" : "forward", support.accepted,
                  support.candidates, support.statuses.c_str());
      EXPECT_GT(support.accepted, 0)
          << gpu.name << ", " << name << (backward ? " backward" : " forward")
          << ": no engine took the graph, of " << support.candidates
          << " proposed (" << support.statuses << ")";
    }
}

TEST(CudnnGraphs, AnEngineTakesTheForward) { expectAccepted(false); }
TEST(CudnnGraphs, AnEngineTakesTheBackward) { expectAccepted(true); }

// Heads of 256 run on cuDNN on sm_90 only (CudnnAttention::shapeRefusal).
TEST(CudnnGraphs, HeadsOf256OnHopper) {
  AttentionShape a = shape(2, 1024, 8, 8, 256);
  EXPECT_EQ(CudnnAttention::shapeRefusal(a, 90, true), "");
  EXPECT_NE(CudnnAttention::shapeRefusal(a, 80, true), "");
  for (bool backward : {false, true})
    EXPECT_GT(cudnnAttentionSupport(gpus()[0].json, a, backward).accepted, 0)
        << (backward ? "backward" : "forward");
}

// The check tells graphs apart: heads of 12 (not a multiple of 8) build a
// graph that no engine accepts, which loading (the step without a driver)
// never reaches.
TEST(CudnnGraphs, AGraphNoEngineTakesIsRefused) {
  for (const Gpu &gpu : gpus())
    for (bool backward : {false, true}) {
      auto support =
          cudnnAttentionSupport(gpu.json, shape(2, 256, 4, 4, 12), backward);
      EXPECT_EQ(support.accepted, 0)
          << gpu.name << (backward ? " backward" : " forward") << ": "
          << support.statuses;
    }
}

} // namespace
