//===- Trainer.h - Runs a plan's training steps on one rank -----*- C++ -*-===//

#ifndef PARTITA_RUNTIME_TRAINER_H
#define PARTITA_RUNTIME_TRAINER_H

#include "partita/runtime/Communicator.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace partita::runtime {

/// Where tokens come from: the synthetic stream of docs/plan-format.md, or
/// a flat file of little-endian uint16 or uint32 tokens.
class TokenSource {
public:
  virtual ~TokenSource() = default;
  /// The `length` tokens of sequence `index` of the stream (sequence j of
  /// step n is n * global_batch + j).
  virtual void sequence(int64_t index, int32_t *out, int64_t length) = 0;
};
std::unique_ptr<TokenSource> syntheticTokens(int64_t vocab);
/// A flat file of tokens, `bytesPerToken` 2 (uint16) or 4 (uint32),
/// little-endian; sequence i is tokens [i * (length - 1), i * (length - 1) +
/// length). Throws std::runtime_error naming the file when it cannot hold
/// `sequences` sequences of `length` tokens or holds a token >= `vocab`.
std::unique_ptr<TokenSource> fileTokens(const std::string &path,
                                        int bytesPerToken, int64_t vocab,
                                        int64_t sequences, int64_t length);

/// One launch as it ran, for the Chrome trace (microseconds on this host's
/// monotonic clock).
struct TraceEvent {
  std::string name;
  bool comm; // the comm stream (collectives, messages) or compute
  double startUs, durationUs;
  int64_t step, microBatch;
  std::string phase;
  /// Launches that ran as one: of one kernel (Device::launchAll), or the
  /// collectives of a bucket (Trainer::collectiveRun).
  int64_t launches = 1;
};

struct StepResult {
  double loss = 0;     // mean over the global batch (on the last stage)
  double gradNorm = 0; // before clipping
  bool hasLoss = false;
  /// Collective calls this rank made during the step (one per chunk; a
  /// bucket's members go as one).
  int64_t collectiveCalls = 0;
};

/// Elements of f32 workspace per stream a collective moves through at a
/// time by default (128 MiB): collectives of larger buffers run in chunks,
/// so the workspace outside the memory plan stays bounded.
constexpr int64_t kDefaultCollectiveChunk = int64_t(32) << 20;

/// One rank's executor: the buffers of its program (allocated once), the
/// parameters initialised as the plan says, and the schedule run per step.
class Trainer {
public:
  /// Throws std::runtime_error, before any step, when the plan needs a
  /// kernel the device lacks. `collectiveChunk` bounds each stream's
  /// collective workspace, in f32 elements (a single column of a
  /// collective over many ranks may need more).
  Trainer(const Plan &plan, Device &device, Communicator &comm,
          TokenSource &data, int64_t collectiveChunk = kDefaultCollectiveChunk);
  /// Waits for the collectives a step leaves in flight for the next,
  /// without recording them or rethrowing their errors.
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;
  StepResult step(int64_t step);
  /// Waits for every collective in flight (those a step phase carries to
  /// the next step's forward, next_step) and traces them: before the
  /// state is read or written from outside the schedule, or the trace is
  /// written.
  void drain();
  /// Bytes this rank allocated for buffers.
  int64_t allocatedBytes() const { return bytes; }
  /// Bytes of collective workspace, allocated with the buffers.
  int64_t collectiveWorkspaceBytes() const { return workspaceBytes; }
  /// The state a checkpoint holds: every parameter, parameter shard and
  /// optimizer-state buffer of this rank, in program order, each copied to
  /// host memory for `visit`.
  void readState(
      const std::function<void(const BufferSpec &, const float *)> &visit);
  /// Sets that state: `fill` writes each buffer's values (host memory).
  void writeState(const std::function<void(const BufferSpec &, float *)> &fill);
  /// Every parameter as the unsharded tensor, gathered on world rank 0
  /// (empty elsewhere); collective: every rank calls it.
  std::map<std::string, std::vector<float>> gatherParameters();
  /// Every parameter's gradient as the optimizer read it in the last step
  /// (summed over micro-batches, reduced over data-parallel and tied
  /// copies, before clipping), unsharded on world rank 0; collective.
  std::map<std::string, std::vector<float>> gatherGradients();
  /// On world rank 0, how the copies of `p`'s value (or gradient, as the
  /// last step's adamw read it) that ranks hold differ: data-parallel and
  /// tensor-parallel replicas and the stages that share a tied weight must
  /// hold it bit for bit alike. Empty where they do, and elsewhere than
  /// rank 0; collective.
  std::string differingCopies(const ParameterSpec &p, bool gradient);

