//===- CostReport.h - The cost report, for people and for tools -*- C++ -*-===//

#ifndef PARTITA_COMPILER_COSTMODEL_COSTREPORT_H
#define PARTITA_COMPILER_COSTMODEL_COSTREPORT_H

#include "compiler/CostModel/CostModel.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace partita {

/// A text table. `topologyNote` is printed under the header (e.g. that the
/// default topology was used).
void printCostReport(const CostEstimate &estimate, const ModelProfile &profile,
                     llvm::StringRef topologyNote, llvm::raw_ostream &os);

/// The "strategy" object of the JSON reports (stage_layers has one entry
/// per model chunk).
llvm::json::Object strategyJson(const ParallelConfig &config,
                                int64_t numLayers);
/// The "predicted" object of the JSON reports.
llvm::json::Object predictedJson(const CostEstimate &estimate);

/// The JSON report; its keys are documented in docs/cost-model.md.
llvm::json::Object costReportJson(const CostEstimate &estimate,
                                  const ModelProfile &profile,
                                  bool defaultTopology);

} // namespace partita

#endif // PARTITA_COMPILER_COSTMODEL_COSTREPORT_H
