//===- ModelStats.cpp - What a tfm.model holds ----------------------------===//

#include "compiler/Analysis/ModelStats.h"

using namespace mlir;

namespace partita {

ModelStats computeModelStats(tfm::ModelOp model) {
  ModelStats stats;
  auto tokens = cast<RankedTensorType>(model.getTokens().getType());
  stats.globalBatch = tokens.getDimSize(0);
  stats.seqLen = tokens.getDimSize(1);

  model.walk([&](Operation *op) {
    if (auto param = dyn_cast<tfm::ParamOp>(op)) {
      int64_t n = param.getNumElements();
      stats.numParameters += n;
      ++stats.numParameterTensors;
      if (param->getParentOfType<tfm::BlockOp>())
        stats.blockParameters += n;
      else
        stats.otherParameters += n;
      Type elem = param.getType().getElementType();
      if (stats.numParameterTensors == 1)
        stats.elementType = elem;
      else if (elem != stats.elementType)
        stats.mixedElementTypes = true;
      stats.parameterBytes += n * elem.getIntOrFloatBitWidth() / 8;
    } else if (isa<tfm::BlockOp>(op)) {
      ++stats.numBlocks;
    } else if (auto embedding = dyn_cast<tfm::EmbeddingOp>(op)) {
      RankedTensorType table = embedding.getTable().getType();
      stats.vocabSize = table.getDimSize(0);
      stats.hiddenSize = table.getDimSize(1);
    } else if (auto attention = dyn_cast<tfm::AttentionOp>(op)) {
      if (stats.numHeads == 0) {
        stats.numHeads = attention.getNumHeads();
        stats.numKVHeads = attention.getNumKvHeads();
      }
    } else if (auto head = dyn_cast<tfm::LmHeadOp>(op)) {
      stats.tiedEmbeddings =
          llvm::any_of(head.getWeight().getUsers(), [](Operation *user) {
            return isa<tfm::EmbeddingOp>(user);
          });
    }
  });
  return stats;
}

} // namespace partita
