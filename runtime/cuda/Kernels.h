//===- Kernels.h - CUDA kernels of the plan format --------------*- C++ -*-===//
//
// Host-side launchers of the kernels in Kernels.cu, one per kernel of
// docs/plan-format.md (the GEMMs go through cuBLASLt in CudaDevice.cpp).
// Every launcher enqueues on `stream` and returns. Operands are f32 or bf16
// in place (In, Out): kernels read either, compute in f32 (double where the
// CPU kernels do), and round a bf16 output once, as the CPU backend does on
// its f32 copies. Outputs may alias inputs element for element, as the CPU
// kernels allow, except in attention and its backward (whose plans never
// alias them).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_KERNELS_H
#define PARTITA_RUNTIME_CUDA_KERNELS_H

#include "LaunchConfig.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace partita::runtime::cuda {

/// A kernel's input: f32 values, or bf16 ones (stored as uint16).
struct In {
  const void *data = nullptr;
  bool bf16 = false;
};
/// A kernel's output, f32 or bf16; `acc` adds to its values (in f32, then
/// rounded once) instead of overwriting them.
struct Out {
  void *data = nullptr;
  bool bf16 = false;
  bool acc = false;
};
inline In f32In(const float *p) { return {p, false}; }
/// An output read as an input.
PARTITA_HOST_DEVICE inline In asInput(Out y) { return {y.data, y.bf16}; }
inline Out f32Out(float *p, bool acc = false) { return {p, false, acc}; }

enum class Unary { Gelu, GeluTanh, Silu };

/// y (+)= f(x), n elements.
void unary(Unary f, In x, Out y, int64_t n, cudaStream_t stream);
/// dx (+)= dy * f'(x).
void unaryBackward(Unary f, In dy, In x, Out dx, int64_t n,
                   cudaStream_t stream);
/// y (+)= f(gate) * up: swiglu (silu) and geglu (either GELU).
void gated(Unary f, In gate, In up, Out y, int64_t n, cudaStream_t stream);
/// dgate (+)= dy * up * f'(gate), dup (+)= dy * f(gate).
void gatedBackward(Unary f, In dy, In gate, In up, Out dgate, Out dup,
                   int64_t n, cudaStream_t stream);
/// The most inputs one `sum` takes.
constexpr int kMaxSumInputs = 8;
/// y (+)= the sum of `count` inputs (at most kMaxSumInputs).
void sum(const In *xs, int count, Out y, int64_t n, cudaStream_t stream);
/// y (+)= x + bias[i % period]: bias_add (period = hidden) and
/// position_embedding (period = seq x hidden).
void addPeriodic(In x, In bias, int64_t period, Out y, int64_t n,
                 cudaStream_t stream);
/// Floats of workspace sumPeriodic needs.
inline int64_t sumPeriodicWorkspace(int64_t period) { return period; }
/// out[c] (+)= sum over i with i % period == c of x[i]: the bias and
/// position-embedding gradients. Without `acc`, all `outCount` elements of
/// out are overwritten (those past `period` with zero). The sums gather in
/// `workspace` (f32) and reach `out` rounded once.
void sumPeriodic(In x, int64_t period, int64_t n, Out out, int64_t outCount,
                 float *workspace, cudaStream_t stream);
/// [a][b][inner] blocks of src as [b][a][inner] in dst; with a = b = 1 a
/// copy, which also widens bf16 to f32 or rounds f32 to bf16.
void transposeBlocks(In src, Out dst, int64_t a, int64_t b, int64_t inner,
                     cudaStream_t stream);
/// Block `part` of every outer row: y[o][0:width] = x[o][part*width:...].
void sliceColumns(In x, int64_t outer, int64_t inner, int64_t begin,
                  int64_t width, Out y, cudaStream_t stream);

/// RMSNorm (no bias, rms) or LayerNorm over the last dim `h`, scaled by
/// weightOffset + w (Gemma's RMSNorm: 1 + w).
void norm(In x, In w, In b, Out y, int64_t rows, int64_t h, double eps,
          bool rms, float weightOffset, cudaStream_t stream);
