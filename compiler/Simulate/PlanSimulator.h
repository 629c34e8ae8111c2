//===- PlanSimulator.h - Discrete-event simulation of plans -----*- C++ -*-===//
//
// Runs the exec programs of a compiled plan on a model of the cluster: each
// pipeline rank's representative (dp and tp ranks run the same program in
// lock step) executes its schedule launch by launch, kernels on the compute
// stream and collectives on one comm stream per group (each group its own
// communicator, as on GPUs), timed by the cost model's
// roofline and collective models; pipeline messages are matched in order
// between neighbouring ranks and cost the link between them. What comes out
// is the predicted step, what each stream did, the communication the
// compute stream waited for, the pipeline bubble, and a Chrome trace.
// docs/simulator.md has the semantics.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_SIMULATE_PLANSIMULATOR_H
#define PARTITA_COMPILER_SIMULATE_PLANSIMULATOR_H

#include "compiler/CostModel/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace partita {

/// One launch as the simulation placed it.
struct SimulatedSpan {
  int64_t ppRank = 0;
  int64_t rank = 0; // the representative's global rank
  /// "compute", "comm GROUP" (the collectives of one group) or "p2p".
  std::string stream;
  std::string name, phase;
  int64_t microBatch = -1; // -1 in the step phase
  double startS = 0, durationS = 0;
};

/// What one pipeline rank's representative did in the step.
struct SimulatedRank {
  int64_t ppRank = 0, rank = 0;
  double computeBusyS = 0; // kernels
  double commBusyS = 0;    // collectives, sends and receives on the link
  /// Time the compute stream waited for collectives, by group.
  std::map<std::string, double> exposedCommS;
  /// Time the compute stream waited for pipeline messages.
  double pipelineWaitS = 0;
  double finishS = 0;
};

struct SimulationResult {
  double stepTimeS = 0;
  std::vector<SimulatedRank> ranks;
  /// Exposed communication of the busiest rank, by group ("pp" for waits
  /// on pipeline messages beyond the bubble's share is not separated).
  std::map<std::string, double> exposedCommS;
  double exposedCommTotalS = 0;
  /// Mean over pipeline ranks of the time their compute stream idles while
  /// waiting for other stages (pipeline messages and the end of the step).
  double bubbleS = 0, bubbleFraction = 0;
  std::vector<SimulatedSpan> spans; // only when asked for
};

struct SimulationOptions {
  CostParams costParams;
  bool recordSpans = false;
};

/// Simulates one training step of the scheduled exec programs of `module`
/// (with its #dist.strategy and #dist.topology). Errors name the program
/// and launch that cannot be simulated, or the ranks that wait on each
/// other forever.
llvm::Expected<SimulationResult> simulatePlan(mlir::ModuleOp module,
                                              const SimulationOptions &options);

/// The result's figures as a JSON object (the "simulated" report keys).
llvm::json::Object simulationJson(const SimulationResult &result);

/// A Chrome trace (Perfetto, chrome://tracing) of the spans: a process per
/// representative rank, a thread per stream ("compute" first), like
/// plan-run --trace.
llvm::json::Value chromeTrace(const SimulationResult &result);

} // namespace partita

#endif // PARTITA_COMPILER_SIMULATE_PLANSIMULATOR_H
