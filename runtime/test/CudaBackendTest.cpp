//===- CudaBackendTest.cpp - The CUDA backend against the CPU kernels -----===//
//
// Host-side cases (launch configuration, limits against the example
// models, errors without a GPU) always run. The kernel cases run every
// kernel of the plan format on random inputs on both backends, through the
// Device interface the executor uses, and compare, once with f32 buffers
// and once with bf16 ones; without a GPU they skip with the reason. Built
// against the CUDA emulator (partita-cuda-emulated-tests), the same cases
// run the kernels on the CPU.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudnnAttention.h"
#include "cuda/Kernels.h"
#include "cuda/LaunchConfig.h"
#include "partita/runtime/Bf16.h"
#include "partita/runtime/Cuda.h"
#include "partita/runtime/Plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

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
  // A pack of 16 bytes of bf16 a thread.
  EXPECT_EQ(kPack * 2, 16);
  EXPECT_EQ(blocksForPacks(256 * kPack), 1u);
  EXPECT_EQ(blocksForPacks(256 * kPack + 1), 2u);
  EXPECT_EQ(normThreads(64), 32);
  EXPECT_EQ(normThreads(32 * kPack + 1), 64);
  EXPECT_EQ(normThreads(4096), kNormThreads);
  EXPECT_EQ(normThreads(kMaxNormWidth), kNormThreads);
  // Narrow rows: a power of two of lanes, a pack each; a head of 128 takes
  // 16, of 20 columns 4; rows over 32 packs go a block a row.
  EXPECT_EQ(normRowLanes(8), 1);
  EXPECT_EQ(normRowLanes(20), 4);
  EXPECT_EQ(normRowLanes(128), 16);
  EXPECT_EQ(normRowLanes(kNarrowNormPacks * kPack), 32);
  EXPECT_EQ(normRowLanes(kNarrowNormPacks * kPack + 1), 0);
  EXPECT_EQ(headDimBucket(16), 32);
  EXPECT_EQ(headDimBucket(80), 128);
  EXPECT_EQ(headDimBucket(128), 128);
  EXPECT_EQ(headDimBucket(256), 256);
  // A row's lanes hold 16 columns each and lie within one warp.
  EXPECT_EQ(rowLanes<32>(), 2);
  EXPECT_EQ(rowLanes<256>(), 16);
  EXPECT_EQ(attentionRowsPerBlock<64>(), 64);
  EXPECT_EQ(attentionRowBlocks<64>(8192), 128u);
  EXPECT_EQ(attentionRowBlocks<128>(100), 4u);
  EXPECT_EQ(attentionRowBlocks<256>(16), 1u);
  // Two tiles of keys (or queries) in static shared memory: 32 KiB of the
  // 48 KiB a block may declare, for every head-dimension bucket.
  for (int bytes : {2 * keyTile<32>() * 32 * 4, 2 * keyTile<64>() * 64 * 4,
                    2 * keyTile<128>() * 128 * 4, 2 * keyTile<256>() * 256 * 4})
    EXPECT_EQ(bytes, 32 * 1024);
  // The tensor-core attention's shared memory fits an sm_80 block.
  for (int bytes : {TcLayout<32>::forwardBytes, TcLayout<32>::queryBytes,
                    TcLayout<32>::keyBytes, TcLayout<64>::forwardBytes,
                    TcLayout<64>::queryBytes, TcLayout<64>::keyBytes,
                    TcLayout<128>::forwardBytes, TcLayout<128>::queryBytes,
                    TcLayout<128>::keyBytes})
    EXPECT_LE(bytes, kMaxSharedBytes);
  // The register-resident kernels take no more than the WMMA ones, whose
  // sizes attentionOnTensorCores checks; ldmatrix reads 16-byte rows, and
  // the 8 rows of one of its matrices fall in distinct 16-byte bank groups.
  auto checkRegisterLayout = [](auto layout) {
    using L = decltype(layout);
    EXPECT_LE(L::registerForwardBytes, L::forwardBytes);
    EXPECT_LE(L::registerQueryBytes, L::queryBytes);
    EXPECT_LE(L::registerKeyBytes, L::keyBytes);
    EXPECT_EQ(L::ldh * 2 % 16, 0);
    std::set<int> groups;
    for (int row = 0; row < 8; ++row)
      groups.insert(row * L::ldh * 2 / 16 % 8);
    EXPECT_EQ(groups.size(), 8u) << L::ldh;
  };
  checkRegisterLayout(TcLayout<32>());
  checkRegisterLayout(TcLayout<64>());
  checkRegisterLayout(TcLayout<128>());
  EXPECT_EQ(maxNormWidth(), kMaxNormWidth);
  EXPECT_EQ(maxHeadDim(), kMaxHeadDim);
}

// Multi-tensor launches: K tensors a launch, each launch's joined index
// space ending where its last tensor does; empty tensors take no elements.
TEST(CudaHost, TensorListsTakeKTensorsALaunch) {
  using namespace partita::runtime::cuda;
  std::vector<int64_t> lengths;
  for (int k = 0; k < 37; ++k)
    lengths.push_back(k % 5 == 0 ? 0 : k);
  std::vector<std::vector<int64_t>> launches;
  std::vector<int64_t> totals;
  forEachTensorList<16>(
      lengths, [](int64_t n) { return n; },
      [&](const TensorList<int64_t, 16> &list, int64_t elements) {
        launches.emplace_back(list.tensors, list.tensors + list.count);
        totals.push_back(elements);
        EXPECT_EQ(list.end[list.count - 1], elements);
        for (int k = 0; k < list.count; ++k)
          EXPECT_EQ(list.end[k] - (k ? list.end[k - 1] : 0), list.tensors[k]);
      });
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].size(), 16u);
  EXPECT_EQ(launches[1].size(), 16u);
  EXPECT_EQ(launches[2].size(), 5u);
  std::vector<int64_t> joined;
  for (auto &l : launches)
    joined.insert(joined.end(), l.begin(), l.end());
  EXPECT_EQ(joined, lengths);
  int64_t sum = 0;
  for (int64_t t : totals)
    sum += t;
  EXPECT_EQ(sum, std::accumulate(lengths.begin(), lengths.end(), int64_t(0)));
}

