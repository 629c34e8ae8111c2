//===- EmulatorTest.cpp - The CUDA emulator's own checks ------------------===//
//
// Small kernels that do what the emulator is there to catch: a missing
// barrier gives a wrong result (in both thread orders), static shared
// memory holds junk in every block until written, threads stuck at
// barriers the others never reach and a shuffle over lanes that returned
// stop the process, an asynchronous copy lands only at the wait for its
// group, a launch a GPU refuses is refused, a stream's work runs
// only when something needs it (in the late order), an NCCL operation
// in flight lands as soon as it arrives (late) or when its stream is
// needed (eager), and a 16-byte atomic off 16 bytes stops the process.
//
//===----------------------------------------------------------------------===//

#include "Prelude.h"

#include "cuda/KernelSupport.cuh"

#include <gtest/gtest.h>

#include <vector>

using namespace partita::runtime::cuda;
namespace emulator = partita::runtime::cuda::emulator;

namespace {

constexpr int kBlock = 64;

/// The slot of thread t's neighbour: the next one, or the previous one,
/// or (`wrap`) either with the ends joined.
__host__ __device__ int neighbour(int t, int step, bool wrap) {
  int n = t + step;
  return wrap ? (n + kBlock) % kBlock : std::min(kBlock - 1, std::max(0, n));
}

/// Each thread writes its slot and reads its neighbour's, with or without
/// a barrier between.
__global__ void neighbourKernel(int *out, bool barrier, int step, bool wrap) {
  PARTITA_SHARED(int, slot, [kBlock]);
  int t = int(threadIdx.x);
  slot[t] = int(blockIdx.x) * kBlock + t;
  if (barrier)
    __syncthreads();
  out[blockIdx.x * kBlock + t] = slot[neighbour(t, step, wrap)];
}

std::vector<int> neighbours(bool barrier, int blocks, int step = 1,
                            bool wrap = true) {
  int *out = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&out),
                       sizeof(int) * kBlock * blocks),
            cudaSuccess);
  launchKernel(neighbourKernel, blocks, kBlock, 0, nullptr, out, barrier, step,
               wrap);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaDeviceSynchronize();
  std::vector<int> values(out, out + kBlock * blocks);
  cudaFree(out);
  return values;
}

TEST(CudaEmulator, AMissingBarrierGivesAWrongResultInEveryBlock) {
  int blocks = 4; // lowest-first and highest-first, twice
  std::vector<int> with = neighbours(true, blocks),
                   without = neighbours(false, blocks);
  for (int b = 0; b < blocks; ++b) {
    int wrong = 0;
    for (int t = 0; t < kBlock; ++t) {
      int want = b * kBlock + neighbour(t, 1, true);
      EXPECT_EQ(with[b * kBlock + t], want);
      wrong += without[b * kBlock + t] != want;
    }
    EXPECT_GT(wrong, 0) << "block " << b << " read every slot after its write";
  }
}

// Without the ends joined, reading the next thread's slot races only where
// low threads run first, and reading the previous one's only where high
// threads do: the emulator alternates, so both show.
TEST(CudaEmulator, RunsLowAndHighThreadsFirstInTurn) {
  int blocks = 2;
  for (int step : {1, -1}) {
    std::vector<int> without = neighbours(false, blocks, step, false);
    int wrong = 0;
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < kBlock; ++t)
        wrong +=
            without[b * kBlock + t] != b * kBlock + neighbour(t, step, false);
    EXPECT_GT(wrong, 0) << "reading the slot " << step << " away never raced";
  }
}

/// Only block 0 writes its shared value; every block reads it.
__global__ void sharedLeftoverKernel(int *out) {
  PARTITA_SHARED(int, value, );
  if (blockIdx.x == 0)
    value = 7;
  __syncthreads();
  out[blockIdx.x] = value;
}

// On a GPU a block's static shared memory holds whatever an earlier block
// on the SM left there; the emulator gives each block junk instead, so a
// read before any write shows in every block, not only the first.
TEST(CudaEmulator, StaticSharedMemoryHoldsJunkInEveryBlockUntilWritten) {
  int out[3] = {};
  launchKernel(sharedLeftoverKernel, 3, 32, 0, nullptr, out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaDeviceSynchronize();
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], -1) << "block 1 read what block 0 wrote";
  EXPECT_EQ(out[2], -1) << "block 2 read what block 0 wrote";
}

