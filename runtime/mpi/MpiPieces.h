//===- MpiPieces.h - Messages of any size as MPI messages -------*- C++ -*-===//
//
// MPI counts are ints: a message goes as pieces of at most 1 GiB, so that
// one of over 2 GiB (a checkpoint gathering a large shard in f32, a
// collective of over 2^31 elements) fits them. Used by the MPI
// communicator and by the NCCL communicator's host messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_MPI_MPIPIECES_H
#define PARTITA_RUNTIME_MPI_MPIPIECES_H

#include <algorithm>
#include <cstdint>

namespace partita::runtime {

constexpr int64_t kMpiPieceBytes = int64_t(1) << 30;

/// Calls piece(offset, count) for the consecutive pieces of `total` units,
/// each at most `most` units (at most INT_MAX), and at least one (nothing
/// is one empty piece).
template <typename Piece>
void forEachPiece(int64_t total, int64_t most, Piece piece) {
  int64_t at = 0;
  do {
    int count = int(std::min(total - at, most));
    piece(at, count);
    at += count;
  } while (at < total);
}

/// Calls piece(offset, bytes) for the consecutive pieces of a message of
/// `bytes`, each at most kMpiPieceBytes. MPI delivers the messages between
/// two ranks with one tag and communicator in the order they were sent, so
/// a receiver taking the same pieces in turn gets the message whole.
template <typename Piece> void forEachMpiPiece(int64_t bytes, Piece piece) {
  forEachPiece(bytes, kMpiPieceBytes, piece);
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_MPIPIECES_H
