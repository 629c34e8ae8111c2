//===- PlanLoaderFuzzer.cpp - libFuzzer entry point for plan.json ---------===//
//
// Feeds arbitrary bytes to the runtime's plan reader and, where a one-rank
// plan loads and is small, trains it for a step on the CPU kernels. The
// loader is the runtime's only guard: a crash, a sanitizer report or an
// exception other than std::runtime_error is a bug, in the loader (it let
// through a plan the executor cannot run) or in the executor.
//
// In the libFuzzer build JsonMutator.cpp edits one JSON value at a time,
// since byte-level mutations of a plan almost never parse.
//
//===----------------------------------------------------------------------===//

#include "OneRankCommunicator.h"
#include "partita/runtime/Device.h"
#include "partita/runtime/Plan.h"
#include "partita/runtime/Trainer.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

using namespace partita::runtime;

namespace {

/// Whether a step of `plan` is quick and small: a fuzzer's input must be.
bool smallEnoughToStep(const Plan &plan) {
  constexpr int64_t kMaxArenaBytes = int64_t(64) << 20;
  constexpr int64_t kMaxTokens = 1 << 14;
  if (plan.worldSize != 1 || plan.programs.size() != 1 ||
      plan.numMicroBatches > 16 || plan.globalBatch * plan.seqLen > kMaxTokens)
    return false;
  // Parameters, optimizer state and activations alike lie in the arena.
  return arenaLayout(plan.programs[0]).bytes <= kMaxArenaBytes;
}

/// What the inputs came to, for the corpus replay's summary.
struct Outcomes {
  int64_t refused = 0, loaded = 0, trained = 0, stopped = 0;
} outcomes;

} // namespace

std::string fuzzTargetSummary() {
  return std::to_string(outcomes.refused) + " refused, " +
         std::to_string(outcomes.loaded) + " loaded, " +
         std::to_string(outcomes.trained) + " trained a step, " +
         std::to_string(outcomes.stopped) + " stopped by the executor";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  Plan plan;
  try {
    plan = parsePlan(text, "fuzz-plan.json");
  } catch (const std::runtime_error &) {
    ++outcomes.refused; // a clear error: what bad input must get
    return 0;
  }
  ++outcomes.loaded;
  if (!smallEnoughToStep(plan))
    return 0;
  std::unique_ptr<Device> device = createCpuDevice();
  OneRankCommunicator comm;
  std::unique_ptr<TokenSource> tokens = syntheticTokens(plan.vocabSize);
  try {
    Trainer trainer(plan, *device, comm, *tokens);
    trainer.step(1);
    ++outcomes.trained;
  } catch (const std::runtime_error &) {
    // The executor's own checks (a non-finite loss, a failed collective)
    // stop the job with a message, as plan-run reports it.
    ++outcomes.stopped;
  }
  return 0;
}
