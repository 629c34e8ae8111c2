//===- Emulator.h - CUDA kernels run on the CPU -----------------*- C++ -*-===//
//
// Runs the CUDA backend's kernels, unchanged, on the calling CPU thread, so
// that the backend's arithmetic, indexing and synchronisation are tested
// on machines without a GPU. Each CUDA thread of a block is a fiber; a
// block's fibers run one at a time, lowest-numbered first (highest-first
// in every other block), and switch only where CUDA threads wait for each
// other (__syncthreads, __syncwarp, shuffles, WMMA products), so that a
// missing barrier shows up as a wrong result, and threads left waiting at
// a barrier the others never reach are reported as a deadlock. Blocks run
// one after another. Streams run their work in one of two extreme orders
// (StreamOrder, below), so that a missing wait between streams shows too.
// What it cannot show: timing, the orders between those two in which a GPU
// may interleave streams, and the GPU's own rounding of fast-math
// intrinsics.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_EMULATOR_EMULATOR_H
#define PARTITA_RUNTIME_CUDA_EMULATOR_EMULATOR_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

struct CUstream_st;

namespace partita::runtime::cuda::emulator {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};

/// The running thread's threadIdx and blockIdx, and the launch's blockDim
/// and gridDim: set whenever a fiber is resumed. Per host thread, since a
/// device's comm stream may launch from another one.
inline thread_local Index threadIndex, blockIndex, blockDimension,
    gridDimension;

constexpr unsigned kFullWarp = 0xffffffffu;

/// Why a GPU refuses a launch of `grid` blocks of `block` threads, or empty
/// when it takes it.
std::string launchRefusal(Index grid, Index block);
/// Runs `body` once per thread of every block of a grid launchRefusal
/// takes. `sharedBytes` of dynamic shared memory are given to each block,
/// filled with 0xff (NaN as f32 and bf16) so that reading what no thread
/// wrote shows.
void run(Index grid, Index block, size_t sharedBytes,
         const std::function<void()> &body);

/// The block's dynamic shared memory.
char *dynamicShared();
/// The most static shared memory a block may declare (48 KiB).
constexpr size_t kStaticSharedLimit = 48 * 1024;
/// A thread reached the declaration of a static __shared__ variable
/// (PARTITA_SHARED): the first thread of the block to reach it fills its
/// `bytes` with 0xff, as dynamic shared memory is, since on a GPU it holds
/// whatever the SM's previous block left there.
void declareStaticShared(void *variable, size_t bytes);
/// The running thread's lane in its warp.
unsigned lane();
/// __syncthreads: waits for every thread of the block that has not
/// returned.
void syncThreads();
/// __syncwarp: waits for every lane of the warp that has not returned.
void syncWarp(unsigned mask);
/// Publishes `mine` to the warp and waits for every lane; returns the 32
/// lanes' values, which stay until the lanes' next shareInWarp but one.
void *const *shareInWarp(unsigned mask, void *mine);

/// __shfl_xor_sync for 4- and 8-byte values.
template <typename T> T shuffleXor(unsigned mask, T value, int laneMask) {
  static_assert(sizeof(T) <= sizeof(void *), "a shuffle moves 8 bytes");
  void *bits = nullptr;
  std::memcpy(&bits, &value, sizeof(T));
  void *const *lanes = shareInWarp(mask, bits);
  void *theirs = lanes[lane() ^ unsigned(laneMask)];
  T result;
  std::memcpy(&result, &theirs, sizeof(T));
  return result;
}

/// cp.async.cg.shared.global: `bytes` from device memory at `from` to the
/// block's shared memory at `to`, both aligned to `bytes`. The copy lands
/// when its thread waits for its group (waitCopies), the latest a GPU may
/// land it, so a read before that wait sees the old bytes; or, with
/// PARTITA_EMULATOR_COPIES=issue, at once, the earliest, so a copy into a
/// tile other threads still read shows.
void copyAsync(void *to, const void *from, size_t bytes);
/// cp.async.commit_group: the thread's copies so far form a group.
void commitCopies();
/// cp.async.wait_group: all but the `pending` most recent groups land.
void waitCopies(int pending);

