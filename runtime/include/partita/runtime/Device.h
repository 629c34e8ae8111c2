//===- Device.h - Where a rank's buffers live and kernels run ---*- C++ -*-===//

#ifndef PARTITA_RUNTIME_DEVICE_H
#define PARTITA_RUNTIME_DEVICE_H

#include "partita/plan/KernelParams.h"
#include "partita/plan/Kernels.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace partita::runtime {

using plan::Kernel;

/// A buffer as a kernel sees it: a pointer into the arena and its shape.
struct TensorRef {
  float *f = nullptr;    // f32 buffers
  uint16_t *h = nullptr; // bf16 buffers (partita/runtime/Bf16.h)
  int32_t *i = nullptr;  // token buffers
  const std::vector<int64_t> *shape = nullptr;
  int64_t n = 0;
  int64_t dim(int k) const { return (*shape)[k < 0 ? shape->size() + k : k]; }
};

struct Optimizer;

/// What a kernel needs to know about its rank and step.
struct KernelContext {
  int64_t step = 0;
  const Optimizer *optimizer = nullptr;
  int64_t tpRank = 0, dpRank = 0;
  /// Group rank and size for shard_slice.
  int64_t groupRank = 0, groupSize = 1;
};

/// One launch of a kernel: its buffers and parameters.
struct KernelCall {
  std::vector<TensorRef> ins, outs;
  std::vector<bool> accumulate;
  const plan::KernelParams *params = nullptr;
};

/// Where a rank's work runs: kernels on the compute stream; collectives on
/// the comm stream of their group (Plan::commLane), so that one group's
/// collectives never queue behind another's: a tensor-parallel all-reduce
/// does not wait for a data-parallel reduction started before it. The data
/// movement around an async collective runs on its comm stream, around a
/// synchronous one on the compute stream. On CPU all of them are the
/// calling thread.
class Stream {
public:
  static const Stream Compute;
  static constexpr Stream comm(int lane) { return Stream(lane); }
  constexpr bool isComm() const { return lane >= 0; }
  /// The comm stream's lane (isComm()).
  constexpr int commLane() const { return lane; }

private:
  constexpr explicit Stream(int lane) : lane(lane) {}
  int lane;
};
inline constexpr Stream Stream::Compute = Stream(-1);

/// Bytes in a GiB, the unit of memory sizes in messages.
constexpr double kGiB = 1 << 30;

/// A backend's device half (the other is the Communicator): the memory of a
/// rank, allocated once, and the kernels of the plan format launched by
/// name on its compute stream. The executor touches that memory only
/// through these calls, so it may live on an accelerator.
class Device {
public:
  virtual ~Device() = default;
  /// Zero-filled memory for buffers (4-byte aligned elements), alive as
  /// long as the device.
  virtual void *allocateArena(int64_t bytes) = 0;
  /// The device's memory, where the backend can tell (none on CPU ranks):
  /// its size, and the bytes in use by anything (on a GPU: its context,
  /// libraries, communicators and our allocations).
  struct Memory {
    int64_t total = 0, inUse = 0;
  };
  virtual std::optional<Memory> memory() { return std::nullopt; }
  /// Whether the device times its own work (a GPU, whose launches run
  /// apart from the host): the executor then marks each launch on the
  /// compute stream with markLaunch(its class) and an empty mark after the
  /// last; each class is given the time from its mark to the next.
  /// takeLaunchSeconds, after a synchronize, sums those and starts afresh.
  virtual bool timesLaunches() const { return false; }
  virtual void markLaunch(const std::string &what) {}
  virtual std::map<std::string, double> takeLaunchSeconds() { return {}; }
  virtual bool hasKernel(Kernel kernel) const = 0;
  /// Runs `kernel` on the compute stream: reads `ins`, writes `outs`,
  /// adding to those flagged in `accumulate`.
  virtual void launch(Kernel kernel, const std::vector<TensorRef> &ins,
                      const std::vector<TensorRef> &outs,
                      const std::vector<bool> &accumulate,
                      const plan::KernelParams &params,
                      const KernelContext &ctx) = 0;
  /// Whether launchAll takes runs of launches of `kernel`. The executor
  /// then hands it every run of consecutive, independent launches of it.
  virtual bool launchesTogether(Kernel kernel) const {
    (void)kernel;
    return false;
  }
  /// Runs `calls` of `kernel`, none of which touches a buffer another one
  /// writes: together where the device can (the CUDA device's multi-tensor
  /// AdamW), else one after another.
  virtual void launchAll(Kernel kernel, const std::vector<KernelCall> &calls,
                         const KernelContext &ctx) {
    for (const KernelCall &c : calls)
      launch(kernel, c.ins, c.outs, c.accumulate, *c.params, ctx);
  }
  /// Waits until every launch so far has finished.
  virtual void synchronize() = 0;
  /// Host memory to device memory, after the compute stream's launches so
  /// far; `src` may be reused when it returns.
  virtual void upload(void *dst, const void *src, int64_t bytes) = 0;
  /// Device memory to host memory, once the compute stream gets there.
  virtual void download(void *dst, const void *src, int64_t bytes) = 0;
  virtual void fillZero(void *dst, int64_t bytes, Stream stream) = 0;
  /// Device memory to device memory, on `stream`: `rows` rows of `bytes`
  /// bytes, `srcPitch` bytes apart from `src` and `dstPitch` bytes apart
  /// from `dst`, which do not overlap.
  virtual void copyRows(void *dst, int64_t dstPitch, const void *src,
                        int64_t srcPitch, int64_t bytes, int64_t rows,
                        Stream stream) = 0;
  void copy(void *dst, const void *src, int64_t bytes, Stream stream) {
    copyRows(dst, bytes, src, bytes, bytes, 1, stream);
  }
  /// Whether the device takes bf16 buffers (as TensorRef::h).
  virtual bool hasBf16() const { return false; }
  /// bf16 to f32, and f32 to bf16 rounded to nearest even (added to `dst`
  /// when `accumulate`), on `stream`.
  virtual void widen(float *dst, const uint16_t *src, int64_t n, Stream) {
    (void)dst, (void)src, (void)n;
    throw std::runtime_error("this device has no bf16 buffers");
  }
  virtual void narrow(uint16_t *dst, const float *src, int64_t n,
                      bool accumulate, Stream) {
    (void)dst, (void)src, (void)n, (void)accumulate;
    throw std::runtime_error("this device has no bf16 buffers");
  }
  /// The [a][b][inner] blocks of `src` as [b][a][inner] in `dst` (a plain
  /// copy when a or b is 1), added to `dst` when `accumulate`.
  virtual void transposeBlocks(float *dst, const float *src, int64_t a,
                               int64_t b, int64_t inner, bool accumulate,
                               Stream stream) = 0;
};

/// fp32 kernels on this CPU (OpenBLAS GEMMs); launches are synchronous.
/// OpenBLAS runs on `blasThreads` threads (0: its own default, every core).
std::unique_ptr<Device> createCpuDevice(int blasThreads = 0);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_DEVICE_H
