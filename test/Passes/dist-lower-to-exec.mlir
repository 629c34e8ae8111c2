// dist-lower-to-exec on small staged models: a dist.stage becomes the
// exec.program of its pipeline rank, every value a named buffer, every op
// a kernel, collective, send or receive. Whole models through the whole
// pipeline are in test/Tools/pipeline-dist-lower-to-exec.mlir.
// RUN: plan-opt %s -split-input-file --dist-lower-to-exec | FileCheck %s

// tp = 2, pp = 2: one layer per stage, the vocabulary split over tp.
// CHECK: module attributes {{{.*}}exec.model = "tiny", exec.seq_len = 4 : i64}
// CHECK-NOT: tfm.model
// Inputs, then parameters with their init rule and sharding, then
// activations named after their layer and op.
// CHECK-LABEL: exec.program @rank0 pp_rank 0 {
// CHECK-NEXT: exec.buffer @tokens : tensor<2x4xi32> tokens
// CHECK-NEXT: exec.buffer @embed.weight : tensor<8x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "embed.weight", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
// CHECK-NEXT: exec.buffer @embedding.0 : tensor<2x4x8xf32> activation
// CHECK-NEXT: exec.buffer @layers.0.norm.weight : tensor<8xf32> param {init = "ones", layer = 0 : i64, param = "layers.0.norm.weight"}
// CHECK: exec.buffer @layers.0.down.weight : tensor<8x4xf32> param {{{.*}}sharding_dim = 1 : i64, sharding_parts = 2 : i64}
// The vocab-parallel embedding is completed by an in-place all-reduce;
// the column- then row-parallel pair by another.
// CHECK: exec.phase forward chunk 0 {
// CHECK-NEXT: exec.kernel "embedding" ins [@embed.weight, @tokens] outs [@embedding.0] params {vocab_parts = 2 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @embedding.0 -> @embedding.0
// CHECK-NEXT: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.up.weight] outs [@layers.0.linear.2] {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.linear.2, @layers.0.down.weight] outs [@layers.0.linear.3] {layer = 0 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @layers.0.linear.3 -> @layers.0.linear.3 {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "add" ins [@embedding.0, @layers.0.linear.3] outs [@layers.0.add.4] {layer = 0 : i64}
// The stage's output leaves as this tp rank's half of the sequence, and
// the next stage gathers the halves.
// CHECK-NEXT: exec.kernel "shard_slice" ins [@layers.0.add.4] outs [@layers.0.add.4.slice] params {dim = 1 : i64, group = "tp"}
// CHECK-NEXT: exec.send @layers.0.add.4.slice to next
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-LABEL: exec.program @rank1 pp_rank 1 {
// CHECK-NEXT: exec.buffer @labels : tensor<2x4xi32> labels
// CHECK-NEXT: exec.buffer @recv.0 : tensor<2x4x8xf32> activation
// CHECK-NEXT: exec.buffer @recv.0.slice : tensor<2x2x8xf32> activation
// CHECK: exec.buffer @loss.max : tensor<2x4xf32> activation
// CHECK-NEXT: exec.buffer @loss.stats : tensor<2x4x2xf32> activation
// CHECK-NEXT: exec.buffer @loss : tensor<f32> scalar
// CHECK: exec.phase forward chunk 1 {
// CHECK-NEXT: exec.recv @recv.0.slice from prev
// CHECK-NEXT: exec.collective all_gather "tp" @recv.0.slice -> @recv.0 dim 1
// CHECK-NEXT: exec.kernel "add" ins [@recv.0, @recv.0] outs [@layers.1.add.1] {layer = 1 : i64}
// The loss without gathering the logits: row maxima, then (sum of
// exponents, target logit), each reduced over tp; scaled by
// 1 / (2 micro-batches x 2 sequences x 4 tokens).
// CHECK: exec.kernel "linear" ins [@rms_norm.2, @lm_head.weight] outs [@lm_head.3]
// CHECK-NEXT: exec.kernel "ce_max" ins [@lm_head.3] outs [@loss.max] params {vocab_parts = 2 : i64, vocab_size = 16 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @loss.max -> @loss.max reduce max
// CHECK-NEXT: exec.kernel "ce_stats" ins [@lm_head.3, @loss.max, @labels] outs [@loss.stats] params {vocab_parts = 2 : i64, vocab_size = 16 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @loss.stats -> @loss.stats
// CHECK-NEXT: exec.kernel "ce_loss" ins [@loss.max, @loss.stats] outs [@loss] accumulate [true] params {scale = 6.250000e-02 : f64}
// CHECK-NEXT: }
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 2, pp = 2, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>} {
  tfm.model @tiny {
  ^bb0(%tokens: tensor<2x4xi32>, %labels: tensor<2x4xi32>):
    dist.stage chunk 0 rank 0 {
      %1 = tfm.param "embed.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<8x8xf32>
      %2 = dist.vocab_embedding %1, %tokens {axis = #dist.axis<tp>} : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
      %3 = dist.all_reduce %2 {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
      %4 = tfm.block 0 (%3) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      ^bb0(%h: tensor<2x4x8xf32>):
        %5 = tfm.param "layers.0.norm.weight" ones : tensor<8xf32>
        %6 = tfm.rms_norm %h, %5 {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
        %7 = tfm.param "layers.0.up.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<4x8xf32>
        %8 = tfm.linear %6, %7 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x4xf32>
        %9 = tfm.param "layers.0.down.weight" normal(1.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 1, parts = 2>} : tensor<8x4xf32>
        %10 = tfm.linear %8, %9 : tensor<2x4x4xf32>, tensor<8x4xf32> -> tensor<2x4x8xf32>
        %11 = dist.all_reduce %10 {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
        %12 = tfm.add %h, %11 : tensor<2x4x8xf32>
        tfm.yield %12 : tensor<2x4x8xf32>
      }
      dist.send %4 {peer = #dist.peer<next>} : tensor<2x4x8xf32>
      dist.stage_return
    }
    %0 = dist.stage chunk 1 rank 1 -> tensor<f32> {
      %r = dist.recv {peer = #dist.peer<prev>} : tensor<2x4x8xf32>
      %1 = tfm.block 1 (%r) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      ^bb0(%h: tensor<2x4x8xf32>):
        %7 = tfm.add %h, %h : tensor<2x4x8xf32>
        tfm.yield %7 : tensor<2x4x8xf32>
      }
      %2 = tfm.param "final_norm.weight" ones : tensor<8xf32>
      %3 = tfm.rms_norm %1, %2 {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
      %4 = tfm.param "lm_head.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<8x8xf32>
      %5 = tfm.lm_head %3, %4 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
      %6 = dist.vocab_cross_entropy %5, %labels {axis = #dist.axis<tp>} : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
      dist.stage_return %6 : tensor<f32>
    }
    tfm.yield %0 : tensor<f32>
  }
}

// -----

// Sequence parallelism (tp = 2, one stage): reduce-scatters and
// all-gathers keep their dim; a dist.async and its dist.wait become an
// async collective and an exec.wait on its output.
// CHECK: exec.kernel "embedding" ins [@embed.weight, @tokens] outs [@embedding.0] params {vocab_parts = 2 : i64}
// CHECK-NEXT: exec.collective reduce_scatter "tp" @embedding.0 -> @reduce_scatter.1 dim 1
// CHECK-NEXT: exec.kernel "rms_norm" ins [@reduce_scatter.1, @layers.0.norm.weight] outs [@layers.0.rms_norm.2]
// CHECK-NEXT: exec.collective all_gather "tp" @layers.0.rms_norm.2 -> @layers.0.all_gather.3 dim 1 async {layer = 0 : i64}
// CHECK-NEXT: exec.wait @layers.0.all_gather.3 {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.all_gather.3, @layers.0.up.weight] outs [@layers.0.linear.4]
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.linear.4, @layers.0.down.weight] outs [@layers.0.linear.5]
// CHECK-NEXT: exec.collective reduce_scatter "tp" @layers.0.linear.5 -> @layers.0.reduce_scatter.6 dim 1 {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "add" ins [@reduce_scatter.1, @layers.0.reduce_scatter.6] outs [@layers.0.add.7]
// CHECK-NEXT: exec.collective all_gather "tp" @layers.0.add.7 -> @all_gather.8 dim 1
// CHECK-NEXT: exec.kernel "linear" ins [@all_gather.8, @lm_head.weight] outs [@lm_head.9]
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 2, pp = 1, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 1, recompute = none, sequence_parallel = 1, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @tiny {
  ^bb0(%tokens: tensor<2x4xi32>, %labels: tensor<2x4xi32>):
    %0 = dist.stage chunk 0 rank 0 -> tensor<f32> {
      %1 = tfm.param "embed.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<8x8xf32>
      %2 = dist.vocab_embedding %1, %tokens {axis = #dist.axis<tp>} : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
      %3 = dist.reduce_scatter %2 {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
      %4 = tfm.block 0 (%3) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
      ^bb0(%h: tensor<2x2x8xf32>):
        %5 = tfm.param "layers.0.norm.weight" ones : tensor<8xf32>
        %6 = tfm.rms_norm %h, %5 {eps = 1.000000e-05 : f64} : tensor<2x2x8xf32>, tensor<8xf32> -> tensor<2x2x8xf32>
        %7 = dist.async {
          %20 = dist.all_gather %6 {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
          dist.yield %20 : tensor<2x4x8xf32>
        }
        %8 = tfm.param "layers.0.up.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<4x8xf32>
        %9 = dist.wait %7 : tensor<2x4x8xf32>
        %10 = tfm.linear %9, %8 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x4xf32>
        %11 = tfm.param "layers.0.down.weight" normal(1.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 1, parts = 2>} : tensor<8x4xf32>
        %12 = tfm.linear %10, %11 : tensor<2x4x4xf32>, tensor<8x4xf32> -> tensor<2x4x8xf32>
        %13 = dist.reduce_scatter %12 {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
        %14 = tfm.add %h, %13 : tensor<2x2x8xf32>
        tfm.yield %14 : tensor<2x2x8xf32>
      }
      %15 = dist.all_gather %4 {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
      %16 = tfm.param "lm_head.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<8x8xf32>
      %17 = tfm.lm_head %15, %16 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
      %18 = dist.vocab_cross_entropy %17, %labels {axis = #dist.axis<tp>} : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
      dist.stage_return %18 : tensor<f32>
    }
    tfm.yield %0 : tensor<f32>
  }
}
