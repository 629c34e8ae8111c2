//===- MpiCommunicator.cpp - The Communicator over MPI --------------------===//

#include "MpiCommunicator.h"
#include "Bf16Reductions.h"
#include "MpiPieces.h"

#include "partita/runtime/GroupedCommunicator.h"
#include "partita/runtime/Plan.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace partita::runtime {

namespace {

/// The MPI calls of a rank, all made on one comm thread (MPI at
/// MPI_THREAD_SERIALIZED): the executor's thread queues them and, for
/// synchronous launches, waits; with asynchronous ones it computes
/// meanwhile.
class MpiCommunicator : public GroupedCommunicator<MPI_Comm> {
public:
  MpiCommunicator(const Plan &plan, int64_t pieceBytes,
                  std::shared_ptr<const RankHosts> hosts)
      : pieceBytes(pieceBytes), hosts(std::move(hosts)) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    world = rank;
    worldCount = size;
    splitGroups(plan, rank, [](const std::string &, auto member) {
      MPI_Comm comm;
      MPI_Comm_split(MPI_COMM_WORLD, member ? member->first : MPI_UNDEFINED,
                     member ? member->second : 0, &comm);
      return comm;
    });
    worker = std::thread([this] { serve(); });
  }
  ~MpiCommunicator() override {
    finishSends();
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    ready.notify_one();
    worker.join();
    for (auto &[name, group] : groupsByName)
      MPI_Comm_free(&group.comm);
  }

  int64_t worldRank() const override { return world; }
  int64_t worldSize() const override { return worldCount; }

