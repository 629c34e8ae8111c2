//===- RankHosts.h - Where the job's ranks run, and who still answers -*- C++
//-*-===//
//
// Every rank's host name, gathered once over MPI_COMM_WORLD, and a liveness
// probe that does not go through MPI: each rank listens on a TCP port of
// its own, so that a rank whose collective times out can tell which ranks
// are gone (a refused or unanswered connection: the process or its host is
// dead, or the link to it is cut) from those that are only stuck.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_MPI_RANKHOSTS_H
#define PARTITA_RUNTIME_MPI_RANKHOSTS_H

#include <mpi.h>

#include <netinet/in.h>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace partita::runtime {

/// Ends this process with `status` after `seconds`, whatever it is doing
/// then: armed by a rank that stops the job, in case stopping hangs.
void exitWithin(double seconds, int status);

/// Hears the line and exit status of a rank that stops the job, just
/// before MPI_Abort (plan-run tells its launcher).
void setAbortObserver(void (*observer)(const std::string &line, int status));

/// Writes `line` (if any) to stderr in one write and stops the job with
/// MPI_Abort; this process exits within a few seconds even where MPI_Abort
/// cannot reach the launcher (its host is cut off).
[[noreturn]] void abortWorld(const std::string &line, int status = 1);

/// The IPv4 address of `host`: loopback for this machine's own name, without
/// a lookup (a single-host job needs no name service), else what it
/// resolves to, if it does.
std::optional<in_addr> hostAddress(const std::string &host);

/// "0-1, 3 and 5-7": sorted ranks as ranges.
std::string rankRanges(std::vector<int> ranks);

class RankHosts {
public:
  /// Collective over `world`: every rank opens its listener and the table
  /// of hosts and ports is gathered.
  explicit RankHosts(MPI_Comm world);
  ~RankHosts();
  RankHosts(const RankHosts &) = delete;
  RankHosts &operator=(const RankHosts &) = delete;

  int size() const { return int(hosts.size()); }
  const std::string &host(int rank) const { return hosts[rank]; }
  /// The ranks on each host, hosts in the order of their first rank.
  std::vector<std::pair<std::string, std::vector<int>>> byHost() const;
  /// "ranks 0-1 on node1, 2-3 on node2".
  std::string map() const;
  /// The ranks other than this one that accept no connection within
  /// `seconds` (all probed at once).
  std::vector<int> unanswering(double seconds) const;
  struct Silence {
    /// What a timed-out rank says of the others: "ranks 2-3 on node2 (the
    /// whole host) do not answer", or that every rank answers (one is
    /// stuck, not gone).
    std::string words;
    /// Whether no rank of any other host answers: this host is cut off
    /// (or alone alive).
    bool cutOff = false;
  };
  Silence probe(double seconds) const;
  /// The launcher's "host:port" (plan-run's monitor): a host that reaches
  /// it is not cut off, whatever else it cannot reach.
  void setLauncher(const std::string &hostPort);

private:
  int me = 0;
  int listener = -1;
  std::thread acceptor;
  std::vector<std::string> hosts;
  /// Each rank's listening address, where its host name resolved.
  std::vector<std::optional<sockaddr_in>> addresses;
  std::optional<sockaddr_in> launcher;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_RANKHOSTS_H
