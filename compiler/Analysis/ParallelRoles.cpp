//===- ParallelRoles.cpp - What tensor parallelism makes of an op ---------===//

#include "compiler/Analysis/ParallelRoles.h"

using namespace mlir;

namespace partita {

bool isRowParallel(tfm::LinearOp linear) {
  Operation *producer = linear.getInput().getDefiningOp();
  return producer &&
         (isa<tfm::AttentionOp>(producer) || tfm::isActivation(producer));
}

bool feedsKeyOrValue(Value value) {
  for (Operation *user : value.getUsers()) {
    // Rotary embeddings and per-head norms keep the heads where they are.
    if (isa<tfm::RotaryOp, tfm::RmsNormOp, tfm::LayerNormOp>(user) &&
        user->getOperand(0) == value && feedsKeyOrValue(user->getResult(0)))
      return true;
    if (auto attention = dyn_cast<tfm::AttentionOp>(user))
      if (attention.getKey() == value || attention.getValue() == value)
        return true;
  }
  return false;
}

} // namespace partita
