//===- KernelShapes.cpp - A kernel launch's buffers against its kernel ----===//
//
// The kernels index their buffers by the shapes and params of the launch
// (docs/plan-format.md), on the CPU and on the GPU alike. A plan that
// disagrees with itself (edited by hand, or from another tool) would make
// them read or write past a buffer; these rules, checked when the plan is
// loaded, turn that into an error naming the launch.
//
//===----------------------------------------------------------------------===//

#include "KernelShapes.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace partita::runtime {

namespace {

using json = nlohmann::json;

/// The last dimension: a row's length.
int64_t last(const BufferSpec &b) {
  return b.shape.empty() ? 1 : b.shape.back();
}

/// The words for a buffer's kind in messages: one for each kind of value a
/// collective keeps (a parameter's values, whole or in shards, are one).
const char *kindWords(BufferKind kind) {
  switch (kind) {
  case BufferKind::Tokens:
  case BufferKind::Labels:
    return "tokens";
  case BufferKind::Scalar:
    return "a scalar";
  case BufferKind::Activation:
    return "an activation";
  case BufferKind::ActivationGrad:
    return "an activation gradient";
  case BufferKind::ParamGrad:
  case BufferKind::GradShard:
    return "a gradient";
  case BufferKind::OptimizerState:
    return "optimizer state";
  default:
    return "parameter values";
  }
}

/// Whether buffers of kinds `a` and `b` hold the same kind of value, as
/// kindWords groups them (a parameter's values, whole, shard or gathered,
/// are one).
bool sameKindOfValue(BufferKind a, BufferKind b) {
  return std::string(kindWords(a)) == kindWords(b);
}

/// The first non-empty answer of `check(mine, other)` for the members
/// `other` of each list of group `name` that holds a rank `mine` of
/// pipeline rank `ppRank`: how a launch over the group relates the ranks.
template <typename CheckPair>
std::string firstMemberProblem(const Plan &plan, const std::string &name,
                               int64_t ppRank, CheckPair check) {
  for (const std::vector<int64_t> &members : plan.groups.at(name)) {
    auto mine = std::find_if(members.begin(), members.end(), [&](int64_t r) {
      return plan.devices[r].pp == ppRank;
    });
    if (mine == members.end())
      continue;
    for (int64_t other : members) {
      std::string problem = check(*mine, other);
      if (!problem.empty())
        return problem;
    }
  }
  return "";
}

/// "ranks 2 (pp 0, dp 1, tp 0) and 0 (pp 0, dp 0, tp 0)".
std::string rankPairWords(const Plan &plan, int64_t a, int64_t b) {
  auto at = [&](int64_t r) {
    const Coordinates &c = plan.devices[r];
    return std::to_string(r) + " (pp " + std::to_string(c.pp) + ", dp " +
           std::to_string(c.dp) + ", tp " + std::to_string(c.tp) + ")";
  };
  return "ranks " + at(a) + " and " + at(b);
}

/// Where group `name` relates ranks of pipeline rank `ppRank` to ranks of
/// another data-parallel replica or stage, which hold other sequences or
/// layers: a value of a micro-batch means nothing there.
std::string acrossReplicas(const Plan &plan, const std::string &name,
                           int64_t ppRank, const BufferSpec &value) {
  return firstMemberProblem(
      plan, name, ppRank, [&](int64_t mine, int64_t other) -> std::string {
        const Coordinates &a = plan.devices[mine], &b = plan.devices[other];
        if (a.dp == b.dp && a.pp == b.pp)
          return "";
        return "group " + name + " relates " + value.name + " (" +
               kindWords(value.kind) + " of a micro-batch) across " +
               rankPairWords(plan, other, mine) +
               ", which hold other sequences or layers";
      });
}

/// The checks of one launch; the first failure is kept.
class Check {
public:
  Check(const Launch &l, const Program &program) : l(l), program(program) {}

  const BufferSpec &in(size_t k) const { return program.buffers[l.ins[k]]; }
  const BufferSpec &out(size_t k) const { return program.buffers[l.outs[k]]; }
  bool hasIn(size_t k) const { return k < l.ins.size(); }
  bool hasOut(size_t k) const { return k < l.outs.size(); }
  int64_t ppRank() const { return program.ppRank; }

  /// Fails with `what` unless `ok`.
  bool require(bool ok, const std::string &what) {
    if (!ok && error.empty())
      error = what;
    return ok && error.empty();
  }
  /// Buffer b has at least `rank` dimensions.
  bool rank(const BufferSpec &b, size_t atLeast, size_t atMost = 8) {
    return require(b.shape.size() >= atLeast && b.shape.size() <= atMost,
                   b.name + " has " + std::to_string(b.shape.size()) +
                       " dimensions; " + l.kernelName() + " expects " +
                       (atLeast == atMost
                            ? std::to_string(atLeast)
                            : "at least " + std::to_string(atLeast)));
  }
  /// Buffer b holds `n` elements.
  bool elements(const BufferSpec &b, int64_t n) {
    return require(b.elements == n,
                   b.name + " holds " + std::to_string(b.elements) +
                       " elements; " + l.kernelName() + " needs " +
                       std::to_string(n) + " here");
  }
  /// A norm's weight `w` spans the last dimension of `x`, or each of the
  /// equal spans it is cut into (a per-head norm).
  bool normSpan(const BufferSpec &w, const BufferSpec &x) {
    int64_t width = x.shape.back();
    return require(w.elements > 0 && width % w.elements == 0,
                   w.name + " holds " + std::to_string(w.elements) +
                       " elements; " + l.kernelName() +
                       " needs a count that divides the last dimension of " +
                       x.name + " (" + std::to_string(width) + ")");
  }
  /// A positive integer param.
  int64_t positive(const char *key) {
    const json &p = l.params;
    if (!require(p.contains(key) && p[key].is_number_integer() &&
                     p[key].get<int64_t>() > 0,
                 std::string("params.") + key +
                     ": expected a positive integer"))
      return 1;
    return p[key].get<int64_t>();
  }

