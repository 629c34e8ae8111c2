// Inputs dist-lower-to-exec rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --dist-lower-to-exec -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: dist-lower-to-exec needs the module's dist.strategy
module {
  tfm.model @m {
  ^bb0(%tokens: tensor<1x8xi32>, %labels: tensor<1x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<16x8xf32>
    %1 = tfm.embedding %0, %tokens : tensor<16x8xf32>, tensor<1x8xi32> -> tensor<1x8x8xf32>
    %b = tfm.block 0 (%1) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32> {
    ^bb0(%h: tensor<1x8x8xf32>):
      %g = tfm.gelu %h : tensor<1x8x8xf32>
      tfm.yield %g : tensor<1x8x8xf32>
    }
    %2 = tfm.lm_head %b, %0 : tensor<1x8x8xf32>, tensor<16x8xf32> -> tensor<1x8x16xf32>
    %3 = tfm.cross_entropy %2, %labels : tensor<1x8x16xf32>, tensor<1x8xi32> -> tensor<f32>
    tfm.yield %3 : tensor<f32>
  }
}

// -----

// CHECK: [[# @LINE + 4]]:10: error: 'tfm.param' op is outside every dist.stage; run dist-split-stages before dist-lower-to-exec
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @m {
  ^bb0(%tokens: tensor<1x8xi32>, %labels: tensor<1x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<16x8xf32>
    %1 = tfm.embedding %0, %tokens : tensor<16x8xf32>, tensor<1x8xi32> -> tensor<1x8x8xf32>
    %b = tfm.block 0 (%1) : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32> {
    ^bb0(%h: tensor<1x8x8xf32>):
      %g = tfm.gelu %h : tensor<1x8x8xf32>
      tfm.yield %g : tensor<1x8x8xf32>
    }
    %2 = tfm.lm_head %b, %0 : tensor<1x8x8xf32>, tensor<16x8xf32> -> tensor<1x8x16xf32>
    %3 = tfm.cross_entropy %2, %labels : tensor<1x8x16xf32>, tensor<1x8xi32> -> tensor<f32>
    tfm.yield %3 : tensor<f32>
  }
}

// -----

// CHECK: error: dist-lower-to-exec needs exactly one tfm.model, found 0
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
}
