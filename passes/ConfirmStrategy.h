//===- ConfirmStrategy.h - Candidates checked on their plans ----*- C++ -*-===//
//
// The closed form ranks the search's candidates; confirmation compiles the
// first of them to plans, memory-plans and simulates each, and keeps the
// fastest whose memory plan fits (dist-confirm-strategy, and the search
// itself when plan-opt searches).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_PASSES_CONFIRMSTRATEGY_H
#define PARTITA_PASSES_CONFIRMSTRATEGY_H

#include "dialects/dist/DistDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <string>
#include <vector>

namespace partita {

struct ConfirmSettings {
  /// How many of the best candidates to check at least.
  int64_t candidates = 3;
  /// Memory a device may use, in GiB (0: all of it).
  double memoryCapGib = 0;
  std::string costParams;
  bool overlap = true;
  /// Keep the smallest that fits (the memory objective), not the fastest.
  bool forMemory = false;
};

/// One candidate on its plan: both step-time estimates and the memory
/// plan's peak per device (NaN where its plan does not compile).
struct ConfirmedCandidate {
  dist::StrategyAttr strategy;
  double closedFormS = NAN, simulatedS = NAN, peakBytes = NAN;
  /// Seconds per sequence, as the search ranks (with --free-global-batch
  /// the candidates' batches differ).
  double perSequence(double stepS) const;
};

struct Confirmation {
  /// The candidates checked, in the closed form's order.
  std::vector<ConfirmedCandidate> checked;
  /// The one kept, an index into `checked`; -1 when none fits.
  int chosen = -1;
  /// The memory a device may use.
  double capBytes = 0;
};

/// Checks `ranked` (the closed form's order, best first): the first
/// `settings.candidates`, and further ones while none fits, or (for
/// throughput) while the last one checked promised better than the
/// fastest that fits simulates, or within 1% of it.
Confirmation confirmCandidates(mlir::ModuleOp module,
                               llvm::ArrayRef<dist::StrategyAttr> ranked,
                               const ConfirmSettings &settings);

/// The table of the candidates checked, the one kept starred.
void printConfirmation(const Confirmation &confirmation, llvm::raw_ostream &os);

} // namespace partita

#endif // PARTITA_PASSES_CONFIRMSTRATEGY_H
