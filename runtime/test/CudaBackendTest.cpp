//===- CudaBackendTest.cpp - The CUDA backend against the CPU kernels -----===//
//
// Host-side cases (launch configuration, limits against the example
// models, errors without a GPU) always run. The kernel cases run every
// kernel of the plan format on random inputs on both backends, through the
// Device interface the executor uses, and compare; without a GPU they skip
// with the reason.
//
//===----------------------------------------------------------------------===//

#include "cuda/Kernels.h"
#include "cuda/LaunchConfig.h"
#include "partita/runtime/Bf16.h"
#include "partita/runtime/Cuda.h"
#include "partita/runtime/Plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

using namespace partita::runtime;
using json = nlohmann::json;

namespace {

// -- Host side -----------------------------------------------------------

TEST(CudaHost, GemmPrecisionNames) {
  for (const char *name : {"fp32", "tf32", "bf16"})
    EXPECT_STREQ(gemmPrecisionName(*parseGemmPrecision(name)), name);
  EXPECT_FALSE(parseGemmPrecision("fp16").has_value());
}

TEST(CudaHost, LaunchConfiguration) {
  using namespace partita::runtime::cuda;
  EXPECT_EQ(blocksFor(0), 1u);
  EXPECT_EQ(blocksFor(256), 1u);
  EXPECT_EQ(blocksFor(257), 2u);
  EXPECT_EQ(blocksFor(int64_t(1) << 40), unsigned(kMaxBlocks));
  EXPECT_EQ(normThreads(64), 64);
  EXPECT_EQ(normThreads(65), 96);
  EXPECT_EQ(normThreads(4096), kNormThreads);
  EXPECT_EQ(headDimBucket(16), 32);
  EXPECT_EQ(headDimBucket(80), 128);
  EXPECT_EQ(headDimBucket(128), 128);
  EXPECT_EQ(headDimBucket(256), 256);
  EXPECT_EQ(rowBlocks(8192), 128u);
  EXPECT_EQ(rowBlocks(100), 2u);
  // Two tiles of keys (or queries) in static shared memory: 32 KiB of the
  // 48 KiB a block may declare, for every head-dimension bucket.
  for (int bytes : {2 * keyTile<32>() * 32 * 4, 2 * keyTile<64>() * 64 * 4,
                    2 * keyTile<128>() * 128 * 4, 2 * keyTile<256>() * 256 * 4})
    EXPECT_EQ(bytes, 32 * 1024);
  EXPECT_EQ(maxNormWidth(), kMaxNormWidth);
  EXPECT_EQ(maxHeadDim(), kMaxHeadDim);
}

TEST(CudaHost, EveryExampleModelFitsTheKernels) {
  int checked = 0;
  for (const auto &entry :
       std::filesystem::directory_iterator(PARTITA_EXAMPLES_DIR "/models")) {
    std::ifstream in(entry.path());
    json m = json::parse(in).at("model");
    // Either our own fields or an HF config.json beside the examples.
    if (m.contains("hf_config")) {
      std::ifstream hf(entry.path().parent_path() /
                       m.at("hf_config").get<std::string>());
      m = json::parse(hf);
    }
    int64_t hidden = m.value("hidden_size", m.value("n_embd", int64_t(0)));
    int64_t heads = m.value("num_heads", int64_t(0));
    heads = m.value("num_attention_heads", m.value("n_head", heads));
    ASSERT_GT(hidden, 0) << entry.path();
    ASSERT_GT(heads, 0) << entry.path();
    int64_t headDim = m.value("head_dim", hidden / heads);
    EXPECT_LE(hidden, cuda::kMaxNormWidth) << entry.path();
    EXPECT_LE(headDim, cuda::kMaxHeadDim) << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(CudaHost, NoDeviceIsAClearError) {
  std::string why;
  if (cudaDeviceCount(&why) > 0)
    GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  try {
    createCudaDevice(0, GemmPrecision::FP32);
    FAIL() << "createCudaDevice succeeded without a device";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("no CUDA device: ", 0), 0u)
        << e.what();
  }
}

// -- Kernels against the CPU backend -------------------------------------

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int32_t> i;
  bool isInt = false;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

struct Case {
  std::string kernel;
  std::vector<Tensor> ins;
  std::vector<std::vector<int64_t>> outs;
  std::vector<bool> accumulate;
  json params = json::object();
  KernelContext ctx;
  /// Allowed |gpu - cpu| / (1 + |cpu|).
  double tolerance = 2e-5;
};

std::mt19937 &random() {
  static std::mt19937 engine(20261130);
  return engine;
}

Tensor normal(std::vector<int64_t> shape, float scale = 1) {
  Tensor t;
  t.shape = std::move(shape);
  std::normal_distribution<float> dist(0, scale);
  t.f.resize(t.size());
  for (float &x : t.f)
    x = dist(random());
  return t;
}

Tensor positive(std::vector<int64_t> shape) {
  Tensor t = normal(std::move(shape));
  for (float &x : t.f)
    x = 0.5f + std::fabs(x);
  return t;
}

Tensor integers(std::vector<int64_t> shape, int32_t below) {
  Tensor t;
  t.shape = std::move(shape);
  t.isInt = true;
  std::uniform_int_distribution<int32_t> dist(0, below - 1);
  t.i.resize(t.size());
  for (int32_t &x : t.i)
    x = dist(random());
  return t;
}

Optimizer &optimizer() {
  static Optimizer o{1e-3, 1e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, 0, 0, "constant"};
  return o;
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (cudaDeviceCount(&why) == 0)
      GTEST_SKIP() << "no CUDA device (" << why
                   << "): the kernel tests run where there is one";
    if (!gpu)
      gpu = createCudaDevice(0, GemmPrecision::FP32);
    cpu = createCpuDevice();
  }

  /// Runs `c` on both backends from the same inputs and initial outputs.
  void check(Case c) {
    SCOPED_TRACE(c.kernel + " " + c.params.dump());
    if (!c.ctx.optimizer)
      c.ctx.optimizer = &optimizer();
    if (c.accumulate.empty())
      c.accumulate.assign(c.outs.size(), false);
    std::vector<Tensor> outs;
    for (auto &shape : c.outs)
      outs.push_back(normal(shape));
    // The CPU runs on host vectors.
    std::vector<Tensor> cpuOuts = outs;
    std::vector<TensorRef> ins, outRefs;
    for (Tensor &t : c.ins)
      ins.push_back(ref(t, t.isInt ? (void *)t.i.data() : t.f.data()));
    for (Tensor &t : cpuOuts)
      outRefs.push_back(ref(t, t.f.data()));
    cpu->launch(c.kernel, ins, outRefs, c.accumulate, c.params, c.ctx);
    // The GPU runs on one arena holding every tensor.
    int64_t bytes = 0;
    for (const Tensor &t : c.ins)
      bytes += t.size() * 4;
    for (const Tensor &t : outs)
      bytes += t.size() * 4;
    char *arena = static_cast<char *>(gpu->allocateArena(bytes));
    std::vector<TensorRef> gpuIns, gpuOuts;
    for (Tensor &t : c.ins) {
      gpu->upload(arena, t.isInt ? (void *)t.i.data() : t.f.data(),
                  t.size() * 4);
      gpuIns.push_back(ref(t, arena));
      arena += t.size() * 4;
    }
    for (Tensor &t : outs) {
      gpu->upload(arena, t.f.data(), t.size() * 4);
      gpuOuts.push_back(ref(t, arena));
      arena += t.size() * 4;
    }
    gpu->launch(c.kernel, gpuIns, gpuOuts, c.accumulate, c.params, c.ctx);
    for (size_t k = 0; k < outs.size(); ++k) {
      std::vector<float> got(outs[k].size());
      gpu->download(got.data(), gpuOuts[k].f, got.size() * 4);
      double worst = 0;
      int64_t at = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        double want = cpuOuts[k].f[e];
        double error = std::fabs(got[e] - want) / (1 + std::fabs(want));
        if (!(error <= worst)) { // NaN counts as the worst
          worst = std::isnan(error) ? INFINITY : error;
          at = int64_t(e);
        }
      }
      EXPECT_LE(worst, c.tolerance)
          << "output " << k << " element " << at << ": gpu " << got[at]
          << ", cpu " << cpuOuts[k].f[at];
    }
  }

