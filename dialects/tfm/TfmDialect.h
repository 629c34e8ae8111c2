//===- TfmDialect.h - The tfm model-graph dialect ---------------*- C++ -*-===//

#ifndef PARTITA_DIALECTS_TFM_TFMDIALECT_H
#define PARTITA_DIALECTS_TFM_TFMDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/tfm/TfmDialect.h.inc"

#endif // PARTITA_DIALECTS_TFM_TFMDIALECT_H