  // Each collective in f32 and in bf16 (MPI_UINT16_T, with the bf16
  // reductions of Bf16Reductions.h).
  void allReduce(const std::string &name, float *data, int64_t n,
                 bool max) override {
    allReduceAs(name, data, n, MPI_FLOAT, max ? MPI_MAX : MPI_SUM);
  }
  void allReduce(const std::string &name, uint16_t *data, int64_t n,
                 bool max) override {
    allReduceAs(name, data, n, MPI_UINT16_T, bf16Reduction(max));
  }
  void allGather(const std::string &name, const float *in, int64_t n,
                 float *out) override {
    allGatherAs(name, in, n, out, MPI_FLOAT);
  }
  void allGather(const std::string &name, const uint16_t *in, int64_t n,
                 uint16_t *out) override {
    allGatherAs(name, in, n, out, MPI_UINT16_T);
  }
  void reduceScatter(const std::string &name, const float *in, int64_t n,
                     float *out) override {
    reduceScatterAs(name, in, n, out, MPI_FLOAT, MPI_SUM);
  }
  void reduceScatter(const std::string &name, const uint16_t *in, int64_t n,
                     uint16_t *out) override {
    reduceScatterAs(name, in, n, out, MPI_UINT16_T, bf16Reduction(false));
  }
  void send(int64_t to, const void *data, int64_t bytes) override {
    // The copy lives until the message is delivered: the sender's buffer
    // may be overwritten by the next micro-batch before then.
    auto copy = std::make_shared<std::vector<char>>(
        static_cast<const char *>(data),
        static_cast<const char *>(data) + bytes);
    call("send to rank " + std::to_string(to), [=] {
      forEachPiece(bytes, pieceBytes, [&](int64_t at, int count) {
        pending.push_back({copy, MPI_REQUEST_NULL});
        check(MPI_Isend(copy->data() + at, count, MPI_BYTE, int(to), 0,
                        MPI_COMM_WORLD, &pending.back().request),
              "send", "pp");
      });
      reap();
    });
  }
  void recv(int64_t from, void *data, int64_t bytes) override {
    call("receive from rank " + std::to_string(from), [=] {
      forEachPiece(bytes, pieceBytes, [&](int64_t at, int count) {
        check(MPI_Recv(static_cast<char *>(data) + at, count, MPI_BYTE,
                       int(from), 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "recv", "pp");
      });
    });
  }
  void barrier() override {
    call("barrier over world",
         [this] { check(MPI_Barrier(MPI_COMM_WORLD), "barrier", "world"); });
  }
  bool anyRank(bool mine) override {
    int any = 0;
    call("agreement over world", [this, mine, &any] {
      int value = mine;
      check(MPI_Allreduce(&value, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
            "agreement", "world");
    });
    return any != 0;
  }
  void finishSends() override {
    call("delivery of pipeline sends", [this] {
      for (Pending &p : pending)
        MPI_Wait(&p.request, MPI_STATUS_IGNORE);
      pending.clear();
    });
  }
  void setWatchdog(double seconds) override { watchdogSeconds = seconds; }
  void setStep(int64_t s) override { step = s; }
  std::shared_future<void>
  start(const std::string &group,
        std::function<void(Communicator &)> work) override {
    // One comm thread for every group: CPU ranks prove the arithmetic, and
    // the work's own calls must not wait on the thread they run on.
    std::shared_future<void> ran = enqueue([this, work] {
      onWorker = true;
      work(*this);
      onWorker = false;
    });
    // Whoever waits for the work waits under the watchdog.
    std::string what = "an asynchronous collective over " + group;
    return std::async(std::launch::deferred,
                      [this, ran, what] { await(ran, what); })
        .share();
  }
  [[noreturn]] void abort(const std::string &why) override {
    // One write: lines of ranks stopping at once must not interleave.
    abortWorld("plan-run: rank " + std::to_string(world) + ": " + why + "\n");
  }

private:
  // The collectives above, for the element type `type`. MPI counts are
  // ints: a buffer of more elements than a piece's bytes hold goes in
  // pieces, each element reduced over the same ranks.
  void allReduceAs(const std::string &name, void *data, int64_t n,
                   MPI_Datatype type, MPI_Op op) {
    MPI_Comm comm = group(name).comm;
    call("all_reduce over " + name, [=] {
      int size = elementBytes(type);
      forEachPiece(n, pieceElements(size), [&](int64_t at, int count) {
        check(MPI_Allreduce(MPI_IN_PLACE, offset(data, at * size), count, type,
                            op, comm),
              "all_reduce", name);
      });
    });
  }
  void allGatherAs(const std::string &name, const void *in, int64_t n,
                   void *out, MPI_Datatype type) {
    MPI_Comm comm = group(name).comm;
    call("all_gather over " + name, [=] {
      int size = elementBytes(type);
      if (n <= pieceElements(size)) {
        check(MPI_Allgather(in, int(n), type, out, int(n), type, comm),
              "all_gather", name);
        return;
      }
      // A piece of every rank's block at once: rank q's lands n elements
      // after rank q - 1's, the extent of the type it is received as.
      forEachPiece(n, pieceElements(size), [&](int64_t at, int count) {
        MPI_Datatype piece, block;
        MPI_Type_contiguous(count, type, &piece);
        MPI_Type_create_resized(piece, 0, MPI_Aint(n) * size, &block);
        MPI_Type_commit(&block);
        check(MPI_Allgather(offset(in, at * size), count, type,
                            offset(out, at * size), 1, block, comm),
              "all_gather", name);
        MPI_Type_free(&block);
        MPI_Type_free(&piece);
      });
    });
  }
  void reduceScatterAs(const std::string &name, const void *in, int64_t n,
                       void *out, MPI_Datatype type, MPI_Op op) {
    const Group &g = group(name);
    MPI_Comm comm = g.comm;
    int ranks = g.size, me = g.rank;
    call("reduce_scatter over " + name, [=] {
      int size = elementBytes(type);
      if (n <= pieceElements(size)) {
        check(MPI_Reduce_scatter_block(in, out, int(n), type, op, comm),
              "reduce_scatter", name);
        return;
      }
      // Each rank's block reduced to it, piece by piece: the reduction ops
      // (bf16's are user-defined) take no strided types.
      forEachPiece(n, pieceElements(size), [&](int64_t at, int count) {
        for (int q = 0; q < ranks; ++q)
          check(MPI_Reduce(offset(in, (q * n + at) * size),
                           q == me ? offset(out, at * size) : nullptr, count,
                           type, op, q, comm),
                "reduce_scatter", name);
      });
    });
  }

  static int elementBytes(MPI_Datatype type) {
    int size;
    MPI_Type_size(type, &size);
    return size;
  }
  /// Elements of `size` bytes in a piece: at least one.
  int64_t pieceElements(int size) const {
    return std::max<int64_t>(1, pieceBytes / size);
  }
  static void *offset(void *data, int64_t bytes) {
    return static_cast<char *>(data) + bytes;
  }
  static const void *offset(const void *data, int64_t bytes) {
    return static_cast<const char *>(data) + bytes;
  }

  /// A piece of a send in flight, and the copy it reads from.
  struct Pending {
    std::shared_ptr<std::vector<char>> data;
    MPI_Request request;
  };

  void check(int code, const char *what, const std::string &group) {
    if (code != MPI_SUCCESS)
      abort(std::string(what) + " over " + group + " failed (MPI error " +
            std::to_string(code) + ")");
  }
  /// Frees delivered sends (comm thread).
  void reap() {
    for (auto it = pending.begin(); it != pending.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? pending.erase(it) : std::next(it);
    }
  }

  std::shared_future<void> enqueue(std::function<void()> job) {
    auto task = std::make_shared<std::packaged_task<void()>>(std::move(job));
    std::shared_future<void> done = task->get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex);
      queue.push_back([task] { (*task)(); });
    }
    ready.notify_one();
    return done;
  }
  /// Runs `job` on the comm thread and waits for it; past the watchdog's
  /// timeout the job is stopped, with `what` and the step named.
  void call(const std::string &what, std::function<void()> job) {
    if (onWorker) {
      job();
      return;
    }
    await(enqueue(std::move(job)), what);
  }
  /// Waits for `done`; past the watchdog's timeout the job is stopped,
  /// with `what`, the step and the ranks that no longer answer named.
  void await(const std::shared_future<void> &done, const std::string &what) {
    if (watchdogSeconds > 0 &&
        done.wait_for(std::chrono::duration<double>(watchdogSeconds)) !=
            std::future_status::ready) {
      RankHosts::Silence silence;
      silence.words = "a rank is stuck or gone";
      if (hosts)
        silence = hosts->probe(kProbeSeconds);
      std::string why = what + " did not complete within " +
                        std::to_string(int64_t(watchdogSeconds)) +
                        " s in step " + std::to_string(step) + ": " +
                        silence.words + "; stopping the job";
      if (silence.cutOff)
        endCutOffDaemon(why);
      abort(why);
    }
    done.get();
  }
  /// On a host that reaches no other, MPI_Abort cannot reach mpirun, and
  /// the host's OpenMPI daemon (this rank's parent) would wait for it for
  /// as long as TCP retries: the rank says why and ends the daemon, which
  /// ends the host's other ranks.
  void endCutOffDaemon(const std::string &why) {
    std::ifstream parent("/proc/" + std::to_string(getppid()) + "/comm");
    std::string name;
    if (!(parent >> name) || name != "orted")
      return;
    std::string line = "plan-run: rank " + std::to_string(world) + ": " + why +
                       "; this host reaches no other, so its daemon stops "
                       "too\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    ::kill(getppid(), SIGTERM);
    _exit(1);
  }
  void serve() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        ready.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty())
          return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      job();
    }
  }

  /// How long a rank that timed out waits for the others to answer.
  static constexpr double kProbeSeconds = 3;
  int64_t pieceBytes; // of a message or collective MPI is given at once
  std::shared_ptr<const RankHosts> hosts;
  int64_t world = 0, worldCount = 1;
  double watchdogSeconds = 0;
  int64_t step = 0;
  std::list<Pending> pending; // comm thread only
  std::thread worker;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  static thread_local bool onWorker;
};

thread_local bool MpiCommunicator::onWorker = false;

} // namespace

std::unique_ptr<Communicator>
createMpiCommunicator(const Plan &plan, int64_t pieceBytes,
                      std::shared_ptr<const RankHosts> hosts) {
  return std::make_unique<MpiCommunicator>(plan, pieceBytes, std::move(hosts));
}

} // namespace partita::runtime
