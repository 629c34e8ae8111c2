//===- MpiCommunicator.cpp - The Communicator over MPI --------------------===//

#include "MpiCommunicator.h"

#include "partita/runtime/Plan.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <list>
#include <map>
#include <vector>

namespace partita::runtime {

namespace {

class MpiCommunicator : public Communicator {
public:
  explicit MpiCommunicator(const Plan &plan) {
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    world = rank;
    worldCount = size;
    // Every rank calls MPI_Comm_split for every group kind, in the same
    // order (std::map), with its group's index as the colour.
    for (const auto &[name, groups] : plan.groups) {
      int color = MPI_UNDEFINED, key = 0;
      for (size_t g = 0; g < groups.size(); ++g) {
        auto it = std::find(groups[g].begin(), groups[g].end(), rank);
        if (it != groups[g].end()) {
          color = int(g);
          key = int(it - groups[g].begin());
        }
      }
      MPI_Comm comm;
      MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
      if (comm != MPI_COMM_NULL)
        comms[name] = comm;
    }
  }
  ~MpiCommunicator() override {
    finishSends();
    for (auto &[name, comm] : comms)
      MPI_Comm_free(&comm);
  }

  int64_t worldRank() const override { return world; }
  int64_t worldSize() const override { return worldCount; }
  int64_t groupSize(const std::string &group) const override {
    int n;
    MPI_Comm_size(comm(group), &n);
    return n;
  }
  int64_t groupRank(const std::string &group) const override {
    int r;
    MPI_Comm_rank(comm(group), &r);
    return r;
  }
  void allReduce(const std::string &group, float *data, int64_t n,
                 bool max) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT,
                        max ? MPI_MAX : MPI_SUM, comm(group)),
          "all_reduce", group);
  }
  void allGather(const std::string &group, const float *in, int64_t n,
                 float *out) override {
    check(MPI_Allgather(in, int(n), MPI_FLOAT, out, int(n), MPI_FLOAT,
                        comm(group)),
          "all_gather", group);
  }
  void reduceScatter(const std::string &group, const float *in, int64_t n,
                     float *out) override {
    check(MPI_Reduce_scatter_block(in, out, int(n), MPI_FLOAT, MPI_SUM,
                                   comm(group)),
          "reduce_scatter", group);
  }
  void send(int64_t to, const void *data, int64_t bytes) override {
    // The copy lives until the message is delivered: the sender's buffer
    // may be overwritten by the next micro-batch before then.
    pending.emplace_back();
    Pending &p = pending.back();
    p.data.assign(static_cast<const char *>(data),
                  static_cast<const char *>(data) + bytes);
    check(MPI_Isend(p.data.data(), int(bytes), MPI_BYTE, int(to), 0,
                    MPI_COMM_WORLD, &p.request),
          "send", "pp");
    reap();
  }
  void recv(int64_t from, void *data, int64_t bytes) override {
    check(MPI_Recv(data, int(bytes), MPI_BYTE, int(from), 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "recv", "pp");
  }
  void finishSends() override {
    for (Pending &p : pending)
      MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    pending.clear();
  }
  [[noreturn]] void abort(const std::string &why) override {
    std::cerr << "plan-run: rank " << world << ": " << why << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);
  }

private:
  struct Pending {
    std::vector<char> data;
    MPI_Request request;
  };

  MPI_Comm comm(const std::string &group) const {
    auto it = comms.find(group);
    if (it == comms.end())
      const_cast<MpiCommunicator *>(this)->abort(
          "the plan uses group \"" + group + "\", which has no member here");
    return it->second;
  }
  void check(int code, const char *what, const std::string &group) {
    if (code != MPI_SUCCESS)
      abort(std::string(what) + " over " + group + " failed (MPI error " +
            std::to_string(code) + ")");
  }
  /// Frees delivered sends.
  void reap() {
    for (auto it = pending.begin(); it != pending.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? pending.erase(it) : std::next(it);
    }
  }

  int64_t world = 0, worldCount = 1;
  std::map<std::string, MPI_Comm> comms;
  std::list<Pending> pending;
};

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(const Plan &plan) {
  return std::make_unique<MpiCommunicator>(plan);
}

} // namespace partita::runtime
