//===- RunOptions.cpp - plan-run's command line ---------------------------===//

#include "RunOptions.h"

#include "partita/runtime/Trainer.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <iostream>

namespace partita {

namespace {

constexpr const char *kDescription =
    "Trains with a plan compiled by plan-opt (-o plan.json). Alone, plan-run\n"
    "starts the plan's ranks on this host (or the hosts of --hostfile) with\n"
    "mpirun and waits for them; under mpirun or srun it is one rank. The rank\n"
    "that holds the loss prints one line per step. CPU ranks run OpenBLAS on\n"
    "their host's cores divided by its ranks. docs/user-guide.md and\n"
    "docs/runtime.md describe every option.";

constexpr const char *kFooter =
    "Environment: PARTITA_CUDA_ATTENTION=wmma|mma|mma-atomic|cudnn picks the\n"
    "GPU's attention kernels (docs/gpu.md); unset, cudnn where the build has\n"
    "cuDNN, else mma.\n"
    "Exit status: 0 done, 1 the run failed or was refused, 2 a bad command\n"
    "line, 3 a loss that is not finite.";

[[noreturn]] void fail(const std::string &why) {
  std::cerr << "plan-run: error: " << why << "\n"
            << "(plan-run --help lists the options)\n";
  std::exit(2);
}

/// An integer of at least `least`; else "must be `what`".
CLI::Validator atLeast(int64_t least, const std::string &what) {
  return CLI::Validator(
      [=](std::string &value) -> std::string {
        char *end;
        errno = 0;
        long long n = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end || errno == ERANGE || n < least)
          return "must be " + what + ", got \"" + value + "\"";
        return "";
      },
      "", "");
}

/// One of `choices`.
CLI::Validator oneOf(std::initializer_list<const char *> choices) {
  std::vector<std::string> names(choices.begin(), choices.end());
  std::string list;
  for (size_t k = 0; k < names.size(); ++k)
    list += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + names[k];
  return CLI::Validator(
      [=](std::string &value) -> std::string {
        for (const std::string &name : names)
          if (value == name)
            return "";
        return "must be " + list + ", got \"" + value + "\"";
      },
      "", "");
}

/// A path: an empty one would turn its option off unseen.
const CLI::Validator kNonEmpty(
    [](std::string &value) -> std::string {
      return value.empty() ? "needs a value" : "";
    },
    "", "");

/// Seconds from 0 (never) to 1e7: beyond, the watchdog's clock arithmetic
/// would overflow.
const CLI::Validator kSeconds(
    [](std::string &value) -> std::string {
      char *end;
      double s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(s >= 0) || s > 1e7)
        return "must be seconds from 0 (never) to 1e7, got \"" + value + "\"";
      return "";
    },
    "", "");

/// Bytes from 1 to 4G, with an optional K, M or G (powers of 2), rewritten
/// as a plain number.
const CLI::Validator kBytes(
    [](std::string &value) -> std::string {
      char *end;
      errno = 0;
      long long n = std::strtoll(value.c_str(), &end, 10);
      std::string unit = end;
      int shift = unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : 0;
      if (end == value.c_str() || (!unit.empty() && !shift) ||
          errno == ERANGE || n < 1 || n > (int64_t(4) << 30) >> shift)
        return "must be bytes from 1 to 4G (with K, M or G), got \"" + value +
               "\"";
      value = std::to_string(int64_t(n) << shift);
      return "";
    },
    "", "");

void addTrainingOptions(CLI::App &app, RunOptions &o) {
  const char *group = "Training";
  app.add_option("plan", o.plan, "The plan (plan-opt -o plan.json)")
      ->type_name("PLAN.json")
      ->check(kNonEmpty);
  app.add_option("--steps", o.steps, "Steps to train (default 10)")
      ->type_name("N")
      ->check(atLeast(1, "a positive integer"))
      ->group(group);
  app.add_option("--data", o.data,
                 "A flat file of tokens (--data-dtype); without it, "
                 "synthetic tokens")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
  app.add_option_function<std::string>(
         "--data-dtype",
         [&o](const std::string &v) {
           o.dataBytes = v == "u16" ? 2 : 4;
           o.dataDtypeGiven = true;
         },
         "The tokens of --data: u16 (default) or u32, little-endian")
      ->type_name("u16|u32")
      ->check(oneOf({"u16", "u32"}))
      ->group(group);
}

