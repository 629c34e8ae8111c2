//===- SearchStrategy.cpp - dist-search-strategy --------------------------===//

#include "compiler/CostModel/CostReport.h"
#include "compiler/Search/SearchReport.h"
#include "compiler/Topology/Topology.h"
#include "passes/ConfirmStrategy.h"
#include "passes/OutputFile.h"
#include "passes/Passes.h"
#include "passes/SearchExtensions.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <optional>

namespace partita {
#define GEN_PASS_DEF_DISTSEARCHSTRATEGY
#include "passes/Passes.h.inc"

/// The module's topology, or the default and a note saying so. The
/// default is attached to the module: what is planned for it (the
/// strategy, the plan) says which topology it was made for.
Topology moduleTopology(mlir::ModuleOp module, std::string &note) {
  if (auto attr =
          module->getAttrOfType<dist::TopologyAttr>(dist::kTopologyAttrName))
    return fromAttr(attr);
  note = "no topology given: the default, one dgx-h100 node; choose one "
         "with --topology";
  Topology topology = defaultTopology();
  module->setAttr(dist::kTopologyAttrName,
                  toAttr(topology, module.getContext()));
  return topology;
}

dist::StrategyAttr requireStrategy(mlir::ModuleOp module,
                                   llvm::StringRef pass) {
  auto strategy =
      module->getAttrOfType<dist::StrategyAttr>(dist::kStrategyAttrName);
  if (!strategy)
    module.emitError(pass) << " needs the module's dist.strategy: run "
                              "dist-search-strategy first (or plan-opt "
                              "--strategy=...)";
  return strategy;
}

llvm::Expected<SearchOptions> searchOptionsFor(mlir::ModuleOp module,
                                               const TopologyGraph &graph,
                                               const SearchSettings &settings) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   message.str());
  };
  SearchOptions options;
  llvm::Expected<PartialParallelConfig> pins =
      parseParallelConfig(settings.strategy);
  if (!pins)
    return pins.takeError();
  // The model spec's pins (carried by the module), then the option's.
  if (auto specPins =
          module->getAttrOfType<mlir::StringAttr>("dist.strategy_pins")) {
    llvm::Expected<PartialParallelConfig> fromSpec =
        parseParallelConfig(specPins.getValue());
    if (!fromSpec)
      return fromSpec.takeError();
    options.pins = overlay(*fromSpec, *pins);
  } else {
    options.pins = *pins;
  }
  llvm::Expected<CostParams> params =
      costParamsFor(graph.topology(), settings.costParams);
  if (!params)
    return params.takeError();
  options.costParams = *params;
  if (settings.objective != "throughput" && settings.objective != "memory")
    return error("dist-search-strategy: objective must be throughput or "
                 "memory, got '" +
                 settings.objective + "'");
  options.objective = settings.objective == "memory"
                          ? SearchObjective::Memory
                          : SearchObjective::Throughput;
  if (!(settings.memoryCapGib >= 0) || !std::isfinite(settings.memoryCapGib))
    return error("dist-search-strategy: memory-cap-gib must be a finite "
                 "number of GiB, not negative");
  if (settings.memoryCapGib > 0)
    options.memoryCapBytes = settings.memoryCapGib * kGiB;
  options.allowTpAcrossNodes = settings.allowTpAcrossNodes;
  options.freeGlobalBatch = settings.freeGlobalBatch;
  options.topK = settings.topK;
  applyCostParamsOverrides(options.costParams, graph, module);
  options.constraints = strategyConstraints(module);
  return options;
}

