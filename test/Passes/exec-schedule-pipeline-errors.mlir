// Inputs exec-schedule-pipeline rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --exec-schedule-pipeline -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: exec-schedule-pipeline needs the module's dist.strategy
module {
}

// -----

// CHECK: [[# @LINE + 2]]:3: error: 'exec.program' op has no backward phases; run exec-build-backward first
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  exec.program @rank0 pp_rank 0 {
    exec.phase forward chunk 0 {
    }
  }
}

// -----

// CHECK: [[# @LINE + 2]]:3: error: 'exec.program' op already has a schedule
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  exec.program @rank0 pp_rank 0 {
    exec.phase forward chunk 0 {
    }
    exec.phase backward chunk 0 {
    }
    exec.schedule {
    }
  }
}
