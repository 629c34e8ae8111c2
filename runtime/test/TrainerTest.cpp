//===- TrainerTest.cpp - The executor's grouping of launches --------------===//
//
// The executor hands a device that takes runs of a kernel together
// (Device::launchAll) each run of consecutive launches of it that touch no
// buffer another one writes; a launch that depends on the run so far
// starts a new one. One rank, a hand-written plan, and a device that
// records the runs it is given.
//
//===----------------------------------------------------------------------===//

#include "partita/runtime/Trainer.h"
#include "OneRankCommunicator.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace partita::runtime;

namespace {

/// The CPU device, taking runs of `copy` and recording their lengths.
class RecordingDevice : public Device {
public:
  void *allocateArena(int64_t bytes) override {
    return cpu->allocateArena(bytes);
  }
  bool hasKernel(Kernel kernel) const override {
    return cpu->hasKernel(kernel);
  }
  void launch(Kernel kernel, const std::vector<TensorRef> &ins,
              const std::vector<TensorRef> &outs,
              const std::vector<bool> &accumulate,
              const partita::plan::KernelParams &params,
              const KernelContext &ctx) override {
    cpu->launch(kernel, ins, outs, accumulate, params, ctx);
  }
  bool launchesTogether(Kernel kernel) const override {
    return kernel == Kernel::Copy;
  }
  void launchAll(Kernel kernel, const std::vector<KernelCall> &calls,
                 const KernelContext &ctx) override {
    runs.push_back(calls.size());
    Device::launchAll(kernel, calls, ctx);
  }
  void synchronize() override {}
  void upload(void *dst, const void *src, int64_t bytes) override {
    cpu->upload(dst, src, bytes);
  }
  void download(void *dst, const void *src, int64_t bytes) override {
    cpu->download(dst, src, bytes);
  }
  void fillZero(void *dst, int64_t bytes, Stream s) override {
    cpu->fillZero(dst, bytes, s);
  }
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t bytes, int64_t rows, Stream s) override {
    cpu->copyRows(dst, dstPitch, src, srcPitch, bytes, rows, s);
  }
  void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                       int64_t inner, bool accumulate, Stream s) override {
    cpu->transposeBlocks(dst, src, a, b, inner, accumulate, s);
  }

  std::vector<size_t> runs;

private:
  std::unique_ptr<Device> cpu = createCpuDevice();
};

/// A one-rank plan whose step phase runs `launches` over f32 buffers
/// a..f of 4 elements.
Plan planWithStep(const nlohmann::json &launches) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const char *name : {"a", "b", "c", "d", "e", "f"})
    buffers.push_back(
        {{"name", name}, {"kind", "scalar"}, {"dtype", "f32"}, {"shape", {4}}});
  nlohmann::json plan = {
      {"format", "partita-plan"},
      {"version", kPlanVersion},
      {"model", "grouping"},
      {"training",
       {{"seq_len", 4},
        {"vocab_size", 8},
        {"global_batch", 1},
        {"micro_batch_size", 1},
        {"num_micro_batches", 1},
        {"dtype", "f32"}}},
      {"mesh",
       {{"dp", 1},
        {"tp", 1},
        {"pp", 1},
        {"world_size", 1},
        {"order", {"pp", "dp", "tp"}},
        {"kv_parts", 1}}},
      {"devices",
       {{{"rank", 0},
         {"pp", 0},
         {"dp", 0},
         {"tp", 0},
         {"node", 0},
         {"local_device", 0}}}},
      {"groups", nlohmann::json::object()},
      {"optimizer",
       {{"lr", 1e-3},
        {"min_lr", 0.0},
        {"beta1", 0.9},
        {"beta2", 0.95},
        {"eps", 1e-8},
        {"weight_decay", 0.0},
        {"clip_norm", 0.0},
        {"warmup_steps", 0},
        {"decay_steps", 0},
        {"decay", "constant"}}},
      {"parameters", nlohmann::json::array()},
      {"programs",
       {{{"pp_rank", 0},
         {"max_in_flight", 1},
         {"buffers", buffers},
         // Empty forward and backward phases: each micro-batch must run
         // both.
         {"phases",
          {{{"kind", "forward"},
            {"chunk", 0},
            {"launches", nlohmann::json::array()}},
           {{"kind", "backward"},
            {"chunk", 0},
            {"launches", nlohmann::json::array()}},
           {{"kind", "step"}, {"launches", launches}}}},
         {"schedule",
          {{{"phase", "forward"}, {"chunk", 0}, {"micro_batch", 0}},
           {{"phase", "backward"}, {"chunk", 0}, {"micro_batch", 0}}}}}}},
      {"strategy",
       {{"dp", 1},
        {"tp", 1},
        {"pp", 1},
        {"vpp", 1},
        {"zero", 0},
        {"micro_batch_size", 1},
        {"num_micro_batches", 1},
        {"global_batch", 1},
        {"recompute", "none"},
        {"sequence_parallel", false},
        {"schedule", "1f1b"},
        {"stage_layers", {1}}}}};
  // ctest runs the cases of this binary as processes side by side.
  static int written = 0;
  std::string path = testing::TempDir() + "grouping-plan-" +
                     std::to_string(getpid()) + "-" +
                     std::to_string(written++) + ".json";
  std::ofstream(path) << plan.dump();
  Plan loaded = loadPlan(path);
  std::remove(path.c_str());
  return loaded;
}

