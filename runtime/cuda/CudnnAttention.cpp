//===- CudnnAttention.cpp - attention on cuDNN's fused engines ------------===//
//
// Builds cuDNN operation graphs with the backend API: descriptors of
// tensors (real ones by unique id, virtual intermediates in f32) and of
// operations, finalized into a graph that cuDNN's fused-attention engines
// recognise as a whole. Without cuDNN (PARTITA_HAVE_CUDNN unset, as in the
// CPU emulator) every entry point says so.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"

#include <stdexcept>

#ifdef PARTITA_HAVE_CUDNN

#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace partita::runtime::cuda {
namespace {

std::string lastError() {
  char message[2048] = "";
  cudnnGetLastErrorString(message, sizeof message);
  return message;
}

void check(cudnnStatus_t status, const std::string &what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    std::string detail = lastError();
    throw std::runtime_error("cuDNN attention: " + what + ": " +
                             cudnnGetErrorString(status) +
                             (detail.empty() ? "" : " (" + detail + ")"));
  }
}

/// An owned backend descriptor.
class Descriptor {
public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d), "creating a descriptor");
  }
  ~Descriptor() {
    if (d)
      cudnnBackendDestroyDescriptor(d);
  }
  Descriptor(Descriptor &&o) noexcept : d(o.d) { o.d = nullptr; }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  Descriptor &operator=(Descriptor &&) = delete;

  cudnnBackendDescriptor_t get() const { return d; }
  Descriptor &set(cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, int64_t count,
                  const void *values) {
    check(cudnnBackendSetAttribute(d, name, type, count, values),
          "setting attribute " + std::to_string(int(name)));
    return *this;
  }
  Descriptor &setInt(cudnnBackendAttributeName_t name, int64_t value) {
    return set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  Descriptor &setInts(cudnnBackendAttributeName_t name,
                      const std::vector<int64_t> &values) {
    return set(name, CUDNN_TYPE_INT64, int64_t(values.size()), values.data());
  }
  Descriptor &setType(cudnnBackendAttributeName_t name, cudnnDataType_t type) {
    return set(name, CUDNN_TYPE_DATA_TYPE, 1, &type);
  }
  Descriptor &setDescriptor(cudnnBackendAttributeName_t name,
                            const Descriptor &value) {
    cudnnBackendDescriptor_t v = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  Descriptor &finalize(const std::string &what) {
    check(cudnnBackendFinalize(d), "finalizing " + what);
    return *this;
  }
  /// Finalizes, returning cuDNN's status instead of throwing.
  cudnnStatus_t tryFinalize() { return cudnnBackendFinalize(d); }

private:
  cudnnBackendDescriptor_t d = nullptr;
};

/// The unique ids of the graphs' real tensors, which the variant pack
/// binds (virtual ones count up from kFirstVirtual).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegativeInfinity,
  kOne,
  kWindow,
  kDo,
  kDq,
  kDk,
  kDv,
  /// The backward's f32 buffers: each row's dO . O, and dq's sums.
  kRowDot,
  kDqSums,
  kFirstVirtual = 100
};

using Dims = std::vector<int64_t>;

