//===- guarded-run.cpp - The executor never touches rank memory -----------===//
//
//   partita-guarded-run PLAN.json [--steps N] [--log-json FILE]
//                       [--resume-at K DIR]
//
// Trains a one-rank plan with the CPU kernels on an arena whose pages are
// inaccessible outside the Device's own calls, as GPU memory is to the
// host: any access of the executor that bypasses the Device faults. This is
// the contract the CUDA backend relies on, checked where there is no GPU.
// One JSON line per step, as plan-run's --log-json. With --resume-at, a
// checkpoint saved after step K is loaded into a second executor, which
// logs steps K+1..N again (after the first run's lines).
//
//===----------------------------------------------------------------------===//

#include "OneRankCommunicator.h"
#include "partita/runtime/Checkpoint.h"
#include "partita/runtime/Plan.h"
#include "partita/runtime/Trainer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>

using namespace partita::runtime;

namespace {

/// The CPU device, with its memory closed except while one of its calls
/// runs.
class GuardedDevice : public Device {
public:
  /// Opens the memory for the scope of a Device call.
  struct Open {
    explicit Open(GuardedDevice &d) : d(d) {
      d.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() { d.protect(PROT_NONE); }
    GuardedDevice &d;
  };

  void *allocateArena(int64_t bytes) override {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t size = (size_t(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    void *p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0); // zero-filled
    if (p == MAP_FAILED)
      throw std::runtime_error("mmap of " + std::to_string(size) + " bytes");
    regions.push_back({p, size});
    return p;
  }
  bool hasKernel(Kernel kernel) const override {
    return cpu->hasKernel(kernel);
  }
  void launch(Kernel kernel, const std::vector<TensorRef> &ins,
              const std::vector<TensorRef> &outs,
              const std::vector<bool> &accumulate,
              const partita::plan::KernelParams &params,
              const KernelContext &ctx) override {
    Open open(*this);
    cpu->launch(kernel, ins, outs, accumulate, params, ctx);
  }
  void synchronize() override {}
  void upload(void *dst, const void *src, int64_t bytes) override {
    Open open(*this);
    cpu->upload(dst, src, bytes);
  }
  void download(void *dst, const void *src, int64_t bytes) override {
    Open open(*this);
    cpu->download(dst, src, bytes);
  }
  void fillZero(void *dst, int64_t bytes, Stream stream) override {
    Open open(*this);
    cpu->fillZero(dst, bytes, stream);
  }
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t bytes, int64_t rows, Stream stream) override {
    Open open(*this);
    cpu->copyRows(dst, dstPitch, src, srcPitch, bytes, rows, stream);
  }
  void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                       int64_t inner, bool accumulate, Stream stream) override {
    Open open(*this);
    cpu->transposeBlocks(dst, src, a, b, inner, accumulate, stream);
  }
  bool hasBf16() const override { return cpu->hasBf16(); }
  void widen(float *dst, const uint16_t *src, int64_t n,
             Stream stream) override {
    Open open(*this);
    cpu->widen(dst, src, n, stream);
  }
  void narrow(uint16_t *dst, const float *src, int64_t n, bool accumulate,
              Stream stream) override {
    Open open(*this);
    cpu->narrow(dst, src, n, accumulate, stream);
  }

private:
  void protect(int how) {
    for (auto [p, size] : regions)
      if (mprotect(p, size, how) != 0)
        throw std::runtime_error("mprotect failed");
  }
  std::unique_ptr<Device> cpu = createCpuDevice();
  std::vector<std::pair<void *, size_t>> regions;
};

/// A job of one rank whose collectives and messages touch rank memory as a
/// backend's do, so they open it too.
class OneRank : public OneRankCommunicator {
public:
  explicit OneRank(GuardedDevice &device) : device(device) {}
  [[noreturn]] void abort(const std::string &why) override {
    std::cerr << "partita-guarded-run: " << why << "\n";
    std::exit(1);
  }

protected:
  void touch(const std::function<void()> &access) override {
    GuardedDevice::Open open(device);
    access();
  }

private:
  GuardedDevice &device;
};

} // namespace

int main(int argc, char **argv) {
  std::string planPath, logPath, checkpointDir;
  int64_t steps = 5, resumeAt = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::stoll(argv[++i]);
    else if (a == "--log-json" && i + 1 < argc)
      logPath = argv[++i];
    else if (a == "--resume-at" && i + 2 < argc) {
      resumeAt = std::stoll(argv[++i]);
      checkpointDir = argv[++i];
    } else if (planPath.empty() && a[0] != '-')
      planPath = a;
    else {
      std::cerr << "usage: partita-guarded-run PLAN.json [--steps N] "
                   "[--log-json FILE] [--resume-at K DIR]\n";
      return 2;
    }
  }
  try {
    Plan plan = loadPlan(planPath);
    if (plan.worldSize != 1)
      throw std::runtime_error(planPath + " needs " +
                               std::to_string(plan.worldSize) +
                               " ranks; this check runs one");
    GuardedDevice device;
    OneRank comm(device);
    auto data = syntheticTokens(plan.vocabSize);
    Trainer trainer(plan, device, comm, *data);
    std::ofstream log;
    if (!logPath.empty())
      log.open(logPath);
    log.precision(9);
    auto run = [&](Trainer &t, int64_t from, const char *what) {
      for (int64_t s = from; s < steps; ++s) {
        StepResult r = t.step(s);
        std::cout << what << " " << s + 1 << " loss " << r.loss << "\n";
        if (log)
          log << "{\"step\": " << s + 1 << ", \"loss\": " << r.loss
              << ", \"grad_norm\": " << r.gradNorm << "}\n";
        if (!checkpointDir.empty() && s + 1 == resumeAt && from == 0)
          saveCheckpoint(plan, t, comm, checkpointDir, s + 1);
      }
    };
    run(trainer, 0, "step");
    if (!checkpointDir.empty()) {
      Trainer resumed(plan, device, comm, *data);
      int64_t from = loadNewestCheckpoint(plan, resumed, comm, checkpointDir);
      if (from != resumeAt)
        throw std::runtime_error("resumed after step " + std::to_string(from) +
                                 ", not " + std::to_string(resumeAt));
      run(resumed, from, "resumed step");
    }
    // Gathering and checkpoint visits reach the state through the Device
    // too: the visitor reads host memory.
    int64_t visited = 0;
    double sum = 0;
    trainer.readState([&](const BufferSpec &b, const float *values) {
      for (int64_t i = 0; i < b.elements; ++i)
        sum += values[i];
      ++visited;
    });
    if (!std::isfinite(sum))
      throw std::runtime_error("the state holds values that are not finite");
    auto params = trainer.gatherParameters();
    std::cout << "state: " << visited << " buffers visited, " << params.size()
              << " parameters gathered\n";
  } catch (const std::exception &e) {
    std::cerr << "partita-guarded-run: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
