//===- PlanWalk.h - A plan's steps, followed as the executor runs them -*-===//
//
// Load checks that follow training steps launch by launch: what a program
// leaves in flight and which bytes of its arena each buffer holds, and how
// the pipeline ranks' messages and shared collectives wait for each other.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_LIB_PLANWALK_H
#define PARTITA_RUNTIME_LIB_PLANWALK_H

#include "partita/runtime/Plan.h"

#include <optional>
#include <string>

namespace partita::runtime {

/// What a check found wrong, and where: a JSON pointer into the plan.
struct PlanProblem {
  std::string at, what;
};

/// Walks two steps of `program` (at JSON path `path`), the second with
/// what the first left in flight, and finds the first launch that
/// - touches the output of an asynchronous collective not yet waited for,
///   or writes bytes the collective reads or writes (a race with it), or
///   waits with no collective in flight (the job would stop mid-step);
/// - with a memory plan, reads a buffer whose bytes another buffer
///   overwrote since it was written (the plan lets two buffers that are
///   live at once share bytes);
/// - reads a micro-batch's buffer (tokens, labels, activations and their
///   gradients) that its micro-batch did not write in this step;
/// - overwrites, with another value, one that nothing read: a
///   collective's or a receive's, a gradient, or a micro-batch's value
///   within its micro-batch's run;
/// - reads tensor-parallel partial sums (of a micro-batch's values, a
///   replicated parameter's gradient from sequence shards, a key/value
///   weight's gradient from one of its replicas) where whole values are
///   needed, or sums whole values over tensor-parallel ranks;
/// - as a backward kernel, reads other values than its forward read or
///   wrote (a recomputation remakes the forward's values).
/// The values a buffer holds come from its writes: launches (a kernel's
/// outputs, a collective's output, a receive) and the executor's own (the
/// initial parameters and optimizer state, the step's zeroed gradients
/// and scalars, a micro-batch's tokens and labels). After each step the
/// executor reads the loss, the gradient norm and the persistent state.
std::optional<PlanProblem> walkProgramSteps(const Plan &plan,
                                            const Program &program,
                                            const std::string &path);

/// Runs two steps of every pipeline rank's program with sends that do not
/// wait, receives that wait for their message, and collectives over
/// groups that span pipeline ranks (`world`, `pp`, `tied`) that wait
/// until every member rank has started them; finds the ranks that would
/// wait for each other until the collective timeout. Each direction's
/// messages are known to pair up, size for size (checked before).
std::optional<PlanProblem> findPipelineDeadlock(const Plan &plan);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_LIB_PLANWALK_H