  /// params.vocab_parts: 1, or the plan's tp, whose ranks hold the slices
  /// of a split vocabulary (a kernel finds its slice by its tp rank).
  int64_t vocabParts(int64_t tp) {
    int64_t parts = positive("vocab_parts");
    require(parts == 1 || parts == tp,
            "params.vocab_parts: expected 1 or the plan's tp (" +
                std::to_string(tp) + "), got " + std::to_string(parts));
    return parts;
  }

  /// A finite number param, above `above` (or at least it, with `orEqual`).
  void number(const char *key, double above, bool orEqual = false) {
    const json &p = l.params;
    bool ok = p.contains(key) && p[key].is_number();
    double v = ok ? p[key].get<double>() : 0;
    // The runtime builds alone, without the compiler's support/ headers.
    std::ostringstream bound;
    bound << above;
    require(ok && std::isfinite(v) && (orEqual ? v >= above : v > above),
            std::string("params.") + key + ": expected a finite number " +
                (orEqual ? "of at least " : "above ") + bound.str());
  }
  /// An optional number param: finite where given.
  void finiteIfGiven(const char *key) {
    const json &p = l.params;
    if (p.contains(key))
      require(p[key].is_number() && std::isfinite(p[key].get<double>()),
              std::string("params.") + key + ": expected a finite number");
  }
  /// A string param, one of `choices`.
  void oneOf(const char *key, std::initializer_list<const char *> choices) {
    const json &p = l.params;
    std::string names;
    bool found = false;
    for (const char *c : choices) {
      names += (names.empty() ? "" : " or ") + std::string(c);
      found |= p.contains(key) && p[key] == c;
    }
    require(found, std::string("params.") + key + ": expected " + names);
  }

  /// params.scale: the mean over the step's tokens.
  void lossScale(const Plan &plan) {
    double tokens = double(plan.globalBatch) * double(plan.seqLen);
    number("scale", 0);
    if (error.empty())
      require(std::abs(l.params["scale"].get<double>() * tokens - 1) < 1e-9,
              "params.scale: expected 1 / (global_batch x seq_len), 1/" +
                  std::to_string(int64_t(tokens)) +
                  ": the loss is the mean over the step's tokens");
  }

