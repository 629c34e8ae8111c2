//===- TopologyFuzzer.cpp - libFuzzer entry point for topology files ------===//
//
// Feeds arbitrary bytes to the topology reader and compiles two models for
// every topology it takes: the tiny Llama through the whole pipeline to
// plan.json (search, confirmation, partitioning, exec lowering, memory
// plan, simulation), and Llama-3 8B through the search and the cost model.
// A crash, a sanitizer report, a pipeline that fails without an error, a
// report that is not JSON (an inf or a NaN), a topology attribute that does
// not print and parse back as itself, or a written plan the runtime's
// loader refuses is a bug: a cluster the reader takes must compile or be
// refused with a message. In the libFuzzer build JsonMutator.cpp edits one
// JSON value at a time.
//
//===----------------------------------------------------------------------===//

#include "compiler/Import/GraphBuilder.h"
#include "compiler/Topology/Topology.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/tfm/TfmDialect.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#ifdef PARTITA_FUZZ_PLAN_LOADER
#include "partita/runtime/Plan.h"
#endif

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

using namespace partita;

namespace {

/// Stops the process on a broken invariant, as libFuzzer records a crash.
[[noreturn]] void fail(const std::string &what) {
  llvm::errs() << "topology fuzzer: " << what << "\n";
  llvm::errs().flush();
  __builtin_trap();
}

struct Outcomes {
  int64_t refused = 0, read = 0;
  int64_t planned = 0, planRefused = 0;
  int64_t searched = 0, searchRefused = 0;
} outcomes;

/// A directory of this process's for the files the pipeline writes,
/// removed at exit.
const std::string &scratchDir() {
  static const struct Scratch {
    std::string path;
    Scratch() {
      llvm::SmallString<128> created;
      if (llvm::sys::fs::createUniqueDirectory("partita-topology-fuzz",
                                               created))
        fail("cannot create a scratch directory");
      path = std::string(created);
    }
    ~Scratch() { llvm::sys::fs::remove_directories(path); }
  } scratch;
  return scratch.path;
}

std::string scratchFile(llvm::StringRef name) {
  llvm::SmallString<128> path(scratchDir());
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// The model specs the topologies are tried with, read once.
const ModelSpec &exampleModel(llvm::StringRef file) {
  static std::map<std::string, ModelSpec> specs;
  auto it = specs.find(file.str());
  if (it != specs.end())
    return it->second;
  llvm::Expected<ModelSpec> spec = readModelSpecFile(
      PARTITA_SOURCE_DIR "/examples/models/" + file.str(), TrainingOverrides());
  if (!spec)
    fail(llvm::toString(spec.takeError()));
  return specs.emplace(file.str(), std::move(*spec)).first->second;
}

/// The text of the JSON document the pipeline wrote at `path`: anything
/// else (a missing file, `inf` or `nan` among the numbers) is a bug.
std::string readWrittenJson(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    fail(path + " was not written");
  std::string text = (*buffer)->getBuffer().str();
  if (!nlohmann::json::accept(text))
    fail(path + " is not JSON:\n" + text);
  return text;
}

/// Compiles `model` for `topology`: with `plan`, on to plan.json. Returns
/// whether it compiled; a failure must have said why.
bool compile(const Topology &topology, llvm::StringRef model, bool plan) {
  mlir::MLIRContext context;
  context.disableMultithreading();
  context.printOpOnDiagnostic(false);
  context.loadDialect<tfm::TfmDialect, dist::DistDialect, exec::ExecDialect>();
  bool sawError = false;
  mlir::ScopedDiagnosticHandler quiet(&context, [&](mlir::Diagnostic &d) {
    sawError |= d.getSeverity() == mlir::DiagnosticSeverity::Error;
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildModelModule(exampleModel(model), context);
  if (!module)
    fail(model.str() + " did not build");

  // The attribute passes read, printed and parsed back as it would be in
  // an .mlir file.
  dist::TopologyAttr attr = toAttr(topology, &context);
  std::string printed;
  llvm::raw_string_ostream os(printed);
  mlir::Attribute(attr).print(os);
  if (mlir::parseAttribute(printed, &context) != attr)
    fail("the topology attribute does not parse back as itself: " + printed);
  (*module)->setAttr(dist::kTopologyAttrName, attr);

  std::string reportPath = scratchFile("report.json");
  std::string planPath = scratchFile("plan.json");
  llvm::sys::fs::remove(reportPath);
  llvm::sys::fs::remove(planPath);
  CompilePipelineOptions options;
  options.summarize = false;
  options.report = reportPath;
  if (plan)
    options.plan = planPath;
  mlir::PassManager pm(&context);
  buildCompilePipeline(pm, options);
  if (mlir::failed(pm.run(*module))) {
    if (!sawError)
      fail("compiling " + model.str() + " failed without an error");
    return false;
  }
  readWrittenJson(reportPath);
  if (!plan)
    return true;
  std::string planText = readWrittenJson(planPath);
#ifdef PARTITA_FUZZ_PLAN_LOADER
  try {
    runtime::parsePlan(planText, planPath);
  } catch (const std::exception &e) {
    fail(std::string("the runtime refuses the plan: ") + e.what());
  }
#endif
  return true;
}

} // namespace

std::string fuzzTargetSummary() {
  return std::to_string(outcomes.refused) + " refused, " +
         std::to_string(outcomes.read) +
         " read; tiny-llama: " + std::to_string(outcomes.planned) +
         " planned, " + std::to_string(outcomes.planRefused) +
         " refused; llama3-8b: " + std::to_string(outcomes.searched) +
         " searched, " + std::to_string(outcomes.searchRefused) + " refused";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<Topology> topology = readTopology(text, "fuzz-topology.json");
  if (!topology) {
    std::string message = llvm::toString(topology.takeError());
    if (llvm::StringRef(message).find("fuzz-topology.json") ==
        llvm::StringRef::npos)
      fail("an error that does not name the file: " + message);
    ++outcomes.refused;
    return 0;
  }
  ++outcomes.read;
  ++(compile(*topology, "tiny-llama.json", /*plan=*/true)
         ? outcomes.planned
         : outcomes.planRefused);
  ++(compile(*topology, "llama3-8b.json", /*plan=*/false)
         ? outcomes.searched
         : outcomes.searchRefused);
  return 0;
}
