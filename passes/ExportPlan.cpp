//===- ExportPlan.cpp - exec-export-plan
//-----------------------------------===//

#include "compiler/Export/PlanExport.h"
#include "passes/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

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
    std::string error;
    auto file = mlir::openOutputFile(output, &error);
    if (!file) {
      module.emitError("exec-export-plan: ") << error;
      return signalPassFailure();
    }
    file->os() << llvm::formatv("{0:1}", llvm::json::Value(std::move(*plan)))
               << "\n";
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partita
