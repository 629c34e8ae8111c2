//===- plan-opt.cpp - The Partita compiler driver -------------------------===//
//
// mlir-opt for Partita: every standard flag works. In addition the input may
// be a model spec (Partita's JSON spec or a Hugging Face config.json); it is
// imported into the tfm dialect first and, unless passes are named on the
// command line, compiled with the `partita-compile` pipeline.
//
//===----------------------------------------------------------------------===//

#include "compiler/CostModel/ModelProfile.h"
#include "compiler/Import/GraphBuilder.h"
#include "compiler/Search/Scaling.h"
#include "compiler/Topology/Topology.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/tfm/TfmDialect.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/SearchExtensions.h"
#include "support/Paths.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace mlir;

namespace {

// The names sort before LLVM's "General options", so that --help lists
// Partita's options first.
llvm::cl::OptionCategory importCategory(
    "Compiler: model import options",
    "Used when the input is a model spec (.json): a Partita spec or a "
    "Hugging Face config.json");

llvm::cl::opt<int64_t>
    seqLen("seq-len", llvm::cl::desc("Sequence length of a training step"),
           llvm::cl::value_desc("tokens"), llvm::cl::cat(importCategory));
llvm::cl::opt<int64_t> globalBatch(
    "global-batch", llvm::cl::desc("Global batch of a training step"),
    llvm::cl::value_desc("sequences"), llvm::cl::cat(importCategory));
llvm::cl::opt<std::string>
    dtype("dtype", llvm::cl::desc("Training element type: bf16, f16 or f32"),
          llvm::cl::value_desc("type"), llvm::cl::cat(importCategory));

llvm::cl::OptionCategory planCategory("Compiler: plan options");

llvm::cl::opt<std::string> topologyFlag(
    "topology",
    llvm::cl::desc("Cluster to compile for: a preset NAME[:N] (dgx-a100, "
                   "dgx-h100, hgx-h200, cpu) or a topology .json file; "
                   "default: one dgx-h100 node"),
    llvm::cl::value_desc("topology"), llvm::cl::cat(planCategory));
llvm::cl::opt<std::string> strategyFlag(
    "strategy",
    llvm::cl::desc("Pin these dimensions of the search (all of them with "
                   "--no-search) and report the cost of the plan chosen, "
                   "e.g. tp=8,pp=2 or dp=8,tp=8,pp=2,vpp=1,zero=1,mbs=1,"
                   "recompute=selective,sp=1,schedule=1f1b"),
    llvm::cl::value_desc("config"), llvm::cl::cat(planCategory));
llvm::cl::opt<std::string> costParamsFlag(
    "cost-params",
    llvm::cl::desc("Override the cost model's physical parameters, e.g. "
                   "gemm_efficiency=0.8,attention=unfused"),
    llvm::cl::value_desc("params"), llvm::cl::cat(planCategory));
llvm::cl::opt<std::string> reportFlag(
    "report",
    llvm::cl::desc("Write the strategy search report as JSON to this file"),
    llvm::cl::value_desc("file"), llvm::cl::cat(planCategory));
llvm::cl::opt<std::string> objectiveFlag(
    "objective",
    llvm::cl::desc("What the search minimises: throughput (step time, the "
                   "default) or memory (per device)"),
    llvm::cl::value_desc("objective"), llvm::cl::init("throughput"),
    llvm::cl::cat(planCategory));
llvm::cl::opt<double> memoryCapFlag(
    "memory-cap-gib",
    llvm::cl::desc("Memory a device may use, in GiB (default: all of it)"),
    llvm::cl::value_desc("GiB"), llvm::cl::init(0),
    llvm::cl::cat(planCategory));
llvm::cl::opt<bool> tpAcrossNodesFlag(
    "allow-tp-across-nodes",
    llvm::cl::desc("Let the search place tensor-parallel groups across "
                   "nodes"),
    llvm::cl::cat(planCategory));
llvm::cl::opt<bool> freeBatchFlag(
    "free-global-batch",
    llvm::cl::desc("Let the search move the global batch to the nearest "
                   "multiple of dp * mbs"),
    llvm::cl::cat(planCategory));
llvm::cl::opt<bool> noSearchFlag(
    "no-search",
    llvm::cl::desc("Do not search: cost --strategy with the documented "
                   "defaults for what it leaves out"),
    llvm::cl::cat(planCategory));
llvm::cl::opt<std::string>
    costReportFlag("cost-report",
                   llvm::cl::desc("Write the cost report as JSON to this file"),
                   llvm::cl::value_desc("file"), llvm::cl::cat(planCategory));

llvm::cl::opt<std::string> traceFlag(
    "trace",
    llvm::cl::desc("With -o plan.json: write a Chrome trace (Perfetto) of "
                   "the simulated step to this file"),
    llvm::cl::value_desc("file"), llvm::cl::cat(planCategory));

llvm::cl::opt<bool> overlapFlag(
    "overlap",
    llvm::cl::desc("With -o plan.json: launch collectives asynchronously "
                   "where they can overlap compute (default on; "
                   "--overlap=false for a synchronous plan)"),
    llvm::cl::init(true), llvm::cl::cat(planCategory));

llvm::cl::opt<bool> allowUnfitFlag(
    "allow-unfit-plan",
    llvm::cl::desc("With -o plan.json: write the plan even when it needs "
                   "more memory than the device has (it will not run there)"),
    llvm::cl::cat(planCategory));

llvm::cl::opt<int64_t> confirmFlag(
    "confirm",
    llvm::cl::desc("With the search: compile and simulate this many of the "
                   "best candidates and keep the fastest whose memory plan "
                   "fits; the report shows the one kept (default 3; 0: the "
                   "closed form's choice)"),
    llvm::cl::init(3), llvm::cl::cat(planCategory));

llvm::cl::OptionCategory scalingCategory(
    "Compiler: scaling options",
    "Is another node worth it? The best plan for each cluster size");
llvm::cl::list<int64_t> scalingFlag(
    "scaling",
    llvm::cl::desc("Search the topology resized to each of these node counts "
                   "and print each best plan: tokens/s, scaling efficiency, "
                   "memory (and writes nothing else)"),
    llvm::cl::value_desc("nodes,..."), llvm::cl::CommaSeparated,
    llvm::cl::cat(scalingCategory));
llvm::cl::opt<double> tokensFlag(
    "tokens",
    llvm::cl::desc("With --scaling: a token budget, to print the time each "
                   "plan takes to train on it"),
    llvm::cl::value_desc("N"), llvm::cl::init(0),
    llvm::cl::cat(scalingCategory));
llvm::cl::opt<double> gpuHourCostFlag(
    "gpu-hour-cost",
    llvm::cl::desc("With --scaling and --tokens: the price of a device-hour, "
                   "to print what the budget costs"),
    llvm::cl::value_desc("USD"), llvm::cl::init(0),
    llvm::cl::cat(scalingCategory));
llvm::cl::opt<std::string> versusFlag(
    "versus",
    llvm::cl::desc("With --scaling: a second topology, studied side by side "
                   "(e.g. --topology=dgx-h100 --versus=hgx-h200)"),
    llvm::cl::value_desc("topology"), llvm::cl::cat(scalingCategory));

bool isJsonPath(llvm::StringRef path) {
  return path.ends_with_insensitive(".json");
}

/// The passes and pipelines the command line names (`--some-pass`,
/// `--pass-pipeline=...`, `-p ...`, even one that expands to no passes).
llvm::SmallVector<llvm::StringRef> namedPasses(int argc, char **argv) {
  llvm::SmallVector<llvm::StringRef> names;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (!arg.consume_front("-"))
      continue;
    arg.consume_front("-");
    llvm::StringRef name = arg.split('=').first;
    if (name == "pass-pipeline" || name == "p" || PassInfo::lookup(name) ||
        PassPipelineInfo::lookup(name))
      names.push_back(name);
  }
  return names;
}

