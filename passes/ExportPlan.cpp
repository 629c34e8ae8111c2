//===- ExportPlan.cpp - exec-export-plan
//-----------------------------------===//

#include "compiler/Export/PlanExport.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace partita {
#define GEN_PASS_DEF_EXECEXPORTPLAN
#include "passes/Passes.h.inc"

namespace {

struct ExecExportPlanPass : impl::ExecExportPlanBase<ExecExportPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
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
