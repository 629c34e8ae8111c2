// exec-overlap-communication on small trained programs (dp = 2 with
// ZeRO-0 and ZeRO-3, and tp = 2 with pp = 2): data-parallel collectives
// form buckets, start early and are waited for late; collectives whose
// result the next launch needs stay synchronous. Whole models through the
// pipeline are in test/Tools/pipeline-exec-overlap-communication.mlir.
// RUN: split-file %s %t
// RUN: plan-opt %t/zero0.mlir --exec-overlap-communication 2>%t/z0.err | FileCheck %s --check-prefix=Z0
// RUN: FileCheck %s --check-prefix=Z0-REPORT < %t/z0.err
// RUN: plan-opt %t/zero0.mlir --pass-pipeline='builtin.module(exec-overlap-communication{bucket-mb=0.0003 quiet})' | FileCheck %s --check-prefix=SMALL
// RUN: plan-opt %t/zero3.mlir --exec-overlap-communication 2>/dev/null | FileCheck %s --check-prefix=Z3
// RUN: plan-opt %t/tp-pp.mlir --exec-overlap-communication 2>&1 >/dev/null | FileCheck %s --check-prefix=TP-REPORT
// RUN: not plan-opt %t/zero0.mlir --exec-overlap-communication=bucket-mb=0 2>&1 | FileCheck %s --check-prefix=BAD

// ZeRO-0: the last micro-batch's gradient all-reduces form one bucket (all
// of them under 25 MiB), run while the backward goes on, and are waited
// for in the step, before the gradient norm reads them. The loss's
// all-reduce overlaps the optimizer.
// Z0-LABEL: exec.phase backward chunk 0 {
// Z0: exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight async last_micro_batch {bucket = 0 : i64}
// Z0: exec.collective all_reduce "dp" @grad.layers.0.proj.weight -> @grad.layers.0.proj.weight async last_micro_batch {bucket = 0 : i64, layer = 0 : i64}
// Z0-NEXT: exec.collective all_reduce "dp" @grad.layers.0.norm.weight -> @grad.layers.0.norm.weight async last_micro_batch {bucket = 0 : i64, layer = 0 : i64}
// Z0-NEXT: exec.collective all_reduce "dp" @grad.embed.weight -> @grad.embed.weight async last_micro_batch {bucket = 0 : i64}
// Z0-NEXT: }
// Z0-NEXT: exec.phase step {
// Z0-NEXT: exec.wait @grad.lm_head.weight
// Z0-NEXT: exec.wait @grad.layers.0.proj.weight
// Z0-NEXT: exec.wait @grad.layers.0.norm.weight
// Z0-NEXT: exec.wait @grad.embed.weight
// Z0-NEXT: exec.kernel "grad_sumsq"
// Z0-NEXT: exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
// Z0-NEXT: exec.collective all_reduce "dp" @loss -> @loss async
// Z0: exec.kernel "adamw"
// Z0: exec.wait @loss
// Z0-NEXT: }
// Z0-REPORT: overlap: dp 5 of 5 async; world 0 of 1 async (1 not: its group spans ranks of other programs);

// Buckets of at most 0.0003 MiB (314 bytes): the LM head's and the
// embedding's 512-byte gradients go alone, the layer's 256 and 32 bytes
// together.
// SMALL: exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight async last_micro_batch{{$}}
// SMALL: exec.collective all_reduce "dp" @grad.layers.0.proj.weight -> @grad.layers.0.proj.weight async last_micro_batch {bucket = 0 : i64, layer = 0 : i64}
// SMALL-NEXT: exec.collective all_reduce "dp" @grad.layers.0.norm.weight -> @grad.layers.0.norm.weight async last_micro_batch {bucket = 0 : i64, layer = 0 : i64}
// SMALL: exec.collective all_reduce "dp" @grad.embed.weight -> @grad.embed.weight async last_micro_batch{{$}}

