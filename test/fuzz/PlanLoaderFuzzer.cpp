//===- PlanLoaderFuzzer.cpp - libFuzzer entry point for plan.json ---------===//
//
// Feeds arbitrary bytes to the runtime's plan reader and, where a one-rank
// plan loads and is small, trains it for a step on the CPU kernels. The
// loader is the runtime's only guard: a crash, a sanitizer report or an
// exception other than std::runtime_error is a bug, in the loader (it let
// through a plan the executor cannot run) or in the executor.
//
// In the libFuzzer build a structure-aware mutator edits one JSON value at
// a time (a number, a name, an array's elements, an object's keys), since
// byte-level mutations of a plan almost never parse.
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

#ifdef PARTITA_LIBFUZZER
#include <nlohmann/json.hpp>

#include <limits>
#include <random>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using json = nlohmann::json;

/// Every value of a document, the root first, with the containers' values
/// after the container.
void collectValues(json &value, std::vector<json *> &out) {
  out.push_back(&value);
  if (value.is_structured())
    for (json &child : value)
      collectValues(child, out);
}

/// Replaces `target` by a value chosen to cross a check's boundary: one
/// already in the plan (a buffer's name in another launch, another size),
/// a neighbour of it, an extreme, or a value of another type.
void mutateValue(json &target, const std::vector<json *> &values,
                 std::minstd_rand &rng) {
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  auto sameKind = [&](auto predicate) -> const json * {
    for (int tries = 0; tries < 16; ++tries) {
      const json *other = values[pick(values.size())];
      if (predicate(*other))
        return other;
    }
    return nullptr;
  };
  switch (pick(8)) {
  case 0: // a number: a neighbour, an extreme or another of the plan's
    if (target.is_number_integer()) {
      int64_t v = target.get<int64_t>();
      const int64_t choices[] = {0,
                                 1,
                                 -1,
                                 v + 1,
                                 v - 1,
                                 v * 2,
                                 v / 2,
                                 int64_t(1) << 31,
                                 (int64_t(1) << 31) - 1,
                                 int64_t(1) << 32,
                                 int64_t(1) << 53,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
      target = choices[pick(std::size(choices))];
      return;
    }
    if (target.is_number_float()) {
      const double choices[] = {0.0,   -1.0, 1e-300,
                                1e300, 0.5,  target.get<double>() * 2};
      target = choices[pick(std::size(choices))];
      return;
    }
    [[fallthrough]];
  case 1: // another value of the same type from the plan
    if (const json *other = sameKind(
            [&](const json &v) { return v.type() == target.type(); })) {
      target = json(*other);
      return;
    }
    [[fallthrough]];
  case 2: // an array loses, repeats or swaps elements
    if (target.is_array() && !target.empty()) {
      size_t i = pick(target.size()), j = pick(target.size());
      switch (pick(3)) {
      case 0:
        target.erase(target.begin() + i);
        break;
      case 1:
        target.insert(target.begin() + i, json(target[j]));
        break;
      default:
        std::swap(target[i], target[j]);
      }
      return;
    }
    [[fallthrough]];
  case 3: // an object loses a key
    if (target.is_object() && !target.empty()) {
      auto it = target.begin();
      std::advance(it, pick(target.size()));
      target.erase(it);
      return;
    }
    [[fallthrough]];
  case 4: // a string grows or is emptied
    if (target.is_string()) {
      std::string s = target.get<std::string>();
      target = pick(2) ? s + "x" : std::string();
      return;
    }
    [[fallthrough]];
  case 5: // a copy of any other value of the plan
    target = json(*values[pick(values.size())]);
    return;
  default: { // a value of another type
    const json choices[] = {nullptr,       true,           "x",
                            json::array(), json::object(), -1};
    target = choices[pick(std::size(choices))];
  }
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::minstd_rand rng(seed);
  json doc = json::parse(data, data + size, nullptr,
                         /*allow_exceptions=*/false);
  // Now and then, and for inputs that are not JSON, bytes as libFuzzer
  // mutates them: the reader's JSON errors need inputs too.
  if (doc.is_discarded() || rng() % 32 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::vector<json *> values;
  collectValues(doc, values);
  // Copies alias nothing: mutate a value the collection does not hold.
  json &target = *values[rng() % values.size()];
  json replacement = target;
  mutateValue(replacement, values, rng);
  target = std::move(replacement);
  std::string out = doc.dump();
  if (out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
#endif
