// exec-build-backward on small forward programs: the backward phase in
// reverse order, gradient reductions as each kind of parallelism needs
// them, and the optimizer step. Whole models through the pipeline are in
// test/Tools/pipeline-exec-build-backward.mlir.
// RUN: split-file %s %t
// RUN: plan-opt %t/dp.mlir --exec-build-backward | FileCheck %s --check-prefix=Z0
// RUN: sed 's/zero = 0/zero = 1/' %t/dp.mlir | plan-opt - --exec-build-backward | FileCheck %s --check-prefix=Z1
// RUN: sed 's/zero = 0/zero = 3/' %t/dp.mlir | plan-opt - --exec-build-backward | FileCheck %s --check-prefix=Z3
// RUN: sed 's/recompute = none/recompute = full/' %t/dp.mlir | plan-opt - --exec-build-backward | FileCheck %s --check-prefix=FULL
// RUN: plan-opt %t/tp-pp.mlir --exec-build-backward | FileCheck %s --check-prefix=TP

// dp = 2, ZeRO-0: each kernel's backward in reverse order, taking what its
// forward saved; a residual's gradient is copied to both branches and
// accumulated; each parameter gradient is all-reduced over dp as soon as
// it is final, by the last micro-batch only.
// Z0-LABEL: exec.phase backward chunk 0 {
// Z0-NEXT: exec.kernel "ce_bwd" ins [@lm_head.4, @loss.max, @loss.stats, @labels] outs [@d.lm_head.4] params {scale = 3.125000e-02 : f64, vocab_parts = 1 : i64, vocab_size = 16 : i64}
// Z0-NEXT: exec.kernel "linear_bwd" ins [@d.lm_head.4, @layers.0.add.3, @lm_head.weight] outs [@d.layers.0.add.3, @grad.lm_head.weight] accumulate [false, true]
// Z0-NEXT: exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight last_micro_batch
// Z0-NEXT: exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.embedding.0] {layer = 0 : i64}
// Z0-NEXT: exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.layers.0.linear.2] {layer = 0 : i64}
// Z0-NEXT: exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1, @layers.0.proj.weight] outs [@d.layers.0.rms_norm.1, @grad.layers.0.proj.weight] accumulate [false, true] {layer = 0 : i64}
// Z0-NEXT: exec.kernel "rms_norm_bwd" ins [@d.layers.0.rms_norm.1, @embedding.0, @layers.0.norm.weight] outs [@d.embedding.0, @grad.layers.0.norm.weight] accumulate [true, true] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
// Z0-NEXT: exec.collective all_reduce "dp" @grad.layers.0.proj.weight -> @grad.layers.0.proj.weight last_micro_batch {layer = 0 : i64}
// Z0-NEXT: exec.collective all_reduce "dp" @grad.layers.0.norm.weight -> @grad.layers.0.norm.weight last_micro_batch {layer = 0 : i64}
// Z0-NEXT: exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.weight] accumulate [true] params {vocab_parts = 1 : i64}
// Z0-NEXT: exec.collective all_reduce "dp" @grad.embed.weight -> @grad.embed.weight last_micro_batch
// Z0-NEXT: }
// The step: the global gradient norm (each replica's share weighted by
// 1/dp), its clip coefficient, AdamW per parameter (no weight decay on
// norms), and the loss summed over dp for the report.
// Z0-NEXT: exec.phase step {
// Z0-NEXT: exec.kernel "grad_sumsq" ins [@grad.embed.weight, @grad.layers.0.norm.weight, @grad.layers.0.proj.weight, @grad.lm_head.weight] outs [@grad_sumsq] params {weights = [5.000000e-01, 5.000000e-01, 5.000000e-01, 5.000000e-01]}
// Z0-NEXT: exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
// Z0-NEXT: exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
// Z0-NEXT: exec.kernel "adamw" ins [@embed.weight, @grad.embed.weight, @adam_m.embed.weight, @adam_v.embed.weight, @clip_coefficient] outs [@embed.weight, @adam_m.embed.weight, @adam_v.embed.weight] params {dp_shard = false, weight_decay = true}
// Z0-NEXT: exec.kernel "adamw" ins [@layers.0.norm.weight, {{.*}} params {dp_shard = false, weight_decay = false}
// Z0-NEXT: exec.kernel "adamw"
// Z0-NEXT: exec.kernel "adamw"
// Z0-NEXT: exec.collective all_reduce "dp" @loss -> @loss
// Z0-NEXT: }