/// Floats of workspace normBackward needs.
inline int64_t normBackwardWorkspace(int64_t h) { return 2 * h; }
/// dx, dw and (LayerNorm with bias, db.data non-null) db; dw and db are
/// summed over rows in `workspace` and rounded once.
void normBackward(In dy, In x, In w, Out dx, Out dw, Out db, int64_t rows,
                  int64_t h, double eps, bool rms, float weightOffset,
                  float *workspace, cudaStream_t stream);
/// The widest hidden size the norm kernels take.
int64_t maxNormWidth();

/// Rotary embedding of [b, s, heads * d] with `invFreq` (rd / 2 values, on
/// the device), the rotated channels scaled by `magnitude`; sign -1 is the
/// backward rotation.
void rotary(In x, Out y, int64_t b, int64_t s, int64_t heads, int64_t d,
            int64_t rd, const double *invFreq, double magnitude, float sign,
            cudaStream_t stream);

/// Token rows of `table` ([rows, h], the vocabulary from `start`) times
/// `scale`; tokens outside it give zero rows.
void embedding(In table, const int32_t *tokens, int64_t count, int64_t rows,
               int64_t h, int64_t start, float scale, Out y,
               cudaStream_t stream);
/// Bytes of workspace embeddingBackward needs for `count` tokens and a
/// table of `rows` rows.
int64_t embeddingBackwardWorkspace(int64_t count, int64_t rows);
/// dtable (+)= the sum of scale * dy's rows per token. Tokens are sorted
/// first, so each table row is summed by one block in token order
/// (deterministic, and a bf16 row is rounded once).
void embeddingBackward(In dy, const int32_t *tokens, int64_t count,
                       int64_t rows, int64_t h, int64_t start, float scale,
                       Out dtable, void *workspace, cudaStream_t stream);

struct AttentionShape {
  int64_t b, s, heads, kvHeads, d;
  bool causal;
  int64_t window; // 0: none
  /// The shared memory a block may opt into on this GPU.
  int64_t sharedBytes = 0;
};
/// The head dimension the attention kernels take at most.
int64_t maxHeadDim();
/// The scores' scale, 1 / sqrt(d), as every attention family takes it (so
/// that one family's log-sum-exp serves another's backward).
inline float attentionScale(int64_t d) {
  return float(1.0 / std::sqrt(double(d)));
}
/// Whether attention runs on tensor cores (TensorCoreAttention.cu): bf16
/// q, k and v (and dO) with head dimension up to 128, where the GPU gives a
/// block the chosen kernels' shared memory (sm_80 and sm_90 do; sm_86 and
/// sm_89, 99 KiB, do for the WMMA kernels' heads up to 32 and every head
/// of the register-resident ones). Other launches run the f32 CUDA-core
/// kernels.
bool attentionOnTensorCores(const AttentionShape &a, In q, In k, In v);
/// The tensor-core attention's kernels, chosen by PARTITA_CUDA_ATTENTION:
/// `wmma` stages scores and accumulators in shared memory through WMMA
/// tiles; `mma` keeps them in registers (mma.sync and ldmatrix, as
/// FlashAttention-2 does); `mma-atomic` is `mma` with a one-pass backward,
/// which sums dq over the key blocks by f32 atomics, as FlashAttention-2
/// does: 5 tile products to the two-pass backward's 7, in dq's size of f32
/// workspace, not reproducible bit for bit run to run; `cudnn` runs the
/// launches cuDNN takes on its fused engines (CudnnAttention.h, where the
/// device runs them) and the others on `mma`. Another value is an error.
/// Unset, `cudnn` where the build has cuDNN (the fastest on an H200,
/// docs/gpu.md), and `mma` elsewhere (nearly as fast as `mma-atomic` and
/// reproducible bit for bit).
enum class AttentionKernels { Wmma, Registers, RegistersSummedDq, Cudnn };
AttentionKernels attentionKernels();
/// Whether PARTITA_CUDA_ATTENTION names the family, rather than leaving
/// the default.
bool attentionKernelsNamed();
/// The family of our own kernels that runs: `cudnn`'s launches that cuDNN
/// does not take run on `mma`.
AttentionKernels ownAttentionKernels();
/// Flash-style attention: O(s) memory per row, the s x s scores never
/// stored. q, o: [b, s, heads * d]; k, v: [b, s, kvHeads * d]. Unless
/// null, `lse` ([b, heads, s] f32) gets each query row's log-sum-exp of
/// its scaled scores, which spares the backward a pass over the keys.
void attention(const AttentionShape &a, In q, In k, In v, Out o, float *lse,
               cudaStream_t stream);