/// An operation graph under construction: its tensors and operations,
/// owned until the graph is finalized (cuDNN keeps what it needs).
class Graph {
public:
  /// A tensor of `dims` and `strides`: real (given by `uid`) or, with uid
  /// 0, a virtual intermediate in f32.
  const Descriptor &tensor(int64_t uid, const Dims &dims, const Dims &strides,
                           cudnnDataType_t type = CUDNN_DATA_FLOAT,
                           bool byValue = false) {
    bool isVirtual = uid == 0;
    if (isVirtual)
      uid = nextVirtual++;
    Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.setType(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
        .setInts(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .setInts(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .setInt(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .setInt(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
    if (byValue)
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue);
    t.finalize("tensor " + std::to_string(uid));
    return keep(std::move(t));
  }
  /// A virtual tensor packed in the order of `dims`.
  const Descriptor &intermediate(const Dims &dims,
                                 cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(0, dims, packed(dims), type);
  }
  /// A scalar passed by value (a host pointer in the variant pack), one
  /// tensor however often it is asked for.
  const Descriptor &scalar(int64_t uid,
                           cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    auto found = scalars.find(uid);
    if (found != scalars.end()) {
      if (found->second.second != type)
        throw std::logic_error("cuDNN attention: scalar " +
                               std::to_string(uid) + " of two types");
      return *found->second.first;
    }
    const Descriptor &t = tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, type, true);
    scalars[uid] = {&t, type};
    return t;
  }
  static Dims packed(const Dims &dims) {
    Dims strides(dims.size(), 1);
    for (int i = int(dims.size()) - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * dims[i + 1];
    return strides;
  }

  /// c = a b over the last two dimensions (f32 accumulation).
  void matmul(const Descriptor &a, const Descriptor &b, const Descriptor &c) {
    Descriptor m(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    double padding = 0;
    m.setType(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT)
        .set(CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &padding)
        .finalize("matmul");
    Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.setDescriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .setDescriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .setDescriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .setDescriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, m)
        .finalize("the matmul operation");
    keep(std::move(m));
    operation(std::move(op));
  }
  /// y = mode(x[, b][, t]) elementwise, broadcasting size-1 dimensions,
  /// computed in `precision`; `axis` is GEN_INDEX's.
  void pointwise(cudnnPointwiseMode_t mode, const Descriptor &x,
                 const Descriptor *b, const Descriptor &y,
                 const Descriptor *t = nullptr, int64_t axis = -1,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT) {
    Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .setType(CUDNN_ATTR_POINTWISE_MATH_PREC, precision);
    if (axis >= 0)
      pw.setInt(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize("pointwise mode " + std::to_string(int(mode)));
    float one = 1.0f;
    Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.setDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .setDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .setDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    if (b)
      op.setDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t)
      op.setDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.finalize("the pointwise operation " + std::to_string(int(mode)));
    keep(std::move(pw));
    operation(std::move(op));
  }
  /// mode(x[, b]) in a new virtual tensor of `dims`.
  const Descriptor &apply(cudnnPointwiseMode_t mode, const Descriptor &x,
                          const Descriptor *b, const Dims &dims,
                          cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    const Descriptor &y = intermediate(dims, type);
    pointwise(mode, x, b, y);
    return y;
  }
  /// y = x seen through y's dims and strides (a transpose, where they
  /// swap).
  void reshape(const Descriptor &x, const Descriptor &y) {
    Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.setDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
        .setDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y)
        .finalize("the reshape operation");
    operation(std::move(op));
  }
  /// y = the `mode` reduction of x: over the dimensions where y has size
  /// 1, and over groups of consecutive indices where y's size divides x's.
  void reduction(cudnnReduceTensorOp_t mode, const Descriptor &x,
                 const Descriptor &y) {
    Descriptor r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
          &mode)
        .setType(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
    bool deterministic = false;
    r.set(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1,
          &deterministic);
    r.finalize("reduction");
    Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.setDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .setDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .setDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .finalize("the reduction operation");
    keep(std::move(r));
    operation(std::move(op));
  }

  /// The finalized operation graph (`handle` null where none is at hand:
  /// a GPU-less build of plans for a described device).
  Descriptor finalize(cudnnHandle_t handle) {
    Descriptor g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (handle)
      g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    g.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
          int64_t(ops.size()), ops.data());
    g.finalize("the attention graph");
    return g;
  }

private:
  const Descriptor &keep(Descriptor d) {
    owned.push_back(std::make_unique<Descriptor>(std::move(d)));
    return *owned.back();
  }
  void operation(Descriptor op) { ops.push_back(keep(std::move(op)).get()); }

  std::vector<std::unique_ptr<Descriptor>> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
  std::map<int64_t, std::pair<const Descriptor *, cudnnDataType_t>> scalars;
  int64_t nextVirtual = kFirstVirtual;
};

/// What plans are built for: a GPU (its handle) or, without one, a GPU
/// that cuDNN's device properties describe.
struct Target {
  cudnnHandle_t handle = nullptr;
  const Descriptor *deviceProperties = nullptr;
};

/// The engine configurations cuDNN's heuristics propose for `graph`, best
/// first.
std::vector<std::unique_ptr<Descriptor>> proposals(const Descriptor &graph,
                                                   const Target &target) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.setDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (target.deviceProperties)
    heuristics.setDescriptor(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
                             *target.deviceProperties);
  heuristics.finalize("cuDNN's heuristics");
  int64_t count = 0;
  check(cudnnBackendGetAttribute(
            heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "counting the heuristics' engine configurations");
  std::vector<std::unique_ptr<Descriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(
        std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t given = 0;
  check(cudnnBackendGetAttribute(
            heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &given, raw.data()),
        "reading the heuristics' engine configurations");
  configs.resize(size_t(given));
  return configs;
}

/// An execution plan of `config` in `plan`; cuDNN's status where it makes
/// none.
cudnnStatus_t makePlan(const Descriptor &config, const Target &target,
                       std::unique_ptr<Descriptor> &plan) {
  plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  if (target.handle)
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
              &target.handle);
  if (target.deviceProperties)
    plan->setDescriptor(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                        *target.deviceProperties);
  plan->setDescriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  return plan->tryFinalize();
}

/// Rows of our [b, s, heads * d] layout as cuDNN's [b, heads, s, d].
Dims rowDims(const AttentionShape &a, int64_t heads) {
  return {a.b, heads, a.s, a.d};
}
Dims rowStrides(const AttentionShape &a, int64_t heads) {
  return {a.s * heads * a.d, a.d, heads * a.d, 1};
}
/// The same memory as [b, heads, d, s]: the transpose a product takes.
Dims transposedDims(const AttentionShape &a, int64_t heads) {
  return {a.b, heads, a.d, a.s};
}
Dims transposedStrides(const AttentionShape &a, int64_t heads) {
  return {a.s * heads * a.d, a.d, 1, heads * a.d};
}
/// One f32 per query row, [b, heads, s, 1]: our lse's layout.
Dims statsDims(const AttentionShape &a) { return {a.b, a.heads, a.s, 1}; }
Dims statsStrides(const AttentionShape &a) {
  return {a.heads * a.s, a.s, 1, 1};
}

/// x with the scores `keep` rejects set to -inf.
const Descriptor &masked(Graph &g, const Descriptor &x, const Descriptor &keep,
                         const Dims &dims) {
  const Descriptor &y = g.intermediate(dims);
  const Descriptor &negativeInfinity = g.scalar(kNegativeInfinity);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, &negativeInfinity, y, &keep);
  return y;
}

/// The query (row) and key (column) index of each score of x.
std::pair<const Descriptor *, const Descriptor *>
indices(Graph &g, const Descriptor &x, const Dims &dims) {
  const Descriptor &row = g.intermediate(dims, CUDNN_DATA_INT32);
  const Descriptor &column = g.intermediate(dims, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, row, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, column, nullptr, 3);
  return {&row, &column};
}

/// Whether a.window masks anything: a window of s or more keys does not.
bool windowed(const AttentionShape &a) {
  return a.window > 0 && a.window < a.s;
}

/// The masks of a.causal and a.window on scores x, as cuDNN's composite
/// band masks form them: causal keeps key j of query i where i >= j, the
/// window where j + window > i.
const Descriptor &masks(Graph &g, const AttentionShape &a, const Descriptor &x,
                        const Dims &dims) {
  const Descriptor *y = &x;
  if (a.causal) {
    auto [row, column] = indices(g, *y, dims);
    const Descriptor &keep = g.intermediate(dims, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, *row, column, keep, nullptr, -1,
                CUDNN_DATA_BOOLEAN);
    y = &masked(g, *y, keep, dims);
  }
  if (windowed(a)) {
    // The window in f32, as cudnn-frontend gives a top-left band's bound.
    auto [row, column] = indices(g, *y, dims);
    const Descriptor &window = g.scalar(kWindow);
    const Descriptor &reach = g.intermediate(dims);
    g.pointwise(CUDNN_POINTWISE_ADD, *column, &window, reach, nullptr, 3);
    const Descriptor &keep = g.intermediate(dims, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_CMP_GT, reach, row, keep, nullptr, -1,
                CUDNN_DATA_BOOLEAN);
    y = &masked(g, *y, keep, dims);
  }
  return *y;
}

/// o = softmax(scale q k^T [masked]) v, and each row's log-sum-exp in
/// the statistics, as cuDNN's flash-attention forward recognises it.
void forwardGraph(Graph &g, const AttentionShape &a) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  Dims scores{a.b, a.heads, a.s, a.s}, rows = statsDims(a);
  const Descriptor &q =
      g.tensor(kQ, rowDims(a, a.heads), rowStrides(a, a.heads), bf16);
  const Descriptor &kT = g.tensor(kK, transposedDims(a, a.kvHeads),
                                  transposedStrides(a, a.kvHeads), bf16);
  const Descriptor &v =
      g.tensor(kV, rowDims(a, a.kvHeads), rowStrides(a, a.kvHeads), bf16);
  const Descriptor &o =
      g.tensor(kO, rowDims(a, a.heads), rowStrides(a, a.heads), bf16);
  const Descriptor &stats = g.tensor(kStats, rows, statsStrides(a));
  const Descriptor &scale = g.scalar(kScale);

