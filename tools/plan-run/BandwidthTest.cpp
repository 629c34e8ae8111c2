//===- BandwidthTest.cpp - The job's links, measured ----------------------===//

#include "BandwidthTest.h"
#include "DeviceRates.h"

#include "../../runtime/mpi/RankHosts.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include <unistd.h>

namespace partita {

namespace {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  SendRecv
};

constexpr Collective kCollectives[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
    Collective::AllToAll, Collective::SendRecv};

const char *name(Collective c) {
  switch (c) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  case Collective::SendRecv:
    return "send/recv";
  }
  return "";
}

/// nccl-tests' bus factor: what makes busbw the bandwidth each link of a
/// ring carries, comparable across collectives and group sizes.
double busFactor(Collective c, int n) {
  switch (c) {
  case Collective::AllReduce:
    return 2.0 * (n - 1) / n;
  case Collective::SendRecv:
    return 1;
  default:
    return double(n - 1) / n;
  }
}

/// One size of one collective, as nccl-tests reports it.
struct Row {
  int64_t bytes, count;
  double seconds, algbw, busbw; // bytes per second
};

/// A group kind: this rank's communicator in it (MPI_COMM_NULL where the
/// rank takes no part), and its size.
struct GroupKind {
  std::string title;
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 0;
};

/// Runs `c` once over `comm` on f32 buffers: `count` is the elements of
/// nccl-tests' size (the reduced buffer; the gathered or scattered whole;
/// all a rank sends to all; one message).
void runOnce(Collective c, MPI_Comm comm, int n, int me, int64_t count,
             std::vector<float> &in, std::vector<float> &out) {
  int block = int(count / n), whole = int(count);
  switch (c) {
  case Collective::AllReduce:
    MPI_Allreduce(in.data(), out.data(), whole, MPI_FLOAT, MPI_SUM, comm);
    break;
  case Collective::AllGather:
    MPI_Allgather(in.data(), block, MPI_FLOAT, out.data(), block, MPI_FLOAT,
                  comm);
    break;
  case Collective::ReduceScatter:
    MPI_Reduce_scatter_block(in.data(), out.data(), block, MPI_FLOAT, MPI_SUM,
                             comm);
    break;
  case Collective::AllToAll:
    MPI_Alltoall(in.data(), block, MPI_FLOAT, out.data(), block, MPI_FLOAT,
                 comm);
    break;
  case Collective::SendRecv:
    MPI_Sendrecv(in.data(), whole, MPI_FLOAT, (me + 1) % n, 0, out.data(),
                 whole, MPI_FLOAT, (me + n - 1) % n, 0, comm,
                 MPI_STATUS_IGNORE);
    break;
  }
}

/// The rows of `c` over `comm` for every size from `minBytes` to `maxBytes`
/// (doubling; sizes split into blocks round down to a multiple of the
/// group): the slowest member's mean time over enough iterations to take
/// about 0.2 s (2 to 50), after one to warm up that also sets their number.
std::vector<Row> measure(Collective c, MPI_Comm comm, int n,
                         const BandwidthOptions &o) {
  int me;
  MPI_Comm_rank(comm, &me);
  std::vector<float> in(o.maxBytes / 4, 1.0f), out(o.maxBytes / 4);
  // The slowest member's seconds per run of `runs` runs.
  auto time = [&](int64_t count, int runs) {
    MPI_Barrier(comm);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i)
      runOnce(c, comm, n, me, count, in, out);
    double mine = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count() /
                  runs,
           slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    return slowest;
  };
  std::vector<Row> rows;
  for (int64_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= 2) {
    int64_t count = bytes / 4;
    if (c != Collective::AllReduce && c != Collective::SendRecv)
      count -= count % n;
    if (count == 0)
      continue;
    double warm = time(count, 1);
    int runs = int(std::clamp(0.2 / std::max(warm, 1e-9), 2.0, 50.0));
    double seconds = time(count, runs);
    double algbw = double(count) * 4 / seconds;
    rows.push_back({count * 4, count, seconds, algbw, algbw * busFactor(c, n)});
  }
  return rows;
}

