//===- PlanConsistencyTest.cpp - Partitioned IR against the cost model ----===//
//
// The collectives dist-partition-tensors inserts and the ones the cost model
// charges for must be the same: same count per micro-batch, same bytes per
// call. If they differ, one of them is wrong.
//
//===----------------------------------------------------------------------===//

#include "CostedModel.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace partita;

namespace {

constexpr const char *kModel = R"({"version": 1, "name": "m",
  "model": {"vocab_size": 512, "hidden_size": 128, "num_layers": 3,
            "num_heads": 8, "num_kv_heads": 4, "ffn_hidden_size": 256,
            "norm": "rms_norm", "activation": "swiglu",
            "position_embedding": "rope"},
  "training": {"seq_len": 64, "global_batch": 8, "dtype": "bf16"}})";

struct Counted {
  int64_t calls = 0;
  double bytesPerCall = 0;
};

/// Forward tensor-parallel collectives of one micro-batch in the IR.
std::map<std::string, Counted> countCollectives(mlir::ModuleOp module) {
  std::map<std::string, Counted> counts;
  auto record = [&](llvm::StringRef kind, mlir::Value full) {
    auto type = llvm::cast<mlir::RankedTensorType>(full.getType());
    Counted &c = counts[kind.str()];
    ++c.calls;
    c.bytesPerCall = type.getNumElements() *
                     type.getElementType().getIntOrFloatBitWidth() / 8;
  };
  module.walk([&](mlir::Operation *op) {
    if (auto ar = llvm::dyn_cast<dist::AllReduceOp>(op))
      record("all_reduce", ar.getInput());
    else if (auto ag = llvm::dyn_cast<dist::AllGatherOp>(op))
      record("all_gather", ag.getResult());
    else if (auto rs = llvm::dyn_cast<dist::ReduceScatterOp>(op))
      record("reduce_scatter", rs.getInput());
  });
  return counts;
}

class PlanConsistency : public testing::TestWithParam<const char *> {};

TEST_P(PlanConsistency, CollectivesMatchTheCostModel) {
  CostedModel costed;
  costed.build(kModel, GetParam());
  if (HasFatalFailure())
    return;
  mlir::ModuleOp module = *costed.module;
  mlir::PassManager pm(&costed.context);
  pm.addPass(createDistPartitionTensors());
  ASSERT_TRUE(mlir::succeeded(pm.run(module)));
  std::map<std::string, Counted> ir = countCollectives(module);

  std::map<std::string, Counted> model;
  for (const CollectiveCost &c : costed.estimate.collectives)
    if (c.group == "tp")
      model[toString(c.kind).str()] = {static_cast<int64_t>(c.callsPerStep),
                                       c.bytesPerCall};
  ASSERT_EQ(ir.size(), model.size()) << GetParam();
  for (const auto &[kind, counted] : ir) {
    ASSERT_TRUE(model.count(kind)) << kind;
    // The IR holds one forward pass of one micro-batch; the model counts
    // forward and backward (each forward collective has one backward
    // counterpart) of every micro-batch. With sequence parallelism,
    // backward also gathers every gathered GEMM input again.
    int64_t passes =
        2 + (costed.config.sequenceParallel && kind == "all_gather" ? 1 : 0);
    EXPECT_EQ(passes * costed.config.numMicroBatches * counted.calls,
              model[kind].calls)
        << kind << " under " << GetParam();
    EXPECT_DOUBLE_EQ(counted.bytesPerCall, model[kind].bytesPerCall) << kind;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, PlanConsistency,
                         testing::Values("tp=2,dp=4", "tp=4,dp=2,mbs=2",
                                         "tp=2,dp=4,sp=1",
                                         "tp=8,dp=1,mbs=4,sp=1"));

} // namespace