  const Descriptor &products = g.intermediate(scores);
  g.matmul(q, kT, products);
  const Descriptor *x = &g.apply(CUDNN_POINTWISE_MUL, products, &scale, scores);
  x = &masks(g, a, *x, scores);
  const Descriptor &max = g.intermediate(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, *x, max);
  const Descriptor &shifted = g.apply(CUDNN_POINTWISE_SUB, *x, &max, scores);
  const Descriptor &e = g.apply(CUDNN_POINTWISE_EXP, shifted, nullptr, scores);
  const Descriptor &sum = g.intermediate(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const Descriptor &logSum = g.apply(CUDNN_POINTWISE_LOG, sum, nullptr, rows);
  g.pointwise(CUDNN_POINTWISE_ADD, max, &logSum, stats);
  // P enters the second product in bf16, as the engine takes it.
  const Descriptor &p = g.apply(CUDNN_POINTWISE_DIV, e, &sum, scores, bf16);
  g.matmul(p, v, o);
}

/// dq, dk, dv from dO, q, k, v, o and the forward's statistics, as cuDNN's
/// flash-attention backward recognises it: P is recomputed from the
/// statistics, dS = P (dP - rowDot) scale with rowDot = dO . O per row, dq
/// summed in f32 (kDqSums) and rounded once; with grouped heads, dk and dv
/// are summed over each group's query heads.
void backwardGraph(Graph &g, const AttentionShape &a) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
  Dims scores{a.b, a.heads, a.s, a.s}, rows = statsDims(a);
  Dims queryRows = rowDims(a, a.heads), keyRows = rowDims(a, a.kvHeads);
  // The scores transposed, [b, heads, keys, queries], over the same values.
  Dims transposedScoreStrides{a.heads * a.s * a.s, a.s * a.s, 1, a.s};
  const Descriptor &q = g.tensor(kQ, queryRows, rowStrides(a, a.heads), bf16);
  const Descriptor &kT = g.tensor(kK, transposedDims(a, a.kvHeads),
                                  transposedStrides(a, a.kvHeads), bf16);
  const Descriptor &vT = g.tensor(kV, transposedDims(a, a.kvHeads),
                                  transposedStrides(a, a.kvHeads), bf16);
  const Descriptor &o = g.tensor(kO, queryRows, rowStrides(a, a.heads), bf16);
  const Descriptor &dO = g.tensor(kDo, queryRows, rowStrides(a, a.heads), bf16);
  const Descriptor &stats = g.tensor(kStats, rows, statsStrides(a));
  const Descriptor &dq = g.tensor(kDq, queryRows, rowStrides(a, a.heads), bf16);
  const Descriptor &dk = g.tensor(kDk, keyRows, rowStrides(a, a.kvHeads), bf16);
  const Descriptor &dv = g.tensor(kDv, keyRows, rowStrides(a, a.kvHeads), bf16);
  const Descriptor &rowDot = g.tensor(kRowDot, rows, statsStrides(a));
  const Descriptor &dqSums =
      g.tensor(kDqSums, queryRows, Graph::packed(queryRows));
  const Descriptor &scale = g.scalar(kScale);
  const Descriptor &one = g.scalar(kOne);
  bool grouped = a.kvHeads != a.heads;

