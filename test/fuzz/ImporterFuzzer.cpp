//===- ImporterFuzzer.cpp - libFuzzer entry point for model import --------===//
//
// Feeds arbitrary bytes to the model-spec reader and, for small models that
// import cleanly, to the graph builder. Any crash, assertion or uncaught
// exception is a bug: bad input must come back as an error.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/GraphBuilder.h"
#include "dialects/tfm/TfmDialect.h"

#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  // A base directory that does not exist keeps "hf_config" lookups hermetic.
  llvm::Expected<partita::ModelSpec> spec = partita::readModelSpec(
      text, "fuzz-input.json", "/nonexistent-partita-fuzz-dir",
      partita::TrainingOverrides());
  if (!spec) {
    llvm::consumeError(spec.takeError());
    return 0;
  }
  // Building is linear in the layer count; keep each input fast.
  if (spec->model.numLayers > 4)
    return 0;
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  // A spec that imports must build a verified graph.
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  if (!partita::buildModelModule(*spec, context))
    __builtin_trap();
  return 0;
}