// ZeRO-3: the layer's parameter gathers are one bucket, prefetched while
// the embedding runs, each waited for right before its first reader; the
// LM head's gather overlaps the layer. The embedding's own gather, read by
// the very next launch, stays synchronous.
// Z3-LABEL: exec.phase forward chunk 0 {
// Z3-NEXT: exec.collective all_gather "dp" @embed.weight.shard -> @embed.weight{{$}}
// Z3-NEXT: exec.kernel "embedding"
// Z3-NEXT: exec.collective all_gather "dp" @layers.0.norm.weight.shard -> @layers.0.norm.weight async {bucket = 0 : i64}
// Z3-NEXT: exec.collective all_gather "dp" @layers.0.proj.weight.shard -> @layers.0.proj.weight async {bucket = 0 : i64}
// Z3-NEXT: exec.wait @layers.0.norm.weight
// Z3-NEXT: exec.kernel "rms_norm"
// Z3-NEXT: exec.wait @layers.0.proj.weight
// Z3-NEXT: exec.collective all_gather "dp" @lm_head.weight.shard -> @lm_head.weight async
// Z3-NEXT: exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.proj.weight]
// Z3-NEXT: exec.kernel "add"
// Z3-NEXT: exec.wait @lm_head.weight
// Z3-NEXT: exec.kernel "linear" ins [@layers.0.add.3, @lm_head.weight]
// In the backward the gradient reduce-scatters run behind the rest of the
// backward pass and are waited for at its end.
// Z3-LABEL: exec.phase backward chunk 0 {
// Z3: exec.collective reduce_scatter "dp" @grad.lm_head.weight -> @grad_shard.lm_head.weight accumulate async
// Z3-NEXT: exec.kernel "copy"
// Z3: exec.kernel "embedding_bwd"
// Z3-NEXT: exec.collective reduce_scatter "dp" @grad.layers.0.proj.weight -> @grad_shard.layers.0.proj.weight accumulate async {bucket = 2 : i64, layer = 0 : i64}
// Z3: exec.wait @grad_shard.embed.weight
// Z3-NEXT: }

// Tensor-parallel collectives sit between the GEMM that makes their input
// and the one that reads their output: none can overlap.
// TP-REPORT: overlap: tp 0 of 8 async (8 not: the launch after it needs its result at once); world 0 of 2 async (2 not: its group spans ranks of other programs);

// BAD: error: exec-overlap-communication: bucket-mb must be positive, got 0

