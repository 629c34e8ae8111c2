//===- TfmOps.h - tfm operations and attributes -----------------*- C++ -*-===//

#ifndef PARTITA_DIALECTS_TFM_TFMOPS_H
#define PARTITA_DIALECTS_TFM_TFMOPS_H

#include "dialects/tfm/TfmDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tfm/TfmEnums.h.inc"

namespace partita::tfm {

/// Whether a #tfm.rope_scaling of `kind` uses the field `key` (its name in
/// the attribute's assembly).
bool ropeScalingHasField(RopeScalingKind kind, llvm::StringRef key);

} // namespace partita::tfm

#define GET_ATTRDEF_CLASSES
#include "dialects/tfm/TfmAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/tfm/TfmOps.h.inc"

namespace partita::tfm {

/// The MLP's activations, plain and gated: elementwise, so they keep a
/// tensor-parallel split as it is.
inline bool isActivation(mlir::Operation *op) {
  return mlir::isa<GeluOp, SiluOp, SwigluOp, GegluOp>(op);
}

} // namespace partita::tfm

#endif // PARTITA_DIALECTS_TFM_TFMOPS_H