/// Whether the passes named are tfm-summarize-model alone (with
/// dist-attach-topology, which --topology adds): what needs only the
/// model, not a training step.
bool summarizesOnly(llvm::ArrayRef<llvm::StringRef> passes) {
  return llvm::is_contained(passes, "tfm-summarize-model") &&
         llvm::all_of(passes, [](llvm::StringRef name) {
           return name == "tfm-summarize-model" ||
                  name == "dist-attach-topology";
         });
}

/// Imports a model spec and prints it, with its locations, as the text that
/// MlirOptMain then parses: the passes see exactly what an .mlir input with
/// the same content would give them.
std::unique_ptr<llvm::MemoryBuffer> importToBuffer(llvm::StringRef path,
                                                   DialectRegistry &registry,
                                                   bool stepOptional) {
  partita::TrainingOverrides overrides;
  overrides.stepOptional = stepOptional;
  if (seqLen.getNumOccurrences())
    overrides.seqLen = seqLen;
  if (globalBatch.getNumOccurrences())
    overrides.globalBatch = globalBatch;
  if (dtype.getNumOccurrences())
    overrides.dtype = dtype;

  MLIRContext context(registry);
  auto module = partita::importModelFile(path, overrides, context);
  if (!module) {
    llvm::handleAllErrors(module.takeError(), [](const llvm::ErrorInfoBase &e) {
      llvm::WithColor::error(llvm::errs(), "plan-opt") << e.message() << "\n";
    });
    return nullptr;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os, OpPrintingFlags().enableDebugInfo(true, false));
  return llvm::MemoryBuffer::getMemBufferCopy(text, path);
}

