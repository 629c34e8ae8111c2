//===- PipelineSchedule.h - The order a pipeline rank runs in ---*- C++ -*-===//
//
// The forward and backward runs of one pipeline rank, in the order of its
// schedule (GPipe, 1F1B, Megatron-LM's interleaved 1F1B). The schedule pass
// writes this order into each exec.program; the cost model reads from it how
// many micro-batches of each model chunk a rank holds at once, so the memory
// it predicts is the memory plan's.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_COSTMODEL_PIPELINESCHEDULE_H
#define PARTITA_COMPILER_COSTMODEL_PIPELINESCHEDULE_H

#include "compiler/CostModel/ParallelConfig.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <vector>

namespace partita {

struct PipelineRun {
  bool forward;
  int64_t microBatch;
  /// The model chunk, numbered over the whole pipeline: local * pp + rank.
  int64_t chunk;
};

/// Calls `visit` on pipeline rank `rank`'s runs under `c` (numMicroBatches,
/// pp, vpp and schedule), in order, without storing them.
void forEachPipelineRun(const ParallelConfig &c, int64_t rank,
                        llvm::function_ref<void(const PipelineRun &)> visit);

/// Pipeline rank `rank`'s runs, in order.
std::vector<PipelineRun> pipelineRuns(const ParallelConfig &c, int64_t rank);

/// The micro-batches each of rank `rank`'s chunks (local index) has run
/// forward but not yet backward, at the schedule's fullest moments: the
/// moments no other one exceeds in every chunk. When the chunks' kept
/// activations share one region (exec-plan-memory), its peak is the largest
/// of these counts weighted by the chunks' bytes. Walked once per thread and
/// schedule; the reference lasts as long as the thread.
const std::vector<std::vector<int64_t>> &fullestMoments(const ParallelConfig &c,
                                                        int64_t rank);

} // namespace partita

#endif // PARTITA_COMPILER_COSTMODEL_PIPELINESCHEDULE_H
