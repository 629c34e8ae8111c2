//===- PlanCommunicationTest.cpp - plan traffic against the cost model ----===//
//
// The bytes each rank communicates per step in the compiled plan (exec
// programs run over the schedule's micro-batches) and the communication
// volume the cost model charges for, group by group, must agree: if they
// differ, one of them is wrong.
//
//===----------------------------------------------------------------------===//

#include "CostedModel.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <set>

using namespace partita;

namespace {

constexpr const char *kModel = R"({"version": 1, "name": "m",
  "model": {"vocab_size": 512, "hidden_size": 128, "num_layers": 4,
            "num_heads": 8, "num_kv_heads": 4, "ffn_hidden_size": 256,
            "norm": "rms_norm", "activation": "swiglu",
            "position_embedding": "rope", "tie_embeddings": true},
  "training": {"seq_len": 64, "global_batch": 16, "dtype": "bf16"}})";

using Volume = std::map<std::string, double>;

/// Bytes per step by group on the busiest pipeline rank of the plan: a
/// collective moves its full-size buffer; a rank's pipeline traffic is its
/// busier direction (it sends and receives at once).
Volume planVolume(mlir::ModuleOp module, int64_t microBatches) {
  Volume busiest;
  for (auto program : module.getOps<exec::ProgramOp>()) {
    llvm::StringMap<double> bytes;
    for (auto buffer : program.getBody().front().getOps<exec::BufferOp>())
      bytes[buffer.getSymName()] =
          buffer.getNumElements() *
          buffer.getTensorType().getElementTypeBitWidth() / 8.0;
    Volume volume;
    double sent = 0, received = 0;
    for (auto phase : program.getBody().front().getOps<exec::PhaseOp>()) {
      double runs = phase.getKind() == exec::PhaseKind::step ? 1 : microBatches;
      for (mlir::Operation &op : phase.getBody().front()) {
        if (auto c = llvm::dyn_cast<exec::CollectiveOp>(op)) {
          bool gather = c.getKind() == exec::CollectiveKind::all_gather;
          std::string group = c.getGroup() == exec::Group::tp_kv
                                  ? "tp"
                                  : exec::stringifyGroup(c.getGroup()).str();
          volume[group] += (c.getLastMicroBatch() ? 1 : runs) *
                           bytes[gather ? c.getOutput() : c.getInput()];
        } else if (auto s = llvm::dyn_cast<exec::SendOp>(op)) {
          sent += runs * bytes[s.getBuffer()];
        } else if (auto r = llvm::dyn_cast<exec::RecvOp>(op)) {
          received += runs * bytes[r.getBuffer()];
        }
      }
    }
    volume["pp"] = std::max(sent, received);
    for (auto &[group, b] : volume)
      busiest[group] = std::max(busiest[group], b);
  }
  return busiest;
}

class PlanCommunication : public testing::TestWithParam<const char *> {};

// Both gradient dtypes: bf16 gradients (gradient_bytes=2) and f32 ones
// (gradient_bytes=4, exec-build-backward's gradient-dtype=f32).
TEST_P(PlanCommunication, BytesPerStepMatchTheCostModel) {
  for (int gradientBytes : {2, 4}) {
    CostParams params;
    params.gradientBytes = gradientBytes;
    CostedModel costed;
    costed.build(kModel, GetParam(), "dgx-h100", params);
    if (HasFatalFailure())
      return;
    Volume model;
    for (const CollectiveCost &c : costed.estimate.collectives)
      model[c.group] += c.bytesPerCall * c.callsPerStep;

    mlir::PassManager pm(&costed.context);
    pm.addPass(createDistPartitionTensors());
    pm.addPass(createDistSplitStages());
    pm.addPass(createDistLowerToExec());
    pm.addPass(createExecBuildBackward({params.gradientDtype()}));
    ASSERT_TRUE(mlir::succeeded(pm.run(*costed.module)));
    Volume plan = planVolume(*costed.module, costed.config.numMicroBatches);

    for (const char *group : {"tp", "dp", "pp", "tied"}) {
      double expected = model[group], actual = plan[group];
      // The plan also moves a few bytes the model leaves out: the loss's
      // per-token statistics over tp (12 bytes a token against 2 h), the
      // loss over dp, and key/value gradients over tp_kv.
      double tolerance = std::string(group) == "tp" ? 0.03 : 1e-4;
      EXPECT_NEAR(actual, expected, tolerance * std::max(expected, 1.0))
          << group << " bytes per step under " << GetParam()
          << ", gradient_bytes=" << gradientBytes;
    }
  }
}

