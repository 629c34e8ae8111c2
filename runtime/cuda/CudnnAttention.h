//===- CudnnAttention.h - attention on cuDNN's fused engines ----*- C++ -*-===//
//
// The `cudnn` family of PARTITA_CUDA_ATTENTION: attention forward and
// backward on cuDNN's fused flash-attention engines, described through
// cuDNN's graph API (backend descriptors) as the scaled dot product, causal
// mask, softmax with its log-sum-exp, and the two products, which cuDNN
// fuses into one kernel each way. A plan per shape, chosen by cuDNN's
// heuristics, is built once and kept. Launches it does not take run on our
// own kernels (Kernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CUDA_CUDNNATTENTION_H
#define PARTITA_RUNTIME_CUDA_CUDNNATTENTION_H

#include "Kernels.h"

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

namespace partita::runtime::cuda {

/// Whether this build has cuDNN (found beside CUDA, or in the nvidia-cudnn
/// wheel of a GPU machine's PyTorch).
bool cudnnBuilt();
/// The cuDNN this process loaded (major x 10000 + minor x 100 + patch), 0
/// without cuDNN.
int64_t cudnnVersion();

/// cuDNN's attention on one device.
class CudnnAttention {
public:
  /// Device memory for a call, in bytes; the pointer stays valid until the
  /// call's work on its stream is done.
  using Workspace = std::function<void *(int64_t bytes)>;

  /// A cuDNN handle on the current device; throws with cuDNN's reason where
  /// it cannot (no cuDNN in this build, or none that runs here).
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Why cuDNN does not take a launch of these operands and results, ""
  /// where it does: every operand and result bf16 and 16-byte aligned (the
  /// log-sum-exp `lse` too), results written (not added to), the backward
  /// given the forward's `lse`, and a shape shapeRefusal() takes.
  std::string refusal(const AttentionShape &a,
                      std::initializer_list<In> operands,
                      std::initializer_list<Out> results, const float *lse,
                      bool backward) const;
  /// The shape's part of refusal() on a GPU of compute capability
  /// `capability` (major x 10 + minor) with this process's cuDNN: heads a
  /// multiple of 8 up to 128 (256 on sm_90), grouped evenly, a backward
  /// over sequences in whole tiles of 128 before cuDNN 9.16, and with 9.14.0
  /// no non-causal window over more than 1024 keys (what cudnn-frontend
  /// refuses).
  static std::string shapeRefusal(const AttentionShape &a, int capability,
                                  bool backward);
  /// The cuDNN attention plans this process has executed (tests check that
  /// cuDNN, not a fallback, ran).
  static int64_t executions();

  /// attention() (Kernels.h) on cuDNN: o and, unless null, lse.
  void forward(const AttentionShape &a, In q, In k, In v, Out o, float *lse,
               const Workspace &workspace, cudaStream_t stream);
  /// attentionBackward() on cuDNN, from the forward's `lse` (not null).
  void backward(const AttentionShape &a, In dout, In q, In k, In v, In o,
                const float *lse, Out dq, Out dk, Out dv,
                const Workspace &workspace, cudaStream_t stream);

private:
  int capability = 0;
  struct State;
  std::unique_ptr<State> state;
};

/// What a machine without a GPU can learn of the graphs: given cuDNN's
/// description of a GPU (its device-property JSON), how many of the engine
/// configurations cuDNN's heuristics propose for the forward or backward
/// graph of `a` it accepts, building their kernels up to loading them
/// (which needs a driver). `statuses` lists each configuration's outcome.
struct CudnnSupport {
  int candidates = 0, accepted = 0;
  std::string statuses;
};
CudnnSupport cudnnAttentionSupport(const std::string &deviceJson,
                                   const AttentionShape &a, bool backward);

} // namespace partita::runtime::cuda

#endif // PARTITA_RUNTIME_CUDA_CUDNNATTENTION_H
