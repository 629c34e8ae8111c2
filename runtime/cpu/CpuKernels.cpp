//===- CpuKernels.cpp - fp32 kernels of the plan format -------------------===//
//
// Plain C++ loops the compiler can vectorise, and OpenBLAS for the GEMMs.
// Each kernel computes its outputs into scratch vectors; `write` stores or
// adds them, so every kernel honours `accumulate` the same way.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "partita/runtime/Bf16.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <stdexcept>
#include <unordered_map>

namespace partita::runtime {

namespace {

using Vec = std::vector<float>;
using json = nlohmann::json;

/// C (m x n) = A (m x k) * op(B) with B row-major; `transB`: B is n x k.
void gemm(const float *a, const float *b, float *c, int64_t m, int64_t n,
          int64_t k, bool transA, bool transB, float beta = 0) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f,
              a, transA ? int(m) : int(k), b, transB ? int(k) : int(n), beta, c,
              int(n));
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct Call {
  const std::vector<TensorRef> &ins;
  const std::vector<TensorRef> &outs;
  const plan::KernelParams &p;
  const KernelContext &ctx;
  std::vector<Vec> results;

  Vec &result(size_t k) {
    if (results.size() <= k)
      results.resize(k + 1);
    results[k].assign(outs[k].n, 0.0f);
    return results[k];
  }
  int64_t rows(const TensorRef &t) const { return t.n / t.dim(-1); }
};

// -- Norms ---------------------------------------------------------------

/// Mean (0 for RMSNorm) and 1 / sqrt(variance + eps) of one row.
std::pair<double, double> rowStatistics(const float *x, int64_t h, bool rms,
                                        double eps) {
  double mean = 0, var = 0;
  if (!rms) {
    for (int64_t j = 0; j < h; ++j)
      mean += x[j];
    mean /= h;
  }
  for (int64_t j = 0; j < h; ++j)
    var += (x[j] - mean) * (x[j] - mean);
  return {mean, 1.0 / std::sqrt(var / h + eps)};
}

void norm(Call &c, bool rms) {
  const TensorRef &x = c.ins[0];
  const float *w = c.ins[1].f;
  const float *b = c.ins.size() > 2 ? c.ins[2].f : nullptr;
  double eps = c.p.eps;
  float offset = float(c.p.weightOffset);
  // Rows of the weight's width: the last dimension, or each head of it.
  int64_t h = c.ins[1].n, rows = x.n / h;
  Vec &y = c.result(0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x.f + r * h;
    auto [mean, inv] = rowStatistics(xr, h, rms, eps);
    for (int64_t j = 0; j < h; ++j)
      y[r * h + j] =
          float((xr[j] - mean) * inv) * (w[j] + offset) + (b ? b[j] : 0.0f);
  }
}

void normBackward(Call &c, bool rms) {
  const TensorRef &dy = c.ins[0], &x = c.ins[1];
  const float *w = c.ins[2].f;
  double eps = c.p.eps;
  float offset = float(c.p.weightOffset);
  int64_t h = c.ins[2].n, rows = x.n / h;
  Vec &dx = c.result(0), &dw = c.result(1);
  Vec *db = c.outs.size() > 2 ? &c.result(2) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x.f + r * h, *g = dy.f + r * h;
    auto [mean, inv] = rowStatistics(xr, h, rms, eps);
    double dotXhat = 0, sumDxhat = 0;
    for (int64_t j = 0; j < h; ++j) {
      double xhat = (xr[j] - mean) * inv,
             dxhat = double(g[j]) * (w[j] + offset);
      dotXhat += dxhat * xhat;
      sumDxhat += dxhat;
      dw[j] += float(g[j] * xhat);
      if (db)
        (*db)[j] += g[j];
    }
    for (int64_t j = 0; j < h; ++j) {
      double xhat = (xr[j] - mean) * inv,
             dxhat = double(g[j]) * (w[j] + offset);
      double v = dxhat - dotXhat / h * xhat - (rms ? 0 : sumDxhat / h);
      dx[r * h + j] = float(inv * v);
    }
  }
}