  std::string error;

private:
  const Launch &l;
  const Program &program;
};

using plan::Operand;
using plan::operandRole;

/// Whether a buffer of `kind` can be an operand that holds `role`.
bool holds(Operand role, BufferKind kind) {
  using K = BufferKind;
  switch (role) {
  case Operand::MicroBatch:
    return kind == K::Activation || kind == K::ActivationGrad;
  case Operand::Values:
    return kind == K::Activation || kind == K::ActivationGrad ||
           kind == K::Scalar;
  case Operand::Tokens:
    return kind == K::Tokens || kind == K::Labels;
  case Operand::Weight:
    return kind == K::Param || kind == K::ParamGathered;
  case Operand::Held:
    return kind == K::Param || kind == K::ParamShard;
  case Operand::Gradient:
    return kind == K::ParamGrad || kind == K::GradShard;
  case Operand::Scalar:
    return kind == K::Scalar;
  case Operand::OptimizerState:
    return kind == K::OptimizerState;
  }
  return false;
}
/// The role in messages.
const char *roleWords(Operand role) {
  switch (role) {
  case Operand::MicroBatch:
    return "a micro-batch's values";
  case Operand::Values:
    return "a micro-batch's values or a scalar";
  case Operand::Tokens:
    return "tokens";
  case Operand::Weight:
    return "a parameter's values";
  case Operand::Held:
    return "a parameter's values as the rank holds them";
  case Operand::Gradient:
    return "a gradient";
  case Operand::Scalar:
    return "a scalar";
  case Operand::OptimizerState:
    return "optimizer state";
  }
  return "";
}

/// RoPE's frequencies (rotaryInverseFrequencies): a base, and the scaling's
/// fields where a scaling is named (docs/plan-format.md).
void checkRotaryFrequencies(Check &c, const json &p, int64_t rotaryDim) {
  c.number("theta", 0);
  if (!p.contains("scaling"))
    return;
  c.oneOf("scaling", {"linear", "llama3", "yarn", "longrope"});
  if (!c.error.empty())
    return;
  std::string kind = p["scaling"];
  if (kind != "longrope")
    c.number("scaling_factor", 1, /*orEqual=*/true);
  if (kind != "linear")
    c.number("original_max_positions", 0);
  if (kind == "yarn" || kind == "longrope")
    c.number("attention_factor", 0);
  if (kind == "llama3") {
    c.number("low_freq_factor", 0);
    c.number("high_freq_factor", 0);
    if (c.error.empty())
      c.require(p["high_freq_factor"].get<double>() >
                    p["low_freq_factor"].get<double>(),
                "params.high_freq_factor: expected more than low_freq_factor");
  } else if (kind == "yarn") {
    c.number("beta_slow", 0);
    c.number("beta_fast", 0);
    c.require(p.contains("truncate") && p["truncate"].is_boolean(),
              "params.truncate: expected true or false");
    if (c.error.empty())
      c.require(p["theta"].get<double>() != 1,
                "params.theta: yarn needs a base other than 1");
    if (c.error.empty())
      c.require(p["beta_fast"].get<double>() >= p["beta_slow"].get<double>(),
                "params.beta_fast: expected at least beta_slow");
  } else if (kind == "longrope") {
    const char *what = "params.frequency_factors: expected rotary_dim / 2 "
                       "finite numbers above 0";
    if (!c.require(p.contains("frequency_factors") &&
                       p["frequency_factors"].is_array() &&
                       int64_t(p["frequency_factors"].size()) == rotaryDim / 2,
                   what))
      return;
    for (const json &v : p["frequency_factors"])
      if (!c.require(v.is_number() && std::isfinite(v.get<double>()) &&
                         v.get<double>() > 0,
                     what))
        return;
  }
}

/// Each of `ins` and `outs` as large as input 0.
void sameAsIn0(Check &c, std::initializer_list<size_t> ins,
               std::initializer_list<size_t> outs) {
  for (size_t i : ins)
    c.elements(c.in(i), c.in(0).elements);
  for (size_t o : outs)
    c.elements(c.out(o), c.in(0).elements);
}

/// embedding, embedding_bwd: the table's rows for the tokens.
void checkEmbedding(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  const BufferSpec &table = k == Kernel::Embedding ? c.in(0) : c.out(0);
  const BufferSpec &rows = k == Kernel::Embedding ? c.out(0) : c.in(0);
  if (c.rank(table, 2, 2))
    c.elements(rows, c.in(1).elements * table.shape[1]);
  c.vocabParts(plan.tp);
  if (l.params.contains("scale"))
    c.number("scale", 0);
}

/// position_embedding and its backward: a row per position.
void checkPositionEmbedding(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  const BufferSpec &x = c.in(0);
  const BufferSpec &table = k == Kernel::PositionEmbedding ? c.in(1) : c.out(0);
  if (c.rank(x, 3, 3) && c.rank(table, 2, 2))
    c.require(table.shape[1] == x.shape[2] && table.shape[0] >= x.shape[1],
              table.name + " has fewer positions or another width than " +
                  x.name);
  if (k == Kernel::PositionEmbedding)
    c.elements(c.out(0), x.elements);
}

/// shard_slice: a part of its input along params.dim over params.group.
void checkShardSlice(Check &c, const Launch &l, const Plan &plan) {
  const BufferSpec &x = c.in(0);
  int64_t dim = l.params.value("dim", int64_t(-1));
  std::string group = l.params.value("group", std::string());
  auto g = plan.groups.find(group);
  if (c.require(dim >= 0 && dim < int64_t(x.shape.size()),
                "params.dim: not a dimension of " + x.name) &&
      c.require(g != plan.groups.end() && !g->second.empty(),
                "params.group: not a group of the plan")) {
    int64_t parts = int64_t(g->second.front().size());
    std::vector<int64_t> part = x.shape;
    part[dim] /= parts;
    if (c.require(x.shape[dim] % parts == 0,
                  x.name + " (" + x.typeWords() + ") does not split " +
                      std::to_string(parts) + " ways along params.dim") &&
        c.require(c.out(0).shape == part,
                  c.out(0).name + " (" + c.out(0).typeWords() +
                      ") is not a part of " + x.name + " (" + x.typeWords() +
                      ") along params.dim over " + group) &&
        x.perMicroBatch()) {
      std::string problem = acrossReplicas(plan, group, c.ppRank(), x);
      c.require(problem.empty(), "params.group: " + problem);
    }
  }
}

/// rms_norm, layer_norm: the weight spans the rows (or a head of them).
void checkNorm(Check &c, const Launch &l, const Plan &plan) {
  c.number("eps", 0);
  c.finiteIfGiven("weight_offset");
  const BufferSpec &x = c.in(0), &w = c.in(1);
  if (c.rank(x, 1) && c.normSpan(w, x)) {
    for (size_t i = 2; i < l.ins.size(); ++i)
      c.elements(c.in(i), w.elements);
    c.elements(c.out(0), x.elements);
  }
}

/// rms_norm_bwd, layer_norm_bwd.
void checkNormBackward(Check &c, const Launch &l, const Plan &plan) {
  c.number("eps", 0);
  c.finiteIfGiven("weight_offset");
  const BufferSpec &x = c.in(1), &w = c.in(2);
  if (c.rank(x, 1) && c.normSpan(w, x)) {
    c.elements(c.in(0), x.elements);
    c.elements(c.out(0), x.elements);
    for (size_t o = 1; o < l.outs.size(); ++o)
      c.elements(c.out(o), w.elements);
  }
}

/// linear, linear_bwd: the weight's columns against the input's rows.
void checkLinear(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  bool forward = k == Kernel::Linear;
  const BufferSpec &x = c.in(forward ? 0 : 1), &w = c.in(forward ? 1 : 2);
  if (c.rank(x, 1) && c.rank(w, 2, 2) &&
      c.require(w.shape[1] == last(x),
                w.name + "'s columns (" + std::to_string(w.shape[1]) +
                    ") differ from " + x.name + "'s last dimension (" +
                    std::to_string(last(x)) + ")")) {
    int64_t rows = last(x) > 0 ? x.elements / last(x) : 0, n = w.shape[0];
    if (forward) {
      if (c.hasIn(2))
        c.elements(c.in(2), n);
      c.elements(c.out(0), rows * n);
    } else {
      c.elements(c.in(0), rows * n);
      c.elements(c.out(0), x.elements);
      c.elements(c.out(1), w.elements);
      if (c.hasOut(2))
        c.elements(c.out(2), n);
    }
  }
}

/// bias_add.
void checkBiasAdd(Check &c, const Launch &l, const Plan &plan) {
  if (c.rank(c.in(0), 1)) {
    c.elements(c.in(1), last(c.in(0)));
    c.elements(c.out(0), c.in(0).elements);
  }
}

/// bias_add_bwd.
void checkBiasAddBackward(Check &c, const Launch &l, const Plan &plan) {
  if (c.rank(c.in(0), 1)) {
    c.elements(c.out(0), c.in(0).elements);
    c.elements(c.out(1), last(c.in(0)));
  }
}

/// rotary, rotary_bwd: heads and the rotated dimension, and RoPE's frequencies.
void checkRotary(Check &c, const Launch &l, const Plan &plan) {
  const BufferSpec &x = c.in(0);
  int64_t heads = c.positive("num_heads"), rotary = c.positive("rotary_dim");
  if (c.rank(x, 3, 3) &&
      c.require(x.shape[2] % heads == 0,
                x.name + "'s width does not split into params.num_heads"))
    c.require(rotary % 2 == 0 && rotary <= x.shape[2] / heads,
              "params.rotary_dim: expected an even number up to the head "
              "dimension");
  c.elements(c.out(0), x.elements);
  checkRotaryFrequencies(c, l.params, rotary);
}

/// attention, attention_bwd: heads against q, k and v, and the log-sum-exp.
void checkAttention(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  size_t q = k == Kernel::Attention ? 0 : 1;
  int64_t heads = c.positive("num_heads"), kv = c.positive("num_kv_heads");
  c.require(!l.params.contains("causal") || l.params["causal"].is_boolean(),
            "params.causal: expected true or false");
  c.require(!l.params.contains("window") ||
                (l.params["window"].is_number_integer() &&
                 l.params["window"].get<int64_t>() >= 0),
            "params.window: expected a token count (0: no window)");
  const BufferSpec &qb = c.in(q), &kb = c.in(q + 1), &vb = c.in(q + 2);
  if (c.rank(qb, 3, 3) && c.rank(kb, 3, 3) && c.rank(vb, 3, 3) &&
      c.require(heads % kv == 0 && qb.shape[2] % heads == 0,
                "params.num_heads: expected a multiple of num_kv_heads "
                "that splits " +
                    qb.name + "'s width")) {
    int64_t d = qb.shape[2] / heads;
    std::vector<int64_t> keys = {qb.shape[0], qb.shape[1], kv * d};
    c.require(kb.shape == keys && vb.shape == kb.shape,
              kb.name + " and " + vb.name +
                  " must be [batch, seq, num_kv_heads x head dimension] "
                  "like " +
                  qb.name);
    if (k == Kernel::Attention) {
      c.elements(c.out(0), qb.elements);
    } else {
      c.elements(c.in(0), qb.elements);
      c.elements(c.in(4), qb.elements);
      c.elements(c.out(0), qb.elements);
      c.elements(c.out(1), kb.elements);
      c.elements(c.out(2), vb.elements);
    }
    // The log-sum-exp per query row and head, kept f32.
    bool forward = k == Kernel::Attention;
    if (forward ? c.hasOut(1) : c.hasIn(5)) {
      const BufferSpec &lse = forward ? c.out(1) : c.in(5);
      if (c.require(!lse.isBf16, lse.name + " must be f32: " + l.kernelName() +
                                     " keeps each row's log-sum-exp in it"))
        c.elements(lse, qb.shape[0] * qb.shape[1] * heads);
    }
  }
}

/// gelu, silu, copy: one input's shape.
void checkActivation(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  sameAsIn0(c, {}, {0});
  if (k == Kernel::Gelu)
    c.oneOf("approximate", {"none", "tanh"});
}

/// gelu_bwd, silu_bwd, swiglu, geglu: two inputs alike.
void checkGatedOrBackward(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  sameAsIn0(c, {1}, {0});
  if (k == Kernel::GeluBwd || k == Kernel::Geglu)
    c.oneOf("approximate", {"none", "tanh"});
}

/// swiglu_bwd, geglu_bwd.
void checkGatedBackward(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  sameAsIn0(c, {1, 2}, {0, 1});
  if (k == Kernel::GegluBwd)
    c.oneOf("approximate", {"none", "tanh"});
}

/// add: every input like the output.
void checkAdd(Check &c, const Launch &l, const Plan &plan) {
  for (size_t i = 0; i < l.ins.size(); ++i)
    c.elements(c.in(i), c.out(0).elements);
}

/// ce_max, ce_stats, ce_bwd: the vocabulary slice of each row of logits.
void checkCrossEntropy(Check &c, const Launch &l, const Plan &plan) {
  Kernel k = l.kernel;
  const BufferSpec &logits = c.in(0);
  int64_t vocab = c.positive("vocab_size"), parts = c.vocabParts(plan.tp);
  int64_t slice = vocab / parts + (vocab % parts != 0);
  if (c.rank(logits, 1) &&
      c.require(last(logits) == slice,
                logits.name + " has rows of " + std::to_string(last(logits)) +
                    " logits; " + std::to_string(vocab) + " tokens in " +
                    std::to_string(parts) + " parts need " +
                    std::to_string(slice))) {
    int64_t rows = last(logits) > 0 ? logits.elements / last(logits) : 0;
    if (k == Kernel::CeMax)
      c.elements(c.out(0), rows);
    if (k != Kernel::CeMax) {
      c.elements(c.in(1), rows);
      c.elements(c.in(k == Kernel::CeStats ? 2 : 3), rows);
    }
    if (k == Kernel::CeStats)
      c.elements(c.out(0), 2 * rows);
    if (k == Kernel::CeBwd) {
      c.elements(c.in(2), 2 * rows);
      c.elements(c.out(0), logits.elements);
    }
  }
  if (k == Kernel::CeBwd)
    c.lossScale(plan);
}

/// ce_loss.
void checkLoss(Check &c, const Launch &l, const Plan &plan) {
  c.lossScale(plan);
  c.elements(c.in(1), 2 * c.in(0).elements);
  c.require(c.out(0).elements >= 1, c.out(0).name + " is empty");
}

/// grad_sumsq: a weight per input.
void checkGradSumsq(Check &c, const Launch &l, const Plan &plan) {
  const json &weights = l.params.value("weights", json());
  c.require(weights.is_array() && weights.size() == l.ins.size() &&
                std::all_of(weights.begin(), weights.end(),
                            [](const json &w) { return w.is_number(); }),
            "params.weights: expected a number per input");
  c.require(c.out(0).elements >= 1, c.out(0).name + " is empty");
}

/// clip_coefficient.
void checkClipCoefficient(Check &c, const Launch &l, const Plan &plan) {
  c.require(c.in(0).elements >= 1 && c.out(0).elements >= 1, "an empty buffer");
}

/// adamw: the moments (and master weights) in place, sharded as params.dp_shard
/// says.
void checkAdamW(Check &c, const Launch &l, const Plan &plan) {
  const BufferSpec &p = c.in(0), &m = c.in(2);
  for (const char *flag : {"dp_shard", "weight_decay"})
    c.require(l.params.contains(flag) && l.params[flag].is_boolean(),
              std::string("params.") + flag + ": expected true or false");
  bool shard = c.error.empty() && l.params["dp_shard"].get<bool>();
  c.require(m.elements ==
                (shard ? (p.elements + plan.dp - 1) / plan.dp : p.elements),
            m.name + " (" + std::to_string(m.elements) + " elements) is not " +
                (shard ? "the data-parallel slice of " : "as large as ") +
                p.name + " (" + std::to_string(p.elements) +
                " elements) that params.dp_shard says it is");
  // In place, the moments (and master weights) by their names.
  for (size_t k : {size_t(2), size_t(3), size_t(5)}) {
    if (!c.hasIn(k))
      continue;
    const char *prefix = kOptimizerStatePrefixes[k == 5 ? 2 : k - 2];
    c.require(c.in(k).name.rfind(prefix, 0) == 0,
              "input " + std::to_string(k) + " is " + c.in(k).name +
                  "; adamw reads the " + prefix + " buffer there");
  }
  const size_t updated[] = {0, 2, 3, 5};
  for (size_t o = 0; o < l.outs.size(); ++o)
    c.require(c.hasIn(updated[o]) && l.outs[o] == l.ins[updated[o]],
              "output " + std::to_string(o) + " is " + c.out(o).name +
                  "; adamw updates its input " + std::to_string(updated[o]) +
                  " in place");
  c.elements(c.in(1), m.elements);
  c.elements(c.in(3), m.elements);
  c.require(c.in(4).elements >= 1, c.in(4).name + " is empty");
  c.require(c.hasIn(5) == c.hasOut(3),
            "a master copy needs both its input and its output");
  if (c.hasIn(5)) {
    c.elements(c.in(5), m.elements);
    c.elements(c.out(3), m.elements);
  }
  c.elements(c.out(0), p.elements);
  c.elements(c.out(1), m.elements);
  c.elements(c.out(2), m.elements);
}

void checkShapes(Check &c, const Launch &l, const Plan &plan) {
  switch (l.kernel) {
  case Kernel::Embedding:
  case Kernel::EmbeddingBwd:
    return checkEmbedding(c, l, plan);
  case Kernel::PositionEmbedding:
  case Kernel::PositionEmbeddingBwd:
    return checkPositionEmbedding(c, l, plan);
  case Kernel::ShardSlice:
    return checkShardSlice(c, l, plan);
  case Kernel::RmsNorm:
  case Kernel::LayerNorm:
    return checkNorm(c, l, plan);
  case Kernel::RmsNormBwd:
  case Kernel::LayerNormBwd:
    return checkNormBackward(c, l, plan);
  case Kernel::Linear:
  case Kernel::LinearBwd:
    return checkLinear(c, l, plan);
  case Kernel::BiasAdd:
    return checkBiasAdd(c, l, plan);
  case Kernel::BiasAddBwd:
    return checkBiasAddBackward(c, l, plan);
  case Kernel::Rotary:
  case Kernel::RotaryBwd:
    return checkRotary(c, l, plan);
  case Kernel::Attention:
  case Kernel::AttentionBwd:
    return checkAttention(c, l, plan);
  case Kernel::Gelu:
  case Kernel::Silu:
  case Kernel::Copy:
    return checkActivation(c, l, plan);
  case Kernel::GeluBwd:
  case Kernel::SiluBwd:
  case Kernel::Swiglu:
  case Kernel::Geglu:
    return checkGatedOrBackward(c, l, plan);
  case Kernel::SwigluBwd:
  case Kernel::GegluBwd:
    return checkGatedBackward(c, l, plan);
  case Kernel::Add:
    return checkAdd(c, l, plan);
  case Kernel::CeMax:
  case Kernel::CeStats:
  case Kernel::CeBwd:
    return checkCrossEntropy(c, l, plan);
  case Kernel::CeLoss:
    return checkLoss(c, l, plan);
  case Kernel::GradSumsq:
    return checkGradSumsq(c, l, plan);
  case Kernel::ClipCoefficient:
    return checkClipCoefficient(c, l, plan);
  case Kernel::AdamW:
    return checkAdamW(c, l, plan);
  }
}

/// Why the ranks collective `l` combines cannot be combined by it, for
/// what its buffers hold, or empty. Values of a micro-batch differ between
/// data-parallel replicas and pipeline stages; a parameter's buffers exist
/// only on the pipeline ranks that hold it, and differ between its
/// tensor-parallel parts; its flat ZeRO shards are cut over the
/// data-parallel ranks alone. (Plans of other tools may leave `param` out:
/// then only the kinds are checked.)
std::string collectiveMembersError(const Launch &l, const Program &program,
                                   const Plan &plan) {
  const BufferSpec &in = program.buffers[l.input];
  const BufferSpec &out = program.buffers[l.output];
  std::string what = l.collectiveName();
  if (!in.param.empty() && !out.param.empty() && in.param != out.param)
    return what + ": " + in.name + " is of parameter " + in.param + " and " +
           out.name + " of parameter " + out.param;
  if (!sameKindOfValue(in.kind, out.kind))
    return what + ": " + out.name + " (" + kindWords(out.kind) +
           ") is made of " + in.name + " (" + kindWords(in.kind) + ")";
  if (in.perMicroBatch() || out.perMicroBatch()) {
    std::string problem = acrossReplicas(plan, l.group, program.ppRank,
                                         in.perMicroBatch() ? in : out);
    return problem.empty() ? "" : what + ": " + problem;
  }
  if (!in.ofParameter() && !out.ofParameter())
    return "";
  const BufferSpec &b = in.ofParameter() ? in : out;
  const ParameterSpec *p =
      plan.findParameter(in.param.empty() ? out.param : in.param);
  bool flat = l.collective != Launch::Collective::AllReduce && !l.dim;
  bool shard = in.dpShard || out.dpShard || in.kind == BufferKind::GradShard ||
               out.kind == BufferKind::GradShard ||
               in.kind == BufferKind::ParamShard ||
               out.kind == BufferKind::ParamShard;
  std::string over = what + " over " + l.group + " combines " + b.name + " (" +
                     kindWords(b.kind) +
                     (p ? " of " + p->name : std::string()) + ")";
  return firstMemberProblem(
      plan, l.group, program.ppRank,
      [&](int64_t mine, int64_t other) -> std::string {
        const Coordinates &a = plan.devices[mine], &o = plan.devices[other];
        std::string pair = rankPairWords(plan, other, mine);
        if (p) {
          if (std::none_of(
                  p->holders.begin(), p->holders.end(),
                  [&](const ParameterHolder &h) { return h.ppRank == o.pp; }))
            return over + " with pipeline rank " + std::to_string(o.pp) +
                   ", which does not hold it";
          if (p->tpDim >= 0 &&
              o.tp * p->tpParts / plan.tp != a.tp * p->tpParts / plan.tp)
            return over + " across " + pair +
                   ", which hold different tensor-parallel parts of it";
        }
        if (flat && (o.tp != a.tp || o.pp != a.pp))
          return over + " in flat shards across " + pair +
                 "; flat shards are cut over data-parallel ranks alone";
        if (!flat && shard && o.dp != a.dp)
          return over + " across " + pair +
                 ", which hold other data-parallel shards of it";
        return "";
      });
}

} // namespace

