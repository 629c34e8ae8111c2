// exec-schedule-pipeline on programs whose phases are empty: the order of
// forward and backward runs over the micro-batches comes from the
// strategy's schedule, pp and micro-batch count alone.
// RUN: plan-opt %s -split-input-file --exec-schedule-pipeline | FileCheck %s

// 1F1B, pp = 3, 4 micro-batches: rank r runs pp - r - 1 warm-up forwards,
// then one forward and one backward in turn, then the remaining backwards.
// CHECK-LABEL: exec.program @rank0 pp_rank 0
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 0
// CHECK-NEXT: exec.run forward mb 1 chunk 0
// CHECK-NEXT: exec.run forward mb 2 chunk 0
// CHECK-NEXT: exec.run backward mb 0 chunk 0
// CHECK-NEXT: exec.run forward mb 3 chunk 0
// CHECK-NEXT: exec.run backward mb 1 chunk 0
// CHECK-NEXT: exec.run backward mb 2 chunk 0
// CHECK-NEXT: exec.run backward mb 3 chunk 0
// CHECK-NEXT: }
// CHECK-LABEL: exec.program @rank1 pp_rank 1
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 1
// CHECK-NEXT: exec.run forward mb 1 chunk 1
// CHECK-NEXT: exec.run backward mb 0 chunk 1
// CHECK-NEXT: exec.run forward mb 2 chunk 1
// CHECK-NEXT: exec.run backward mb 1 chunk 1
// CHECK-NEXT: exec.run forward mb 3 chunk 1
// CHECK-NEXT: exec.run backward mb 2 chunk 1
// CHECK-NEXT: exec.run backward mb 3 chunk 1
// CHECK-NEXT: }
// CHECK-LABEL: exec.program @rank2 pp_rank 2
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 2
// CHECK-NEXT: exec.run backward mb 0 chunk 2
// CHECK-NEXT: exec.run forward mb 1 chunk 2
// CHECK-NEXT: exec.run backward mb 1 chunk 2
// CHECK-NEXT: exec.run forward mb 2 chunk 2
// CHECK-NEXT: exec.run backward mb 2 chunk 2
// CHECK-NEXT: exec.run forward mb 3 chunk 2
// CHECK-NEXT: exec.run backward mb 3 chunk 2
// CHECK-NEXT: }
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 3, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1, 1]>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 0 {
    }
    exec.phase backward chunk 0 {
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 1 {
    }
    exec.phase backward chunk 1 {
    }
  }
  exec.program @rank2 pp_rank 2 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 2 {
    }
    exec.phase backward chunk 2 {
    }
  }
}

// -----

// GPipe: every forward, then every backward, on every rank.
// CHECK-LABEL: exec.program @rank1 pp_rank 1
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 1
// CHECK-NEXT: exec.run forward mb 1 chunk 1
// CHECK-NEXT: exec.run forward mb 2 chunk 1
// CHECK-NEXT: exec.run backward mb 0 chunk 1
// CHECK-NEXT: exec.run backward mb 1 chunk 1
// CHECK-NEXT: exec.run backward mb 2 chunk 1
// CHECK-NEXT: }
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 3, recompute = none, sequence_parallel = 0, schedule = "gpipe", stage_layers = [1, 1]>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 0 {
    }
    exec.phase backward chunk 0 {
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 1 {
    }
    exec.phase backward chunk 1 {
    }
  }
}

// -----

// Interleaved, pp = 2 with chunks 0 and 2 on rank 0 and 1 and 3 on rank 1,
// 4 micro-batches in groups of pp: rank 0 warms up with two groups' worth
// of forwards over its chunks, and finishes with its first chunk's
// backwards.
// CHECK-LABEL: exec.program @rank0 pp_rank 0
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 0
// CHECK-NEXT: exec.run forward mb 1 chunk 0
// CHECK-NEXT: exec.run forward mb 0 chunk 2
// CHECK-NEXT: exec.run forward mb 1 chunk 2
// CHECK-NEXT: exec.run forward mb 2 chunk 0
// CHECK-NEXT: exec.run backward mb 0 chunk 2
// CHECK-NEXT: exec.run forward mb 3 chunk 0
// CHECK-NEXT: exec.run backward mb 1 chunk 2
// CHECK-NEXT: exec.run forward mb 2 chunk 2
// CHECK-NEXT: exec.run backward mb 0 chunk 0
// CHECK-NEXT: exec.run forward mb 3 chunk 2
// CHECK-NEXT: exec.run backward mb 1 chunk 0
// CHECK-NEXT: exec.run backward mb 2 chunk 2
// CHECK-NEXT: exec.run backward mb 3 chunk 2
// CHECK-NEXT: exec.run backward mb 2 chunk 0
// CHECK-NEXT: exec.run backward mb 3 chunk 0
// CHECK-NEXT: }
// CHECK-LABEL: exec.program @rank1 pp_rank 1
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 1
// CHECK-NEXT: exec.run forward mb 1 chunk 1
// CHECK-NEXT: exec.run forward mb 0 chunk 3
// CHECK-NEXT: exec.run backward mb 0 chunk 3
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 2, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "interleaved", stage_layers = [1, 1, 1, 1]>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 0 {
    }
    exec.phase forward chunk 2 {
    }
    exec.phase backward chunk 0 {
    }
    exec.phase backward chunk 2 {
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @x : tensor<1x4xf32> activation
    exec.phase forward chunk 1 {
    }
    exec.phase forward chunk 3 {
    }
    exec.phase backward chunk 1 {
    }
    exec.phase backward chunk 3 {
    }
  }
}
