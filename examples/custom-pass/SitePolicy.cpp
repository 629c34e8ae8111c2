//===- SitePolicy.cpp - An example plan-opt plugin ------------------------===//
//
// What a site knows that Partita does not: how deep a pipeline its jobs may
// be, and how fast its GPUs really run GEMMs. The plugin adds
//  - the `site` dialect, whose #site.pipeline_cap attribute carries the cap
//    (a dialect plugin: --load-dialect-plugin lets .mlir inputs use it);
//  - passes site-cap-pipeline-depth and site-gemm-efficiency that record
//    the policy on the module (a pass plugin: --load-pass-plugin);
//  - a search rule and a cost-model override that apply what the passes
//    recorded (Partita's extension points, passes/SearchExtensions.h).
//
//===----------------------------------------------------------------------===//

#include "passes/SearchExtensions.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

#include "SiteDialect.h.inc"
#define GET_ATTRDEF_CLASSES
#include "SiteAttrs.h.inc"

#include "SiteDialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "SiteAttrs.cpp.inc"

namespace site {

void SiteDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "SiteAttrs.cpp.inc"
      >();
}

llvm::LogicalResult
PipelineCapAttr::verify(llvm::function_ref<mlir::InFlightDiagnostic()> error,
                        int64_t maxPp, llvm::StringRef reason) {
  if (maxPp < 1)
    return error() << "pipeline_cap: the deepest pipeline allowed must be at "
                      "least 1, got "
                   << maxPp;
  return llvm::success();
}

constexpr llvm::StringLiteral kCapAttr = "site.pipeline_cap";
constexpr llvm::StringLiteral kGemmTableAttr = "site.gemm_table";

#define GEN_PASS_DECL
#define GEN_PASS_DEF_SITECAPPIPELINEDEPTH
#define GEN_PASS_DEF_SITEGEMMEFFICIENCY
#include "SitePasses.h.inc"
#define GEN_PASS_REGISTRATION
#include "SitePasses.h.inc"

namespace {

struct SiteCapPipelineDepthPass
    : impl::SiteCapPipelineDepthBase<SiteCapPipelineDepthPass> {
  using Base::Base;
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto cap = PipelineCapAttr::getChecked(
        [&] { return module.emitError("site-cap-pipeline-depth: "); },
        module.getContext(), int64_t(maxPp), llvm::StringRef(reason));
    if (!cap)
      return signalPassFailure();
    module->setAttr(kCapAttr, cap);
  }
};

/// Rows of m, n, k, efficiency, flattened; errors name the file and line.
llvm::Expected<std::vector<double>> readGemmTable(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   (path + ": " + message).str());
  };
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(buffer.getError().message());
  std::vector<double> rows;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (auto [index, raw] : llvm::enumerate(lines)) {
    llvm::StringRef line = raw.trim();
    if (line.empty() || line.starts_with("#") || line.starts_with("m,"))
      continue;
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    double values[4];
    if (fields.size() != 4)
      return fail("line " + llvm::Twine(index + 1) +
                  ": expected m,n,k,efficiency, got '" + line + "'");
    for (int i = 0; i < 4; ++i)
      if (fields[i].trim().getAsDouble(values[i]) || values[i] <= 0)
        return fail("line " + llvm::Twine(index + 1) + ": '" +
                    fields[i].trim() + "' is not a positive number");
    if (values[3] > 1)
      return fail("line " + llvm::Twine(index + 1) + ": efficiency " +
                  fields[3].trim() + " is more than 1 (a fraction of peak)");
    rows.insert(rows.end(), values, values + 4);
  }
  if (rows.empty())
    return fail("no m,n,k,efficiency rows");
  return rows;
}

struct SiteGemmEfficiencyPass
    : impl::SiteGemmEfficiencyBase<SiteGemmEfficiencyPass> {
  using Base::Base;
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (table.empty()) {
      module.emitError("site-gemm-efficiency: give the table=FILE option");
      return signalPassFailure();
    }
    llvm::Expected<std::vector<double>> rows = readGemmTable(table);
    if (!rows) {
      module.emitError("site-gemm-efficiency: ")
          << llvm::toString(rows.takeError());
      return signalPassFailure();
    }
    module->setAttr(kGemmTableAttr,
                    mlir::DenseF64ArrayAttr::get(module.getContext(), *rows));
  }
};

/// The search rule: no pipeline deeper than the module's cap.
std::optional<std::string> checkPipelineCap(const partita::ParallelConfig &c,
                                            mlir::ModuleOp module) {
  auto cap = module->getAttrOfType<PipelineCapAttr>(kCapAttr);
  if (!cap || c.pp <= cap.getMaxPp())
    return std::nullopt;
  return "pp=" + std::to_string(c.pp) + " is deeper than " +
         std::to_string(cap.getMaxPp()) + " (" + cap.getReason().str() + ")";
}

/// The cost-model override: each GEMM gets the efficiency of the nearest
/// measured shape.
std::optional<std::string> useGemmTable(partita::CostParams &params,
                                        const partita::TopologyGraph &,
                                        mlir::ModuleOp module) {
  auto table = module->getAttrOfType<mlir::DenseF64ArrayAttr>(kGemmTableAttr);
  if (!table)
    return std::nullopt;
  std::vector<double> rows(table.asArrayRef().begin(),
                           table.asArrayRef().end());
  params.gemmEfficiencyFn = [rows](double m, double n, double k) {
    double best = INFINITY, efficiency = rows[3];
    for (size_t i = 0; i < rows.size(); i += 4) {
      double distance = std::fabs(std::log(m / rows[i])) +
                        std::fabs(std::log(n / rows[i + 1])) +
                        std::fabs(std::log(k / rows[i + 2]));
      if (distance < best) {
        best = distance;
        efficiency = rows[i + 3];
      }
    }
    return efficiency;
  };
  return "site-gemm-efficiency (" + std::to_string(rows.size() / 4) +
         " measured shapes)";
}

} // namespace
} // namespace site

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "SitePolicy", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<site::SiteDialect>();
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "SitePolicy", LLVM_VERSION_STRING, [] {
            site::registerSitePasses();
            partita::registerStrategyRule("site.pipeline_cap",
                                          site::checkPipelineCap);
            partita::registerCostParamsOverride(site::useGemmTable);
          }};
}
