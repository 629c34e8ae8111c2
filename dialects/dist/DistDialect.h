//===- DistDialect.h - The dist distribution dialect ------------*- C++ -*-===//

#ifndef PARTITA_DIALECTS_DIST_DISTDIALECT_H
#define PARTITA_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/dist/DistDialect.h.inc"
#include "dialects/dist/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dist/DistTypes.h.inc"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

namespace partita::dist {
/// The names of the module attributes holding the topology and the chosen
/// strategy.
constexpr llvm::StringLiteral kTopologyAttrName = "dist.topology";
constexpr llvm::StringLiteral kStrategyAttrName = "dist.strategy";

/// Whether `op` is one of the collectives `dist.async` may hold.
inline bool isCollective(mlir::Operation *op) {
  return mlir::isa<AllReduceOp, AllGatherOp, ReduceScatterOp>(op);
}
} // namespace partita::dist

#endif // PARTITA_DIALECTS_DIST_DISTDIALECT_H