/// Warns about each flag given that this run ignores, saying what uses it.
void warnIgnoredFlags(bool modelSpec, bool runsCompilePipeline,
                      bool writesPlan) {
  auto warn = [](std::initializer_list<const llvm::cl::Option *> flags,
                 llvm::StringRef why) {
    for (const llvm::cl::Option *flag : flags)
      if (flag->getNumOccurrences())
        llvm::WithColor::warning(llvm::errs(), "plan-opt")
            << "--" << flag->ArgStr << " is ignored: " << why << "\n";
  };
  if (!modelSpec)
    warn({&seqLen, &globalBatch, &dtype},
         "it sets how a model spec (.json) is imported, and the input is "
         "MLIR");
  // --topology applies to any pipeline; the other plan options configure
  // the compile pipeline.
  if (!runsCompilePipeline)
    warn({&strategyFlag, &costParamsFlag, &reportFlag, &objectiveFlag,
          &memoryCapFlag, &tpAcrossNodesFlag, &freeBatchFlag, &noSearchFlag,
          &costReportFlag, &traceFlag, &overlapFlag, &allowUnfitFlag,
          &confirmFlag},
         modelSpec ? "passes are named, and they replace the compile "
                     "pipeline it configures; give it as an option of the "
                     "pass, or of partita-compile{...}"
                   : "an MLIR input runs only the passes named; give it as "
                     "an option of the pass, or of partita-compile{...}");
  else if (!writesPlan)
    warn({&traceFlag, &allowUnfitFlag},
         "it concerns the plan written with -o plan.json, and none is");
  if (scalingFlag.empty())
    warn({&tokensFlag, &gpuHourCostFlag, &versusFlag},
         "it applies to --scaling");
}

/// Hides from --help the options LLVM's libraries register (code generation
/// for every target, Polly, remarks...), beside the point of plan-opt;
/// --help-hidden lists them and they still work. Called before MLIR's and
/// the passes' options are registered, which stay.
void hideLlvmOptions() {
  const llvm::cl::OptionCategory *ours[] = {&importCategory, &planCategory,
                                            &scalingCategory};
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    // LLVM's --help, --help-hidden and --version are "Generic Options".
    if (option->getOptionHiddenFlag() != llvm::cl::NotHidden ||
        llvm::any_of(option->Categories, [&](llvm::cl::OptionCategory *c) {
          return llvm::is_contained(ours, c) ||
                 c->getName() == "Generic Options";
        }))
      continue;
    option->setHiddenFlag(llvm::cl::Hidden);
  }
}

