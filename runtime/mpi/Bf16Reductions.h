//===- Bf16Reductions.h - bf16 sums and maxima for MPI ----------*- C++ -*-===//
//
// MPI has no bf16 type: bf16 elements travel as MPI_UINT16_T and reduce by
// these operations, each pair of values added (or compared) in f32 and
// rounded back to bf16, as NCCL reduces bf16. Used by the MPI communicator
// and by the CUDA emulator's NCCL, which runs over MPI.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_RUNTIME_MPI_BF16REDUCTIONS_H
#define PARTITA_RUNTIME_MPI_BF16REDUCTIONS_H

#include "partita/runtime/Bf16.h"

#include <mpi.h>

#include <algorithm>

namespace partita::runtime {

/// inout[i] = bf16(in[i] + inout[i]), or their maximum, over MPI_UINT16_T.
template <bool Max>
void combineBf16(void *in, void *inout, int *length, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = fromBf16(a[i]), y = fromBf16(b[i]);
    b[i] = toBf16(Max ? std::max(x, y) : x + y);
  }
}

/// The MPI operation summing (or taking the maximum of) bf16 elements sent
/// as MPI_UINT16_T; created at the first call, after MPI_Init.
inline MPI_Op bf16Reduction(bool max) {
  auto create = [](MPI_User_function *f) {
    MPI_Op op;
    MPI_Op_create(f, /*commute=*/1, &op);
    return op;
  };
  static MPI_Op sum = create(combineBf16<false>);
  static MPI_Op maximum = create(combineBf16<true>);
  return max ? maximum : sum;
}

} // namespace partita::runtime

#endif // PARTITA_RUNTIME_MPI_BF16REDUCTIONS_H
