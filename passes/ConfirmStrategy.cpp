//===- ConfirmStrategy.cpp - dist-confirm-strategy ------------------------===//

#include "passes/ConfirmStrategy.h"
#include "compiler/CostModel/ParallelConfig.h"
#include "compiler/Export/PlanExport.h"
#include "compiler/Search/SearchReport.h"
#include "compiler/Topology/Topology.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

namespace partita {
#define GEN_PASS_DEF_DISTCONFIRMSTRATEGY
#include "passes/Passes.h.inc"

using namespace mlir;

double ConfirmedCandidate::perSequence(double stepS) const {
  return stepS / double(strategy.getDp() * strategy.getMicroBatchSize() *
                        strategy.getNumMicroBatches());
}

namespace {

/// `strategy` compiled to a plan from `module`: its estimates and peak.
ConfirmedCandidate compileCandidate(ModuleOp module,
                                    dist::StrategyAttr strategy,
                                    const ConfirmSettings &settings) {
  OwningOpRef<ModuleOp> plan = module.clone();
  (*plan)->setAttr(dist::kStrategyAttrName, strategy);
  (*plan)->removeAttr("dist.predicted");
  PassManager pm(module.getContext());
  pm.enableVerifier(false);
  pm.addPass(createDistEstimateCost({"", "none", "-", settings.costParams}));
  addPlanLowering(pm, settings.overlap, /*quiet=*/true, /*trace=*/"",
                  settings.costParams);
  ConfirmedCandidate c{strategy};
  if (failed(pm.run(*plan)))
    return c;
  c.closedFormS = numberAt(
      (*plan)->getAttrOfType<DictionaryAttr>("dist.predicted"), "step_time_s");
  c.simulatedS = numberAt(
      (*plan)->getAttrOfType<DictionaryAttr>("exec.simulated"), "step_time_s");
  c.peakBytes = numberAt((*plan)->getAttrOfType<DictionaryAttr>("exec.memory"),
                         "device_bytes_per_rank");
  return c;
}

} // namespace

Confirmation confirmCandidates(ModuleOp module,
                               llvm::ArrayRef<dist::StrategyAttr> ranked,
                               const ConfirmSettings &settings) {
  std::string note;
  Topology topology = moduleTopology(module, note);
  Confirmation result;
  // As in the search, a cap lowers the memory a device may use; it cannot
  // add any.
  result.capBytes =
      settings.memoryCapGib > 0
          ? std::min(settings.memoryCapGib * kGiB, topology.device.memoryBytes)
          : topology.device.memoryBytes;
  std::vector<ConfirmedCandidate> &checked = result.checked;
  // The fastest that fits (per sequence, as the search ranks), or the
  // smallest for the memory objective, the faster of equals.
  auto better = [&](const ConfirmedCandidate &a, const ConfirmedCandidate &b) {
    if (settings.forMemory && a.peakBytes != b.peakBytes)
      return a.peakBytes < b.peakBytes;
    return a.perSequence(a.simulatedS) < b.perSequence(b.simulatedS);
  };
  auto bestThatFits = [&]() {
    int best = -1;
    for (auto [k, c] : llvm::enumerate(checked))
      if (c.peakBytes <= result.capBytes &&
          (best < 0 || better(c, checked[best])))
        best = int(k);
    return best;
  };
  // The closed form is a few percent off the simulation either way, and
  // missed a cost of the last plan checked that it may not of the next.
  for (auto [rank, strategy] : llvm::enumerate(ranked)) {
    int best = bestThatFits();
    if (int64_t(rank) >= std::max<int64_t>(1, settings.candidates) &&
        best >= 0 &&
        (settings.forMemory ||
         checked.back().perSequence(checked.back().closedFormS) >=
             1.01 * checked[best].perSequence(checked[best].simulatedS)))
      break;
    checked.push_back(compileCandidate(module, strategy, settings));
  }
  result.chosen = bestThatFits();
  return result;
}

void printConfirmation(const Confirmation &confirmation,
                       llvm::raw_ostream &os) {
  os << "confirmed by simulation (step time: closed form, simulated; device "
        "memory of the memory plan and the runtime, of "
     << llvm::format("%.1f", confirmation.capBytes / kGiB)
     << " GiB per device):\n";
  for (auto [k, c] : llvm::enumerate(confirmation.checked)) {
    ParallelConfig config = fromStrategyAttr(c.strategy);
    os << llvm::format("  %s %-84s %9.3f s %9.3f s %7.1f GiB%s\n",
                       int(k) == confirmation.chosen ? "*" : " ",
                       candidateText(config).c_str(), c.closedFormS,
                       c.simulatedS, c.peakBytes / kGiB,
                       std::isnan(c.simulatedS) ? "  (does not compile)"
                       : c.peakBytes > confirmation.capBytes
                           ? "  (does not fit)"
                           : "");
  }
}

namespace {

struct DistConfirmStrategyPass
    : impl::DistConfirmStrategyBase<DistConfirmStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto best =
        module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
    if (!best) {
      requireStrategy(module, "dist-confirm-strategy");
      return signalPassFailure();
    }
    if (objective != "throughput" && objective != "memory") {
      module.emitError("dist-confirm-strategy: objective must be throughput "
                       "or memory, not '")
          << objective << "'";
      return signalPassFailure();
    }
    SmallVector<dist::StrategyAttr> ranked{best};
    if (auto runnersUp = module->getAttrOfType<ArrayAttr>("dist.runners_up"))
      for (Attribute a : runnersUp)
        if (auto s = dyn_cast<dist::StrategyAttr>(a))
          ranked.push_back(s);
    module->removeAttr("dist.runners_up");
    Confirmation confirmation = confirmCandidates(
        module, ranked,
        {candidates, memoryCapGib, costParams, overlap, objective == "memory"});
    printConfirmation(confirmation, llvm::errs());
    if (confirmation.chosen < 0) {
      mlir::emitWarning(module.getLoc(),
                        "dist-confirm-strategy: no candidate's memory plan "
                        "fits; keeping the search's choice");
      return;
    }
    module->setAttr(dist::kStrategyAttrName,
                    confirmation.checked[confirmation.chosen].strategy);
  }
};

} // namespace
} // namespace partita