/// Calls per step of the data-parallel gradient reductions (or, with
/// `gathers`, of the ZeRO-1/2 parameter gathers after AdamW) on the rank
/// that makes the most: a bucket (collectives sharing a `bucket` number) is
/// one call.
double planDataParallelCalls(mlir::ModuleOp module, int64_t microBatches,
                             bool gathers) {
  double most = 0;
  for (auto program : module.getOps<exec::ProgramOp>()) {
    double calls = 0;
    for (auto phase : program.getBody().front().getOps<exec::PhaseOp>()) {
      double runs = phase.getKind() == exec::PhaseKind::step ? 1 : microBatches;
      std::set<int64_t> buckets;
      for (auto c : phase.getBody().front().getOps<exec::CollectiveOp>()) {
        exec::BufferKind input =
            program.lookupBuffer(c.getInputAttr().getAttr()).getKind();
        if (c.getGroup() != exec::Group::dp ||
            (gathers ? c.getKind() != exec::CollectiveKind::all_gather ||
                           phase.getKind() != exec::PhaseKind::step
                     : input != exec::BufferKind::param_grad))
          continue;
        auto bucket = c->getAttrOfType<mlir::IntegerAttr>("bucket");
        if (bucket && !buckets.insert(bucket.getInt()).second)
          continue;
        calls += c.getLastMicroBatch() ? 1 : runs;
      }
    }
    most = std::max(most, calls);
  }
  return most;
}

// The closed form charges each gradient bucket's latency once: it must
// count the buckets exec-overlap-communication forms, at the default size
// (each layer's gradients fit one) and at 50 KiB (the MLP's weights go
// alone, the attention's share); so too ZeRO-1/2's parameter gathers after
// AdamW, which the step phase packs by size alone.
TEST_P(PlanCommunication, GradientBucketsMatchTheCostModel) {
  for (double bucketMb : {25.0, 0.05}) {
    CostParams params;
    params.bucketMb = bucketMb;
    CostedModel costed;
    costed.build(kModel, GetParam(), "dgx-h100", params);
    if (HasFatalFailure())
      return;
    double model = 0, modelGathers = 0;
    for (const CollectiveCost &c : costed.estimate.collectives)
      if (c.group == "dp")
        (c.kind == CollectiveKind::AllGather ? modelGathers : model) +=
            c.callsPerStep;
    bool zero12 = costed.config.zero == 1 || costed.config.zero == 2;

    mlir::PassManager pm(&costed.context);
    pm.addPass(createDistPartitionTensors());
    pm.addPass(createDistSplitStages());
    pm.addPass(createDistLowerToExec());
    pm.addPass(createExecBuildBackward());
    pm.addPass(createExecOverlapCommunication({/*quiet=*/true, bucketMb}));
    ASSERT_TRUE(mlir::succeeded(pm.run(*costed.module)));
    int64_t microBatches = costed.config.numMicroBatches;
    EXPECT_EQ(planDataParallelCalls(*costed.module, microBatches, false), model)
        << "gradient reductions per step under " << GetParam()
        << ", bucket-mb=" << bucketMb;
    if (zero12)
      EXPECT_EQ(planDataParallelCalls(*costed.module, microBatches, true),
                modelGathers)
          << "parameter gathers per step under " << GetParam()
          << ", bucket-mb=" << bucketMb;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, PlanCommunication,
    testing::Values("dp=8", "dp=4,zero=1", "dp=4,zero=2", "dp=4,zero=3",
                    "tp=2,dp=4", "tp=2,dp=4,sp=1", "tp=8,dp=1,mbs=4",
                    "tp=4,dp=2,recompute=full", "tp=2,pp=2,dp=2",
                    "pp=2,dp=4,zero=1", "tp=2,pp=2,dp=2,sp=1,mbs=2",
                    "pp=2,vpp=2,dp=4,mbs=1,schedule=interleaved",
                    "tp=2,dp=4,zero=1", "tp=2,dp=4,zero=2,sp=1",
                    "pp=2,vpp=2,dp=4,zero=1,mbs=1,schedule=interleaved"));

} // namespace