/// Records a launch the emulator refused (cudaErrorInvalidConfiguration,
/// returned by the next cudaGetLastError) and the bytes of dynamic shared
/// memory `kernel` may have (48 KiB unless cudaFuncSetAttribute raised it).
void refuseLaunch(const std::string &why);
/// Whether the kernel about to run is lost to a fault: with
/// PARTITA_EMULATOR_KERNEL_FAULT=DEVICE:N, the Nth kernel of the backend's
/// that device DEVICE runs (counted from 1) and every one after it. The
/// fault is sticky, as an illegal address is: cudaGetLastError,
/// cudaEventQuery and the synchronising calls report
/// cudaErrorIllegalAddress from then on. (Emulated cuBLASLt, copies and
/// NCCL operations still run; on a GPU nothing would.)
bool kernelFaults();
/// An injected fault's setting WHERE:N (PARTITA_EMULATOR_KERNEL_FAULT,
/// PARTITA_EMULATOR_NCCL_FAULT): false where `spec` is not two integers so
/// joined, with WHERE below `below` and N from 1.
bool parseFault(const char *spec, long long below, long long &where,
                long long &nth);
/// Whether [p, p + bytes) lies in one cudaMalloc allocation.
bool onDevice(const void *p, size_t bytes);
size_t dynamicSharedLimit(const void *kernel);

/// The order in which streams run their work: one of the two extremes a
/// GPU may choose between, so that a missing wait between streams shows as
/// stale or early values in one of them.
///
/// Late (the default): a stream's work runs in order, but only when
/// something needs it: a wait for an event recorded after it
/// (cudaStreamWaitEvent, when the waiting stream reaches the wait),
/// synchronising its stream or the device, cudaFree, a download to the
/// host, or an NCCL operation enqueued behind it. NCCL operations are the
/// exception: each starts when it is enqueued (after the work it follows),
/// as its peers need it to, runs apart from the host, and writes its
/// outputs as soon as it arrives. So a collective that reads what the
/// compute stream has not yet written, or that overwrites what the compute
/// stream has yet to read, for want of a wait, shows.
///
/// Eager (PARTITA_EMULATOR_STREAMS=eager): work runs as it is enqueued,
/// and an NCCL operation writes its outputs only when its stream is next
/// needed. So a kernel that reads a collective's result before it is
/// complete, for want of a wait, shows.
enum class StreamOrder { Late, Eager };
/// The order in force: PARTITA_EMULATOR_STREAMS's, until set.
StreamOrder streamOrder();
/// Sets the order, for work enqueued from now on.
void setStreamOrder(StreamOrder order);

/// A piece of a stream's work.
struct Work {
  /// Runs the work; for an NCCL operation, waits for it to arrive and
  /// writes its outputs.
  std::function<void()> run;
  /// For an NCCL operation: whether it has arrived; never blocks.
  std::function<bool()> poll;
  /// Whether `poll` said so, read by cudaEventQuery from any thread.
  std::atomic<bool> arrived{false};
  /// Run (on the host thread that enqueues work).
  bool ran = false;
};
/// Enqueues `run` on `stream` (nullptr: the default stream), to run after
/// the stream's earlier work, in the stream order.
void enqueue(CUstream_st *stream, std::function<void()> run);
/// Enqueues an NCCL operation on `stream` whose peers are already on their
/// way: call reachStream(stream) before starting it.
void enqueueInFlight(CUstream_st *stream, std::shared_ptr<Work> op);
/// Runs the work enqueued on `stream` so far (and what it waits for on
/// other streams), and polls the NCCL operations in flight (which, in the
/// late order, write their outputs once arrived).
void reachStream(CUstream_st *stream);

/// Fails the process with `message`: a kernel did what no GPU runs (a
/// deadlock, a shuffle over lanes that returned, a misaligned WMMA tile).
[[noreturn]] void fail(const std::string &message);

} // namespace partita::runtime::cuda::emulator

#endif // PARTITA_RUNTIME_CUDA_EMULATOR_EMULATOR_H
