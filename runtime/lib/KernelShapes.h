//===- KernelShapes.h - Launches against their kernels ----------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_LIB_KERNELSHAPES_H
#define PARTITA_RUNTIME_LIB_KERNELSHAPES_H

#include "partita/runtime/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace partita::runtime {

/// Why kernel launch `l` of `program` would read or write outside its
/// buffers (a shape, dtype or param that disagrees with the others), or
/// empty when it would not. Its kernel and buffer counts are known good.
std::string kernelLaunchError(const Launch &l, const Program &program,
                              const Plan &plan);

/// The same for a collective launch (its group known): its input and
/// output against each other and the group's size, and its `dim`; and the
/// ranks it combines against what its buffers hold (a micro-batch's values
/// only within a data-parallel replica's stage, a parameter's only between
/// ranks that hold the same part of it).
std::string collectiveLaunchError(const Launch &l, const Program &program,
                                  const Plan &plan);

/// One of a backward kernel's inputs that its forward read or wrote.
using plan::SavedOperand;

/// A program's forward kernel launches (rms_norm, linear, attention, ...),
/// by what they read, to match each backward launch with one: a backward
/// kernel differentiates a forward that ran.
class ForwardLaunches {
public:
  explicit ForwardLaunches(const Program &program);

  /// Why backward kernel launch `l` has no forward launch that read what
  /// it reads as the forward's values (the inputs, the weight's
  /// parameter, the outputs it keeps: an all_gather's output stands for
  /// its input, which a sequence-parallel backward gathers again) with
  /// the same params; empty when it has one, or is no such kernel.
  std::string unpairedError(const Launch &l) const;

  /// A forward launch, by its place in the program.
  struct Place {
    size_t phase, index;
  };
  /// The forward launches that backward kernel launch `l` may
  /// differentiate: those with its saved operands and params.
  std::vector<Place> pairedForwards(const Launch &l) const;

  /// Which of backward kernel launch `l`'s inputs hold its forward's
  /// values.
  std::vector<SavedOperand> savedInputs(const Launch &l) const;

private:
  /// unpairedError's words, having put the matching forwards in `paired`
  /// (all of them; without it, it stops at the first).
  std::string pairWith(const Launch &l, std::vector<Place> *paired) const;

  /// What operand `buffer` holds, as a forward and a backward must agree.
  std::string identity(int buffer) const;

  const Program &program;
  /// Each buffer that all_gathers of a micro-batch's values write, and
  /// their input (-1 where they disagree).
  std::map<int, int> gatheredFrom;
  /// By forward kernel, its launches and their places.
  struct Forward {
    const Launch *launch;
    Place place;
  };
  std::map<Kernel, std::vector<Forward>> forwards;
};

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_LIB_KERNELSHAPES_H
