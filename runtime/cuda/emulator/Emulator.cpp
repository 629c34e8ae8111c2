//===- Emulator.cpp - CUDA threads as fibers ------------------------------===//
//
// A block's threads are Boost.Context fibers on pooled, guarded stacks. The
// scheduler resumes the lowest-numbered ready fiber (the highest in every
// other block); a fiber runs until it returns or waits at a barrier. The
// last thread to reach a barrier releases the others; a thread that
// returns counts as having reached every later __syncthreads, as on the
// GPU, but a warp-wide operation over lanes that returned is an error.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <sanitizer/asan_interface.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

namespace partita::runtime::cuda::emulator {

namespace {

namespace ctx = boost::context;

/// Stacks of kStackBytes with a guard page below, kept for reuse: a block
/// of 1024 threads needs 1024 of them, launch after launch.
constexpr size_t kStackBytes = 256 << 10;

class StackPool {
public:
  ctx::stack_context take() {
    char *base;
    if (free.empty()) {
      size_t page = size_t(sysconf(_SC_PAGESIZE));
      void *p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        fail("cannot map a fiber stack");
      mprotect(p, page, PROT_NONE); // an overflow faults, not corrupts
      base = static_cast<char *>(p) + page;
    } else {
      base = free.back();
      free.pop_back();
    }
    ctx::stack_context stack;
    stack.size = kStackBytes;
    stack.sp = base + kStackBytes; // stacks grow down
    return stack;
  }
  void give(ctx::stack_context &stack) {
    free.push_back(static_cast<char *>(stack.sp) - stack.size);
  }

private:
  std::vector<char *> free;
};

StackPool &stacks() {
  thread_local StackPool pool;
  return pool;
}

/// The stack allocator Boost.Context is given: the pool's.
struct PooledStack {
  ctx::stack_context allocate() { return stacks().take(); }
  void deallocate(ctx::stack_context &stack) { stacks().give(stack); }
};

enum class State { Ready, AtBlockBarrier, AtWarpBarrier, Done };

struct AsyncCopy {
  void *to;
  const void *from;
  size_t bytes;
};

struct Thread {
  ctx::fiber self;      // the suspended fiber, while another one runs
  ctx::fiber scheduler; // inside the fiber: where it yields to
  Index index;
  unsigned warp = 0, lane = 0;
  /// Which of the warp's two exchange rows the thread's next shuffle uses.
  unsigned phase = 0;
  State state = State::Ready;
  /// Asynchronous copies not yet committed, and the committed groups not
  /// yet waited for, oldest first.
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> copyGroups;
};

/// The threads ready to run, a bit each.
class ReadySet {
public:
  void clear(size_t threads) { words.assign((threads + 63) / 64, 0); }
  void set(size_t t, bool ready) {
    uint64_t bit = uint64_t(1) << (t % 64);
    words[t / 64] = ready ? words[t / 64] | bit : words[t / 64] & ~bit;
  }
  /// The lowest (or highest) ready thread, or -1.
  int64_t pick(bool highestFirst) const {
    if (highestFirst) {
      for (size_t w = words.size(); w-- > 0;)
        if (words[w])
          return int64_t(w * 64 + 63 - __builtin_clzll(words[w]));
    } else {
      for (size_t w = 0; w < words.size(); ++w)
        if (words[w])
          return int64_t(w * 64 + __builtin_ctzll(words[w]));
    }
    return -1;
  }

private:
  std::vector<uint64_t> words;
};

struct Block {
  std::vector<Thread> threads;
  ReadySet ready;
  unsigned live = 0, atBarrier = 0;
  std::vector<unsigned> warpLive, warpAtBarrier;
  /// Per warp, two rows of 32 values: a shuffle writes one row and waits
  /// for the warp, and the next shuffle uses the other, so no lane can
  /// overwrite a value before every lane has read it.
  std::vector<std::array<std::array<void *, 32>, 2>> exchange;
  /// Dynamic shared memory, 128-byte aligned as the kernels declare it.
  std::vector<char> sharedStorage;
  char *shared = nullptr;
  size_t sharedBytes = 0;
  /// The static __shared__ variables the block's threads have declared so
  /// far, and their bytes: the first to reach a declaration fills it.
  std::vector<const void *> staticShared;
  size_t staticSharedBytes = 0;
  Thread *current = nullptr;
  /// PARTITA_EMULATOR_COPIES=issue: asynchronous copies land at once.
  bool copiesLandAtIssue = false;

