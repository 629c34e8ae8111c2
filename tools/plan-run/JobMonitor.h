//===- JobMonitor.h - The launcher's view of its ranks ----------*- C++ -*-===//
//
// plan-run, launching a job through mpirun, listens on a TCP port whose
// address it gives every rank (PARTITA_MONITOR). Each rank connects once
// and says who and where it is, the reporting rank says each step it
// completes, and a rank says why it stops the job, or that it was told to
// stop. A rank whose connection ends without a word, or stays open but
// silent after mpirun is done, is lost: its process or host died, or its
// link is cut. So when the job fails the launcher can say which hosts and
// ranks were lost and in which step, and it ends an mpirun that waits on
// a daemon it can no longer reach.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_TOOLS_PLANRUN_JOBMONITOR_H
#define PARTITA_TOOLS_PLANRUN_JOBMONITOR_H

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace partita {

/// The environment variable that carries the monitor's address to ranks.
constexpr const char *kMonitorVariable = "PARTITA_MONITOR";

class JobMonitor {
public:
  /// Listens on every address of this host; throws where it cannot.
  explicit JobMonitor(int64_t worldSize);
  ~JobMonitor();
  /// "host:port", for the ranks.
  std::string address() const;
  /// Follows the ranks until `launcher` (mpirun, leading its own process
  /// group) exits, and returns its exit status. Once a rank has stopped the
  /// job, a launcher still running `grace` seconds later is ended, with
  /// every process it started, and the status is the one that rank gave.
  int superviseUntilExit(pid_t launcher, double grace);
  /// What the launcher says of a job that failed: the step, and the ranks
  /// and hosts lost, if any.
  std::string verdict(int status) const;

private:
  struct Rank {
    std::string host;
    int fd = -1;
    enum class State {
      Unseen,
      Running,
      Stopping,
      Told,
      Done,
      Silent
    } state = State::Unseen;
  };
  void accept();
  /// Reads what connection `fd` says; false once it has ended.
  bool read(int fd);
  void onLine(int fd, const std::string &line);
  void forget(int fd);

  int listener = -1;
  std::string host;
  int port = 0;
  std::vector<Rank> ranks;
  std::map<int, std::string> pending; // fd -> its unfinished line
  std::map<int, int> rankOf;          // fd -> rank, once it said hello
  int64_t lastStep = 0;
  bool stopped = false;
  /// The exit status the first rank to stop the job gave.
  int stopStatus = 1;
};

/// The rank's end: connects to the monitor named by PARTITA_MONITOR, if
/// any, and says hello. Safe to call from a signal handler: told().
class MonitorLink {
public:
  static void connect(int rank);
  static void step(int64_t step);
  /// Why this rank stops the job, and with which exit status.
  static void stopping(const std::string &why, int status);
  /// The job's end reached this rank (a signal); async-signal-safe.
  static void told();
  static void done();
};

} // namespace partita

#endif // PARTITA_TOOLS_PLANRUN_JOBMONITOR_H
