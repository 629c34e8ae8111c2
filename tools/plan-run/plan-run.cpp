//===- plan-run.cpp - Runs a compiled plan --------------------------------===//
//
// Alone, plan-run starts the ranks the plan needs on this host through
// mpirun and waits for them; under mpirun (or srun) it is one rank of the
// job. One line per step from the rank that holds the loss.
//
//===----------------------------------------------------------------------===//

#include "partita/runtime/Checkpoint.h"
#include "partita/runtime/HostMemory.h"
#include "partita/runtime/Plan.h"
#include "partita/runtime/Trainer.h"
#include "support/Paths.h"

#include "BandwidthTest.h"
#include "JobMonitor.h"
#include "RunOptions.h"

#include "../../runtime/mpi/MpiCommunicator.h"
#ifdef PARTITA_HAVE_CUDA
#include "partita/runtime/Cuda.h"
#endif

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace partita::runtime;
using partita::JobMonitor;
using partita::MonitorLink;

namespace {

using Options = partita::RunOptions;

/// The exit status of a run stopped by a loss that is not finite: the
/// launcher does not restart it, as it would diverge again.
constexpr int kDivergedStatus = 3;

/// A device smaller than the plan's arena and its allowance for the runtime
/// together: a warning, since the allowance is an estimate (the arena is
/// checked against free memory when it is allocated).
void warnIfSmallerThanPlanned(Device &device, const Program &program,
                              int64_t rank) {
  std::optional<Device::Memory> memory = device.memory();
  int64_t planned = program.arenaBytes + program.runtimeBytes;
  if (!memory || program.runtimeBytes <= 0 || planned <= memory->total)
    return;
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << "plan-run: rank " << rank
       << ": warning: the plan expects " << planned / kGiB
       << " GiB on its device (arena " << program.arenaBytes / kGiB
       << " and about " << program.runtimeBytes / kGiB
       << " for the runtime) but it has " << memory->total / kGiB
       << " GiB; it may run out of memory (compile for this device: "
          "plan-opt --topology with its memory_gib)\n";
  std::cerr << line.str() << std::flush;
}

/// The reporting rank's device memory after a step, beside the memory
/// plan's allowance for what the runtime holds outside its arena.
void reportMemoryInUse(int64_t inUse, const Trainer &trainer,
                       const Program &program, int64_t step) {
  int64_t buffers = trainer.allocatedBytes();
  double besides = double(inUse - buffers);
  std::cout << "plan-run: device memory in use after step " << step
            << " on the reporting rank: " << inUse / 1e6 << " MB, "
            << buffers / 1e6 << " MB of buffers and " << besides / 1e6
            << " MB besides";
  if (program.runtimeBytes > 0)
    std::cout << " (the plan allows " << program.runtimeBytes / 1e6
              << " MB besides"
              << (besides > double(program.runtimeBytes)
                      ? "; more is in use: give plan-opt --cost-params "
                        "runtime_gib, nccl_collective_gib and nccl_p2p_gib "
                        "from this machine"
                      : "")
              << ")";
  std::cout << "\n";
}

/// `v` for the step log, to 9 digits; JSON has no NaN, so one that is not
/// finite is null.
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

bool underLauncher() {
  for (const char *v :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(v))
      return true;
  return false;
}

/// Why the files the run reads and writes cannot be (a missing or
/// unwritable directory, a directory where a file goes), or empty: checked
/// before any step, so a run does not train only to fail at its end.
std::string pathError(const Options &o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto writableDir = [&](const fs::path &dir) {
    return fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) == 0;
  };
  const std::vector<partita::NamedFile> outputs = {
      {"--log-json", o.logJson},
      {"--save-params", o.saveParams},
      {"--dump-grads", o.dumpGrads},
      {"--trace", o.trace},
      {"--write-topology", o.bandwidth.topologyPath}};
  if (std::string clash = partita::outputClash(outputs,
                                               {{"the plan", o.plan},
                                                {"the --data file", o.data},
                                                {"the --hostfile", o.hostfile}},
                                               "the run");
      !clash.empty())
    return clash;
  for (const partita::NamedFile &out : outputs) {
    if (out.path.empty())
      continue;
    fs::path path(out.path),
        dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    if (fs::is_directory(path, ec))
      return out.name + ": " + out.path + " is a directory";
    if (!writableDir(dir))
      return out.name + ": cannot write " + out.path + " (" + dir.string() +
             " is not a writable directory)";
  }
  if (!o.checkpointDir.empty()) {
    // Made here if need be; another rank may make it at the same time.
    fs::create_directories(o.checkpointDir, ec);
    if (!writableDir(o.checkpointDir))
      return "--checkpoint-dir: " + o.checkpointDir +
             " is not a directory this run can write";
  }
  if (!o.data.empty() && !fs::is_regular_file(o.data, ec))
    return "--data: " + o.data + " is not a readable file";
  // Only the launching plan-run reads it: the ranks mpirun starts on other
  // hosts need not have it.
  if (!o.hostfile.empty() && !underLauncher() &&
      !fs::is_regular_file(o.hostfile, ec))
    return "--hostfile: " + o.hostfile + " is not a readable file";
  return "";
}

