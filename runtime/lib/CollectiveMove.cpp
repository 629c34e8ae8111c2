//===- CollectiveMove.cpp - A run of collectives, chunk by chunk ----------===//
//
// Trainer::collective: the data of a run of collectives (one launch, or a
// data-parallel bucket) moved around the communicator's calls, through the
// stream's workspace in chunks: as bf16 where the run moves as bf16, else
// as f32 (bf16 widened in, rounded out once).
//
//===----------------------------------------------------------------------===//

#include "partita/runtime/Trainer.h"

#include <algorithm>

namespace partita::runtime {

namespace {

/// v within [0, hi] (hi >= 0).
int64_t clamp(int64_t v, int64_t hi) { return std::clamp<int64_t>(v, 0, hi); }

} // namespace

/// One run in motion, with what every chunk of it needs.
struct Trainer::CollectiveMove {
  CollectiveMove(Trainer &trainer, const CollectiveRun &run, int64_t microBatch,
                 Communicator &c, Stream stream)
      : trainer(trainer), run(run), l(*run.members.front()),
        microBatch(microBatch), c(c), stream(stream), device(trainer.device),
        g(c.groupSize(l.group)), r(c.groupRank(l.group)),
        work(trainer.workspaces.count(stream.commLane())
                 ? trainer.workspaces.at(stream.commLane())
                 : nullptr),
        work16(reinterpret_cast<uint16_t *>(work)), acc(l.accumulateOutput),
        asBf16(trainer.movesAsBf16(l)),
        gather(l.collective == Launch::Collective::AllGather),
        inSpec(trainer.program.buffers[l.input]),
        outSpec(trainer.program.buffers[l.output]),
        in(trainer.storage(l.input, microBatch)),
        out(trainer.storage(l.output, microBatch)) {}

  /// Columns [first, first + n) of one row of shards of `shard` elements,
  /// at column `at` of a chunk of n columns: this rank's starts at inAt
  /// (elements past inEnd are zero), rank k's at outAt + k shard (written
  /// up to outEnd). A chunk holds pieces of one row or of several: a
  /// bucket's members, side by side, go as one collective.
  struct Piece {
    Storage *in = nullptr, *out = nullptr;
    const BufferSpec *inSpec = nullptr, *outSpec = nullptr;
    int64_t inAt = 0, inEnd = 0, outAt = 0, outEnd = 0, shard = 0, first = 0,
            n = 0, at = 0;
  };

  void allReduceInPlace();
  void byColumns();
  void byRows();

private:
  void called() {
    trainer.collectiveCalls.fetch_add(1, std::memory_order_relaxed);
  }
  void read(const Storage &s, const BufferSpec &spec, int64_t at, int64_t n,
            float *to);
  void write(Storage &s, const BufferSpec &spec, int64_t at, int64_t n,
             const float *from, bool accumulate);
  /// Of a piece's rank blocks, k shard apart, how many lie whole within
  /// `room` elements of the first.
  int64_t wholeBlocks(int64_t room, const Piece &p) const {
    return room < p.n ? 0 : std::min(g, (room - p.n) / p.shard + 1);
  }
  std::vector<Piece> rowsOfShards();
  void allGatherColumns(const std::vector<Piece> &pieces, int64_t n);
  void allGatherColumnsBf16(const std::vector<Piece> &pieces, int64_t n);
  void reduceScatterColumns(const std::vector<Piece> &pieces, int64_t n);
  void reduceScatterColumnsBf16(const std::vector<Piece> &pieces, int64_t n);
  void allReduceColumns(const std::vector<Piece> &pieces, int64_t n);
  void allGatherRows(int64_t first, int64_t n);
  void reduceScatterRows(int64_t first, int64_t n);

