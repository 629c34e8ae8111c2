//===- Communicator.h - Collectives and p2p over mesh groups ----*- C++ -*-===//

#ifndef PARTITA_RUNTIME_COMMUNICATOR_H
#define PARTITA_RUNTIME_COMMUNICATOR_H

#include <cstdint>
#include <functional>
#include <future>
#include <string>

namespace partita::runtime {

struct Plan;

/// The collectives and point-to-point messages of a plan, over the plan's
/// named groups (docs/plan-format.md). Backends implement it (MPI on CPUs;
/// NCCL on GPUs).
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int64_t worldRank() const = 0;
  virtual int64_t worldSize() const = 0;
  /// Size of this rank's group `group`, and this rank's position in it.
  virtual int64_t groupSize(const std::string &group) const = 0;
  virtual int64_t groupRank(const std::string &group) const = 0;
  /// In place: the sum (or maximum) of every member's `n` elements.
  virtual void allReduce(const std::string &group, float *data, int64_t n,
                         bool max) = 0;
  /// `out` = every member's `n` elements of `in`, in group order.
  virtual void allGather(const std::string &group, const float *in, int64_t n,
                         float *out) = 0;
  /// `out` = block `groupRank` (of `n` elements) of the sum over members of
  /// `in` (groupSize x n elements).
  virtual void reduceScatter(const std::string &group, const float *in,
                             int64_t n, float *out) = 0;
  /// The same three of bf16 elements, moved as they are (half the bytes):
  /// reductions add (or compare) in f32 and round to bf16 as they combine
  /// values, as NCCL does, so with more than two members their result may
  /// differ from the f32 sum rounded once.
  virtual void allGather(const std::string &group, const uint16_t *in,
                         int64_t n, uint16_t *out) = 0;
  virtual void allReduce(const std::string &group, uint16_t *data, int64_t n,
                         bool max) = 0;
  virtual void reduceScatter(const std::string &group, const uint16_t *in,
                             int64_t n, uint16_t *out) = 0;
  /// Sends without waiting for the receiver; messages between two ranks
  /// arrive in order.
  virtual void send(int64_t to, const void *data, int64_t bytes) = 0;
  virtual void recv(int64_t from, void *data, int64_t bytes) = 0;
  /// Waits until every rank of the job gets here.
  virtual void barrier() = 0;
  /// Whether any rank of the job passes true: an agreement on a host value
  /// (every rank found its checkpoint file intact). The collectives above
  /// take rank memory, which on a GPU is not the host's.
  virtual bool anyRank(bool mine) = 0;
  /// Waits until every send has been delivered.
  virtual void finishSends() = 0;
  /// Starts `work` (calls of this interface over `group`) and returns at
  /// once; the future is ready when it has run. `work` runs on the comm
  /// thread (MPI), or is enqueued on `group`'s comm stream (NCCL). The
  /// synchronous calls above are this with an immediate wait, so a group's
  /// collectives run in the order they were started; those of different
  /// groups may overlap where the backend has a stream per group.
  virtual std::shared_future<void>
  start(const std::string &group, std::function<void(Communicator &)> work) = 0;
  /// A call that does not complete within `seconds` (0: never) stops the
  /// job, naming the call and the step set by setStep.
  virtual void setWatchdog(double seconds) = 0;
  virtual void setStep(int64_t step) = 0;
  /// Stops the whole job with `why`.
  [[noreturn]] virtual void abort(const std::string &why) = 0;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_COMMUNICATOR_H
