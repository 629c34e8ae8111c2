//===- AttachTopology.cpp - dist-attach-topology --------------------------===//

#include "compiler/Topology/Topology.h"
#include "passes/Passes.h"

namespace partita {
#define GEN_PASS_DEF_DISTATTACHTOPOLOGY
#include "passes/Passes.h.inc"

namespace {

struct DistAttachTopologyPass
    : impl::DistAttachTopologyBase<DistAttachTopologyPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (topology.empty()) {
      module.emitError("dist-attach-topology needs topology=NAME[:N] or a "
                       ".json file");
      return signalPassFailure();
    }
    llvm::Expected<Topology> parsed = parseTopologyOption(topology);
    if (!parsed) {
      module.emitError(llvm::toString(parsed.takeError()));
      return signalPassFailure();
    }
    module->setAttr(dist::kTopologyAttrName,
                    toAttr(*parsed, module.getContext()));
  }
};

} // namespace
} // namespace partita
