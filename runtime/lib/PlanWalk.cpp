//===- PlanWalk.cpp - A plan's steps, followed as the executor runs them --===//

#include "PlanWalk.h"

#include "KernelShapes.h"

#include <algorithm>
#include <optional>
#include <set>

namespace partita::runtime {

namespace {

/// Thrown inside a walk; its entry point returns the problem.
struct Found {
  PlanProblem problem;
};

/// One copy of a buffer; buffer -1: bytes no buffer has written.
struct Copy {
  int buffer = -1;
  int64_t copy = 0;
  bool operator==(const Copy &o) const {
    return buffer == o.buffer && copy == o.copy;
  }
};

std::string launchPath(const std::string &program, int phase, size_t launch) {
  return program + "/phases/" + std::to_string(phase) + "/launches/" +
         std::to_string(launch);
}

/// What reads or writes a buffer: a launch in one micro-batch, or the
/// executor itself. Messages are made of it only when a check fails.
struct Actor {
  enum Kind { Launch, Initial, Zeroing, Tokens, StepEnd } kind = Initial;
  int phase = 0;
  /// The launch in its phase; the buffer a zeroing or the initial values
  /// fill; the schedule entry tokens are filled for.
  size_t index = 0;
  int64_t microBatch = 0, step = 0;

  bool operator==(const Actor &o) const {
    return kind == o.kind && phase == o.phase && index == o.index &&
           microBatch == o.microBatch && step == o.step;
  }

  /// Where it is in the plan, under program `path`.
  std::string at(const std::string &path) const {
    switch (kind) {
    case Launch:
      return launchPath(path, phase, index);
    case Initial:
    case Zeroing:
      return path + "/buffers/" + std::to_string(index);
    case Tokens:
      return path + "/schedule/" + std::to_string(index);
    case StepEnd:
      break;
    }
    return path;
  }
  std::string when() const {
    return "micro-batch " + std::to_string(microBatch) + " of step " +
           std::to_string(step);
  }
  /// How messages name it.
  std::string name(const std::string &path) const {
    std::string ofStep = " of step " + std::to_string(step);
    switch (kind) {
    case Launch:
      return "launch " + at(path) + " (" + when() + ")";
    case Initial:
      return "the initial values";
    case Zeroing:
      return "the zeroing at the start" + ofStep;
    case Tokens:
      return "the tokens of micro-batch " + std::to_string(microBatch) + ofStep;
    case StepEnd:
      break;
    }
    return "the end" + ofStep;
  }
};

/// A value that holds, on each tensor-parallel rank, one term of what the
/// model computes: the ranks' sum (or, for the cross-entropy's row maxima,
/// their maximum) over `tp` is the value; or, for the gradient of a
/// key/value weight replicated over several tp ranks, the sum over those
/// replicas (`tp_kv`).
enum class Partial { None, Sum, Max, ReplicaSum };

/// The group whose reduction makes partial sums `p` whole.
const char *completingGroup(Partial p) {
  return p == Partial::ReplicaSum ? "tp_kv" : "tp";
}

/// Two steps of one program: its asynchronous collectives against their
/// waits, which copy of which buffer holds each byte of its arena, and
/// which values are tensor-parallel partial sums.
class StepWalk {
public:
  StepWalk(const Plan &plan, const Program &program, std::string path)
      : plan(plan), program(program), path(std::move(path)),
        layout(arenaLayout(program)) {
    for (const std::vector<int64_t> &copies : layout.copyOffsets)
      values.emplace_back(copies.size());
    findComputations();
    holders[0] = {};
    holders[std::max<int64_t>(layout.bytes, 1)] = {};
  }

  void run() {
    // The holders' parameters and the optimizer state get their initial
    // values, or a checkpoint's.
    for (size_t k = 0; k < program.buffers.size(); ++k)
      if (program.buffers[k].isState())
        for (size_t c = 0; c < layout.copyOffsets[k].size(); ++c)
          write({int(k), int64_t(c)}, {Actor::Initial, 0, k});
    std::vector<std::vector<int>> inputs = program.phaseInputs();
    for (step = 1; step <= 2; ++step) {
      for (size_t k = 0; k < program.buffers.size(); ++k)
        if (program.buffers[k].zeroedEachStep())
          for (size_t c = 0; c < layout.copyOffsets[k].size(); ++c)
            write({int(k), int64_t(c)}, {Actor::Zeroing, 0, k, 0, step});
      for (size_t r = 0; r < program.schedule.size(); ++r) {
        const Run &run = program.schedule[r];
        if (program.phases[size_t(run.phase)].kind == "forward")
          for (int k : inputs[size_t(run.phase)])
            write(copyOf(k, run.microBatch),
                  {Actor::Tokens, 0, r, run.microBatch, step});
        visit(run.phase, run.microBatch);
      }
      visit(program.stepPhase, 0);
      // The executor reads the loss and the gradient norm, and a
      // checkpoint the persistent state.
      Actor end{Actor::StepEnd, 0, 0, 0, step};
      for (size_t k = 0; k < program.buffers.size(); ++k) {
        const BufferSpec &b = program.buffers[k];
        if (b.isState() || b.name == "loss" || b.name == "grad_sumsq")
          for (size_t c = 0; c < layout.copyOffsets[k].size(); ++c)
            read({int(k), int64_t(c)}, end);
      }
    }
  }

private:
  struct Holder {
    Copy copy;
    Actor writtenBy;
  };
  /// What made a value: the write of output `output` of `by`, followed
  /// back through recomputations (a launch that repeats an earlier one
  /// on the same values remakes its values), and through the gathers and
  /// tensor-parallel reductions that complete a value.
  struct Origin {
    Actor by;
    size_t output = 0;
    bool operator==(const Origin &o) const {
      return by == o.by && output == o.output;
    }
  };
  /// An asynchronous collective started and not yet waited for, and the
  /// origin of the value it writes.
  struct Flight {
    Copy input, output;
    Actor startedBy;
    Origin origin;
    Partial partial;
  };
  /// The origins of what a kernel launch read and wrote, in one step.
  struct KernelRun {
    int64_t step = 0;
    std::vector<Origin> ins, outs;
  };

