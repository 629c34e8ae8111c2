//===- Device.h - Where a rank's buffers live and kernels run ---*- C++ -*-===//

#ifndef PARTITA_RUNTIME_DEVICE_H
#define PARTITA_RUNTIME_DEVICE_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace partita::runtime {

/// A buffer as a kernel sees it: a pointer into the arena and its shape.
struct TensorRef {
  float *f = nullptr;   // f32 buffers
  int32_t *i = nullptr; // token buffers
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

/// A backend's device half (the other is the Communicator): one arena per
/// rank, allocated once, and the kernels of the plan format launched by
/// name on its compute stream.
class Device {
public:
  virtual ~Device() = default;
  /// The arena every buffer of the rank lives in (4-byte aligned elements),
  /// zero-filled.
  virtual void *allocateArena(int64_t bytes) = 0;
  virtual bool hasKernel(const std::string &name) const = 0;
  /// Runs kernel `name` on the compute stream: reads `ins`, writes `outs`,
  /// adding to those flagged in `accumulate`.
  virtual void launch(const std::string &name,
                      const std::vector<TensorRef> &ins,
                      const std::vector<TensorRef> &outs,
                      const std::vector<bool> &accumulate,
                      const nlohmann::json &params,
                      const KernelContext &ctx) = 0;
  /// Waits until every launch so far has finished.
  virtual void synchronize() = 0;
};

/// fp32 kernels on this CPU (OpenBLAS GEMMs); launches are synchronous.
std::unique_ptr<Device> createCpuDevice();

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_DEVICE_H