  static TensorRef ref(Tensor &t, void *data) {
    TensorRef r;
    if (t.isInt)
      r.i = static_cast<int32_t *>(data);
    else
      r.f = static_cast<float *>(data);
    r.shape = &t.shape;
    r.n = t.size();
    return r;
  }

  static std::unique_ptr<Device> gpu;
  std::unique_ptr<Device> cpu;
};

std::unique_ptr<Device> CudaKernels::gpu;

TEST_F(CudaKernels, Linear) {
  check({"linear", {normal({2, 70, 48}), normal({96, 48})}, {{2, 70, 96}}});
  check({"linear",
         {normal({140, 48}), normal({96, 48}), normal({96})},
         {{140, 96}},
         {true}});
  check({"linear_bwd",
         {normal({140, 96}), normal({140, 48}), normal({96, 48})},
         {{140, 48}, {96, 48}, {96}},
         {false, true, true},
         json::object(),
         {},
         5e-5});
}

TEST_F(CudaKernels, Embeddings) {
  check({"embedding",
         {normal({64, 32}), integers({2, 50}, 64)},
         {{2, 50, 32}},
         {},
         {{"vocab_parts", 1}}});
  Case tp{"embedding",
          {normal({32, 32}), integers({2, 50}, 64)},
          {{2, 50, 32}},
          {},
          {{"vocab_parts", 2}}};
  tp.ctx.tpRank = 1;
  check(tp);
  for (bool acc : {false, true})
    check({"embedding_bwd",
           {normal({2, 50, 32}), integers({2, 50}, 64)},
           {{64, 32}},
           {acc},
           {{"vocab_parts", 1}}});
  check({"position_embedding",
         {normal({2, 50, 32}), normal({50, 32})},
         {{2, 50, 32}}});
  check({"position_embedding_bwd", {normal({2, 50, 32})}, {{50, 32}}, {true}});
  Case slice{"shard_slice",
             {normal({3, 8, 6})},
             {{3, 4, 6}},
             {},
             {{"dim", 1}, {"group", "tp"}}};
  slice.ctx.groupRank = 1;
  slice.ctx.groupSize = 2;
  check(slice);
}