__global__ void oversizedSharedKernel(float *out) {
  PARTITA_SHARED(float, tile,
                 [emulator::kStaticSharedLimit / sizeof(float) + 1]);
  tile[threadIdx.x] = 0;
  out[0] = tile[0];
}

TEST(CudaEmulatorDeathTest, StaticSharedMemoryOverTheLimitStops) {
  float out[1];
  EXPECT_DEATH(
      {
        launchKernel(oversizedSharedKernel, 1, 32, 0, nullptr, out);
        cudaDeviceSynchronize();
      },
      "declares 49156 bytes of static shared memory, above the 49152");
}

__global__ void splitBarrierKernel() {
  if (threadIdx.x == 0)
    __syncthreads();
  else
    __syncwarp();
}

TEST(CudaEmulatorDeathTest, ThreadsAtBarriersTheOthersNeverReachDeadlock) {
  EXPECT_DEATH(
      {
        launchKernel(splitBarrierKernel, 1, 32, 0, nullptr);
        cudaDeviceSynchronize();
      },
      "deadlock in block \\(0, 0, 0\\): 1 threads wait at __syncthreads and "
      "31 at warp barriers");
}

__global__ void shuffleAfterReturnKernel(float *out) {
  if (threadIdx.x == 0)
    return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
}

TEST(CudaEmulatorDeathTest, AShuffleOverLanesThatReturnedStops) {
  float out[32];
  EXPECT_DEATH(
      {
        launchKernel(shuffleAfterReturnKernel, 1, 32, 0, nullptr, out);
        cudaDeviceSynchronize();
      },
      "with 31 of its 32 lanes running: undefined on the GPU");
}

__global__ void addQuadKernel(float *at) {
  atomicAddQuad(at, make_float4(1.0f, 2.0f, 3.0f, 4.0f));
}

TEST(CudaEmulatorDeathTest, ASixteenByteAtomicOffSixteenBytesStops) {
  alignas(16) float sums[8] = {};
  launchKernel(addQuadKernel, 1, 2, 0, nullptr, sums + 4);
  cudaDeviceSynchronize();
  EXPECT_EQ(std::vector<float>(sums, sums + 8),
            std::vector<float>({0, 0, 0, 0, 2, 4, 6, 8}));
  EXPECT_DEATH(
      {
        launchKernel(addQuadKernel, 1, 1, 0, nullptr, sums + 2);
        cudaDeviceSynchronize();
      },
      "a 16-byte atomic add at an address off 16 bytes");
}

/// Thread t copies 16 bytes, in two groups (threads 0-1, then 2-3), and
/// reads what it sees in shared memory before any wait, after waiting for
/// all but the latest group, and after waiting for every group.
__global__ void asyncCopyKernel(const int *in, int *seen) {
  PARTITA_DYNAMIC_SHARED(shared);
  int *tile = reinterpret_cast<int *>(shared);
  int t = int(threadIdx.x);
  emulator::copyAsync(tile + 4 * t, in + 4 * t, 16);
  if (t < 2)
    emulator::commitCopies(); // t's copy is the older group
  emulator::commitCopies();
  seen[t] = tile[4 * t];
  emulator::waitCopies(1);
  seen[4 + t] = tile[4 * t];
  emulator::waitCopies(0);
  seen[8 + t] = tile[4 * t];
}

TEST(CudaEmulator, AnAsynchronousCopyLandsAtTheWaitForItsGroup) {
  int *in = nullptr, *seen = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&in), 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&seen), 48), cudaSuccess);
  for (int i = 0; i < 16; ++i)
    in[i] = 100 + i; // (the emulator's device memory is the host's)
  launchKernel(asyncCopyKernel, 1, 4, 64, nullptr, in, seen);
  cudaDeviceSynchronize();
  std::vector<int> got(seen, seen + 12);
  int unwritten = -1; // the emulator fills shared memory with 0xff bytes
  // Threads 0 and 1 committed their copy, then an empty group: waiting for
  // all but one lands it. Threads 2 and 3 committed theirs last.
  EXPECT_EQ(got,
            (std::vector<int>{unwritten, unwritten, unwritten, unwritten, 100,
                              104, unwritten, unwritten, 100, 104, 108, 112}));
  cudaFree(in);
  cudaFree(seen);
}

__global__ void asyncCopyFromHostKernel(const int *in) {
  PARTITA_DYNAMIC_SHARED(shared);
  emulator::copyAsync(shared, in, 16);
}