/// --help's overview: the inputs, the outputs, the flags that matter
/// first, and where the rest are.
constexpr const char *kOverview =
    "Partita plan compiler: a Transformer model and a cluster in, the\n"
    "fastest parallel plan that fits out.\n"
    "\n"
    "  plan-opt MODEL --topology=NAME[:NODES] [-o plan.json]\n"
    "\n"
    "MODEL is a Partita model spec (.json), a Hugging Face config.json or\n"
    ".mlir. The search report goes to stderr; -o plan.json writes the\n"
    "executable plan that plan-run runs (docs/plan-format.md), any other -o\n"
    "the IR. First flags: --topology (dgx-h100:4, cpu:8, a .json file),\n"
    "--strategy (pin tp=8,pp=2,...), --seq-len/--global-batch (for HF\n"
    "configs), --report (JSON), --scaling=1,2,4 (is another node worth\n"
    "it?). The 'Compiler: ...' groups below are Partita's options; then\n"
    "MLIR's and the passes. Naming passes (--tfm-summarize-model, ...) runs\n"
    "those instead of the default pipeline. docs/user-guide.md has them all.\n";

/// Loads the plugins the command line names and runs their registrations,
/// before the command line is parsed, so that a plugin's passes are flags
/// (`--my-pass`) as built-in ones are; MlirOptMain would register them
/// only while parsing, too late for that, and would ignore a plugin it
/// cannot load, which here is an error before anything runs. Returns the
/// arguments without the plugins' (null on error).
std::optional<std::vector<char *>> loadPlugins(int argc, char **argv,
                                               DialectRegistry &registry) {
  std::vector<char *> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    llvm::StringRef flag = arg;
    flag.consume_front("-");
    flag.consume_front("-");
    auto [name, value] = flag.split('=');
    bool pass = name == "load-pass-plugin";
    if (!arg.starts_with("-") || (!pass && name != "load-dialect-plugin")) {
      rest.push_back(argv[i]);
      continue;
    }
    std::string path = flag.contains('=') ? value.str()
                       : i + 1 < argc     ? std::string(argv[++i])
                                          : std::string();
    llvm::Error error = llvm::Error::success();
    if (pass) {
      llvm::Expected<PassPlugin> plugin = PassPlugin::load(path);
      if (plugin)
        plugin->registerPassRegistryCallbacks();
      error = plugin.takeError();
    } else {
      llvm::Expected<DialectPlugin> plugin = DialectPlugin::load(path);
      if (plugin)
        plugin->registerDialectRegistryCallbacks(registry);
      error = plugin.takeError();
    }
    if (error) {
      llvm::WithColor::error(llvm::errs(), "plan-opt")
          << "--" << name << "=" << path << ": "
          << llvm::toString(std::move(error)) << "\n";
      return std::nullopt;
    }
  }
  rest.push_back(nullptr);
  return rest;
}