std::string kernelLaunchError(const Launch &l, const Program &program,
                              const Plan &plan) {
  Check c(l, program);
  for (size_t k = 0; k < l.ins.size(); ++k) {
    const BufferSpec &b = program.buffers[l.ins[k]];
    bool wantInt = operandRole(l.kernel, false, k) == Operand::Tokens;
    c.require(b.isInt == wantInt,
              b.name + (wantInt ? " must hold tokens (i32)"
                                : " holds tokens; " + l.kernelName() +
                                      " reads values here"));
  }
  for (int o : l.outs)
    c.require(!program.buffers[o].isInt,
              program.buffers[o].name + " holds tokens; kernels write values");
  for (size_t n = 0; n < l.ins.size() + l.outs.size() && c.error.empty(); ++n) {
    bool output = n >= l.ins.size();
    size_t i = output ? n - l.ins.size() : n;
    const BufferSpec &b = program.buffers[output ? l.outs[i] : l.ins[i]];
    Operand role = operandRole(l.kernel, output, i);
    if (output && l.accumulate[i] && role != Operand::Gradient &&
        b.kind != BufferKind::ActivationGrad && l.kernel != Kernel::CeLoss)
      c.require(false, l.kernelName() + " accumulates into " + b.name + " (" +
                           kindWords(b.kind) +
                           "); only gradients and the loss sum over launches");
    else if (!holds(role, b.kind))
      c.require(false, l.kernelName() + "'s " +
                           (output ? "output " : "input ") + std::to_string(i) +
                           " is " + b.name + " (" + kindWords(b.kind) + "); " +
                           l.kernelName() + (output ? " writes " : " reads ") +
                           roleWords(role) + " there");
  }
  // GEMMs and attention read their inputs after writing parts of their
  // outputs, so an output must not be one of the inputs.
  if (l.kernel == Kernel::Linear || l.kernel == Kernel::LinearBwd ||
      l.kernel == Kernel::Attention || l.kernel == Kernel::AttentionBwd)
    for (int o : l.outs)
      c.require(std::find(l.ins.begin(), l.ins.end(), o) == l.ins.end(),
                program.buffers[o].name + " is both an input and an output");
  if (c.error.empty())
    checkShapes(c, l, plan);
  return c.error;
}