//--- zero0.mlir
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
    exec.buffer @d.lm_head.4 : tensor<2x4x16xf32> activation_grad
    exec.buffer @d.layers.0.add.3 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.lm_head.weight : tensor<16x8xf32> param_grad {param = "lm_head.weight"}
    exec.buffer @d.embedding.0 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.linear.2 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.rms_norm.1 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.layers.0.proj.weight : tensor<8x8xf32> param_grad {param = "layers.0.proj.weight"}
    exec.buffer @grad.layers.0.norm.weight : tensor<8xf32> param_grad {param = "layers.0.norm.weight"}
    exec.buffer @grad.embed.weight : tensor<16x8xf32> param_grad {param = "embed.weight"}
    exec.buffer @grad_sumsq : tensor<f32> scalar
    exec.buffer @clip_coefficient : tensor<f32> scalar
    exec.buffer @adam_m.embed.weight : tensor<16x8xf32> optimizer_state {param = "embed.weight"}
    exec.buffer @adam_v.embed.weight : tensor<16x8xf32> optimizer_state {param = "embed.weight"}
    exec.buffer @adam_m.layers.0.norm.weight : tensor<8xf32> optimizer_state {param = "layers.0.norm.weight"}
    exec.buffer @adam_v.layers.0.norm.weight : tensor<8xf32> optimizer_state {param = "layers.0.norm.weight"}
    exec.buffer @adam_m.layers.0.proj.weight : tensor<8x8xf32> optimizer_state {param = "layers.0.proj.weight"}
    exec.buffer @adam_v.layers.0.proj.weight : tensor<8x8xf32> optimizer_state {param = "layers.0.proj.weight"}
    exec.buffer @adam_m.lm_head.weight : tensor<16x8xf32> optimizer_state {param = "lm_head.weight"}
    exec.buffer @adam_v.lm_head.weight : tensor<16x8xf32> optimizer_state {param = "lm_head.weight"}
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
    exec.phase backward chunk 0 {
      exec.kernel "ce_bwd" ins [@lm_head.4, @loss.max, @loss.stats, @labels] outs [@d.lm_head.4] params {scale = 3.125000e-02 : f64, vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.kernel "linear_bwd" ins [@d.lm_head.4, @layers.0.add.3, @lm_head.weight] outs [@d.layers.0.add.3, @grad.lm_head.weight] accumulate [false, true]
      exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight last_micro_batch
      exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.embedding.0] {layer = 0 : i64}
      exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.layers.0.linear.2] {layer = 0 : i64}
      exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1, @layers.0.proj.weight] outs [@d.layers.0.rms_norm.1, @grad.layers.0.proj.weight] accumulate [false, true] {layer = 0 : i64}
      exec.kernel "rms_norm_bwd" ins [@d.layers.0.rms_norm.1, @embedding.0, @layers.0.norm.weight] outs [@d.embedding.0, @grad.layers.0.norm.weight] accumulate [true, true] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.collective all_reduce "dp" @grad.layers.0.proj.weight -> @grad.layers.0.proj.weight last_micro_batch {layer = 0 : i64}
      exec.collective all_reduce "dp" @grad.layers.0.norm.weight -> @grad.layers.0.norm.weight last_micro_batch {layer = 0 : i64}
      exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.weight] accumulate [true] params {vocab_parts = 1 : i64}
      exec.collective all_reduce "dp" @grad.embed.weight -> @grad.embed.weight last_micro_batch
    }
    exec.phase step {
      exec.kernel "grad_sumsq" ins [@grad.embed.weight, @grad.layers.0.norm.weight, @grad.layers.0.proj.weight, @grad.lm_head.weight] outs [@grad_sumsq] params {weights = [5.000000e-01, 5.000000e-01, 5.000000e-01, 5.000000e-01]}
      exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
      exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
      exec.kernel "adamw" ins [@embed.weight, @grad.embed.weight, @adam_m.embed.weight, @adam_v.embed.weight, @clip_coefficient] outs [@embed.weight, @adam_m.embed.weight, @adam_v.embed.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@layers.0.norm.weight, @grad.layers.0.norm.weight, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight, @clip_coefficient] outs [@layers.0.norm.weight, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight] params {dp_shard = false, weight_decay = false}
      exec.kernel "adamw" ins [@layers.0.proj.weight, @grad.layers.0.proj.weight, @adam_m.layers.0.proj.weight, @adam_v.layers.0.proj.weight, @clip_coefficient] outs [@layers.0.proj.weight, @adam_m.layers.0.proj.weight, @adam_v.layers.0.proj.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@lm_head.weight, @grad.lm_head.weight, @adam_m.lm_head.weight, @adam_v.lm_head.weight, @clip_coefficient] outs [@lm_head.weight, @adam_m.lm_head.weight, @adam_v.lm_head.weight] params {dp_shard = false, weight_decay = true}
      exec.collective all_reduce "dp" @loss -> @loss
    }
  }
}


