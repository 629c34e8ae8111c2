// RUN: plan-opt %s -split-input-file --dist-partition-tensors | FileCheck %s

// tp=2, dp=2, mbs=1 on a one-layer model (4 heads, 2 kv heads, MLP 96,
// vocab 128): batch 4 -> 1; column-parallel q/k/v/gate/up split along the
// output, row-parallel out/down along the input and followed by exactly one
// all-reduce each; vocab-parallel embedding (+ all-reduce), head and loss.
// CHECK-LABEL: tfm.model @small
// CHECK: ^bb0(%tokens: tensor<1x8xi32>, %labels: tensor<1x8xi32>):
// CHECK: %[[TABLE:.*]] = tfm.param "embed.tokens.weight" {{.*}} {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<64x64xf32>
// CHECK: %[[PART:.*]] = dist.vocab_embedding %[[TABLE]], %tokens {axis = #dist.axis<tp>} : tensor<64x64xf32>, tensor<1x8xi32> -> tensor<1x8x64xf32>
// CHECK: dist.all_reduce %[[PART]] {axis = #dist.axis<tp>} : tensor<1x8x64xf32>
// CHECK: tfm.block 0
// CHECK: tfm.param "layers.0.attn.q.weight" {{.*}}parts = 2>} : tensor<32x64xf32>
// CHECK: tfm.param "layers.0.attn.k.weight" {{.*}}parts = 2>} : tensor<16x64xf32>
// CHECK: tfm.attention {{.*}} {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64} : tensor<1x8x32xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32> -> tensor<1x8x32xf32>
// CHECK: tfm.param "layers.0.attn.out.weight" {{.*}}dim = 1, parts = 2>} : tensor<64x32xf32>
// CHECK: %[[OUT:.*]] = tfm.linear {{.*}} : tensor<1x8x32xf32>, tensor<64x32xf32> -> tensor<1x8x64xf32>
// CHECK-NEXT: dist.all_reduce %[[OUT]] {axis = #dist.axis<tp>}
// CHECK-NOT: dist.all_reduce
// CHECK: tfm.swiglu {{.*}} : tensor<1x8x48xf32>
// CHECK: %[[DOWN:.*]] = tfm.linear {{.*}} : tensor<1x8x48xf32>, tensor<64x48xf32> -> tensor<1x8x64xf32>
// CHECK-NEXT: dist.all_reduce %[[DOWN]]
// CHECK-NOT: dist.all_reduce
// CHECK: tfm.yield
// CHECK: tfm.lm_head {{.*}} : tensor<1x8x64xf32>, tensor<64x64xf32> -> tensor<1x8x64xf32>
// CHECK: dist.vocab_cross_entropy {{.*}} {axis = #dist.axis<tp>} : tensor<1x8x64xf32>, tensor<1x8xi32> -> tensor<f32>
module attributes {dist.strategy = #dist.strategy<dp = 2, tp = 2, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
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

// tp=4 exceeds the 2 key/value heads: each rank keeps one kv head (the k
// and v weights cut in 2 parts, each held by 2 ranks) and one query head.
// CHECK-LABEL: tfm.model @small
// CHECK: tfm.param "layers.0.attn.q.weight" {{.*}}parts = 4>} : tensor<16x64xf32>
// CHECK: tfm.param "layers.0.attn.k.weight" {{.*}}parts = 2>} : tensor<16x64xf32>
// CHECK: tfm.param "layers.0.attn.v.weight" {{.*}}parts = 2>} : tensor<16x64xf32>
// CHECK: tfm.rotary {{.*}} {num_heads = 1 : i64
// CHECK: tfm.rotary {{.*}} {num_heads = 1 : i64
// CHECK: tfm.attention {{.*}} {causal, num_heads = 1 : i64, num_kv_heads = 1 : i64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 4, pp = 1, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
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

// tp=1: only the batch becomes the micro-batch (dp=4, mbs=1); no collective.
// CHECK-LABEL: tfm.model @small
// CHECK-NOT: dist.
// CHECK: tfm.cross_entropy {{.*}} : tensor<1x8x128xf32>, tensor<1x8xi32> -> tensor<f32>
module attributes {dist.strategy = #dist.strategy<dp = 4, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
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

// Sequence parallelism (tp=2): the residual stream holds half the
// sequence; one all-gather before the projections that share an input, a
// reduce-scatter after each row-parallel projection, and one more
// all-gather before the LM head.
// CHECK-LABEL: tfm.model @small
// CHECK: dist.vocab_embedding
// CHECK-NEXT: dist.reduce_scatter %{{.*}} {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<1x8x64xf32> -> tensor<1x4x64xf32>
// CHECK: tfm.rms_norm %h, {{.*}} -> tensor<1x4x64xf32>
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %{{.*}} {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<1x4x64xf32> -> tensor<1x8x64xf32>
// CHECK-COUNT-3: tfm.linear %[[G1]]
// CHECK: dist.reduce_scatter {{.*}} -> tensor<1x4x64xf32>
// CHECK: %[[G2:.*]] = dist.all_gather
// CHECK-COUNT-2: tfm.linear %[[G2]]
// CHECK: dist.reduce_scatter {{.*}} -> tensor<1x4x64xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: tfm.yield {{.*}} : tensor<1x4x64xf32>
// CHECK: %[[G3:.*]] = dist.all_gather
// CHECK-NEXT: tfm.param "lm_head.weight"
// CHECK-NEXT: tfm.lm_head %[[G3]]
module attributes {dist.strategy = #dist.strategy<dp = 2, tp = 2, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 1, schedule = "1f1b", stage_layers = [1]>} {
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

// Learned positions and biases (GPT, tied embeddings, tp=2 with sequence
// parallelism): the position table is added to the full sequence, which
// is then sliced without communication; row-parallel biases are added once,
// after the reduction.
// CHECK-LABEL: tfm.model @gpt
// CHECK: %[[WTE:.*]] = tfm.param "embed.tokens.weight" {{.*}}parts = 2>} : tensor<64x32xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce
// CHECK: %[[POS:.*]] = tfm.position_embedding %[[SUM]], {{.*}} -> tensor<1x8x32xf32>
// CHECK-NEXT: dist.shard_slice %[[POS]] {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<1x8x32xf32> -> tensor<1x4x32xf32>
// CHECK: tfm.param "layers.0.attn.q.bias" zeros {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<16xf32>
// CHECK: tfm.param "layers.0.attn.out.bias" zeros : tensor<32xf32>
// CHECK: %[[RS:.*]] = dist.reduce_scatter
// CHECK-NEXT: tfm.bias_add %[[RS]], {{.*}} : tensor<1x4x32xf32>, tensor<32xf32>
// CHECK: tfm.lm_head {{.*}}, %[[WTE]] : tensor<1x8x32xf32>, tensor<64x32xf32> -> tensor<1x8x64xf32>
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 2, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 1, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @gpt {
  ^bb0(%tokens: tensor<2x8xi32>, %labels: tensor<2x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<128x32xf32>
    %1 = tfm.embedding %0, %tokens : tensor<128x32xf32>, tensor<2x8xi32> -> tensor<2x8x32xf32>
    %2 = tfm.param "embed.positions.weight" normal(2.000000e-02) : tensor<16x32xf32>
    %3 = tfm.position_embedding %1, %2 : tensor<2x8x32xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
    %4 = tfm.block 0 (%3) : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
    ^bb0(%h: tensor<2x8x32xf32>):
      %10 = tfm.param "layers.0.attn_norm.weight" ones : tensor<32xf32>
      %11 = tfm.param "layers.0.attn_norm.bias" zeros : tensor<32xf32>
      %12 = tfm.layer_norm %h, %10, %11 {eps = 1.000000e-05 : f64} : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %13 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.param "layers.0.attn.q.bias" zeros : tensor<32xf32>
      %15 = tfm.linear %12, %13, %14 : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %16 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %17 = tfm.param "layers.0.attn.k.bias" zeros : tensor<32xf32>
      %18 = tfm.linear %12, %16, %17 : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %19 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %20 = tfm.param "layers.0.attn.v.bias" zeros : tensor<32xf32>
      %21 = tfm.linear %12, %19, %20 : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %22 = tfm.attention %15, %18, %21 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32> -> tensor<2x8x32xf32>
      %23 = tfm.param "layers.0.attn.out.weight" normal(0.014142135623730949) : tensor<32x32xf32>
      %24 = tfm.param "layers.0.attn.out.bias" zeros : tensor<32xf32>
      %25 = tfm.linear %22, %23, %24 : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %26 = tfm.add %h, %25 : tensor<2x8x32xf32>
      %27 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<32xf32>
      %28 = tfm.param "layers.0.mlp_norm.bias" zeros : tensor<32xf32>
      %29 = tfm.layer_norm %26, %27, %28 {eps = 1.000000e-05 : f64} : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %30 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %31 = tfm.param "layers.0.mlp.up.bias" zeros : tensor<64xf32>
      %32 = tfm.linear %29, %30, %31 : tensor<2x8x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<2x8x64xf32>
      %33 = tfm.gelu %32 {approximate = #tfm.gelu_approximation<tanh>} : tensor<2x8x64xf32>
      %34 = tfm.param "layers.0.mlp.down.weight" normal(0.014142135623730949) : tensor<32x64xf32>
      %35 = tfm.param "layers.0.mlp.down.bias" zeros : tensor<32xf32>
      %36 = tfm.linear %33, %34, %35 : tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %37 = tfm.add %26, %36 : tensor<2x8x32xf32>
      tfm.yield %37 : tensor<2x8x32xf32>
    }
    %5 = tfm.param "final_norm.weight" ones : tensor<32xf32>
    %6 = tfm.param "final_norm.bias" zeros : tensor<32xf32>
    %7 = tfm.layer_norm %4, %5, %6 {eps = 1.000000e-05 : f64} : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
    %8 = tfm.lm_head %7, %0 : tensor<2x8x32xf32>, tensor<128x32xf32> -> tensor<2x8x128xf32>
    %9 = tfm.cross_entropy %8, %labels : tensor<2x8x128xf32>, tensor<2x8xi32> -> tensor<f32>
    tfm.yield %9 : tensor<f32>
  }
}

// -----

// A vocabulary of 130 on tp=4 is padded to 132: 33 rows per rank, the
// padding recorded on the (tied) table and ignored by the loss.
// CHECK-LABEL: tfm.model @odd
// CHECK: %[[T:.*]] = tfm.param "embed.tokens.weight" {{.*}} {dist.padded_from = 130 : i64, dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 4>} : tensor<33x32xf32>
// CHECK: tfm.lm_head %{{.*}}, %[[T]] : tensor<1x8x32xf32>, tensor<33x32xf32> -> tensor<1x8x33xf32>
// CHECK: dist.vocab_cross_entropy {{.*}} {axis = #dist.axis<tp>, vocab_size = 130 : i64} : tensor<1x8x33xf32>, tensor<1x8xi32> -> tensor<f32>
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 4, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>} {
  tfm.model @odd {
  ^bb0(%tokens: tensor<4x8xi32>, %labels: tensor<4x8xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<130x32xf32>
    %1 = tfm.embedding %0, %tokens : tensor<130x32xf32>, tensor<4x8xi32> -> tensor<4x8x32xf32>
    %2 = tfm.block 0 (%1) : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32> {
    ^bb0(%h: tensor<4x8x32xf32>):
      %7 = tfm.param "layers.0.attn_norm.weight" ones : tensor<32xf32>
      %8 = tfm.rms_norm %h, %7 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %9 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %10 = tfm.linear %8, %9 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %11 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %12 = tfm.linear %8, %11 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %13 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x32xf32>
      %14 = tfm.linear %8, %13 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %15 = tfm.rotary %10 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %16 = tfm.rotary %12 {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64} : tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %17 = tfm.attention %15, %16, %14 {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x8x32xf32>, tensor<4x8x32xf32>, tensor<4x8x32xf32> -> tensor<4x8x32xf32>
      %18 = tfm.param "layers.0.attn.out.weight" normal(0.014142135623730949) : tensor<32x32xf32>
      %19 = tfm.linear %17, %18 : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
      %20 = tfm.add %h, %19 : tensor<4x8x32xf32>
      %21 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<32xf32>
      %22 = tfm.rms_norm %20, %21 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
      %23 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %24 = tfm.linear %22, %23 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %25 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<64x32xf32>
      %26 = tfm.linear %22, %25 : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
      %27 = tfm.swiglu %24, %26 : tensor<4x8x64xf32>
      %28 = tfm.param "layers.0.mlp.down.weight" normal(0.014142135623730949) : tensor<32x64xf32>
      %29 = tfm.linear %27, %28 : tensor<4x8x64xf32>, tensor<32x64xf32> -> tensor<4x8x32xf32>
      %30 = tfm.add %20, %29 : tensor<4x8x32xf32>
      tfm.yield %30 : tensor<4x8x32xf32>
    }
    %3 = tfm.param "final_norm.weight" ones : tensor<32xf32>
    %4 = tfm.rms_norm %2, %3 {eps = 1.000000e-05 : f64} : tensor<4x8x32xf32>, tensor<32xf32> -> tensor<4x8x32xf32>
    %5 = tfm.lm_head %4, %0 : tensor<4x8x32xf32>, tensor<130x32xf32> -> tensor<4x8x130xf32>
    %6 = tfm.cross_entropy %5, %labels : tensor<4x8x130xf32>, tensor<4x8xi32> -> tensor<f32>
    tfm.yield %6 : tensor<f32>
  }
}