TEST(CudaEmulatorDeathTest, AnAsynchronousCopyFromHostMemoryStops) {
  alignas(16) static int host[4];
  EXPECT_DEATH(
      {
        launchKernel(asyncCopyFromHostKernel, 1, 1, 64, nullptr, host);
        cudaDeviceSynchronize();
      },
      "cp.async from memory that is not one device allocation's");
}

__global__ void emptyKernel() {}

TEST(CudaEmulator, RefusesALaunchAGpuRefuses) {
  launchKernel(emptyKernel, 1, 2048, 0, nullptr);
  cudaError_t error = cudaGetLastError();
  EXPECT_EQ(error, cudaErrorInvalidConfiguration);
  EXPECT_NE(std::string(cudaGetErrorString(error)).find("a block of (2048"),
            std::string::npos)
      << cudaGetErrorString(error);
  launchKernel(emptyKernel, 1, 32, size_t(64) << 10, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration)
      << "64 KiB of dynamic shared memory without cudaFuncSetAttribute";
  launchKernel(emptyKernel, 1, 32, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

__global__ void storeKernel(int *out, int value) { out[threadIdx.x] = value; }
__global__ void copyKernel(const int *in, int *out) {
  out[threadIdx.x] = in[threadIdx.x];
}

TEST(CudaEmulator, LateAStreamsWorkRunsWhenSomethingNeedsIt) {
  emulator::StreamOrder order = emulator::streamOrder();
  emulator::setStreamOrder(emulator::StreamOrder::Late);
  cudaStream_t writer, reader;
  ASSERT_EQ(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking),
            cudaSuccess);
  cudaEvent_t written;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming),
            cudaSuccess);
  int *x = nullptr, *y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&x), 32 * sizeof(int)),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&y), 32 * sizeof(int)),
            cudaSuccess);
  cudaMemsetAsync(x, 0, 32 * sizeof(int), writer);
  cudaDeviceSynchronize();

  // Without a wait, the reader's copy runs before the writer's store.
  launchKernel(storeKernel, 1, 32, 0, writer, x, 7);
  launchKernel(copyKernel, 1, 32, 0, reader, x, y);
  cudaStreamSynchronize(reader);
  EXPECT_EQ(y[31], 0);
  cudaStreamSynchronize(writer);
  EXPECT_EQ(x[31], 7);

  // Waiting for an event recorded after the store, it reads the store.
  launchKernel(storeKernel, 1, 32, 0, writer, x, 9);
  cudaEventRecord(written, writer);
  cudaStreamWaitEvent(reader, written, 0);
  launchKernel(copyKernel, 1, 32, 0, reader, x, y);
  cudaStreamSynchronize(reader);
  EXPECT_EQ(y[31], 9);

  // Downloading to the host waits for the stream's work.
  launchKernel(storeKernel, 1, 32, 0, writer, x, 11);
  int last = 0;
  cudaMemcpyAsync(&last, x + 31, sizeof(int), cudaMemcpyDeviceToHost, writer);
  EXPECT_EQ(last, 11);

  cudaFree(x);
  cudaFree(y);
  cudaEventDestroy(written);
  cudaStreamDestroy(reader);
  cudaStreamDestroy(writer);
  emulator::setStreamOrder(order);
}

/// A stream, in the late order, for one test: the order in force before
/// comes back after it.
struct LateStream {
  emulator::StreamOrder before = emulator::streamOrder();
  cudaStream_t stream = nullptr;
  LateStream() {
    emulator::setStreamOrder(emulator::StreamOrder::Late);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~LateStream() {
    cudaStreamDestroy(stream);
    emulator::setStreamOrder(before);
  }
};

// The stream-ordered allocator: work enqueued before cudaFreeAsync still
// uses the memory; the memory goes back when the stream reaches the free,
// and the host never waits for it.
TEST(CudaEmulator, FreeAsyncGivesMemoryBackInItsStreamsOrder) {
  LateStream late;
  cudaStream_t stream = late.stream;
  int *x = nullptr, *y = nullptr;
  ASSERT_EQ(
      cudaMallocAsync(reinterpret_cast<void **>(&x), 32 * sizeof(int), stream),
      cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&y), 32 * sizeof(int)),
            cudaSuccess);
  launchKernel(storeKernel, 1, 32, 0, stream, x, 5);
  launchKernel(copyKernel, 1, 32, 0, stream, x, y);
  ASSERT_EQ(cudaFreeAsync(x, stream), cudaSuccess);
  EXPECT_TRUE(emulator::onDevice(x, sizeof(int))); // not reached yet
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_FALSE(emulator::onDevice(x, sizeof(int)));
  EXPECT_EQ(y[31], 5);
  EXPECT_EQ(cudaFreeAsync(y + 1, stream), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaFree(y);
}

