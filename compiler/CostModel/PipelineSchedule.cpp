//===- PipelineSchedule.cpp - The order a pipeline rank runs in -----------===//

#include "compiler/CostModel/PipelineSchedule.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace partita {

namespace {

/// Megatron-LM's interleaved 1F1B: virtual micro-batch k of a rank is
/// micro-batch (k / (pp * vpp)) * pp + k % pp of local chunk (k / pp) % vpp
/// (backwards walk the chunks in reverse).
PipelineRun virtualRun(int64_t k, bool forward, int64_t rank, int64_t pp,
                       int64_t vpp) {
  int64_t local = (k / pp) % vpp;
  if (!forward)
    local = vpp - 1 - local;
  int64_t mb = (k / (pp * vpp)) * pp + k % pp;
  return {forward, mb, local * pp + rank};
}

} // namespace

void forEachPipelineRun(const ParallelConfig &c, int64_t rank,
                        llvm::function_ref<void(const PipelineRun &)> visit) {
  const int64_t m = c.numMicroBatches, pp = c.pp, vpp = c.vpp;
  if (c.schedule == Schedule::GPipe) {
    for (int64_t local = 0; local < vpp; ++local)
      for (int64_t mb = 0; mb < m; ++mb)
        visit({true, mb, local * pp + rank});
    for (int64_t local = vpp - 1; local >= 0; --local)
      for (int64_t mb = 0; mb < m; ++mb)
        visit({false, mb, local * pp + rank});
    return;
  }
  // 1F1B, and its interleaved form over vpp chunks per rank.
  const int64_t total = m * vpp;
  int64_t warmup =
      vpp == 1 ? pp - rank - 1 : (pp - rank - 1) * 2 + (vpp - 1) * pp;
  warmup = std::min(warmup, total);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f)
    visit(virtualRun(f, true, rank, pp, vpp));
  for (; f < total; ++f, ++b) {
    visit(virtualRun(f, true, rank, pp, vpp));
    visit(virtualRun(b, false, rank, pp, vpp));
  }
  for (; b < total; ++b)
    visit(virtualRun(b, false, rank, pp, vpp));
}

std::vector<PipelineRun> pipelineRuns(const ParallelConfig &c, int64_t rank) {
  std::vector<PipelineRun> runs;
  forEachPipelineRun(c, rank,
                     [&](const PipelineRun &run) { runs.push_back(run); });
  return runs;
}

const std::vector<std::vector<int64_t>> &fullestMoments(const ParallelConfig &c,
                                                        int64_t rank) {
  // The search costs thousands of candidates over a few dozen schedules:
  // each schedule is walked once per thread.
  using Key = std::tuple<int64_t, int64_t, int64_t, Schedule, int64_t>;
  thread_local std::map<Key, std::vector<std::vector<int64_t>>> walked;
  Key key{c.numMicroBatches, c.pp, c.vpp, c.schedule, rank};
  auto [it, inserted] = walked.try_emplace(key);
  if (!inserted)
    return it->second;
  // The counts before each backward that follows a forward (the local
  // maxima), once each; then those no other one covers.
  std::set<std::vector<int64_t>> moments;
  std::vector<int64_t> now(c.vpp, 0);
  bool rising = false;
  forEachPipelineRun(c, rank, [&](const PipelineRun &run) {
    if (!run.forward && rising)
      moments.insert(now);
    rising = run.forward;
    now[run.chunk / c.pp] += run.forward ? 1 : -1;
  });
  if (rising)
    moments.insert(now);
  auto covers = [](const std::vector<int64_t> &a,
                   const std::vector<int64_t> &b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] < b[i])
        return false;
    return a != b;
  };
  for (const std::vector<int64_t> &moment : moments)
    if (llvm::none_of(moments, [&](const std::vector<int64_t> &other) {
          return covers(other, moment);
        }))
      it->second.push_back(moment);
  return it->second;
}

} // namespace partita
