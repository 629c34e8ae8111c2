//===- Kernels.h - The kernels a plan may launch ----------------*- C++ -*-===//
//
// One table of every kernel name the compiler emits, with the number of
// buffers it reads and writes. The exec verifier checks launches against it;
// docs/plan-format.md documents each kernel's semantics for runtimes.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_DIALECTS_EXEC_KERNELS_H
#define PARTITA_DIALECTS_EXEC_KERNELS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace partita::exec {

struct KernelSignature {
  llvm::StringLiteral name;
  /// Inclusive bounds on the buffers read and written; kUnbounded for a
  /// variadic list.
  unsigned minIns, maxIns, minOuts, maxOuts;
};

constexpr unsigned kUnbounded = ~0u;

/// Every kernel, forward, backward and optimizer.
llvm::ArrayRef<KernelSignature> kernelSignatures();

/// The signature of kernel `name`, or null.
const KernelSignature *lookupKernel(llvm::StringRef name);

} // namespace partita::exec

#endif // PARTITA_DIALECTS_EXEC_KERNELS_H