void printTable(Collective c, const GroupKind &kind,
                const std::vector<Row> &rows) {
  std::printf("# %s %s\n", name(c), kind.title.c_str());
  std::printf("# %12s %12s %12s %10s %10s\n", "size (B)", "count (f32)",
              "time (us)", "algbw GB/s", "busbw GB/s");
  for (const Row &r : rows)
    std::printf("  %12lld %12lld %12.1f %10.3f %10.3f\n", (long long)r.bytes,
                (long long)r.count, r.seconds * 1e6, r.algbw / 1e9,
                r.busbw / 1e9);
}

/// What the topology takes of a group kind: all_reduce's highest busbw
/// over the sizes that take at least 10 times the smallest message (the
/// sustained bandwidth its ring formula implies, above the sizes where
/// latency counts), and one smallest message's time.
struct Link {
  double bytesPerSecond = 0, latencySeconds = 0;
};

Link summarize(const std::vector<Row> &allReduce,
               const std::vector<Row> &sendRecv) {
  Link link;
  if (!sendRecv.empty())
    link.latencySeconds = sendRecv.front().seconds;
  if (allReduce.empty())
    return link;
  double floor = 10 * allReduce.front().seconds;
  for (const Row &row : allReduce)
    if (row.seconds >= floor)
      link.bytesPerSecond = std::max(link.bytesPerSecond, row.busbw);
  // Sizes too few to leave the latency's range: the largest.
  if (link.bytesPerSecond == 0)
    link.bytesPerSecond = allReduce.back().busbw;
  return link;
}

/// The topology of what was measured: the `cpu` preset's kinds of links
/// with the measured rates, a device of the measured GEMM peak and
/// element-wise bandwidth (memory: the host's, shared by its ranks), and
/// the calibration that makes the cost model's roofline the measured one.
nlohmann::json measuredTopology(int hosts, int perHost, const Link &intra,
                                const Link &inter, const DeviceRates &rates) {
  double tflops = rates.gemmPeak / 1e12;
  long pages = sysconf(_SC_PHYS_PAGES), pageBytes = sysconf(_SC_PAGE_SIZE);
  double memoryGib = pages > 0 && pageBytes > 0
                         ? double(pages) * double(pageBytes) / perHost /
                               double(int64_t(1) << 30)
                         : 4.0;
  nlohmann::json t = {{"version", 1},
                      {"name", "measured"},
                      {"preset", "cpu"},
                      {"nodes", hosts},
                      {"devices_per_node", perHost},
                      {"device",
                       {{"kind", "cpu rank (measured)"},
                        {"bf16_tflops", tflops},
                        {"fp16_tflops", tflops},
                        {"fp32_tflops", tflops},
                        {"memory_gib", memoryGib},
                        {"hbm_gbytes_per_s", rates.memoryBytesPerS / 1e9}}},
                      {"calibration",
                       {{"gemm_efficiency", 1},
                        {"gemm_half_dim", rates.gemmHalfDim},
                        {"attention_efficiency", rates.attentionEfficiency},
                        {"hbm_efficiency", 1},
                        {"collective_efficiency", 1}}}};
  if (perHost > 1)
    t["intra_node"] = {{"kind", "shared_memory"},
                       {"gbytes_per_s", intra.bytesPerSecond / 1e9},
                       {"latency_us", intra.latencySeconds * 1e6}};
  if (hosts > 1)
    t["inter_node"] = {{"kind", "fat_tree"},
                       {"nics_per_node", 1},
                       {"gbits_per_s", inter.bytesPerSecond * 8 / 1e9},
                       {"latency_us", inter.latencySeconds * 1e6},
                       {"oversubscription", 1}};
  return t;
}