__global__ void spinKernel(unsigned *out, int rounds) {
  unsigned x = threadIdx.x;
  for (int r = 0; r < rounds; ++r)
    x = x * 1103515245u + 12345u;
  out[threadIdx.x] = x;
}

TEST(CudaEmulator, TimingEventsAreStampedWhenTheirStreamReachesThem) {
  LateStream late;
  cudaStream_t stream = late.stream;
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaEventCreateWithFlags(&start, cudaEventDefault), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&end, cudaEventDefault), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming),
            cudaSuccess);
  unsigned *x = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&x), 32 * sizeof(unsigned)),
            cudaSuccess);

  // Until the stream runs, neither is stamped: the kernel between them has
  // not run either.
  cudaEventRecord(start, stream);
  launchKernel(spinKernel, 1, 32, 0, stream, x, 1 << 20);
  cudaEventRecord(end, stream);
  cudaEventRecord(untimed, stream);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  cudaGetLastError();
  // Synchronizing with the second runs the kernel; the time between the
  // stamps is the kernel's.
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GT(ms, 0);
  float back = 0;
  ASSERT_EQ(cudaEventElapsedTime(&back, end, start), cudaSuccess);
  EXPECT_EQ(back, -ms);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed),
            cudaErrorInvalidResourceHandle);
  cudaGetLastError();

  cudaStreamSynchronize(stream);
  cudaFree(x);
  for (cudaEvent_t e : {start, end, untimed})
    cudaEventDestroy(e);
}

/// An NCCL operation in flight that arrives when `arrives` is set and
/// writes `value` to `out` when its stream reaches it.
std::shared_ptr<emulator::Work> operation(const bool &arrives, int *out,
                                          int value) {
  auto op = std::make_shared<emulator::Work>();
  op->poll = [&arrives] { return arrives; };
  op->run = [out, value] { *out = value; };
  return op;
}

/// Two streams and an event, as the NCCL communicator uses them.
struct CommAndCompute : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
              cudaSuccess);
  }
  void TearDown() override {
    cudaEventDestroy(done);
    cudaStreamDestroy(compute);
    cudaStreamDestroy(comm);
    emulator::setStreamOrder(order);
  }
  /// Enqueues an operation on the comm stream that writes `value` once
  /// `arrives` is set, and records `done` after it: pending, and the output
  /// untouched, until it arrives, as a collective a peer never joins stays
  /// pending for the watchdog.
  void enqueuePending(int value) {
    emulator::enqueueInFlight(comm, operation(arrives, &result, value));
    cudaEventRecord(done, comm);
    emulator::reachStream(compute);
    EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
    EXPECT_NE(result, value);
  }
  /// The order the other cases of the binary run in.
  emulator::StreamOrder order = emulator::streamOrder();
  cudaStream_t comm = nullptr, compute = nullptr;
  cudaEvent_t done = nullptr;
  bool arrives = false;
  int result = 0;
};

TEST_F(CommAndCompute, EagerlyAnOperationLandsWhenItsStreamIsNeeded) {
  emulator::setStreamOrder(emulator::StreamOrder::Eager);
  enqueuePending(1);
  // Arrived, but no reader has waited: the output is still the old one.
  arrives = true;
  emulator::reachStream(compute);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(result, 0);
  // The compute stream waits for it: it lands.
  cudaStreamWaitEvent(compute, done, 0);
  EXPECT_EQ(result, 1);

  // More work on the same stream lands it too; so does synchronising.
  emulator::enqueueInFlight(comm, operation(arrives, &result, 2));
  emulator::reachStream(comm);
  EXPECT_EQ(result, 2);
  emulator::enqueueInFlight(comm, operation(arrives, &result, 3));
  cudaDeviceSynchronize();
  EXPECT_EQ(result, 3);
}

TEST_F(CommAndCompute, LateAnOperationLandsAsSoonAsItArrives) {
  emulator::setStreamOrder(emulator::StreamOrder::Late);
  enqueuePending(1);
  // Arrived: it writes its output at the host's next call, though no
  // stream has waited for it.
  arrives = true;
  emulator::reachStream(compute);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(result, 1);
}

} // namespace