namespace {

/// The runners-up that confirmation may go on to: past its first
/// candidates while none fits (the search's memory estimate is a few
/// percent under the memory plan, and a search that fills a device to the
/// edge can rank many such near misses first), or while the last one
/// checked promised better than the fastest that fits simulates.
constexpr int64_t kConfirmPool = 24;

/// What the closed form's choice lacked against the one kept.
std::string confirmationReason(const Confirmation &confirmation,
                               bool forMemory) {
  const ConfirmedCandidate &first = confirmation.checked.front(),
                           &kept = confirmation.checked[confirmation.chosen];
  auto gib = [](double bytes) {
    return llvm::formatv("{0:F3} GiB", bytes / kGiB).str();
  };
  if (std::isnan(first.simulatedS))
    return "whose plan does not compile";
  if (first.peakBytes > confirmation.capBytes)
    return "whose memory plan needs " + gib(first.peakBytes) + " of the " +
           gib(confirmation.capBytes);
  if (forMemory)
    return "whose memory plan needs more (" + gib(first.peakBytes) +
           " against " + gib(kept.peakBytes) + ")";
  double slower = 100 * (first.perSequence(first.simulatedS) /
                             kept.perSequence(kept.simulatedS) -
                         1);
  if (slower < 0.05)
    return "which simulates no faster";
  return llvm::formatv("which simulates {0:F1}% slower", slower).str();
}

/// Confirms the search's candidates on their plans; when the one kept is
/// not the closed form's choice, it becomes `result.best`, the closed
/// form's choice its first runner-up, and the why says what that lacked.
Confirmation confirmChoice(mlir::ModuleOp module, SearchResult &result,
                           const ModelProfile &profile,
                           const Topology &topology,
                           const PartialParallelConfig &pins,
                           const ConfirmSettings &settings) {
  int64_t layers = profile.layers.size();
  auto attr = [&](const Candidate &c) {
    return mlir::cast<dist::StrategyAttr>(
        toStrategyAttr(c.config, layers, module.getContext()));
  };
  llvm::SmallVector<dist::StrategyAttr> ranked{attr(result.best)};
  for (const Candidate &c : result.runnersUp)
    ranked.push_back(attr(c));
  Confirmation confirmation = confirmCandidates(module, ranked, settings);
  if (confirmation.chosen <= 0)
    return confirmation;
  std::string against = "simulation kept it over the closed form's choice (" +
                        candidateText(result.best.config) + "), " +
                        confirmationReason(confirmation, settings.forMemory);
  Candidate closedForm = std::move(result.best);
  auto kept = result.runnersUp.begin() + (confirmation.chosen - 1);
  result.best = std::move(*kept);
  result.runnersUp.erase(kept);
  result.runnersUp.insert(result.runnersUp.begin(), std::move(closedForm));
  explainChoice(result, profile, topology, pins, against);
  return confirmation;
}

llvm::json::Array confirmationJson(const Confirmation &confirmation,
                                   int64_t layers) {
  llvm::json::Array checked;
  for (auto [k, c] : llvm::enumerate(confirmation.checked))
    checked.push_back(llvm::json::Object{
        {"strategy", strategyJson(fromStrategyAttr(c.strategy), layers)},
        {"closed_form_step_time_s", c.closedFormS},
        {"simulated_step_time_s", c.simulatedS},
        {"device_bytes_per_rank", c.peakBytes},
        {"kept", int(k) == confirmation.chosen}});
  return checked;
}

struct DistSearchStrategyPass
    : impl::DistSearchStrategyBase<DistSearchStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto fail = [&](const llvm::Twine &message) {
      module.emitError(message);
      signalPassFailure();
    };
    auto specPins =
        module->getAttrOfType<mlir::StringAttr>("dist.strategy_pins");
    std::string note;
    Topology topology = moduleTopology(module, note);
    TopologyGraph graph(topology);
    // The search keeps as many runners-up as either use needs.
    int64_t pool = confirm > 0 ? std::max<int64_t>(kConfirmPool, confirm) : 0;
    SearchSettings settings{
        strategy,
        costParams,
        objective,
        memoryCapGib,
        allowTpAcrossNodes,
        freeGlobalBatch,
        std::max<int64_t>({0, topK, recordRunnersUp, pool})};
    llvm::Expected<SearchOptions> built =
        searchOptionsFor(module, graph, settings);
    if (!built)
      return fail(llvm::toString(built.takeError()));
    SearchOptions options = std::move(*built);
    llvm::json::Array reports;
    mlir::WalkResult walk = module.walk([&](tfm::ModelOp model) {
      ModelProfile profile = profileModel(model);
      llvm::Expected<SearchResult> result =
          searchStrategy(profile, graph, options);
      if (!result) {
        // An impossible pin is named after where it came from: the spec's
        // "strategy", the option, or both.
        std::string message = llvm::toString(result.takeError());
        llvm::StringRef rest(message);
        if (specPins && rest.consume_front("--strategy: "))
          message = (strategy.empty() ? "/strategy (the model spec's pins): "
                                      : "--strategy over the model spec's "
                                        "/strategy: ") +
                    rest.str();
        mlir::emitError(model.getLoc(), message);
        return mlir::WalkResult::interrupt();
      }
      std::optional<Confirmation> confirmation;
      if (confirm > 0) {
        result->runnersUp.resize(
            std::min<size_t>(result->runnersUp.size(), pool));
        confirmation =
            confirmChoice(module, *result, profile, topology, options.pins,
                          {confirm, memoryCapGib, costParams, overlap,
                           options.objective == SearchObjective::Memory});
      }
      module->setAttr(dist::kStrategyAttrName,
                      toStrategyAttr(result->best.config, profile.layers.size(),
                                     module.getContext()));
      // The runners-up, best first, for dist-confirm-strategy.
      if (recordRunnersUp > 0) {
        llvm::SmallVector<mlir::Attribute> runnersUp;
        for (const Candidate &c :
             llvm::ArrayRef(result->runnersUp).take_front(recordRunnersUp))
          runnersUp.push_back(toStrategyAttr(c.config, profile.layers.size(),
                                             module.getContext()));
        module->setAttr("dist.runners_up",
                        mlir::ArrayAttr::get(module.getContext(), runnersUp));
      }
      // The report lists top-k; the rest recorded for confirmation count
      // as slower, as they would have without it.
      size_t listed = std::max<int64_t>(0, topK);
      if (result->runnersUp.size() > listed) {
        result->rejectedSlower += result->runnersUp.size() - listed;
        result->runnersUp.resize(listed);
      }
      printSearchReport(*result, profile, note, llvm::errs());
      llvm::json::Object json =
          searchReportJson(*result, profile, !note.empty());
      if (confirmation) {
        printConfirmation(*confirmation, llvm::errs());
        json["confirmation"] =
            confirmationJson(*confirmation, profile.layers.size());
        if (confirmation->chosen < 0)
          mlir::emitWarning(model.getLoc(),
                            "dist-search-strategy: no candidate's memory plan "
                            "fits; keeping the closed form's choice");
      }
      reports.push_back(std::move(json));
      return mlir::WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (report.empty())
      return;
    std::string text =
        llvm::formatv("{0:2}", reports.size() == 1
                                   ? llvm::json::Value(std::move(reports[0]))
                                   : llvm::json::Value(std::move(reports)))
            .str() +
        "\n";
    if (llvm::Error error = writeOutputFile(report, text))
      return fail("dist-search-strategy: " + llvm::toString(std::move(error)));
  }
};

} // namespace
} // namespace partita
