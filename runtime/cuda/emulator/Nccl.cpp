//===- Nccl.cpp - The NCCL calls of the backend, over MPI -----------------===//
//
// The NCCL API the NCCL communicator calls, for emulated devices whose
// memory is host memory: each NCCL communicator is an MPI communicator of
// the same ranks in the same order, so NcclCommunicator.cpp runs unchanged
// in partita-cuda-emulated-run. An operation first runs the work its
// stream holds (and what that waits for), so it reads its inputs as a GPU
// would once the stream reached it. Then, as with NCCL, a collective or
// receive returns at once and runs apart from the host: a nonblocking MPI
// call on copies, in flight on its stream (Emulator.h's Work), whose event
// completes once the host's next emulator call finds it delivered, and
// whose outputs are written then (the late stream order) or when the
// stream is next needed (eager). So a peer that never takes part leaves
// the operation pending for the communicator's watchdog to see, and (in
// the eager order) a kernel that reads a result without waiting for it
// reads the old values.
// A send copies its data and goes out with MPI_Isend, complete for its
// stream at once (as if NCCL buffered it).
//
// Like NCCL, it takes device memory only: a buffer that does not lie wholly
// in one cudaMalloc allocation is ncclInvalidArgument, where a GPU would
// fault or read garbage.
//
// PARTITA_EMULATOR_NCCL_FAULT=RANK:N injects the fault NCCL reports
// asynchronously when a peer's connection drops: the Nth NCCL operation
// (collective, send or receive, counted from 1) that world rank RANK
// enqueues never arrives, and its communicator's ncclCommGetAsyncError
// reports ncclRemoteError from then on. So the communicator's watchdog is
// tested on the error NCCL raises, not only on a timeout.
//
// ncclCommInitRank meets its members without a parent communicator: each
// sends its world rank to the rank that made the unique id, which answers
// with the list, and the members create the MPI communicator of that group.
//
//===----------------------------------------------------------------------===//

#include "../../mpi/Bf16Reductions.h"
#include "Emulator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  /// Sends in flight: their data, copied at the call, and requests.
  std::list<std::pair<std::vector<char>, MPI_Request>> sends;
  /// What ncclCommGetAsyncError reports, read from the watchdog's thread.
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
};

namespace emulator = partita::runtime::cuda::emulator;

