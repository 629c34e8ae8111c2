//===- JobMonitor.cpp - The launcher's view of its ranks ------------------===//

#include "JobMonitor.h"

#include "../../runtime/mpi/RankHosts.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace partita {

using Clock = std::chrono::steady_clock;

namespace {

/// Every process below `root` (mpirun starts its ssh clients in sessions
/// of their own, out of reach of its process group).
std::vector<pid_t> descendantsOf(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto &entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    size_t close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    pid_t parent;
    if (rest >> state >> parent)
      children[parent].push_back(pid_t(std::stol(name)));
  }
  std::vector<pid_t> found, todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      found.push_back(c);
      todo.push_back(c);
    }
  }
  return found;
}

} // namespace

JobMonitor::JobMonitor(int64_t worldSize) : ranks(worldSize) {
  listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr *>(&address), length) != 0 ||
      listen(listener, 128) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr *>(&address), &length) !=
          0)
    throw std::runtime_error(std::string("cannot listen for the ranks: ") +
                             std::strerror(errno));
  port = ntohs(address.sin_port);
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  host = name;
}

JobMonitor::~JobMonitor() {
  for (auto &[fd, line] : pending)
    close(fd);
  if (listener >= 0)
    close(listener);
}

std::string JobMonitor::address() const {
  return host + ":" + std::to_string(port);
}

void JobMonitor::accept() {
  int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0)
    pending[fd] = "";
}

bool JobMonitor::read(int fd) {
  char buffer[4096];
  ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  if (n <= 0)
    return n < 0 && errno == EINTR;
  std::string &line = pending[fd];
  line.append(buffer, n);
  for (size_t end; (end = line.find('\n')) != std::string::npos;) {
    std::string whole = line.substr(0, end);
    line.erase(0, end + 1);
    onLine(fd, whole);
  }
  return true;
}

void JobMonitor::onLine(int fd, const std::string &line) {
  std::istringstream words(line);
  std::string verb;
  int64_t value = -1;
  words >> verb >> value;
  if (verb == "step") {
    lastStep = std::max(lastStep, value);
    return;
  }
  if (value < 0 || value >= int64_t(ranks.size()))
    return;
  Rank &r = ranks[value];
  if (verb == "hello") {
    words >> r.host;
    r.fd = fd;
    r.state = Rank::State::Running;
    rankOf[fd] = int(value);
  } else if (verb == "stop") {
    r.state = Rank::State::Stopping;
    int status = 1;
    if (!stopped && words >> status && status > 0 && status < 256)
      stopStatus = status;
    stopped = true;
  } else if (verb == "told") {
    r.state = Rank::State::Told;
  } else if (verb == "done") {
    r.state = Rank::State::Done;
  }
}

void JobMonitor::forget(int fd) {
  close(fd);
  pending.erase(fd);
  auto it = rankOf.find(fd);
  if (it == rankOf.end())
    return;
  Rank &r = ranks[it->second];
  // Gone without a word while the job ran: the process or its host died.
  if (r.state == Rank::State::Running) {
    r.state = Rank::State::Silent;
    stopped = true;
  }
  r.fd = -1;
  rankOf.erase(it);
}

