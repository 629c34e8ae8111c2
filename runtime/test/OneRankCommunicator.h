//===- OneRankCommunicator.h - A job of one rank, for tests -----*- C++ -*-===//

#ifndef PARTITA_RUNTIME_TEST_ONERANKCOMMUNICATOR_H
#define PARTITA_RUNTIME_TEST_ONERANKCOMMUNICATOR_H

#include "partita/runtime/Communicator.h"

#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <stdexcept>
#include <vector>

namespace partita::runtime {

/// A job of one rank, in one process: collectives over groups of one,
/// messages to itself, work started at once. Every access to rank memory
/// goes through touch(), which a test may wrap (to open guarded memory).
class OneRankCommunicator : public Communicator {
public:
  int64_t worldRank() const override { return 0; }
  int64_t worldSize() const override { return 1; }
  int64_t groupSize(const std::string &) const override { return 1; }
  int64_t groupRank(const std::string &) const override { return 0; }
  void allReduce(const std::string &, float *, int64_t, bool) override {}
  void allGather(const std::string &, const float *in, int64_t n,
                 float *out) override {
    touch([&] { std::memmove(out, in, n * sizeof(float)); });
  }
  void allGather(const std::string &, const uint16_t *in, int64_t n,
                 uint16_t *out) override {
    touch([&] { std::memmove(out, in, n * sizeof(uint16_t)); });
  }
  void allReduce(const std::string &, uint16_t *, int64_t, bool) override {}
  void reduceScatter(const std::string &, const uint16_t *in, int64_t n,
                     uint16_t *out) override {
    touch([&] { std::memmove(out, in, n * sizeof(uint16_t)); });
  }
  void reduceScatter(const std::string &, const float *in, int64_t n,
                     float *out) override {
    touch([&] { std::memmove(out, in, n * sizeof(float)); });
  }
  void send(int64_t, const void *data, int64_t bytes) override {
    auto *p = static_cast<const char *>(data);
    touch([&] { messages.emplace_back(p, p + bytes); });
  }
  void recv(int64_t, void *data, int64_t bytes) override {
    if (messages.empty() || int64_t(messages.front().size()) != bytes)
      abort("a receive with no matching send");
    touch([&] { std::memcpy(data, messages.front().data(), bytes); });
    messages.pop_front();
  }
  void barrier() override {}
  bool anyRank(bool mine) override { return mine; }
  void finishSends() override {}
  std::shared_future<void>
  start(const std::string &,
        std::function<void(Communicator &)> work) override {
    work(*this);
    std::promise<void> done;
    done.set_value();
    return done.get_future().share();
  }
  void setWatchdog(double) override {}
  void setStep(int64_t) override {}
  [[noreturn]] void abort(const std::string &why) override {
    throw std::runtime_error(why);
  }

protected:
  /// Runs `access`, which reads or writes rank memory.
  virtual void touch(const std::function<void()> &access) { access(); }

private:
  std::deque<std::vector<char>> messages;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_TEST_ONERANKCOMMUNICATOR_H