  size_t indexOf(const Thread &t) const { return size_t(&t - threads.data()); }
  void setState(Thread &t, State state) {
    t.state = state;
    ready.set(indexOf(t), state == State::Ready);
  }
};

thread_local Block *active = nullptr;

Block &block() {
  if (!active)
    fail("a CUDA thread function was called outside a kernel");
  return *active;
}

void yield(Thread &me) { me.scheduler = std::move(me.scheduler).resume(); }

void releaseBlock(Block &b) {
  for (Thread &t : b.threads)
    if (t.state == State::AtBlockBarrier)
      b.setState(t, State::Ready);
  b.atBarrier = 0;
}

void releaseWarp(Block &b, unsigned warp) {
  size_t end = std::min(b.threads.size(), size_t(warp + 1) * 32);
  for (size_t t = size_t(warp) * 32; t < end; ++t)
    if (b.threads[t].state == State::AtWarpBarrier)
      b.setState(b.threads[t], State::Ready);
  b.warpAtBarrier[warp] = 0;
}

std::string describe(Index i) {
  return "(" + std::to_string(i.x) + ", " + std::to_string(i.y) + ", " +
         std::to_string(i.z) + ")";
}

/// A thread returned: it counts as having reached every later
/// __syncthreads (as PTX's exit does). A warp-wide operation its lanes
/// wait in can no longer be one.
void finish(Block &b, Thread &me) {
  b.setState(me, State::Done);
  --b.live;
  --b.warpLive[me.warp];
  if (b.atBarrier > 0 && b.atBarrier == b.live)
    releaseBlock(b);
  if (b.warpAtBarrier[me.warp] > 0)
    fail("thread " + describe(me.index) + " of block " + describe(blockIndex) +
         " returned while lanes of its warp wait in __syncwarp or a "
         "shuffle over the whole warp: undefined on the GPU");
}

/// Runs the block's threads, always resuming the lowest-numbered ready one
/// (or, with `highestFirst`, the highest): low warps then run as far
/// ahead of high ones as barriers allow, so a missing barrier between a
/// write and a read shows whichever thread writes, over a grid's blocks.
void runBlock(Block &b, const std::function<void()> &body, bool highestFirst) {
  unsigned n = unsigned(b.threads.size());
  b.live = n;
  b.atBarrier = 0;
  b.ready.clear(n);
  for (unsigned w = 0; w < b.warpLive.size(); ++w) {
    b.warpLive[w] = std::min(32u, n - 32 * w);
    b.warpAtBarrier[w] = 0;
  }
  std::fill(b.shared, b.shared + b.sharedBytes, char(0xff));
  b.staticShared.clear();
  b.staticSharedBytes = 0;
  for (unsigned t = 0; t < n; ++t) {
    Thread &me = b.threads[t];
    b.setState(me, State::Ready);
    me.phase = 0;
    me.uncommitted.clear();
    me.copyGroups.clear();
    me.self = ctx::fiber(std::allocator_arg, PooledStack(),
                         [&b, &me, &body](ctx::fiber &&scheduler) {
                           me.scheduler = std::move(scheduler);
                           body();
                           finish(b, me);
                           return std::move(me.scheduler);
                         });
  }
  while (b.live > 0) {
    int64_t next = b.ready.pick(highestFirst);
    if (next >= 0) {
      Thread &t = b.threads[size_t(next)];
      threadIndex = t.index;
      b.current = &t;
      t.self = std::move(t.self).resume();
    } else {
      unsigned atBlock = 0, atWarp = 0;
      for (const Thread &t : b.threads) {
        atBlock += t.state == State::AtBlockBarrier;
        atWarp += t.state == State::AtWarpBarrier;
      }
      fail("deadlock in block " + describe(blockIndex) + ": " +
           std::to_string(atBlock) + " threads wait at __syncthreads and " +
           std::to_string(atWarp) +
           " at warp barriers that the others never reach");
    }
  }
  b.current = nullptr;
}

} // namespace

bool parseFault(const char *spec, long long below, long long &where,
                long long &nth) {
  char *end;
  where = std::strtoll(spec, &end, 10);
  nth = *end == ':' ? std::strtoll(end + 1, &end, 10) : 0;
  return end != spec && !*end && where >= 0 && where < below && nth >= 1;
}

void fail(const std::string &message) {
  std::fprintf(stderr, "CUDA emulator: %s\n", message.c_str());
  std::abort();
}

std::string launchRefusal(Index grid, Index blockShape) {
  if (active)
    fail("a kernel launched a kernel");
  uint64_t threads = uint64_t(blockShape.x) * blockShape.y * blockShape.z;
  if (threads == 0 || threads > 1024 || blockShape.z > 64)
    return "a block of " + describe(blockShape) +
           " threads (at most 1024, and 64 along z)";
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535)
    return "a grid of " + describe(grid) +
           " blocks (at least 1 and at most 2^31 - 1, 65535, 65535)";
  return "";
}

