//===- RankHosts.cpp - Where the job's ranks run, and who still answers ---===//

#include "RankHosts.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace partita::runtime {

namespace {

/// What each rank tells the others of itself.
struct Entry {
  char host[256];
  int port;
};

} // namespace

std::optional<in_addr> hostAddress(const std::string &host) {
  char own[256] = {};
  gethostname(own, sizeof(own) - 1);
  if (host == own) {
    in_addr loopback;
    loopback.s_addr = htonl(INADDR_LOOPBACK);
    return loopback;
  }
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found)
    return std::nullopt;
  in_addr address = reinterpret_cast<sockaddr_in *>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return address;
}

namespace {

/// Whether `to` accepts a connection within `seconds`.
bool answers(const sockaddr_in &to, double seconds) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  bool ok =
      connect(fd, reinterpret_cast<const sockaddr *>(&to), sizeof(to)) == 0;
  if (!ok && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t length = sizeof(error);
    ok = poll(&p, 1, int(seconds * 1000)) == 1 &&
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
         error == 0;
  }
  close(fd);
  return ok;
}

/// A listening socket on every address of this host, on a port the kernel
/// picks; -1 and port 0 where it cannot be opened (the probe then reports
/// this rank as not answering, which the others' messages say).
int listenAnywhere(int &port) {
  port = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0 ||
      listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  port = ntohs(address.sin_port);
  return fd;
}

} // namespace

void exitWithin(double seconds, int status) {
  std::thread([seconds, status] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    _exit(status);
  }).detach();
}

namespace {
void (*abortObserver)(const std::string &, int) = nullptr;
} // namespace

void setAbortObserver(void (*observer)(const std::string &line, int status)) {
  abortObserver = observer;
}

void abortWorld(const std::string &line, int status) {
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (abortObserver)
    abortObserver(line, status);
  exitWithin(5, status);
  MPI_Abort(MPI_COMM_WORLD, status);
  _exit(status);
}

std::string rankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::string> runs;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    runs.push_back(std::to_string(ranks[i]) +
                   (j > i ? "-" + std::to_string(ranks[j]) : ""));
    i = j + 1;
  }
  std::string words;
  for (size_t i = 0; i < runs.size(); ++i)
    words += (i == 0 ? "" : i + 1 == runs.size() ? " and " : ", ") + runs[i];
  return words;
}

RankHosts::RankHosts(MPI_Comm world) {
  int size;
  MPI_Comm_rank(world, &me);
  MPI_Comm_size(world, &size);
  Entry mine{};
  gethostname(mine.host, sizeof(mine.host) - 1);
  listener = listenAnywhere(mine.port);
  if (listener >= 0)
    acceptor = std::thread([fd = listener] {
      // A connection is the whole answer; shutdown() ends the loop (with
      // EINVAL). Out of descriptors or memory, it waits and goes on.
      for (;;) {
        int client = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) {
          close(client);
          continue;
        }
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        else if (errno != EINTR && errno != ECONNABORTED)
          return;
      }
    });
  std::vector<Entry> all(size);
  MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, all.data(), sizeof(Entry),
                MPI_BYTE, world);
  std::map<std::string, std::optional<in_addr>> resolved;
  for (const Entry &e : all) {
    hosts.push_back(e.host);
    if (!resolved.count(e.host))
      resolved[e.host] = hostAddress(e.host);
    std::optional<sockaddr_in> address;
    if (resolved[e.host] && e.port > 0) {
      address.emplace();
      address->sin_family = AF_INET;
      address->sin_port = htons(uint16_t(e.port));
      address->sin_addr = *resolved[e.host];
    }
    addresses.push_back(address);
  }
}

RankHosts::~RankHosts() {
  if (listener < 0)
    return;
  shutdown(listener, SHUT_RDWR);
  acceptor.join();
  close(listener);
}