// ZeRO-1: optimizer states and gradients as dp shards; one reduce-scatter
// per gradient in the last micro-batch, and after each sharded AdamW an
// all-gather of the updated parameter.
// Z1: exec.buffer @grad_shard.layers.0.proj.weight : tensor<32xf32> grad_shard {dp_shard, param = "layers.0.proj.weight"}
// Z1: exec.buffer @adam_m.layers.0.proj.weight : tensor<32xf32> optimizer_state {dp_shard, param = "layers.0.proj.weight"}
// Z1-LABEL: exec.phase backward chunk 0 {
// Z1-COUNT-4: exec.collective reduce_scatter "dp" @grad.{{.*}} -> @grad_shard.{{.*}} last_micro_batch
// Z1-LABEL: exec.phase step {
// Z1: exec.kernel "adamw" ins [@embed.weight, @grad_shard.embed.weight, {{.*}} params {dp_shard = true, weight_decay = true}
// Z1-NEXT: exec.collective all_gather "dp" @embed.weight -> @embed.weight
// Z1-NOT: reduce_scatter

// ZeRO-3: parameters live as dp shards, gathered for the forward and again
// for the backward (but for the embedding table, which no backward
// reads); gradients are reduce-scattered into the accumulated shards.
// Z3: exec.buffer @layers.0.proj.weight.shard : tensor<32xf32> param_shard {dp_shard, init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, local_type = tensor<8x8xf32>, param = "layers.0.proj.weight"}
// Z3-LABEL: exec.phase forward chunk 0 {
// Z3-NEXT: exec.collective all_gather "dp" @embed.weight.shard -> @embed.weight
// Z3-LABEL: exec.phase backward chunk 0 {
// Z3-NOT: @embed.weight.shard
// Z3: exec.collective all_gather "dp" @layers.0.proj.weight.shard -> @layers.0.proj.weight {layer = 0 : i64}
// Z3: exec.collective reduce_scatter "dp" @grad.layers.0.proj.weight -> @grad_shard.layers.0.proj.weight accumulate {layer = 0 : i64}
// Z3-NOT: @embed.weight.shard
// Z3-LABEL: exec.phase step {
// Z3: exec.kernel "adamw" ins [@layers.0.proj.weight.shard, @grad_shard.layers.0.proj.weight,

// Full recomputation: the layer's forward runs again in the backward,
// before the gradients that read what it saved.
// FULL-LABEL: exec.phase backward chunk 0 {
// FULL: exec.collective all_reduce "dp" @grad.lm_head.weight
// FULL-NEXT: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
// FULL: exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1,

