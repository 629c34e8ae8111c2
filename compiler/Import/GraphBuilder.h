//===- GraphBuilder.h - ModelSpec to tfm IR ---------------------*- C++ -*-===//

#ifndef PARTITA_COMPILER_IMPORT_GRAPHBUILDER_H
#define PARTITA_COMPILER_IMPORT_GRAPHBUILDER_H

#include "compiler/Import/ModelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace partita {

/// Builds a module holding one verified `tfm.model` for the spec: the
/// forward graph of one training step with global shapes. Returns null (after
/// emitting diagnostics) if the result does not verify.
mlir::OwningOpRef<mlir::ModuleOp> buildModelModule(const ModelSpec &spec,
                                                   mlir::MLIRContext &context);

/// Reads a spec file (see readModelSpecFile) and builds its module. Import
/// errors are returned as the llvm::Error.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModelFile(llvm::StringRef path, const TrainingOverrides &overrides,
                mlir::MLIRContext &context);

/// The training element type an MLIR element type stands for: bf16, f16,
/// or f32 for anything else.
DType dtypeOf(mlir::Type elementType);

} // namespace partita

#endif // PARTITA_COMPILER_IMPORT_GRAPHBUILDER_H
