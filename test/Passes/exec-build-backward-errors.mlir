// Inputs exec-build-backward rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --exec-build-backward -o /dev/null 2>&1 | FileCheck %s
// RUN: not plan-opt %s --exec-build-backward=gradient-dtype=f16 -o /dev/null 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: exec-build-backward: gradient-dtype must be `param` or `f32`, not `f16`

// CHECK: error: exec-build-backward needs the module's dist.strategy
module {
}

// -----

// CHECK: error: exec-build-backward needs the exec programs of dist-lower-to-exec (no exec.seq_len on the module)
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
}

// -----

// CHECK: [[# @LINE + 2]]:3: error: 'exec.program' op already has backward or step phases
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, exec.seq_len = 8 : i64} {
  exec.program @rank0 pp_rank 0 {
    exec.phase forward chunk 0 {
    }
    exec.phase step {
    }
  }
}

// -----

// CHECK: [[# @LINE + 6]]:7: error: the activation received here gets no gradient, so the previous stage would wait forever
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>, exec.seq_len = 8 : i64} {
  exec.program @rank1 pp_rank 1 {
    exec.buffer @x : tensor<1x8x4xf32> activation
    exec.buffer @y : tensor<1x8x4xf32> activation
    exec.phase forward chunk 1 {
      exec.recv @x from prev
      exec.kernel "gelu" ins [@x] outs [@y]
    }
  }
}