// tp = 2, pp = 2: the gradient arrives from the next stage as this tp
// rank's half of the sequence and is gathered; the column-parallel
// projection's input gradient is all-reduced over tp; the last stage
// sends its input's gradient back, sliced again.
// TP-LABEL: exec.phase backward chunk 0 {
// TP-NEXT: exec.recv @d.layers.0.add.4.slice from next
// TP-NEXT: exec.collective all_gather "tp" @d.layers.0.add.4.slice -> @d.layers.0.add.4 dim 1
// TP: exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1, @layers.0.up.weight] outs [@d.layers.0.rms_norm.1, @grad.layers.0.up.weight] accumulate [false, true] {layer = 0 : i64}
// TP-NEXT: exec.collective all_reduce "tp" @d.layers.0.rms_norm.1 -> @d.layers.0.rms_norm.1 {layer = 0 : i64}
// TP-NEXT: exec.kernel "rms_norm_bwd"
// TP-NEXT: exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.weight] accumulate [true] params {vocab_parts = 2 : i64}
// TP-NEXT: }
// The norm weight is replicated over tp: its square counts once.
// TP: exec.kernel "grad_sumsq" ins [@grad.embed.weight, @grad.layers.0.norm.weight, @grad.layers.0.up.weight, @grad.layers.0.down.weight] outs [@grad_sumsq] params {weights = [1.000000e+00, 5.000000e-01, 1.000000e+00, 1.000000e+00]}
// TP-LABEL: exec.phase backward chunk 1 {
// TP-NEXT: exec.kernel "ce_bwd" ins [@lm_head.3, @loss.max, @loss.stats, @labels] outs [@d.lm_head.3] params {scale = 6.250000e-02 : f64, vocab_parts = 2 : i64, vocab_size = 16 : i64}
// TP: exec.kernel "copy" ins [@d.layers.1.add.1] outs [@d.recv.0] {layer = 1 : i64}
// TP-NEXT: exec.kernel "copy" ins [@d.layers.1.add.1] outs [@d.recv.0] accumulate [true] {layer = 1 : i64}
// TP-NEXT: exec.kernel "shard_slice" ins [@d.recv.0] outs [@d.recv.0.slice] params {dim = 1 : i64, group = "tp"}
// TP-NEXT: exec.send @d.recv.0.slice to prev
// TP-NEXT: }

//--- dp.mlir
module attributes {dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, exec.model = "tiny", exec.seq_len = 4 : i64, tfm.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, clip_norm = 1.000000e+00 : f64, decay = "cosine", decay_steps = 0 : i64, eps = 1.000000e-08 : f64, lr = 3.000000e-04 : f64, min_lr = 3.000000e-05 : f64, warmup_steps = 0 : i64, weight_decay = 1.000000e-01 : f64}} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @tokens : tensor<2x4xi32> tokens
    exec.buffer @labels : tensor<2x4xi32> labels
    exec.buffer @embed.weight : tensor<16x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "embed.weight"}
    exec.buffer @embedding.0 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.norm.weight : tensor<8xf32> param {init = "ones", layer = 0 : i64, param = "layers.0.norm.weight"}
    exec.buffer @layers.0.rms_norm.1 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.proj.weight : tensor<8x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, param = "layers.0.proj.weight"}
    exec.buffer @layers.0.linear.2 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.add.3 : tensor<2x4x8xf32> activation
    exec.buffer @lm_head.weight : tensor<16x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "lm_head.weight"}
    exec.buffer @lm_head.4 : tensor<2x4x16xf32> activation
    exec.buffer @loss.max : tensor<2x4xf32> activation
    exec.buffer @loss.stats : tensor<2x4x2xf32> activation
    exec.buffer @loss : tensor<f32> scalar
    exec.phase forward chunk 0 {
      exec.kernel "embedding" ins [@embed.weight, @tokens] outs [@embedding.0] params {vocab_parts = 1 : i64}
      exec.kernel "rms_norm" ins [@embedding.0, @layers.0.norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.proj.weight] outs [@layers.0.linear.2] {layer = 0 : i64}
      exec.kernel "add" ins [@embedding.0, @layers.0.linear.2] outs [@layers.0.add.3] {layer = 0 : i64}
      exec.kernel "linear" ins [@layers.0.add.3, @lm_head.weight] outs [@lm_head.4]
      exec.kernel "ce_max" ins [@lm_head.4] outs [@loss.max] params {vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.kernel "ce_stats" ins [@lm_head.4, @loss.max, @labels] outs [@loss.stats] params {vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.kernel "ce_loss" ins [@loss.max, @loss.stats] outs [@loss] accumulate [true] params {scale = 3.125000e-02 : f64}
    }
  }
}


