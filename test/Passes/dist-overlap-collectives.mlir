// dist-overlap-collectives on a small two-block model (tp = 2): a parallel
// residual block, whose attention all-reduce overlaps the MLP, and a
// sequential one, which has nothing to overlap and keeps its order. Whole
// models through the pipeline are in
// test/Tools/pipeline-dist-overlap-collectives.mlir.
// RUN: plan-opt %s --dist-overlap-collectives 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.err
// RUN: plan-opt %s --pass-pipeline='builtin.module(dist-overlap-collectives{quiet},dist-lower-to-exec)' | FileCheck %s --check-prefix=EXEC

// Both norms read only the block's input and go first; the attention's
// output all-reduce starts as soon as its input exists, the MLP runs while
// it is in flight, and the wait comes right before the add that reads it.
// The MLP's all-reduce is read at once and stays synchronous.
// CHECK-LABEL: tfm.block 0
// CHECK: %[[N1:.*]] = tfm.rms_norm %h,
// CHECK-NOT: tfm.linear
// CHECK: %[[N2:.*]] = tfm.rms_norm %h,
// CHECK: %[[IN:.*]] = tfm.linear %[[N1]],
// CHECK-NEXT: %[[OUT:.*]] = tfm.linear %[[IN]],
// CHECK-NEXT: %[[T:.*]] = dist.async {
// CHECK-NEXT: %[[S:.*]] = dist.all_reduce %[[OUT]] {axis = #dist.axis<tp>}
// CHECK-NEXT: dist.yield %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[UP:.*]] = tfm.linear %[[N2]],
// CHECK-NEXT: %[[DOWN:.*]] = tfm.linear %[[UP]],
// CHECK-NEXT: %[[MLP:.*]] = dist.all_reduce %[[DOWN]]
// CHECK-NEXT: %[[W:.*]] = dist.wait %[[T]]
// CHECK-NEXT: tfm.add %h, %[[W]], %[[MLP]]
// CHECK-NEXT: tfm.yield
// CHECK-LABEL: tfm.block 1
// CHECK-NOT: dist.async
// CHECK: dist.all_reduce
// CHECK-NEXT: tfm.add
// CHECK-NEXT: tfm.yield

// REPORT: overlap in forward: tp 1 of 3 async (2 not: nothing independent of its result runs while it is in flight)

// Lowered, the pair is an async collective and a wait.
// EXEC: exec.collective all_reduce "tp" @[[OUT:layers.0.linear.[0-9]+]] -> @[[OUT]] async {layer = 0 : i64}
// EXEC-NEXT: exec.kernel "linear"
// EXEC-NEXT: exec.kernel "linear"
// EXEC-NEXT: exec.collective all_reduce "tp"
// EXEC-NEXT: exec.wait @[[OUT]]
// EXEC-NEXT: exec.kernel "add"
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 2, pp = 1, vpp = 1, zero = 0, micro_batch_size = 2, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [2]>} {
  tfm.model @tiny {
  ^bb0(%tokens: tensor<2x4xi32>, %labels: tensor<2x4xi32>):
    %0 = dist.stage chunk 0 rank 0 -> tensor<f32> {
      %1 = tfm.param "embed.weight" normal(2.000000e-02) : tensor<16x8xf32>
      %2 = tfm.embedding %1, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
      %3 = tfm.block 0 (%2) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      ^bb0(%h: tensor<2x4x8xf32>):
        %4 = tfm.param "layers.0.attn_norm.weight" ones : tensor<8xf32>
        %5 = tfm.rms_norm %h, %4 {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
        %6 = tfm.param "layers.0.attn.in.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<4x8xf32>
        %7 = tfm.linear %5, %6 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x4xf32>
        %8 = tfm.param "layers.0.attn.out.weight" normal(1.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 1, parts = 2>} : tensor<8x4xf32>
        %9 = tfm.linear %7, %8 : tensor<2x4x4xf32>, tensor<8x4xf32> -> tensor<2x4x8xf32>
        %10 = dist.all_reduce %9 {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
        %11 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<8xf32>
        %12 = tfm.rms_norm %h, %11 {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
        %13 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<4x8xf32>
        %14 = tfm.linear %12, %13 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x4xf32>
        %15 = tfm.param "layers.0.mlp.down.weight" normal(1.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 1, parts = 2>} : tensor<8x4xf32>
        %16 = tfm.linear %14, %15 : tensor<2x4x4xf32>, tensor<8x4xf32> -> tensor<2x4x8xf32>
        %17 = dist.all_reduce %16 {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
        %18 = tfm.add %h, %10, %17 : tensor<2x4x8xf32>
        tfm.yield %18 : tensor<2x4x8xf32>
      }
      %20 = tfm.block 1 (%3) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
      ^bb0(%h: tensor<2x4x8xf32>):
        %21 = tfm.param "layers.1.norm.weight" ones : tensor<8xf32>
        %22 = tfm.rms_norm %h, %21 {eps = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
        %23 = tfm.param "layers.1.up.weight" normal(2.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<4x8xf32>
        %24 = tfm.linear %22, %23 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x4xf32>
        %25 = tfm.param "layers.1.down.weight" normal(1.000000e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 1, parts = 2>} : tensor<8x4xf32>
        %26 = tfm.linear %24, %25 : tensor<2x4x4xf32>, tensor<8x4xf32> -> tensor<2x4x8xf32>
        %27 = dist.all_reduce %26 {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
        %28 = tfm.add %h, %27 : tensor<2x4x8xf32>
        tfm.yield %28 : tensor<2x4x8xf32>
      }
      %30 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<16x8xf32>
      %31 = tfm.lm_head %20, %30 : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
      %32 = tfm.cross_entropy %31, %labels : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
      dist.stage_return %32 : tensor<f32>
    }
    tfm.yield %0 : tensor<f32>
  }
}
