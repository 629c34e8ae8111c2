//===- ParallelConfig.h - A parallel training configuration -----*- C++ -*-===//
//
// The dimensions a strategy fixes: data / tensor / pipeline parallelism,
// virtual pipeline stages, ZeRO stage, micro-batching, recomputation,
// sequence parallelism and the pipeline schedule. Written and parsed as
// "dp=64,tp=8,pp=2,vpp=1,zero=1,mbs=1,recompute=selective,sp=1,schedule=1f1b".
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_COSTMODEL_PARALLELCONFIG_H
#define PARTITA_COMPILER_COSTMODEL_PARALLELCONFIG_H

#include "mlir/IR/Attributes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace partita {

enum class Recompute { None, Selective, Full };
enum class Schedule { GPipe, OneFOneB, Interleaved };

llvm::StringRef toString(Recompute recompute);
llvm::StringRef toString(Schedule schedule);

struct ParallelConfig {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  /// Model chunks per pipeline rank (interleaved 1F1B); 1 otherwise.
  int64_t vpp = 1;
  /// ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters
  /// sharded over the data-parallel group.
  int64_t zero = 0;
  int64_t microBatchSize = 1;
  /// global batch / (dp * microBatchSize).
  int64_t numMicroBatches = 1;
  Recompute recompute = Recompute::None;
  bool sequenceParallel = false;
  Schedule schedule = Schedule::OneFOneB;
  /// Layers of each pipeline stage, first to last (vpp = 1 only); empty:
  /// the even cut of numLayers / (pp * vpp) per model chunk.
  std::vector<int64_t> stageLayers;

  int64_t numDevices() const { return dp * tp * pp; }
  /// Sequence parallelism without full recomputation: backward gathers each
  /// gathered GEMM input again from its sequence shard.
  bool regathersInputs() const {
    return sequenceParallel && recompute != Recompute::Full;
  }
  /// Forward passes per micro-batch: two with full recomputation.
  int64_t forwardPasses() const { return recompute == Recompute::Full ? 2 : 1; }
  /// Sequences per optimizer step.
  int64_t globalBatch() const { return dp * microBatchSize * numMicroBatches; }
  /// The layer indices pipeline rank `rank` runs: its stage of stageLayers,
  /// or chunks rank, rank + pp, ... of an even cut.
  std::vector<int64_t> layersOfRank(int64_t rank, int64_t numLayers) const;
  /// The canonical text form (every key, in the order above).
  std::string str() const;
};

/// The module attribute for a configuration of a model with `numLayers`
/// layers, and back.
mlir::Attribute toStrategyAttr(const ParallelConfig &config, int64_t numLayers,
                               mlir::MLIRContext *context);
ParallelConfig fromStrategyAttr(mlir::Attribute strategy);

/// The keys a --strategy string gave; the rest are free.
struct PartialParallelConfig {
  std::optional<int64_t> dp, tp, pp, vpp, zero, microBatchSize;
  std::optional<Recompute> recompute;
  std::optional<bool> sequenceParallel;
  std::optional<Schedule> schedule;
};

/// `over`'s keys replace `base`'s.
PartialParallelConfig overlay(const PartialParallelConfig &base,
                              const PartialParallelConfig &over);

/// Parses "key=value,..."; unknown keys and bad values are errors that
/// name the key.
llvm::Expected<PartialParallelConfig> parseParallelConfig(llvm::StringRef text);

/// Fills what `partial` leaves out with the documented defaults (tp, pp,
/// vpp = 1, zero = 0, mbs = 1, recompute = none, sp = 0, schedule = 1f1b,
/// or interleaved when vpp > 1; dp = devices / (tp * pp)) and checks that
/// the result is consistent with the batch and the device count.
llvm::Expected<ParallelConfig>
completeParallelConfig(const PartialParallelConfig &partial, int64_t numDevices,
                       int64_t globalBatch, int64_t numLayers);

} // namespace partita

#endif // PARTITA_COMPILER_COSTMODEL_PARALLELCONFIG_H