  /// Numbers the kernel launches by computation: launches with the same
  /// kernel, params and buffers (a forward and its recomputation) share
  /// one. Finds the forwards of each backward.
  void findComputations() {
    ForwardLaunches forwards(program);
    std::map<std::string, int> numbers;
    std::vector<int> launches; // of each computation
    for (size_t j = 0; j < program.phases.size(); ++j) {
      computationOf.emplace_back(program.phases[j].launches.size(), -1);
      for (size_t k = 0; k < program.phases[j].launches.size(); ++k) {
        const Launch &l = program.phases[j].launches[k];
        if (l.op != Launch::Op::Kernel)
          continue;
        std::string key = l.kernelName() + " " + l.params.dump();
        for (const std::vector<int> *list : {&l.ins, &l.outs}) {
          key += " |";
          for (int b : *list)
            key += " " + std::to_string(b);
        }
        for (bool accumulates : l.accumulate)
          key += accumulates ? "+" : "=";
        auto [it, added] = numbers.try_emplace(key, int(numbers.size()));
        computationOf[j][k] = it->second;
        if (added) {
          computations.push_back(
              {forwards.pairedForwards(l), forwards.savedInputs(l)});
          launches.push_back(0);
        }
        ++launches[size_t(it->second)];
      }
    }
    for (size_t c = 0; c < computations.size(); ++c) {
      computations[c].kept |= launches[c] > 1;
      for (ForwardLaunches::Place f : computations[c].forwards)
        computations[size_t(computationOf[f.phase][f.index])].kept = true;
    }
  }

  Copy copyOf(int buffer, int64_t microBatch) const {
    int64_t copies = int64_t(layout.copyOffsets[size_t(buffer)].size());
    return {buffer, copies > 0 ? microBatch % copies : 0};
  }

  std::pair<int64_t, int64_t> bytesOf(Copy c) const {
    int64_t at = layout.copyOffsets[size_t(c.buffer)][size_t(c.copy)];
    return {at, at + program.buffers[size_t(c.buffer)].bytes()};
  }

  std::string describe(Copy c) const {
    std::string s = "buffer " + program.buffers[size_t(c.buffer)].name;
    if (layout.copyOffsets[size_t(c.buffer)].size() > 1)
      s += " (copy " + std::to_string(c.copy) + ")";
    return s;
  }

  [[noreturn]] void fail(const std::string &at, const std::string &what) {
    throw Found{{at, what}};
  }

  /// Where a failure of `by` is reported: its own place, or, for an
  /// asynchronous collective found at its wait, the wait's. Messages are
  /// made only on failure.
  std::string atOf(const Actor &by, const Actor *wait) const {
    return (wait ? *wait : by).at(path);
  }
  /// How such a message names `by` and says when it acted: a launch at
  /// its own place is named by the path.
  std::string who(const Actor &by, const Actor *wait) const {
    if (wait)
      return "the asynchronous collective of " + by.name(path) + " ";
    return by.kind == Actor::Launch ? "" : by.name(path) + " ";
  }
  std::string when(const Actor &by, const Actor *wait) const {
    return by.kind == Actor::Launch && !wait ? " (" + by.when() + ")" : "";
  }

  /// Whether `by` is a collective or a receive.
  bool communicates(const Actor &by) const {
    if (by.kind != Actor::Launch)
      return false;
    Launch::Op op = program.phases[size_t(by.phase)].launches[by.index].op;
    return op == Launch::Op::Collective || op == Launch::Op::Recv;
  }

  /// Makes a run of holders start at byte `at`.
  void split(int64_t at) {
    auto it = std::prev(holders.upper_bound(at));
    if (it->first != at)
      holders.emplace_hint(std::next(it), at, it->second);
  }