void addOutputOptions(CLI::App &app, RunOptions &o) {
  const char *group = "Outputs";
  app.add_option("--log-json", o.logJson,
                 "One JSON object per step (JSON Lines: step, loss, "
                 "grad_norm, lr, step_time_s, tokens_per_s, ...)")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
  app.add_option("--trace", o.trace,
                 "A Chrome trace (Perfetto) of every rank's launches")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
  app.add_flag("--profile", o.profile,
               "Print where each step's time went, by launch")
      ->group(group);
  app.add_option("--save-params", o.saveParams,
                 "The parameters after the last step, gathered, as JSON")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
  app.add_option("--dump-grads", o.dumpGrads,
                 "The gradients after step 1, gathered, as JSON")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
}

void addFailureOptions(CLI::App &app, RunOptions &o) {
  const char *group = "Checkpoints and failures";
  app.add_option("--checkpoint-dir", o.checkpointDir,
                 "Where checkpoints go, each written atomically")
      ->type_name("DIR")
      ->check(kNonEmpty)
      ->group(group);
  app.add_option("--checkpoint-every", o.checkpointEvery,
                 "Steps between checkpoints (default: only the last step's)")
      ->type_name("K")
      ->check(atLeast(1, "a positive integer"))
      ->group(group);
  app.add_flag("--resume", o.resume,
               "Continue from the newest intact checkpoint (--steps is the "
               "total to reach)")
      ->group(group);
  app.add_option("--max-restarts", o.maxRestarts,
                 "Restart a failed job from its newest checkpoint up to R "
                 "times")
      ->type_name("R")
      ->check(atLeast(0, "an integer >= 0"))
      ->group(group);
  app.add_option("--collective-timeout", o.collectiveTimeout,
                 "Seconds a collective may wait before the job stops, naming "
                 "it (default 300; 0: never)")
      ->type_name("SECONDS")
      ->check(kSeconds)
      ->group(group);
}

void addPlacementOptions(CLI::App &app, RunOptions &o) {
  const char *group = "Devices and ranks";
  app.add_option("--device", o.device,
                 "auto (a GPU where there is one), cpu or cuda")
      ->type_name("auto|cpu|cuda")
      ->check(oneOf({"auto", "cpu", "cuda"}))
      ->group(group);
  app.add_option("--gemm-precision", o.gemmPrecision,
                 "GPU GEMMs on f32 buffers: fp32, tf32 or bf16 (default)")
      ->type_name("fp32|tf32|bf16")
      ->check(oneOf({"fp32", "tf32", "bf16"}))
      ->group(group);
  app.add_option("--hostfile", o.hostfile,
                 "The hosts for the ranks (mpirun's format: NAME slots=N)")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
  app.add_option("--threads-per-rank", o.threadsPerRank,
                 "OpenBLAS threads of a CPU rank (default: the host's cores "
                 "over its ranks)")
      ->type_name("T")
      ->check(atLeast(1, "a positive integer"))
      ->group(group);
  app.add_flag("--allow-split-groups", o.allowSplitGroups,
               "Run a group the plan keeps inside one node across hosts")
      ->group(group);
  app.add_option("--collective-chunk", o.collectiveChunk,
                 "Elements per piece of a large collective (bounds the "
                 "workspace)")
      ->type_name("ELEMENTS")
      ->check(atLeast(1, "a positive number of elements"))
      ->group(group);
}