std::string collectiveLaunchError(const Launch &l, const Program &program,
                                  const Plan &plan) {
  const BufferSpec &in = program.buffers[l.input];
  const BufferSpec &out = program.buffers[l.output];
  if (in.isInt || out.isInt)
    return "a collective over a tokens buffer";
  std::string what = l.collectiveName();
  // Only gradients (of parameters or activations) are summed into; only
  // the logits' row maxima (ce_max) are reduced by max; in place, only
  // all_reduce, and all_gather of a parameter each data-parallel rank
  // updated a slice of (ZeRO-1, 2).
  if (l.accumulateOutput && out.kind != BufferKind::ParamGrad &&
      out.kind != BufferKind::GradShard &&
      out.kind != BufferKind::ActivationGrad)
    return what + " accumulates into " + out.name + " (" + kindWords(out.kind) +
           "); collectives add into gradients only";
  if (l.reduceMax &&
      std::none_of(program.phases.begin(), program.phases.end(),
                   [&](const Phase &phase) {
                     return std::any_of(phase.launches.begin(),
                                        phase.launches.end(),
                                        [&](const Launch &k) {
                                          return k.op == Launch::Op::Kernel &&
                                                 k.kernel == Kernel::CeMax &&
                                                 k.outs[0] == l.input;
                                        });
                   }))
    return what + " by max of " + out.name +
           ", which no ce_max writes: only the logits' row maxima are "
           "reduced by max";
  if (l.input == l.output && l.collective != Launch::Collective::AllReduce &&
      (l.collective == Launch::Collective::ReduceScatter || l.dim ||
       in.kind != BufferKind::Param))
    return what + " in place of " + in.name + " (" + kindWords(in.kind) +
           "): only a flat all_gather of a parameter's values (ZeRO-1, 2) "
           "is in place";
  if (l.collective == Launch::Collective::AllReduce &&
      sameKindOfValue(in.kind, BufferKind::Param))
    return what + " of " + in.name +
           " (parameter values): parameters are gathered, not summed";
  if (l.collective == Launch::Collective::AllReduce)
    return collectiveMembersError(l, program, plan);
  bool gather = l.collective == Launch::Collective::AllGather;
  int64_t g = int64_t(plan.groups.at(l.group).front().size());
  const BufferSpec &whole = gather ? out : in, &part = gather ? in : out;
  if (!l.dim) {
    // Flat: shards of ceil(whole / g); the executor clamps to the buffers.
    int64_t shard = (whole.elements + g - 1) / g;
    if (l.input != l.output && part.elements > shard)
      return what + ": " + part.name + " holds " +
             std::to_string(part.elements) + " elements, more than a shard (" +
             std::to_string(shard) + ") of " + whole.name + " over " + l.group;
    if (l.input != l.output && part.shape.size() != 1)
      return what + ": without dim, " + part.name +
             " is a flat shard and has one dimension, not " +
             std::to_string(part.shape.size());
    return collectiveMembersError(l, program, plan);
  }
  if (*l.dim < 0 || *l.dim >= int64_t(whole.shape.size()))
    return what + ": dim " + std::to_string(*l.dim) +
           " is not a dimension of " + whole.name;
  std::vector<int64_t> expected = whole.shape;
  if (expected[*l.dim] % g == 0)
    expected[*l.dim] /= g;
  if (whole.shape[*l.dim] % g != 0 || part.shape != expected)
    return what + ": " + whole.name + " (" + whole.typeWords() + ") is not " +
           std::to_string(g) + " blocks of " + part.name + " (" +
           part.typeWords() + ") along dim " + std::to_string(*l.dim) +
           " (the size of group " + l.group + ")";
  return collectiveMembersError(l, program, plan);
}

