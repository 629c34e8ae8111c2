//===- CudaRuntime.cpp - The CUDA runtime calls of the backend, on the CPU ===//
//
// The part of the CUDA runtime API the backend calls, for a node of
// kDevices emulated devices whose memory is host memory (each process has
// its own, as each rank has its own GPU). Streams run their kernels,
// copies, fills and NCCL operations in one of two extreme orders
// (Emulator.h's StreamOrder): as late as something needs them, or as they
// are enqueued. Copies and fills of device memory are checked against the
// allocations they touch when enqueued, as a GPU would fault on memory
// outside them.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include "partita/runtime/HostMemory.h"

#include <cuda_runtime_api.h>
#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct CUstream_st {
  /// Work enqueued and not yet run, in order.
  std::deque<std::shared_ptr<partita::runtime::cuda::emulator::Work>> queue;
};
struct CUevent_st {
  /// What a stream that waits for the event waits for: the last work on
  /// `stream` when it was recorded, if any had not run.
  std::shared_ptr<partita::runtime::cuda::emulator::Work> after;
  CUstream_st *stream = nullptr;
  /// What keeps the event pending for cudaEventQuery: the last NCCL
  /// operation on `stream` then, if any had not run. The stream's other
  /// work runs as soon as it is needed, as a GPU runs it in bounded time;
  /// only a peer that never takes part keeps an event pending for ever.
  /// (Not tracked: an NCCL operation on another stream that a wait on
  /// `stream` waits for. The NCCL communicator records its events right
  /// after each operation.)
  std::shared_ptr<partita::runtime::cuda::emulator::Work> nccl;
  /// Created without cudaEventDisableTiming: when its stream reached it
  /// (host seconds), once it has; shared with the work that stamps it.
  bool timing = false;
  std::shared_ptr<std::optional<double>> reached;
};

namespace partita::runtime::cuda::emulator {

namespace {

/// What a sm_90 GPU lets a block opt into, so that the launches the
/// backend makes on an H100 are the ones emulated.
constexpr int kSharedBytesOptIn = 227 * 1024;
/// The GPUs of a DGX node, so that plans for one run a rank per device.
constexpr int kDevices = 8;
constexpr size_t kDefaultDynamicShared = 48 * 1024;

/// The shared memory a block may opt into: an H100's, or
/// PARTITA_EMULATOR_SHARED_BYTES to emulate a GPU with less (101376, 99
/// KiB, for sm_86 and sm_89).
int sharedBytesOptIn() {
  const char *set = std::getenv("PARTITA_EMULATOR_SHARED_BYTES");
  if (!set)
    return kSharedBytesOptIn;
  char *end = nullptr;
  long bytes = std::strtol(set, &end, 10);
  if (*set == '\0' || *end != '\0' || bytes < long(kDefaultDynamicShared) ||
      bytes > kSharedBytesOptIn)
    fail(std::string("PARTITA_EMULATOR_SHARED_BYTES must be a number of "
                     "bytes from 49152 to 232448, got \"") +
         set + "\"");
  return int(bytes);
}

struct State {
  std::mutex mutex;
  /// Live allocations: start -> bytes.
  std::map<const char *, size_t> allocations;
  std::map<const void *, size_t> sharedLimits;
  cudaError_t lastError = cudaSuccess;
  /// A kernel's fault (kernelFaults), reported by every later query.
  cudaError_t sticky = cudaSuccess;
  /// The device of cudaSetDevice, and the kernels it has run.
  int device = 0;
  long long kernelsRun = 0;
  std::string refusal;
  /// Touched only by the host thread that enqueues work.
  std::set<CUstream_st *> streams;
  CUstream_st defaultStream;
  /// NCCL operations in flight that have not arrived.
  std::vector<std::shared_ptr<Work>> notArrived;
  std::optional<StreamOrder> order;
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

/// Polls the NCCL operations in flight, so that their events complete; in
/// the late order, one that has arrived writes its outputs at once.
void progress() {
  std::vector<std::shared_ptr<Work>> &waiting = state().notArrived;
  bool late = streamOrder() == StreamOrder::Late;
  for (auto &op : waiting)
    if (!op->arrived && op->poll()) {
      op->arrived = true;
      if (late) {
        op->run();
        op->ran = true;
      }
    }
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [](auto &op) { return bool(op->arrived); }),
                waiting.end());
}

/// Runs the work on `stream` up to and including `until` (held by value: it
/// leaves the queue).
void runUntil(CUstream_st &stream, std::shared_ptr<Work> until) {
  while (!until->ran) {
    if (stream.queue.empty())
      fail("a wait for work its stream does not hold");
    std::shared_ptr<Work> next = stream.queue.front();
    stream.queue.pop_front();
    if (!next->ran)
      next->run();
    next->ran = true;
    next->arrived = true;
    // A long run of deferred work must not keep the watchdog from seeing
    // the NCCL operations that have arrived meanwhile.
    progress();
  }
}

} // namespace

