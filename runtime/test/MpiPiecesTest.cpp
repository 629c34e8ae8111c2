//===- MpiPiecesTest.cpp - MPI messages in int-sized pieces ---------------===//
//
// MPI counts are ints: the communicators send and receive a message of
// more than 2^31 - 1 bytes (a checkpoint gather of a large shard) as
// pieces forEachMpiPiece gives, and collectives in pieces of elements.
//
//===----------------------------------------------------------------------===//

#include "../mpi/MpiPieces.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

using namespace partita::runtime;

namespace {

// Point-to-point messages go to MPI in pieces its int counts hold: a 2.5
// GiB checkpoint gather as three, an empty message as one.
TEST(MpiPieces, CoverTheMessageInIntSizedPieces) {
  using Pieces = std::vector<std::pair<int64_t, int>>;
  auto pieces = [](int64_t bytes) {
    Pieces all;
    forEachMpiPiece(bytes, [&](int64_t at, int count) {
      all.push_back({at, count});
    });
    return all;
  };
  constexpr int64_t GiB = int64_t(1) << 30;
  EXPECT_EQ(pieces(0), (Pieces{{0, 0}}));
  EXPECT_EQ(pieces(100), (Pieces{{0, 100}}));
  EXPECT_EQ(pieces(GiB), (Pieces{{0, int(GiB)}}));
  EXPECT_EQ(pieces(5 * GiB / 2),
            (Pieces{{0, int(GiB)}, {GiB, int(GiB)}, {2 * GiB, int(GiB / 2)}}));
}

// Collectives go in pieces of elements: 7 in pieces of 2 end in a shorter
// one (comm-check.test runs them).
TEST(MpiPieces, CollectivesInPiecesOfElements) {
  std::vector<std::pair<int64_t, int>> all;
  forEachPiece(7, 2, [&](int64_t at, int count) {
    all.push_back({at, count});
  });
  EXPECT_EQ(all, (std::vector<std::pair<int64_t, int>>{
                     {0, 2}, {2, 2}, {4, 2}, {6, 1}}));
}

} // namespace