// -- Linear ----------------------------------------------------------------
//
// The GEMM kernels write their outputs in place (beta = 1 to accumulate):
// no scratch copy of the largest tensors of a step.

void linearDirect(const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs,
                  const std::vector<bool> &accumulate) {
  const TensorRef &x = ins[0], &w = ins[1];
  int64_t in = x.dim(-1), out = w.dim(0), rows = x.n / in;
  float *y = outs[0].f;
  gemm(x.f, w.f, y, rows, out, in, false, true, accumulate[0] ? 1.0f : 0.0f);
  if (ins.size() > 2)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out; ++j)
        y[r * out + j] += ins[2].f[j];
}

void linearBackwardDirect(const std::vector<TensorRef> &ins,
                          const std::vector<TensorRef> &outs,
                          const std::vector<bool> &accumulate) {
  const TensorRef &dy = ins[0], &x = ins[1], &w = ins[2];
  int64_t in = x.dim(-1), out = w.dim(0), rows = x.n / in;
  gemm(dy.f, w.f, outs[0].f, rows, in, out, false, false,
       accumulate[0] ? 1.0f : 0.0f);
  gemm(dy.f, x.f, outs[1].f, out, in, rows, true, false,
       accumulate[1] ? 1.0f : 0.0f);
  if (outs.size() > 2) {
    float *db = outs[2].f;
    if (!accumulate[2])
      std::fill(db, db + out, 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out; ++j)
        db[j] += dy.f[r * out + j];
  }
}

// -- Rotary ------------------------------------------------------------------

void rotary(Call &c, float sign) {
  const TensorRef &x = c.ins[0];
  int64_t b = x.dim(0), s = x.dim(1), width = x.dim(2);
  int64_t heads = c.p.numHeads;
  int64_t rd = c.p.rotary.rotaryDim, d = width / heads;
  const std::vector<double> &inv = c.p.rotary.inverseFrequencies;
  double magnitude = plan::rotaryMagnitude(c.p.rotary);
  Vec &y = c.result(0);
  std::copy(x.f, x.f + x.n, y.begin());
  for (int64_t t = 0; t < s; ++t)
    for (int64_t i = 0; i < rd / 2; ++i) {
      float cs = float(magnitude * std::cos(t * inv[i])),
            sn = sign * float(magnitude * std::sin(t * inv[i]));
      for (int64_t bb = 0; bb < b; ++bb)
        for (int64_t hh = 0; hh < heads; ++hh) {
          int64_t base = (bb * s + t) * width + hh * d;
          float x1 = x.f[base + i], x2 = x.f[base + rd / 2 + i];
          y[base + i] = x1 * cs - x2 * sn;
          y[base + rd / 2 + i] = x2 * cs + x1 * sn;
        }
    }
}

// -- Attention -------------------------------------------------------------

struct AttentionShape {
  int64_t b, s, h, kv, d;
  bool causal;
  int64_t window;
  bool masked(int64_t i, int64_t j) const {
    return (causal && j > i) || (window > 0 && j <= i - window);
  }
};

AttentionShape attentionShape(Call &c) {
  const TensorRef &q = c.ins[0];
  AttentionShape a;
  a.b = q.dim(0);
  a.s = q.dim(1);
  a.h = c.p.numHeads;
  a.kv = c.p.numKvHeads;
  a.d = q.dim(2) / a.h;
  a.causal = c.p.causal;
  a.window = c.p.window;
  return a;
}