void run(Index grid, Index blockShape, size_t sharedBytes,
         const std::function<void()> &body) {
  uint64_t threads = uint64_t(blockShape.x) * blockShape.y * blockShape.z;
  Block b;
  b.threads.resize(threads);
  unsigned warps = unsigned((threads + 31) / 32);
  b.warpLive.resize(warps);
  b.warpAtBarrier.resize(warps);
  b.exchange.resize(warps);
  b.sharedStorage.resize(sharedBytes + 128);
  b.shared = b.sharedStorage.data() +
             (128 - reinterpret_cast<uintptr_t>(b.sharedStorage.data()) % 128);
  b.sharedBytes = sharedBytes;
  // Under AddressSanitizer, the bytes around the block's dynamic shared
  // memory are out of bounds, as on the GPU.
  char *storage = b.sharedStorage.data();
  ASAN_POISON_MEMORY_REGION(storage, size_t(b.shared - storage));
  ASAN_POISON_MEMORY_REGION(
      b.shared + sharedBytes,
      size_t(storage + b.sharedStorage.size() - (b.shared + sharedBytes)));
  struct Unpoison {
    std::vector<char> &storage;
    ~Unpoison() { ASAN_UNPOISON_MEMORY_REGION(storage.data(), storage.size()); }
  } unpoison{b.sharedStorage};
  unsigned t = 0;
  for (unsigned z = 0; z < blockShape.z; ++z)
    for (unsigned y = 0; y < blockShape.y; ++y)
      for (unsigned x = 0; x < blockShape.x; ++x, ++t) {
        b.threads[t].index = {x, y, z};
        b.threads[t].warp = t / 32;
        b.threads[t].lane = t % 32;
      }
  std::string landing = std::getenv("PARTITA_EMULATOR_COPIES")
                            ? std::getenv("PARTITA_EMULATOR_COPIES")
                            : "wait";
  if (landing != "wait" && landing != "issue")
    fail("PARTITA_EMULATOR_COPIES must be wait or issue, got \"" + landing +
         "\"");
  b.copiesLandAtIssue = landing == "issue";
  blockDimension = blockShape;
  gridDimension = grid;
  active = &b;
  uint64_t blocks = 0;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIndex = {x, y, z};
        runBlock(b, body, blocks++ % 2 == 1);
      }
  active = nullptr;
}

char *dynamicShared() { return block().shared; }

void declareStaticShared(void *variable, size_t bytes) {
  Block &b = block();
  if (std::find(b.staticShared.begin(), b.staticShared.end(), variable) !=
      b.staticShared.end())
    return;
  b.staticShared.push_back(variable);
  b.staticSharedBytes += bytes;
  if (b.staticSharedBytes > kStaticSharedLimit)
    fail("block " + describe(blockIndex) + " declares " +
         std::to_string(b.staticSharedBytes) +
         " bytes of static shared memory, above the " +
         std::to_string(kStaticSharedLimit) + " a GPU gives");
  std::memset(variable, 0xff, bytes);
}

void syncThreads() {
  Block &b = block();
  Thread &me = *b.current;
  if (++b.atBarrier == b.live) {
    releaseBlock(b);
    return;
  }
  b.setState(me, State::AtBlockBarrier);
  yield(me);
}

void syncWarp(unsigned mask) {
  if (mask != kFullWarp)
    fail("a warp barrier over lanes " + std::to_string(mask) +
         ": the emulator takes whole warps only");
  Block &b = block();
  Thread &me = *b.current;
  // A whole-warp mask names 32 lanes; naming one that returned, or that
  // the block does not have, is undefined on the GPU.
  if (b.warpLive[me.warp] != 32)
    fail("__syncwarp or a shuffle over the whole warp " +
         std::to_string(me.warp) + " of block " + describe(blockIndex) +
         " with " + std::to_string(b.warpLive[me.warp]) +
         " of its 32 lanes running: undefined on the GPU");
  if (++b.warpAtBarrier[me.warp] == b.warpLive[me.warp]) {
    releaseWarp(b, me.warp);
    return;
  }
  b.setState(me, State::AtWarpBarrier);
  yield(me);
}

unsigned lane() { return block().current->lane; }

void *const *shareInWarp(unsigned mask, void *mine) {
  Block &b = block();
  Thread &me = *b.current;
  std::array<void *, 32> &row = b.exchange[me.warp][me.phase];
  me.phase ^= 1;
  row[me.lane] = mine;
  syncWarp(mask);
  return row.data();
}

void copyAsync(void *to, const void *from, size_t bytes) {
  Block &b = block();
  char *at = static_cast<char *>(to);
  if (at < b.shared || at + bytes > b.shared + b.sharedBytes)
    fail("cp.async to an address outside the block's dynamic shared memory");
  if (!onDevice(from, bytes))
    fail("cp.async from memory that is not one device allocation's");
  if (reinterpret_cast<uintptr_t>(to) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(from) % bytes != 0)
    fail("cp.async of " + std::to_string(bytes) +
         " bytes at addresses not aligned to that size");
  if (b.copiesLandAtIssue)
    std::memcpy(to, from, bytes);
  else
    b.current->uncommitted.push_back({to, from, bytes});
}

void commitCopies() {
  Thread &me = *block().current;
  me.copyGroups.push_back(std::move(me.uncommitted));
  me.uncommitted.clear();
}

void waitCopies(int pending) {
  Thread &me = *block().current;
  while (me.copyGroups.size() > size_t(pending)) {
    for (const AsyncCopy &c : me.copyGroups.front())
      std::memcpy(c.to, c.from, c.bytes);
    me.copyGroups.pop_front();
  }
}

} // namespace partita::runtime::cuda::emulator