// What a rank says when mpirun stops it because another rank failed: the
// step it was in. Written by a signal handler, so prepared in advance.
// Rank 0 and the reporting rank speak for the job; a rank that is itself
// stopping the job has said why already.
char stopMessage[256];
volatile sig_atomic_t currentStep = 0;
volatile sig_atomic_t speaksWhenStopped = 0;
volatile sig_atomic_t stoppingTheJob = 0;

void onStopping(const std::string &line, int status) {
  stoppingTheJob = 1;
  MonitorLink::stopping(line, status);
}

void onTerminate(int) {
  MonitorLink::told();
  if (!speaksWhenStopped || stoppingTheJob)
    _exit(1);
  char line[320];
  int n = 0;
  for (const char *p = stopMessage; *p && n < 250; ++p)
    line[n++] = *p;
  char digits[24];
  int d = 0;
  // Before the first step, the step to come.
  long step = currentStep;
  const char *when = step == 0 ? "before step " : "in step ";
  for (const char *p = when; *p; ++p)
    line[n++] = *p;
  step = step == 0 ? 1 : step;
  do
    digits[d++] = char('0' + step % 10);
  while ((step /= 10) && d < 20);
  while (d)
    line[n++] = digits[--d];
  const char *tail = ": the job is stopping (another rank failed)\n";
  for (const char *p = tail; *p; ++p)
    line[n++] = *p;
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
  _exit(1);
}

/// Why mpirun could not start `ranks` ranks from hostfile `path`, or
/// empty: its lines are `host [slots=N] [max_slots=N]` and # comments, and
/// without --oversubscribe (which a hostfile turns off) the slots must
/// hold every rank where all hosts give theirs. mpirun's own messages
/// would not say which line is wrong.
std::string hostfileError(const std::string &path, int64_t ranks,
                          int64_t *placed = nullptr) {
  std::ifstream in(path);
  std::string line;
  int64_t slots = 0, hosts = 0;
  bool allCounted = true;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    // `slots = 4` as `slots=4`.
    for (size_t eq; (eq = line.find(" =")) != std::string::npos ||
                    (eq = line.find("= ")) != std::string::npos;)
      line.erase(line[eq] == ' ' ? eq : eq + 1, 1);
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host))
      continue;
    std::string at = "--hostfile: " + path + " line " + std::to_string(number);
    if (host.find('=') != std::string::npos)
      return at + ": expected a host name first, got \"" + host + "\"";
    ++hosts;
    bool counted = false;
    while (words >> word) {
      size_t eq = word.find('=');
      std::string key = word.substr(0, eq);
      if (eq == std::string::npos ||
          (key != "slots" && key != "max_slots" && key != "max-slots"))
        return at + ": \"" + word +
               "\" is not slots=N or max_slots=N (a line is a host name "
               "and its settings)";
      std::string v = word.substr(eq + 1);
      char *end;
      errno = 0;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || errno == ERANGE || n < 1)
        return at + ": " + key + " must be a positive integer, got \"" + v +
               "\"";
      if (key == "slots") {
        slots += n;
        counted = true;
      }
    }
    allCounted &= counted;
  }
  if (hosts == 0)
    return "--hostfile: " + path + " names no hosts";
  if (allCounted && slots < ranks)
    return "--hostfile: " + path + " gives " + std::to_string(slots) +
           (slots == 1 ? " slot" : " slots") + ", and the " +
           (placed ? "test asks for " : "plan has ") + std::to_string(ranks) +
           " ranks";
  // The ranks it places without oversubscribing: its slots, or a rank a
  // host where some host gives none.
  if (placed)
    *placed = allCounted ? slots : hosts;
  return "";
}

/// The process group of the running mpirun, which the launcher's signals
/// are passed on to.
volatile pid_t launchedGroup = 0;
/// The signal that interrupted the launcher (its job is not restarted).
volatile sig_atomic_t interruptedBy = 0;

void passOn(int signal) {
  interruptedBy = signal;
  if (launchedGroup > 0) {
    kill(-launchedGroup, signal);
    return;
  }
  // Between jobs (a restart), the signal is the launcher's own.
  std::signal(signal, SIG_DFL);
  raise(signal);
}

