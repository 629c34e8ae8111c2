//===- kernel-run.cpp - Kernels of the plan format, one launch at a time --===//
//
//   partita-kernel-run [--device cpu|cuda] < launches.json > outputs.json
//
// Runs each launch of the input on one backend's device and writes what
// its outputs hold, so that a test can hold every kernel, forward and
// backward, against an independent oracle (test/Runtime/kernel_oracle.py,
// PyTorch's autograd). The input:
//
//   {"launches": [{"kernel": "rms_norm", "params": {"eps": 1e-5},
//                  "ins": [{"shape": [2, 3], "data": [...]}, ...],
//                  "outs": [{"shape": [2, 3]}, ...],
//                  "accumulate": [false], "context": {...},
//                  "optimizer": {...}}, ...]}
//
// A buffer's `dtype` is f32 (the default), bf16 (its data rounded to bf16
// on the way in) or i32 (tokens and labels); an output may give `data`,
// what it holds before the launch (for `accumulate`), or `same_as`, the
// input whose buffer it is (adamw updates in place). `context` holds
// `step`, `tp_rank`, `dp_rank`, `group_rank` and `group_size`; `optimizer`
// the plan format's optimizer keys. The output: {"outs": [[...], ...]} per
// launch, one line each, bf16 outputs widened to f32.
//
//===----------------------------------------------------------------------===//

#include "partita/runtime/Bf16.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"
#ifdef PARTITA_HAVE_CUDA
#include "partita/runtime/Cuda.h"
#endif

#include <nlohmann/json.hpp>

#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace partita::runtime;
using json = nlohmann::json;