namespace {

/// The registry's entry of `kernel` if it is a backward kernel, which a
/// forward launch of the program must have preceded.
const plan::KernelInfo *asBackward(Kernel kernel) {
  const plan::KernelInfo &k = plan::info(kernel);
  return k.forward ? &k : nullptr;
}

/// The saved operands of backward kernel `k`.
std::vector<SavedOperand> savedOperands(const plan::KernelInfo &k) {
  return {k.saved.begin(), k.saved.begin() + k.savedCount};
}

} // namespace

ForwardLaunches::ForwardLaunches(const Program &program) : program(program) {
  for (size_t j = 0; j < program.phases.size(); ++j)
    for (size_t i = 0; i < program.phases[j].launches.size(); ++i) {
      const Launch &l = program.phases[j].launches[i];
      // (A gather over one rank is a copy, which may go either way.)
      if (l.op == Launch::Op::Collective &&
          l.collective == Launch::Collective::AllGather &&
          program.buffers[l.input].perMicroBatch() &&
          program.buffers[l.output].elements >
              program.buffers[l.input].elements) {
        auto [it, first] = gatheredFrom.try_emplace(l.output, l.input);
        if (!first && it->second != l.input)
          it->second = -1;
      }
      if (l.op == Launch::Op::Kernel && plan::info(l.kernel).backward)
        forwards[l.kernel].push_back({&l, {j, i}});
    }
}