  // rowDot = sum over the row of dO * O (through the engine's dropout
  // scale, here 1).
  const Descriptor &products = g.apply(CUDNN_POINTWISE_MUL, dO, &o, queryRows);
  const Descriptor &dots = g.intermediate(rows);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, products, dots);
  g.pointwise(CUDNN_POINTWISE_MUL, dots, &one, rowDot);

  // P = exp(scale q k^T - lse), masked.
  const Descriptor &s = g.intermediate(scores);
  g.matmul(q, kT, s);
  const Descriptor &scaled = g.apply(CUDNN_POINTWISE_MUL, s, &scale, scores);
  const Descriptor *x = &g.apply(CUDNN_POINTWISE_SUB, scaled, &stats, scores);
  x = &masks(g, a, *x, scores);
  const Descriptor &p = g.apply(CUDNN_POINTWISE_EXP, *x, nullptr, scores);

  // dv = P^T dO, summed over each group's query heads.
  const Descriptor &pT = g.tensor(0, scores, transposedScoreStrides, bf16);
  g.reshape(p, pT);
  auto summedOverGroups = [&](const Descriptor &lhs, const Descriptor &rhs,
                              const Descriptor &out) {
    if (!grouped)
      return g.matmul(lhs, rhs, out);
    const Descriptor &full = g.intermediate(queryRows, bf16);
    g.matmul(lhs, rhs, full);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  summedOverGroups(pT, dO, dv);

  // dS = P (dO v^T - rowDot) scale.
  const Descriptor &dP = g.intermediate(scores);
  g.matmul(dO, vT, dP);
  const Descriptor &centred = g.apply(CUDNN_POINTWISE_SUB, dP, &rowDot, scores);
  const Descriptor &weighted =
      g.apply(CUDNN_POINTWISE_MUL, centred, &p, scores);
  const Descriptor &dS = g.apply(CUDNN_POINTWISE_MUL, weighted, &scale, scores);

  // dk = dS^T q, summed over each group's query heads.
  const Descriptor &dST = g.tensor(0, scores, transposedScoreStrides, bf16);
  g.reshape(dS, dST);
  summedOverGroups(dST, q, dk);

  // dq = dS k, summed in f32 and rounded once.
  const Descriptor &k = g.tensor(0, keyRows, rowStrides(a, a.kvHeads));
  g.reshape(kT, k);
  g.matmul(dS, k, dqSums);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dqSums, nullptr, dq);
}