  /// `by` writes copy `c` (an asynchronous collective's output, found at
  /// `wait`): a value of `origin` (by default, `by`'s own), partial sums
  /// where `partial` says.
  void write(Copy c, const Actor &by, const Actor *wait = nullptr,
             std::optional<Origin> origin = std::nullopt,
             Partial partial = Partial::None) {
    auto [begin, end] = bytesOf(c);
    if (begin == end)
      return;
    for (const auto &[output, flight] : inFlight)
      for (Copy used : {flight.input, flight.output}) {
        auto [b, e] = bytesOf(used);
        if (begin < e && b < end)
          fail(atOf(by, wait),
               who(by, wait) + "writes " + describe(c) + when(by, wait) +
                   " over bytes that the asynchronous "
                   "collective of " +
                   flight.startedBy.name(path) +
                   (used == flight.input ? " reads from " : " writes to ") +
                   describe(used) + " until its wait: a race with it");
      }
    split(begin);
    split(end);
    auto first = holders.find(begin);
    holders.erase(std::next(first), holders.find(end));
    first->second = {c, by};
    // A collective's or a message's value that nothing read is lost
    // traffic, and a sign of a wrong plan: a reduction that overwrites
    // where it should add, a message received twice into one buffer; so is
    // a gradient (of a parameter or an activation) overwritten where it
    // should be added to, and a micro-batch's value overwritten in its own
    // run (a kernel's side output may go unread until another
    // micro-batch's run writes it). A recomputation, writing the same
    // value again, loses nothing; nor does a collective at its wait.
    Value &previous = valueOf(c);
    BufferKind kind = program.buffers[size_t(c.buffer)].kind;
    bool gradient = kind == BufferKind::ParamGrad ||
                    kind == BufferKind::GradShard ||
                    kind == BufferKind::ActivationGrad;
    Origin made = origin.value_or(Origin{by, 0});
    bool sameRun = program.buffers[size_t(c.buffer)].perMicroBatch() &&
                   previous.writer.microBatch == by.microBatch &&
                   previous.writer.step == by.step;
    if (previous.written && !previous.read &&
        (communicates(previous.writer) ||
         (gradient && previous.writer.kind == Actor::Launch) ||
         (previous.writer.kind == Actor::Launch && sameRun)) &&
        !(previous.writer == by) &&
        !(previous.origin == made && !communicates(by)))
      fail(atOf(by, wait),
           who(by, wait) + "writes " + describe(c) + when(by, wait) +
               " over the value " + previous.writer.name(path) +
               " wrote, which nothing read: that launch's work is lost");
    previous = {by, true, false, partial, made};
  }
  /// `by` reads copy `c` (an asynchronous collective's input, found at
  /// `wait`), or, `accumulating`, the value it adds its output to.
  void read(Copy c, const Actor &by, const Actor *wait = nullptr,
            bool accumulating = false) {
    auto [begin, end] = bytesOf(c);
    if (begin == end)
      return;
    for (auto it = std::prev(holders.upper_bound(begin));
         it->first < end && std::next(it) != holders.end(); ++it) {
      const Holder &h = it->second;
      if (h.copy.buffer < 0 || h.copy == c)
        continue;
      const Value &value = valueOf(c);
      fail(atOf(by, wait),
           who(by, wait) + "reads " + describe(c) + when(by, wait) +
               (!value.written
                    ? ""
                    : ", written by " + value.writer.name(path) + ",") +
               " after " + h.writtenBy.name(path) + " wrote " +
               describe(h.copy) + " over its bytes " +
               std::to_string(std::max(begin, it->first)) + " to " +
               std::to_string(std::min(end, std::next(it)->first)) +
               ": the memory plan gives buffers that are live at once "
               "the same bytes");
    }
    // A micro-batch's buffer holds what its own micro-batch wrote in this
    // step: else a message never arrived, or went to another buffer.
    Value &value = valueOf(c);
    if (program.buffers[size_t(c.buffer)].perMicroBatch()) {
      auto reads = [&] {
        return who(by, wait) + "reads " + describe(c) + when(by, wait);
      };
      if (!value.written)
        fail(atOf(by, wait), reads() + ", which nothing wrote");
      const Actor &writer = value.writer;
      if (writer.microBatch != by.microBatch || writer.step != by.step)
        fail(atOf(by, wait), reads() + ", whose value " + writer.name(path) +
                                 " wrote for micro-batch " +
                                 std::to_string(writer.microBatch) +
                                 " of step " + std::to_string(writer.step) +
                                 ": nothing wrote it for micro-batch " +
                                 std::to_string(by.microBatch) + " of step " +
                                 std::to_string(by.step));
    }
    // Gradients and scalars start each step as zeros to add to; a gradient
    // read as a value, or a scalar the step's end or the update reads, that
    // nothing wrote in the step is a launch missing or run too late (a clip
    // coefficient read before it is formed). Other reads of a scalar's
    // zeros (a copy) change nothing the step keeps.
    BufferKind kind = program.buffers[size_t(c.buffer)].kind;
    bool mustBeFormed =
        kind != BufferKind::Scalar || by.kind == Actor::StepEnd ||
        (by.kind == Actor::Launch &&
         program.phases[size_t(by.phase)].launches[by.index].kernel ==
             Kernel::AdamW);
    if (!accumulating && mustBeFormed && value.writer.kind == Actor::Zeroing)
      fail(atOf(by, wait),
           who(by, wait) + "reads " + describe(c) + when(by, wait) +
               ", which nothing wrote in step " + std::to_string(step) +
               " (it holds the step's zeros)");
    value.read = true;
  }