/// This rank's group of `kind`: every host's ranks, or one rank (its first)
/// of each host.
GroupKind makeGroup(bool acrossHosts, const runtime::RankHosts &hosts,
                    int rank) {
  auto byHost = hosts.byHost();
  int host = 0, local = 0;
  for (size_t h = 0; h < byHost.size(); ++h) {
    auto &ranks = byHost[h].second;
    auto it = std::find(ranks.begin(), ranks.end(), rank);
    if (it != ranks.end()) {
      host = int(h);
      local = int(it - ranks.begin());
    }
  }
  GroupKind kind;
  int colour = acrossHosts ? (local == 0 ? 0 : MPI_UNDEFINED) : host;
  MPI_Comm_split(MPI_COMM_WORLD, colour, acrossHosts ? host : local,
                 &kind.comm);
  if (kind.comm != MPI_COMM_NULL)
    MPI_Comm_size(kind.comm, &kind.size);
  kind.title = acrossHosts ? "across hosts (the first rank of each of " +
                                 std::to_string(byHost.size()) + " hosts)"
                           : "inside a host (" +
                                 std::to_string(byHost[host].second.size()) +
                                 " ranks; every host at once)";
  return kind;
}

} // namespace

int runBandwidthTest(const BandwidthOptions &o,
                     const runtime::RankHosts &hosts) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto byHost = hosts.byHost();
  int perHost = int(byHost.front().second.size());
  bool even = std::all_of(byHost.begin(), byHost.end(), [&](const auto &h) {
    return int(h.second.size()) == perHost;
  });
  if (rank == 0)
    std::printf("plan-run: bandwidth test of %d ranks on %zu host%s: %s; "
                "f32 over MPI, sizes %lld to %lld bytes\n",
                hosts.size(), byHost.size(), byHost.size() == 1 ? "" : "s",
                hosts.map().c_str(), (long long)o.minBytes,
                (long long)o.maxBytes);
  DeviceRates rates = measureDeviceRates(MPI_COMM_WORLD);
  if (rank == 0)
    printDeviceRates(rates, "every rank at once (" + hosts.map() + ")");
  Link links[2];
  for (bool across : {false, true}) {
    GroupKind kind = makeGroup(across, hosts, rank);
    std::vector<Row> allReduce, sendRecv;
    // Every group of the kind measures at once; the others wait.
    if (kind.comm != MPI_COMM_NULL && kind.size > 1)
      for (Collective c : kCollectives) {
        std::vector<Row> rows = measure(c, kind.comm, kind.size, o);
        if (rank == 0)
          printTable(c, kind, rows);
        if (c == Collective::AllReduce)
          allReduce = rows;
        if (c == Collective::SendRecv)
          sendRecv = rows;
      }
    links[across] = summarize(allReduce, sendRecv);
    if (kind.comm != MPI_COMM_NULL)
      MPI_Comm_free(&kind.comm);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) {
    for (bool across : {false, true})
      if (links[across].bytesPerSecond > 0)
        std::printf("plan-run: %s: all_reduce busbw %.3f GB/s "
                    "(%.2f Gbit/s), smallest send/recv %.1f us\n",
                    across ? "across hosts" : "inside a host",
                    links[across].bytesPerSecond / 1e9,
                    links[across].bytesPerSecond * 8 / 1e9,
                    links[across].latencySeconds * 1e6);
    std::fflush(stdout);
  }
  if (o.topologyPath.empty())
    return 0;
  int status = 0;
  if (rank == 0) {
    std::ofstream out(o.topologyPath);
    if (!even)
      std::cerr << "plan-run: warning: the hosts run different numbers of "
                   "ranks; the topology gives each "
                << perHost << " devices, as the first host has\n";
    out << measuredTopology(int(byHost.size()), perHost, links[0], links[1],
                            rates)
               .dump(2)
        << "\n";
    out.close();
    if (!out) {
      std::cerr << "plan-run: error: cannot write " << o.topologyPath << "\n";
      status = 1;
    } else {
      std::printf("plan-run: wrote %s (plan-opt --topology=%s)\n",
                  o.topologyPath.c_str(), o.topologyPath.c_str());
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

} // namespace partita
