//===- SummarizeModel.cpp - tfm-summarize-model ---------------------------===//

#include "compiler/Analysis/ModelStats.h"
#include "passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace partita {
#define GEN_PASS_DEF_TFMSUMMARIZEMODEL
#include "passes/Passes.h.inc"

namespace {

/// 8030261248 -> "8,030,261,248".
std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && digits[i - 1] != '-' && (n - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

/// 8030261248 -> "8.03 B", 8384 bytes -> "8.38 KB" (decimal units).
std::string scaled(double value, llvm::StringRef unit) {
  static const char *prefixes[] = {"", "K", "M", "B", "T"};
  static const char *bytePrefixes[] = {"", "K", "M", "G", "T"};
  bool bytes = unit == "B";
  int i = 0;
  while (value >= 1000.0 && i < 4) {
    value /= 1000.0;
    ++i;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  if (i == 0)
    os << llvm::format("%.0f", value) << (bytes ? " B" : "");
  else
    os << llvm::format("%.2f ", value)
       << (bytes ? bytePrefixes[i] : prefixes[i]) << (bytes ? "B" : "");
  return s;
}

void printSummary(tfm::ModelOp model, bool stepMissing, llvm::raw_ostream &os) {
  ModelStats s = computeModelStats(model);
  os << "model \"" << model.getSymName() << "\": " << s.numBlocks
     << " blocks, hidden " << s.hiddenSize << ", " << s.numHeads << " heads ("
     << s.numKVHeads << " kv), vocab " << s.vocabSize
     << (s.tiedEmbeddings ? ", tied embeddings" : "") << "\n";
  os << "  parameters        " << withThousands(s.numParameters);
  if (s.numParameters >= 1000)
    os << " (" << scaled(s.numParameters, "") << ")";
  os << " in " << s.numParameterTensors << " tensors\n";
  os << "    in blocks       " << withThousands(s.blockParameters) << "\n";
  os << "    outside blocks  " << withThousands(s.otherParameters)
     << " (embeddings, final norm, LM head)\n";
  os << "  parameter memory  " << scaled(s.parameterBytes, "B");
  if (s.mixedElementTypes)
    os << " in mixed element types";
  else if (s.elementType)
    os << " as " << s.elementType;
  os << "\n";
  if (stepMissing) {
    os << "  step              not given (seq_len and global_batch)\n";
    return;
  }
  os << "  step              " << withThousands(s.globalBatch)
     << " sequences x " << withThousands(s.seqLen)
     << " tokens = " << withThousands(s.globalBatch * s.seqLen) << " tokens\n";
}

struct TfmSummarizeModelPass
    : impl::TfmSummarizeModelBase<TfmSummarizeModelPass> {
  void runOnOperation() override {
    bool stepMissing = getOperation()->hasAttr(tfm::kStepMissingAttrName);
    getOperation().walk([&](tfm::ModelOp model) {
      printSummary(model, stepMissing, llvm::errs());
    });
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partita