nlohmann::json copy(const char *from, const char *to) {
  return {{"op", "kernel"},
          {"kernel", "copy"},
          {"ins", {from}},
          {"outs", {to}},
          {"params", nlohmann::json::object()}};
}

/// The plans here have no pipeline: a message is the executor's mistake.
class NoMessages : public OneRankCommunicator {
public:
  void send(int64_t, const void *, int64_t) override {
    abort("a send in a plan without pipeline stages");
  }
  void recv(int64_t, void *, int64_t) override {
    abort("a receive in a plan without pipeline stages");
  }
};

std::vector<size_t> runsOf(const nlohmann::json &launches) {
  Plan plan = planWithStep(launches);
  RecordingDevice device;
  NoMessages comm;
  std::unique_ptr<TokenSource> tokens = syntheticTokens(plan.vocabSize);
  Trainer trainer(plan, device, comm, *tokens, 1 << 20);
  trainer.step(0);
  return device.runs;
}

TEST(Trainer, LaunchesIndependentRunsOfAKernelTogether) {
  EXPECT_EQ(runsOf({copy("a", "b"), copy("c", "d"), copy("e", "f")}),
            (std::vector<size_t>{3}));
}

TEST(Trainer, StartsANewRunAtALaunchThatDependsOnTheRun) {
  // Reads what the run wrote.
  EXPECT_EQ(runsOf({copy("a", "b"), copy("b", "c"), copy("d", "e")}),
            (std::vector<size_t>{1, 2}));
  // Writes what the run read.
  EXPECT_EQ(runsOf({copy("a", "b"), copy("c", "a")}),
            (std::vector<size_t>{1, 1}));
  // Writes what the run wrote.
  EXPECT_EQ(runsOf({copy("a", "b"), copy("c", "b")}),
            (std::vector<size_t>{1, 1}));
  // Reading what another launch of the run reads is no dependence.
  EXPECT_EQ(runsOf({copy("a", "b"), copy("a", "c")}), (std::vector<size_t>{2}));
}

TEST(Trainer, ARunEndsAtAnotherKernel) {
  nlohmann::json add = {{"op", "kernel"},
                        {"kernel", "add"},
                        {"ins", {"a", "b"}},
                        {"outs", {"f"}},
                        {"params", nlohmann::json::object()}};
  EXPECT_EQ(runsOf({copy("a", "b"), add, copy("c", "d"), copy("d", "e")}),
            (std::vector<size_t>{1, 1, 1}));
}

} // namespace