bool kernelFaults() {
  struct Fault {
    int device;
    long long nth;
  };
  static const std::optional<Fault> fault = []() -> std::optional<Fault> {
    const char *spec = std::getenv("PARTITA_EMULATOR_KERNEL_FAULT");
    if (!spec || !*spec)
      return std::nullopt;
    long long device, nth;
    if (!parseFault(spec, kDevices, device, nth))
      fail("PARTITA_EMULATOR_KERNEL_FAULT must be DEVICE:N (a device below " +
           std::to_string(kDevices) + " and a kernel from 1), got \"" + spec +
           "\"");
    return Fault{int(device), nth};
  }();
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.sticky != cudaSuccess)
    return true;
  if (fault && s.device == fault->device && ++s.kernelsRun == fault->nth)
    s.sticky = cudaErrorIllegalAddress;
  return s.sticky != cudaSuccess;
}

/// The fault a kernel left, if any.
static cudaError_t stickyError() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.sticky;
}

StreamOrder streamOrder() {
  State &s = state();
  if (!s.order) {
    const char *name = std::getenv("PARTITA_EMULATOR_STREAMS");
    std::string order = name ? name : "late";
    if (order != "late" && order != "eager")
      fail("PARTITA_EMULATOR_STREAMS must be late or eager, got \"" + order +
           "\"");
    s.order = order == "eager" ? StreamOrder::Eager : StreamOrder::Late;
  }
  return *s.order;
}

void setStreamOrder(StreamOrder order) { state().order = order; }

void enqueue(CUstream_st *stream, std::function<void()> run) {
  if (streamOrder() == StreamOrder::Eager) {
    reachStream(stream);
    run();
    return;
  }
  progress();
  auto work = std::make_shared<Work>();
  work->run = std::move(run);
  streamOf(stream).queue.push_back(std::move(work));
}

void enqueueInFlight(CUstream_st *stream, std::shared_ptr<Work> op) {
  state().notArrived.push_back(op);
  streamOf(stream).queue.push_back(std::move(op));
  progress();
}

void reachStream(CUstream_st *stream) {
  CUstream_st &s = streamOf(stream);
  if (!s.queue.empty())
    runUntil(s, s.queue.back());
  progress();
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
  case cudaErrorIllegalAddress:
    return "an illegal memory access was encountered";
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
  if (s.sticky != cudaSuccess)
    return s.sticky;
  cudaError_t error = s.lastError;
  s.lastError = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.sticky != cudaSuccess ? s.sticky : s.lastError;
}

cudaError_t cudaGetDevice(int *device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *device = s.device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= kDevices)
    return fails(cudaErrorInvalidDevice);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr,
                                   int device) {
  if (device < 0 || device >= kDevices)
    return fails(cudaErrorInvalidDevice);
  if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin)
    return fails(cudaErrorInvalidValue);
  *value = sharedBytesOptIn();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr,
                                 int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      value > sharedBytesOptIn())
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
  // Under AddressSanitizer, touching the rounding is an error: a kernel
  // that reads or writes past its buffer stops there.
  ASAN_POISON_MEMORY_REGION(static_cast<char *>(*p) + bytes, rounded - bytes);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[static_cast<const char *>(*p)] = bytes;
  return cudaSuccess;
}

namespace {

/// Whether p starts an allocation.
bool isAllocation(const void *p) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.allocations.count(static_cast<const char *>(p)) > 0;
}

/// Gives an allocation's memory back, now; false if p is none (any more).
bool release(void *p) {
  State &s = state();
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto allocation = s.allocations.find(static_cast<const char *>(p));
    if (allocation == s.allocations.end())
      return false;
    bytes = allocation->second;
    s.allocations.erase(allocation);
  }
  ASAN_UNPOISON_MEMORY_REGION(p,
                              (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  std::free(p);
  return true;
}

} // namespace

cudaError_t cudaFree(void *p) {
  if (!p)
    return cudaSuccess;
  // As on a GPU, freeing waits for the device's work (a cudaFreeAsync of p
  // among it is a double free: invalid).
  cudaDeviceSynchronize();
  return release(p) ? cudaSuccess : fails(cudaErrorInvalidValue);
}