TEST(CudaHost, AttentionOnTensorCoresTakesBf16WithHeadDimensionUpTo128) {
  using namespace partita::runtime::cuda;
  In f32, bf16{nullptr, true};
  AttentionShape shape{1, 8192, 32, 8, 128, true, 0, kMaxSharedBytes};
  EXPECT_TRUE(attentionOnTensorCores(shape, bf16, bf16, bf16));
  EXPECT_FALSE(attentionOnTensorCores(shape, f32, bf16, bf16));
  EXPECT_FALSE(attentionOnTensorCores(shape, bf16, bf16, f32));
  for (int64_t d : {16, 20, 32, 64, 80, 96, 128}) {
    shape.d = d;
    EXPECT_TRUE(attentionOnTensorCores(shape, bf16, bf16, bf16)) << d;
  }
  shape.d = 256;
  EXPECT_FALSE(attentionOnTensorCores(shape, bf16, bf16, bf16));
  // An sm_86 or sm_89 block (99 KiB) holds the WMMA kernels' tiles of heads
  // up to 32 only, and the register-resident kernels' of every head.
  shape.sharedBytes = 99 * 1024;
  for (int64_t d : {16, 32, 48, 64, 128}) {
    shape.d = d;
    setenv("PARTITA_CUDA_ATTENTION", "wmma", 1);
    EXPECT_EQ(attentionOnTensorCores(shape, bf16, bf16, bf16), d <= 32) << d;
    for (const char *family : {"mma", "mma-atomic", "cudnn"}) {
      setenv("PARTITA_CUDA_ATTENTION", family, 1);
      EXPECT_TRUE(attentionOnTensorCores(shape, bf16, bf16, bf16))
          << family << " " << d;
    }
    unsetenv("PARTITA_CUDA_ATTENTION");
  }
}

TEST(CudaHost, AttentionKernelsComeFromTheEnvironment) {
  using namespace partita::runtime::cuda;
  // Unset: cuDNN's where the build has it, else the register-resident
  // kernels (the fastest on an H200, docs/gpu.md).
  unsetenv("PARTITA_CUDA_ATTENTION");
  EXPECT_FALSE(attentionKernelsNamed());
  EXPECT_EQ(attentionKernels(), cudnnBuilt() ? AttentionKernels::Cudnn
                                             : AttentionKernels::Registers);
  EXPECT_EQ(ownAttentionKernels(), AttentionKernels::Registers);
  setenv("PARTITA_CUDA_ATTENTION", "mma", 1);
  EXPECT_TRUE(attentionKernelsNamed());
  EXPECT_EQ(attentionKernels(), AttentionKernels::Registers);
  setenv("PARTITA_CUDA_ATTENTION", "mma-atomic", 1);
  EXPECT_EQ(attentionKernels(), AttentionKernels::RegistersSummedDq);
  setenv("PARTITA_CUDA_ATTENTION", "wmma", 1);
  EXPECT_EQ(attentionKernels(), AttentionKernels::Wmma);
  // cuDNN's launches aside, the rest run on mma.
  setenv("PARTITA_CUDA_ATTENTION", "cudnn", 1);
  EXPECT_EQ(attentionKernels(), AttentionKernels::Cudnn);
  EXPECT_EQ(ownAttentionKernels(), AttentionKernels::Registers);
  setenv("PARTITA_CUDA_ATTENTION", "flash", 1);
  try {
    attentionKernels();
    ADD_FAILURE() << "PARTITA_CUDA_ATTENTION=flash was taken";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "PARTITA_CUDA_ATTENTION=flash: expected wmma, mma, "
                           "mma-atomic or cudnn");
  }
  unsetenv("PARTITA_CUDA_ATTENTION");
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

/// The kernel called `name`, which the registry must have.
Kernel named(const std::string &name) {
  std::optional<Kernel> kernel = partita::plan::kernelNamed(name);
  if (!kernel)
    throw std::invalid_argument("no kernel '" + name + "'");
  return *kernel;
}

struct Case {
  std::string kernel;
  std::vector<Tensor> ins;
  std::vector<std::vector<int64_t>> outs;
  std::vector<bool> accumulate;
  json params = json::object();
  KernelContext ctx;
  /// Allowed |gpu - cpu| / (1 + |cpu|) of an f32 output.
  double tolerance = 2e-5;
  /// Inputs and outputs that stay f32 in the bf16 run, as plans keep them
  /// (moments, master weights, loss statistics).
  std::set<size_t> f32Ins = {}, f32Outs = {};
  /// ... of a bf16 output: both backends round once, to 2^-8 relative, so
  /// they may land a rounding apart.
  double bf16Tolerance = 1e-2;
};

/// A tensor's values as a backend stores them: f32, bf16 or int32.
struct Buffer {
  std::vector<char> bytes;
  bool bf16 = false, isInt = false;

