//===- KernelShapes.h - Launches against their kernels ----------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_LIB_KERNELSHAPES_H
#define PARTITA_RUNTIME_LIB_KERNELSHAPES_H

#include "partita/runtime/Plan.h"

#include <string>

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

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_LIB_KERNELSHAPES_H