/// plan-opt MODEL --scaling=...: the best plan of the model on each size of
/// the topology (and of --versus), printed to stdout.
int runScaling(llvm::StringRef inputFile, DialectRegistry &registry) {
  auto fail = [](const llvm::Twine &message) {
    llvm::WithColor::error(llvm::errs(), "plan-opt") << message << "\n";
    return EXIT_FAILURE;
  };
  for (int64_t nodes : scalingFlag)
    if (nodes < 1)
      return fail("--scaling takes node counts of at least 1, got " +
                  llvm::Twine(nodes));
  if (!(tokensFlag >= 0) || !(gpuHourCostFlag >= 0) ||
      (gpuHourCostFlag > 0 && tokensFlag <= 0))
    return fail("--tokens and --gpu-hour-cost take numbers of at least 0, "
                "and --gpu-hour-cost needs --tokens");
  std::unique_ptr<llvm::MemoryBuffer> input =
      isJsonPath(inputFile) ? importToBuffer(inputFile, registry, false)
                            : nullptr;
  std::string error;
  if (!isJsonPath(inputFile) && !(input = openInputFile(inputFile, &error)))
    return fail(error);
  if (!input)
    return EXIT_FAILURE;
  MLIRContext context(registry);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return EXIT_FAILURE;
  partita::tfm::ModelOp model;
  module->walk([&](partita::tfm::ModelOp m) { model = m; });
  if (!model)
    return fail(inputFile + ": no tfm.model to plan");
  partita::ModelProfile profile = partita::profileModel(model);
  partita::SearchSettings settings{strategyFlag,      costParamsFlag,
                                   objectiveFlag,     memoryCapFlag,
                                   tpAcrossNodesFlag, freeBatchFlag};
  std::vector<partita::ScalingStudy> studies;
  for (llvm::StringRef spec :
       {llvm::StringRef(topologyFlag), llvm::StringRef(versusFlag)}) {
    if (spec.empty() && !studies.empty())
      continue;
    llvm::Expected<partita::Topology> topology =
        spec.empty() ? partita::defaultTopology()
                     : partita::parseTopologyOption(spec);
    if (!topology)
      return fail(llvm::toString(topology.takeError()));
    studies.push_back(partita::studyScaling(
        profile, *topology, scalingFlag,
        [&](const partita::TopologyGraph &graph) {
          return partita::searchOptionsFor(*module, graph, settings);
        }));
  }
  partita::printScaling(studies, profile, {tokensFlag, gpuHourCostFlag},
                        llvm::outs());
  return EXIT_SUCCESS;
}

/// The compile pipeline's options, from the command line.
void setCompileOptions(partita::CompilePipelineOptions &options,
                       bool writesPlan, llvm::StringRef outputFile) {
  options.topology = topologyFlag;
  if (strategyFlag.getNumOccurrences())
    options.strategy = strategyFlag;
  options.costReport = costReportFlag;
  options.costParams = costParamsFlag;
  options.search = !noSearchFlag;
  options.report = reportFlag;
  options.objective = objectiveFlag;
  options.memoryCapGib = memoryCapFlag;
  options.allowTpAcrossNodes = tpAcrossNodesFlag;
  options.freeGlobalBatch = freeBatchFlag;
  if (writesPlan)
    options.plan = outputFile.str();
  options.trace = traceFlag;
  options.overlap = overlapFlag;
  options.confirm = confirmFlag;
  options.allowUnfit = allowUnfitFlag;
}

/// The model spec imported (JSON) or the IR read, or an error printed.
std::unique_ptr<llvm::MemoryBuffer> readInput(llvm::StringRef inputFile,
                                              DialectRegistry &registry,
                                              int argc, char **argv) {
  if (isJsonPath(inputFile))
    return importToBuffer(inputFile, registry,
                          summarizesOnly(namedPasses(argc, argv)));
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input)
    llvm::WithColor::error(llvm::errs(), "plan-opt") << error << "\n";
  return input;
}

/// Flags that contradict each other or are out of range, reported; false
/// where there are any.
bool checkFlags() {
  if (confirmFlag < 0) {
    llvm::WithColor::error(llvm::errs(), "plan-opt")
        << "--confirm must be 0 or more candidates, got " << confirmFlag
        << "\n";
    return false;
  }
  // The search report comes from the search: asked for with --no-search it
  // would silently never be written.
  if (noSearchFlag && !reportFlag.empty()) {
    llvm::WithColor::error(llvm::errs(), "plan-opt")
        << "--report writes the search's report, and --no-search skips the "
           "search; use --cost-report for the cost of the given strategy\n";
    return false;
  }
  return true;
}