//--- zero3.mlir
module attributes {dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 1, vpp = 1, zero = 3, micro_batch_size = 2, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, exec.model = "tiny", exec.seq_len = 4 : i64, tfm.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, clip_norm = 1.000000e+00 : f64, decay = "cosine", decay_steps = 0 : i64, eps = 1.000000e-08 : f64, lr = 3.000000e-04 : f64, min_lr = 3.000000e-05 : f64, warmup_steps = 0 : i64, weight_decay = 1.000000e-01 : f64}} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @tokens : tensor<2x4xi32> tokens
    exec.buffer @labels : tensor<2x4xi32> labels
    exec.buffer @embed.weight : tensor<16x8xf32> param_gathered {init = "normal", init_std = 2.000000e-02 : f64, param = "embed.weight"}
    exec.buffer @embedding.0 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.norm.weight : tensor<8xf32> param_gathered {init = "ones", layer = 0 : i64, param = "layers.0.norm.weight"}
    exec.buffer @layers.0.rms_norm.1 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.proj.weight : tensor<8x8xf32> param_gathered {init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, param = "layers.0.proj.weight"}
    exec.buffer @layers.0.linear.2 : tensor<2x4x8xf32> activation
    exec.buffer @layers.0.add.3 : tensor<2x4x8xf32> activation
    exec.buffer @lm_head.weight : tensor<16x8xf32> param_gathered {init = "normal", init_std = 2.000000e-02 : f64, param = "lm_head.weight"}
    exec.buffer @lm_head.4 : tensor<2x4x16xf32> activation
    exec.buffer @loss.max : tensor<2x4xf32> activation
    exec.buffer @loss.stats : tensor<2x4x2xf32> activation
    exec.buffer @loss : tensor<f32> scalar
    exec.buffer @grad_shard.embed.weight : tensor<64xf32> grad_shard {dp_shard, param = "embed.weight"}
    exec.buffer @embed.weight.shard : tensor<64xf32> param_shard {dp_shard, init = "normal", init_std = 2.000000e-02 : f64, local_type = tensor<16x8xf32>, param = "embed.weight"}
    exec.buffer @grad_shard.layers.0.norm.weight : tensor<4xf32> grad_shard {dp_shard, param = "layers.0.norm.weight"}
    exec.buffer @layers.0.norm.weight.shard : tensor<4xf32> param_shard {dp_shard, init = "ones", layer = 0 : i64, local_type = tensor<8xf32>, param = "layers.0.norm.weight"}
    exec.buffer @grad_shard.layers.0.proj.weight : tensor<32xf32> grad_shard {dp_shard, param = "layers.0.proj.weight"}
    exec.buffer @layers.0.proj.weight.shard : tensor<32xf32> param_shard {dp_shard, init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, local_type = tensor<8x8xf32>, param = "layers.0.proj.weight"}
    exec.buffer @grad_shard.lm_head.weight : tensor<64xf32> grad_shard {dp_shard, param = "lm_head.weight"}
    exec.buffer @lm_head.weight.shard : tensor<64xf32> param_shard {dp_shard, init = "normal", init_std = 2.000000e-02 : f64, local_type = tensor<16x8xf32>, param = "lm_head.weight"}
    exec.buffer @d.lm_head.4 : tensor<2x4x16xf32> activation_grad
    exec.buffer @d.layers.0.add.3 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.lm_head.weight : tensor<16x8xf32> param_grad {param = "lm_head.weight"}
    exec.buffer @d.embedding.0 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.linear.2 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.rms_norm.1 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.layers.0.proj.weight : tensor<8x8xf32> param_grad {param = "layers.0.proj.weight"}
    exec.buffer @grad.layers.0.norm.weight : tensor<8xf32> param_grad {param = "layers.0.norm.weight"}
    exec.buffer @grad.embed.weight : tensor<16x8xf32> param_grad {param = "embed.weight"}
    exec.buffer @grad_sumsq : tensor<f32> scalar
    exec.buffer @clip_coefficient : tensor<f32> scalar
    exec.buffer @adam_m.embed.weight : tensor<64xf32> optimizer_state {dp_shard, param = "embed.weight"}
    exec.buffer @adam_v.embed.weight : tensor<64xf32> optimizer_state {dp_shard, param = "embed.weight"}
    exec.buffer @adam_m.layers.0.norm.weight : tensor<4xf32> optimizer_state {dp_shard, param = "layers.0.norm.weight"}
    exec.buffer @adam_v.layers.0.norm.weight : tensor<4xf32> optimizer_state {dp_shard, param = "layers.0.norm.weight"}
    exec.buffer @adam_m.layers.0.proj.weight : tensor<32xf32> optimizer_state {dp_shard, param = "layers.0.proj.weight"}
    exec.buffer @adam_v.layers.0.proj.weight : tensor<32xf32> optimizer_state {dp_shard, param = "layers.0.proj.weight"}
    exec.buffer @adam_m.lm_head.weight : tensor<64xf32> optimizer_state {dp_shard, param = "lm_head.weight"}
    exec.buffer @adam_v.lm_head.weight : tensor<64xf32> optimizer_state {dp_shard, param = "lm_head.weight"}
    exec.phase forward chunk 0 {
      exec.collective all_gather "dp" @embed.weight.shard -> @embed.weight
      exec.kernel "embedding" ins [@embed.weight, @tokens] outs [@embedding.0] params {vocab_parts = 1 : i64}
      exec.collective all_gather "dp" @layers.0.norm.weight.shard -> @layers.0.norm.weight
      exec.collective all_gather "dp" @layers.0.proj.weight.shard -> @layers.0.proj.weight
      exec.kernel "rms_norm" ins [@embedding.0, @layers.0.norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.proj.weight] outs [@layers.0.linear.2] {layer = 0 : i64}
      exec.kernel "add" ins [@embedding.0, @layers.0.linear.2] outs [@layers.0.add.3] {layer = 0 : i64}
      exec.collective all_gather "dp" @lm_head.weight.shard -> @lm_head.weight
      exec.kernel "linear" ins [@layers.0.add.3, @lm_head.weight] outs [@lm_head.4]
      exec.kernel "ce_max" ins [@lm_head.4] outs [@loss.max] params {vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.kernel "ce_stats" ins [@lm_head.4, @loss.max, @labels] outs [@loss.stats] params {vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.kernel "ce_loss" ins [@loss.max, @loss.stats] outs [@loss] accumulate [true] params {scale = 3.125000e-02 : f64}
    }
    exec.phase backward chunk 0 {
      exec.kernel "ce_bwd" ins [@lm_head.4, @loss.max, @loss.stats, @labels] outs [@d.lm_head.4] params {scale = 3.125000e-02 : f64, vocab_parts = 1 : i64, vocab_size = 16 : i64}
      exec.collective all_gather "dp" @lm_head.weight.shard -> @lm_head.weight
      exec.kernel "linear_bwd" ins [@d.lm_head.4, @layers.0.add.3, @lm_head.weight] outs [@d.layers.0.add.3, @grad.lm_head.weight]
      exec.collective reduce_scatter "dp" @grad.lm_head.weight -> @grad_shard.lm_head.weight accumulate
      exec.collective all_gather "dp" @layers.0.norm.weight.shard -> @layers.0.norm.weight {layer = 0 : i64}
      exec.collective all_gather "dp" @layers.0.proj.weight.shard -> @layers.0.proj.weight {layer = 0 : i64}
      exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.embedding.0] {layer = 0 : i64}
      exec.kernel "copy" ins [@d.layers.0.add.3] outs [@d.layers.0.linear.2] {layer = 0 : i64}
      exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1, @layers.0.proj.weight] outs [@d.layers.0.rms_norm.1, @grad.layers.0.proj.weight] {layer = 0 : i64}
      exec.kernel "rms_norm_bwd" ins [@d.layers.0.rms_norm.1, @embedding.0, @layers.0.norm.weight] outs [@d.embedding.0, @grad.layers.0.norm.weight] accumulate [true, false] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.collective reduce_scatter "dp" @grad.layers.0.proj.weight -> @grad_shard.layers.0.proj.weight accumulate {layer = 0 : i64}
      exec.collective reduce_scatter "dp" @grad.layers.0.norm.weight -> @grad_shard.layers.0.norm.weight accumulate {layer = 0 : i64}
      exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.weight] params {vocab_parts = 1 : i64}
      exec.collective reduce_scatter "dp" @grad.embed.weight -> @grad_shard.embed.weight accumulate
    }
    exec.phase step {
      exec.kernel "grad_sumsq" ins [@grad_shard.embed.weight, @grad_shard.layers.0.norm.weight, @grad_shard.layers.0.proj.weight, @grad_shard.lm_head.weight] outs [@grad_sumsq] params {weights = [1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]}
      exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
      exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
      exec.kernel "adamw" ins [@embed.weight.shard, @grad_shard.embed.weight, @adam_m.embed.weight, @adam_v.embed.weight, @clip_coefficient] outs [@embed.weight.shard, @adam_m.embed.weight, @adam_v.embed.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@layers.0.norm.weight.shard, @grad_shard.layers.0.norm.weight, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight, @clip_coefficient] outs [@layers.0.norm.weight.shard, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight] params {dp_shard = false, weight_decay = false}
      exec.kernel "adamw" ins [@layers.0.proj.weight.shard, @grad_shard.layers.0.proj.weight, @adam_m.layers.0.proj.weight, @adam_v.layers.0.proj.weight, @clip_coefficient] outs [@layers.0.proj.weight.shard, @adam_m.layers.0.proj.weight, @adam_v.layers.0.proj.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@lm_head.weight.shard, @grad_shard.lm_head.weight, @adam_m.lm_head.weight, @adam_v.lm_head.weight, @clip_coefficient] outs [@lm_head.weight.shard, @adam_m.lm_head.weight, @adam_v.lm_head.weight] params {dp_shard = false, weight_decay = true}
      exec.collective all_reduce "dp" @loss -> @loss
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
    exec.buffer @d.layers.0.add.4.slice : tensor<2x2x8xf32> activation_grad
    exec.buffer @d.layers.0.add.4 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.embedding.0 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.linear.3 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.layers.0.linear.2 : tensor<2x4x4xf32> activation_grad
    exec.buffer @grad.layers.0.down.weight : tensor<8x4xf32> param_grad {param = "layers.0.down.weight"}
    exec.buffer @d.layers.0.rms_norm.1 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.layers.0.up.weight : tensor<4x8xf32> param_grad {param = "layers.0.up.weight"}
    exec.buffer @grad.layers.0.norm.weight : tensor<8xf32> param_grad {param = "layers.0.norm.weight"}
    exec.buffer @grad.embed.weight : tensor<8x8xf32> param_grad {param = "embed.weight"}
    exec.buffer @grad_sumsq : tensor<f32> scalar
    exec.buffer @clip_coefficient : tensor<f32> scalar
    exec.buffer @adam_m.embed.weight : tensor<8x8xf32> optimizer_state {param = "embed.weight"}
    exec.buffer @adam_v.embed.weight : tensor<8x8xf32> optimizer_state {param = "embed.weight"}
    exec.buffer @adam_m.layers.0.norm.weight : tensor<8xf32> optimizer_state {param = "layers.0.norm.weight"}
    exec.buffer @adam_v.layers.0.norm.weight : tensor<8xf32> optimizer_state {param = "layers.0.norm.weight"}
    exec.buffer @adam_m.layers.0.up.weight : tensor<4x8xf32> optimizer_state {param = "layers.0.up.weight"}
    exec.buffer @adam_v.layers.0.up.weight : tensor<4x8xf32> optimizer_state {param = "layers.0.up.weight"}
    exec.buffer @adam_m.layers.0.down.weight : tensor<8x4xf32> optimizer_state {param = "layers.0.down.weight"}
    exec.buffer @adam_v.layers.0.down.weight : tensor<8x4xf32> optimizer_state {param = "layers.0.down.weight"}
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
    exec.phase backward chunk 0 {
      exec.recv @d.layers.0.add.4.slice from next
      exec.collective all_gather "tp" @d.layers.0.add.4.slice -> @d.layers.0.add.4 dim 1
      exec.kernel "copy" ins [@d.layers.0.add.4] outs [@d.embedding.0] {layer = 0 : i64}
      exec.kernel "copy" ins [@d.layers.0.add.4] outs [@d.layers.0.linear.3] {layer = 0 : i64}
      exec.kernel "linear_bwd" ins [@d.layers.0.linear.3, @layers.0.linear.2, @layers.0.down.weight] outs [@d.layers.0.linear.2, @grad.layers.0.down.weight] accumulate [false, true] {layer = 0 : i64}
      exec.kernel "linear_bwd" ins [@d.layers.0.linear.2, @layers.0.rms_norm.1, @layers.0.up.weight] outs [@d.layers.0.rms_norm.1, @grad.layers.0.up.weight] accumulate [false, true] {layer = 0 : i64}
      exec.collective all_reduce "tp" @d.layers.0.rms_norm.1 -> @d.layers.0.rms_norm.1 {layer = 0 : i64}
      exec.kernel "rms_norm_bwd" ins [@d.layers.0.rms_norm.1, @embedding.0, @layers.0.norm.weight] outs [@d.embedding.0, @grad.layers.0.norm.weight] accumulate [true, true] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
      exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.weight] accumulate [true] params {vocab_parts = 2 : i64}
    }
    exec.phase step {
      exec.kernel "grad_sumsq" ins [@grad.embed.weight, @grad.layers.0.norm.weight, @grad.layers.0.up.weight, @grad.layers.0.down.weight] outs [@grad_sumsq] params {weights = [1.000000e+00, 5.000000e-01, 1.000000e+00, 1.000000e+00]}
      exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
      exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
      exec.kernel "adamw" ins [@embed.weight, @grad.embed.weight, @adam_m.embed.weight, @adam_v.embed.weight, @clip_coefficient] outs [@embed.weight, @adam_m.embed.weight, @adam_v.embed.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@layers.0.norm.weight, @grad.layers.0.norm.weight, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight, @clip_coefficient] outs [@layers.0.norm.weight, @adam_m.layers.0.norm.weight, @adam_v.layers.0.norm.weight] params {dp_shard = false, weight_decay = false}
      exec.kernel "adamw" ins [@layers.0.up.weight, @grad.layers.0.up.weight, @adam_m.layers.0.up.weight, @adam_v.layers.0.up.weight, @clip_coefficient] outs [@layers.0.up.weight, @adam_m.layers.0.up.weight, @adam_v.layers.0.up.weight] params {dp_shard = false, weight_decay = true}
      exec.kernel "adamw" ins [@layers.0.down.weight, @grad.layers.0.down.weight, @adam_m.layers.0.down.weight, @adam_v.layers.0.down.weight, @clip_coefficient] outs [@layers.0.down.weight, @adam_m.layers.0.down.weight, @adam_v.layers.0.down.weight] params {dp_shard = false, weight_decay = true}
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
    exec.buffer @d.lm_head.3 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.rms_norm.2 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.lm_head.weight : tensor<8x8xf32> param_grad {param = "lm_head.weight"}
    exec.buffer @d.layers.1.add.1 : tensor<2x4x8xf32> activation_grad
    exec.buffer @grad.final_norm.weight : tensor<8xf32> param_grad {param = "final_norm.weight"}
    exec.buffer @d.recv.0 : tensor<2x4x8xf32> activation_grad
    exec.buffer @d.recv.0.slice : tensor<2x2x8xf32> activation_grad
    exec.buffer @grad_sumsq : tensor<f32> scalar
    exec.buffer @clip_coefficient : tensor<f32> scalar
    exec.buffer @adam_m.final_norm.weight : tensor<8xf32> optimizer_state {param = "final_norm.weight"}
    exec.buffer @adam_v.final_norm.weight : tensor<8xf32> optimizer_state {param = "final_norm.weight"}
    exec.buffer @adam_m.lm_head.weight : tensor<8x8xf32> optimizer_state {param = "lm_head.weight"}
    exec.buffer @adam_v.lm_head.weight : tensor<8x8xf32> optimizer_state {param = "lm_head.weight"}
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
    exec.phase backward chunk 1 {
      exec.kernel "ce_bwd" ins [@lm_head.3, @loss.max, @loss.stats, @labels] outs [@d.lm_head.3] params {scale = 6.250000e-02 : f64, vocab_parts = 2 : i64, vocab_size = 16 : i64}
      exec.kernel "linear_bwd" ins [@d.lm_head.3, @rms_norm.2, @lm_head.weight] outs [@d.rms_norm.2, @grad.lm_head.weight] accumulate [false, true]
      exec.collective all_reduce "tp" @d.rms_norm.2 -> @d.rms_norm.2
      exec.kernel "rms_norm_bwd" ins [@d.rms_norm.2, @layers.1.add.1, @final_norm.weight] outs [@d.layers.1.add.1, @grad.final_norm.weight] accumulate [false, true] params {eps = 1.000000e-05 : f64}
      exec.kernel "copy" ins [@d.layers.1.add.1] outs [@d.recv.0] {layer = 1 : i64}
      exec.kernel "copy" ins [@d.layers.1.add.1] outs [@d.recv.0] accumulate [true] {layer = 1 : i64}
      exec.kernel "shard_slice" ins [@d.recv.0] outs [@d.recv.0.slice] params {dim = 1 : i64, group = "tp"}
      exec.send @d.recv.0.slice to prev
    }
    exec.phase step {
      exec.kernel "grad_sumsq" ins [@grad.final_norm.weight, @grad.lm_head.weight] outs [@grad_sumsq] params {weights = [5.000000e-01, 1.000000e+00]}
      exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
      exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
      exec.kernel "adamw" ins [@final_norm.weight, @grad.final_norm.weight, @adam_m.final_norm.weight, @adam_v.final_norm.weight, @clip_coefficient] outs [@final_norm.weight, @adam_m.final_norm.weight, @adam_v.final_norm.weight] params {dp_shard = false, weight_decay = false}
      exec.kernel "adamw" ins [@lm_head.weight, @grad.lm_head.weight, @adam_m.lm_head.weight, @adam_v.lm_head.weight, @clip_coefficient] outs [@lm_head.weight, @adam_m.lm_head.weight, @adam_v.lm_head.weight] params {dp_shard = false, weight_decay = true}
    }
  }
}