/// Floats of workspace attentionBackward needs for these operands: D per
/// query row, the log-sum-exp too where the forward kept none (`lseKept`
/// false), and dq's f32 sums where the one-pass backward runs.
int64_t attentionBackwardWorkspace(const AttentionShape &a, In dout, In q, In k,
                                   In v, bool lseKept);
/// dq, dk, dv of attention from dO, its inputs, its output o and the
/// forward's `lse`; with lse null, a pass over the keys computes it first.
void attentionBackward(const AttentionShape &a, In dout, In q, In k, In v, In o,
                       const float *lse, Out dq, Out dk, Out dv,
                       float *workspace, cudaStream_t stream);

struct CrossEntropyShape {
  int64_t rows, v, start, vocabSize;
};
void crossEntropyMax(const CrossEntropyShape &c, In logits, Out max,
                     cudaStream_t stream);
/// stats[2r] = sum exp(logit - max), stats[2r+1] = the label's logit (0
/// when another rank holds it).
void crossEntropyStats(const CrossEntropyShape &c, In logits, In max,
                       const int32_t *labels, Out stats, cudaStream_t stream);
void crossEntropyLoss(In max, In stats, int64_t rows, double scale, Out loss,
                      cudaStream_t stream);
void crossEntropyBackward(const CrossEntropyShape &c, In logits, In max,
                          In stats, const int32_t *labels, float scale,
                          Out dlogits, cudaStream_t stream);

/// One input of sumSquares: n elements of x, weighted.
struct SquaresTerm {
  In x;
  int64_t n = 0;
  double weight = 1;
};
/// acc64 (one double on the device) += the sum over terms of weight * the
/// sum of x^2, in a few launches of many terms each.
void sumSquares(const std::vector<SquaresTerm> &terms, double *acc64,
                cudaStream_t stream);
/// out[0] (+)= float(*acc64).
void storeScalar(const double *acc64, Out out, cudaStream_t stream);
/// out[0] (+)= min(1, clip / (sqrt(sumsq[0]) + 1e-6)), or 1 when clip is 0.
void clipCoefficient(In sumsq, double clip, Out out, cudaStream_t stream);

/// What every parameter of an AdamW step shares.
struct AdamWStep {
  double lr, beta1, beta2, eps, weightDecay, c1, c2;
};
/// One parameter of an AdamW step: of pn elements, of which this rank
/// updates the slice [begin, begin + chunk) (begin 0 unless ZeRO shards
/// it) with gradient g (chunk elements), scaled by clip[0]. With a master
/// copy w (chunk elements; w.data null in f32 plans), the update applies
/// to w, written to nw, and p takes its values.
struct AdamWTensor {
  In p, g, m, v, clip, w;
  Out np, nm, nv, nw;
  int64_t pn = 0, chunk = 0, begin = 0;
  bool decay = false;
};
/// AdamW on every tensor (multi-tensor: a few launches of many tensors
/// each, a thread per pack of kPack elements).
void adamw(const AdamWStep &s, const std::vector<AdamWTensor> &tensors,
           cudaStream_t stream);

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_KERNELS_H