//--- tp-pp.mlir
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 2, pp = 2, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>, exec.model = "tiny", exec.seq_len = 4 : i64} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @tokens : tensor<2x4xi32> tokens
    exec.buffer @embed.weight : tensor<8x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "embed.weight", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
    exec.buffer @embedding.0 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.norm.weight : tensor<8xf32> param {init = "ones", layer = 0 : i64, param = "layers.0.norm.weight"}
    exec.buffer @layers.0.rms_norm.1 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.up.weight : tensor<4x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, param = "layers.0.up.weight", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
    exec.buffer @layers.0.linear.2 : tensor<2x4x4xf32> activation
    exec.buffer @layers.0.down.weight : tensor<8x4xf32> param {init = "normal", init_std = 1.000000e-02 : f64, layer = 0 : i64, param = "layers.0.down.weight", sharding_dim = 1 : i64, sharding_parts = 2 : i64}
    exec.buffer @layers.0.linear.3 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.add.4 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.add.4.slice : tensor<2x2x8xf32> activation
    exec.phase forward chunk 0 {
      exec.kernel "embedding" ins [@embed.weight, @tokens] outs [@embedding.0] params {vocab_parts = 2 : i64}
      exec.collective all_reduce "tp" @embedding.0 -> @embedding.0
      exec.kernel "rms_norm" ins [@embedding.0, @layers.0.norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.up.weight] outs [@layers.0.linear.2] {layer = 0 : i64}
      exec.kernel "linear" ins [@layers.0.linear.2, @layers.0.down.weight] outs [@layers.0.linear.3] {layer = 0 : i64}
      exec.collective all_reduce "tp" @layers.0.linear.3 -> @layers.0.linear.3 {layer = 0 : i64}
      exec.kernel "add" ins [@embedding.0, @layers.0.linear.3] outs [@layers.0.add.4] {layer = 0 : i64}
      exec.kernel "shard_slice" ins [@layers.0.add.4] outs [@layers.0.add.4.slice] params {dim = 1 : i64, group = "tp"}
      exec.send @layers.0.add.4.slice to next
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @labels : tensor<2x4xi32> labels
    exec.buffer @recv.0 : tensor<2x4x8xf32> activation
    exec.buffer @recv.0.slice : tensor<2x2x8xf32> activation
    exec.buffer @layers.1.add.1 : tensor<2x4x8xf32> activation
    exec.buffer @final_norm.weight : tensor<8xf32> param {init = "ones", param = "final_norm.weight"}
    exec.buffer @rms_norm.2 : tensor<2x4x8xf32> activation
    exec.buffer @lm_head.weight : tensor<8x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "lm_head.weight", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
    exec.buffer @lm_head.3 : tensor<2x4x8xf32> activation
    exec.buffer @loss.max : tensor<2x4xf32> activation
    exec.buffer @loss.stats : tensor<2x4x2xf32> activation
    exec.buffer @loss : tensor<f32> scalar
    exec.phase forward chunk 1 {
      exec.recv @recv.0.slice from prev
      exec.collective all_gather "tp" @recv.0.slice -> @recv.0 dim 1
      exec.kernel "add" ins [@recv.0, @recv.0] outs [@layers.1.add.1] {layer = 1 : i64}
      exec.kernel "rms_norm" ins [@layers.1.add.1, @final_norm.weight] outs [@rms_norm.2] params {eps = 1.000000e-05 : f64}
      exec.kernel "linear" ins [@rms_norm.2, @lm_head.weight] outs [@lm_head.3]
      exec.kernel "ce_max" ins [@lm_head.3] outs [@loss.max] params {vocab_parts = 2 : i64, vocab_size = 16 : i64}
      exec.collective all_reduce "tp" @loss.max -> @loss.max reduce max
      exec.kernel "ce_stats" ins [@lm_head.3, @loss.max, @labels] outs [@loss.stats] params {vocab_parts = 2 : i64, vocab_size = 16 : i64}
      exec.collective all_reduce "tp" @loss.stats -> @loss.stats
      exec.kernel "ce_loss" ins [@loss.max, @loss.stats] outs [@loss] accumulate [true] params {scale = 6.250000e-02 : f64}
    }
  }
}

