//===- SearchReport.cpp - The strategy search report ----------------------===//

#include "compiler/Search/SearchReport.h"
#include "compiler/CostModel/CostReport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

namespace partita {

namespace {

std::string stageLayersText(const ParallelConfig &c, int64_t layers) {
  std::string text;
  for (int64_t k = 0; k < c.pp; ++k)
    text += (k ? "/" : "") + std::to_string(c.stageLayers.empty()
                                                ? layers / c.pp
                                                : c.stageLayers[k]);
  return text;
}

} // namespace

std::string candidateText(const ParallelConfig &config) {
  std::string text = config.str();
  if (config.stageLayers.size() > 1)
    text +=
        " layers " +
        llvm::join(llvm::map_range(config.stageLayers,
                                   [](int64_t n) { return std::to_string(n); }),
                   "/");
  return text;
}

namespace {

/// Every configuration the search considered: the winner, the runners-up
/// and every one it rejected.
int64_t considered(const SearchResult &r) {
  int64_t total = 1 + int64_t(r.runnersUp.size()) + r.rejectedOutOfMemory +
                  r.rejectedIndivisible + r.rejectedSlower;
  for (const auto &[name, rejected] : r.rejectedByConstraint)
    total += rejected.first;
  return total;
}

} // namespace

void printSearchReport(const SearchResult &r, const ModelProfile &profile,
                       llvm::StringRef topologyNote, llvm::raw_ostream &os) {
  using llvm::format;
  const CostEstimate &e = r.best.estimate;
  int64_t layers = profile.layers.size();
  os << "plan for \"" << profile.name << "\" on " << e.devices
     << " devices of topology \"" << e.topologyName << "\"\n";
  if (!topologyNote.empty())
    os << "  (" << topologyNote << ")\n";
  os << "  strategy      " << r.best.config.str() << "\n";
  os << "  stage layers  " << stageLayersText(r.best.config, layers) << "\n";
  if (r.best.config.globalBatch() != profile.globalBatch)
    os << "  global batch  " << r.best.config.globalBatch()
       << " sequences (freed from " << profile.globalBatch << ")\n";
  os << "  why           " << r.why << "\n";
  os << format("  step %.3f s, %.0f tokens/s, %.1f TFLOP/s per device, MFU "
               "%.1f%%, bubble %.1f%%, exposed communication %.3f s\n",
               e.stepTimeS, e.tokensPerS, e.modelTflopsPerDevice, 100 * e.mfu,
               100 * e.bubbleFraction, e.exposedCommS);
  os << format("  memory %.1f of %.1f GiB per device (parameters %.1f, "
               "gradients %.1f, optimizer %.1f, activations %.1f, buffers "
               "%.1f, runtime %.1f)\n",
               e.memory.total() / kGiB, r.memoryCapBytes / kGiB,
               e.memory.parameters / kGiB, e.memory.gradients / kGiB,
               e.memory.optimizerStates / kGiB, e.memory.activations / kGiB,
               e.memory.buffers / kGiB, e.memory.runtime / kGiB);
  if (!r.runnersUp.empty()) {
    // With --free-global-batch the batches differ, and the search ranks
    // by time per sequence.
    bool batchesDiffer = llvm::any_of(r.runnersUp, [&](const Candidate &c) {
      return c.config.globalBatch() != r.best.config.globalBatch();
    });
    os << (batchesDiffer ? "  runners-up (by step time per sequence)\n"
                         : "  runners-up\n");
    for (const Candidate &c : r.runnersUp) {
      os << format("    %-84s %8.3f s %6.1f GiB",
                   candidateText(c.config).c_str(), c.estimate.stepTimeS,
                   c.estimate.memory.total() / kGiB);
      if (batchesDiffer)
        os << format("  %lld sequences, %.4f s each",
                     static_cast<long long>(c.config.globalBatch()),
                     c.estimate.stepTimeS / double(c.config.globalBatch()));
      os << "\n";
    }
  }
  // What was costed is a part: a configuration whose model states alone
  // overflow a device, or that cannot divide, is rejected before.
  os << format("  searched %lld configurations in %.3f s (%lld costed); "
               "rejected: %lld out of memory, %lld indivisible, %lld slower",
               static_cast<long long>(considered(r)), r.searchTimeS,
               static_cast<long long>(r.costed),
               static_cast<long long>(r.rejectedOutOfMemory),
               static_cast<long long>(r.rejectedIndivisible),
               static_cast<long long>(r.rejectedSlower));
  for (const auto &[name, rejected] : r.rejectedByConstraint)
    os << format(", %lld by %s", static_cast<long long>(rejected.first),
                 name.c_str());
  os << "\n";
  for (const auto &[name, rejected] : r.rejectedByConstraint)
    os << format("  constraint %s rejected %lld: first %s\n", name.c_str(),
                 static_cast<long long>(rejected.first),
                 rejected.second.c_str());
}

llvm::json::Object searchReportJson(const SearchResult &r,
                                    const ModelProfile &profile,
                                    bool defaultTopology) {
  int64_t layers = profile.layers.size();
  llvm::json::Array candidates;
  for (const Candidate &c : r.runnersUp)
    candidates.push_back(
        llvm::json::Object{{"strategy", strategyJson(c.config, layers)},
                           {"predicted", predictedJson(c.estimate)}});
  llvm::json::Object byConstraint;
  for (const auto &[name, rejected] : r.rejectedByConstraint)
    byConstraint[name] = llvm::json::Object{{"count", rejected.first},
                                            {"first_reason", rejected.second}};
  return llvm::json::Object{
      {"model", profile.name},
      {"topology", r.best.estimate.topologyName},
      {"default_topology", defaultTopology},
      {"devices", r.best.estimate.devices},
      {"strategy", strategyJson(r.best.config, layers)},
      {"predicted", predictedJson(r.best.estimate)},
      {"why", r.why},
      {"candidates", std::move(candidates)},
      {"rejected",
       llvm::json::Object{{"out_of_memory", r.rejectedOutOfMemory},
                          {"indivisible", r.rejectedIndivisible},
                          {"slower", r.rejectedSlower},
                          {"by_constraint", std::move(byConstraint)}}},
      {"candidates_costed", r.costed},
      {"candidates_considered", considered(r)},
      {"search_time_s", r.searchTimeS},
      {"memory_cap_bytes", r.memoryCapBytes}};
}

} // namespace partita