  /// The partial sums kernel launch `l`, run by `by`, writes to its output
  /// `j`: a row-parallel linear's product (its weight cut along the
  /// inputs), a column-parallel linear's input gradient (each rank's outputs
  /// give their term of it, also where a part is replicated), the gradient
  /// of a replicated parameter from a sequence shard or this rank's heads,
  /// a key/value replica's weight gradient, and, over vocabulary slices,
  /// the embedding's rows and the cross-entropy's statistics.
  Partial partialMade(const Launch &l, const Actor &by, size_t j) {
    if (plan.tp < 2)
      return Partial::None;
    const ParameterSpec *gradientOf = parameterOfGradient(l.outs[j]);
    if (gradientOf && gradientOf->tpDim < 0 &&
        (readsSequenceShard(l) || normsHeadSplit(l, by)))
      return Partial::Sum;
    // Each replica of a key/value weight serves its own query heads.
    if (gradientOf && gradientOf->tpDim >= 0 && gradientOf->tpParts < plan.tp)
      return Partial::ReplicaSum;
    if (j != 0)
      return Partial::None;
    auto weightCut = [&](size_t in) {
      const ParameterSpec *p =
          plan.findParameter(program.buffers[size_t(l.ins[in])].param);
      return p ? p->tpDim : -1;
    };
    bool made = false;
    if (l.kernel == Kernel::Linear)
      made = weightCut(1) == 1;
    else if (l.kernel == Kernel::LinearBwd)
      made = weightCut(2) == 0;
    else if (l.kernel == Kernel::Embedding || l.kernel == Kernel::CeStats ||
             l.kernel == Kernel::CeMax)
      made = l.params.value("vocab_parts", int64_t(1)) > 1;
    if (!made)
      return Partial::None;
    return l.kernel == Kernel::CeMax ? Partial::Max : Partial::Sum;
  }

  /// The parameter whose gradient (whole or a ZeRO shard) `buffer` holds,
  /// if it holds one.
  const ParameterSpec *parameterOfGradient(int buffer) const {
    const BufferSpec &b = program.buffers[size_t(buffer)];
    if (b.kind != BufferKind::ParamGrad && b.kind != BufferKind::GradShard)
      return nullptr;
    return plan.findParameter(b.param);
  }
  /// Whether launch `l` reads a sequence shard: a micro-batch's value of
  /// s/tp positions (docs/plan-format.md), so that a gradient it forms
  /// of a replicated parameter holds its shard's term only.
  bool readsSequenceShard(const Launch &l) const {
    return std::any_of(l.ins.begin(), l.ins.end(), [&](int in) {
      const BufferSpec &b = program.buffers[size_t(in)];
      return b.perMicroBatch() && b.shape.size() > 1 &&
             b.shape[1] * plan.tp == plan.seqLen;
    });
  }

  /// Whether launch `l`, run by `by`, is the backward of a norm of a
  /// column-parallel linear's output: this rank's heads (or its replica of
  /// key/value heads, whose gradient holds its own query heads' term), so
  /// that the gradient of the norm's replicated weight holds this rank's
  /// term only (per-head query and key norms).
  bool normsHeadSplit(const Launch &l, const Actor &by) {
    if (l.kernel != Kernel::RmsNormBwd && l.kernel != Kernel::LayerNormBwd)
      return false;
    const Actor &made = valueOf(copyOf(l.ins[1], by.microBatch)).origin.by;
    if (made.kind != Actor::Launch)
      return false;
    const Launch &writer =
        program.phases[size_t(made.phase)].launches[made.index];
    if (writer.op != Launch::Op::Kernel || writer.kernel != Kernel::Linear)
      return false;
    const ParameterSpec *weight =
        plan.findParameter(program.buffers[size_t(writer.ins[1])].param);
    return weight && weight->tpDim == 0;
  }

  /// What copy `c`, partial, holds: "the tensor-parallel ranks' partial
  /// sums from launch ...".
  std::string partialWords(Copy c) {
    const Value &value = valueOf(c);
    if (value.partial == Partial::ReplicaSum)
      return "the key/value replicas' partial sums from " +
             value.writer.name(path);
    return "the tensor-parallel ranks' partial " +
           std::string(value.partial == Partial::Max ? "maxima" : "sums") +
           " from " + value.writer.name(path);
  }
  /// How a message says that copy `c` is read while partial.
  std::string unsummed(Copy c) {
    return "which holds " + partialWords(c) +
           ", before an all_reduce or reduce_scatter over " +
           completingGroup(valueOf(c).partial) + " sums them";
  }