/// C (m x n) = alpha op(A) op(B) + beta C with explicit leading dimensions:
/// the heads of q, k, v are column blocks of their rows.
void gemmStrided(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Softmax probabilities of one (batch, head), s x s: the scaled scores by
/// one GEMM, then masked row softmax; unless null, each row's log-sum-exp
/// of its scaled scores into lse[0, s).
void probabilities(const AttentionShape &a, const float *q, const float *k,
                   int64_t bb, int64_t hh, std::vector<float> &p,
                   float *lse = nullptr) {
  int64_t kh = hh / (a.h / a.kv);
  const float *qh = q + bb * a.s * a.h * a.d + hh * a.d;
  const float *khp = k + bb * a.s * a.kv * a.d + kh * a.d;
  gemmStrided(false, true, a.s, a.s, a.d, 1.0f / std::sqrt(float(a.d)), qh,
              a.h * a.d, khp, a.kv * a.d, 0.0f, p.data(), a.s);
  for (int64_t i = 0; i < a.s; ++i) {
    float *row = p.data() + i * a.s;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < a.s; ++j)
      if (!a.masked(i, j))
        mx = std::max(mx, row[j]);
    float sum = 0;
    for (int64_t j = 0; j < a.s; ++j) {
      row[j] = a.masked(i, j) ? 0.0f : std::exp(row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = 0; j < a.s; ++j)
      row[j] /= sum;
    if (lse)
      lse[i] = mx + std::log(sum);
  }
}

void attention(Call &c) {
  AttentionShape a = attentionShape(c);
  const float *q = c.ins[0].f, *k = c.ins[1].f, *v = c.ins[2].f;
  Vec &o = c.result(0);
  // The log-sum-exp per query row, [b, h, s], when the plan keeps it for
  // the backward (which here recomputes the probabilities whole).
  float *lse = c.outs.size() > 1 ? c.result(1).data() : nullptr;
  std::vector<float> p(a.s * a.s);
  for (int64_t bb = 0; bb < a.b; ++bb)
    for (int64_t hh = 0; hh < a.h; ++hh) {
      probabilities(a, q, k, bb, hh, p,
                    lse ? lse + (bb * a.h + hh) * a.s : nullptr);
      int64_t kh = hh / (a.h / a.kv);
      gemmStrided(false, false, a.s, a.d, a.s, 1.0f, p.data(), a.s,
                  v + bb * a.s * a.kv * a.d + kh * a.d, a.kv * a.d, 0.0f,
                  o.data() + bb * a.s * a.h * a.d + hh * a.d, a.h * a.d);
    }
}

void attentionBackward(Call &c) {
  AttentionShape a = attentionShape(c);
  const float *dout = c.ins[0].f, *q = c.ins[1].f, *k = c.ins[2].f,
              *v = c.ins[3].f;
  Vec &dq = c.result(0), &dk = c.result(1), &dv = c.result(2);
  std::vector<float> p(a.s * a.s), dp(a.s * a.s);
  float scale = 1.0f / std::sqrt(float(a.d));
  int64_t qld = a.h * a.d, kld = a.kv * a.d;
  for (int64_t bb = 0; bb < a.b; ++bb)
    for (int64_t hh = 0; hh < a.h; ++hh) {
      probabilities(a, q, k, bb, hh, p);
      int64_t kh = hh / (a.h / a.kv);
      int64_t qo = bb * a.s * qld + hh * a.d, ko = bb * a.s * kld + kh * a.d;
      // dV += P^T dO; dP = dO V^T.
      gemmStrided(true, false, a.s, a.d, a.s, 1.0f, p.data(), a.s, dout + qo,
                  qld, 1.0f, dv.data() + ko, kld);
      gemmStrided(false, true, a.s, a.s, a.d, 1.0f, dout + qo, qld, v + ko, kld,
                  0.0f, dp.data(), a.s);
      // dS = P (dP - rowsum(dP P)) / sqrt(d), in place of dP.
      for (int64_t i = 0; i < a.s; ++i) {
        float *pr = p.data() + i * a.s, *dr = dp.data() + i * a.s;
        float dot = 0;
        for (int64_t j = 0; j < a.s; ++j)
          dot += pr[j] * dr[j];
        for (int64_t j = 0; j < a.s; ++j)
          dr[j] = pr[j] * (dr[j] - dot) * scale;
      }
      // dQ = dS K; dK += dS^T Q.
      gemmStrided(false, false, a.s, a.d, a.s, 1.0f, dp.data(), a.s, k + ko,
                  kld, 1.0f, dq.data() + qo, qld);
      gemmStrided(true, false, a.s, a.d, a.s, 1.0f, dp.data(), a.s, q + qo, qld,
                  1.0f, dk.data() + ko, kld);
    }
}

// -- Elementwise -------------------------------------------------------------

float gelu(float x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5f * x *
           (1 + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
  return 0.5f * x * (1 + std::erf(x / std::sqrt(2.0f)));
}

float geluGrad(float x, bool tanhApprox) {
  if (tanhApprox) {
    float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = std::tanh(u);
    return 0.5f * (1 + t) +
           0.5f * x * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * x * x);
  }
  float cdf = 0.5f * (1 + std::erf(x / std::sqrt(2.0f)));
  return cdf + x * std::exp(-0.5f * x * x) / std::sqrt(2 * float(M_PI));
}

// -- Loss ----------------------------------------------------------------

/// The first vocabulary index of this rank's slice of `rows` entries.
int64_t vocabStart(Call &c, int64_t rows) {
  return c.p.vocabParts > 1 ? c.ctx.tpRank * rows : 0;
}

// -- Optimizer -------------------------------------------------------------

void adamw(Call &c) {
  const Optimizer &o = *c.ctx.optimizer;
  const TensorRef &p = c.ins[0], &g = c.ins[1], &m = c.ins[2], &v = c.ins[3];
  float clip = c.ins[4].f[0];
  // Below f32, the update applies to the f32 master copy w (shaped like m),
  // and p takes its values (rounded when p is stored).
  const TensorRef *w = c.ins.size() > 5 ? &c.ins[5] : nullptr;
  bool decay = c.p.weightDecay;
  bool shard = c.p.dpShard;
  double lr = o.learningRate(c.ctx.step);
  double t = double(c.ctx.step + 1);
  double c1 = 1 - std::pow(o.beta1, t), c2 = 1 - std::pow(o.beta2, t);
  Vec &np = c.result(0), &nm = c.result(1), &nv = c.result(2);
  std::copy(p.f, p.f + p.n, np.begin());
  Vec *nw = w ? &c.result(3) : nullptr;
  if (w)
    std::copy(w->f, w->f + w->n, nw->begin());
  // With dp_shard, this rank updates its flat slice of the parameter.
  int64_t chunk = m.n, begin = shard ? c.ctx.dpRank * chunk : 0;
  for (int64_t i = 0; i < chunk; ++i) {
    double gi = double(g.f[i]) * clip;
    double mi = o.beta1 * m.f[i] + (1 - o.beta1) * gi;
    double vi = o.beta2 * v.f[i] + (1 - o.beta2) * gi * gi;
    nm[i] = float(mi);
    nv[i] = float(vi);
    int64_t at = begin + i;
    if (at >= p.n)
      continue; // the padding of the last shard
    double pi = w ? w->f[i] : p.f[at];
    if (decay)
      pi *= 1 - lr * o.weightDecay;
    pi -= lr * (mi / c1) / (std::sqrt(vi / c2) + o.eps);
    np[at] = float(pi);
    if (nw)
      (*nw)[i] = float(pi);
  }
}

using KernelFn = std::function<void(Call &)>;

const std::unordered_map<Kernel, KernelFn> &kernels() {
  static const std::unordered_map<Kernel, KernelFn> table = {
      {Kernel::Embedding,
       [](Call &c) {
         const TensorRef &table = c.ins[0], &tokens = c.ins[1];
         int64_t h = table.dim(1), rows = table.dim(0);
         int64_t start = vocabStart(c, rows);
         float scale = float(c.p.scale);
         Vec &y = c.result(0);
         for (int64_t t = 0; t < tokens.n; ++t) {
           int64_t local = tokens.i[t] - start;
           if (local >= 0 && local < rows)
             for (int64_t j = 0; j < h; ++j)
               y[t * h + j] = scale * table.f[local * h + j];
         }
       }},
      {Kernel::EmbeddingBwd,
       [](Call &c) {
         const TensorRef &dy = c.ins[0], &tokens = c.ins[1];
         int64_t rows = c.outs[0].dim(0), h = c.outs[0].dim(1);
         int64_t start = vocabStart(c, rows);
         float scale = float(c.p.scale);
         Vec &d = c.result(0);
         for (int64_t t = 0; t < tokens.n; ++t) {
           int64_t local = tokens.i[t] - start;
           if (local >= 0 && local < rows)
             for (int64_t j = 0; j < h; ++j)
               d[local * h + j] += scale * dy.f[t * h + j];
         }
       }},
      {Kernel::PositionEmbedding,
       [](Call &c) {
         const TensorRef &x = c.ins[0];
         int64_t s = x.dim(1), h = x.dim(2);
         Vec &y = c.result(0);
         for (int64_t i = 0; i < x.n; ++i)
           y[i] = x.f[i] + c.ins[1].f[((i / h) % s) * h + i % h];
       }},
      {Kernel::PositionEmbeddingBwd,
       [](Call &c) {
         const TensorRef &dy = c.ins[0];
         int64_t s = dy.dim(1), h = dy.dim(2);
         Vec &d = c.result(0);
         for (int64_t i = 0; i < dy.n; ++i)
           d[((i / h) % s) * h + i % h] += dy.f[i];
       }},
      {Kernel::ShardSlice,
       [](Call &c) {
         const TensorRef &x = c.ins[0];
         int64_t dim = c.p.dim;
         int64_t outer = 1, inner = 1;
         for (int64_t k = 0; k < dim; ++k)
           outer *= x.dim(int(k));
         for (size_t k = dim; k < x.shape->size(); ++k)
           inner *= x.dim(int(k));
         int64_t part = inner / c.ctx.groupSize;
         Vec &y = c.result(0);
         for (int64_t o = 0; o < outer; ++o)
           std::copy(x.f + o * inner + c.ctx.groupRank * part,
                     x.f + o * inner + (c.ctx.groupRank + 1) * part,
                     y.begin() + o * part);
       }},
      {Kernel::RmsNorm, [](Call &c) { norm(c, true); }},
      {Kernel::LayerNorm, [](Call &c) { norm(c, false); }},
      {Kernel::RmsNormBwd, [](Call &c) { normBackward(c, true); }},
      {Kernel::LayerNormBwd, [](Call &c) { normBackward(c, false); }},
      {Kernel::BiasAdd,
       [](Call &c) {
         int64_t h = c.ins[0].dim(-1);
         Vec &y = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i)
           y[i] = c.ins[0].f[i] + c.ins[1].f[i % h];
       }},
      {Kernel::BiasAddBwd,
       [](Call &c) {
         int64_t h = c.ins[0].dim(-1);
         Vec &dx = c.result(0), &db = c.result(1);
         for (int64_t i = 0; i < c.ins[0].n; ++i) {
           dx[i] = c.ins[0].f[i];
           db[i % h] += c.ins[0].f[i];
         }
       }},
      {Kernel::Rotary, [](Call &c) { rotary(c, 1); }},
      {Kernel::RotaryBwd, [](Call &c) { rotary(c, -1); }},
      {Kernel::Attention, attention},
      {Kernel::AttentionBwd, attentionBackward},
      {Kernel::Gelu,
       [](Call &c) {
         bool t = c.p.tanhGelu;
         Vec &y = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i)
           y[i] = gelu(c.ins[0].f[i], t);
       }},
      {Kernel::GeluBwd,
       [](Call &c) {
         bool t = c.p.tanhGelu;
         Vec &d = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i)
           d[i] = c.ins[0].f[i] * geluGrad(c.ins[1].f[i], t);
       }},
      {Kernel::Silu,
       [](Call &c) {
         Vec &y = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i)
           y[i] = c.ins[0].f[i] * sigmoid(c.ins[0].f[i]);
       }},
      {Kernel::SiluBwd,
       [](Call &c) {
         Vec &d = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i) {
           float x = c.ins[1].f[i], s = sigmoid(x);
           d[i] = c.ins[0].f[i] * (s + x * s * (1 - s));
         }
       }},
      {Kernel::Swiglu,
       [](Call &c) {
         Vec &y = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i) {
           float g = c.ins[0].f[i];
           y[i] = g * sigmoid(g) * c.ins[1].f[i];
         }
       }},
      {Kernel::SwigluBwd,
       [](Call &c) {
         Vec &dg = c.result(0), &du = c.result(1);
         for (int64_t i = 0; i < c.ins[0].n; ++i) {
           float dy = c.ins[0].f[i], g = c.ins[1].f[i], u = c.ins[2].f[i];
           float s = sigmoid(g);
           dg[i] = dy * u * (s + g * s * (1 - s));
           du[i] = dy * g * s;
         }
       }},
      {Kernel::Geglu,
       [](Call &c) {
         bool t = c.p.tanhGelu;
         Vec &y = c.result(0);
         for (int64_t i = 0; i < c.ins[0].n; ++i)
           y[i] = gelu(c.ins[0].f[i], t) * c.ins[1].f[i];
       }},
      {Kernel::GegluBwd,
       [](Call &c) {
         bool t = c.p.tanhGelu;
         Vec &dg = c.result(0), &du = c.result(1);
         for (int64_t i = 0; i < c.ins[0].n; ++i) {
           float dy = c.ins[0].f[i], g = c.ins[1].f[i], u = c.ins[2].f[i];
           dg[i] = dy * u * geluGrad(g, t);
           du[i] = dy * gelu(g, t);
         }
       }},
      {Kernel::Add,
       [](Call &c) {
         Vec &y = c.result(0);
         for (const TensorRef &x : c.ins)
           for (int64_t i = 0; i < x.n; ++i)
             y[i] += x.f[i];
       }},
      {Kernel::Copy,
       [](Call &c) {
         Vec &y = c.result(0);
         std::copy(c.ins[0].f, c.ins[0].f + c.ins[0].n, y.begin());
       }},
      {Kernel::CeMax,
       [](Call &c) {
         const TensorRef &l = c.ins[0];
         int64_t v = l.dim(-1), start = vocabStart(c, v);
         int64_t size = c.p.vocabSize;
         Vec &mx = c.result(0);
         for (int64_t r = 0; r < c.rows(l); ++r) {
           float m = -std::numeric_limits<float>::infinity();
           for (int64_t j = 0; j < v && start + j < size; ++j)
             m = std::max(m, l.f[r * v + j]);
           mx[r] = m;
         }
       }},
      {Kernel::CeStats,
       [](Call &c) {
         const TensorRef &l = c.ins[0];
         const float *mx = c.ins[1].f;
         const int32_t *labels = c.ins[2].i;
         int64_t v = l.dim(-1), start = vocabStart(c, v);
         int64_t size = c.p.vocabSize;
         Vec &st = c.result(0);
         for (int64_t r = 0; r < c.rows(l); ++r) {
           double sum = 0;
           for (int64_t j = 0; j < v && start + j < size; ++j)
             sum += std::exp(double(l.f[r * v + j]) - mx[r]);
           int64_t local = labels[r] - start;
           st[2 * r] = float(sum);
           st[2 * r + 1] = local >= 0 && local < v ? l.f[r * v + local] : 0;
         }
       }},
      {Kernel::CeLoss,
       [](Call &c) {
         const float *mx = c.ins[0].f, *st = c.ins[1].f;
         double scale = c.p.scale, sum = 0;
         for (int64_t r = 0; r < c.ins[0].n; ++r)
           sum += std::log(double(st[2 * r])) + mx[r] - st[2 * r + 1];
         c.result(0)[0] = float(scale * sum);
       }},
      {Kernel::CeBwd,
       [](Call &c) {
         const TensorRef &l = c.ins[0];
         const float *mx = c.ins[1].f, *st = c.ins[2].f;
         const int32_t *labels = c.ins[3].i;
         int64_t v = l.dim(-1), start = vocabStart(c, v);
         int64_t size = c.p.vocabSize;
         float scale = float(c.p.scale);
         Vec &d = c.result(0);
         for (int64_t r = 0; r < c.rows(l); ++r) {
           for (int64_t j = 0; j < v && start + j < size; ++j)
             d[r * v + j] =
                 scale * std::exp(l.f[r * v + j] - mx[r]) / st[2 * r];
           int64_t local = labels[r] - start;
           if (local >= 0 && local < v)
             d[r * v + local] -= scale;
         }
       }},
      {Kernel::GradSumsq,
       [](Call &c) {
         const std::vector<double> &weights = c.p.weights;
         double total = 0;
         for (size_t k = 0; k < c.ins.size(); ++k) {
           double s = 0;
           for (int64_t i = 0; i < c.ins[k].n; ++i)
             s += double(c.ins[k].f[i]) * c.ins[k].f[i];
           total += weights.at(k) * s;
         }
         c.result(0)[0] = float(total);
       }},
      {Kernel::ClipCoefficient,
       [](Call &c) {
         double clip = c.ctx.optimizer->clipNorm;
         double norm = std::sqrt(double(c.ins[0].f[0]));
         c.result(0)[0] =
             clip == 0 ? 1.0f : float(std::min(1.0, clip / (norm + 1e-6)));
       }},
      {Kernel::AdamW, adamw},
  };
  return table;
}

} // namespace

