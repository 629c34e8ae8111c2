//===- ParallelRoles.h - What tensor parallelism makes of an op -*- C++ -*-===//
//
// Megatron-LM's roles, read off the graph's structure: the cost model and
// the partitioner must agree on them.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_ANALYSIS_PARALLELROLES_H
#define PARTITA_COMPILER_ANALYSIS_PARALLELROLES_H

#include "dialects/tfm/TfmOps.h"

namespace partita {

/// A linear whose input comes from the attention core or an activation
/// (attention out, MLP down): split along its input, then reduced. Every
/// other linear (q, k, v, gate, up) is column-parallel.
bool isRowParallel(tfm::LinearOp linear);

/// Whether `value` (possibly through a rotary op) is an attention's key or
/// value: its projection splits over the key/value heads.
bool feedsKeyOrValue(mlir::Value value);

} // namespace partita

#endif // PARTITA_COMPILER_ANALYSIS_PARALLELROLES_H