  /// A kernel launch: its reads and writes, and the partial sums it makes
  /// or carries. `copy` and `add` carry them on; every other kernel needs
  /// whole values, as do the terms of a sum, which must all be partial or
  /// all whole (tp copies of a whole term would be summed).
  void visitKernel(const Launch &l, const Actor &by) {
    bool carries = l.kernel == Kernel::Copy || l.kernel == Kernel::Add;
    std::optional<std::pair<Copy, Partial>> first;
    for (int b : l.ins) {
      Copy in = copyOf(b, by.microBatch);
      read(in, by);
      Partial p = valueOf(in).partial;
      if (p != Partial::None && !carries)
        fail(by.at(path),
             "reads " + describe(in) + " (" + by.when() + "), " + unsummed(in));
      if (first && first->second != p)
        mixedTerms(first->first, in, by);
      if (!first)
        first = {in, p};
    }
    checkForwardValues(l, by);
    // The origins of its values: an earlier run's, where it repeats that
    // run (a recomputation) on values of the same origins. The last run is
    // updated in place, its vectors reused: this is the walk's hot path.
    KernelRun *last =
        lastRun(computationOf[size_t(by.phase)][by.index], by.microBatch);
    if (last) {
      bool repeats =
          last->step == step &&
          std::none_of(l.accumulate.begin(), l.accumulate.end(),
                       [](bool accumulates) { return accumulates; }) &&
          std::equal(l.ins.begin(), l.ins.end(), last->ins.begin(),
                     last->ins.end(), [&](int b, const Origin &o) {
                       return valueOf(copyOf(b, by.microBatch)).origin == o;
                     });
      last->step = step;
      last->ins.clear();
      for (int b : l.ins)
        last->ins.push_back(valueOf(copyOf(b, by.microBatch)).origin);
      if (!repeats) {
        last->outs.clear();
        for (size_t j = 0; j < l.outs.size(); ++j)
          last->outs.push_back({by, j});
      }
    }
    std::vector<Partial> made(l.outs.size());
    for (size_t j = 0; j < l.outs.size(); ++j) {
      made[j] = carries && first ? first->second : partialMade(l, by, j);
      if (l.kernel == Kernel::Linear && l.ins.size() > 2 &&
          made[j] != Partial::None)
        fail(by.at(path), "adds bias " +
                              program.buffers[size_t(l.ins[2])].name +
                              " to the tensor-parallel ranks' partial sums "
                              "of a row-parallel linear: the sum over tp "
                              "would add it tp times (a bias_add after the "
                              "reduction adds it once)");
      if (j >= l.accumulate.size() || !l.accumulate[j])
        continue;
      accumulate(copyOf(l.outs[j], by.microBatch), made[j], by, "");
    }
    for (size_t j = 0; j < l.outs.size(); ++j) {
      Copy out = copyOf(l.outs[j], by.microBatch);
      write(out, by, nullptr, last ? last->outs[j] : Origin{by, j}, made[j]);
    }
  }

  /// The last run in `microBatch` of `computation`, if its runs are kept.
  KernelRun *lastRun(int computation, int64_t microBatch) {
    Computation &c = computations[size_t(computation)];
    if (!c.kept)
      return nullptr;
    std::vector<KernelRun> &byMicroBatch = c.runs;
    if (byMicroBatch.size() <= size_t(microBatch))
      byMicroBatch.resize(size_t(microBatch) + 1);
    return &byMicroBatch[size_t(microBatch)];
  }

  /// A backward kernel launch against the forwards it may differentiate:
  /// one of them, in its micro-batch and step, read or wrote the values
  /// that its saved operands hold now (else something overwrote one in
  /// between, and the backward would differentiate another value).
  void checkForwardValues(const Launch &l, const Actor &by) {
    const Computation &backward =
        computations[size_t(computationOf[size_t(by.phase)][by.index])];
    if (backward.forwards.empty())
      return;
    std::string firstDifference;
    for (ForwardLaunches::Place f : backward.forwards) {
      const KernelRun *read =
          lastRun(computationOf[f.phase][f.index], by.microBatch);
      if (read->step != step)
        continue;
      std::string difference;
      for (const SavedOperand &s : backward.saved) {
        Copy in = copyOf(l.ins[s.backwardIn], by.microBatch);
        if (!program.buffers[size_t(in.buffer)].perMicroBatch())
          continue;
        const std::vector<Origin> &theirs = s.ofOutput ? read->outs : read->ins;
        const Value &value = valueOf(in);
        if (s.forwardOperand >= theirs.size() ||
            value.origin == theirs[s.forwardOperand])
          continue;
        difference = "reads " + describe(in) + " (" + by.when() +
                     "), which holds the value of " +
                     value.origin.by.name(path) +
                     ", where the forward it differentiates, " +
                     launchPath(path, int(f.phase), f.index) + ", " +
                     (s.ofOutput ? "wrote" : "read") + " the value of " +
                     theirs[s.forwardOperand].by.name(path);
        break;
      }
      if (difference.empty())
        return;
      if (firstDifference.empty())
        firstDifference = difference;
    }
    if (firstDifference.empty())
      fail(by.at(path), "no forward launch it differentiates ran for " +
                            by.when() + " before it");
    fail(by.at(path), firstDifference +
                          ": the backward would differentiate another value "
                          "than its forward's");
  }

