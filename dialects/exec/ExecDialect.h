//===- ExecDialect.h - The exec execution dialect ---------------*- C++ -*-===//

#ifndef PARTITA_DIALECTS_EXEC_EXECDIALECT_H
#define PARTITA_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include "partita/plan/Kernels.h"

#include "dialects/exec/ExecDialect.h.inc"
#include "dialects/exec/ExecEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/exec/ExecAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/exec/ExecOps.h.inc"

namespace partita::exec {

/// The decoder layer a launch belongs to (its `layer` attribute), if any.
std::optional<int64_t> launchLayer(mlir::Operation *launch);

/// The buffers a launch (kernel, collective, send, recv) reads and writes;
/// an output it accumulates into is both. A wait touches none.
void getLaunchAccesses(mlir::Operation *launch,
                       llvm::SmallVectorImpl<llvm::StringRef> &reads,
                       llvm::SmallVectorImpl<llvm::StringRef> &writes);

} // namespace partita::exec

#endif // PARTITA_DIALECTS_EXEC_EXECDIALECT_H