using DirectFn = void (*)(const std::vector<TensorRef> &,
                          const std::vector<TensorRef> &,
                          const std::vector<bool> &);

const std::unordered_map<Kernel, DirectFn> &directKernels() {
  static const std::unordered_map<Kernel, DirectFn> table = {
      {Kernel::Linear, linearDirect},
      {Kernel::LinearBwd, linearBackwardDirect}};
  return table;
}

bool hasCpuKernel(Kernel kernel) {
  return kernels().count(kernel) || directKernels().count(kernel);
}

/// Runs a kernel with bf16 buffers on f32 copies: inputs are widened, and
/// outputs (widened first when the kernel adds to them or also reads them)
/// are rounded back once.
static void runOnF32Copies(Kernel kernel, const std::vector<TensorRef> &ins,
                           const std::vector<TensorRef> &outs,
                           const std::vector<bool> &accumulate,
                           const plan::KernelParams &params,
                           const KernelContext &ctx) {
  std::vector<Vec> copies;
  copies.reserve(ins.size() + outs.size());
  std::unordered_map<uint16_t *, float *> copyOf;
  auto widened = [&](TensorRef t, bool load) {
    if (!t.h)
      return t;
    auto [it, fresh] = copyOf.try_emplace(t.h, nullptr);
    if (fresh) {
      Vec &copy = copies.emplace_back(t.n, 0.0f);
      if (load)
        widenBf16(t.h, copy.data(), t.n);
      it->second = copy.data();
    }
    t.f = it->second;
    t.h = nullptr;
    return t;
  };
  std::vector<TensorRef> wideIns, wideOuts;
  for (const TensorRef &t : ins)
    wideIns.push_back(widened(t, true));
  for (size_t k = 0; k < outs.size(); ++k)
    wideOuts.push_back(widened(outs[k], accumulate[k]));
  runCpuKernel(kernel, wideIns, wideOuts, accumulate, params, ctx);
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].h)
      narrowBf16(wideOuts[k].f, outs[k].h, outs[k].n);
}

