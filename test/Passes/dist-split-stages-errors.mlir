// Inputs dist-split-stages rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --dist-split-stages -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: 'tfm.model' op the strategy's stage_layers cover 3 layers but the model has 4
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [2, 1]>} {
  tfm.model @four {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x32xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x32xf32>, tensor<4x8xi32> -> tensor<4x8x32xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.0.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.0.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.0.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %3 = tfm.block 1 (%2) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.1.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.1.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.1.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.1.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.1.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.1.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.1.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.1.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.1.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %4 = tfm.block 2 (%3) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.2.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.2.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.2.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.2.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.2.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.2.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.2.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.2.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.2.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %5 = tfm.block 3 (%4) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.3.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.3.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.3.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.3.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.3.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.3.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.3.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.3.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.3.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %6 = tfm.param "final_norm.weight" ones : tensor<32xf32>
    %7 = tfm.rms_norm %5, %6 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
    %8 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<128x32xf32>
    %9 = tfm.lm_head %7, %8 : tensor<4x8x32xf32>, tensor<128x32xf32> -> tensor<4x8x128xf32>
    %10 = tfm.cross_entropy %9, %labels : tensor<4x8x128xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %10 : tensor<f32>
  }
}

// -----

// CHECK: error: dist-split-stages needs the module's dist.strategy
module {
  tfm.model @four {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x32xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x32xf32>, tensor<4x8xi32> -> tensor<4x8x32xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.0.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.0.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.0.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %3 = tfm.block 1 (%2) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.1.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.1.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.1.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.1.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.1.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.1.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.1.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.1.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.1.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %4 = tfm.block 2 (%3) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.2.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.2.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.2.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.2.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.2.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.2.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.2.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.2.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.2.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %5 = tfm.block 3 (%4) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %11 = tfm.param "layers.3.attn_norm.weight" ones : tensor<32xf32>
      %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.3.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %12, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.param "layers.3.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %16 = tfm.linear %12, %15 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.param "layers.3.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %18 = tfm.linear %12, %17 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %19 = tfm.rotary %14 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.rotary %16 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %21 = tfm.attention %19, %20, %18 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %22 = tfm.param "layers.3.attn.out.weight" normal(0.0070710678118654745) : tensor<32x32xf32>
      %23 = tfm.linear %21, %22 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %24 = tfm.add %h, %23 : tensor<4x8x32xf32>
      %25 = tfm.param "layers.3.mlp_norm.weight" ones : tensor<32xf32>
      %26 = tfm.rms_norm %24, %25 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %27 = tfm.param "layers.3.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %28 = tfm.linear %26, %27 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %29 = tfm.param "layers.3.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %30 = tfm.linear %26, %29 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %31 = tfm.swiglu %28, %30 : tensor<4x8x64xf32>
      %32 = tfm.param "layers.3.mlp.down.weight" normal(0.0070710678118654745) : tensor<32x64xf32>
      %33 = tfm.linear %31, %32 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %34 = tfm.add %24, %33 : tensor<4x8x32xf32>
      tfm.yield %34 : tensor<4x8x32xf32>
    }
    %6 = tfm.param "final_norm.weight" ones : tensor<32xf32>
    %7 = tfm.rms_norm %5, %6 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
    %8 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<128x32xf32>
    %9 = tfm.lm_head %7, %8 : tensor<4x8x32xf32>, tensor<128x32xf32> -> tensor<4x8x128xf32>
    %10 = tfm.cross_entropy %9, %labels : tensor<4x8x128xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %10 : tensor<f32>
  }
}
