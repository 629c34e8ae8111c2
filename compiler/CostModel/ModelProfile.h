//===- ModelProfile.h - A tfm.model as the cost model sees it ---*- C++ -*-===//
//
// What the cost model needs from the graph, per sequence of the global
// batch: the GEMMs of each layer and how tensor parallelism splits them,
// the attention shape, elementwise traffic, the activations kept for the
// backward pass, and parameter counts. Read once; costing a configuration
// then never walks the IR.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_COSTMODEL_MODELPROFILE_H
#define PARTITA_COMPILER_COSTMODEL_MODELPROFILE_H

#include "dialects/tfm/TfmOps.h"

#include <string>
#include <vector>

namespace partita {

/// y[tokens, n] = x[tokens, k] W^T. Column-parallel GEMMs split n over the
/// tensor-parallel group, row-parallel ones split k and end in a reduction.
struct GemmProfile {
  std::string name;
  int64_t n = 0, k = 0;
  bool rowParallel = false;
  /// A key or value projection: split over min(tp, kv heads) parts.
  bool keyValue = false;
  /// Its product reaches only the block's result (through residual
  /// additions), which the backward never reads: a full recomputation
  /// skips it (exec-build-backward), with its tensor-parallel reduction.
  bool unreadByBackward = false;
};

/// Widths are per token; "boundary" tensors are the residual stream between
/// the tensor-parallel regions (replicated over tp unless sequence
/// parallel), "sharded" ones live inside them (split over tp).
struct LayerProfile {
  int64_t params = 0;
  /// Of which key/value projection weights and biases, and those every
  /// tensor-parallel rank holds whole (norms, row-parallel biases).
  int64_t keyValueParams = 0, replicatedParams = 0;
  std::vector<GemmProfile> gemms;
  int64_t heads = 0, kvHeads = 0, headDim = 0;
  /// Sliding window (0: full causal context).
  int64_t window = 0;
  /// A norm spans several heads of a tensor-parallel projection (OLMo-2's
  /// query and key norms): its statistics would need every rank's heads,
  /// so tensor parallelism is not available.
  bool normSpansHeads = false;
  /// Elements read plus written by the forward pass of elementwise ops;
  /// of which, by ops whose results reach only the block's result (the
  /// residual additions after unread GEMMs): a full recomputation skips
  /// them too.
  double boundaryTraffic = 0, shardedTraffic = 0;
  double unreadBoundaryTraffic = 0, unreadShardedTraffic = 0;
  /// Elements kept for the backward pass (no recomputation).
  double savedBoundary = 0, savedSharded = 0;
  /// Row-parallel GEMMs: one tensor-parallel reduction each, per pass.
  int64_t rowParallelGemms = 0;
  /// A parallel residual (GPT-NeoX): two branches that each end in a
  /// row-parallel GEMM and neither reads the other, in program order; the
  /// GEMMs of each (indices into `gemms`) and whether it holds the attention
  /// core. Empty for a sequential block.
  struct Branch {
    std::vector<size_t> gemms;
    bool attention = false;
  };
  std::vector<Branch> parallelBranches;
  /// Row-parallel GEMMs a full recomputation skips (unreadByBackward).
  int64_t unreadRowParallelGemms() const {
    int64_t n = 0;
    for (const GemmProfile &g : gemms)
      n += g.rowParallel && g.unreadByBackward;
    return n;
  }
};

struct ModelProfile {
  std::string name;
  int64_t globalBatch = 0, seqLen = 0, hidden = 0, vocab = 0;
  int64_t elementBytes = 2;
  mlir::Type elementType;
  std::vector<LayerProfile> layers;
  /// Token (and learned position) embedding tables, final norm, LM head
  /// (0 when tied to the token embedding).
  int64_t embeddingParams = 0, finalNormParams = 0, headParams = 0;
  int64_t numParameters = 0;
};

/// Profiles a verified model whose blocks hold the layers.
ModelProfile profileModel(tfm::ModelOp model);

} // namespace partita

#endif // PARTITA_COMPILER_COSTMODEL_MODELPROFILE_H