/// The operands by unique id, and the workspace, for one execution.
struct Bindings {
  std::vector<int64_t> uids;
  std::vector<void *> pointers;
  void bind(int64_t uid, const void *p) {
    uids.push_back(uid);
    pointers.push_back(const_cast<void *>(p));
  }
  /// What both graphs take: q, k, v and o.
  void bindAttention(In q, In k, In v, const void *o) {
    bind(kQ, q.data);
    bind(kK, k.data);
    bind(kV, v.data);
    bind(kO, o);
  }
};

/// The plans executed in this process (CudnnAttention::executions).
std::atomic<int64_t> executed{0};

void execute(cudnnHandle_t handle, const Descriptor &plan, Bindings &b,
             void *workspace) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
           int64_t(b.uids.size()), b.uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           int64_t(b.pointers.size()), b.pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
           &workspace)
      .finalize("the variant pack");
  check(cudnnBackendExecute(handle, plan.get(), pack.get()),
        "running the attention plan");
  ++executed;
}

/// A plan and the workspace it runs in.
struct Plan {
  std::unique_ptr<Descriptor> plan;
  int64_t workspaceBytes = 0;
};

/// What a plan depends on: the graph's shape and masks (the window's
/// length is a by-value scalar).
using ShapeKey =
    std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;
