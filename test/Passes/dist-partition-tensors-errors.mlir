// Inputs dist-partition-tensors rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --dist-partition-tensors -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: dist-partition-tensors needs the module's dist.strategy: run dist-search-strategy first (or plan-opt --strategy=...)
module {
  tfm.model @small {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x64xf32>, tensor<4x8xi32> -> tensor<4x8x64xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
    ^bb0(%h: tensor<4x8x64xf32>):
      %8 = tfm.param "layers.0.attn_norm.weight" ones : tensor<64xf32>
      %9 = tfm.rms_norm %h, %8 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %10 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<64x64xf32>
      %11 = tfm.linear %9, %10 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %12 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %13 = tfm.linear %9, %12 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %14 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %15 = tfm.linear %9, %14 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %16 = tfm.rotary %11 {num_heads = 4 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x64xf32> -> tensor<4x8x64xf32>
      %17 = tfm.rotary %13 {num_heads = 2 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %18 = tfm.attention %16, %17, %15 {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<4x8x64xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x64xf32>
      %19 = tfm.param "layers.0.attn.out.weight" normal(0.014142135623730949) : tensor<64x64xf32>
      %20 = tfm.linear %18, %19 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %21 = tfm.add %h, %20 : tensor<4x8x64xf32>
      %22 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<64xf32>
      %23 = tfm.rms_norm %21, %22 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %24 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %25 = tfm.linear %23, %24 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %26 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %27 = tfm.linear %23, %26 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %28 = tfm.swiglu %25, %27 : tensor<4x8x96xf32>
      %29 = tfm.param "layers.0.mlp.down.weight" normal(0.014142135623730949) : tensor<64x96xf32>
      %30 = tfm.linear %28, %29 : tensor<4x8x96xf32>, tensor<64x96xf32> -> tensor<4x8x64xf32>
      %31 = tfm.add %21, %30 : tensor<4x8x64xf32>
      tfm.yield %31 : tensor<4x8x64xf32>
    }
    %3 = tfm.param "final_norm.weight" ones : tensor<64xf32>
    %4 = tfm.rms_norm %2, %3 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
    %5 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %6 = tfm.lm_head %4, %5 : tensor<4x8x64xf32>, tensor<128x64xf32> -> tensor<4x8x128xf32>
    %7 = tfm.cross_entropy %6, %labels : tensor<4x8x128xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %7 : tensor<f32>
  }
}

// -----

// CHECK: error: 'tfm.attention' op tp=8 does not divide the 4 heads
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 8, pp = 1, vpp = 1, zero = 0, micro_batch_size = 4, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @small {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x64xf32>, tensor<4x8xi32> -> tensor<4x8x64xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
    ^bb0(%h: tensor<4x8x64xf32>):
      %8 = tfm.param "layers.0.attn_norm.weight" ones : tensor<64xf32>
      %9 = tfm.rms_norm %h, %8 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %10 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<64x64xf32>
      %11 = tfm.linear %9, %10 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %12 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %13 = tfm.linear %9, %12 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %14 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %15 = tfm.linear %9, %14 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %16 = tfm.rotary %11 {num_heads = 4 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x64xf32> -> tensor<4x8x64xf32>
      %17 = tfm.rotary %13 {num_heads = 2 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %18 = tfm.attention %16, %17, %15 {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<4x8x64xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x64xf32>
      %19 = tfm.param "layers.0.attn.out.weight" normal(0.014142135623730949) : tensor<64x64xf32>
      %20 = tfm.linear %18, %19 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %21 = tfm.add %h, %20 : tensor<4x8x64xf32>
      %22 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<64xf32>
      %23 = tfm.rms_norm %21, %22 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %24 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %25 = tfm.linear %23, %24 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %26 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %27 = tfm.linear %23, %26 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %28 = tfm.swiglu %25, %27 : tensor<4x8x96xf32>
      %29 = tfm.param "layers.0.mlp.down.weight" normal(0.014142135623730949) : tensor<64x96xf32>
      %30 = tfm.linear %28, %29 : tensor<4x8x96xf32>, tensor<64x96xf32> -> tensor<4x8x64xf32>
      %31 = tfm.add %21, %30 : tensor<4x8x64xf32>
      tfm.yield %31 : tensor<4x8x64xf32>
    }
    %3 = tfm.param "final_norm.weight" ones : tensor<64xf32>
    %4 = tfm.rms_norm %2, %3 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
    %5 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %6 = tfm.lm_head %4, %5 : tensor<4x8x64xf32>, tensor<128x64xf32> -> tensor<4x8x128xf32>
    %7 = tfm.cross_entropy %6, %labels : tensor<4x8x128xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %7 : tensor<f32>
  }
}

// -----

// CHECK: error: 'tfm.model' op micro-batch size 3 does not divide the batch of 'tensor<4x8xi32>'
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 3, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @small {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x64xf32>, tensor<4x8xi32> -> tensor<4x8x64xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
    ^bb0(%h: tensor<4x8x64xf32>):
      %8 = tfm.param "layers.0.attn_norm.weight" ones : tensor<64xf32>
      %9 = tfm.rms_norm %h, %8 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %10 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<64x64xf32>
      %11 = tfm.linear %9, %10 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %12 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %13 = tfm.linear %9, %12 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %14 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %15 = tfm.linear %9, %14 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %16 = tfm.rotary %11 {num_heads = 4 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x64xf32> -> tensor<4x8x64xf32>
      %17 = tfm.rotary %13 {num_heads = 2 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %18 = tfm.attention %16, %17, %15 {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<4x8x64xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x64xf32>
      %19 = tfm.param "layers.0.attn.out.weight" normal(0.014142135623730949) : tensor<64x64xf32>
      %20 = tfm.linear %18, %19 : tensor<4x8x64xf32>, tensor<64x64xf32> -> tensor<4x8x64xf32>
      %21 = tfm.add %h, %20 : tensor<4x8x64xf32>
      %22 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<64xf32>
      %23 = tfm.rms_norm %21, %22 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
      %24 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %25 = tfm.linear %23, %24 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %26 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<96x64xf32>
      %27 = tfm.linear %23, %26 : tensor<4x8x64xf32>, tensor<96x64xf32> -> tensor<4x8x96xf32>
      %28 = tfm.swiglu %25, %27 : tensor<4x8x96xf32>
      %29 = tfm.param "layers.0.mlp.down.weight" normal(0.014142135623730949) : tensor<64x96xf32>
      %30 = tfm.linear %28, %29 : tensor<4x8x96xf32>, tensor<64x96xf32> -> tensor<4x8x64xf32>
      %31 = tfm.add %21, %30 : tensor<4x8x64xf32>
      tfm.yield %31 : tensor<4x8x64xf32>
    }
    %3 = tfm.param "final_norm.weight" ones : tensor<64xf32>
    %4 = tfm.rms_norm %2, %3 {eps = 1.000000e-05 : f64} : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
    %5 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<128x64xf32>
    %6 = tfm.lm_head %4, %5 : tensor<4x8x64xf32>, tensor<128x64xf32> -> tensor<4x8x128xf32>
    %7 = tfm.cross_entropy %6, %labels : tensor<4x8x128xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %7 : tensor<f32>
  }
}
