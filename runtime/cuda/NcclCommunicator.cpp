//===- NcclCommunicator.cpp - The plan's groups over NCCL -----------------===//
//
// One world communicator (its unique id broadcast over MPI) and one split
// per plan group. A group's collectives run on its own comm stream, so that
// a tensor-parallel collective never queues behind a data-parallel one
// started before it (NCCL runs communicators' kernels side by side; every
// rank issues a group's collectives in the same order): a synchronous call
// makes the comm stream wait for the compute stream's work so far and the
// compute stream wait for the collective, so the host never blocks; start()
// leaves the second wait to the future's get(), which is where the plan's
// `wait` puts it. bf16 buffers go as ncclBfloat16 where the executor moves
// them as bf16. Pipeline messages use one two-rank communicator and stream
// per direction of each neighbour pair, so sends and receives of a 1F1B
// schedule never queue behind each other; only the directions the rank's
// program uses are connected.
//
// A watchdog thread follows every enqueued operation by its event, and the
// host's blocking MPI calls (the executor's barriers and agreements, host
// messages of checkpoints): past the collective timeout, on an NCCL
// asynchronous error, or on a CUDA error (a kernel's fault, which no later
// event outlives), it aborts the communicators and stops the job, naming
// the rank, the operation and the step.
//
//===----------------------------------------------------------------------===//

#include "../mpi/MpiPieces.h"
#include "../mpi/RankHosts.h"
#include "CudaDevice.h"

#include "partita/runtime/GroupedCommunicator.h"

#include <mpi.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unistd.h>

namespace partita::runtime {

namespace {

using cuda::check;
using cuda::CudaDevice;

class NcclCommunicator : public GroupedCommunicator<ncclComm_t> {
public:
  NcclCommunicator(const Plan &plan, CudaDevice &device)
      : plan(plan), device(device) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me = rank;
    worldCount = size;
    check(cudaSetDevice(device.index()), "cudaSetDevice");
    ncclUniqueId id;
    if (rank == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId", "world");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    checkNccl(ncclCommInitRank(&world, size, id, rank), "ncclCommInitRank",
              "world");
    splitGroups(plan, me, [&](const std::string &name, auto member) {
      ncclComm_t comm = nullptr;
      checkNccl(ncclCommSplit(world,
                              member ? member->first : NCCL_SPLIT_NOCOLOR,
                              member ? member->second : 0, &comm, nullptr),
                "ncclCommSplit", name);
      return comm;
    });
    if (plan.pp > 1)
      connectPipeline();
    watchdog = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    watchdog.join();
    cudaDeviceSynchronize();
    for (Pending &p : pending)
      cudaEventDestroy(p.event);
    for (cudaEvent_t e : spareEvents)
      cudaEventDestroy(e);
    for (auto &[stream, e] : orderEvents)
      cudaEventDestroy(e);
    for (Staging &s : stagings) {
      cudaFree(s.data);
      cudaEventDestroy(s.sent);
    }
    for (auto &[name, g] : groupsByName)
      ncclCommDestroy(g.comm);
    for (auto &[pair, channel] : channels) {
      ncclCommDestroy(channel.comm);
      cudaStreamDestroy(channel.stream);
    }
    ncclCommDestroy(world);
  }

  int64_t worldRank() const override { return me; }
  int64_t worldSize() const override { return worldCount; }