int JobMonitor::superviseUntilExit(pid_t launcher, double grace) {
  // What mpirun leaves behind becomes this process's to end.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::optional<Clock::time_point> stopSince, endedSince;
  bool killed = false;
  int status = 0;
  // After the launcher's exit, what the ranks said just before it.
  std::optional<Clock::time_point> exitedAt;
  for (;;) {
    if (!exitedAt) {
      pid_t done = waitpid(launcher, &status, WNOHANG);
      if (done == launcher)
        exitedAt = Clock::now();
    }
    if (exitedAt && (pending.empty() ||
                     Clock::now() - *exitedAt > std::chrono::milliseconds(500)))
      break;
    std::vector<pollfd> fds = {{listener, POLLIN, 0}};
    for (auto &[fd, line] : pending)
      fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) > 0) {
      if (fds[0].revents)
        accept();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents && !read(fds[i].fd))
          forget(fds[i].fd);
    }
    if (stopped && !stopSince)
      stopSince = Clock::now();
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    // mpirun waits on a daemon it can no longer reach: end it and every
    // process it started, asking first.
    if (!exitedAt && stopSince && since(*stopSince) > grace &&
        (!endedSince || (!killed && since(*endedSince) > 3))) {
      killed = endedSince.has_value();
      if (!endedSince) {
        endedSince = Clock::now();
        std::cerr << "plan-run: mpirun has not ended " << grace
                  << " s after a rank stopped the job; ending it\n";
      }
      int signal = killed ? SIGKILL : SIGTERM;
      for (pid_t p : descendantsOf(launcher))
        kill(p, signal);
      kill(-launcher, signal);
    }
  }
  // Open but silent once mpirun is gone: cut off.
  for (Rank &r : ranks)
    if (r.state == Rank::State::Running)
      r.state = Rank::State::Silent;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0 || endedSince) {
    // What mpirun left (this process is their subreaper: ssh clients to a
    // host that no longer answers, say), ended and reaped.
    for (pid_t p : descendantsOf(getpid()))
      kill(p, SIGKILL);
    auto deadline = Clock::now() + std::chrono::seconds(2);
    while (waitpid(-1, nullptr, WNOHANG) >= 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Ended here, mpirun's status says only that: the rank's is the job's.
  return endedSince ? stopStatus : code;
}

std::string JobMonitor::verdict(int status) const {
  std::map<std::string, std::vector<int>> all, lost;
  std::vector<int> unseen;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Rank &rank = ranks[r];
    if (rank.state == Rank::State::Unseen) {
      unseen.push_back(int(r));
      continue;
    }
    all[rank.host].push_back(int(r));
    if (rank.state == Rank::State::Silent)
      lost[rank.host].push_back(int(r));
  }
  std::string words = "plan-run: the job failed in step " +
                      std::to_string(lastStep + 1) + " (mpirun's status " +
                      std::to_string(status) + ")";
  // Nothing reached the monitor: the job failed before its ranks started.
  if (unseen.size() == ranks.size())
    return words + "\n";
  std::string parts;
  for (const auto &[where, rs] : lost)
    parts += (parts.empty() ? "" : "; ") +
             std::string(rs.size() == 1 ? "rank " : "ranks ") +
             runtime::rankRanges(rs) + " on " + where +
             (rs.size() == all[where].size()
                  ? " (the whole host: it died, or its link is down)"
              : rs.size() == 1 ? " (its process died)"
                               : " (their processes died)");
  if (!unseen.empty())
    parts += (parts.empty() ? "" : "; ") +
             std::string(unseen.size() == 1 ? "rank " : "ranks ") +
             runtime::rankRanges(unseen) + " never reported";
  return words + (parts.empty() ? "" : ": lost " + parts) + "\n";
}

namespace {

int linkFd = -1;
char toldLine[32];
size_t toldLength = 0;
int linkRank = 0;

/// Sends `line` whole, or gives up after a second (the launcher is out of
/// reach): a line cut short would run into the next.
void say(const std::string &line) {
  auto deadline = Clock::now() + std::chrono::seconds(1);
  for (size_t sent = 0; linkFd >= 0 && sent < line.size();) {
    ssize_t n = ::send(linkFd, line.data() + sent, line.size() - sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += size_t(n);
      continue;
    }
    if ((n < 0 && errno != EAGAIN && errno != EINTR) || Clock::now() > deadline)
      return;
    pollfd p{linkFd, POLLOUT, 0};
    poll(&p, 1, 50);
  }
}

/// A connected socket to `host`:`port` within `seconds`, or -1.
int connectWithin(const std::string &host, const std::string &port,
                  double seconds) {
  std::optional<in_addr> address = partita::runtime::hostAddress(host);
  int number = std::atoi(port.c_str());
  if (!address || number <= 0 || number > 65535)
    return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(number));
  to.sin_addr = *address;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && (::connect(fd, reinterpret_cast<sockaddr *>(&to),
                                  sizeof(to)) == 0 ||
                        errno == EINPROGRESS);
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t length = sizeof(error);
  if (ok && poll(&p, 1, int(seconds * 1000)) == 1 &&
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0)
    return fd;
  if (fd >= 0)
    close(fd);
  return -1;
}

} // namespace

void MonitorLink::connect(int rank) {
  const char *where = std::getenv(kMonitorVariable);
  if (!where)
    return;
  std::string address = where;
  size_t colon = address.rfind(':');
  linkFd = colon == std::string::npos
               ? -1
               : connectWithin(address.substr(0, colon),
                               address.substr(colon + 1), 10);
  if (linkFd < 0) {
    std::cerr << "plan-run: rank " << rank << ": warning: cannot reach the "
              << "launcher at " << address
              << "; it will not name lost hosts if the job fails\n";
    return;
  }
  linkRank = rank;
  toldLength =
      size_t(std::snprintf(toldLine, sizeof(toldLine), "told %d\n", rank));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  say("hello " + std::to_string(rank) + " " + host + "\n");
}

void MonitorLink::step(int64_t step) {
  say("step " + std::to_string(step) + "\n");
}

void MonitorLink::stopping(const std::string &why, int status) {
  std::string oneLine = why;
  std::replace(oneLine.begin(), oneLine.end(), '\n', ' ');
  say("stop " + std::to_string(linkRank) + " " + std::to_string(status) + " " +
      oneLine + "\n");
}

void MonitorLink::told() {
  if (linkFd >= 0)
    ::send(linkFd, toldLine, toldLength, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void MonitorLink::done() { say("done " + std::to_string(linkRank) + "\n"); }

} // namespace partita
