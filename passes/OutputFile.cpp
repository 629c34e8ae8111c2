//===- OutputFile.cpp - Files the compiler writes -------------------------===//

#include "passes/OutputFile.h"

#include "mlir/Support/FileUtilities.h"

namespace partita {

llvm::Error keepWritten(llvm::ToolOutputFile &file) {
  llvm::raw_fd_ostream &os = file.os();
  os.flush();
  if (std::error_code error = os.error()) {
    os.clear_error();
    return llvm::createStringError(error, "cannot write " +
                                              file.outputFilename() + ": " +
                                              error.message());
  }
  file.keep();
  return llvm::Error::success();
}

llvm::Error writeOutputFile(llvm::StringRef path, llvm::StringRef text) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file =
      mlir::openOutputFile(path, &error);
  if (!file)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
  file->os() << text;
  return keepWritten(*file);
}

} // namespace partita