  /// A parameter's value, one of AdamW's moments, or the f32 master copy
  /// of a plan trained below f32.
  /// After Value, in kOptimizerStatePrefixes' order.
  enum class StateKind { Value, AdamM, AdamV, Master };
  /// The buffer of holder `h`'s program that holds `p`'s gradient as the
  /// step's adamw reads it.
  std::string gradientBuffer(const ParameterSpec &p,
                             const ParameterHolder &h) const;
  /// The buffer (of the parameter's first holder's program) that holds it.
  std::string stateBuffer(const ParameterSpec &p, StateKind kind) const;
  /// The unsharded tensor of `buffer` (a parameter's value or moment), on
  /// world rank 0; collective.
  std::vector<float> gatherGlobal(const ParameterSpec &p,
                                  const std::string &buffer);
  /// Fills this rank's `buffer` of parameter `p` (value or moment, whole or
  /// ZeRO shard) from the unsharded tensor, given element by element.
  void fillFromGlobal(const ParameterSpec &p, const std::string &buffer,
                      const std::function<float(uint64_t)> &global);
  /// Records every launch from now on into `events` (null: stop).
  void traceInto(std::vector<TraceEvent> *events) { trace = events; }
  /// Seconds spent per kernel name and per collective kind, over all steps:
  /// host time from each launch's start to its return, or, after
  /// timeLaunchesOnDevice, the compute stream's time where the device
  /// times its work (Device::timesLaunches).
  const std::map<std::string, double> &launchSeconds() const { return seconds; }
  /// Whether launchSeconds counts device time from now on (false where the
  /// device cannot time its work).
  bool timeLaunchesOnDevice() {
    deviceTiming = device.timesLaunches();
    return deviceTiming;
  }
  /// Adds the device's times of the last step to launchSeconds: a call of
  /// its own, so that reading the events falls outside a timed step.
  void collectLaunchSeconds() {
    if (deviceTiming)
      for (const auto &[what, s] : device.takeLaunchSeconds())
        seconds[what] += s;
  }
  /// Forgets launchSeconds so far (a run's first step, which sets up).
  void clearLaunchSeconds() { seconds.clear(); }

private:
  /// A view of elements in the arena, with the vector calls the executor
  /// uses.
  template <typename T> struct Span {
    T *ptr = nullptr;
    int64_t count = 0;
    T *data() const { return ptr; }
    size_t size() const { return count; }
    T *begin() const { return ptr; }
    T *end() const { return ptr + count; }
    T &operator[](size_t k) const { return ptr[k]; }
  };
  /// One copy of a buffer: the span of its element type is set.
  struct Storage {
    Span<float> f;
    Span<uint16_t> h; // bf16
    Span<int32_t> i;
    void *data() const {
      return f.data()   ? static_cast<void *>(f.data())
             : h.data() ? static_cast<void *>(h.data())
                        : static_cast<void *>(i.data());
    }
  };
  Storage &storage(int index, int64_t microBatch);
  void initialise();
  void forEachStateBuffer(const std::function<void(int)> &visit);
  /// Buffer `index`'s first copy as f32 values in host memory, and back
  /// (bf16 buffers widened and rounded).
  std::vector<float> downloadF32(int index);
  void uploadF32(int index, const std::vector<float> &values);
  void runPhase(const Phase &phase, int64_t microBatch, int64_t step);
  /// The end of the run of launches from `first` the device takes
  /// together: consecutive launches of one kernel, running in
  /// `microBatch`, none touching a buffer another writes.
  size_t runTogether(const Phase &phase, size_t first,
                     int64_t microBatch) const;
  /// Runs the collective with `c`: the communicator itself, or, for an
  /// async launch, the one its comm thread hands the work; the data
  /// movement around it goes on `stream`, in chunks through the stream's
  /// workspace: as bf16 where movesAsBf16 (a lone all-reduce in place, a
  /// split gather straight from its input rows, rank blocks copied into
  /// place), else as f32 (bf16 widened in, rounded out once).
  struct CollectiveRun;
  void collective(const CollectiveRun &run, int64_t microBatch, Communicator &c,
                  Stream stream);
  /// A run in motion (CollectiveMove.cpp).
  struct CollectiveMove;
  /// The collectives that run as one from collective launch `first` of
  /// `phase`: itself, and the launches after it of the same data-parallel
  /// bucket that are flat and alike (kind, group, flags, dtype path) and
  /// touch no buffer of another member. The simulator and the cost model
  /// charge a bucket as one collective; so it runs.
  std::vector<const Launch *> collectiveRun(const Phase &phase,
                                            size_t first) const;
  /// The columns per rank of flat collective `l` over g ranks: the shard,
  /// ceil(whole / g) of a gather.
  int64_t flatShard(const Launch &l, int64_t g) const;
  /// How a run of collectives is chunked. A split collective's buffers are
  /// `rows` rows (outer dimensions of the split) of `columns` elements per
  /// rank; a flat run's are one row of `columns`, its members' shards side
  /// by side. A chunk is `columnsPerChunk` columns, across row ends
  /// (`inColumns`), or else `rowsPerChunk` whole rows, and uses `workspace`
  /// f32 elements (bf16 paths pack two bf16 elements in one), at most
  /// `collectiveChunk` unless one column needs more.
  struct Chunking {
    int64_t rows = 0, columns = 0, rowsPerChunk = 1, columnsPerChunk = 1;
    int64_t workspace = 0;
    bool inColumns = false;
  };
  Chunking chunking(const std::vector<const Launch *> &members) const;
  /// A run of collectives (collectiveRun) and its chunking, worked out once.
  /// An in-place all-reduce runs whole on the `chunking.columns` elements
  /// from buffer `inPlace`'s start: its own, or a bucket's that lie side by
  /// side in the arena (inPlaceSpan).
  struct CollectiveRun {
    std::vector<const Launch *> members;
    Chunking chunking;
    int inPlace = -1;
  };
  /// Of a bucket of in-place all-reduces, the buffer at the start of the
  /// span of the arena that its buffers fill, up to the 64-byte alignment
  /// between them, and the span's length in elements; none when a member
  /// has several copies, is an integer buffer or starts off its element
  /// size, the dtypes differ, a gap is wider than the alignment or another
  /// buffer shares the span's bytes. Reduced whole, the span needs no
  /// workspace: the memory plan places ZeRO-0's gradient buckets so
  /// (exec-plan-memory). The gaps belong to no buffer and are reduced
  /// element by element like the rest, so whatever they hold stays there
  /// (zeros: the arena starts zeroed).
  std::optional<std::pair<int, int64_t>>
  inPlaceSpan(const std::vector<const Launch *> &members,
              const std::vector<std::vector<int64_t>> &copyOffsets) const;
  /// Whether collective `l` moves as bf16: its input and output are bf16,
  /// so the bytes on the wire are the ones the cost model and simulator
  /// count, and it replaces its output or is a flat reduce-scatter (ZeRO
  /// 2 and 3's gradients, whose sum arrives as bf16 and is added to the
  /// shard in f32, then rounded). Gradients that should sum in f32 are f32
  /// buffers in the plan (exec-build-backward's gradient-dtype, from the cost
  /// model's gradient_bytes=4); a bf16 sum over more than two ranks rounds as
  /// each rank's value joins it.
  bool movesAsBf16(const Launch &l) const;
  /// Uploads the tokens and labels phase `phase`'s model chunk reads, of
  /// micro-batch `microBatch`, before its forward run.
  void fillInputs(int64_t step, int64_t microBatch, int phase);
  int64_t peer(bool next) const;