  static Buffer of(const Tensor &t, bool bf16) {
    Buffer b;
    b.isInt = t.isInt;
    b.bf16 = bf16 && !t.isInt;
    if (b.isInt) {
      b.bytes.resize(t.i.size() * 4);
      std::memcpy(b.bytes.data(), t.i.data(), b.bytes.size());
    } else if (b.bf16) {
      std::vector<uint16_t> h(t.f.size());
      narrowBf16(t.f.data(), h.data(), int64_t(h.size()));
      b.bytes.resize(h.size() * 2);
      std::memcpy(b.bytes.data(), h.data(), b.bytes.size());
    } else {
      b.bytes.resize(t.f.size() * 4);
      std::memcpy(b.bytes.data(), t.f.data(), b.bytes.size());
    }
    return b;
  }

  std::vector<float> values() const {
    int64_t n = int64_t(bytes.size()) / (bf16 ? 2 : 4);
    std::vector<float> v(n);
    if (bf16)
      widenBf16(reinterpret_cast<const uint16_t *>(bytes.data()), v.data(), n);
    else
      std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }

  /// A TensorRef of `shape` to this buffer's values at `data`.
  TensorRef ref(const std::vector<int64_t> &shape, void *data) const {
    TensorRef r;
    if (isInt)
      r.i = static_cast<int32_t *>(data);
    else if (bf16)
      r.h = static_cast<uint16_t *>(data);
    else
      r.f = static_cast<float *>(data);
    r.shape = &shape;
    r.n = int64_t(bytes.size()) / (bf16 ? 2 : 4);
    return r;
  }
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

/// `t` with its values rounded to bf16, so that f32 and bf16 runs read the
/// same values.
Tensor bf16Values(Tensor t) {
  for (float &x : t.f)
    x = fromBf16(toBf16(x));
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

  /// Runs `c` on both backends from the same inputs and initial outputs,
  /// with f32 buffers and then with bf16 ones.
  void check(Case c) { checkTogether({std::move(c)}); }

  /// Runs the launches `cases` of one kernel (with one context) on the CPU
  /// one by one and on the GPU together, through Device::launchAll when
  /// there are several, and compares each.
  void checkTogether(std::vector<Case> cases) {
    std::vector<std::vector<Tensor>> initialOuts;
    for (Case &c : cases) {
      if (!c.ctx.optimizer)
        c.ctx.optimizer = &optimizer();
      if (c.accumulate.empty())
        c.accumulate.assign(c.outs.size(), false);
      initialOuts.emplace_back();
      for (auto &shape : c.outs)
        initialOuts.back().push_back(normal(shape));
    }
    for (bool bf16 : {false, true}) {
      std::vector<Run> runs;
      for (size_t k = 0; k < cases.size(); ++k)
        runs.push_back(prepare(cases[k], initialOuts[k], bf16));
      const Case &first = cases.front();
      std::vector<partita::plan::KernelParams> params;
      for (const Case &c : cases)
        params.push_back(partita::plan::decodeParams(c.params));
      if (runs.size() == 1) {
        gpu->launch(named(first.kernel), runs[0].gpuIns, runs[0].gpuOuts,
                    first.accumulate, params[0], first.ctx);
      } else {
        std::vector<KernelCall> calls;
        for (size_t k = 0; k < runs.size(); ++k)
          calls.push_back({runs[k].gpuIns, runs[k].gpuOuts,
                           runs[k].c->accumulate, &params[k]});
        gpu->launchAll(named(first.kernel), calls, first.ctx);
      }
      for (const Run &r : runs)
        compare(r, bf16);
    }
  }

  /// The outputs of `c` on the CPU, in f32, from zeros.
  /// Launches `c` on the CPU backend, on host buffers.
  void launchOnCpu(const Case &c, std::vector<Buffer> &ins,
                   std::vector<Buffer> &outs,
                   const std::vector<bool> &accumulate) {
    std::vector<TensorRef> inRefs, outRefs;
    for (size_t k = 0; k < ins.size(); ++k)
      inRefs.push_back(ins[k].ref(c.ins[k].shape, ins[k].bytes.data()));
    for (size_t k = 0; k < outs.size(); ++k)
      outRefs.push_back(outs[k].ref(c.outs[k], outs[k].bytes.data()));
    cpu->launch(named(c.kernel), inRefs, outRefs, accumulate,
                partita::plan::decodeParams(c.params), c.ctx);
  }

  std::vector<Tensor> cpuOutputs(const Case &c) {
    std::vector<Buffer> ins, outs;
    for (const Tensor &t : c.ins)
      ins.push_back(Buffer::of(t, false));
    for (size_t k = 0; k < c.outs.size(); ++k) {
      Tensor zeros;
      zeros.shape = c.outs[k];
      zeros.f.assign(zeros.size(), 0.0f);
      outs.push_back(Buffer::of(zeros, false));
    }
    launchOnCpu(c, ins, outs, std::vector<bool>(c.outs.size(), false));
    std::vector<Tensor> results;
    for (size_t k = 0; k < outs.size(); ++k)
      results.push_back({c.outs[k], outs[k].values()});
    return results;
  }

  /// One case's buffers, its CPU results, and its buffers on the GPU.
  struct Run {
    const Case *c;
    std::vector<Buffer> outs, cpuOuts;
    std::vector<TensorRef> gpuIns, gpuOuts;
  };

  /// Runs `c` on the CPU and uploads its inputs and initial outputs.
  Run prepare(const Case &c, const std::vector<Tensor> &initialOuts,
              bool bf16) {
    Run r;
    r.c = &c;
    std::vector<Buffer> ins;
    for (size_t k = 0; k < c.ins.size(); ++k)
      ins.push_back(Buffer::of(c.ins[k], bf16 && !c.f32Ins.count(k)));
    for (size_t k = 0; k < initialOuts.size(); ++k)
      r.outs.push_back(Buffer::of(initialOuts[k], bf16 && !c.f32Outs.count(k)));
    // The CPU runs on host copies.
    r.cpuOuts = r.outs;
    launchOnCpu(c, ins, r.cpuOuts, c.accumulate);
    // The GPU runs on one arena holding every tensor, 4-byte aligned as
    // plans may place them.
    auto padded = [](const Buffer &b) {
      return (int64_t(b.bytes.size()) + 3) / 4 * 4;
    };
    int64_t bytes = 0;
    for (const std::vector<Buffer> *group : {&ins, &r.outs})
      for (const Buffer &b : *group)
        bytes += padded(b);
    char *arena = static_cast<char *>(gpu->allocateArena(bytes));
    for (size_t k = 0; k < ins.size(); ++k) {
      gpu->upload(arena, ins[k].bytes.data(), int64_t(ins[k].bytes.size()));
      r.gpuIns.push_back(ins[k].ref(c.ins[k].shape, arena));
      arena += padded(ins[k]);
    }
    for (size_t k = 0; k < r.outs.size(); ++k) {
      gpu->upload(arena, r.outs[k].bytes.data(),
                  int64_t(r.outs[k].bytes.size()));
      r.gpuOuts.push_back(r.outs[k].ref(c.outs[k], arena));
      arena += padded(r.outs[k]);
    }
    return r;
  }

  /// Compares the GPU's outputs of `r` with the CPU's.
  void compare(const Run &r, bool bf16) {
    const Case &c = *r.c;
    SCOPED_TRACE(c.kernel + (bf16 ? " (bf16) " : " (f32) ") + c.params.dump());
    for (size_t k = 0; k < r.outs.size(); ++k) {
      Buffer got = r.outs[k];
      void *at = r.gpuOuts[k].h ? static_cast<void *>(r.gpuOuts[k].h)
                                : static_cast<void *>(r.gpuOuts[k].f);
      gpu->download(got.bytes.data(), at, int64_t(got.bytes.size()));
      std::vector<float> gpuValues = got.values(),
                         cpuValues = r.cpuOuts[k].values();
      double tolerance = got.bf16 ? c.bf16Tolerance : c.tolerance;
      double worst = 0;
      int64_t where = 0;
      for (size_t e = 0; e < gpuValues.size(); ++e) {
        double want = cpuValues[e];
        double error = std::fabs(gpuValues[e] - want) / (1 + std::fabs(want));
        if (!(error <= worst)) { // NaN counts as the worst
          worst = std::isnan(error) ? INFINITY : error;
          where = int64_t(e);
        }
      }
      EXPECT_LE(worst, tolerance)
          << "output " << k << " element " << where << ": gpu "
          << gpuValues[where] << ", cpu " << cpuValues[where];
    }
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
  // The f32 bias lands 4 bytes past a 16-byte boundary, where the GEMM's
  // epilogue cannot read it: a kernel adds it.
  check({"linear", {normal({1, 3, 5}), normal({8, 5}), normal({8})}, {{3, 8}}});
  // bf16 operands with an f32 result; and an f32 input among bf16 ones,
  // which cuBLASLt does not take (the launch runs on f32 copies).
  Case wideResult{"linear", {normal({70, 48}), normal({96, 48})}, {{70, 96}}};
  wideResult.f32Outs = {0};
  check(wideResult);
  Case mixed{"linear", {normal({70, 48}), normal({96, 48})}, {{70, 96}}};
  mixed.f32Ins = {0};
  check(mixed);
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
  // 100 tokens of 64: many repeat, so rows sum several gradients.
  for (bool acc : {false, true})
    check({"embedding_bwd",
           {normal({2, 50, 32}), integers({2, 50}, 64)},
           {{64, 32}},
           {acc},
           {{"vocab_parts", 1}}});
  // Rows of 13: packs start off 16 bytes and the last one is partial.
  check({"embedding",
         {normal({64, 13}), integers({2, 50}, 64)},
         {{2, 50, 13}},
         {},
         {{"vocab_parts", 1}}});
  check({"embedding_bwd",
         {normal({2, 50, 13}), integers({2, 50}, 64)},
         {{64, 13}},
         {},
         {{"vocab_parts", 1}}});
  // Rank 1's half of the table: the other half's tokens are skipped.
  Case tpBackward{"embedding_bwd",
                  {normal({2, 50, 32}), integers({2, 50}, 64)},
                  {{32, 32}},
                  {true},
                  {{"vocab_parts", 2}}};
  tpBackward.ctx.tpRank = 1;
  check(tpBackward);
  // Gemma's scaled embeddings, forward and backward, on rank 1 of 2.
  Case scaled{"embedding",
              {normal({32, 13}), integers({2, 50}, 64)},
              {{2, 50, 13}},
              {},
              {{"vocab_parts", 2}, {"scale", 3.6055512754639891}}};
  scaled.ctx.tpRank = 1;
  check(scaled);
  scaled.kernel = "embedding_bwd";
  scaled.ins = {normal({2, 50, 13}), integers({2, 50}, 64)};
  scaled.outs = {{32, 13}};
  scaled.accumulate = {true};
  check(scaled);
  check({"position_embedding",
         {normal({2, 50, 32}), normal({50, 32})},
         {{2, 50, 32}}});
  check({"position_embedding_bwd", {normal({2, 50, 32})}, {{50, 32}}, {true}});
  // A table longer than the sequence: the rows past it are zeroed.
  check({"position_embedding_bwd", {normal({2, 50, 32})}, {{64, 32}}});
  Case slice{"shard_slice",
             {normal({3, 8, 6})},
             {{3, 4, 6}},
             {},
             {{"dim", 1}, {"group", "tp"}}};
  slice.ctx.groupRank = 1;
  slice.ctx.groupSize = 2;
  check(slice);
  // Rows of 15 from column 15: partial packs, off 16 bytes.
  slice.ins = {normal({3, 6, 5})};
  slice.outs = {{3, 3, 5}};
  check(slice);
}

TEST_F(CudaKernels, Norms) {
  // Rows of 100 and 4100 start off 16 bytes in bf16 and end in a partial
  // pack; threads take 1 to 4 packs of a row (4096, 4100 and 6000, 8200,
  // and 16384, the widest row the kernels take).
  for (int64_t h :
       {int64_t(64), int64_t(100), int64_t(200), int64_t(4096), int64_t(4100),
        int64_t(6000), int64_t(8200), cuda::kMaxNormWidth}) {
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
  // Per-head norms (query and key norms): 6 heads of 64, 20, 12 and 8
  // columns (8, 4, 2 and 1 lanes a row), each normalised on its own with
  // the same weight; heads of 20 and 12 start off 16 bytes in bf16.
  for (int64_t d : {int64_t(64), int64_t(20), int64_t(12), int64_t(8)}) {
    check({"rms_norm",
           {normal({2, 19, 6 * d}), normal({d})},
           {{2, 19, 6 * d}},
           {},
           {{"eps", 1e-6}}});
    check({"rms_norm_bwd",
           {normal({2, 19, 6 * d}), normal({2, 19, 6 * d}), normal({d})},
           {{2, 19, 6 * d}, {d}},
           {false, true},
           {{"eps", 1e-6}},
           {},
           5e-5});
    check({"layer_norm_bwd",
           {normal({2, 19, 6 * d}), normal({2, 19, 6 * d}), normal({d})},
           {{2, 19, 6 * d}, {d}, {d}},
           {},
           {{"eps", 1e-6}},
           {},
           5e-5});
  }
  // Rows of 64 over several blocks of the narrow kernels (32 rows a block
  // forward, 512 backward), the last one partial.
  check({"rms_norm",
         {normal({1200, 64}), normal({64})},
         {{1200, 64}},
         {},
         {{"eps", 1e-6}}});
  check({"layer_norm_bwd",
         {normal({1200, 64}), normal({1200, 64}), normal({64})},
         {{1200, 64}, {64}, {64}},
         {},
         {{"eps", 1e-6}},
         {},
         5e-5});
  // Gemma's weights offset from one, with rows of each backward kernel
  // (narrow rows, 1 and 2 packs a thread, and column by column).
  for (int64_t h :
       {int64_t(100), int64_t(1000), int64_t(4100), int64_t(16384)}) {
    check({"rms_norm",
           {normal({9, h}), normal({h})},
           {{9, h}},
           {},
           {{"eps", 1e-6}, {"weight_offset", 1.0}}});
    check({"rms_norm_bwd",
           {normal({9, h}), normal({9, h}), normal({h})},
           {{9, h}, {h}},
           {false, true},
           {{"eps", 1e-6}, {"weight_offset", 1.0}},
           {},
           5e-5});
  }
  // A layer norm without a bias.
  check({"layer_norm_bwd",
         {normal({37, 300}), normal({37, 300}), normal({300})},
         {{37, 300}, {300}},
         {},
         {{"eps", 1e-5}},
         {},
         5e-5});
  check({"bias_add", {normal({5, 7, 24}), normal({24})}, {{5, 7, 24}}});
  // A bias of 13: a pack of 8 elements wraps around it.
  check({"bias_add", {normal({5, 7, 13}), normal({13})}, {{5, 7, 13}}, {true}});
  // 350 rows: the column sums run over several slabs of rows.
  check({"bias_add_bwd",
         {normal({5, 70, 24})},
         {{5, 70, 24}, {24}},
         {false, true}});
  check({"bias_add_bwd", {normal({5, 70, 13})}, {{5, 70, 13}, {13}}});
}

TEST_F(CudaKernels, Rotary) {
  json plain = {{"num_heads", 4}, {"rotary_dim", 16}, {"theta", 10000.0}};
  json partial = {{"num_heads", 2},          {"rotary_dim", 32},
                  {"theta", 500000.0},       {"scaling", "llama3"},
                  {"scaling_factor", 8.0},   {"low_freq_factor", 1.0},
                  {"high_freq_factor", 4.0}, {"original_max_positions", 64}};
  // The rotated channels scaled by an attention factor, on 6 of 16.
  json yarn = {{"num_heads", 4},        {"rotary_dim", 6},
               {"theta", 10000.0},      {"scaling", "yarn"},
               {"scaling_factor", 4.0}, {"original_max_positions", 64},
               {"beta_fast", 32.0},     {"beta_slow", 1.0},
               {"truncate", false},     {"attention_factor", 1.25}};
  json longrope = {{"num_heads", 4},
                   {"rotary_dim", 16},
                   {"theta", 10000.0},
                   {"scaling", "longrope"},
                   {"original_max_positions", 64},
                   {"attention_factor", 0.75},
                   {"frequency_factors", {1, 1.5, 2, 3, 4, 6, 8, 16}}};
  for (const char *kernel : {"rotary", "rotary_bwd"}) {
    check({kernel, {normal({2, 300, 64})}, {{2, 300, 64}}, {}, plain});
    check({kernel, {normal({2, 300, 128})}, {{2, 300, 128}}, {true}, partial});
    check({kernel, {normal({2, 100, 64})}, {{2, 100, 64}}, {}, yarn});
    check({kernel, {normal({2, 100, 64})}, {{2, 100, 64}}, {}, longrope});
    // Heads of 22 rotating 12 columns: the pairs' packs and the copied
    // columns' are partial, and heads start off 16 bytes.
    check({kernel,
           {normal({2, 30, 66})},
           {{2, 30, 66}},
           {},
           {{"num_heads", 3}, {"rotary_dim", 12}, {"theta", 10000.0}}});
    // 10 heads of 8: a thread takes up to 8 heads, so two groups, the
    // second of 2.
    check({kernel,
           {normal({2, 30, 80})},
           {{2, 30, 80}},
           {},
           {{"num_heads", 10}, {"rotary_dim", 8}, {"theta", 10000.0}}});
  }
}

/// The attention kernel cases, with one family of tensor-core kernels.
class CudaAttention : public CudaKernels {
protected:
  struct Shape {
    int64_t s, heads, kv, d;
    bool causal;
    int64_t window;
  };

  void TearDown() override {
    unsetenv("PARTITA_CUDA_ATTENTION");
    unsetenv("PARTITA_EMULATOR_COPIES");
    unsetenv("PARTITA_EMULATOR_SHARED_BYTES");
    if (usual)
      std::swap(gpu, usual);
    usual.reset();
  }
  /// Runs the cases on `device` until the test ends.
  void runOn(std::unique_ptr<Device> device) {
    usual = std::move(device);
    std::swap(gpu, usual);
  }
  /// The usual device while a test runs on another.
  std::unique_ptr<Device> usual;
  /// The cases with `family`'s kernels, and on the emulator their
  /// asynchronous copies landing at `copiesLand` (wait or issue); `only`
  /// instead of the usual shapes where given.
  void checkFamily(const char *family, const char *copiesLand,
                   std::vector<Shape> only = {}) {
    setenv("PARTITA_CUDA_ATTENTION", family, 1);
    setenv("PARTITA_EMULATOR_COPIES", copiesLand, 1);
    // With bf16 buffers, heads up to 128 run on tensor cores, which round P
    // and dS to bf16 for their products: the tolerance allows that on top of
    // the outputs' rounding. Heads of 16, 18, 21, 50, 80 and 90 fill part of
    // their tiles, in each size of tile (18, 21, 50 and 90 are loaded a value
    // at a time; the one-pass backward sums dq 4 values an atomic where heads
    // are a multiple of 4, else one a value); 60 rows are fewer than a
    // tile's 64; windows of 100 and 200 keys cut some tiles and leave others
    // whole; 256 runs on CUDA cores. Each
    // family of tensor-core kernels (PARTITA_CUDA_ATTENTION) is a test of its
    // own, so that a GPU's results say which one fails.
    std::vector<Shape> usualShapes = {
        {100, 4, 2, 16, true, 0},   {130, 2, 2, 64, true, 0},
        {70, 4, 1, 128, false, 0},  {150, 4, 2, 32, true, 16},
        {200, 4, 2, 128, true, 50}, {90, 4, 2, 21, true, 0},
        {80, 2, 1, 80, true, 30},   {70, 2, 2, 256, true, 0},
        {60, 2, 1, 18, true, 0},    {300, 2, 1, 18, true, 200},
        {200, 2, 1, 50, true, 100}, {70, 2, 2, 90, false, 0}};
    for (Shape a : only.empty() ? usualShapes : only) {
      SCOPED_TRACE(std::string(family) + ", copies land at " + copiesLand);
      json p = {{"num_heads", a.heads},
                {"num_kv_heads", a.kv},
                {"causal", a.causal},
                {"window", a.window}};
      // Of bf16 values: the log-sum-exp the backward reads must come from the
      // scores it recomputes, in both runs.
      Tensor q = bf16Values(normal({2, a.s, a.heads * a.d})),
             k = bf16Values(normal({2, a.s, a.kv * a.d})),
             v = bf16Values(normal({2, a.s, a.kv * a.d}));
      // The output, and the log-sum-exp per row that plans keep (f32).
      Case forward{"attention", {q, k, v}, {q.shape, {2, a.heads, a.s}}, {}, p,
                   {},          5e-5};
      forward.bf16Tolerance = 2e-2;
      forward.f32Outs = {1};
      check(forward);
      // The backward reads o, rounded as the plan keeps it, for D = dO . O.
      std::vector<Tensor> kept = cpuOutputs(forward);
      Case backward{
          "attention_bwd",
          {normal({2, a.s, a.heads * a.d}), q, k, v, kept[0], kept[1]},
          {q.shape, k.shape, v.shape},
          {false, true, false},
          p,
          {},
          2e-4};
      backward.bf16Tolerance = 2e-2;
      backward.f32Ins = {5};
      check(backward);
      // Every gradient written, as plans write them (and cuDNN takes).
      Case written = backward;
      written.accumulate = {false, false, false};
      check(written);
      // A plan that keeps no log-sum-exp: the backward finds it first; and
      // dq added to, as dk is.
      backward.ins.pop_back();
      backward.accumulate[0] = true;
      check(backward);
    }
  }
};

TEST_F(CudaAttention, WmmaKernels) { checkFamily("wmma", "wait"); }

// On the emulator, the register-resident kernels' copies land at their
// wait, and again at their issue: the two extremes a GPU may choose between.
TEST_F(CudaAttention, RegisterKernels) {
  checkFamily("mma", "wait");
  checkFamily("mma", "issue");
}

// The one-pass backward: dq summed across key blocks by atomics.
TEST_F(CudaAttention, RegisterKernelsSummingDq) {
  checkFamily("mma-atomic", "wait");
  checkFamily("mma-atomic", "issue");
}

// cuDNN's fused engines (CudnnAttention.h) where they take the launch:
// bf16, heads a multiple of 8 without a window, gradients written; mma
// elsewhere.
TEST_F(CudaAttention, CudnnKernels) {
  if (!partita::runtime::cuda::cudnnBuilt())
    GTEST_SKIP() << "this build has no cuDNN";
  using partita::runtime::cuda::CudnnAttention;
  setenv("PARTITA_CUDA_ATTENTION", "cudnn", 1);
  runOn(createCudaDevice(0, GemmPrecision::FP32));
  int64_t before = CudnnAttention::executions();
  checkFamily("cudnn", "wait");
  // Sequences in whole tiles of 128, which every cuDNN the build takes
  // runs both ways; one shape with and without a window, as a model with
  // windowed and global layers has (one plan each).
  checkFamily("cudnn", "wait",
              {{128, 4, 2, 64, true, 0},
               {128, 4, 2, 64, true, 32},
               {256, 4, 1, 128, false, 0}});
  EXPECT_GT(CudnnAttention::executions(), before)
      << "cuDNN ran none of the launches (plan-run's notes say why)";
}

// Where a block may have 99 KiB of shared memory (sm_86, sm_89; on the
// emulator, PARTITA_EMULATOR_SHARED_BYTES), every kernel of the
// register-resident families launches for heads of 128, which only they
// run on tensor cores there; a GPU with more runs the cases as above.
TEST_F(CudaAttention, RegisterKernelsFitBlocksOf99KiB) {
  setenv("PARTITA_EMULATOR_SHARED_BYTES", "101376", 1);
  runOn(createCudaDevice(0, GemmPrecision::FP32));
  for (const char *family : {"mma", "mma-atomic"})
    checkFamily(family, "wait", {{150, 4, 2, 128, true, 0}});
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
  // A thread takes 8 elements (16 bytes of bf16) at a time, by 16-byte
  // accesses where the operand is 16-byte aligned. The test arena places
  // operands 4-byte aligned one after another, so with n = 1004 the output
  // is aligned in f32 but not in bf16, and with n = 1003 neither: a kernel
  // mixes whole aligned packs, unaligned ones and a partial last pack.
  for (int64_t n : {1003, 1004, 7}) {
    check({"silu", {normal({n})}, {{n}}, {true}});
    check({"swiglu_bwd",
           {normal({n}), normal({n}), normal({n})},
           {{n}, {n}},
           {true, false}});
  }
  check({"silu_bwd", {normal({1000}), normal({1000})}, {{1000}}});
  for (const char *approximate : {"none", "tanh"}) {
    check({"geglu",
           {normal({1003}), normal({1003})},
           {{1003}},
           {true},
           {{"approximate", approximate}}});
    check({"geglu_bwd",
           {normal({1003}), normal({1003}), normal({1003})},
           {{1003}, {1003}},
           {false, true},
           {{"approximate", approximate}}});
  }
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
  // In bf16 plans the logits and their gradient are bf16, the statistics
  // f32.
  Case ceMax{"ce_max", {logits}, {{rows}}, {}, p, rank1};
  ceMax.f32Outs = {0};
  check(ceMax);
  Case ceStats{"ce_stats", {logits, max, labels}, {{rows, 2}}, {}, p, rank1};
  ceStats.f32Ins = {1};
  ceStats.f32Outs = {0};
  check(ceStats);
  Case ceLoss{"ce_loss", {max, stats}, {{1}}, {}, p, rank1};
  ceLoss.f32Ins = {0, 1};
  ceLoss.f32Outs = {0};
  check(ceLoss);
  Case ceBackward{"ce_bwd", {logits, max, stats, labels}, {{rows, v}}, {}, p,
                  rank1};
  ceBackward.f32Ins = {1, 2};
  check(ceBackward);
  // Rank 0's part of 256 rows, all within the vocabulary: rows of whole
  // packs, 16-byte aligned.
  json p0 = {{"vocab_parts", 2}, {"vocab_size", 512}, {"scale", 1.0 / 96}};
  Tensor logits0 = normal({rows, 256}, 3),
         labels0 = integers({rows}, int32_t(512));
  Case max0{"ce_max", {logits0}, {{rows}}, {}, p0};
  max0.f32Outs = {0};
  check(max0);
  Case stats0{"ce_stats", {logits0, max, labels0}, {{rows, 2}}, {}, p0};
  stats0.f32Ins = {1};
  stats0.f32Outs = {0};
  check(stats0);
  Case backward0{
      "ce_bwd", {logits0, max, stats, labels0}, {{rows, 256}}, {}, p0};
  backward0.f32Ins = {1, 2};
  check(backward0);
}

TEST_F(CudaKernels, Optimizer) {
  // The global norm of bf16 gradients is f32.
  Case sumsq{"grad_sumsq", {normal({1000}), normal({33, 7})}, {{1}},
             {},           {{"weights", {1.0, 0.5}}},         {},
             1e-6};
  sumsq.f32Outs = {0};
  check(sumsq);
  Case clipping{"clip_coefficient", {positive({1})}, {{1}}};
  clipping.ins[0].f[0] = 4.0f; // norm 2 > clip 1
  clipping.f32Ins = {0};
  clipping.f32Outs = {0};
  check(clipping);
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
  // ZeRO: rank 2 of 3 updates its flat slice (with 3 elements of padding).
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
  // fourth output), whole and as a ZeRO slice with padding. The parameter
  // and gradient are bf16, the moments, clip coefficient and master f32.
  for (Case *c : {&whole, &shard}) {
    c->ins.push_back(normal(c->ins[2].shape));
    c->outs.push_back(c->ins[2].shape);
    c->f32Ins = {2, 3, 4, 5};
    c->f32Outs = {1, 2, 3};
    check(*c);
  }
  // Multi-tensor: 37 parameters of many sizes (more than one launch takes),
  // whole or as rank 2's ZeRO slice, in one launchAll; each must match its
  // own launch on the CPU. Then again with master copies.
  std::vector<Case> many;
  for (int k = 0; k < 37; ++k) {
    std::vector<int64_t> shape = {1 + k * 7 % 23, 1 + k * 13 % 61};
    int64_t pn = shape[0] * shape[1];
    bool sharded = k % 3 == 0;
    std::vector<int64_t> slice = {sharded ? (pn + 2) / 3 : pn};
    Case c{"adamw",
           {normal(shape), normal(slice), normal(slice, 0.1), positive(slice),
            clip},
           {shape, slice, slice},
           {},
           {{"weight_decay", k % 2 == 0}, {"dp_shard", sharded}}};
    c.ctx.dpRank = 2;
    c.ctx.step = 5;
    c.f32Ins = {2, 3, 4};
    c.f32Outs = {1, 2};
    many.push_back(c);
  }
  checkTogether(many);
  for (Case &c : many) {
    c.ins.push_back(normal(c.ins[2].shape));
    c.outs.push_back(c.ins[2].shape);
    c.f32Ins = {2, 3, 4, 5};
    c.f32Outs = {1, 2, 3};
  }
  checkTogether(many);
}

// Rows copied between pitches on a comm stream, as a bf16 all-gather puts
// each rank's block of every row in place: byte for byte as on the CPU.
TEST_F(CudaKernels, CopyRows) {
  std::vector<uint16_t> source(3 * 8), want(3 * 12, 0xabcd);
  for (size_t e = 0; e < source.size(); ++e)
    source[e] = uint16_t(0x7f80 + e); // infinity and NaNs among them
  auto *from = static_cast<uint16_t *>(gpu->allocateArena(source.size() * 2));
  auto *to = static_cast<uint16_t *>(gpu->allocateArena(want.size() * 2));
  gpu->upload(from, source.data(), int64_t(source.size() * 2));
  gpu->upload(to, want.data(), int64_t(want.size() * 2));
  gpu->synchronize();
  // Three rows of 5 elements, 8 apart, to 12 apart, from the third.
  gpu->copyRows(to + 2, 24, from + 1, 16, 10, 3, Stream::comm(1));
  cpu->copyRows(want.data() + 2, 24, source.data() + 1, 16, 10, 3,
                Stream::Compute);
  gpu->synchronize();
  std::vector<uint16_t> got(want.size());
  gpu->download(got.data(), to, int64_t(got.size() * 2));
  EXPECT_EQ(got, want);
}

// Rank blocks reordered as collectives reorder them, [3][4] blocks of 13
// f32 elements to [4][3], set and added to, from and to an element past a
// 16-byte boundary: as on the CPU.
TEST_F(CudaKernels, TransposeBlocks) {
  int64_t n = 3 * 4 * 13;
  Tensor source = normal({n}), initial = normal({n});
  auto *from = static_cast<float *>(gpu->allocateArena((n + 1) * 4));
  auto *to = static_cast<float *>(gpu->allocateArena((n + 1) * 4));
  gpu->upload(from + 1, source.f.data(), n * 4);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulating" : "setting");
    std::vector<float> want = initial.f, got(n);
    gpu->upload(to + 1, initial.f.data(), n * 4);
    gpu->transposeBlocks(to + 1, from + 1, 3, 4, 13, accumulate,
                         Stream::Compute);
    cpu->transposeBlocks(want.data(), source.f.data(), 3, 4, 13, accumulate,
                         Stream::Compute);
    gpu->synchronize();
    gpu->download(got.data(), to + 1, n * 4);
    EXPECT_EQ(got, want);
  }
}

// bf16 buffers: the GPU's rounding is the host's, bit for bit, both ways.
TEST_F(CudaKernels, Bf16Rounding) {
  Tensor values = normal({4096}, 3);
  values.f[0] = NAN;
  values.f[1] = INFINITY;
  values.f[2] = -0.0f;
  std::vector<uint16_t> host(values.f.size());
  narrowBf16(values.f.data(), host.data(), int64_t(host.size()));
  auto *wide = static_cast<float *>(gpu->allocateArena(4096 * 4));
  auto *half = static_cast<uint16_t *>(gpu->allocateArena(4096 * 2));
  gpu->upload(wide, values.f.data(), 4096 * 4);
  gpu->narrow(half, wide, 4096, false, Stream::Compute);
  std::vector<uint16_t> rounded(4096);
  gpu->download(rounded.data(), half, 4096 * 2);
  EXPECT_EQ(rounded, host);
  // On a group's comm stream (created here), which synchronize() waits
  // for as it does for the compute stream.
  gpu->widen(wide, half, 4096, Stream::comm(3));
  gpu->synchronize();
  std::vector<float> back(4096);
  gpu->download(back.data(), wide, 4096 * 4);
  for (size_t e = 0; e < back.size(); ++e) {
    float want = fromBf16(host[e]);
    ASSERT_TRUE(back[e] == want || (std::isnan(back[e]) && std::isnan(want)))
        << e;
  }
}

} // namespace
