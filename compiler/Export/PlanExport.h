//===- PlanExport.h - exec programs to plan.json ----------------*- C++ -*-===//
//
// The plan a runtime executes, in the format of docs/plan-format.md.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_EXPORT_PLANEXPORT_H
#define PARTITA_COMPILER_EXPORT_PLANEXPORT_H

#include "compiler/CostModel/ParallelConfig.h"
#include "dialects/exec/ExecDialect.h"
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

/// The most micro-batches whose activations a rank holds at once under
/// `schedule`: of any of its model chunks, or of `chunk` alone.
int64_t maxInFlight(exec::ScheduleOp schedule,
                    std::optional<int64_t> chunk = std::nullopt);

/// Bytes of a buffer of `type` (at least one per element).
int64_t tensorBytes(mlir::RankedTensorType type);

/// The number under `key` of a dictionary made by numbersToAttr; NaN when
/// there is none.
double numberAt(mlir::DictionaryAttr dict, llvm::StringRef key);

/// A JSON object of numbers (and objects of numbers) as a dictionary
/// attribute, the form predictions travel in to plan.json; other values are
/// left out.
mlir::DictionaryAttr numbersToAttr(const llvm::json::Object &object,
                                   mlir::MLIRContext *context);

/// Over how many tp ranks the key/value heads are split: tp, or fewer when
/// tp exceeds the kv heads (each rank then holds one, replicated).
int64_t keyValueParts(mlir::ModuleOp module, const ParallelConfig &c);

/// The ranks of the `name` group (tp, tp_kv, dp, pp, tied, world) that
/// the rank at (pp, dp, tp) coordinates (p, d, t) belongs to; empty when it
/// belongs to none. `kvParts` is the number of key/value head groups over
/// tp.
std::vector<int64_t> groupMembers(llvm::StringRef name, const ParallelConfig &c,
                                  int64_t kvParts, int64_t p, int64_t d,
                                  int64_t t);

} // namespace partita

#endif // PARTITA_COMPILER_EXPORT_PLANEXPORT_H