void runCpuKernel(Kernel kernel, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs,
                  const std::vector<bool> &accumulate,
                  const plan::KernelParams &params, const KernelContext &ctx) {
  auto isBf16 = [](const TensorRef &t) { return t.h != nullptr; };
  if (std::any_of(ins.begin(), ins.end(), isBf16) ||
      std::any_of(outs.begin(), outs.end(), isBf16))
    return runOnF32Copies(kernel, ins, outs, accumulate, params, ctx);
  auto direct = directKernels().find(kernel);
  if (direct != directKernels().end()) {
    direct->second(ins, outs, accumulate);
    return;
  }
  auto it = kernels().find(kernel);
  if (it == kernels().end())
    throw std::runtime_error("the CPU backend has no kernel \"" +
                             std::string(plan::name(kernel)) + "\"");
  Call call{ins, outs, params, ctx, {}};
  for (size_t k = 0; k < outs.size(); ++k)
    call.result(k);
  it->second(call);
  for (size_t k = 0; k < outs.size(); ++k) {
    const Vec &r = call.results[k];
    float *out = outs[k].f;
    if (accumulate[k])
      for (int64_t i = 0; i < outs[k].n; ++i)
        out[i] += r[i];
    else
      std::copy(r.begin(), r.end(), out);
  }
}

} // namespace partita::runtime