TEST_F(CudaKernels, Norms) {
  for (int64_t h : {64, 200, 4096}) {
    check({"rms_norm",
           {normal({37, h}), normal({h})},
           {{37, h}},
           {},
           {{"eps", 1e-5}}});
    check({"layer_norm",
           {normal({37, h}), normal({h}), normal({h})},
           {{37, h}},
           {},
           {{"eps", 1e-5}}});
    check({"rms_norm_bwd",
           {normal({37, h}), normal({37, h}), normal({h})},
           {{37, h}, {h}},
           {false, true},
           {{"eps", 1e-5}},
           {},
           5e-5});
    check({"layer_norm_bwd",
           {normal({37, h}), normal({37, h}), normal({h})},
           {{37, h}, {h}, {h}},
           {true, false, false},
           {{"eps", 1e-5}},
           {},
           5e-5});
  }
  check({"bias_add", {normal({5, 7, 24}), normal({24})}, {{5, 7, 24}}});
  check({"bias_add_bwd",
         {normal({5, 7, 24})},
         {{5, 7, 24}, {24}},
         {false, true}});
}

TEST_F(CudaKernels, Rotary) {
  json plain = {{"num_heads", 4}, {"rotary_dim", 16}, {"theta", 10000.0}};
  json partial = {{"num_heads", 2},          {"rotary_dim", 32},
                  {"theta", 500000.0},       {"scaling", "llama3"},
                  {"scaling_factor", 8.0},   {"low_freq_factor", 1.0},
                  {"high_freq_factor", 4.0}, {"original_max_positions", 64}};
  for (const char *kernel : {"rotary", "rotary_bwd"}) {
    check({kernel, {normal({2, 300, 64})}, {{2, 300, 64}}, {}, plain});
    check({kernel, {normal({2, 300, 128})}, {{2, 300, 128}}, {true}, partial});
  }
}

TEST_F(CudaKernels, Attention) {
  struct Shape {
    int64_t s, heads, kv, d;
    bool causal;
    int64_t window;
  };
  for (Shape a :
       {Shape{100, 4, 2, 16, true, 0}, Shape{130, 2, 2, 64, true, 0},
        Shape{70, 4, 1, 128, false, 0}, Shape{150, 4, 2, 32, true, 16}}) {
    json p = {{"num_heads", a.heads},
              {"num_kv_heads", a.kv},
              {"causal", a.causal},
              {"window", a.window}};
    Tensor q = normal({2, a.s, a.heads * a.d}),
           k = normal({2, a.s, a.kv * a.d}), v = normal({2, a.s, a.kv * a.d});
    check({"attention", {q, k, v}, {{2, a.s, a.heads * a.d}}, {}, p, {}, 5e-5});
    check({"attention_bwd",
           {normal({2, a.s, a.heads * a.d}), q, k, v},
           {q.shape, k.shape, v.shape},
           {false, true, false},
           p,
           {},
           2e-4});
  }
}