  /// `by` (a collective where `collective` names it) adds a value,
  /// `adding` partial sums or not, to copy `out`: both terms must be of
  /// one kind (the step's zeros are a term of either).
  void accumulate(Copy out, Partial adding, const Actor &by,
                  const std::string &collective) {
    read(out, by, nullptr, true);
    const Value &held = valueOf(out);
    std::string adds = collective.empty() ? "adds " : collective + " adds ";
    auto group = [](Partial p) { return std::string(completingGroup(p)); };
    if (held.partial != Partial::None && adding == Partial::None)
      fail(by.at(path), adds + "a whole value to " + describe(out) + " (" +
                            by.when() + "), which holds " + partialWords(out) +
                            ": a sum over " + group(held.partial) +
                            " would count it " + group(held.partial) +
                            " times");
    if (held.partial == Partial::None && adding != Partial::None &&
        held.writer.kind != Actor::Zeroing)
      fail(by.at(path), adds + "partial sums to " + describe(out) + " (" +
                            by.when() + "), whose value from " +
                            held.writer.name(path) + " is whole: a sum over " +
                            group(adding) + " would count that value " +
                            group(adding) + " times");
  }

  /// Fails for a sum of two values of which only one is partial.
  [[noreturn]] void mixedTerms(Copy a, Copy b, const Actor &by) {
    if (valueOf(a).partial == Partial::None)
      std::swap(a, b);
    fail(by.at(path), "adds " + describe(a) + ", " + partialWords(a) +
                          ", and " + describe(b) + ", a whole value (" +
                          by.when() +
                          "): a sum over tp would count the whole value tp "
                          "times");
  }

  /// A collective's input `input` against what it does: partial sums go
  /// only to a reduction of their kind over their group, and a
  /// micro-batch's values and parameter gradients are reduced over
  /// tensor-parallel ranks only where they are partial (else every rank
  /// adds the same value, or its own part of it). Returns what its output
  /// holds: a gradient's partial sums stay partial through a sum over
  /// other ranks (data-parallel, tied copies), and `world`, which spans the
  /// tp ranks too, completes them.
  Partial checkReduction(const Launch &l, Copy input, const Actor &by) {
    Partial p = valueOf(input).partial;
    bool reduces = l.collective != Launch::Collective::AllGather;
    const ParameterSpec *gradientOf = parameterOfGradient(input.buffer);
    bool world = l.group == "world";
    bool tensorParallel =
        l.group == "tp" || l.group == "tp_kv" || (world && plan.tp > 1);
    if (p != Partial::None) {
      bool max = p == Partial::Max;
      std::string whole = completingGroup(p);
      if (gradientOf && reduces && !l.reduceMax && !tensorParallel)
        return p;
      if (gradientOf && reduces && !l.reduceMax && world && p == Partial::Sum)
        return Partial::None;
      if (!reduces || l.group != whole || l.reduceMax != max)
        fail(by.at(path), std::string(l.collectiveName()) + " over " + l.group +
                              " of " + describe(input) + " (" + by.when() +
                              "), which holds " + partialWords(input) +
                              ": only an all_reduce or reduce_scatter over " +
                              whole + " by " + (max ? "max" : "sum") +
                              " makes them whole");
    } else if (reduces && program.buffers[size_t(input.buffer)].perMicroBatch())
      fail(by.at(path),
           std::string(l.collectiveName()) + " over " + l.group + " of " +
               describe(input) + " (" + by.when() + "), written by " +
               valueOf(input).writer.name(path) +
               ", which holds no partial sums (a row-parallel linear's "
               "product, a column-parallel linear's input gradient, a "
               "vocabulary-parallel embedding's rows or cross-entropy "
               "statistics): each rank's value would count as a term of "
               "the sum");
    else if (reduces && gradientOf && tensorParallel) {
      const Actor &writer = valueOf(input).writer;
      fail(by.at(path),
           std::string(l.collectiveName()) + " over " + l.group + " of " +
               describe(input) + ", whose value from " + writer.name(path) +
               " is whole on every rank of " + l.group +
               (communicates(writer) ? " (that collective summed it)"
                : l.group == "tp"
                    ? " (its backward read whole values, not sequence "
                      "shards)"
                    : "") +
               ": the sum would count it once per rank");
    }
    return Partial::None;
  }