void addBandwidthOptions(CLI::App &app, RunOptions &o) {
  const char *group = "Bandwidth test (plan-run --bandwidth-test, no plan)";
  app.add_flag("--bandwidth-test", o.bandwidthTest,
               "Time the CPU backend's kernels on every rank at once, then "
               "all_reduce, all_gather, reduce_scatter, all_to_all and "
               "send/recv inside a host and across hosts (nccl-tests' "
               "sizes, algbw and busbw)")
      ->group(group);
  app.add_option("--ranks", o.ranks,
                 "Ranks of the test (default: the hostfile's slots, or 2)")
      ->type_name("N")
      ->check(atLeast(1, "a positive integer"))
      ->group(group);
  app.add_option("--min-size", o.bandwidth.minBytes,
                 "Smallest message, bytes with K, M or G (default 1K)")
      ->type_name("BYTES")
      ->transform(kBytes)
      ->group(group);
  app.add_option("--max-size", o.bandwidth.maxBytes,
                 "Largest message (default 256M)")
      ->type_name("BYTES")
      ->transform(kBytes)
      ->group(group);
  app.add_option("--write-topology", o.bandwidth.topologyPath,
                 "Write what was measured as a topology for plan-opt: the "
                 "links, the device and its calibration")
      ->type_name("FILE")
      ->check(kNonEmpty)
      ->group(group);
}

/// CLI11's message in plan-run's words: "--steps must be ...", "--trace
/// needs a value".
std::string parseErrorText(const CLI::ParseError &e) {
  std::string text = e.what();
  size_t colon = text.find(": ");
  if (text.rfind("--", 0) != 0 || colon == std::string::npos)
    return text;
  std::string name = text.substr(0, colon), rest = text.substr(colon + 2);
  if (dynamic_cast<const CLI::ArgumentMismatch *>(&e))
    return name + " needs a value";
  return name + " " + rest;
}

/// What the options say together that none says alone.
void checkTogether(const RunOptions &o) {
  if (o.bandwidthTest) {
    if (!o.plan.empty())
      fail("--bandwidth-test takes no plan");
    if (o.bandwidth.minBytes > o.bandwidth.maxBytes)
      fail("--min-size is above --max-size");
  } else if (o.ranks || !o.bandwidth.topologyPath.empty()) {
    fail("--ranks and --write-topology belong to --bandwidth-test");
  }
  if (o.plan.empty() && !o.bandwidthTest)
    fail("no plan given");
  if ((o.checkpointEvery || o.resume || o.maxRestarts) &&
      o.checkpointDir.empty())
    fail("--checkpoint-every, --resume and --max-restarts need "
         "--checkpoint-dir");
  if (o.dataDtypeGiven && o.data.empty())
    fail("--data-dtype describes the tokens of --data, which is not given "
         "(without it the ranks train on synthetic tokens)");
}

} // namespace

RunOptions parseRunOptions(int argc, char **argv) {
  RunOptions o;
  o.collectiveChunk = runtime::kDefaultCollectiveChunk;
  CLI::App app(kDescription, "plan-run");
  app.footer(kFooter);
  app.get_formatter()->column_width(32);
  app.set_config("--config", "",
                 "Read options from FILE, one `name = value` a line (TOML: "
                 "steps = 100, data = \"tokens.bin\"); the command line wins. "
                 "Ranks read it too: like the plan, it must be on every host")
      ->type_name("FILE");
  addTrainingOptions(app, o);
  addOutputOptions(app, o);
  addFailureOptions(app, o);
  addPlacementOptions(app, o);
  addBandwidthOptions(app, o);
  // Extras are reported below in plan-run's words.
  app.allow_extras();
  // A misspelt key in --config is an error, as on the command line.
  app.allow_config_extras(CLI::config_extras_mode::error);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConfigError &e) {
    fail(std::string("--config: ") + e.what() + " (is it an option's name?)");
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    std::exit(0);
  } catch (const CLI::ParseError &e) {
    fail(parseErrorText(e));
  }
  for (const std::string &extra : app.remaining())
    fail(extra.rfind('-', 0) == 0 ? "unknown option " + extra
                                  : "one plan only");
  checkTogether(o);
  return o;
}

} // namespace partita