ShapeKey keyOf(const AttentionShape &a, bool backward) {
  return {backward, a.b, a.s, a.heads, a.kvHeads, a.d, a.causal, windowed(a)};
}

Descriptor buildGraph(const AttentionShape &a, bool backward,
                      cudnnHandle_t handle) {
  Graph g;
  if (backward)
    backwardGraph(g, a);
  else
    forwardGraph(g, a);
  return g.finalize(handle);
}

/// Bytes rounded up to 256, so that what follows stays aligned.
int64_t paddedTo256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// One f32 per query row.
int64_t statsBytes(const AttentionShape &a) {
  return a.b * a.heads * a.s * int64_t(sizeof(float));
}

/// The graphs' by-value scalars, which must outlive the execution.
struct Scalars {
  float scale, negativeInfinity = -INFINITY, one = 1.0f, window;
  explicit Scalars(const AttentionShape &a)
      : scale(attentionScale(a.d)), window(float(a.window)) {}
  void bind(Bindings &b, const AttentionShape &a, bool backward) {
    b.bind(kScale, &scale);
    if (backward)
      b.bind(kOne, &one);
    if (a.causal || windowed(a))
      b.bind(kNegativeInfinity, &negativeInfinity);
    if (windowed(a))
      b.bind(kWindow, &window);
  }
};

} // namespace

bool cudnnBuilt() { return true; }
int64_t cudnnVersion() { return int64_t(cudnnGetVersion()); }

struct CudnnAttention::State {
  cudnnHandle_t handle = nullptr;
  std::map<ShapeKey, Plan> plans;

  /// The plan for this shape: the first of the heuristics' proposals that
  /// cuDNN builds, kept.
  const Plan &planFor(const AttentionShape &a, bool backward) {
    auto found = plans.find(keyOf(a, backward));
    if (found != plans.end())
      return found->second;
    std::string what = std::string(backward ? "backward" : "forward") +
                       " of b=" + std::to_string(a.b) +
                       ", s=" + std::to_string(a.s) +
                       ", heads=" + std::to_string(a.heads) + "/" +
                       std::to_string(a.kvHeads) + ", d=" + std::to_string(a.d);
    const char *instead = "; PARTITA_CUDA_ATTENTION=mma runs our own kernels";
    Plan plan;
    std::string statuses;
    try {
      Descriptor graph = buildGraph(a, backward, handle);
      Target target{handle, nullptr};
      for (auto &config : proposals(graph, target)) {
        cudnnStatus_t status = makePlan(*config, target, plan.plan);
        if (status == CUDNN_STATUS_SUCCESS)
          break;
        statuses += std::string(statuses.empty() ? "" : "; ") +
                    cudnnGetErrorString(status) + " " + lastError();
        plan.plan.reset();
      }
      int64_t count = 0;
      if (plan.plan)
        check(cudnnBackendGetAttribute(
                  plan.plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                  CUDNN_TYPE_INT64, 1, &count, &plan.workspaceBytes),
              "the plan's workspace");
    } catch (const std::runtime_error &e) {
      throw std::runtime_error(std::string(e.what()) + ", for the " + what +
                               instead);
    }
    if (!plan.plan)
      throw std::runtime_error("cuDNN attention: no engine runs the " + what +
                               (statuses.empty()
                                    ? " (the heuristics proposed none)"
                                    : " (the proposals: " + statuses + ")") +
                               instead);
    return plans.emplace(keyOf(a, backward), std::move(plan)).first->second;
  }
};