std::vector<std::pair<std::string, std::vector<int>>>
RankHosts::byHost() const {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto &g) { return g.first == hosts[r]; });
    if (it == groups.end())
      groups.push_back({hosts[r], {r}});
    else
      it->second.push_back(r);
  }
  return groups;
}

std::string RankHosts::map() const {
  std::string words;
  for (const auto &[host, ranks] : byHost())
    words +=
        (words.empty() ? (ranks.size() == 1 && size() == 1 ? "rank " : "ranks ")
                       : ", ") +
        rankRanges(ranks) + " on " + host;
  return words;
}

std::vector<int> RankHosts::unanswering(double seconds) const {
  std::vector<int> gone;
  // In batches, within the descriptors a process may open.
  constexpr int kBatch = 256;
  for (int first = 0; first < size(); first += kBatch) {
    std::vector<pollfd> waiting;
    std::vector<int> ranks;
    for (int r = first; r < std::min(size(), first + kBatch); ++r) {
      if (r == me)
        continue;
      if (!addresses[r])
        continue; // its host name does not resolve here: not known gone

      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const sockaddr_in &to = *addresses[r];
      if (fd >= 0 && (connect(fd, reinterpret_cast<const sockaddr *>(&to),
                              sizeof(to)) == 0 ||
                      errno == EINPROGRESS)) {
        waiting.push_back({fd, POLLOUT, 0});
        ranks.push_back(r);
        continue;
      }
      gone.push_back(r);
      if (fd >= 0)
        close(fd);
    }
    // A settled socket leaves the poll set (a negative fd is skipped).
    std::vector<int> fds;
    for (const pollfd &p : waiting)
      fds.push_back(p.fd);
    std::vector<bool> answered(waiting.size(), false);
    size_t open = waiting.size();
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(seconds);
    while (open > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      int ready =
          left > 0 ? poll(waiting.data(), waiting.size(), int(left)) : 0;
      if (ready < 0 && errno == EINTR)
        continue;
      if (ready <= 0)
        break;
      for (size_t i = 0; i < waiting.size(); ++i) {
        if (waiting[i].fd < 0 || !waiting[i].revents)
          continue;
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &error, &length);
        answered[i] = error == 0;
        waiting[i].fd = -1;
        --open;
      }
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      close(fds[i]);
      if (!answered[i])
        gone.push_back(ranks[i]);
    }
  }
  std::sort(gone.begin(), gone.end());
  return gone;
}

RankHosts::Silence RankHosts::probe(double seconds) const {
  std::vector<int> gone = unanswering(seconds);
  Silence silence;
  if (gone.empty()) {
    silence.words = "every other rank still answers (one is stuck, not gone)";
    return silence;
  }
  silence.cutOff = true;
  for (const auto &[host, ranks] : byHost()) {
    std::vector<int> lost;
    for (int r : ranks)
      if (std::binary_search(gone.begin(), gone.end(), r))
        lost.push_back(r);
    bool wholeHost = lost.size() == ranks.size() && host != hosts[me];
    silence.cutOff &= host == hosts[me] || wholeHost;
    if (lost.empty())
      continue;
    silence.words += (silence.words.empty() ? "" : ", ") +
                     std::string(lost.size() == 1 ? "rank " : "ranks ") +
                     rankRanges(lost) + " on " + host +
                     (wholeHost ? " (the whole host)" : "");
  }
  silence.words += std::string(gone.size() == 1 ? " does" : " do") +
                   " not answer: gone, or cut off from this rank";
  if (silence.cutOff && launcher && answers(*launcher, seconds))
    silence.cutOff = false;
  return silence;
}

void RankHosts::setLauncher(const std::string &hostPort) {
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos)
    return;
  std::optional<in_addr> address = hostAddress(hostPort.substr(0, colon));
  int port = std::atoi(hostPort.c_str() + colon + 1);
  if (!address || port <= 0 || port > 65535)
    return;
  launcher.emplace();
  launcher->sin_family = AF_INET;
  launcher->sin_port = htons(uint16_t(port));
  launcher->sin_addr = *address;
}

} // namespace partita::runtime