namespace partita::runtime {

namespace {
class CpuDevice : public Device {
public:
  void *allocateArena(int64_t bytes) override {
    arenas.emplace_back((bytes + 3) / 4, 0.0f);
    return arenas.back().data();
  }
  bool hasKernel(Kernel kernel) const override { return hasCpuKernel(kernel); }
  void launch(Kernel kernel, const std::vector<TensorRef> &ins,
              const std::vector<TensorRef> &outs,
              const std::vector<bool> &accumulate,
              const plan::KernelParams &params,
              const KernelContext &ctx) override {
    runCpuKernel(kernel, ins, outs, accumulate, params, ctx);
  }
  /// The optimizer's runs reach launchAll as on the CUDA device, which
  /// joins them, so that the executor's grouping is the same (and checked)
  /// on every backend; here they run one after another.
  bool launchesTogether(Kernel kernel) const override {
    return kernel == Kernel::AdamW;
  }
  void synchronize() override {}
  void upload(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void fillZero(void *dst, int64_t bytes, Stream) override {
    std::memset(dst, 0, bytes);
  }
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t bytes, int64_t rows, Stream) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char *>(dst) + r * dstPitch,
                  static_cast<const char *>(src) + r * srcPitch, bytes);
  }
  bool hasBf16() const override { return true; }
  void widen(float *dst, const uint16_t *src, int64_t n, Stream) override {
    widenBf16(src, dst, n);
  }
  void narrow(uint16_t *dst, const float *src, int64_t n, bool accumulate,
              Stream) override {
    for (int64_t e = 0; e < n; ++e)
      dst[e] = toBf16(accumulate ? fromBf16(dst[e]) + src[e] : src[e]);
  }
  void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                       int64_t inner, bool accumulate, Stream) override {
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) {
        const float *from = src + (i * b + j) * inner;
        float *to = dst + (j * a + i) * inner;
        if (accumulate)
          for (int64_t e = 0; e < inner; ++e)
            to[e] += from[e];
        else
          std::memmove(to, from, inner * sizeof(float));
      }
  }

private:
  std::list<std::vector<float>> arenas;
};
} // namespace

std::unique_ptr<Device> createCpuDevice(int blasThreads) {
  if (blasThreads > 0)
    openblas_set_num_threads(blasThreads);
  return std::make_unique<CpuDevice>();
}

} // namespace partita::runtime
