//===- Plan.h - plan.json in memory -----------------------------*- C++ -*-===//
//
// The runtime's view of a plan (docs/plan-format.md): everything it needs to
// initialise, run and checkpoint a model, with buffer names resolved to
// indices. The runtime does not depend on MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_PLAN_H
#define PARTITA_RUNTIME_PLAN_H

#include "partita/plan/KernelParams.h"
#include "partita/plan/Kernels.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace partita::runtime {

using plan::Kernel;

/// The plan format versions this runtime executes.
constexpr int64_t kPlanVersion = 1;

enum class BufferKind {
  Tokens,
  Labels,
  Activation,
  ActivationGrad,
  Param,
  ParamShard,
  ParamGrad,
  GradShard,
  OptimizerState,
  Scalar,
  ParamGathered
};

struct BufferSpec {
  std::string name;
  BufferKind kind;
  bool isInt = false;  // tokens and labels
  bool isBf16 = false; // else f32
  int64_t elementBytes() const { return isBf16 ? 2 : 4; }
  /// Bytes of one copy.
  int64_t bytes() const { return elements * elementBytes(); }
  std::vector<int64_t> shape;
  int64_t elements = 0;
  /// Where the plan's memory plan puts the first copy (bytes into the
  /// program's arena; -1 without a memory plan), and how many copies it
  /// keeps (micro-batch k uses copy k % copies).
  int64_t offset = -1, copies = 1;
  /// Or, in a program whose model chunks share the bytes of what they keep
  /// between runs, its chunk's set (an index into Program::keptSets) and
  /// the bytes into each of the set's copies.
  int64_t keptSet = -1, setOffset = 0;
  /// The parameter a parameter, gradient or optimizer buffer is of (empty
  /// for other buffers, and in plans that do not say), and whether it
  /// holds only this rank's flat 1/dp slice of it (ZeRO).
  std::string param;
  bool dpShard = false;
  /// One copy per micro-batch in flight (tokens, labels, activations and
  /// their gradients); the rest exist once.
  bool perMicroBatch() const {
    return kind == BufferKind::Tokens || kind == BufferKind::Labels ||
           kind == BufferKind::Activation || kind == BufferKind::ActivationGrad;
  }
  /// What a checkpoint holds: parameters, their shards and optimizer
  /// state, persistent across steps.
  bool isState() const {
    return kind == BufferKind::Param || kind == BufferKind::ParamShard ||
           kind == BufferKind::OptimizerState;
  }
  /// Its dtype and shape, as messages print them: "bf16 [4, 128]".
  std::string typeWords() const;
  /// A parameter's values, gradient or optimizer state.
  bool ofParameter() const {
    return isState() || kind == BufferKind::ParamGathered ||
           kind == BufferKind::ParamGrad || kind == BufferKind::GradShard;
  }
  /// Zeroed at the start of every step.
  bool zeroedEachStep() const {
    return kind == BufferKind::ParamGrad || kind == BufferKind::GradShard ||
           kind == BufferKind::Scalar;
  }
};

struct Launch {
  enum class Op { Kernel, Collective, Send, Recv, Wait } op;
  // Kernel.
  Kernel kernel{};
  std::vector<int> ins, outs;
  std::vector<bool> accumulate;
  /// As the plan gives them, and decoded for the backends once checked.
  nlohmann::json params;
  plan::KernelParams kernelParams;
  /// The decoder layer the kernel belongs to, if any.
  std::optional<int64_t> layer;
  // Collective.
  enum class Collective { AllReduce, AllGather, ReduceScatter } collective{};
  std::string group;
  int input = -1, output = -1;
  bool reduceMax = false;
  std::optional<int64_t> dim;
  bool accumulateOutput = false;
  /// "all_reduce", "all_gather" or "reduce_scatter", as the plan says.
  const char *collectiveName() const {
    return collective == Collective::AllReduce   ? "all_reduce"
           : collective == Collective::AllGather ? "all_gather"
                                                 : "reduce_scatter";
  }
  /// The data-parallel bucket the collective belongs to
  /// (exec-overlap-communication): its flat members, consecutive in the
  /// phase, run as one collective (Trainer::collectiveRun).
  std::optional<int64_t> bucket;
  /// Runs on the comm thread while the launches after it run, until the
  /// Wait launch on `output`.
  bool async = false;
  /// Runs only in the run of the last micro-batch (gradient reductions).
  bool lastMicroBatch = false;
  /// An async collective of the step phase waited for in the next step's
  /// forward (by a firstMicroBatch wait).
  bool nextStep = false;
  /// A wait that runs in the first micro-batch only, for a next_step
  /// collective of the previous step (none in the first step).
  bool firstMicroBatch = false;
  // Send / recv: `input` is the buffer; `toNext` its peer. Wait: `input`
  // is the output of the async collective waited for.
  bool toNext = true;

  /// The kernel's name, for messages.
  std::string kernelName() const { return std::string(plan::name(kernel)); }

  /// Whether the launch runs in the run of `microBatch` (of a step of
  /// `numMicroBatches`; the step phase runs as micro-batch 0).
  bool runsIn(int64_t microBatch, int64_t numMicroBatches) const {
    return !(lastMicroBatch && microBatch != numMicroBatches - 1) &&
           !(firstMicroBatch && microBatch != 0);
  }
};

