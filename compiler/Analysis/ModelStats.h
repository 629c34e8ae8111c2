//===- ModelStats.h - What a tfm.model holds --------------------*- C++ -*-===//

#ifndef PARTITA_COMPILER_ANALYSIS_MODELSTATS_H
#define PARTITA_COMPILER_ANALYSIS_MODELSTATS_H

#include "dialects/tfm/TfmOps.h"

#include <cstdint>

namespace partita {

/// Sizes read off a verified tfm.model. Every figure is derived from the IR,
/// so it holds for any model the dialect can express.
struct ModelStats {
  int64_t numParameters = 0;
  /// Parameters declared inside tfm.block regions.
  int64_t blockParameters = 0;
  /// Parameters outside blocks: embeddings, final norm, LM head.
  int64_t otherParameters = 0;
  int64_t numParameterTensors = 0;
  int64_t numBlocks = 0;
  int64_t globalBatch = 0;
  int64_t seqLen = 0;
  int64_t hiddenSize = 0;
  int64_t vocabSize = 0;
  /// Taken from the first attention op (0 if there is none).
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  /// The parameters' element type; null when there are none or when they
  /// mix types (see mixedElementTypes).
  mlir::Type elementType;
  bool mixedElementTypes = false;
  /// Bytes of one copy of the parameters in the model's element type.
  int64_t parameterBytes = 0;
  /// True when the LM head reuses the token embedding table.
  bool tiedEmbeddings = false;
};

ModelStats computeModelStats(tfm::ModelOp model);

} // namespace partita

#endif // PARTITA_COMPILER_ANALYSIS_MODELSTATS_H