/// Runs the passes on `input` and writes the IR to `outputFile`, or, where
/// the export pass writes the plan, nothing.
int runPasses(std::unique_ptr<llvm::MemoryBuffer> input,
              DialectRegistry &registry, MlirOptMainConfig &config,
              llvm::StringRef outputFile, bool writesPlan) {
  // The export pass writes the file; the IR goes nowhere, as bytecode,
  // which MLIR writes about twice as fast as text.
  if (writesPlan)
    return failed(MlirOptMain(llvm::nulls(), std::move(input), registry,
                              config.emitBytecode(true)))
               ? EXIT_FAILURE
               : EXIT_SUCCESS;
  std::string error;
  auto output = openOutputFile(outputFile, &error);
  if (!output) {
    llvm::WithColor::error(llvm::errs(), "plan-opt") << error << "\n";
    return EXIT_FAILURE;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config))) {
    // The run's own error is the one to report; a failed write as well
    // would otherwise abort in the stream's destructor.
    output->os().clear_error();
    return EXIT_FAILURE;
  }
  if (llvm::Error error = partita::keepWritten(*output)) {
    llvm::WithColor::error(llvm::errs(), "plan-opt")
        << llvm::toString(std::move(error)) << "\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  DialectRegistry registry;
  registry.insert<partita::tfm::TfmDialect, partita::dist::DistDialect,
                  partita::exec::ExecDialect>();
  partita::registerPartitaPassesAndPipelines();
  std::optional<std::vector<char *>> args = loadPlugins(argc, argv, registry);
  if (!args)
    return EXIT_FAILURE;
  argc = int(args->size()) - 1;
  argv = args->data();

  hideLlvmOptions();
  auto [inputFile, outputFile] =
      registerAndParseCLIOptions(argc, argv, kOverview, registry);
  // Two outputs at one path would overwrite each other, and one at the
  // input's path the input.
  if (std::string clash =
          partita::outputClash({{"-o", outputFile},
                                {"--report", reportFlag},
                                {"--cost-report", costReportFlag},
                                {"--trace", traceFlag}},
                               {{"the input", inputFile}}, "plan-opt");
      !clash.empty()) {
    llvm::WithColor::error(llvm::errs(), "plan-opt") << clash << "\n";
    return EXIT_FAILURE;
  }
  if (!scalingFlag.empty())
    return runScaling(inputFile, registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // An error names its op's location; the op printed after it (MLIR's
  // default) would be the whole module for a module-level error, hundreds
  // of lines of IR the user never wrote. --mlir-print-op-on-diagnostic
  // brings it back.
  if (auto *printOp = static_cast<llvm::cl::opt<bool> *>(
          llvm::cl::getRegisteredOptions().lookup(
              "mlir-print-op-on-diagnostic"));
      printOp && printOp->getNumOccurrences() == 0)
    *printOp = false;

  std::unique_ptr<llvm::MemoryBuffer> input =
      readInput(inputFile, registry, argc, argv);
  if (!input)
    return EXIT_FAILURE;

  // A model spec runs the compile pipeline unless the command line names
  // passes; --topology applies to any pipeline.
  bool runCompilePipeline =
      isJsonPath(inputFile) && namedPasses(argc, argv).empty();
  // `-o plan.json` compiles on to the executable plan and writes it there.
  bool writesPlan = runCompilePipeline && isJsonPath(outputFile);
  warnIgnoredFlags(isJsonPath(inputFile), runCompilePipeline, writesPlan);
  if (!checkFlags())
    return EXIT_FAILURE;
  if (runCompilePipeline || topologyFlag.getNumOccurrences()) {
    MlirOptMainConfig userConfig = config;
    config.setPassPipelineSetupFn([=](PassManager &pm) -> LogicalResult {
      if (!runCompilePipeline) {
        pm.addPass(partita::createDistAttachTopology({topologyFlag}));
        return userConfig.setupPassPipeline(pm);
      }
      partita::CompilePipelineOptions options;
      setCompileOptions(options, writesPlan, outputFile);
      partita::buildCompilePipeline(pm, options);
      return success();
    });
  }

  return runPasses(std::move(input), registry, config, outputFile, writesPlan);
}
