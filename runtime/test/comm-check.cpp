//===- comm-check.cpp - The MPI communicator, under mpirun ----------------===//
//
//   mpirun -np N partita-comm-check PLAN.json [PIECE_BYTES]
//
// Checks, on the groups of a plan with N ranks: every collective's result
// against the value it must have, pipeline messages in order (with
// PIECE_BYTES, sent to MPI in pieces of that many bytes, as buffers past
// MPI's int counts are), and that
// start() runs collectives on the comm thread while this thread computes
// (the result is right, and the work started first finishes first). Prints
// "ok" on rank 0; a wrong value stops the job naming the check.
//
//===----------------------------------------------------------------------===//

#include "partita/runtime/Bf16.h"
#include "partita/runtime/Plan.h"

#include "../mpi/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

using namespace partita::runtime;

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: partita-comm-check PLAN.json [PIECE_BYTES]\n";
    return 2;
  }
  Plan plan = loadPlan(argv[1]);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto comm = createMpiCommunicator(plan, argc == 3 ? std::stoll(argv[2])
                                                    : kMpiPieceBytes);
  auto expect = [&](bool ok, const std::string &what) {
    if (!ok)
      comm->abort("comm-check failed: " + what);
  };
  for (const auto &[name, groups] : plan.groups) {
    if (!std::any_of(groups.begin(), groups.end(), [&](const auto &g) {
          return std::count(g.begin(), g.end(), rank);
        }))
      continue;
    int64_t g = comm->groupSize(name), r = comm->groupRank(name);
    // All-reduce: sum and max of (group rank + 1).
    std::vector<float> x(5, float(r + 1));
    comm->allReduce(name, x.data(), x.size(), false);
    expect(x[4] == g * (g + 1) / 2.0f, name + " all_reduce sum");
    std::vector<float> m(3, float(r + 1));
    comm->allReduce(name, m.data(), m.size(), true);
    expect(m[0] == float(g), name + " all_reduce max");
    // All-gather and reduce-scatter.
    std::vector<float> mine(2, float(r)), all(2 * g);
    comm->allGather(name, mine.data(), 2, all.data());
    for (int64_t q = 0; q < g; ++q)
      expect(all[2 * q] == float(q), name + " all_gather order");
    // bf16 elements gather as they are, bit for bit.
    std::vector<uint16_t> mine16 = {uint16_t(0x7fc1 + r), uint16_t(r)},
                          all16(2 * g);
    comm->allGather(name, mine16.data(), 2, all16.data());
    for (int64_t q = 0; q < g; ++q)
      expect(all16[2 * q] == 0x7fc1 + q && all16[2 * q + 1] == q,
             name + " bf16 all_gather");
    // bf16 sums and maxima of small integers, which bf16 holds exactly.
    std::vector<uint16_t> x16(3, toBf16(float(r + 1)));
    comm->allReduce(name, x16.data(), 3, false);
    expect(fromBf16(x16[2]) == g * (g + 1) / 2.0f, name + " bf16 all_reduce");
    std::fill(x16.begin(), x16.end(), toBf16(float(r + 1)));
    comm->allReduce(name, x16.data(), 3, true);
    expect(fromBf16(x16[0]) == float(g), name + " bf16 all_reduce max");
    std::vector<uint16_t> blocks16(2 * g, toBf16(1.0f)), block16(2);
    comm->reduceScatter(name, blocks16.data(), 2, block16.data());
    expect(fromBf16(block16[1]) == float(g), name + " bf16 reduce_scatter");
    std::vector<float> blocks(2 * g, 1.0f), block(2);
    comm->reduceScatter(name, blocks.data(), 2, block.data());
    expect(block[1] == float(g), name + " reduce_scatter");
    // Every element in its place: element i of rank q's block holds
    // 100 q + i + rank / 8 (exact in f32 and, for small ranks, bf16 sums).
    constexpr int64_t n = 7;
    auto value = [&](int64_t q, int64_t i, int64_t from) {
      return float(100 * q + i) + float(from) / 8;
    };
    std::vector<float> own(n), gathered(n * g), scattered(n);
    for (int64_t i = 0; i < n; ++i)
      own[i] = value(r, i, 0);
    comm->allGather(name, own.data(), n, gathered.data());
    std::vector<float> spread(n * g), summed(n);
    for (int64_t q = 0; q < g; ++q)
      for (int64_t i = 0; i < n; ++i) {
        expect(gathered[q * n + i] == value(q, i, 0),
               name + " all_gather of " + std::to_string(n) + " elements");
        spread[q * n + i] = value(q, i, r);
      }
    comm->reduceScatter(name, spread.data(), n, scattered.data());
    for (int64_t i = 0; i < n; ++i)
      summed[i] = g * value(r, i, 0) + float(g * (g - 1) / 2) / 8;
    expect(scattered == summed,
           name + " reduce_scatter of " + std::to_string(n) + " elements");
    std::vector<uint16_t> spread16(n * g), scattered16(n);
    for (int64_t q = 0; q < g; ++q)
      for (int64_t i = 0; i < n; ++i)
        spread16[q * n + i] = toBf16(float(q + i + 1));
    comm->reduceScatter(name, spread16.data(), n, scattered16.data());
    for (int64_t i = 0; i < n; ++i)
      expect(fromBf16(scattered16[i]) == float(g * (r + i + 1)),
             name + " bf16 reduce_scatter of " + std::to_string(n) +
                 " elements");
    std::vector<float> reduced(n);
    for (int64_t i = 0; i < n; ++i)
      reduced[i] = float(i * (r + 1));
    comm->allReduce(name, reduced.data(), n, false);
    for (int64_t i = 0; i < n; ++i)
      expect(reduced[i] == float(i * g * (g + 1) / 2),
             name + " all_reduce of " + std::to_string(n) + " elements");
    // Asynchronous: two all-reduces started, compute meanwhile, then wait.
    // (Fewer elements in pieces of a few bytes: thousands of calls else.)
    size_t elements = argc == 3 ? 64 : 1 << 16;
    std::vector<float> a(elements, 1.0f), b(elements, 2.0f);
    std::vector<int> order;
    auto first = comm->start(name, [&](Communicator &c) {
      c.allReduce(name, a.data(), a.size(), false);
      order.push_back(1);
    });
    auto second = comm->start(name, [&](Communicator &c) {
      c.allReduce(name, b.data(), b.size(), false);
      order.push_back(2);
    });
    double work = 0;
    for (int i = 1; i < 2000000; ++i)
      work += std::sqrt(double(i));
    second.get();
    first.get();
    expect(work > 0 && a[17] == float(g) && b[elements - 1] == 2.0f * g,
           name + " asynchronous all_reduce");
    expect(order == std::vector<int>{1, 2}, name + " start() order");
  }
  // Pipeline neighbours: two messages each way arrive in order.
  if (plan.pp > 1) {
    const Coordinates &c = plan.devices[rank];
    auto peer = [&](int64_t p) {
      return ((p + plan.pp) % plan.pp * plan.dp + c.dp) * plan.tp + c.tp;
    };
    float one[3] = {1, 3, 5}, two[3] = {2, 4, 6}, got[2][3];
    comm->send(peer(c.pp + 1), one, sizeof(one));
    comm->send(peer(c.pp + 1), two, sizeof(two));
    comm->recv(peer(c.pp - 1), got[0], sizeof(got[0]));
    comm->recv(peer(c.pp - 1), got[1], sizeof(got[1]));
    comm->finishSends();
    expect(std::equal(one, one + 3, got[0]) && std::equal(two, two + 3, got[1]),
           "pipeline messages in order");
  }
  comm->barrier();
  if (rank == 0)
    std::cout << "ok: " << plan.groups.size() << " group kinds on "
              << plan.worldSize << " ranks\n";
  comm.reset();
  MPI_Finalize();
  return 0;
}
