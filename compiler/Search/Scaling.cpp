//===- Scaling.cpp - The best plan for each cluster size ------------------===//

#include "compiler/Search/Scaling.h"

#include "llvm/Support/Format.h"

namespace partita {

ScalingStudy studyScaling(
    const ModelProfile &profile, const Topology &base,
    llvm::ArrayRef<int64_t> nodeCounts,
    const std::function<llvm::Expected<SearchOptions>(const TopologyGraph &)>
        &optionsFor) {
  ScalingStudy study;
  study.topology = base.name;
  for (int64_t nodes : nodeCounts) {
    Topology topology = base;
    topology.nodes = nodes;
    ScalingRow row;
    row.nodes = nodes;
    row.devices = topology.numDevices();
    TopologyGraph graph(topology);
    llvm::Expected<SearchOptions> options = optionsFor(graph);
    llvm::Expected<SearchResult> result =
        options ? searchStrategy(profile, graph, *options)
                : llvm::Expected<SearchResult>(options.takeError());
    if (result)
      row.best = result->best;
    else
      row.error = llvm::toString(result.takeError());
    study.rows.push_back(std::move(row));
  }
  return study;
}

namespace {

/// "3.2 h", "4.5 d": a duration in the unit that reads best.
std::string duration(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds < 2 * 3600)
    os << llvm::format("%.1f min", seconds / 60);
  else if (seconds < 2 * 86400)
    os << llvm::format("%.1f h", seconds / 3600);
  else
    os << llvm::format("%.1f d", seconds / 86400);
  return text;
}

void printStudy(const ScalingStudy &study, const TokenBudget &budget,
                llvm::raw_ostream &os) {
  os << "on " << study.topology << ":\n";
  os << llvm::format("  %5s %7s %12s %9s %6s %9s %10s", "nodes", "devices",
                     "tokens/s", "step (s)", "MFU", "mem (GiB)", "efficiency");
  if (budget.tokens > 0)
    os << llvm::format(" %10s", "time");
  if (budget.tokens > 0 && budget.usdPerGpuHour > 0)
    os << llvm::format(" %12s", "cost (USD)");
  os << "  strategy\n";
  std::optional<double> perDeviceBase;
  for (const ScalingRow &row : study.rows) {
    os << llvm::format("  %5lld %7lld ", (long long)row.nodes,
                       (long long)row.devices);
    if (!row.best) {
      // The first line of why: the search's messages run on.
      llvm::StringRef why(row.error);
      os << "no plan: " << why.split('\n').first << "\n";
      continue;
    }
    const CostEstimate &e = row.best->estimate;
    double perDevice = e.tokensPerS / double(row.devices);
    if (!perDeviceBase)
      perDeviceBase = perDevice;
    os << llvm::format("%12.0f %9.3f %5.1f%% %9.1f %9.1f%%", e.tokensPerS,
                       e.stepTimeS, 100 * e.mfu,
                       e.memory.total() / double(1ull << 30),
                       100 * perDevice / *perDeviceBase);
    if (budget.tokens > 0) {
      double seconds = budget.tokens / e.tokensPerS;
      os << llvm::format(" %10s", duration(seconds).c_str());
      if (budget.usdPerGpuHour > 0)
        os << llvm::format(" %12.0f", seconds / 3600 * double(row.devices) *
                                          budget.usdPerGpuHour);
    }
    os << "  " << row.best->config.str() << "\n";
  }
}

} // namespace

void printScaling(llvm::ArrayRef<ScalingStudy> studies,
                  const ModelProfile &profile, const TokenBudget &budget,
                  llvm::raw_ostream &os) {
  os << "scaling of \"" << profile.name << "\" (global batch "
     << profile.globalBatch << ", sequence " << profile.seqLen << ")";
  if (budget.tokens > 0)
    os << llvm::format(", %.3g tokens", budget.tokens);
  if (budget.usdPerGpuHour > 0)
    os << llvm::format(" at %.2f USD per device-hour", budget.usdPerGpuHour);
  os << "; efficiency: tokens/s per device against the first plan\n";
  for (const ScalingStudy &study : studies)
    printStudy(study, budget, os);
}

} // namespace partita
