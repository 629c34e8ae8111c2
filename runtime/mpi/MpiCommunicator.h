//===- MpiCommunicator.h - The Communicator over MPI ------------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H
#define PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H

#include "partita/runtime/Communicator.h"

#include <memory>

namespace partita::runtime {

/// One MPI communicator per group of the plan this rank belongs to
/// (MPI_Comm_split of MPI_COMM_WORLD). MPI must be initialised.
std::unique_ptr<Communicator> createMpiCommunicator(const Plan &plan);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H
