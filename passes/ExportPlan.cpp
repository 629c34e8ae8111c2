//===- ExportPlan.cpp - exec-export-plan ----------------------------------===//

#include "compiler/Export/PlanExport.h"
#include "compiler/Topology/Topology.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace partita {
#define GEN_PASS_DEF_EXECEXPORTPLAN
#include "passes/Passes.h.inc"

namespace {

/// A plan that needs more than the device has would only fail on it: an
/// error, unless asked for anyway. A module without a memory plan or a
/// topology (a hand-built one) has nothing to compare.
mlir::LogicalResult checkFits(mlir::ModuleOp module) {
  auto memory = module->getAttrOfType<mlir::DictionaryAttr>("exec.memory");
  auto topology =
      module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName);
  double needed = numberAt(memory, "device_bytes_per_rank");
  if (!topology || std::isnan(needed))
    return mlir::success();
  Topology t = fromAttr(topology);
  double device = t.device.memoryBytes;
  if (needed <= device)
    return mlir::success();
  return module.emitError(llvm::formatv(
      "exec-export-plan: the plan needs {0:F2} GiB per rank (arena {1:F2}, "
      "runtime {2:F2}) and the device ({3}) has {4:F2} GiB: it would not fit. "
      "Choose a strategy that fits, or more or larger devices, or write it "
      "anyway with --allow-unfit-plan",
      needed / kGiB, numberAt(memory, "peak_bytes_per_rank") / kGiB,
      numberAt(memory, "runtime_bytes_per_rank") / kGiB, t.device.kind,
      device / kGiB));
}

struct ExecExportPlanPass : impl::ExecExportPlanBase<ExecExportPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (!allowUnfit && failed(checkFits(module)))
      return signalPassFailure();
    llvm::Expected<llvm::json::Object> plan = exportPlan(module);
    if (!plan) {
      module.emitError("exec-export-plan: ")
          << llvm::toString(plan.takeError());
      return signalPassFailure();
    }
    std::string text =
        llvm::formatv("{0:1}", llvm::json::Value(std::move(*plan))).str() +
        "\n";
    if (llvm::Error error = writeOutputFile(output, text)) {
      module.emitError("exec-export-plan: ")
          << llvm::toString(std::move(error));
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partita
