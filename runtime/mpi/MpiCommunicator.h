//===- MpiCommunicator.h - The Communicator over MPI ------------*- C++ -*-===//

#ifndef PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H
#define PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H

#include "MpiPieces.h"
#include "RankHosts.h"

#include "partita/runtime/Communicator.h"

#include <memory>

namespace partita::runtime {

/// One MPI communicator per group of the plan this rank belongs to
/// (MPI_Comm_split of MPI_COMM_WORLD). MPI must be initialised. Messages
/// and collectives go to MPI in pieces of at most `pieceBytes` (a
/// collective's elements: at least one a piece), which tests make small.
/// With `hosts`, a call past the watchdog's timeout says which ranks no
/// longer answer.
std::unique_ptr<Communicator>
createMpiCommunicator(const Plan &plan, int64_t pieceBytes = kMpiPieceBytes,
                      std::shared_ptr<const RankHosts> hosts = nullptr);

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_MPICOMMUNICATOR_H
