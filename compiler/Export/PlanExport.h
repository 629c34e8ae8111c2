//===- PlanExport.h - exec programs to plan.json ----------------*- C++ -*-===//
//
// The plan a runtime executes, in the format of docs/plan-format.md.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_EXPORT_PLANEXPORT_H
#define PARTITA_COMPILER_EXPORT_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace partita {

/// The version written into plan.json; a runtime rejects other versions.
constexpr int64_t kPlanFormatVersion = 1;

/// The plan of a module holding scheduled exec programs, a #dist.strategy
/// and a #dist.topology; an error names what is missing.
llvm::Expected<llvm::json::Object> exportPlan(mlir::ModuleOp module);

/// Rank of (pp, dp, tp) coordinates: tensor parallelism innermost, so that
/// tp groups are consecutive ranks (and devices of one node).
inline int64_t meshRank(int64_t ppRank, int64_t dpRank, int64_t tpRank,
                        int64_t dp, int64_t tp) {
  return (ppRank * dp + dpRank) * tp + tpRank;
}

} // namespace partita

#endif // PARTITA_COMPILER_EXPORT_PLANEXPORT_H