  void visit(int phaseIndex, int64_t microBatch) {
    const Phase &phase = program.phases[size_t(phaseIndex)];
    for (size_t k = 0; k < phase.launches.size(); ++k) {
      const Launch &l = phase.launches[k];
      if (!l.runsIn(microBatch, plan.numMicroBatches))
        continue;
      Actor by{Actor::Launch, phaseIndex, k, microBatch, step};
      if (l.op == Launch::Op::Wait) {
        auto flight = inFlight.find(l.input);
        // A first-micro-batch wait finds nothing in the first step.
        if (flight == inFlight.end() && l.firstMicroBatch && step == 1)
          continue;
        if (flight == inFlight.end())
          fail(by.at(path), "waits for buffer " +
                                program.buffers[l.input].name +
                                " with no asynchronous collective into it in "
                                "flight (micro-batch " +
                                std::to_string(microBatch) + ")");
        Flight done = flight->second;
        inFlight.erase(flight);
        // The collective read its input and wrote its output until now.
        read(done.input, done.startedBy, &by);
        write(done.output, done.startedBy, &by, done.origin, done.partial);
        continue;
      }
      // A kernel's buffers; a send's, a receive's or a collective's
      // input (a collective may replace one in flight into its output).
      std::vector<int> touched = {l.input};
      if (l.op == Launch::Op::Kernel) {
        touched = l.ins;
        touched.insert(touched.end(), l.outs.begin(), l.outs.end());
      }
      for (int b : touched)
        if (inFlight.count(b))
          fail(by.at(path),
               "touches buffer " + program.buffers[b].name +
                   " while an asynchronous collective into it is in "
                   "flight (no wait before it, micro-batch " +
                   std::to_string(microBatch) + ")");
      switch (l.op) {
      case Launch::Op::Kernel:
        visitKernel(l, by);
        break;
      case Launch::Op::Collective: {
        Copy input = copyOf(l.input, microBatch),
             output = copyOf(l.output, microBatch);
        read(input, by);
        Partial carried = checkReduction(l, input, by);
        // A gather, or a reduction of partial sums, completes or carries
        // its input's value: a backward may read it as what its forward
        // read.
        Origin origin = l.collective == Launch::Collective::AllGather ||
                                valueOf(input).partial != Partial::None
                            ? valueOf(input).origin
                            : Origin{by, 0};
        if (l.accumulateOutput)
          accumulate(output, carried, by, l.collectiveName());
        write(output, by, nullptr, origin, carried);
        if (l.async)
          inFlight[l.output] = {input, output, by, origin, carried};
        break;
      }
      case Launch::Op::Send: {
        Copy sent = copyOf(l.input, microBatch);
        read(sent, by);
        if (valueOf(sent).partial != Partial::None)
          fail(by.at(path), "sends " + describe(sent) + " (" + by.when() +
                                "), " + unsummed(sent));
        break;
      }
      case Launch::Op::Recv:
        write(copyOf(l.input, microBatch), by);
        break;
      case Launch::Op::Wait:
        break;
      }
    }
  }

  const Plan &plan;
  const Program &program;
  std::string path;
  ArenaLayout layout;
  int64_t step = 0;
  /// From each key to the next, the copy whose value the bytes hold and
  /// what wrote it; the last key is the arena's end.
  std::map<int64_t, Holder> holders;
  /// Each copy's value: what wrote it, whether anything read it since,
  /// and its origin.
  struct Value {
    Actor writer;
    bool written = false, read = false;
    Partial partial = Partial::None;
    Origin origin;
  };
  std::vector<std::vector<Value>> values; // by buffer, then copy
  Value &valueOf(Copy c) { return values[size_t(c.buffer)][size_t(c.copy)]; }
  std::map<int, Flight> inFlight; // by output buffer, as the executor's
  /// By phase and launch, the computation of each kernel launch.
  std::vector<std::vector<int>> computationOf;
  /// What identical kernel launches compute: for a backward kernel, the
  /// forwards it may differentiate and which of its inputs hold their
  /// values; whether its runs are kept (it has several launches, or a
  /// backward may differentiate it), and by micro-batch, the last run.
  struct Computation {
    std::vector<ForwardLaunches::Place> forwards;
    std::vector<SavedOperand> saved;
    bool kept = false;
    std::vector<KernelRun> runs;
  };
  std::vector<Computation> computations;
};

} // namespace

std::optional<PlanProblem> walkProgramSteps(const Plan &plan,
                                            const Program &program,
                                            const std::string &path) {
  try {
    StepWalk(plan, program, path).run();
  } catch (const Found &found) {
    return found.problem;
  }
  return std::nullopt;
}

namespace {

/// What a pipeline rank does that another rank must meet.
struct PipelineEvent {
  enum Kind { Send, Recv, Start, Await } kind;
  int64_t peer = 0; // a message's pipeline rank
  std::string group;
  int64_t ordinal = 0; // of the collective over the group, from 1
  /// The launch (a wait for an asynchronous collective's Await), and when
  /// it runs: for messages made only if the ranks get stuck.
  int phase = 0;
  size_t index = 0;
  int64_t microBatch = 0, step = 0;
};
/// By program, each group name's pipeline ranks in its group of the
/// program's ranks (one rank stands for all: they run in step), where the
/// group spans several.
using CrossStageGroups = std::vector<std::map<std::string, std::set<int64_t>>>;

CrossStageGroups crossStageGroups(const Plan &plan) {
  int64_t pp = int64_t(plan.programs.size());
  CrossStageGroups spans(static_cast<size_t>(pp));
  for (int64_t p = 0; p < pp; ++p) {
    int64_t rank = plan.programs[size_t(p)].ppRank * plan.dp * plan.tp;
    for (const auto &[name, lists] : plan.groups)
      for (const std::vector<int64_t> &list : lists)
        if (std::find(list.begin(), list.end(), rank) != list.end()) {
          std::set<int64_t> stages;
          for (int64_t member : list)
            stages.insert(plan.devices[size_t(member)].pp);
          if (stages.size() > 1)
            spans[size_t(p)][name] = stages;
        }
  }
  return spans;
}

/// Program p's events over two steps: its sends and receives, and the
/// starts and ends of its collectives over groups that span stages.
std::vector<PipelineEvent> pipelineEvents(const Plan &plan, int64_t p,
                                          const CrossStageGroups &spans) {
  int64_t pp = int64_t(plan.programs.size());
  const Program &program = plan.programs[size_t(p)];
  std::vector<PipelineEvent> out;
  std::map<std::string, int64_t> started;
  std::map<int, std::pair<std::string, int64_t>> pending; // by output
  for (int64_t step = 1; step <= 2; ++step) {
    auto visit = [&](int phaseIndex, int64_t microBatch) {
      const Phase &phase = program.phases[size_t(phaseIndex)];
      for (size_t k = 0; k < phase.launches.size(); ++k) {
        const Launch &l = phase.launches[k];
        if (!l.runsIn(microBatch, plan.numMicroBatches))
          continue;
        auto add = [&](PipelineEvent::Kind kind, int64_t peer,
                       const std::string &group, int64_t ordinal) {
          out.push_back(
              {kind, peer, group, ordinal, phaseIndex, k, microBatch, step});
        };
        if (l.op == Launch::Op::Send || l.op == Launch::Op::Recv) {
          add(l.op == Launch::Op::Send ? PipelineEvent::Send
                                       : PipelineEvent::Recv,
              (program.ppRank + (l.toNext ? 1 : pp - 1)) % pp, "", 0);
        } else if (l.op == Launch::Op::Collective &&
                   spans[size_t(p)].count(l.group)) {
          int64_t ordinal = ++started[l.group];
          add(PipelineEvent::Start, 0, l.group, ordinal);
          if (l.async)
            pending[l.output] = {l.group, ordinal};
          else
            add(PipelineEvent::Await, 0, l.group, ordinal);
        } else if (l.op == Launch::Op::Wait) {
          auto it = pending.find(l.input);
          if (it == pending.end())
            continue;
          add(PipelineEvent::Await, 0, it->second.first, it->second.second);
          pending.erase(it);
        }
      }
    };
    for (const Run &run : program.schedule)
      visit(run.phase, run.microBatch);
    visit(program.stepPhase, 0);
  }
  return out;
}

/// Every rank goes as far as it can, until none can go on: where each
/// stopped.
std::vector<size_t>
advanceAll(const std::vector<std::vector<PipelineEvent>> &events,
           const CrossStageGroups &spans) {
  int64_t pp = int64_t(events.size());
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  std::map<std::pair<int64_t, int64_t>, int64_t> unreceived; // (from, to)
  std::map<std::pair<int64_t, std::string>, int64_t> startedBy;
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t p = 0; p < pp; ++p)
      for (; next[size_t(p)] < events[size_t(p)].size(); ++next[size_t(p)]) {
        const PipelineEvent &e = events[size_t(p)][next[size_t(p)]];
        if (e.kind == PipelineEvent::Send) {
          ++unreceived[{p, e.peer}];
        } else if (e.kind == PipelineEvent::Recv) {
          int64_t &waiting = unreceived[{e.peer, p}];
          if (waiting == 0)
            break;
          --waiting;
        } else if (e.kind == PipelineEvent::Start) {
          startedBy[{p, e.group}] = e.ordinal;
        } else {
          const std::set<int64_t> &members = spans[size_t(p)].at(e.group);
          if (std::any_of(members.begin(), members.end(), [&](int64_t q) {
                return startedBy[{q, e.group}] < e.ordinal;
              }))
            break;
        }
        moved = true;
      }
  }
  return next;
}

