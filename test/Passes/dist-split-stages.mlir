// RUN: plan-opt %s -split-input-file --dist-split-stages | FileCheck %s

// pp=2, one block per stage, tied embeddings: the embedding table is copied
// into the last stage (both marked dist.tied); the residual stream crosses
// the cut by send/recv; the last stage returns the loss.
// CHECK-LABEL: tfm.model @tied
// CHECK: dist.stage chunk 0 rank 0 {
// CHECK: %[[T0:.*]] = tfm.param "embed.tokens.weight" {{.*}}{dist.tied} : tensor<64x16xf32>
// CHECK: tfm.embedding %[[T0]], %tokens
// CHECK: %[[B0:.*]] = tfm.block 0
// CHECK: dist.send %[[B0]] {peer = #dist.peer<next>} : tensor<2x4x16xf32>
// CHECK-NEXT: dist.stage_return
// CHECK: %[[LOSS:.*]] = dist.stage chunk 1 rank 1 -> tensor<f32> {
// CHECK: %[[R:.*]] = dist.recv {peer = #dist.peer<prev>} : tensor<2x4x16xf32>
// CHECK: %[[T1:.*]] = tfm.param "embed.tokens.weight" {{.*}}{dist.tied} : tensor<64x16xf32>
// CHECK: tfm.block 1 (%[[R]])
// CHECK: tfm.lm_head %{{.*}}, %[[T1]]
// CHECK: %[[L:.*]] = tfm.cross_entropy {{.*}}, %labels
// CHECK: dist.stage_return %[[L]] : tensor<f32>
// CHECK: tfm.yield %[[LOSS]] : tensor<f32>
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>} {
  tfm.model @tied {
  ^bb0(%tokens: tensor<2x4xi32>, %labels: tensor<2x4xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<64x16xf32>
    %1 = tfm.embedding %0, %tokens : tensor<64x16xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
    %2 = tfm.block 0 (%1) : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
    ^bb0(%h: tensor<2x4x16xf32>):
      %8 = tfm.param "layers.0.attn_norm.weight" ones : tensor<16xf32>
      %9 = tfm.rms_norm %h, %8 {eps = 1.000000e-05 : f64} : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
      %10 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %11 = tfm.linear %9, %10 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %12 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %13 = tfm.linear %9, %12 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %14 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %15 = tfm.linear %9, %14 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %16 = tfm.rotary %11 {num_heads = 2 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %17 = tfm.rotary %13 {num_heads = 2 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %18 = tfm.attention %16, %17, %15 {causal, num_heads = 2 : i64, num_kv_heads = 2 : i64} : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %19 = tfm.param "layers.0.attn.out.weight" normal(1.000000e-02) : tensor<16x16xf32>
      %20 = tfm.linear %18, %19 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %21 = tfm.add %h, %20 : tensor<2x4x16xf32>
      %22 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<16xf32>
      %23 = tfm.rms_norm %21, %22 {eps = 1.000000e-05 : f64} : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
      %24 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<32x16xf32>
      %25 = tfm.linear %23, %24 : tensor<2x4x16xf32>, tensor<32x16xf32> -> tensor<2x4x32xf32>
      %26 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<32x16xf32>
      %27 = tfm.linear %23, %26 : tensor<2x4x16xf32>, tensor<32x16xf32> -> tensor<2x4x32xf32>
      %28 = tfm.swiglu %25, %27 : tensor<2x4x32xf32>
      %29 = tfm.param "layers.0.mlp.down.weight" normal(1.000000e-02) : tensor<16x32xf32>
      %30 = tfm.linear %28, %29 : tensor<2x4x32xf32>, tensor<16x32xf32> -> tensor<2x4x16xf32>
      %31 = tfm.add %21, %30 : tensor<2x4x16xf32>
      tfm.yield %31 : tensor<2x4x16xf32>
    }
    %3 = tfm.block 1 (%2) : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
    ^bb0(%h: tensor<2x4x16xf32>):
      %8 = tfm.param "layers.1.attn_norm.weight" ones : tensor<16xf32>
      %9 = tfm.rms_norm %h, %8 {eps = 1.000000e-05 : f64} : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
      %10 = tfm.param "layers.1.attn.q.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %11 = tfm.linear %9, %10 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %12 = tfm.param "layers.1.attn.k.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %13 = tfm.linear %9, %12 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %14 = tfm.param "layers.1.attn.v.weight" normal(2.000000e-02) : tensor<16x16xf32>
      %15 = tfm.linear %9, %14 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %16 = tfm.rotary %11 {num_heads = 2 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %17 = tfm.rotary %13 {num_heads = 2 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %18 = tfm.attention %16, %17, %15 {causal, num_heads = 2 : i64, num_kv_heads = 2 : i64} : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
      %19 = tfm.param "layers.1.attn.out.weight" normal(1.000000e-02) : tensor<16x16xf32>
      %20 = tfm.linear %18, %19 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
      %21 = tfm.add %h, %20 : tensor<2x4x16xf32>
      %22 = tfm.param "layers.1.mlp_norm.weight" ones : tensor<16xf32>
      %23 = tfm.rms_norm %21, %22 {eps = 1.000000e-05 : f64} : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
      %24 = tfm.param "layers.1.mlp.gate.weight" normal(2.000000e-02) : tensor<32x16xf32>
      %25 = tfm.linear %23, %24 : tensor<2x4x16xf32>, tensor<32x16xf32> -> tensor<2x4x32xf32>
      %26 = tfm.param "layers.1.mlp.up.weight" normal(2.000000e-02) : tensor<32x16xf32>
      %27 = tfm.linear %23, %26 : tensor<2x4x16xf32>, tensor<32x16xf32> -> tensor<2x4x32xf32>
      %28 = tfm.swiglu %25, %27 : tensor<2x4x32xf32>
      %29 = tfm.param "layers.1.mlp.down.weight" normal(1.000000e-02) : tensor<16x32xf32>
      %30 = tfm.linear %28, %29 : tensor<2x4x32xf32>, tensor<16x32xf32> -> tensor<2x4x16xf32>
      %31 = tfm.add %21, %30 : tensor<2x4x16xf32>
      tfm.yield %31 : tensor<2x4x16xf32>
    }
    %4 = tfm.param "final_norm.weight" ones : tensor<16xf32>
    %5 = tfm.rms_norm %3, %4 {eps = 1.000000e-05 : f64} : tensor<2x4x16xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
    %6 = tfm.lm_head %5, %0 : tensor<2x4x16xf32>, tensor<64x16xf32> -> tensor<2x4x64xf32>
    %7 = tfm.cross_entropy %6, %labels : tensor<2x4x64xf32>, tensor<2x4xi32> -> tensor<f32>
    tfm.yield %7 : tensor<f32>
  }
}

// -----

// Interleaved: pp=2, vpp=2, four chunks of one block, alternating ranks.
// CHECK-LABEL: tfm.model @four
// CHECK: dist.stage chunk 0 rank 0 {
// CHECK: tfm.block 0
// CHECK: dist.stage chunk 1 rank 1 {
// CHECK: tfm.block 1
// CHECK: dist.stage chunk 2 rank 0 {
// CHECK: tfm.block 2
// CHECK: dist.stage chunk 3 rank 1 -> tensor<f32> {
// CHECK: tfm.block 3
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 2, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "interleaved", stage_layers = [1, 1, 1, 1]>} {
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

// An uneven cut: three blocks, then one, with the LM head.
// CHECK-LABEL: tfm.model @four
// CHECK: dist.stage chunk 0 rank 0 {
// CHECK: tfm.block 0
// CHECK: tfm.block 1
// CHECK: tfm.block 2
// CHECK: dist.stage chunk 1 rank 1 -> tensor<f32> {
// CHECK-NOT: tfm.block 2
// CHECK: tfm.block 3
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [3, 1]>} {
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
