//===- Checkpoint.h - Sharded, atomic checkpoints ---------------*- C++ -*-===//
//
// DIR/step-NNNNNNNN/ holds one file per rank (its parameters, parameter
// shards and optimizer states) and manifest.json, written last, with each
// file's size and CRC-32. A checkpoint without a manifest, or whose files
// do not match it, is incomplete and never loaded. docs/runtime.md has the
// format.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_CHECKPOINT_H
#define PARTITA_RUNTIME_CHECKPOINT_H

#include "partita/runtime/Communicator.h"
#include "partita/runtime/Plan.h"
#include "partita/runtime/Trainer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partita::runtime {

/// Writes the checkpoint after `steps` completed steps (collective). Files
/// are written to temporaries, fsynced and renamed; the manifest last. Of
/// the older complete checkpoints, the newest is kept.
void saveCheckpoint(const Plan &plan, Trainer &trainer, Communicator &comm,
                    const std::string &dir, int64_t steps);

/// The checkpoint directories under `dir` that have a manifest, newest
/// first (their files are not checked).
std::vector<std::string> completeCheckpoints(const std::string &dir);

/// Loads the newest complete, intact checkpoint under `dir` (collective)
/// and returns its step count, or 0 when there is none. A checkpoint whose
/// files fail their checksums is reported by file and skipped. Throws
/// std::runtime_error when the newest intact one was saved under another
/// plan.
int64_t loadNewestCheckpoint(const Plan &plan, Trainer &trainer,
                             Communicator &comm, const std::string &dir);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_CHECKPOINT_H
