//===- SearchReport.h - The strategy search report --------------*- C++ -*-===//

#ifndef PARTITA_COMPILER_SEARCH_SEARCHREPORT_H
#define PARTITA_COMPILER_SEARCH_SEARCHREPORT_H

#include "compiler/Search/StrategySearch.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace partita {

/// A candidate as the tables show it: its strategy string, and its cut of
/// layers into stages where it has several (candidates may differ in that
/// alone).
std::string candidateText(const ParallelConfig &config);

/// The human table: the winner, why, its predictions, the runners-up and
/// the pruning counts.
void printSearchReport(const SearchResult &result, const ModelProfile &profile,
                       llvm::StringRef topologyNote, llvm::raw_ostream &os);

/// The JSON report; keys in docs/search.md.
llvm::json::Object searchReportJson(const SearchResult &result,
                                    const ModelProfile &profile,
                                    bool defaultTopology);

} // namespace partita

#endif // PARTITA_COMPILER_SEARCH_SEARCHREPORT_H