/// What pipeline rank p waits for at event `e`.
std::string describeWait(const Plan &plan, int64_t p, const PipelineEvent &e,
                         const std::string &where) {
  const Launch &l =
      plan.programs[size_t(p)].phases[size_t(e.phase)].launches[e.index];
  std::string what =
      e.kind == PipelineEvent::Recv
          ? "receives " +
                plan.programs[size_t(p)].buffers[size_t(l.input)].name +
                " from pipeline rank " + std::to_string(e.peer)
      : l.op == Launch::Op::Wait
          ? "waits for the asynchronous collective over " + e.group
          : "waits for the collective over " + e.group;
  return "pipeline rank " + std::to_string(p) + " at " + where + ", which " +
         what + ", micro-batch " + std::to_string(e.microBatch) + " of step " +
         std::to_string(e.step);
}

} // namespace

std::optional<PlanProblem> findPipelineDeadlock(const Plan &plan) {
  if (plan.pp < 2)
    return std::nullopt;
  int64_t pp = int64_t(plan.programs.size());
  CrossStageGroups spans = crossStageGroups(plan);
  std::vector<std::vector<PipelineEvent>> events;
  for (int64_t p = 0; p < pp; ++p)
    events.push_back(pipelineEvents(plan, p, spans));
  std::vector<size_t> next = advanceAll(events, spans);
  std::string stuck, at;
  for (int64_t p = 0; p < pp; ++p) {
    if (next[size_t(p)] == events[size_t(p)].size())
      continue;
    const PipelineEvent &e = events[size_t(p)][next[size_t(p)]];
    std::string where =
        launchPath("/programs/" + std::to_string(p), e.phase, e.index);
    if (at.empty())
      at = where;
    stuck += (stuck.empty() ? "" : "; ") + describeWait(plan, p, e, where);
  }
  if (stuck.empty())
    return std::nullopt;
  return PlanProblem{at, "the pipeline ranks would wait for each other until "
                         "the collective timeout: " +
                             stuck};
}

} // namespace partita::runtime