/// Runs `command` (mpirun, its options, then `program`) once, in a process
/// group of its own, its ranks followed by a JobMonitor; says what was
/// lost if the job fails, and returns its exit status.
int runJob(std::vector<std::string> command,
           const std::vector<std::string> &program, int64_t worldSize) {
  std::optional<JobMonitor> monitor;
  try {
    monitor.emplace(worldSize);
    setenv(partita::kMonitorVariable, monitor->address().c_str(), 1);
    command.insert(command.end(), {"-x", partita::kMonitorVariable});
  } catch (const std::exception &e) {
    std::cerr << "plan-run: warning: " << e.what()
              << "; a failed job will not name the hosts it lost\n";
  }
  command.insert(command.end(), program.begin(), program.end());
  std::vector<char *> cargs;
  for (std::string &a : command)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  // The user's signals, held until they can be passed on: mpirun leads a
  // process group of its own, out of the terminal's reach.
  sigset_t held, before;
  sigemptyset(&held);
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&held, signal);
  sigprocmask(SIG_BLOCK, &held, &before);
  pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    execvp("mpirun", cargs.data());
    std::cerr << "plan-run: error: cannot run mpirun: " << std::strerror(errno)
              << " (install openmpi-bin)\n";
    _exit(127);
  }
  setpgid(child, child);
  launchedGroup = child;
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    std::signal(signal, passOn);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  int code;
  if (monitor) {
    // A rank that stopped the job gave mpirun this long to end it.
    code = monitor->superviseUntilExit(child, 10);
  } else {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  launchedGroup = 0;
  if (monitor && code != 0 && code != 127 && !interruptedBy)
    std::cerr << monitor->verdict(code) << std::flush;
  return code;
}

/// Re-executes plan-run under mpirun with `worldSize` ranks of `what`.
int launch(const Options &o, int64_t worldSize, const std::string &what,
           char **argv) {
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(worldSize)};
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  if (o.hostfile.empty())
    args.push_back("--oversubscribe");
  else
    args.insert(args.end(), {"--hostfile", o.hostfile});
  // Ranks read no input; and mpirun, in a process group of its own, must
  // not wait to read a terminal.
  args.insert(args.end(), {"--bind-to", "none", "--stdin", "none"});
  // mpirun and its daemons notice a host that stopped answering (its link
  // cut) by keepalive probes a few seconds after the ranks' watchdog has
  // named it, not after TCP's quarter of an hour; their daemons then stop
  // on every host, the cut-off one included.
  if (o.collectiveTimeout > 0) {
    // Linux takes at most 32767 s of idle time before keepalives.
    int64_t idle =
        std::min<int64_t>(int64_t(std::ceil(o.collectiveTimeout)) + 5, 32767);
    for (auto [name, value] :
         {std::pair<const char *, int64_t>{"oob_tcp_keepalive_time", idle},
          {"oob_tcp_keepalive_intvl", 2},
          {"oob_tcp_keepalive_probes", 3}})
      args.insert(args.end(), {"--mca", name, std::to_string(value)});
  }
  // mpirun gives ranks a pseudo-terminal: whether the user sees a terminal
  // is this process's to say.
  setenv("PARTITA_TERMINAL", isatty(STDOUT_FILENO) ? "1" : "0", 1);
  args.insert(args.end(), {"-x", "PARTITA_TERMINAL"});
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::vector<std::string> program = {n > 0 ? std::string(self, n)
                                            : std::string(argv[0])};
  for (int i = 1; argv[i]; ++i)
    program.push_back(argv[i]);
  std::cerr << "plan-run: starting " << worldSize
            << (worldSize == 1 ? " rank of " : " ranks of ") << what
            << " with mpirun\n";
  // The newest checkpoint when the job last restarted: a restarted job
  // that fails before saving a newer one would only fail again.
  std::optional<std::string> newestAtRestart;
  auto newest = [&] {
    std::vector<std::string> complete = completeCheckpoints(o.checkpointDir);
    return complete.empty() ? std::string() : complete.front();
  };
  for (int64_t attempt = 0;; ++attempt) {
    int code = runJob(args, program, worldSize);
    if (interruptedBy)
      return 128 + interruptedBy;
    if (code == 0 || code == 127 || code == kDivergedStatus ||
        attempt >= o.maxRestarts)
      return code;
    if (newestAtRestart && *newestAtRestart == newest()) {
      std::cerr << "plan-run: the job failed again (status " << code
                << ") without a checkpoint newer than "
                << (newestAtRestart->empty() ? std::string("none")
                                             : *newestAtRestart)
                << " since it restarted; not restarting it\n";
      return code;
    }
    newestAtRestart = newest();
    std::cerr << "plan-run: the job failed (status " << code
              << "); restarting it from the newest checkpoint in "
              << o.checkpointDir << " (restart " << attempt + 1 << " of "
              << o.maxRestarts << ")\n";
    if (std::find(program.begin(), program.end(), "--resume") == program.end())
      program.push_back("--resume");
  }
}

/// Writes `text` to `path` whole, or stops the job saying why (a full disk
/// shows only when the stream is flushed).
void writeOrStop(const std::string &path, const std::string &text,
                 Communicator &comm) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out)
    comm.abort("cannot write " + path + ": " + std::strerror(errno));
}

/// Writes every parameter's value (or its gradient, as the last step's
/// AdamW read it), unsharded, as one JSON object of name -> values from
/// rank 0; collective. Stops the job instead when the ranks that hold a
/// parameter hold different copies of it: a replica that stepped apart
/// trains another model than the one written.
void writeTensors(const std::string &path, Trainer &trainer, const Plan &plan,
                  bool gradient, int rank, Communicator &comm) {
  for (const ParameterSpec &p : plan.parameters)
    if (std::string differs = trainer.differingCopies(p, gradient);
        !differs.empty())
      comm.abort(differs);
  auto tensors =
      gradient ? trainer.gatherGradients() : trainer.gatherParameters();
  if (rank != 0)
    return;
  nlohmann::json doc = nlohmann::json::object();
  for (const auto &[name, values] : tensors)
    doc[name] = values;
  writeOrStop(path, doc.dump() + "\n", comm);
}