// The stream-ordered allocator: memory is taken at once (usable by work
// enqueued from now on, as CUDA's is) and given back when `stream` reaches
// the free, without waiting for the device.
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) {
  return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  if (!p)
    return cudaSuccess;
  if (!isAllocation(p))
    return fails(cudaErrorInvalidValue);
  enqueue(stream, [p] {
    if (!release(p))
      fail("cudaFreeAsync of memory freed before the stream reached it");
  });
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
  // Each rank's device holds what the host had available when first asked,
  // and only this process's allocations: what is in use is what the
  // runtime allocated (on a GPU, also the context and NCCL's buffers).
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  size_t used = 0;
  for (const auto &[start, bytes] : s.allocations)
    used += bytes;
  static const size_t capacity =
      size_t(std::max<int64_t>(0, hostMemoryBytes("MemAvailable"))) + used;
  *total = capacity;
  *free = capacity - std::min(used, capacity);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                            cudaStream_t stream) {
  if (bytes == 0)
    return cudaSuccess;
  if (!onDevice(p, bytes))
    return fails(cudaErrorInvalidValue);
  enqueue(stream, [p, value, bytes] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0)
    return cudaSuccess;
  bool srcOnDevice =
      kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost;
  bool dstOnDevice =
      kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice;
  if ((srcOnDevice && !onDevice(src, bytes)) ||
      (dstOnDevice && !onDevice(dst, bytes)))
    return fails(cudaErrorInvalidValue);
  if (!dstOnDevice) {
    // Into pageable host memory (the backend pins none), the copy is
    // complete when the call returns, as CUDA's is.
    reachStream(stream);
    std::memmove(dst, src, bytes);
  } else if (!srcOnDevice) {
    // From pageable host memory, the call takes the data before it
    // returns, as CUDA's staging does; the caller may reuse it.
    auto data = std::make_shared<std::vector<char>>(
        static_cast<const char *>(src), static_cast<const char *>(src) + bytes);
    enqueue(stream,
            [dst, data] { std::memcpy(dst, data->data(), data->size()); });
  } else {
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  return cudaSuccess;
}

// The synchronous forms: the work on the default stream, then a wait for
// it. (CUDA's legacy default stream also waits for other blocking streams'
// work first; the emulator's callers, the benchmarks' set-up, have none.)
cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  cudaError_t error = cudaMemsetAsync(p, value, bytes, nullptr);
  return error == cudaSuccess ? cudaStreamSynchronize(nullptr) : error;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind) {
  cudaError_t error = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  return error == cudaSuccess ? cudaStreamSynchronize(nullptr) : error;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dstPitch, const void *src,
                              size_t srcPitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (width == 0 || height == 0)
    return cudaSuccess;
  // Between device buffers only: the backend copies nothing else in rows.
  if (kind != cudaMemcpyDeviceToDevice || dstPitch < width ||
      srcPitch < width || !onDevice(src, srcPitch * (height - 1) + width) ||
      !onDevice(dst, dstPitch * (height - 1) + width))
    return fails(cudaErrorInvalidValue);
  enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char *>(dst) + r * dstPitch,
                   static_cast<const char *>(src) + r * srcPitch, width);
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st;
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
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
  return stickyError();
}

cudaError_t cudaDeviceSynchronize() {
  reachStream(nullptr);
  for (CUstream_st *stream : state().streams)
    reachStream(stream);
  return stickyError();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = !(flags & cudaEventDisableTiming);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  CUstream_st &s = streamOf(stream);
  if (event->timing) {
    // Stamped when the stream's work before it has run, as a GPU stamps
    // it: emulated device time, in the order the stream runs.
    auto reached = std::make_shared<std::optional<double>>();
    enqueue(stream, [reached] {
      *reached = std::chrono::duration<double>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count();
    });
    event->reached = reached;
  }
  event->stream = &s;
  event->after = s.queue.empty() ? nullptr : s.queue.back();
  event->nccl = nullptr;
  for (auto it = s.queue.rbegin(); it != s.queue.rend() && !event->nccl; ++it)
    if ((*it)->poll)
      event->nccl = *it;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  // Any thread may ask (the NCCL communicator's watchdog does): read only.
  if (cudaError_t fault = stickyError())
    return fault;
  return !event->nccl || event->nccl->arrived ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event->after && !event->after->ran)
    runUntil(*event->stream, event->after);
  return stickyError();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  if (!start->timing || !end->timing || !start->reached || !end->reached)
    return fails(cudaErrorInvalidResourceHandle);
  if (!*start->reached || !*end->reached)
    return fails(cudaErrorNotReady);
  *ms = float((**end->reached - **start->reached) * 1e3);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned) {
  std::shared_ptr<Work> after = event->after;
  if (!after || after->ran)
    return cudaSuccess;
  // A stream that is destroyed runs its work first, so `waited` is alive
  // while `after` has not run.
  CUstream_st *waited = event->stream;
  enqueue(stream, [waited, after] { runUntil(*waited, after); });
  return cudaSuccess;
}
