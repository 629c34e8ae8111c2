//===- Kernels.h - CUDA kernels of the plan format --------------*- C++ -*-===//
//
// Host-side launchers of the fp32 kernels in Kernels.cu, one per kernel of
// docs/plan-format.md (the GEMMs go through cuBLASLt in CudaDevice.cpp).
// Every launcher enqueues on `stream` and returns; `acc` means "add to the
// output" and otherwise the output is overwritten. Outputs may alias inputs
// element for element, as the CPU kernels allow, except in attention and
// its backward (whose plans never alias them).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_KERNELS_H
#define PARTITA_RUNTIME_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstdint>

namespace partita::runtime::cuda {

enum class Unary { Gelu, GeluTanh, Silu };

/// y (+)= f(x), n elements.
void unary(Unary f, const float *x, float *y, bool acc, int64_t n,
           cudaStream_t stream);
/// dx (+)= dy * f'(x).
void unaryBackward(Unary f, const float *dy, const float *x, float *dx,
                   bool acc, int64_t n, cudaStream_t stream);
/// y (+)= silu(gate) * up.
void swiglu(const float *gate, const float *up, float *y, bool acc, int64_t n,
            cudaStream_t stream);
void swigluBackward(const float *dy, const float *gate, const float *up,
                    float *dgate, bool accGate, float *dup, bool accUp,
                    int64_t n, cudaStream_t stream);
/// y (+)= the sum of `count` inputs (at most 8).
void sum(const float *const *xs, int count, float *y, bool acc, int64_t n,
         cudaStream_t stream);
/// y (+)= x + bias[i % period]: bias_add (period = hidden) and
/// position_embedding (period = seq x hidden).
void addPeriodic(const float *x, const float *bias, int64_t period, float *y,
                 bool acc, int64_t n, cudaStream_t stream);
/// out[c] (+)= sum over i with i % period == c of x[i]: the bias and
/// position-embedding gradients. Without `acc`, all `outCount` elements of
/// out are overwritten (those past `period` with zero).
void sumPeriodic(const float *x, int64_t period, int64_t n, float *out,
                 int64_t outCount, bool acc, cudaStream_t stream);
/// [a][b][inner] blocks of src as [b][a][inner] in dst.
void transposeBlocks(float *dst, const float *src, int64_t a, int64_t b,
                     int64_t inner, bool acc, cudaStream_t stream);
/// bf16 (stored as uint16) to f32, and f32 to bf16 rounded to nearest even
/// (added to dst's value first when `acc`).
void widen(float *dst, const uint16_t *src, int64_t n, cudaStream_t stream);
void narrow(uint16_t *dst, const float *src, int64_t n, bool acc,
            cudaStream_t stream);
/// Block `part` of every outer row: y[o][0:width] = x[o][part*width:...].
void sliceColumns(const float *x, int64_t outer, int64_t inner, int64_t begin,
                  int64_t width, float *y, bool acc, cudaStream_t stream);

/// RMSNorm (bias == null, rms) or LayerNorm over the last dim `h`.
void norm(const float *x, const float *w, const float *b, float *y, bool acc,
          int64_t rows, int64_t h, double eps, bool rms, cudaStream_t stream);
/// dx, dw and (LayerNorm with bias) db; dw/db are summed over rows.
void normBackward(const float *dy, const float *x, const float *w, float *dx,
                  bool accDx, float *dw, bool accDw, float *db, bool accDb,
                  int64_t rows, int64_t h, double eps, bool rms,
                  cudaStream_t stream);
/// The widest hidden size the norm kernels take.
int64_t maxNormWidth();

/// Rotary embedding of [b, s, heads * d] with `invFreq` (rd / 2 values, on
/// the device); sign -1 is the backward rotation.
void rotary(const float *x, float *y, bool acc, int64_t b, int64_t s,
            int64_t heads, int64_t d, int64_t rd, const double *invFreq,
            float sign, cudaStream_t stream);

/// Token rows of `table` ([rows, h], the vocabulary from `start`); tokens
/// outside it give zero rows.
void embedding(const float *table, const int32_t *tokens, int64_t count,
               int64_t rows, int64_t h, int64_t start, float *y, bool acc,
               cudaStream_t stream);
void embeddingBackward(const float *dy, const int32_t *tokens, int64_t count,
                       int64_t rows, int64_t h, int64_t start, float *dtable,
                       bool acc, cudaStream_t stream);

struct AttentionShape {
  int64_t b, s, heads, kvHeads, d;
  bool causal;
  int64_t window; // 0: none
};
/// The head dimension the attention kernels take at most.
int64_t maxHeadDim();
/// Flash-style attention: O(s) memory per row, the s x s scores never
/// stored. q, o: [b, s, heads * d]; k, v: [b, s, kvHeads * d].
void attention(const AttentionShape &a, const float *q, const float *k,
               const float *v, float *o, bool acc, cudaStream_t stream);
/// Floats of workspace attentionBackward needs.
int64_t attentionBackwardWorkspace(const AttentionShape &a);
void attentionBackward(const AttentionShape &a, const float *dout,
                       const float *q, const float *k, const float *v,
                       float *dq, bool accDq, float *dk, bool accDk, float *dv,
                       bool accDv, float *workspace, cudaStream_t stream);

struct CrossEntropyShape {
  int64_t rows, v, start, vocabSize;
};
void crossEntropyMax(const CrossEntropyShape &c, const float *logits,
                     float *max, bool acc, cudaStream_t stream);
/// stats[2r] = sum exp(logit - max), stats[2r+1] = the label's logit (0
/// when another rank holds it).
void crossEntropyStats(const CrossEntropyShape &c, const float *logits,
                       const float *max, const int32_t *labels, float *stats,
                       bool acc, cudaStream_t stream);
void crossEntropyLoss(const float *max, const float *stats, int64_t rows,
                      double scale, float *loss, bool acc, cudaStream_t stream);
void crossEntropyBackward(const CrossEntropyShape &c, const float *logits,
                          const float *max, const float *stats,
                          const int32_t *labels, float scale, float *dlogits,
                          bool acc, cudaStream_t stream);

/// acc64 (one double on the device) += weight * sum of x^2.
void sumSquares(const float *x, int64_t n, double weight, double *acc64,
                cudaStream_t stream);
/// out[0] (+)= float(*acc64).
void storeScalar(const double *acc64, float *out, bool acc,
                 cudaStream_t stream);
/// out[0] (+)= min(1, clip / (sqrt(sumsq[0]) + 1e-6)), or 1 when clip is 0.
void clipCoefficient(const float *sumsq, double clip, float *out, bool acc,
                     cudaStream_t stream);

struct AdamWStep {
  double lr, beta1, beta2, eps, weightDecay, c1, c2;
  bool decay;
  int64_t begin; // this rank's first element (dp_shard) or 0
};
/// AdamW on a parameter of pn elements whose slice [begin, begin + chunk)
/// this rank updates with gradient g (chunk elements), scaled by clip[0].
/// With a master copy w (chunk elements, f32; null in f32 plans), the
/// update applies to w, written to nw, and p takes its values.
void adamw(const AdamWStep &s, const float *p, int64_t pn, const float *g,
           const float *m, const float *v, int64_t chunk, const float *clip,
           const float *w, float *np, bool accP, float *nm, bool accM,
           float *nv, bool accV, float *nw, bool accW, cudaStream_t stream);

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_KERNELS_H