/// The Chrome trace (Perfetto, chrome://tracing) of the run: a process per
/// rank, a thread per stream. Each rank writes its part; rank 0 joins them.
void writeTrace(const std::string &path, const std::vector<TraceEvent> &events,
                const Plan &plan, int rank, Communicator &comm) {
  nlohmann::json mine = nlohmann::json::array();
  const Coordinates &c = plan.devices[rank];
  mine.push_back(
      {{"ph", "M"},
       {"name", "process_name"},
       {"pid", rank},
       {"args",
        {{"name", "rank " + std::to_string(rank) + " (pp " +
                      std::to_string(c.pp) + ", dp " + std::to_string(c.dp) +
                      ", tp " + std::to_string(c.tp) + ")"}}}});
  for (int tid : {0, 1})
    mine.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", rank},
                    {"tid", tid},
                    {"args", {{"name", tid ? "comm" : "compute"}}}});
  for (const TraceEvent &e : events) {
    nlohmann::json args = {
        {"step", e.step}, {"micro_batch", e.microBatch}, {"phase", e.phase}};
    if (e.launches > 1)
      args["launches"] = e.launches;
    mine.push_back({{"ph", "X"},
                    {"name", e.name},
                    {"pid", rank},
                    {"tid", e.comm ? 1 : 0},
                    {"ts", e.startUs},
                    {"dur", e.durationUs},
                    {"args", args}});
  }
  std::string part = path + ".rank" + std::to_string(rank);
  writeOrStop(part, mine.dump() + "\n", comm);
  comm.barrier();
  if (rank != 0)
    return;
  nlohmann::json all = nlohmann::json::array();
  for (int r = 0; r < plan.worldSize; ++r) {
    std::string file = path + ".rank" + std::to_string(r);
    std::ifstream in(file);
    for (auto &e : nlohmann::json::parse(in))
      all.push_back(std::move(e));
    std::remove(file.c_str());
  }
  writeOrStop(
      path,
      nlohmann::json{{"traceEvents", all}, {"displayTimeUnit", "ms"}}.dump() +
          "\n",
      comm);
}

/// Whether the ranks' memory is this host's (CPU ranks, or the CUDA
/// emulator's devices, whose memory is host memory).
bool onCpus(const Options &o) {
#ifdef PARTITA_CUDA_EMULATOR
  return true;
#endif
  if (o.device != "auto")
    return o.device == "cpu";
#ifdef PARTITA_HAVE_CUDA
  std::string why;
  return cudaDeviceCount(&why) == 0;
#else
  return true;
#endif
}

/// Refuses, before any rank starts, a plan whose buffers for `ranks` of its
/// ranks (those on this host) exceed the memory this host has: a plan made
/// for GPUs, say.
void checkHostMemory(const Plan &plan, const std::vector<int> &ranks) {
  int64_t need = 0;
  for (int r : ranks)
    need += plan.programs[plan.devices[r].pp].arenaBytes;
  int64_t have = hostMemoryBytes("MemAvailable");
  if (have < 0 || need <= have)
    return;
  auto gib = [](int64_t bytes) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1) << double(bytes) / kGiB;
    return os.str();
  };
  throw std::runtime_error(
      "the plan's buffers for " + std::to_string(ranks.size()) + " rank" +
      (ranks.size() == 1 ? "" : "s") + " take " + gib(need) +
      " GiB of this host's memory, which has " + gib(have) +
      " GiB available; compile for the CPUs (--topology=cpu:N), or run "
      "it on the GPUs it was made for");
}

/// The run's tokens: --data's, checked to hold every token the run reads
/// and none outside the vocabulary, or synthetic ones. Throws
/// std::runtime_error naming the file.
std::unique_ptr<TokenSource> openData(const Options &o, const Plan &plan) {
  if (o.data.empty())
    return syntheticTokens(plan.vocabSize);
  int64_t sequences;
  if (__builtin_mul_overflow(o.steps, plan.globalBatch, &sequences))
    throw std::runtime_error(
        o.data + ": the run needs more than 2^63 sequences (" +
        std::to_string(o.steps) + " steps of " +
        std::to_string(plan.globalBatch) + "), more than any file holds");
  return fileTokens(o.data, o.dataBytes, plan.vocabSize, sequences,
                    plan.seqLen + 1);
}

/// Why `ranks` of the plan cannot have the device --device asks for on
/// this host, or empty.
std::string deviceError(const Options &o, const Plan &plan,
                        const std::vector<int> &ranks) {
  if (o.device != "cuda")
    return "";
#ifdef PARTITA_HAVE_CUDA
  std::string why;
  int count = cudaDeviceCount(&why);
  if (count == 0)
    return "--device cuda, but no CUDA device: " + why;
  for (int rank : ranks)
    if (int64_t local = plan.devices[rank].localDevice; local >= count)
      return "the plan puts rank " + std::to_string(rank) +
             " on local device " + std::to_string(local) +
             ", but this node has " + std::to_string(count) + " CUDA device" +
             (count == 1 ? "" : "s");
  return "";
#else
  (void)plan, (void)ranks;
  return "--device cuda, but this plan-run was built without the CUDA "
         "backend (CMake found no CUDA toolkit with cuBLASLt and NCCL)";
#endif
}