CudnnAttention::CudnnAttention() : state(std::make_unique<State>()) {
  // cuDNN runs with its own version or a later one of the same major.
  size_t loaded = cudnnGetVersion();
  if (loaded < CUDNN_VERSION || loaded / 10000 != CUDNN_MAJOR)
    throw std::runtime_error("cuDNN attention: built with cuDNN " +
                             std::to_string(CUDNN_VERSION) + " but cuDNN " +
                             std::to_string(loaded) + " is loaded");
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                             device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                             device) != cudaSuccess)
    throw std::runtime_error("cuDNN attention: no current CUDA device");
  capability = major * 10 + minor;
  check(cudnnCreate(&state->handle), "creating a handle");
}

CudnnAttention::~CudnnAttention() {
  state->plans.clear();
  if (state->handle)
    cudnnDestroy(state->handle);
}

std::string CudnnAttention::shapeRefusal(const AttentionShape &a,
                                         int capability, bool backward) {
  size_t version = cudnnGetVersion();
  int64_t widest = capability == 90 ? 256 : 128;
  if (a.d % 8 != 0 || a.d > widest)
    return "heads of " + std::to_string(a.d) + ": cuDNN takes multiples of " +
           "8 up to " + std::to_string(widest) + " here";
  if (a.heads % a.kvHeads != 0 || a.s < 2)
    return "heads " + std::to_string(a.heads) + "/" +
           std::to_string(a.kvHeads) + " over " + std::to_string(a.s) +
           " positions";
  // cuDNN 9.14.0 gets a non-causal window over more than 1024 keys wrong.
  if (version == 91400 && !a.causal && windowed(a) && a.s > 1024)
    return "a non-causal window over " + std::to_string(a.s) +
           " positions with cuDNN 9.14.0";
  // Before 9.16 the backward needs keys in whole tiles (or a padding mask).
  if (backward && version < 91600 && a.s % 128 != 0)
    return "a backward over " + std::to_string(a.s) + " positions with cuDNN " +
           std::to_string(version) + " (before 9.16: multiples of 128)";
  return "";
}

std::string CudnnAttention::refusal(const AttentionShape &a,
                                    std::initializer_list<In> operands,
                                    std::initializer_list<Out> results,
                                    const float *lse, bool backward) const {
  // The graphs declare every tensor 16-byte aligned.
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  for (In x : operands)
    if (!x.bf16)
      return "f32 operands";
  for (Out y : results) {
    if (!y.bf16)
      return "f32 results";
    if (y.acc)
      return "results added to, not written";
  }
  if (backward && !lse)
    return "a backward without the forward's log-sum-exp";
  for (In x : operands)
    if (!aligned(x.data))
      return "an operand off 16 bytes";
  for (Out y : results)
    if (!y.data || !aligned(y.data))
      return "a result off 16 bytes";
  if (lse && !aligned(lse))
    return "a log-sum-exp off 16 bytes";
  return shapeRefusal(a, capability, backward);
}

int64_t CudnnAttention::executions() { return executed.load(); }

void CudnnAttention::forward(const AttentionShape &a, In q, In k, In v, Out o,
                             float *lse, const Workspace &workspace,
                             cudaStream_t stream) {
  const Plan &plan = state->planFor(a, false);
  // The statistics are the graph's output whether kept or not.
  int64_t planBytes = paddedTo256(plan.workspaceBytes);
  char *scratch = static_cast<char *>(
      workspace(planBytes + (lse ? 0 : paddedTo256(statsBytes(a)))));
  Scalars scalars(a);
  Bindings b;
  b.bindAttention(q, k, v, o.data);
  b.bind(kStats, lse ? static_cast<void *>(lse) : scratch + planBytes);
  scalars.bind(b, a, false);
  check(cudnnSetStream(state->handle, stream), "setting the stream");
  execute(state->handle, *plan.plan, b, scratch);
}