TEST_F(CudaKernels, Elementwise) {
  for (const char *approximate : {"none", "tanh"}) {
    check({"gelu",
           {normal({1000})},
           {{1000}},
           {},
           {{"approximate", approximate}}});
    check({"gelu_bwd",
           {normal({1000}), normal({1000})},
           {{1000}},
           {true},
           {{"approximate", approximate}}});
  }
  check({"silu", {normal({1000})}, {{1000}}});
  check({"silu_bwd", {normal({1000}), normal({1000})}, {{1000}}});
  check({"swiglu", {normal({1000}), normal({1000})}, {{1000}}, {true}});
  check({"swiglu_bwd",
         {normal({1000}), normal({1000}), normal({1000})},
         {{1000}, {1000}},
         {false, true}});
  std::vector<Tensor> many;
  for (int k = 0; k < 11; ++k)
    many.push_back(normal({333}));
  check({"add", {normal({333}), normal({333}), normal({333})}, {{333}}});
  check({"add", many, {{333}}, {true}});
  check({"copy", {normal({333})}, {{333}}});
}

TEST_F(CudaKernels, CrossEntropy) {
  // Rank 1 of two vocabulary parts of 300 rows; the vocabulary has 520
  // entries, so the last 80 rows are padding.
  int64_t rows = 96, v = 300, vocab = 520;
  json p = {{"vocab_parts", 2}, {"vocab_size", vocab}, {"scale", 1.0 / 96}};
  KernelContext rank1;
  rank1.tpRank = 1;
  Tensor logits = normal({rows, v}, 3),
         labels = integers({rows}, int32_t(vocab));
  Tensor max = normal({rows}), stats = positive({rows, 2});
  check({"ce_max", {logits}, {{rows}}, {}, p, rank1});
  check({"ce_stats", {logits, max, labels}, {{rows, 2}}, {}, p, rank1});
  check({"ce_loss", {max, stats}, {{1}}, {}, p, rank1});
  check({"ce_bwd", {logits, max, stats, labels}, {{rows, v}}, {}, p, rank1});
}

TEST_F(CudaKernels, Optimizer) {
  check({"grad_sumsq",
         {normal({1000}), normal({33, 7})},
         {{1}},
         {},
         {{"weights", {1.0, 0.5}}},
         {},
         1e-6});
  Tensor sumsq = positive({1});
  sumsq.f[0] = 4.0f; // norm 2 > clip 1
  check({"clip_coefficient", {sumsq}, {{1}}});
  Tensor clip = positive({1});
  clip.f[0] = 0.5f;
  Case whole{"adamw",
             {normal({40, 30}), normal({40, 30}), normal({40, 30}, 0.1),
              positive({40, 30}), clip},
             {{40, 30}, {40, 30}, {40, 30}},
             {},
             {{"weight_decay", true}, {"dp_shard", false}}};
  whole.ctx.step = 3;
  check(whole);
  // ZeRO: rank 2 of 3 updates its flat slice (with 1 element of padding).
  Case shard{"adamw",
             {normal({40, 30}), normal({401}), normal({401}, 0.1),
              positive({401}), clip},
             {{40, 30}, {401}, {401}},
             {},
             {{"weight_decay", false}, {"dp_shard", true}}};
  shard.ctx.dpRank = 2;
  shard.ctx.step = 7;
  check(shard);
  // Below f32: the update applies to the master copy (the sixth input and
  // fourth output), whole and as a ZeRO slice with padding.
  whole.ins.push_back(normal({40, 30}));
  whole.outs.push_back({40, 30});
  check(whole);
  shard.ins.push_back(normal({401}));
  shard.outs.push_back({401});
  check(shard);
}

