//===- CostedModel.h - A model spec costed under a strategy -----*- C++ -*-===//
//
// What the tests that hold the compiled IR against the cost model start
// from: a spec imported and profiled, a --strategy completed for a
// topology, and the cost model's estimate of it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_TEST_UNIT_COSTEDMODEL_H
#define PARTITA_TEST_UNIT_COSTEDMODEL_H

#include "compiler/CostModel/CostModel.h"
#include "compiler/Import/GraphBuilder.h"
#include "compiler/Topology/Topology.h"
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace partita {

struct CostedModel {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  ModelProfile profile;
  Topology topology;
  ParallelConfig config;
  CostEstimate estimate;

  /// Imports `spec` and costs `strategy` on one node of `preset`, with the
  /// strategy and topology set on the module; failures are test failures
  /// (check HasFatalFailure()).
  void build(const char *spec, const char *strategy,
             const char *preset = "dgx-h100", const CostParams &params = {}) {
    context
        .loadDialect<tfm::TfmDialect, dist::DistDialect, exec::ExecDialect>();
    auto parsed = readModelSpec(spec, "m.json", "", {});
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    module = buildModelModule(*parsed, context);
    ASSERT_TRUE(bool(module));
    module->walk([&](tfm::ModelOp m) { profile = profileModel(m); });
    topology = *presetTopology(preset, 1);
    auto partial = parseParallelConfig(strategy);
    ASSERT_TRUE(bool(partial)) << llvm::toString(partial.takeError());
    auto completed = completeParallelConfig(
        *partial, topology.numDevices(), profile.globalBatch,
        static_cast<int64_t>(profile.layers.size()));
    ASSERT_TRUE(bool(completed)) << llvm::toString(completed.takeError());
    config = *completed;
    auto costed =
        estimateCost(profile, TopologyGraph(topology), config, params);
    ASSERT_TRUE(bool(costed)) << llvm::toString(costed.takeError());
    estimate = *costed;
    (*module)->setAttr(dist::kStrategyAttrName,
                       toStrategyAttr(config, profile.layers.size(), &context));
    (*module)->setAttr(dist::kTopologyAttrName, toAttr(topology, &context));
  }
};

} // namespace partita

#endif // PARTITA_TEST_UNIT_COSTEDMODEL_H
