//===- OutputFile.h - Files the compiler writes -----------------*- C++ -*-===//
//
// Every file plan-opt writes (the IR, plan.json, the reports, the trace)
// goes through here, so a write that fails (a full disk, /dev/full, a
// vanished directory) is an error naming the file instead of LLVM's abort on
// an unchecked stream error, or a truncated file kept as if it were whole.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_PASSES_OUTPUTFILE_H
#define PARTITA_PASSES_OUTPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/ToolOutputFile.h"

namespace partita {

/// Keeps FILE if everything written to it reached it. Otherwise clears the
/// stream's error, leaves the file to be removed, and returns
/// "cannot write PATH: REASON".
llvm::Error keepWritten(llvm::ToolOutputFile &file);

/// Writes TEXT to PATH ("-" is stdout) whole, or returns why it could not
/// ("cannot open ..." / "cannot write ...").
llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef text);

} // namespace partita

#endif // PARTITA_PASSES_OUTPUTFILE_H
