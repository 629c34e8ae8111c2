//===- CudaRuntime.cpp - The CUDA runtime calls of the backend, on the CPU ===//
//
// The part of the CUDA runtime API the backend calls, for a node of
// kDevices emulated devices whose memory is host memory (each process has
// its own, as each rank has its own GPU). Kernels, copies and fills run
// when they are enqueued; NCCL operations stay in flight (Emulator.h's
// InFlight) until the host waits for them: an event recorded after one is
// complete once the operation has arrived, and waiting for the event, or
// the stream, or enqueuing more work on the stream lands it. Copies and
// fills of device memory are checked against the allocations they touch,
// as a GPU would fault on memory outside them.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include "partita/runtime/HostMemory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

struct CUstream_st {
  /// The stream's last operation in flight; earlier ones have landed.
  std::shared_ptr<partita::runtime::cuda::emulator::InFlight> last;
};
struct CUevent_st {
  /// What the event waits for: the stream's operation in flight when it
  /// was recorded, if any.
  std::shared_ptr<partita::runtime::cuda::emulator::InFlight> after;
};

namespace partita::runtime::cuda::emulator {

namespace {

/// What a sm_90 GPU lets a block opt into, so that the launches the
/// backend makes on an H100 are the ones emulated.
constexpr int kSharedBytesOptIn = 227 * 1024;
/// The GPUs of a DGX node, so that plans for one run a rank per device.
constexpr int kDevices = 8;
constexpr size_t kDefaultDynamicShared = 48 * 1024;

struct State {
  std::mutex mutex;
  /// Live allocations: start -> bytes.
  std::map<const char *, size_t> allocations;
  std::map<const void *, size_t> sharedLimits;
  cudaError_t lastError = cudaSuccess;
  std::string refusal;
  /// Touched only by the host thread that enqueues work.
  std::set<CUstream_st *> streams;
  CUstream_st defaultStream;
  std::vector<std::shared_ptr<InFlight>> notArrived;
};

/// Never destroyed: devices held in statics free their memory at exit,
/// after this file's statics would be gone.
State &state() {
  static State *s = new State;
  return *s;
}

cudaError_t fails(cudaError_t error) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.lastError = error;
  return error;
}

CUstream_st &streamOf(cudaStream_t stream) {
  return stream ? *stream : state().defaultStream;
}

void land(const std::shared_ptr<InFlight> &op) {
  if (!op || op->landed)
    return;
  op->land();
  op->landed = true;
  op->arrived = true;
}

} // namespace

void enqueueInFlight(CUstream_st *stream, std::shared_ptr<InFlight> op) {
  reachStream(stream);
  state().notArrived.push_back(op);
  streamOf(stream).last = std::move(op);
}

void reachStream(CUstream_st *stream) {
  CUstream_st &s = streamOf(stream);
  land(s.last);
  s.last = nullptr;
  std::vector<std::shared_ptr<InFlight>> &waiting = state().notArrived;
  for (auto &op : waiting)
    if (!op->arrived && op->poll())
      op->arrived = true;
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [](auto &op) { return bool(op->arrived); }),
                waiting.end());
}

bool onDevice(const void *p, size_t bytes) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto *at = static_cast<const char *>(p);
  auto found = s.allocations.upper_bound(at);
  if (found == s.allocations.begin())
    return false;
  --found;
  return at + bytes <= found->first + found->second;
}

void refuseLaunch(const std::string &why) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.lastError = cudaErrorInvalidConfiguration;
  s.refusal = why;
}

size_t dynamicSharedLimit(const void *kernel) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.sharedLimits.find(kernel);
  return found == s.sharedLimits.end() ? kDefaultDynamicShared : found->second;
}

} // namespace partita::runtime::cuda::emulator

using namespace partita::runtime::cuda::emulator;
using partita::runtime::hostMemoryBytes;

cudaError_t cudaGetDeviceCount(int *count) {
  *count = kDevices;
  return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidConfiguration: {
    thread_local std::string message;
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    message = "invalid configuration argument: " + s.refusal;
    return message.c_str();
  }
  default:
    return "an error the CUDA emulator does not raise";
  }
}

cudaError_t cudaGetLastError() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  cudaError_t error = s.lastError;
  s.lastError = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.lastError;
}

cudaError_t cudaSetDevice(int device) {
  return device >= 0 && device < kDevices ? cudaSuccess
                                          : fails(cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr,
                                   int device) {
  if (device < 0 || device >= kDevices)
    return fails(cudaErrorInvalidDevice);
  if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin)
    return fails(cudaErrorInvalidValue);
  *value = kSharedBytesOptIn;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      value > kSharedBytesOptIn)
    return fails(cudaErrorInvalidValue);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sharedLimits[func] = size_t(value);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
  // 256-byte aligned, as cudaMalloc's memory is.
  size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  *p = std::aligned_alloc(256, rounded);
  if (!*p)
    return fails(cudaErrorMemoryAllocation);
  // Device memory starts as whatever it held: NaN here, so that reading
  // what nothing wrote (a missing memset) shows.
  std::memset(*p, 0xff, rounded);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[static_cast<const char *>(*p)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (!p)
    return cudaSuccess;
  // As on a GPU, freeing waits for the device's work.
  cudaDeviceSynchronize();
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.allocations.erase(static_cast<const char *>(p))) {
      s.lastError = cudaErrorInvalidValue;
      return cudaErrorInvalidValue;
    }
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attributes,
                                     const void *p) {
  std::memset(attributes, 0, sizeof(*attributes));
  if (onDevice(p, 1)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->devicePointer = const_cast<void *>(p);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->hostPointer = const_cast<void *>(p);
  }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  // Every device's memory is the host's.
  *free = size_t(std::max<int64_t>(0, hostMemoryBytes("MemAvailable")));
  *total = size_t(std::max<int64_t>(0, hostMemoryBytes("MemTotal")));
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                            cudaStream_t stream) {
  reachStream(stream);
  if (bytes == 0)
    return cudaSuccess;
  if (!onDevice(p, bytes))
    return fails(cudaErrorInvalidValue);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  reachStream(stream);
  if (bytes == 0)
    return cudaSuccess;
  bool srcOnDevice =
      kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost;
  bool dstOnDevice =
      kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice;
  if ((srcOnDevice && !onDevice(src, bytes)) ||
      (dstOnDevice && !onDevice(dst, bytes)))
    return fails(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st;
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  // Work still enqueued completes, as CUDA documents.
  reachStream(stream);
  state().streams.erase(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  reachStream(stream);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  reachStream(nullptr);
  for (CUstream_st *stream : state().streams)
    reachStream(stream);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->after = streamOf(stream).last;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  // Any thread may ask (the NCCL communicator's watchdog does): read only.
  return !event->after || event->after->arrived ? cudaSuccess
                                                : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned) {
  // Work enqueued on the stream from now on runs at once, so the host
  // waits here.
  land(event->after);
  return cudaSuccess;
}