struct Phase {
  std::string kind; // forward, backward, step
  int64_t chunk = -1;
  std::vector<Launch> launches;
};

struct Run {
  int phase; // index into Program::phases
  int64_t microBatch;
};

/// The buffers one model chunk keeps between its runs of a micro-batch, as
/// a memory plan places them when a rank's chunks share those bytes (the
/// interleaved schedule): one copy of the set per micro-batch, each at its
/// own offset, and copies of different chunks that are never live at once
/// overlap.
struct KeptSet {
  int64_t chunk = 0, bytes = 0;
  std::vector<int64_t> offsets; // by micro-batch, bytes into the arena
};

struct Program {
  int64_t ppRank = 0;
  int64_t maxInFlight = 1;
  /// The memory plan's arena, when the plan has one (0 otherwise).
  int64_t arenaBytes = 0;
  /// The memory plan's allowance for what the runtime holds beside the
  /// arena (CUDA context, workspaces, NCCL buffers, send staging); 0 when
  /// the plan has none.
  int64_t runtimeBytes = 0;
  std::vector<KeptSet> keptSets;
  std::vector<BufferSpec> buffers;
  std::map<std::string, int> bufferIndex;
  std::vector<Phase> phases;
  std::vector<Run> schedule;
  int stepPhase = -1;

  /// Per phase, the tokens and labels buffers its model chunk reads. The
  /// executor fills a micro-batch's before the chunk's forward run of it:
  /// a memory plan keeps their copies for that chunk's micro-batches in
  /// flight only, and may give the bytes to another micro-batch while
  /// other chunks run this one.
  std::vector<std::vector<int>> phaseInputs() const;
};

/// Where a program's buffers lie in its one arena.
struct ArenaLayout {
  /// By buffer, where each copy starts, in bytes into the arena;
  /// micro-batch k uses copy k mod their number.
  std::vector<std::vector<int64_t>> copyOffsets;
  int64_t bytes = 0;
};

/// The program's memory plan (buffers that are never live at once share
/// bytes), or, for a plan without one, every buffer after the other, each
/// 64-byte aligned, per-micro-batch ones once per micro-batch in flight.
/// Throws std::runtime_error where a buffer lies outside the plan's arena.
ArenaLayout arenaLayout(const Program &program);

struct ParameterHolder {
  int64_t ppRank;
  std::string buffer;
  bool dpShard;
};

/// The prefixes of a parameter's optimizer buffers: AdamW's moments, and the
/// master weights of plans trained below f32 (ParameterSpec::stateBufferStem).
inline constexpr const char *kOptimizerStatePrefixes[] = {"adam_m.", "adam_v.",
                                                          "master."};

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> globalShape, localShape;
  std::string init; // zeros, ones, normal
  double initStd = 0;
  int64_t tpDim = -1, tpParts = 1;
  std::vector<ParameterHolder> holders;
  /// The decoder layer it belongs to, if any: only that layer's kernels
  /// read it, or write its gradient (the step's aside).
  std::optional<int64_t> layer;
  /// The name the optimizer's buffers of this parameter take after their
  /// prefix (kOptimizerStatePrefixes): the whole parameter's buffer, also
  /// where ranks hold shards of it. The plan's load makes sure there is a
  /// holder.
  std::string stateBufferStem() const;
};

struct Coordinates {
  int64_t pp, dp, tp, node, localDevice;
};

struct Optimizer {
  double lr, minLr, beta1, beta2, eps, weightDecay, clipNorm;
  int64_t warmupSteps, decaySteps;
  std::string decay;
  /// The learning rate of step `step` (from 0).
  double learningRate(int64_t step) const;
};

struct Plan {
  std::string model;
  /// The training dtype: "f32", or "bf16" (f32 master weights and moments).
  std::string dtype;
  int64_t seqLen, vocabSize, globalBatch, microBatchSize, numMicroBatches;
  int64_t dp, tp, pp, worldSize;
  /// The parts the key/value heads are split in over tp (tp_kv groups hold
  /// tp / kvParts ranks).
  int64_t kvParts = 1;
  std::vector<Coordinates> devices;
  /// Group name -> its groups, each a list of world ranks.
  std::map<std::string, std::vector<std::vector<int64_t>>> groups;
  /// The comm stream of group `name`, one of `groups` (Stream::comm): its
  /// position among the groups by name, the same on every rank.
  int commLane(const std::string &name) const {
    return int(std::distance(groups.begin(), groups.find(name)));
  }
  Optimizer optimizer;
  std::vector<ParameterSpec> parameters;
  /// Parameter `name`, or null.
  const ParameterSpec *findParameter(const std::string &name) const {
    auto it = parameterIndex.find(name);
    return it == parameterIndex.end() ? nullptr : &parameters[it->second];
  }
  std::map<std::string, size_t> parameterIndex; // into parameters, by name
  std::vector<Program> programs;                // by pipeline rank
  double predictedStepTimeS = 0;
  /// The cost model's memory per device (the busiest rank), in bytes.
  double predictedPeakBytes = 0;
  std::string strategy; // "dp=..,tp=..", for messages
};

/// Reads and checks a plan; errors name the file and the JSON path.
/// Throws std::runtime_error.
Plan loadPlan(const std::string &path);

/// Reads and checks the plan in `text`, as loadPlan does the file `name`.
Plan parsePlan(const std::string &text, const std::string &name);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_PLAN_H