// bf16 buffers: the GPU's rounding is the host's, bit for bit, and kernels
// on bf16 buffers (run on f32 copies) agree with the CPU backend's within
// one bf16 rounding; the global norm widens one gradient at a time.
TEST_F(CudaKernels, Bf16Storage) {
  Tensor values = normal({4096}, 3);
  std::vector<uint16_t> host(values.f.size());
  for (size_t e = 0; e < host.size(); ++e)
    host[e] = toBf16(values.f[e]);
  auto *wide = static_cast<float *>(gpu->allocateArena(4096 * 4));
  auto *half = static_cast<uint16_t *>(gpu->allocateArena(4096 * 2));
  gpu->upload(wide, values.f.data(), 4096 * 4);
  gpu->narrow(half, wide, 4096, false, Stream::Compute);
  std::vector<uint16_t> rounded(4096);
  gpu->download(rounded.data(), half, 4096 * 2);
  EXPECT_EQ(rounded, host);
  gpu->widen(wide, half, 4096, Stream::Comm);
  gpu->synchronize();
  std::vector<float> back(4096);
  gpu->download(back.data(), wide, 4096 * 4);
  for (size_t e = 0; e < back.size(); ++e)
    ASSERT_EQ(back[e], fromBf16(host[e])) << e;

  // linear (x W^T + b) and an accumulating add, on bf16 buffers.
  struct Bf16Tensor {
    std::vector<int64_t> shape;
    std::vector<uint16_t> h;
  };
  auto make = [](std::vector<int64_t> shape) {
    Tensor t = normal(shape);
    Bf16Tensor b{shape, {}};
    for (float x : t.f)
      b.h.push_back(toBf16(x));
    return b;
  };
  for (std::string kernel : {"linear", "add"}) {
    SCOPED_TRACE(kernel);
    std::vector<Bf16Tensor> ins =
        kernel == "linear"
            ? std::vector<Bf16Tensor>{make({70, 48}), make({96, 48}),
                                      make({96})}
            : std::vector<Bf16Tensor>{make({70, 96}), make({70, 96})};
    Bf16Tensor cpuOut = make({70, 96}), gpuOut = cpuOut;
    auto refTo = [](Bf16Tensor &t, uint16_t *data) {
      TensorRef r;
      r.h = data;
      r.shape = &t.shape;
      r.n = int64_t(t.h.size());
      return r;
    };
    std::vector<TensorRef> cpuIns, gpuIns;
    for (Bf16Tensor &t : ins)
      cpuIns.push_back(refTo(t, t.h.data()));
    bool accumulate = kernel == "add";
    cpu->launch(kernel, cpuIns, {refTo(cpuOut, cpuOut.h.data())}, {accumulate},
                json::object(), KernelContext{});
    for (Bf16Tensor &t : ins) {
      auto *at = static_cast<uint16_t *>(gpu->allocateArena(t.h.size() * 2));
      gpu->upload(at, t.h.data(), t.h.size() * 2);
      gpuIns.push_back(refTo(t, at));
    }
    auto *out =
        static_cast<uint16_t *>(gpu->allocateArena(gpuOut.h.size() * 2));
    gpu->upload(out, gpuOut.h.data(), gpuOut.h.size() * 2);
    gpu->launch(kernel, gpuIns, {refTo(gpuOut, out)}, {accumulate},
                json::object(), KernelContext{});
    gpu->download(gpuOut.h.data(), out, gpuOut.h.size() * 2);
    for (size_t e = 0; e < cpuOut.h.size(); ++e) {
      float want = fromBf16(cpuOut.h[e]), got = fromBf16(gpuOut.h[e]);
      ASSERT_LE(std::fabs(got - want), 1e-2 * (1 + std::fabs(want)))
          << "element " << e;
    }
  }
}

TEST_F(CudaKernels, Bf16GradientNorm) {
  std::vector<std::vector<int64_t>> shapes = {{1000}, {33, 7}};
  std::vector<std::vector<uint16_t>> grads;
  for (auto &shape : shapes) {
    Tensor t = normal(shape);
    std::vector<uint16_t> h;
    for (float x : t.f)
      h.push_back(toBf16(x));
    grads.push_back(std::move(h));
  }
  std::vector<int64_t> scalar = {1};
  json params = {{"weights", {1.0, 0.5}}};
  auto run = [&](Device &d, bool onGpu) {
    std::vector<TensorRef> ins;
    for (size_t k = 0; k < grads.size(); ++k) {
      TensorRef r;
      r.h = grads[k].data();
      if (onGpu) {
        r.h = static_cast<uint16_t *>(d.allocateArena(grads[k].size() * 2));
        d.upload(r.h, grads[k].data(), grads[k].size() * 2);
      }
      r.shape = &shapes[k];
      r.n = int64_t(grads[k].size());
      ins.push_back(r);
    }
    float value = 0;
    TensorRef out;
    out.f = onGpu ? static_cast<float *>(d.allocateArena(4)) : &value;
    out.shape = &scalar;
    out.n = 1;
    d.launch("grad_sumsq", ins, {out}, {false}, params, KernelContext{});
    if (onGpu)
      d.download(&value, out.f, 4);
    return value;
  };
  float want = run(*cpu, false), got = run(*gpu, true);
  EXPECT_NEAR(got, want, 1e-5 * want);
}

} // namespace