  Trainer &trainer;
  const CollectiveRun &run;
  const Launch &l;
  int64_t microBatch;
  Communicator &c;
  Stream stream;
  Device &device;
  int64_t g, r;
  float *work;
  uint16_t *work16;
  bool acc, asBf16, gather;
  /// The first launch's buffers: the whole run's, but for a bucket's.
  const BufferSpec &inSpec, &outSpec;
  Storage &in, &out;
};

/// Slices of a buffer as f32: copied (bf16 widened) into the workspace,
/// and written back (bf16 rounded once).
void Trainer::CollectiveMove::read(const Storage &s, const BufferSpec &spec,
                                   int64_t at, int64_t n, float *to) {
  if (n <= 0)
    return;
  if (spec.isBf16)
    device.widen(to, s.h.data() + at, n, stream);
  else
    device.transposeBlocks(to, s.f.data() + at, 1, 1, n, false, stream);
}

void Trainer::CollectiveMove::write(Storage &s, const BufferSpec &spec,
                                    int64_t at, int64_t n, const float *from,
                                    bool accumulate) {
  if (n <= 0)
    return;
  if (spec.isBf16)
    device.narrow(s.h.data() + at, from, n, accumulate, stream);
  else
    device.transposeBlocks(s.f.data() + at, from, 1, 1, n, accumulate, stream);
}

void Trainer::CollectiveMove::allGatherColumnsBf16(
    const std::vector<Piece> &pieces, int64_t n) {
  uint16_t *mine = work16, *gathered = work16 + n;
  for (const Piece &p : pieces) {
    int64_t have = clamp(p.inEnd - (p.inAt + p.first), p.n);
    if (have < p.n)
      device.fillZero(mine + p.at + have, (p.n - have) * 2, stream);
    if (have > 0)
      device.copy(mine + p.at, p.in->h.data() + p.inAt + p.first, have * 2,
                  stream);
  }
  called();
  c.allGather(l.group, mine, n, gathered);
  for (const Piece &p : pieces) {
    // The rank blocks that land whole in one 2D copy, the rest (cut short
    // by the padding) alone.
    int64_t whole = wholeBlocks(p.outEnd - (p.outAt + p.first), p);
    device.copyRows(p.out->h.data() + p.outAt + p.first, p.shard * 2,
                    gathered + p.at, n * 2, p.n * 2, whole, stream);
    for (int64_t k = whole; k < g; ++k) {
      int64_t at = p.outAt + k * p.shard + p.first;
      if (int64_t m = clamp(p.outEnd - at, p.n); m > 0)
        device.copy(p.out->h.data() + at, gathered + k * n + p.at, m * 2,
                    stream);
    }
  }
}

void Trainer::CollectiveMove::allGatherColumns(const std::vector<Piece> &pieces,
                                               int64_t n) {
  if (asBf16)
    return allGatherColumnsBf16(pieces, n);
  float *mine = work, *gathered = work + n;
  for (const Piece &p : pieces) {
    int64_t have = clamp(p.inEnd - (p.inAt + p.first), p.n);
    if (have < p.n)
      device.fillZero(mine + p.at + have, (p.n - have) * 4, stream);
    read(*p.in, *p.inSpec, p.inAt + p.first, have, mine + p.at);
  }
  called();
  c.allGather(l.group, mine, n, gathered);
  for (const Piece &p : pieces)
    for (int64_t k = 0; k < g; ++k) {
      int64_t at = p.outAt + k * p.shard + p.first;
      write(*p.out, *p.outSpec, at, clamp(p.outEnd - at, p.n),
            gathered + k * n + p.at, acc);
    }
}

/// The reduce-scatter of rank blocks at inAt + k shard (zero past inEnd)
/// into this rank's at outAt.
void Trainer::CollectiveMove::reduceScatterColumnsBf16(
    const std::vector<Piece> &pieces, int64_t n) {
  for (const Piece &p : pieces) {
    // The rank blocks read whole in one 2D copy, the rest (past the
    // input's end) alone, zero where short.
    int64_t whole = wholeBlocks(p.inEnd - (p.inAt + p.first), p);
    device.copyRows(work16 + p.at, n * 2, p.in->h.data() + p.inAt + p.first,
                    p.shard * 2, p.n * 2, whole, stream);
    for (int64_t k = whole; k < g; ++k) {
      int64_t at = p.inAt + k * p.shard + p.first;
      int64_t have = clamp(p.inEnd - at, p.n);
      uint16_t *block = work16 + k * n + p.at;
      device.fillZero(block + have, (p.n - have) * 2, stream);
      if (have > 0)
        device.copy(block, p.in->h.data() + at, have * 2, stream);
    }
  }
  const Piece &only = pieces.front();
  if (!acc && pieces.size() == 1 && only.n == n) { // straight to its shard
    called();
    c.reduceScatter(l.group, work16, n,
                    only.out->h.data() + only.outAt + only.first);
    return;
  }
  // The sum arrives as bf16; one added to a shard is widened (after the
  // bf16 elements, f32-aligned), added in f32 and rounded.
  uint16_t *value = work16 + g * n;
  float *wide = work + ((g + 1) * n + 1) / 2;
  called();
  c.reduceScatter(l.group, work16, n, value);
  for (const Piece &p : pieces) {
    uint16_t *mine = p.out->h.data() + p.outAt + p.first;
    if (!acc) {
      device.copy(mine, value + p.at, p.n * 2, stream);
      continue;
    }
    device.widen(wide + p.at, value + p.at, p.n, stream);
    device.narrow(mine, wide + p.at, p.n, /*accumulate=*/true, stream);
  }
}

void Trainer::CollectiveMove::reduceScatterColumns(
    const std::vector<Piece> &pieces, int64_t n) {
  if (asBf16)
    return reduceScatterColumnsBf16(pieces, n);
  float *blocks = work, *value = work + g * n;
  for (const Piece &p : pieces)
    for (int64_t k = 0; k < g; ++k) {
      int64_t at = p.inAt + k * p.shard + p.first;
      int64_t have = clamp(p.inEnd - at, p.n);
      if (have < p.n)
        device.fillZero(blocks + k * n + p.at + have, (p.n - have) * 4, stream);
      read(*p.in, *p.inSpec, at, have, blocks + k * n + p.at);
    }
  called();
  c.reduceScatter(l.group, blocks, n, value);
  for (const Piece &p : pieces)
    write(*p.out, *p.outSpec, p.outAt + p.first, p.n, value + p.at, acc);
}

/// A bucket's in-place all-reduces: copied side by side into the
/// workspace, reduced as one and copied back.
void Trainer::CollectiveMove::allReduceColumns(const std::vector<Piece> &pieces,
                                               int64_t n) {
  int64_t bytes = inSpec.elementBytes();
  auto *side = reinterpret_cast<char *>(work);
  auto at = [&](const Piece &p) {
    return static_cast<char *>(p.in->data()) + p.first * bytes;
  };
  for (const Piece &p : pieces)
    device.copy(side + p.at * bytes, at(p), p.n * bytes, stream);
  called();
  if (asBf16)
    c.allReduce(l.group, work16, n, l.reduceMax);
  else
    c.allReduce(l.group, work, n, l.reduceMax);
  for (const Piece &p : pieces)
    device.copy(at(p), side + p.at * bytes, p.n * bytes, stream);
}

/// In place (Plan.cpp checks), element by element: one buffer, or a
/// bucket's span.
void Trainer::CollectiveMove::allReduceInPlace() {
  Storage &span = trainer.storage(run.inPlace, microBatch);
  called();
  if (asBf16)
    c.allReduce(l.group, span.h.data(), run.chunking.columns, l.reduceMax);
  else
    c.allReduce(l.group, span.f.data(), run.chunking.columns, l.reduceMax);
}

/// The rows of shards: one per member of a bucket (flat), or the rows of a
/// split collective. A flat gather's input is, in place, this rank's slice
/// of the whole, else the input, short of the shard where the whole is
/// padded.
std::vector<Trainer::CollectiveMove::Piece>
Trainer::CollectiveMove::rowsOfShards() {
  const Chunking &chunks = run.chunking;
  int64_t inner = chunks.columns;
  std::vector<Piece> rows;
  for (const Launch *m : run.members) {
    const BufferSpec &mIn = trainer.program.buffers[m->input];
    const BufferSpec &mOut = trainer.program.buffers[m->output];
    Piece row;
    row.in = &trainer.storage(m->input, microBatch);
    row.out = &trainer.storage(m->output, microBatch);
    row.inSpec = &mIn;
    row.outSpec = &mOut;
    row.inEnd = mIn.elements;
    row.outEnd = mOut.elements;
    row.shard = mIn.elements; // an all-reduce's
    if (l.collective == Launch::Collective::AllReduce) {
      rows.push_back(row);
      continue;
    }
    if (!m->dim) {
      row.shard = trainer.flatShard(*m, g);
      if (gather && m->input == m->output) {
        row.inAt = r * row.shard;
        row.inEnd = row.inAt + clamp(mIn.elements - row.inAt, row.shard);
      } else if (gather) {
        row.inEnd = clamp(mIn.elements, row.shard);
      }
      rows.push_back(row);
      continue;
    }
    row.shard = inner;
    for (int64_t k = 0; k < chunks.rows; ++k) {
      int64_t split = gather ? k * inner : k * g * inner;
      row.inAt = split;
      row.inEnd = split + (gather ? inner : g * inner);
      row.outAt = gather ? k * g * inner : k * inner;
      row.outEnd = row.outAt + (gather ? g * inner : inner);
      rows.push_back(row);
    }
  }
  return rows;
}

/// Chunks of columnsPerChunk columns across the rows, cut at row ends.
void Trainer::CollectiveMove::byColumns() {
  const Chunking &chunks = run.chunking;
  std::vector<Piece> pieces;
  int64_t filled = 0;
  auto flush = [&] {
    if (filled == 0)
      return;
    if (l.collective == Launch::Collective::AllReduce)
      allReduceColumns(pieces, filled);
    else if (gather)
      allGatherColumns(pieces, filled);
    else
      reduceScatterColumns(pieces, filled);
    pieces.clear();
    filled = 0;
  };
  for (const Piece &row : rowsOfShards())
    for (int64_t first = 0; first < row.shard;) {
      Piece p = row;
      p.first = first;
      p.n = std::min(chunks.columnsPerChunk - filled, row.shard - first);
      p.at = filled;
      pieces.push_back(p);
      first += p.n;
      filled += p.n;
      if (filled == chunks.columnsPerChunk)
        flush();
    }
  flush();
}

/// Rows [first, first + n) of a split all-gather: gathered as
/// [g][n][inner]; the output rows are [n][g][inner].
void Trainer::CollectiveMove::allGatherRows(int64_t first, int64_t n) {
  int64_t inner = run.chunking.columns;
  if (asBf16) {
    // Gathered from the rows as they are; block k of each row goes to its
    // place in the output rows.
    called();
    c.allGather(l.group, in.h.data() + first * inner, n * inner, work16);
    for (int64_t k = 0; k < g; ++k)
      device.copyRows(out.h.data() + (first * g + k) * inner, g * inner * 2,
                      work16 + k * n * inner, inner * 2, inner * 2, n, stream);
    return;
  }
  float *mine = work;
  const float *source = mine;
  if (inSpec.isBf16)
    read(in, inSpec, first * inner, n * inner, mine);
  else
    source = in.f.data() + first * inner;
  float *gathered = mine + (inSpec.isBf16 ? n * inner : 0);
  called();
  c.allGather(l.group, source, n * inner, gathered);
  int64_t at = first * g * inner;
  if (!outSpec.isBf16) {
    device.transposeBlocks(out.f.data() + at, gathered, g, n, inner, acc,
                           stream);
    return;
  }
  float *rows = gathered + g * n * inner;
  device.transposeBlocks(rows, gathered, g, n, inner, false, stream);
  write(out, outSpec, at, g * n * inner, rows, acc);
}

/// Rows [first, first + n) of a split reduce-scatter: [n][g][inner]
/// reordered as [g][n][inner] for the collective, whose result is this
/// rank's rows as they are.
void Trainer::CollectiveMove::reduceScatterRows(int64_t first, int64_t n) {
  int64_t inner = run.chunking.columns;
  if (asBf16) {
    for (int64_t k = 0; k < g; ++k)
      device.copyRows(work16 + k * n * inner, inner * 2,
                      in.h.data() + (first * g + k) * inner, g * inner * 2,
                      inner * 2, n, stream);
    called();
    c.reduceScatter(l.group, work16, n * inner, out.h.data() + first * inner);
    return;
  }
  const float *source = work;
  float *blocks = work;
  if (inSpec.isBf16) {
    read(in, inSpec, first * g * inner, n * g * inner, work);
    blocks = work + n * g * inner;
  } else {
    source = in.f.data() + first * g * inner;
  }
  float *value = blocks + g * n * inner;
  device.transposeBlocks(blocks, source, n, g, inner, false, stream);
  called();
  c.reduceScatter(l.group, blocks, n * inner, value);
  write(out, outSpec, first * inner, n * inner, value, acc);
}

/// Whole rows of a split collective, rowsPerChunk at a time.
void Trainer::CollectiveMove::byRows() {
  const Chunking &chunks = run.chunking;
  for (int64_t first = 0; first < chunks.rows; first += chunks.rowsPerChunk) {
    int64_t n = std::min(chunks.rowsPerChunk, chunks.rows - first);
    if (gather)
      allGatherRows(first, n);
    else
      reduceScatterRows(first, n);
  }
}

void Trainer::collective(const CollectiveRun &run, int64_t microBatch,
                         Communicator &c, Stream stream) {
  CollectiveMove move(*this, run, microBatch, c, stream);
  if (run.chunking.inColumns)
    move.byColumns();
  else if (run.members.front()->collective == Launch::Collective::AllReduce)
    move.allReduceInPlace();
  else
    move.byRows();
}

} // namespace partita::runtime