/// This rank's device: the CPU, or the GPU the plan gives the rank (its
/// local_device) with --device cuda, or auto where there is one. Sets
/// `where` to say which.
std::unique_ptr<Device> createDevice(const Options &o, const Plan &plan,
                                     int rank, int blasThreads,
                                     std::string &where) {
  auto onCpu = [&] {
    checkHostMemory(plan, {rank});
    where = "cpu, " + std::to_string(blasThreads) + " BLAS thread" +
            (blasThreads == 1 ? "" : "s");
    return createCpuDevice(blasThreads);
  };
  if (o.device == "cpu")
    return onCpu();
  if (std::string error = deviceError(o, plan, {rank}); !error.empty())
    throw std::runtime_error(error);
#ifdef PARTITA_HAVE_CUDA
  std::string why;
  if (o.device == "auto" && cudaDeviceCount(&why) == 0)
    return onCpu();
  int64_t local = plan.devices[rank].localDevice;
  GemmPrecision precision = *parseGemmPrecision(o.gemmPrecision);
  where = "cuda:" + std::to_string(local) + ", " +
          gemmPrecisionName(precision) + " GEMMs";
#ifdef PARTITA_CUDA_EMULATOR
  // Device memory is host memory, and NCCL's calls go over MPI.
  where += ", on the CPU emulator";
#endif
  return createCudaDevice(int(local), precision);
#else
  return onCpu();
#endif
}

/// OpenBLAS threads for a CPU rank: --threads-per-rank, else the cores this
/// process may run on shared by the ranks on its host.
int blasThreads(const Options &o, const RankHosts &hosts, int rank) {
  if (o.threadsPerRank > 0)
    return int(o.threadsPerRank);
  cpu_set_t cpus;
  int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                  ? CPU_COUNT(&cpus)
                  : int(sysconf(_SC_NPROCESSORS_ONLN));
  int local = 0;
  for (int r = 0; r < hosts.size(); ++r)
    local += hosts.host(r) == hosts.host(rank);
  return std::max(1, cores / std::max(1, local));
}

/// Why the job's hosts split a group the plan keeps inside one node (its
/// collectives were planned on the node's links), or empty.
std::string splitGroupError(const Plan &plan, const RankHosts &hosts) {
  int64_t perNode = std::count_if(
      plan.devices.begin(), plan.devices.end(),
      [&](const Coordinates &c) { return c.node == plan.devices[0].node; });
  for (const auto &[name, groups] : plan.groups)
    for (const std::vector<int64_t> &group : groups) {
      std::map<std::string, std::vector<int>> byHost;
      bool oneNode = true;
      for (int64_t r : group) {
        byHost[hosts.host(int(r))].push_back(int(r));
        oneNode &= plan.devices[r].node == plan.devices[group[0]].node;
      }
      if (!oneNode || byHost.size() == 1)
        continue;
      std::string where;
      for (const auto &[host, ranks] : byHost)
        where += (where.empty() ? "" : " and ") + host + " (" +
                 (ranks.size() == 1 ? "rank " : "ranks ") + rankRanges(ranks) +
                 ")";
      return "the plan keeps its " + name + " group of ranks " +
             rankRanges({group.begin(), group.end()}) +
             " inside one node, but the job runs it on " + where +
             ": give each host " + std::to_string(perNode) +
             " ranks in order (a hostfile with slots=" +
             std::to_string(perNode) +
             ", or srun --ntasks-per-node=" + std::to_string(perNode) +
             "), compile for the hosts (a topology of their nodes), or "
             "pass --allow-split-groups";
    }
  return "";
}

/// OpenMPI settings of every rank, each unless the user set it: ranks
/// waiting in MPI give their core to the others (a host may have more ranks
/// than cores), and all-reduce runs as a ring, the algorithm the cost model
/// costs. OpenMPI's fixed choice for some group sizes is slower on a
/// bandwidth-bound link: 6 ranks on 3 hosts at 100 Mbit/s took 0.295 s a
/// step with it and 0.168 s with the ring (docs/cluster.md).
void setMpiDefaults() {
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  if (!getenv("OMPI_MCA_coll_tuned_allreduce_algorithm")) {
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
    setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", "4", 0);
  }
}

