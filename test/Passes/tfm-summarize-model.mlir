// RUN: plan-opt %s --tfm-summarize-model -o %t.mlir 2>&1 | FileCheck %s
// The pass leaves the IR unchanged.
// RUN: plan-opt %s -o %t.orig.mlir
// RUN: diff %t.orig.mlir %t.mlir

// A two-layer model with tied embeddings: 64x32 table (2048), per block one
// rms_norm weight (32) and a 32x32 linear (1024), a final norm (32).
// CHECK: model "tied": 2 blocks, hidden 32, 4 heads (4 kv), vocab 64, tied embeddings
// CHECK-NEXT: parameters        4,192 (4.19 K) in 6 tensors
// CHECK-NEXT:   in blocks       2,112
// CHECK-NEXT:   outside blocks  2,080 (embeddings, final norm, LM head)
// CHECK-NEXT: parameter memory  8.38 KB as bf16
// CHECK-NEXT: step              3 sequences x 16 tokens = 48 tokens
tfm.model @tied {
^bb0(%tokens: tensor<3x16xi32>, %labels: tensor<3x16xi32>):
  %wte = tfm.param "wte" normal(2.000000e-02) : tensor<64x32xbf16>
  %x = tfm.embedding %wte, %tokens : tensor<64x32xbf16>, tensor<3x16xi32> -> tensor<3x16x32xbf16>
  %y = tfm.block 0 (%x) : (tensor<3x16x32xbf16>) -> tensor<3x16x32xbf16> {
  ^bb0(%h: tensor<3x16x32xbf16>):
    %g = tfm.param "l0.norm" ones : tensor<32xbf16>
    %n = tfm.rms_norm %h, %g {eps = 1.000000e-05 : f64} : tensor<3x16x32xbf16>, tensor<32xbf16> -> tensor<3x16x32xbf16>
    %w = tfm.param "l0.w" normal(2.000000e-02) : tensor<32x32xbf16>
    %q = tfm.linear %n, %w : tensor<3x16x32xbf16>, tensor<32x32xbf16> -> tensor<3x16x32xbf16>
    %k = tfm.linear %n, %w : tensor<3x16x32xbf16>, tensor<32x32xbf16> -> tensor<3x16x32xbf16>
    %v = tfm.linear %n, %w : tensor<3x16x32xbf16>, tensor<32x32xbf16> -> tensor<3x16x32xbf16>
    %a = tfm.attention %q, %k, %v {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<3x16x32xbf16>, tensor<3x16x32xbf16>, tensor<3x16x32xbf16> -> tensor<3x16x32xbf16>
    %r = tfm.add %h, %a : tensor<3x16x32xbf16>
    tfm.yield %r : tensor<3x16x32xbf16>
  }
  %z = tfm.block 1 (%y) : (tensor<3x16x32xbf16>) -> tensor<3x16x32xbf16> {
  ^bb0(%h: tensor<3x16x32xbf16>):
    %g = tfm.param "l1.norm" ones : tensor<32xbf16>
    %n = tfm.rms_norm %h, %g {eps = 1.000000e-05 : f64} : tensor<3x16x32xbf16>, tensor<32xbf16> -> tensor<3x16x32xbf16>
    %w = tfm.param "l1.w" normal(2.000000e-02) : tensor<32x32xbf16>
    %o = tfm.linear %n, %w : tensor<3x16x32xbf16>, tensor<32x32xbf16> -> tensor<3x16x32xbf16>
    tfm.yield %o : tensor<3x16x32xbf16>
  }
  %fg = tfm.param "final" ones : tensor<32xbf16>
  %f = tfm.rms_norm %z, %fg {eps = 1.000000e-05 : f64} : tensor<3x16x32xbf16>, tensor<32xbf16> -> tensor<3x16x32xbf16>
  %logits = tfm.lm_head %f, %wte : tensor<3x16x32xbf16>, tensor<64x32xbf16> -> tensor<3x16x64xbf16>
  %loss = tfm.cross_entropy %logits, %labels : tensor<3x16x64xbf16>, tensor<3x16xi32> -> tensor<f32>
  tfm.yield %loss : tensor<f32>
}

// A second model in the same module is summarised too. The first attention
// op gives the head counts (GQA here).
// CHECK: model "second": 0 blocks, hidden 8, 2 heads (1 kv), vocab 16
// CHECK-NEXT: parameters        144 in 2 tensors
tfm.model @second {
^bb0(%tokens: tensor<1x4xi32>, %labels: tensor<1x4xi32>):
  %wte = tfm.param "wte" normal(2.000000e-02) : tensor<16x8xf32>
  %x = tfm.embedding %wte, %tokens : tensor<16x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
  %kv = tfm.param "kv" zeros : tensor<1x4x4xf32>
  %a = tfm.attention %x, %kv, %kv {causal, num_heads = 2 : i64, num_kv_heads = 1 : i64} : tensor<1x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32> -> tensor<1x4x8xf32>
  %logits = tfm.lm_head %a, %wte : tensor<1x4x8xf32>, tensor<16x8xf32> -> tensor<1x4x16xf32>
  %loss = tfm.cross_entropy %logits, %labels : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  tfm.yield %loss : tensor<f32>
}