std::string ForwardLaunches::identity(int buffer) const {
  auto gathered = gatheredFrom.find(buffer);
  if (gathered != gatheredFrom.end() && gathered->second >= 0)
    return "the gathered " + identity(gathered->second);
  const BufferSpec &b = program.buffers[buffer];
  bool values = b.kind == BufferKind::Param ||
                b.kind == BufferKind::ParamShard ||
                b.kind == BufferKind::ParamGathered;
  if (values && !b.param.empty())
    return "parameter " + b.param + "'s values";
  return b.name;
}

std::string ForwardLaunches::unpairedError(const Launch &l) const {
  return pairWith(l, nullptr);
}

std::vector<ForwardLaunches::Place>
ForwardLaunches::pairedForwards(const Launch &l) const {
  std::vector<Place> paired;
  pairWith(l, &paired);
  return paired;
}

std::vector<SavedOperand> ForwardLaunches::savedInputs(const Launch &l) const {
  std::vector<SavedOperand> saved;
  if (const plan::KernelInfo *k = asBackward(l.kernel))
    for (const SavedOperand &s : savedOperands(*k))
      if (s.backwardIn < l.ins.size())
        saved.push_back(s);
  return saved;
}

std::string ForwardLaunches::pairWith(const Launch &l,
                                      std::vector<Place> *paired) const {
  const plan::KernelInfo *k = asBackward(l.kernel);
  if (!k)
    return "";
  std::vector<SavedOperand> saved = savedOperands(*k);
  // What the backward reads as its forward's, the saved operands it has.
  std::vector<std::string> mine(saved.size());
  for (size_t i = 0; i < saved.size(); ++i)
    if (saved[i].backwardIn < l.ins.size())
      mine[i] = identity(l.ins[saved[i].backwardIn]);
  // How many saved operands and params differ between `l` and forward `f`,
  // and the first of them in words.
  struct Difference {
    size_t count = 0;
    std::string first;
    void add(std::string words) {
      if (count++ == 0)
        first = std::move(words);
    }
  };
  auto difference = [&](const Launch &f) {
    Difference d;
    for (size_t i = 0; i < saved.size(); ++i) {
      const SavedOperand &s = saved[i];
      if (s.backwardIn >= l.ins.size())
        continue; // an optional operand the backward does without
      const std::vector<int> &operands = s.ofOutput ? f.outs : f.ins;
      std::string theirs = s.forwardOperand < operands.size()
                               ? identity(operands[s.forwardOperand])
                               : "nothing";
      if (mine[i] != theirs)
        d.add("its input " + std::to_string(s.backwardIn) + " is " + mine[i] +
              ", where that launch's " + (s.ofOutput ? "output " : "input ") +
              std::to_string(s.forwardOperand) + " is " + theirs);
    }
    // The params both take, given by both or by neither: a kernel's
    // default (no window, not causal) is no match for a value given.
    auto given = [](const json &params, const std::string &key) {
      return params.contains(key) ? params[key].dump() : std::string("none");
    };
    std::set<std::string> keys;
    for (const auto &[key, value] : f.params.items())
      keys.insert(key);
    for (const auto &[key, value] : l.params.items())
      if (key != k->ownParam)
        keys.insert(key);
    for (const std::string &key : keys)
      if (given(l.params, key) != given(f.params, key))
        d.add("its params." + key + " is " + given(l.params, key) +
              ", where that launch's is " + given(f.params, key));
    return d;
  };
  // A match, or the nearest forward: the one with the fewest differences.
  std::string nearest;
  size_t fewest = ~size_t(0);
  auto found = forwards.find(*k->forward);
  if (found != forwards.end())
    for (const Forward &forward : found->second) {
      Difference d = difference(*forward.launch);
      if (d.count == 0 && !paired)
        return "";
      if (d.count == 0) {
        paired->push_back(forward.place);
        continue;
      }
      if (d.count < fewest) {
        fewest = d.count;
        nearest = "/programs/" + std::to_string(program.ppRank) + "/phases/" +
                  std::to_string(forward.place.phase) + "/launches/" +
                  std::to_string(forward.place.index) + ": " + d.first;
      }
    }
  if (paired && !paired->empty())
    return "";
  std::string reads;
  for (const std::string &operand : mine)
    if (!operand.empty())
      reads += (reads.empty() ? "" : ", ") + operand;
  return "no " + std::string(plan::name(*k->forward)) +
         " of this program has the operands it takes from its forward (" +
         reads + ") and its params" +
         (nearest.empty() ? std::string() : "; the nearest is " + nearest) +
         ": a backward differentiates a forward that ran";
}

} // namespace partita::runtime
