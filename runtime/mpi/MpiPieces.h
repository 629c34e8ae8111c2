//===- MpiPieces.h - Messages of any size as MPI messages -------*- C++ -*-===//
//
// MPI counts are ints: a point-to-point message goes as pieces of at most
// 1 GiB, so that one of over 2 GiB (a checkpoint gathering a large shard in
// f32) fits them. Used by the MPI communicator and by the NCCL
// communicator's host messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_MPI_MPIPIECES_H
#define PARTITA_RUNTIME_MPI_MPIPIECES_H

#include <algorithm>
#include <cstdint>

namespace partita::runtime {

constexpr int64_t kMpiPieceBytes = int64_t(1) << 30;

/// Calls piece(offset, bytes) for the consecutive pieces of a message of
/// `bytes`, each at most kMpiPieceBytes, and at least one (an empty message
/// is one empty piece). MPI delivers the messages between two ranks with
/// one tag and communicator in the order they were sent, so a receiver
/// taking the same pieces in turn gets the message whole.
template <typename Piece> void forEachMpiPiece(int64_t bytes, Piece piece) {
  int64_t at = 0;
  do {
    int count = int(std::min(bytes - at, kMpiPieceBytes));
    piece(at, count);
    at += count;
  } while (at < bytes);
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_MPIPIECES_H