namespace {

/// What ncclGetUniqueId puts in the id: who made it, and its number among
/// the ids that rank made.
struct IdContents {
  int creator;
  int sequence;
};
static_assert(sizeof(IdContents) <= sizeof(ncclUniqueId), "fits in the id");

/// The tags of the members' meeting: one per id of a creator, so the
/// meetings of several communicators a rank creates never mix.
constexpr int kMeetingTagBase = 16384;

int worldRank() {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

bool datatype(ncclDataType_t type, MPI_Datatype &mpi, size_t &bytes) {
  switch (type) {
  case ncclFloat32:
    mpi = MPI_FLOAT;
    bytes = 4;
    return true;
  case ncclInt8: // ncclChar
    mpi = MPI_BYTE;
    bytes = 1;
    return true;
  case ncclBfloat16: // reduced by Bf16Reductions.h's operations
    mpi = MPI_UINT16_T;
    bytes = 2;
    return true;
  default:
    return false;
  }
}

bool operation(ncclRedOp_t op, ncclDataType_t type, MPI_Op &mpi) {
  if (op != ncclSum && op != ncclMax)
    return false;
  if (type == ncclBfloat16)
    mpi = partita::runtime::bf16Reduction(op == ncclMax);
  else
    mpi = op == ncclSum ? MPI_SUM : MPI_MAX;
  return true;
}

/// Finishes the communicator's sends that MPI has delivered.
void reap(ncclComm *comm) {
  for (auto it = comm->sends.begin(); it != comm->sends.end();) {
    int done = 0;
    MPI_Test(&it->second, &done, MPI_STATUS_IGNORE);
    it = done ? comm->sends.erase(it) : std::next(it);
  }
}

/// A call's arguments in MPI's terms.
struct MpiArgs {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  size_t bytes = 0;
  MPI_Op op = MPI_OP_NULL;
};

/// A buffer of a call, and its elements.
struct Buffer {
  const void *data;
  size_t elements;
};

/// Whether a call's arguments are ones NCCL takes (a communicator, a type
/// and reduction the backend uses, buffers wholly in device memory),
/// filling `args`.
bool takes(ncclComm_t comm, ncclDataType_t type, std::optional<ncclRedOp_t> op,
           std::initializer_list<Buffer> buffers, MpiArgs &args) {
  if (!comm || !datatype(type, args.type, args.bytes) ||
      (op && !operation(*op, type, args.op)))
    return false;
  for (const Buffer &b : buffers)
    if (!emulator::onDevice(b.data, b.elements * args.bytes))
      return false;
  return true;
}

/// The number of ranks of `comm`.
size_t ranks(ncclComm_t comm) {
  int size = 0;
  MPI_Comm_size(comm->mpi, &size);
  return size_t(size);
}

ncclResult_t mpiResult(int status) {
  return status == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

/// The NCCL operation this rank loses (PARTITA_EMULATOR_NCCL_FAULT), by its
/// number among those it enqueues; none when the fault names another rank.
std::optional<long long> lostOperation() {
  static const std::optional<long long> lost =
      []() -> std::optional<long long> {
    const char *spec = std::getenv("PARTITA_EMULATOR_NCCL_FAULT");
    if (!spec || !*spec)
      return std::nullopt;
    int worldSize;
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
    long long rank, nth;
    if (!emulator::parseFault(spec, worldSize, rank, nth)) {
      std::fprintf(stderr,
                   "CUDA emulator: PARTITA_EMULATOR_NCCL_FAULT must be RANK:N "
                   "(a world rank below %d and an operation from 1), got "
                   "\"%s\"\n",
                   worldSize, spec);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank != worldRank())
      return std::nullopt;
    return nth;
  }();
  return lost;
}

/// Whether the operation of `comm` being enqueued on `stream` (reached
/// already) is the one the injected fault loses. If it is, it stays in
/// flight there for ever (a host that waits for it waits until the job is
/// stopped) and `comm` reports ncclRemoteError.
bool loses(ncclComm_t comm, cudaStream_t stream) {
  static long long enqueued = 0;
  std::optional<long long> lost = lostOperation();
  if (!lost || ++enqueued != *lost)
    return false;
  auto op = std::make_shared<emulator::Work>();
  op->poll = [] { return false; };
  op->run = [] {
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  };
  emulator::enqueueInFlight(stream, std::move(op));
  comm->asyncError = ncclRemoteError;
  return true;
}

/// Enqueues a nonblocking MPI operation of `comm` on `stream`, after the
/// stream's earlier work: `start` begins it on a copy of the `inputBytes` at
/// `input`, into a result buffer of `resultBytes` that is copied to `out`
/// when it lands (Emulator.h's StreamOrder).
template <typename Start>
ncclResult_t startOn(ncclComm_t comm, cudaStream_t stream, const void *input,
                     size_t inputBytes, void *out, size_t resultBytes,
                     Start start) {
  emulator::reachStream(stream);
  if (loses(comm, stream))
    return ncclSuccess;
  struct Buffers {
    std::vector<char> input, result;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  auto buffers = std::make_shared<Buffers>();
  const char *in = static_cast<const char *>(input);
  buffers->input.assign(in, in + inputBytes);
  buffers->result.resize(resultBytes);
  int status =
      start(buffers->input.data(), buffers->result.data(), &buffers->request);
  if (status != MPI_SUCCESS)
    return ncclSystemError;
  auto op = std::make_shared<emulator::Work>();
  op->poll = [buffers] {
    int done = 0;
    MPI_Test(&buffers->request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  };
  op->run = [buffers, out] {
    MPI_Wait(&buffers->request, MPI_STATUS_IGNORE);
    std::memcpy(out, buffers->result.data(), buffers->result.size());
  };
  emulator::enqueueInFlight(stream, std::move(op));
  return ncclSuccess;
}

} // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static int made = 0;
  std::memset(id, 0, sizeof(*id));
  IdContents contents{worldRank(), made++};
  std::memcpy(id->internal, &contents, sizeof(contents));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  lostOperation(); // a bad PARTITA_EMULATOR_NCCL_FAULT stops the job here
  IdContents contents;
  std::memcpy(&contents, id.internal, sizeof(contents));
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  int tag = kMeetingTagBase + contents.sequence % kMeetingTagBase;
  // members[r]: the world rank of communicator rank r.
  std::vector<int> members(size_t(nranks), -1);
  int me = worldRank();
  if (me == contents.creator) {
    members[size_t(rank)] = me;
    for (int k = 1; k < nranks; ++k) {
      int theirs[2]; // communicator rank, world rank
      MPI_Recv(theirs, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      if (theirs[0] < 0 || theirs[0] >= nranks || members[theirs[0]] != -1)
        return ncclInvalidUsage;
      members[size_t(theirs[0])] = theirs[1];
    }
    for (int r = 0; r < nranks; ++r)
      if (members[size_t(r)] != me)
        MPI_Send(members.data(), nranks, MPI_INT, members[size_t(r)], tag,
                 MPI_COMM_WORLD);
  } else {
    int mine[2] = {rank, me};
    MPI_Send(mine, 2, MPI_INT, contents.creator, tag, MPI_COMM_WORLD);
    MPI_Recv(members.data(), nranks, MPI_INT, contents.creator, tag,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, nranks, members.data(), &group);
  auto *made = new ncclComm;
  int status = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &made->mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  if (status != MPI_SUCCESS) {
    delete made;
    return ncclSystemError;
  }
  *comm = made;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  MPI_Comm split;
  int status = MPI_Comm_split(
      comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key,
      &split);
  if (status != MPI_SUCCESS)
    return ncclSystemError;
  if (split == MPI_COMM_NULL) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  *newcomm = new ncclComm;
  (*newcomm)->mpi = split;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  for (auto &[data, request] : comm->sends)
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  // The job stops next (MPI_Abort); nothing to wait for.
  return comm ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error) {
  if (!comm)
    return ncclInvalidArgument;
  *error = comm->asyncError;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclSystemError:
    return "MPI call failed (the NCCL stand-in of the CUDA emulator)";
  case ncclInvalidArgument:
    return "invalid argument (a buffer not in device memory?)";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  default:
    return "an error the NCCL stand-in does not raise";
  }
}

ncclResult_t ncclAllReduce(const void *in, void *out, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  MpiArgs a;
  if (!takes(comm, type, op, {{in, count}, {out, count}}, a))
    return ncclInvalidArgument;
  return startOn(comm, stream, in, count * a.bytes, out, count * a.bytes,
                 [&](const char *input, char *result, MPI_Request *request) {
                   return MPI_Iallreduce(input, result, int(count), a.type,
                                         a.op, comm->mpi, request);
                 });
}

ncclResult_t ncclAllGather(const void *in, void *out, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  MpiArgs a;
  if (!comm || !takes(comm, type, std::nullopt,
                      {{in, count}, {out, count * ranks(comm)}}, a))
    return ncclInvalidArgument;
  return startOn(
      comm, stream, in, count * a.bytes, out, count * ranks(comm) * a.bytes,
      [&](const char *input, char *result, MPI_Request *request) {
        return MPI_Iallgather(input, int(count), a.type, result, int(count),
                              a.type, comm->mpi, request);
      });
}

ncclResult_t ncclReduceScatter(const void *in, void *out, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  MpiArgs a;
  if (!comm ||
      !takes(comm, type, op, {{in, count * ranks(comm)}, {out, count}}, a))
    return ncclInvalidArgument;
  return startOn(
      comm, stream, in, count * ranks(comm) * a.bytes, out, count * a.bytes,
      [&](const char *input, char *result, MPI_Request *request) {
        return MPI_Ireduce_scatter_block(input, result, int(count), a.type,
                                         a.op, comm->mpi, request);
      });
}

ncclResult_t ncclSend(const void *data, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  MpiArgs a;
  if (!takes(comm, type, std::nullopt, {{data, count}}, a))
    return ncclInvalidArgument;
  emulator::reachStream(stream);
  if (loses(comm, stream))
    return ncclSuccess;
  reap(comm);
  comm->sends.emplace_back();
  auto &[copy, request] = comm->sends.back();
  copy.assign(static_cast<const char *>(data),
              static_cast<const char *>(data) + count * a.bytes);
  return mpiResult(
      MPI_Isend(copy.data(), int(count), a.type, peer, 0, comm->mpi, &request));
}

ncclResult_t ncclRecv(void *data, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  MpiArgs a;
  if (!takes(comm, type, std::nullopt, {{data, count}}, a))
    return ncclInvalidArgument;
  reap(comm);
  return startOn(comm, stream, nullptr, 0, data, count * a.bytes,
                 [&](const char *, char *result, MPI_Request *request) {
                   return MPI_Irecv(result, int(count), a.type, peer, 0,
                                    comm->mpi, request);
                 });
}