  // Each collective in f32 and in bf16: NCCL takes the element type.
  void allReduce(const std::string &name, float *data, int64_t n,
                 bool max) override {
    allReduceAs(name, data, n, ncclFloat, max);
  }
  void allReduce(const std::string &name, uint16_t *data, int64_t n,
                 bool max) override {
    allReduceAs(name, data, n, ncclBfloat16, max);
  }
  void allGather(const std::string &name, const float *in, int64_t n,
                 float *out) override {
    allGatherAs(name, in, n, out, ncclFloat);
  }
  void allGather(const std::string &name, const uint16_t *in, int64_t n,
                 uint16_t *out) override {
    allGatherAs(name, in, n, out, ncclBfloat16);
  }
  void reduceScatter(const std::string &name, const float *in, int64_t n,
                     float *out) override {
    reduceScatterAs(name, in, n, out, ncclFloat);
  }
  void reduceScatter(const std::string &name, const uint16_t *in, int64_t n,
                     uint16_t *out) override {
    reduceScatterAs(name, in, n, out, ncclBfloat16);
  }
  void send(int64_t to, const void *data, int64_t bytes) override {
    if (isHost(data)) { // gathers for checkpoints and --save-params
      // Copied: the caller may reuse `data` before the receiver gets it.
      hostSends.emplace_back();
      HostSend &h = hostSends.back();
      h.data.assign(static_cast<const char *>(data),
                    static_cast<const char *>(data) + bytes);
      forEachMpiPiece(bytes, [&](int64_t at, int count) {
        h.requests.emplace_back();
        MPI_Isend(h.data.data() + at, count, MPI_BYTE, int(to), 0,
                  MPI_COMM_WORLD, &h.requests.back());
      });
      return;
    }
    Channel &c = channel(me, to);
    // The send may wait long for the peer's receive, and the memory plan
    // reuses the buffer once the send is issued: send a copy, made on the
    // compute stream where the data is ready.
    Staging &copy = staging(bytes);
    cudaStream_t compute = device.stream(Stream::Compute);
    check(cudaMemcpyAsync(copy.data, data, bytes, cudaMemcpyDeviceToDevice,
                          compute),
          "staging a send");
    after(compute, c.stream);
    nvtxRangePushA("send");
    checkNccl(ncclSend(copy.data, size_t(bytes), ncclChar, 1, c.comm, c.stream),
              "ncclSend", "pp");
    nvtxRangePop();
    check(cudaEventRecord(copy.sent, c.stream), "an event");
    follow(c.stream, "send to rank " + std::to_string(to));
  }
  void recv(int64_t from, void *data, int64_t bytes) override {
    if (isHost(data)) {
      hostCall("receive from rank " + std::to_string(from), [&] {
        forEachMpiPiece(bytes, [&](int64_t at, int count) {
          MPI_Recv(static_cast<char *>(data) + at, count, MPI_BYTE, int(from),
                   0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        });
      });
      return;
    }
    Channel &c = channel(from, me);
    // The buffer may still be read by earlier compute.
    after(device.stream(Stream::Compute), c.stream);
    nvtxRangePushA("recv");
    checkNccl(ncclRecv(data, size_t(bytes), ncclChar, 0, c.comm, c.stream),
              "ncclRecv", "pp");
    nvtxRangePop();
    follow(c.stream, "receive from rank " + std::to_string(from));
    after(c.stream, device.stream(Stream::Compute));
  }
  void barrier() override {
    hostCall("barrier over world", [] { MPI_Barrier(MPI_COMM_WORLD); });
  }
  bool anyRank(bool mine) override {
    int value = mine, any = 0;
    hostCall("agreement over world", [&] {
      MPI_Allreduce(&value, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    });
    return any != 0;
  }
  void finishSends() override {
    hostCall("delivery of host sends", [this] {
      for (HostSend &h : hostSends)
        MPI_Waitall(int(h.requests.size()), h.requests.data(),
                    MPI_STATUSES_IGNORE);
    });
    hostSends.clear();
    for (auto &[pair, c] : channels)
      if (pair.first == me)
        check(cudaStreamSynchronize(c.stream), "pipeline sends");
  }

  std::shared_future<void>
  start(const std::string &group,
        std::function<void(Communicator &)> work) override {
    cudaStream_t comm = commStream(group);
    after(device.stream(Stream::Compute), comm);
    insideStart = true;
    work(*this);
    insideStart = false;
    cudaEvent_t done = takeEvent();
    check(cudaEventRecord(done, comm), "an event");
    cudaStream_t compute = device.stream(Stream::Compute);
    // Waiting makes the compute stream wait; the host goes on.
    return std::async(std::launch::deferred,
                      [this, compute, done] {
                        check(cudaStreamWaitEvent(compute, done, 0),
                              "waiting for a collective");
                        giveBack(done);
                      })
        .share();
  }
  void setWatchdog(double seconds) override { timeoutSeconds = seconds; }
  void setStep(int64_t s) override { step = s; }

  [[noreturn]] void abort(const std::string &why) override {
    // One caller stops the job: with `mutex` held, so the communicators are
    // never aborted twice, nor while the watchdog asks them for errors.
    std::lock_guard<std::mutex> lock(mutex);
    stopLocked(why);
  }

private:
  /// abort's work, for a caller that holds `mutex` (the watchdog).
  [[noreturn]] void stopLocked(const std::string &why) {
    std::string line =
        "plan-run: rank " + std::to_string(me) + ": " + why + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    // Aborting a communicator whose peers are gone may itself hang.
    exitWithin(10, 1);
    for (auto &[name, g] : groupsByName)
      ncclCommAbort(g.comm);
    for (auto &[pair, c] : channels)
      ncclCommAbort(c.comm);
    ncclCommAbort(world);
    abortWorld("");
  }

  // The collectives above, for the element type `type`.
  void allReduceAs(const std::string &name, void *data, int64_t n,
                   ncclDataType_t type, bool max) {
    const Group &g = group(name);
    collective("all-reduce over " + name, name, [&](cudaStream_t s) {
      return ncclAllReduce(data, data, size_t(n), type, max ? ncclMax : ncclSum,
                           g.comm, s);
    });
  }
  void allGatherAs(const std::string &name, const void *in, int64_t n,
                   void *out, ncclDataType_t type) {
    const Group &g = group(name);
    collective("all-gather over " + name, name, [&](cudaStream_t s) {
      return ncclAllGather(in, out, size_t(n), type, g.comm, s);
    });
  }
  void reduceScatterAs(const std::string &name, const void *in, int64_t n,
                       void *out, ncclDataType_t type) {
    const Group &g = group(name);
    collective("reduce-scatter over " + name, name, [&](cudaStream_t s) {
      return ncclReduceScatter(in, out, size_t(n), type, ncclSum, g.comm, s);
    });
  }

  /// One direction between two pipeline neighbours: rank 0 of `comm` sends.
  struct Channel {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };
  /// Device memory a send reads from, free again once `sent` completes.
  struct Staging {
    void *data = nullptr;
    int64_t bytes = 0;
    cudaEvent_t sent = nullptr;
  };
  struct HostSend {
    std::vector<char> data;
    std::vector<MPI_Request> requests; // one per piece
  };
  struct HostCall {
    std::string what;
    int64_t step;
    std::chrono::steady_clock::time_point since;
  };
  struct Pending : HostCall {
    cudaEvent_t event;
  };

  /// Stops the job, naming `what` and NCCL's reason, unless `status` is a
  /// success (or, for a non-blocking communicator, still in progress).
  void checkNccl(ncclResult_t status, const std::string &what) {
    if (status != ncclSuccess && status != ncclInProgress)
      abort(what + " failed: " + ncclGetErrorString(status));
  }
  void checkNccl(ncclResult_t status, const char *what,
                 const std::string &over) {
    checkNccl(status, std::string(what) + " over " + over);
  }
  static bool isHost(const void *p) {
    cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();
      return true;
    }
    return attributes.type != cudaMemoryTypeDevice &&
           attributes.type != cudaMemoryTypeManaged;
  }
  /// `later` waits for the work enqueued on `earlier` so far. A wait
  /// takes the event's last record when it is enqueued, so one event per
  /// stream serves every such wait.
  void after(cudaStream_t earlier, cudaStream_t later) {
    cudaEvent_t &e = orderEvents[earlier];
    if (!e)
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "an event");
    check(cudaEventRecord(e, earlier), "an event");
    check(cudaStreamWaitEvent(later, e, 0), "an event");
  }
  /// An event for the watchdog or a future, from those given back.
  cudaEvent_t takeEvent() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!spareEvents.empty()) {
        cudaEvent_t e = spareEvents.back();
        spareEvents.pop_back();
        return e;
      }
    }
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "an event");
    return e;
  }
  void giveBack(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    spareEvents.push_back(e);
  }
  cudaStream_t commStream(const std::string &group) {
    return device.stream(Stream::comm(plan.commLane(group)));
  }
  /// Runs `enqueue` on `group`'s comm stream, in order with the compute
  /// stream unless inside start().
  template <typename Enqueue>
  void collective(const std::string &what, const std::string &group,
                  Enqueue enqueue) {
    cudaStream_t comm = commStream(group);
    cudaStream_t compute = device.stream(Stream::Compute);
    if (!insideStart)
      after(compute, comm);
    nvtxRangePushA(what.c_str());
    ncclResult_t status = enqueue(comm);
    nvtxRangePop();
    checkNccl(status, what);
    follow(comm, what);
    if (!insideStart)
      after(comm, compute);
  }
  /// Runs `mpi`, a blocking MPI call of the host's, under the watchdog's
  /// timeout as enqueued work is: a peer stuck between steps leaves this
  /// rank in a barrier, not in NCCL.
  template <typename Fn> void hostCall(const std::string &what, Fn &&mpi) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      blocking = HostCall{what, step, std::chrono::steady_clock::now()};
    }
    changed.notify_all();
    mpi();
    std::lock_guard<std::mutex> lock(mutex);
    blocking.reset();
  }
  /// Hands the watchdog an event after the work enqueued on `s`.
  void follow(cudaStream_t s, const std::string &what) {
    cudaEvent_t e = takeEvent();
    check(cudaEventRecord(e, s), "an event");
    {
      std::lock_guard<std::mutex> lock(mutex);
      pending.push_back({{what, step, std::chrono::steady_clock::now()}, e});
    }
    changed.notify_all();
  }
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    // This thread's errors stop the job as the others do (stopLocked, with
    // `mutex` held), never by an exception, which would end the process
    // without a word.
    if (cudaError_t status = cudaSetDevice(device.index()))
      stopLocked(std::string("cudaSetDevice in the NCCL watchdog: ") +
                 cudaGetErrorString(status));
    auto timedOut = [this](std::chrono::steady_clock::time_point since) {
      return timeoutSeconds > 0 && std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - since)
                                           .count() > timeoutSeconds;
    };
    auto stopTimedOut = [this](const std::string &what, int64_t inStep) {
      stopLocked(what + " did not complete within " +
                 std::to_string(int64_t(timeoutSeconds)) + " s in step " +
                 std::to_string(inStep) +
                 " (a rank is stuck or gone); stopping the job");
    };
    while (!stopping) {
      changed.wait_for(lock, std::chrono::milliseconds(50));
      if (blocking && timedOut(blocking->since))
        stopTimedOut(blocking->what, blocking->step);
      cudaError_t reached = cudaSuccess;
      while (!pending.empty() &&
             (reached = cudaEventQuery(pending.front().event)) == cudaSuccess) {
        spareEvents.push_back(pending.front().event);
        pending.pop_front();
      }
      if (pending.empty())
        continue;
      // A fault in a kernel or copy is sticky: every later query reports
      // it, and nothing pending will complete.
      if (reached != cudaErrorNotReady)
        stopLocked("CUDA error in step " +
                   std::to_string(pending.front().step) + ", at or before " +
                   pending.front().what + ": " + cudaGetErrorString(reached) +
                   "; stopping the job");
      ncclResult_t error = ncclSuccess;
      ncclCommGetAsyncError(world, &error);
      for (auto &[name, g] : groupsByName)
        if (error == ncclSuccess)
          ncclCommGetAsyncError(g.comm, &error);
      for (auto &[pair, c] : channels)
        if (error == ncclSuccess)
          ncclCommGetAsyncError(c.comm, &error);
      const Pending &oldest = pending.front();
      if (error != ncclSuccess)
        stopLocked(oldest.what + " failed in step " +
                   std::to_string(oldest.step) + ": " +
                   ncclGetErrorString(error) + "; stopping the job");
      if (timedOut(oldest.since))
        stopTimedOut(oldest.what, oldest.step);
    }
  }

  int64_t pipelinePeer(bool next) const {
    const Coordinates &c = plan.devices[me];
    int64_t p = (c.pp + (next ? 1 : plan.pp - 1)) % plan.pp;
    return (p * plan.dp + c.dp) * plan.tp + c.tp;
  }
  /// A two-rank communicator for each direction this rank's program sends
  /// or receives in (the peer's program has the matching receive or send),
  /// created in one global order (by the pair's ranks) so that no two ranks
  /// wait for each other. NCCL's buffers are allocated per communicator:
  /// the last stage's link to the first exists only where the interleaved
  /// schedule uses it.
  void connectPipeline() {
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (const Phase &phase : plan.programs[plan.devices[me].pp].phases)
      for (const Launch &l : phase.launches) {
        int64_t peer = pipelinePeer(l.toNext);
        if (l.op == Launch::Op::Send && peer != me)
          pairs.push_back({me, peer});
        else if (l.op == Launch::Op::Recv && peer != me)
          pairs.push_back({peer, me});
      }
    std::sort(pairs.begin(), pairs.end(), [](auto a, auto b) {
      return std::make_pair(
                 std::min(a.first, a.second),
                 std::make_tuple(std::max(a.first, a.second), a.first)) <
             std::make_pair(
                 std::min(b.first, b.second),
                 std::make_tuple(std::max(b.first, b.second), b.first));
    });
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    for (auto [from, to] : pairs) {
      ncclUniqueId id;
      if (from == me) {
        checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId", "pp");
        MPI_Send(&id, sizeof(id), MPI_BYTE, int(to), 1, MPI_COMM_WORLD);
      } else {
        MPI_Recv(&id, sizeof(id), MPI_BYTE, int(from), 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
      }
      Channel c;
      checkNccl(ncclCommInitRank(&c.comm, 2, id, from == me ? 0 : 1),
                "ncclCommInitRank", "pp");
      check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
            "a pipeline stream");
      channels[{from, to}] = c;
    }
  }
  /// A staging buffer of at least `bytes` whose last send is done.
  Staging &staging(int64_t bytes) {
    for (Staging &s : stagings)
      if (s.bytes >= bytes && cudaEventQuery(s.sent) == cudaSuccess)
        return s;
    stagings.emplace_back();
    Staging &s = stagings.back();
    s.bytes = bytes;
    // In the compute stream's order, where the copy into it is made: a
    // stream-ordered allocation never waits for the device, whose pending
    // sends may wait for this host (CudaDevice::grow).
    check(cudaMallocAsync(&s.data, bytes, device.stream(Stream::Compute)),
          "a send staging buffer");
    check(cudaEventCreateWithFlags(&s.sent, cudaEventDisableTiming),
          "an event");
    return s;
  }
  Channel &channel(int64_t from, int64_t to) {
    auto it = channels.find({from, to});
    if (it == channels.end())
      abort("a pipeline message from rank " + std::to_string(from) +
            " to rank " + std::to_string(to) +
            ", which are not pipeline neighbours");
    return it->second;
  }

  const Plan &plan;
  CudaDevice &device;
  int64_t me = 0, worldCount = 1;
  ncclComm_t world = nullptr;
  std::map<std::pair<int64_t, int64_t>, Channel> channels;
  std::list<HostSend> hostSends;
  std::list<Staging> stagings;
  bool insideStart = false;
  std::atomic<double> timeoutSeconds{0};
  std::atomic<int64_t> step{0};
  std::thread watchdog;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Pending> pending;
  /// The host's blocking MPI call under way, if any (hostCall).
  std::optional<HostCall> blocking;
  /// Events done with, for reuse (under `mutex`: the watchdog gives back).
  std::vector<cudaEvent_t> spareEvents;
  /// after()'s event per stream it orders others after (host thread only).
  std::map<cudaStream_t, cudaEvent_t> orderEvents;
  bool stopping = false;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(const Plan &plan,
                                                     Device &device) {
  auto *cudaDevice = dynamic_cast<CudaDevice *>(&device);
  if (!cudaDevice)
    throw std::runtime_error("the NCCL communicator needs a CUDA device");
  return std::make_unique<NcclCommunicator>(plan, *cudaDevice);
}

} // namespace partita::runtime
