// Every diagnostic of the exec verifiers.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{unknown kernel 'matmul'}}
    exec.kernel "matmul" ins [@x] outs [@x]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{takes 2 to 3 inputs, got 1}}
    exec.kernel "linear" ins [@x] outs [@x]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{takes 1 outputs, got 2}}
    exec.kernel "gelu" ins [@x] outs [@x, @x]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{has 2 accumulate flags for 1 outputs}}
    exec.kernel "gelu" ins [@x] outs [@x] accumulate [true, false]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{names @missing, which is not a buffer of its exec.program}}
    exec.kernel "gelu" ins [@missing] outs [@x]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.phase forward chunk 0 {
    // expected-error @+1 {{names @x, which is not a buffer of its exec.program}}
    exec.send @x to next
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{unknown group 'row'; expected tp, tp_kv, dp, pp, tied or world}}
    exec.collective all_reduce "row" @x -> @x
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.buffer @y : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{all_reduce is in place: input and output must be the same buffer}}
    exec.collective all_reduce "tp" @x -> @y
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{all_reduce takes no `dim`}}
    exec.collective all_reduce "tp" @x -> @x dim 0
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{all_reduce is in place: it cannot `accumulate`}}
    exec.collective all_reduce "tp" @x -> @x accumulate
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.buffer @y : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{only all_reduce takes a reduction other than sum}}
    exec.collective all_gather "tp" @x -> @y reduce max
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.buffer @y : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{dim 1 is out of range for 'tensor<4xf32>'}}
    exec.collective all_gather "tp" @x -> @y dim 1
  }
}

// -----

exec.program @p pp_rank 0 {
  // expected-error @+1 {{of a model chunk needs `chunk`}}
  exec.phase forward {
  }
}

// -----

exec.program @p pp_rank 0 {
  // expected-error @+1 {{`step` runs once per step and takes no `chunk`}}
  exec.phase step chunk 0 {
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.phase forward chunk 0 {
  }
  exec.schedule {
    // expected-error @+1 {{runs backward of chunk 0, which the program does not have}}
    exec.run backward mb 0 chunk 0
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.phase step {
  }
  exec.schedule {
    // expected-error @+1 {{the step phase runs once, after the schedule}}
    exec.run step mb 0 chunk 0
  }
}

// -----

// expected-error @+1 {{has 2 schedules; at most one}}
exec.program @p pp_rank 0 {
  exec.schedule {
  }
  exec.schedule {
  }
}

// -----

// expected-error @+1 {{'exec.buffer' op expects parent op 'exec.program'}}
exec.buffer @x : tensor<4xf32> activation

// -----

exec.program @p pp_rank 0 {
  exec.buffer @g : tensor<4xf32> param_grad
  exec.phase step {
    // expected-error @+1 {{waits for @g, which no asynchronous collective before it in this phase writes}}
    exec.wait @g
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @g : tensor<4xf32> param_grad
  exec.phase step {
    // expected-error @+1 {{is asynchronous but no exec.wait @g follows it in its phase}}
    exec.collective all_reduce "dp" @g -> @g async
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @g : tensor<4xf32> param_grad
  exec.buffer @s : tensor<f32> scalar
  exec.phase step {
    // expected-note @+1 {{the collective starts here}}
    exec.collective all_reduce "dp" @g -> @g async
    // expected-error @+1 {{reads @g while the asynchronous all_reduce into @g is in flight; wait for it first}}
    exec.kernel "grad_sumsq" ins [@g] outs [@s] params {weights = [1.0]}
    exec.wait @g
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @w.shard : tensor<4xf32> param_shard
  exec.buffer @u : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-note @+1 {{the collective starts here}}
    exec.collective all_gather "dp" @w.shard -> @w async
    // expected-error @+1 {{writes @w.shard while the asynchronous all_gather into @w is in flight; wait for it first}}
    exec.kernel "copy" ins [@u] outs [@w.shard]
    exec.wait @w
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @g : tensor<4xf32> param_grad
  exec.phase forward chunk 0 {
    // expected-error @+1 {{runs in the last micro-batch only, which a forward phase does not have}}
    exec.collective all_reduce "dp" @g -> @g last_micro_batch
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @g : tensor<4xf32> param_grad
  exec.phase backward chunk 0 {
    // expected-error @+1 {{is asynchronous but no exec.wait @g follows it in the step phase}}
    exec.collective all_reduce "dp" @g -> @g async last_micro_batch
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.phase forward chunk 0 {
    // expected-error @+1 {{next_step needs an async collective of the step phase}}
    exec.collective all_gather "dp" @w -> @w async next_step
    exec.wait @w
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    exec.kernel "copy" ins [@w] outs [@u]
  }
  exec.phase step {
    // expected-error @+1 {{is carried to the next step but no exec.wait @w first_micro_batch in a forward phase waits for it}}
    exec.collective all_gather "dp" @w -> @w async next_step
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{waits in the first micro-batch for @w, which no next_step collective of the step phase writes}}
    exec.wait @w first_micro_batch
    exec.kernel "copy" ins [@w] outs [@u]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{reads @w while the asynchronous all_gather into @w is in flight; wait for it first}}
    exec.kernel "copy" ins [@w] outs [@u]
    exec.wait @w first_micro_batch
  }
  exec.phase step {
    // expected-note @+1 {{the collective starts here}}
    exec.collective all_gather "dp" @w -> @w async next_step
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    exec.wait @w first_micro_batch
    exec.kernel "copy" ins [@w] outs [@u]
  }
  exec.phase step {
    // expected-note @+1 {{the collective starts here}}
    exec.collective all_gather "dp" @w -> @w async next_step
    // expected-error @+1 {{writes @w while the asynchronous all_gather into @w is in flight; wait for it first}}
    exec.kernel "copy" ins [@u] outs [@w]
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    exec.wait @w first_micro_batch
    exec.kernel "copy" ins [@w] outs [@u]
  }
  exec.phase step {
    exec.collective all_gather "dp" @w -> @w async next_step
    // expected-error @+1 {{waits for @w, whose next_step collective is waited for in the next step's forward phase}}
    exec.wait @w
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase backward chunk 0 {
    // expected-error @+1 {{waits in the first micro-batch, which a backward phase does not have}}
    exec.wait @w first_micro_batch
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @w : tensor<8xf32> param
  exec.buffer @u : tensor<8xf32> activation
  exec.phase forward chunk 0 {
    exec.wait @w first_micro_batch
    exec.kernel "copy" ins [@w] outs [@u]
  }
  exec.phase forward chunk 1 {
    // expected-error @+1 {{waits for @w from the previous step a second time}}
    exec.wait @w first_micro_batch
    exec.kernel "copy" ins [@w] outs [@u]
  }
  exec.phase step {
    exec.collective all_gather "dp" @w -> @w async next_step
  }
}

// -----

// The generic form spells the kernel as its attribute, by registry name.
exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{unknown kernel 'conv2d'}}
    "exec.kernel"() <{ins = [@x], kernel = #exec.kernel<"conv2d">, outs = [@x]}> : () -> ()
  }
}

// -----

exec.program @p pp_rank 0 {
  exec.buffer @x : tensor<4xf32> activation
  exec.phase forward chunk 0 {
    // expected-error @+1 {{'exec.kernel' op takes 1 inputs, got 2}}
    "exec.kernel"() <{ins = [@x, @x], kernel = #exec.kernel<"silu">, outs = [@x]}> : () -> ()
  }
}