/// plan-run --bandwidth-test: alone, launches the test's ranks (--ranks,
/// else one per slot of the hostfile, else 2); as a rank, takes part.
int bandwidthTestMain(const Options &o, int argc, char **argv) {
  if (!underLauncher()) {
    int64_t ranks = o.ranks, placed = 0;
    if (!o.hostfile.empty())
      if (std::string error = hostfileError(o.hostfile, ranks, &placed);
          !error.empty()) {
        std::cerr << "plan-run: error: " << error << "\n";
        return 1;
      }
    ranks = ranks ? ranks : placed ? placed : 2;
    return launch(o, ranks, "the bandwidth test", argv);
  }
  setMpiDefaults();
  MPI_Init(&argc, &argv);
  int status, rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    RankHosts hosts(MPI_COMM_WORLD);
    MonitorLink::connect(rank);
    // The device part times the CPU backend's kernels with the BLAS
    // threads training gives each rank.
    std::unique_ptr<Device> device =
        createCpuDevice(blasThreads(o, hosts, rank));
    status = partita::runBandwidthTest(o.bandwidth, hosts);
  }
  MonitorLink::done();
  MPI_Finalize();
  return status;
}

} // namespace

/// What the launcher checks before any rank starts, so that a mistake
/// gives one message, not one per rank after mpirun's start: the device
/// and the host memory of the ranks on this host (all of them without a
/// hostfile), and the data. Why the run cannot start, or empty.
std::string checkBeforeRanks(const Options &o, const Plan &plan) {
  // Without a hostfile, every rank runs on this host.
  if (o.hostfile.empty()) {
    std::vector<int> all(plan.worldSize);
    for (int r = 0; r < plan.worldSize; ++r)
      all[r] = r;
    if (std::string error = deviceError(o, plan, all); !error.empty())
      return error;
    try {
      if (onCpus(o))
        checkHostMemory(plan, all);
    } catch (const std::exception &e) {
      return o.plan + ": " + e.what();
    }
  }
  try {
    openData(o, plan);
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

namespace {

/// Reports step `s + 1` on the reporting rank: its line (after the first,
/// what the runtime holds in memory; on a terminal, a progress bar under
/// it once the run takes more than a few seconds), its record in the JSON
/// log, and the stop of a diverged run.
void reportStep(const Options &o, const Plan &plan, int rank, int64_t s,
                int64_t first, const StepResult &r, double seconds,
                double elapsed, std::optional<int64_t> inUse,
                const Trainer &trainer, std::ofstream &log,
                Communicator &comm) {
  double tokens = double(plan.globalBatch) * plan.seqLen;
  const char *terminal = std::getenv("PARTITA_TERMINAL");
  bool interactive =
      terminal ? std::string(terminal) == "1" : isatty(STDOUT_FILENO);
  bool bar = interactive && elapsed > 3 && s + 1 < o.steps;
  if (interactive)
    std::printf("\r\033[K");
  std::printf("step %lld loss %.6f grad_norm %.6f tokens/s %.0f step_time "
              "%.3f s\n",
              (long long)(s + 1), r.loss, r.gradNorm, tokens / seconds,
              seconds);
  std::fflush(stdout);
  MonitorLink::step(s + 1);
  if (inUse && s == first)
    reportMemoryInUse(*inUse, trainer, plan.programs[plan.devices[rank].pp],
                      s + 1);
  if (bar) {
    int width = 30, done = int(width * (s + 1) / o.steps);
    double eta = elapsed / (s + 1 - first) * (o.steps - s - 1);
    std::printf("[%s%s] %lld/%lld, about %.0f s left",
                std::string(done, '#').c_str(),
                std::string(width - done, ' ').c_str(), (long long)(s + 1),
                (long long)o.steps, eta);
    std::fflush(stdout);
  }
  if (log.is_open()) {
    log << "{\"step\": " << s + 1 << ", \"loss\": " << jsonNumber(r.loss)
        << ", \"grad_norm\": " << jsonNumber(r.gradNorm)
        << ", \"lr\": " << jsonNumber(plan.optimizer.learningRate(s))
        << ", \"step_time_s\": " << seconds
        << ", \"tokens_per_s\": " << tokens / seconds
        << ", \"collective_calls\": " << r.collectiveCalls
        << (inUse ? ", \"memory_in_use_bytes\": " + std::to_string(*inUse)
                  : std::string())
        << "}" << std::endl; // on disk before a failure can lose it
    if (!log)
      comm.abort("cannot write " + o.logJson + ": " + std::strerror(errno));
  }
  // Every later step would train on NaNs: stop, as Megatron-LM's NaN check
  // does, with a status the launcher does not restart on (a restart would
  // diverge again).
  if (!std::isfinite(r.loss) || !std::isfinite(r.gradNorm))
    abortWorld("plan-run: rank " + std::to_string(rank) + ": step " +
                   std::to_string(s + 1) + " gave loss " +
                   std::to_string(r.loss) + " and grad_norm " +
                   std::to_string(r.gradNorm) +
                   ": training diverged; stopping the job\n",
               kDivergedStatus);
}

/// Where the reporting rank's time went over `steps`, largest first.
void printProfile(const Trainer &trainer, int64_t steps, bool onDevice) {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto &[name, s] : trainer.launchSeconds()) {
    rows.push_back({s, name});
    total += s;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::printf("time by launch over %lld steps%s (this rank%s):\n",
              (long long)(steps > 1 ? steps - 1 : steps),
              steps > 1 ? " after the first" : "",
              onDevice ? ", on the device's compute stream" : "");
  for (const auto &[s, name] : rows)
    std::printf("  %-24s %9.3f s %6.1f%%\n", name.c_str(), s, 100 * s / total);
}

/// The step to start from: 0, or with --resume the newest checkpoint's.
int64_t firstStep(const Options &o, const Plan &plan, Trainer &trainer,
                  Communicator &comm, bool reporter) {
  if (!o.resume)
    return 0;
  int64_t first = loadNewestCheckpoint(plan, trainer, comm, o.checkpointDir);
  if (!reporter)
    return first;
  if (first)
    std::cout << "plan-run: resumed from the checkpoint after step " << first
              << "\n";
  else
    std::cout << "plan-run: no complete checkpoint in " << o.checkpointDir
              << "; starting at step 1\n";
  if (first >= o.steps)
    std::cout << "plan-run: --steps " << o.steps
              << ": nothing left to train after step " << first << "\n";
  return first;
}

/// One rank's share of the job once its device, communicator and data are
/// up: the steps, checkpoints, and what the options ask for after them.
void train(const Options &o, const Plan &plan, int rank, int size,
           const std::string &where, Device &device, Communicator &comm,
           TokenSource &data, std::ofstream &log) {
  const Coordinates &c = plan.devices[rank];
  bool reporter = c.pp == plan.pp - 1 && c.dp == 0 && c.tp == 0;
  // Once per pipeline stage: its ranks hold the same program.
  if (c.dp == 0 && c.tp == 0)
    warnIfSmallerThanPlanned(device, plan.programs[c.pp], rank);
  Trainer trainer(plan, device, comm, data, o.collectiveChunk);
  // On a GPU the host only enqueues: time the launches where they run.
  bool profileOnDevice = o.profile && trainer.timeLaunchesOnDevice();
  if (reporter)
    std::cout << "plan-run: " << plan.model << " (" << plan.strategy << ") on "
              << size << (size == 1 ? " rank (" : " ranks (") << where << "); "
              << trainer.allocatedBytes() / 1e6 << " MB of buffers and "
              << trainer.collectiveWorkspaceBytes() / 1e6
              << " MB of collective workspace on the reporting rank (cost "
                 "model: "
              << plan.predictedPeakBytes / 1e6
              << " MB per device, the runtime's own included)\n";
  std::vector<TraceEvent> events;
  if (!o.trace.empty())
    trainer.traceInto(&events);
  int64_t first = firstStep(o, plan, trainer, comm, reporter);
  double elapsed = 0;
  for (int64_t s = first; s < o.steps; ++s) {
    currentStep = s + 1;
    comm.setStep(s + 1);
    comm.barrier();
    auto start = std::chrono::steady_clock::now();
    StepResult r = trainer.step(s);
    comm.barrier();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    trainer.collectLaunchSeconds();
    if (s == first && !o.dumpGrads.empty())
      writeTensors(o.dumpGrads, trainer, plan, true, rank, comm);
    // The profile leaves out the first step, which grows workspaces and
    // chooses GEMM algorithms and cuDNN plans, where there are others.
    if (s == first && o.steps - first > 1)
      trainer.clearLaunchSeconds();
    if (reporter) {
      // Measured once warm (every workspace grown, every communicator
      // connected): what the runtime holds beside the plan's buffers, to
      // set the compiler's allowance from.
      std::optional<int64_t> inUse;
      if (auto m = device.memory())
        inUse = m->inUse;
      elapsed += seconds;
      reportStep(o, plan, rank, s, first, r, seconds, elapsed, inUse, trainer,
                 log, comm);
    }
    if (o.checkpointEvery && (s + 1) % o.checkpointEvery == 0) {
      auto begin = std::chrono::steady_clock::now();
      saveCheckpoint(plan, trainer, comm, o.checkpointDir, s + 1);
      if (reporter)
        std::printf("checkpoint after step %lld in %.3f s\n",
                    (long long)(s + 1),
                    std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - begin)
                        .count());
    }
  }
  if (!o.trace.empty()) {
    trainer.drain(); // the last step's carried gathers, in the trace
    writeTrace(o.trace, events, plan, rank, comm);
  }
  if (!o.saveParams.empty())
    writeTensors(o.saveParams, trainer, plan, false, rank, comm);
  if (reporter && o.profile)
    printProfile(trainer, o.steps - first, profileOnDevice);
}

/// MPI with the thread level the comm thread needs, in a world of the
/// plan's size; the rank and size, or the exit status after MPI_Finalize.
std::optional<int> startMpi(const Options &o, const Plan &plan, int &argc,
                            char **&argv, int &rank, int &size) {
  setMpiDefaults();
  // Every MPI call is made by the communicator's comm thread, one at a
  // time, while this thread computes.
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    std::cerr << "plan-run: error: this MPI does not support "
                 "MPI_THREAD_SERIALIZED, which the comm thread needs\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == plan.worldSize)
    return std::nullopt;
  if (rank == 0)
    std::cerr << "plan-run: error: " << o.plan << " needs " << plan.worldSize
              << " ranks but the job has " << size << "\n";
  MPI_Finalize();
  return 1;
}

/// This rank's device, once every rank's came up: each agrees before any
/// starts the communicator, which would otherwise wait for the others.
/// Null, with the failures said, where one did not.
std::unique_ptr<Device> agreeOnDevice(const Options &o, const Plan &plan,
                                      int rank, const RankHosts &hosts,
                                      std::string &where) {
  std::string failure;
  std::unique_ptr<Device> device;
  try {
    device = createDevice(o, plan, rank, blasThreads(o, hosts, rank), where);
  } catch (const std::exception &e) {
    failure = e.what();
  }
  int failed = !failure.empty(), anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!anyFailed)
    return device;
  if (failed)
    std::cerr << "plan-run: rank " << rank << ": error: " << failure << "\n";
  return nullptr;
}

/// What this rank says when it stops (onStopping), and whether it says it.
void prepareStopMessage(const Plan &plan, int rank) {
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  std::snprintf(stopMessage, sizeof(stopMessage),
                "plan-run: rank %d on %s stopped ", rank, host);
  const Coordinates &me = plan.devices[rank];
  speaksWhenStopped =
      rank == 0 || (me.pp == plan.pp - 1 && me.dp == 0 && me.tp == 0);
}

/// One rank of a job that mpirun or srun started.
int runRank(const Options &o, const Plan &plan, int argc, char **argv) {
  int rank = 0, size = 0;
  if (std::optional<int> status = startMpi(o, plan, argc, argv, rank, size))
    return *status;
  auto ownHosts = std::make_shared<RankHosts>(MPI_COMM_WORLD);
  if (const char *launcher = std::getenv(partita::kMonitorVariable))
    ownHosts->setLauncher(launcher);
  std::shared_ptr<const RankHosts> hosts = ownHosts;
  MonitorLink::connect(rank);
  // Every orderly end, error or not, tells the launcher this rank is done.
  struct SayDone {
    ~SayDone() { MonitorLink::done(); }
  } sayDone;
  std::signal(SIGTERM, onTerminate);
  setAbortObserver(onStopping);
  if (rank == 0)
    std::cerr << "plan-run: " << hosts->map() << "\n";
  if (std::string split = splitGroupError(plan, *hosts);
      !split.empty() && !o.allowSplitGroups) {
    if (rank == 0)
      std::cerr << "plan-run: error: " << split << "\n";
    hosts.reset();
    MPI_Finalize();
    return 1;
  }
  std::string where;
  std::unique_ptr<Device> device = agreeOnDevice(o, plan, rank, *hosts, where);
  if (!device) {
    MPI_Finalize();
    return 1;
  }
  std::unique_ptr<Communicator> comm;
#ifdef PARTITA_HAVE_CUDA
  if (where.rfind("cuda", 0) == 0)
    comm = createNcclCommunicator(plan, *device);
#endif
  if (!comm)
    comm = createMpiCommunicator(plan, kMpiPieceBytes, hosts);
  comm->setWatchdog(o.collectiveTimeout);
  prepareStopMessage(plan, rank);
  std::unique_ptr<TokenSource> data;
  try {
    data = openData(o, plan);
  } catch (const std::exception &e) {
    if (rank == 0)
      std::cerr << "plan-run: error: " << e.what() << "\n";
    comm.reset();
    MPI_Finalize();
    return 1;
  }
  const Coordinates &c = plan.devices[rank];
  std::ofstream log;
  if (c.pp == plan.pp - 1 && c.dp == 0 && c.tp == 0 && !o.logJson.empty()) {
    // A resumed run appends to the log of the run it continues.
    log.open(o.logJson, o.resume ? std::ios::app : std::ios::trunc);
    log.precision(9);
    if (!log)
      comm->abort("cannot write " + o.logJson);
  }
  try {
    train(o, plan, rank, size, where, *device, *comm, *data, log);
  } catch (const std::exception &e) {
    comm->abort(std::string("error: ") + e.what());
  }
  comm.reset();
  MPI_Finalize();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = partita::parseRunOptions(argc, argv);
  if (std::string error = pathError(o); !error.empty()) {
    std::cerr << "plan-run: error: " << error << "\n";
    return 1;
  }
  if (o.bandwidthTest)
    return bandwidthTestMain(o, argc, argv);
  Plan plan;
  try {
    plan = loadPlan(o.plan);
  } catch (const std::exception &e) {
    std::cerr << "plan-run: error: " << e.what() << "\n";
    return 1;
  }
  if (underLauncher())
    return runRank(o, plan, argc, argv);
  std::string error = checkBeforeRanks(o, plan);
  if (error.empty() && !o.hostfile.empty())
    error = hostfileError(o.hostfile, plan.worldSize);
  if (!error.empty()) {
    std::cerr << "plan-run: error: " << error << "\n";
    return 1;
  }
  // A hostfile places even one rank: on its first host, through mpirun.
  if (plan.worldSize > 1 || o.maxRestarts > 0 || !o.hostfile.empty())
    return launch(o, plan.worldSize, plan.model + " (" + plan.strategy + ")",
                  argv);
  return runRank(o, plan, argc, argv);
}