void CudnnAttention::backward(const AttentionShape &a, In dout, In q, In k,
                              In v, In o, const float *lse, Out dq, Out dk,
                              Out dv, const Workspace &workspace,
                              cudaStream_t stream) {
  const Plan &plan = state->planFor(a, true);
  int64_t planBytes = paddedTo256(plan.workspaceBytes);
  int64_t rowDotBytes = paddedTo256(statsBytes(a));
  int64_t dqSumsBytes = statsBytes(a) * a.d;
  char *scratch =
      static_cast<char *>(workspace(planBytes + rowDotBytes + dqSumsBytes));
  char *dqSums = scratch + planBytes + rowDotBytes;
  // cuDNN clears dq's sums itself (from 9.6 on; the build needs 9.11).
  Scalars scalars(a);
  Bindings b;
  b.bindAttention(q, k, v, o.data);
  b.bind(kDo, dout.data);
  b.bind(kStats, lse);
  b.bind(kDq, dq.data);
  b.bind(kDk, dk.data);
  b.bind(kDv, dv.data);
  b.bind(kRowDot, scratch + planBytes);
  b.bind(kDqSums, dqSums);
  scalars.bind(b, a, true);
  check(cudnnSetStream(state->handle, stream), "setting the stream");
  execute(state->handle, *plan.plan, b, scratch);
}

CudnnSupport cudnnAttentionSupport(const std::string &deviceJson,
                                   const AttentionShape &a, bool backward) {
  Descriptor device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  device
      .set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
           int64_t(deviceJson.size()), deviceJson.data())
      .finalize("the device properties");
  Descriptor graph = buildGraph(a, backward, nullptr);
  Target target{nullptr, &device};
  CudnnSupport support;
  for (auto &config : proposals(graph, target)) {
    std::unique_ptr<Descriptor> plan;
    cudnnStatus_t status = makePlan(*config, target, plan);
    ++support.candidates;
    // Loading a built kernel is the first step that needs a driver.
    if (status == CUDNN_STATUS_SUCCESS ||
        status == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
      ++support.accepted;
    support.statuses += std::string(support.statuses.empty() ? "" : ", ") +
                        cudnnGetErrorString(status);
  }
  return support;
}

} // namespace partita::runtime::cuda

#else // !PARTITA_HAVE_CUDNN

namespace partita::runtime::cuda {

namespace {
[[noreturn]] void unavailable() {
  throw std::runtime_error(
      "PARTITA_CUDA_ATTENTION=cudnn: this build has no cuDNN (CMake looks "
      "beside CUDA and in the nvidia-cudnn wheel of PyTorch)");
}
} // namespace

bool cudnnBuilt() { return false; }
int64_t cudnnVersion() { return 0; }
struct CudnnAttention::State {};
CudnnAttention::CudnnAttention() { unavailable(); }
CudnnAttention::~CudnnAttention() = default;
std::string CudnnAttention::refusal(const AttentionShape &,
                                    std::initializer_list<In>,
                                    std::initializer_list<Out>, const float *,
                                    bool) const {
  return "this build has no cuDNN";
}
std::string CudnnAttention::shapeRefusal(const AttentionShape &, int, bool) {
  return "this build has no cuDNN";
}
int64_t CudnnAttention::executions() { return 0; }
void CudnnAttention::forward(const AttentionShape &, In, In, In, Out, float *,
                             const Workspace &, cudaStream_t) {
  unavailable();
}
void CudnnAttention::backward(const AttentionShape &, In, In, In, In, In,
                              const float *, Out, Out, Out, const Workspace &,
                              cudaStream_t) {
  unavailable();
}
CudnnSupport cudnnAttentionSupport(const std::string &, const AttentionShape &,
                                   bool) {
  unavailable();
}

} // namespace partita::runtime::cuda

#endif // PARTITA_HAVE_CUDNN