  const Plan &plan;
  Device &device;
  /// Per phase, the tokens and labels buffers its model chunk reads.
  std::vector<std::vector<int>> phaseInputs;
  Communicator &comm;
  TokenSource &data;
  const Program &program;
  Coordinates coords;
  /// Per buffer: one storage, or one per micro-batch slot.
  std::vector<std::vector<Storage>> buffers;
  int64_t bytes = 0;
  int64_t collectiveChunk;
  /// Collective workspace after the buffers, by the lane of the stream
  /// (Stream::commLane) whose collectives use it.
  int64_t workspaceBytes = 0;
  std::map<int, float *> workspaces;
  /// Where collective `l`'s data movement runs: in line on the compute
  /// stream, or, async, on its group's comm stream.
  Stream collectiveStream(const Launch &l) const {
    return l.async ? Stream::comm(plan.commLane(l.group)) : Stream::Compute;
  }
  /// Each run of collectives, by the launch that starts it.
  std::map<const Launch *, CollectiveRun> runs;
  /// Calls made to the communicator's collectives (a chunk each), from
  /// the comm thread too.
  std::atomic<int64_t> collectiveCalls{0};
  std::map<std::string, double> seconds;
  bool deviceTiming = false;
  std::vector<TraceEvent> *trace = nullptr;
  /// Async collectives started and not yet waited for, by output buffer:
  /// when each is done, and when it ran on the comm thread (for the trace).
  struct InFlight {
    std::shared_future<void> done;
    std::shared_ptr<std::pair<double, double>> ranUs;
    const Launch *launch;
    /// The launches of its run the trace event counts: the run's size for
    /// its first, 0 for the others (one event per run).
    int64_t traced = 1;
  };
  std::map<int, InFlight> inFlight;
  /// Waits for the collective of `it` and records it for the trace.
  void finish(std::map<int, InFlight>::iterator it, int64_t microBatch,
              const std::string &phase);
  int64_t currentStep = 0;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_TRAINER_H
