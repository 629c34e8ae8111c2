//===- ParallelRoles.cpp - What tensor parallelism makes of an op ---------===//

#include "compiler/Analysis/ParallelRoles.h"

using namespace mlir;

namespace partita {

bool isRowParallel(tfm::LinearOp linear) {
  Operation *producer = linear.getInput().getDefiningOp();
  return producer &&
         isa<tfm::AttentionOp, tfm::SwigluOp, tfm::GeluOp, tfm::SiluOp>(
             producer);
}

bool feedsKeyOrValue(Value value) {
  for (Operation *user : value.getUsers()) {
    if (auto rotary = dyn_cast<tfm::RotaryOp>(user))
      if (feedsKeyOrValue(rotary.getResult()))
        return true;
    if (auto attention = dyn_cast<tfm::AttentionOp>(user))
      if (attention.getKey() == value || attention.getValue() == value)
        return true;
  }
  return false;
}

} // namespace partita