namespace {

/// Every buffer starts at a multiple of this many bytes, as in a plan's
/// arena, so that vectorised kernels meet the alignment they expect.
constexpr int64_t kAlignment = 256;

/// One buffer of a launch: its shape, dtype, and place in the arena.
struct Buffer {
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t elements = 1, offset = 0;
  const json *data = nullptr;
  /// For an output in an input's buffer: that input.
  int sameAs = -1;
};

Buffer readBuffer(const json &spec, const std::string &where) {
  Buffer b;
  b.shape = spec.at("shape").get<std::vector<int64_t>>();
  for (int64_t d : b.shape) {
    if (d <= 0)
      throw std::runtime_error(where + ": a dimension is not positive");
    b.elements *= d;
  }
  b.dtype = spec.value("dtype", "f32");
  if (b.dtype != "f32" && b.dtype != "bf16" && b.dtype != "i32")
    throw std::runtime_error(where + ": dtype '" + b.dtype +
                             "' is not f32, bf16 or i32");
  if (spec.contains("data")) {
    b.data = &spec.at("data");
    if (int64_t(b.data->size()) != b.elements)
      throw std::runtime_error(where + ": " + std::to_string(b.data->size()) +
                               " values for " + std::to_string(b.elements) +
                               " elements");
  }
  b.sameAs = spec.value("same_as", -1);
  return b;
}

/// The bytes that `b`'s values take in device memory.
int64_t byteSize(const Buffer &b) {
  return b.elements * (b.dtype == "bf16" ? 2 : 4);
}

/// `b`'s values as the device stores them.
std::vector<char> hostBytes(const Buffer &b) {
  std::vector<char> bytes(byteSize(b), 0);
  if (!b.data)
    return bytes;
  for (int64_t e = 0; e < b.elements; ++e) {
    const json &v = (*b.data)[e];
    if (b.dtype == "i32") {
      int32_t x = v.get<int32_t>();
      std::memcpy(&bytes[4 * e], &x, 4);
    } else if (b.dtype == "bf16") {
      uint16_t x = toBf16(v.get<float>());
      std::memcpy(&bytes[2 * e], &x, 2);
    } else {
      float x = v.get<float>();
      std::memcpy(&bytes[4 * e], &x, 4);
    }
  }
  return bytes;
}

json valuesOf(const Buffer &b, const std::vector<char> &bytes) {
  json values = json::array();
  for (int64_t e = 0; e < b.elements; ++e) {
    if (b.dtype == "i32") {
      int32_t x;
      std::memcpy(&x, &bytes[4 * e], 4);
      values.push_back(x);
    } else if (b.dtype == "bf16") {
      uint16_t x;
      std::memcpy(&x, &bytes[2 * e], 2);
      values.push_back(double(fromBf16(x)));
    } else {
      float x;
      std::memcpy(&x, &bytes[4 * e], 4);
      values.push_back(double(x));
    }
  }
  return values;
}

TensorRef refTo(const Buffer &b, char *arena) {
  TensorRef t;
  char *at = arena + b.offset;
  if (b.dtype == "i32")
    t.i = reinterpret_cast<int32_t *>(at);
  else if (b.dtype == "bf16")
    t.h = reinterpret_cast<uint16_t *>(at);
  else
    t.f = reinterpret_cast<float *>(at);
  t.shape = &b.shape;
  t.n = b.elements;
  return t;
}

Optimizer readOptimizer(const json &o) {
  Optimizer opt;
  opt.lr = o.value("lr", 1e-3);
  opt.minLr = o.value("min_lr", 0.0);
  opt.beta1 = o.value("beta1", 0.9);
  opt.beta2 = o.value("beta2", 0.999);
  opt.eps = o.value("eps", 1e-8);
  opt.weightDecay = o.value("weight_decay", 0.0);
  opt.clipNorm = o.value("clip_norm", 0.0);
  opt.warmupSteps = o.value("warmup_steps", int64_t(0));
  opt.decaySteps = o.value("decay_steps", int64_t(0));
  opt.decay = o.value("decay", "constant");
  return opt;
}

KernelContext readContext(const json &c) {
  KernelContext ctx;
  ctx.step = c.value("step", int64_t(0));
  ctx.tpRank = c.value("tp_rank", int64_t(0));
  ctx.dpRank = c.value("dp_rank", int64_t(0));
  ctx.groupRank = c.value("group_rank", int64_t(0));
  ctx.groupSize = c.value("group_size", int64_t(1));
  return ctx;
}

/// Runs `launch` on `device`; its outputs' values.
json runLaunch(Device &device, const json &launch, const std::string &where) {
  std::string name = launch.at("kernel").get<std::string>();
  std::optional<Kernel> kernel = partita::plan::kernelNamed(name);
  if (!kernel || !device.hasKernel(*kernel))
    throw std::runtime_error(where + ": no kernel '" + name + "'");
  std::vector<Buffer> ins, outs;
  for (size_t k = 0; k < launch.at("ins").size(); ++k)
    ins.push_back(
        readBuffer(launch["ins"][k], where + "/ins/" + std::to_string(k)));
  for (size_t k = 0; k < launch.at("outs").size(); ++k)
    outs.push_back(
        readBuffer(launch["outs"][k], where + "/outs/" + std::to_string(k)));
  int64_t bytes = 0;
  auto place = [&](Buffer &b) {
    b.offset = bytes;
    bytes += (byteSize(b) + kAlignment - 1) / kAlignment * kAlignment;
  };
  for (Buffer &b : ins)
    place(b);
  for (Buffer &b : outs) {
    if (b.sameAs < 0) {
      place(b);
      continue;
    }
    if (b.sameAs >= int(ins.size()) || byteSize(ins[b.sameAs]) != byteSize(b))
      throw std::runtime_error(where + ": same_as names no input of its size");
    b.offset = ins[b.sameAs].offset;
  }
  char *arena = static_cast<char *>(device.allocateArena(bytes));
  std::vector<TensorRef> inRefs, outRefs;
  for (const Buffer &b : ins) {
    device.upload(arena + b.offset, hostBytes(b).data(), byteSize(b));
    inRefs.push_back(refTo(b, arena));
  }
  for (const Buffer &b : outs) {
    if (b.sameAs < 0)
      device.upload(arena + b.offset, hostBytes(b).data(), byteSize(b));
    outRefs.push_back(refTo(b, arena));
  }
  std::vector<bool> accumulate =
      launch.value("accumulate", std::vector<bool>(outs.size(), false));
  Optimizer optimizer =
      readOptimizer(launch.value("optimizer", json::object()));
  KernelContext ctx = readContext(launch.value("context", json::object()));
  ctx.optimizer = &optimizer;
  device.launch(
      *kernel, inRefs, outRefs, accumulate,
      partita::plan::decodeParams(launch.value("params", json::object())), ctx);
  device.synchronize();
  json values = json::array();
  for (const Buffer &b : outs) {
    std::vector<char> host(byteSize(b));
    device.download(host.data(), arena + b.offset, byteSize(b));
    values.push_back(valuesOf(b, host));
  }
  return values;
}

std::unique_ptr<Device> createDevice(const std::string &name) {
  if (name == "cpu")
    return createCpuDevice(1);
#ifdef PARTITA_HAVE_CUDA
  if (name == "cuda")
    return createCudaDevice(0, GemmPrecision::FP32);
#endif
  throw std::runtime_error("no device '" + name + "' in this build");
}

} // namespace

int main(int argc, char **argv) {
  std::string deviceName = "cpu";
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--device" && a + 1 < argc) {
      deviceName = argv[++a];
    } else {
      std::cerr << "usage: partita-kernel-run [--device cpu|cuda] "
                   "< launches.json > outputs.json\n";
      return 2;
    }
  }
  try {
    std::unique_ptr<Device> device = createDevice(deviceName);
    json input = json::parse(std::cin);
    const json &launches = input.at("launches");
    for (size_t k = 0; k < launches.size(); ++k) {
      json outs =
          runLaunch(*device, launches[k], "/launches/" + std::to_string(k));
      std::cout << json{{"outs", outs}}.dump() << "\n";
    }
  } catch (const std::exception &e) {
    std::cerr << "partita-kernel-run: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
