//===- Passes.h - Partita compiler passes -----------------------*- C++ -*-===//

#ifndef PARTITA_PASSES_PASSES_H
#define PARTITA_PASSES_PASSES_H

#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/tfm/TfmOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace partita {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The module's #dist.topology, or the default topology, which it attaches
/// to the module, with `note` saying that no topology was given.
struct Topology;
Topology moduleTopology(mlir::ModuleOp module, std::string &note);

/// The module's #dist.strategy; without one, an error saying that `pass`
/// needs it, and null.
dist::StrategyAttr requireStrategy(mlir::ModuleOp module, llvm::StringRef pass);

/// Registers every Partita pass and named pipeline with the global registry.
void registerPartitaPassesAndPipelines();

} // namespace partita

#endif // PARTITA_PASSES_PASSES_H
