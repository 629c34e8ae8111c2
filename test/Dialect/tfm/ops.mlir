// Round-trip of every tfm op, through the custom and the generic forms.
// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s
// RUN: plan-opt %s --verify-roundtrip -o /dev/null

// CHECK-LABEL: tfm.model @tiny
tfm.model @tiny {
^bb0(%tokens: tensor<2x16xi32>, %labels: tensor<2x16xi32>):
  // CHECK: %[[WTE:.*]] = tfm.param "wte" normal(2.000000e-02) : tensor<64x32xbf16>
  %wte = tfm.param "wte" normal(2.000000e-02) : tensor<64x32xbf16>
  // CHECK: %[[X:.*]] = tfm.embedding %[[WTE]], %tokens : tensor<64x32xbf16>, tensor<2x16xi32> -> tensor<2x16x32xbf16>
  %x = tfm.embedding %wte, %tokens : tensor<64x32xbf16>, tensor<2x16xi32> -> tensor<2x16x32xbf16>
  // CHECK: tfm.embedding %[[WTE]], %tokens {scale = 5.6568542494923806 : f64} : tensor<64x32xbf16>, tensor<2x16xi32> -> tensor<2x16x32xbf16>
  %xs = tfm.embedding %wte, %tokens {scale = 5.6568542494923806 : f64} : tensor<64x32xbf16>, tensor<2x16xi32> -> tensor<2x16x32xbf16>
  %wpe = tfm.param "wpe" normal(1.000000e-02) : tensor<32x32xbf16>
  // CHECK: tfm.position_embedding %[[X]], %{{.*}} : tensor<2x16x32xbf16>, tensor<32x32xbf16> -> tensor<2x16x32xbf16>
  %xp = tfm.position_embedding %x, %wpe : tensor<2x16x32xbf16>, tensor<32x32xbf16> -> tensor<2x16x32xbf16>
  // CHECK: tfm.block 0 (%{{.*}}) : (tensor<2x16x32xbf16>) -> tensor<2x16x32xbf16> {
  // CHECK-NEXT: ^bb0(%h: tensor<2x16x32xbf16>):
  %y = tfm.block 0 (%xp) : (tensor<2x16x32xbf16>) -> tensor<2x16x32xbf16> {
  ^bb0(%h: tensor<2x16x32xbf16>):
    // CHECK: tfm.param "l0.ln.w" ones : tensor<32xbf16>
    %g = tfm.param "l0.ln.w" ones : tensor<32xbf16>
    // CHECK: tfm.param "l0.ln.b" zeros : tensor<32xbf16>
    %b = tfm.param "l0.ln.b" zeros : tensor<32xbf16>
    // CHECK: tfm.layer_norm %h, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %n = tfm.layer_norm %h, %g, %b {eps = 1.000000e-05 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.layer_norm %h, %{{.*}} {eps = 1.000000e-05 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %n2 = tfm.layer_norm %h, %g {eps = 1.000000e-05 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.rms_norm %h, %{{.*}} {eps = 9.9999999999999995E-7 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %r = tfm.rms_norm %h, %g {eps = 1.000000e-06 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.rms_norm %h, %{{.*}} {eps = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %ro = tfm.rms_norm %h, %b {eps = 1.000000e-06 : f64, weight_offset = 1.0 : f64} : tensor<2x16x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %wq = tfm.param "l0.q.w" normal(2.000000e-02) : tensor<32x32xbf16>
    %bq = tfm.param "l0.q.b" zeros : tensor<32xbf16>
    // CHECK: %[[Q:.*]] = tfm.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>, tensor<32x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %q = tfm.linear %n, %wq, %bq : tensor<2x16x32xbf16>, tensor<32x32xbf16>, tensor<32xbf16> -> tensor<2x16x32xbf16>
    %wk = tfm.param "l0.k.w" normal(2.000000e-02) : tensor<8x32xbf16>
    // CHECK: %[[K:.*]] = tfm.linear %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>, tensor<8x32xbf16> -> tensor<2x16x8xbf16>
    %k = tfm.linear %n, %wk : tensor<2x16x32xbf16>, tensor<8x32xbf16> -> tensor<2x16x8xbf16>
    %v = tfm.linear %n, %wk : tensor<2x16x32xbf16>, tensor<8x32xbf16> -> tensor<2x16x8xbf16>
    // CHECK: tfm.rotary %[[Q]] {num_heads = 4 : i64, rotary_dim = 8 : i64, scaling = #tfm.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_positions = 8192>, theta = 5.000000e+05 : f64}
    %qr = tfm.rotary %q {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 5.000000e+05 : f64, scaling = #tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_positions = 8192>} : tensor<2x16x32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.rotary %[[K]] {num_heads = 1 : i64, rotary_dim = 2 : i64, scaling = #tfm.rope_scaling<linear, factor = 2.000000e+00>, theta = 1.000000e+04 : f64}
    %kr = tfm.rotary %k {num_heads = 1 : i64, rotary_dim = 2 : i64, theta = 1.000000e+04 : f64, scaling = #tfm.rope_scaling<linear, factor = 2.0>} : tensor<2x16x8xbf16> -> tensor<2x16x8xbf16>
    // CHECK: tfm.rotary %[[Q]] {num_heads = 4 : i64, rotary_dim = 8 : i64, scaling = #tfm.rope_scaling<yarn, factor = 4.000000e+00, original_max_positions = 64, beta_fast = 3.200000e+01, beta_slow = 1.000000e+00, truncate = false, attention_factor = 1.250000e+00>, theta = 1.000000e+04 : f64}
    %qy = tfm.rotary %q {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 64, truncate = false, attention_factor = 1.25>} : tensor<2x16x32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.rotary %[[Q]] {num_heads = 4 : i64, rotary_dim = 8 : i64, scaling = #tfm.rope_scaling<dynamic, factor = 2.000000e+00, original_max_positions = 8>, theta = 1.000000e+04 : f64}
    %qd = tfm.rotary %q {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64, scaling = #tfm.rope_scaling<dynamic, factor = 2.0, original_max_positions = 8>} : tensor<2x16x32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.rotary %[[Q]] {num_heads = 4 : i64, rotary_dim = 6 : i64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 8, attention_factor = 1.000000e+00, short_factor = [1.000000e+00, 1.500000e+00, 2.000000e+00], long_factor = [2.000000e+00, 3.000000e+00, 4.000000e+00]>, theta = 1.000000e+04 : f64}
    %ql = tfm.rotary %q {num_heads = 4 : i64, rotary_dim = 6 : i64, theta = 1.000000e+04 : f64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 8, short_factor = [1.0, 1.5, 2.0], long_factor = [2.0, 3.0, 4.0]>} : tensor<2x16x32xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 1 : i64, window = 8 : i64} : tensor<2x16x32xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16> -> tensor<2x16x32xbf16>
    %a = tfm.attention %qr, %kr, %v {causal, num_heads = 4 : i64, num_kv_heads = 1 : i64, window = 8 : i64} : tensor<2x16x32xbf16>, tensor<2x16x8xbf16>, tensor<2x16x8xbf16> -> tensor<2x16x32xbf16>
    // CHECK: tfm.gelu %{{.*}} : tensor<2x16x32xbf16>
    %ge = tfm.gelu %a : tensor<2x16x32xbf16>
    // CHECK: tfm.gelu %{{.*}} {approximate = #tfm.gelu_approximation<tanh>} : tensor<2x16x32xbf16>
    %gt = tfm.gelu %ge {approximate = #tfm.gelu_approximation<tanh>} : tensor<2x16x32xbf16>
    // CHECK: tfm.silu %{{.*}} : tensor<2x16x32xbf16>
    %s = tfm.silu %gt : tensor<2x16x32xbf16>
    // CHECK: tfm.swiglu %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>
    %sw = tfm.swiglu %s, %r : tensor<2x16x32xbf16>
    // CHECK: tfm.geglu %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>
    %gg = tfm.geglu %sw, %ro : tensor<2x16x32xbf16>
    // CHECK: tfm.geglu %{{.*}}, %{{.*}} {approximate = #tfm.gelu_approximation<tanh>} : tensor<2x16x32xbf16>
    %ggt = tfm.geglu %gg, %h {approximate = #tfm.gelu_approximation<tanh>} : tensor<2x16x32xbf16>
    // CHECK: tfm.bias_add %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>, tensor<32xbf16>
    %ba = tfm.bias_add %ggt, %bq : tensor<2x16x32xbf16>, tensor<32xbf16>
    // CHECK: tfm.add %h, %{{.*}}, %{{.*}} : tensor<2x16x32xbf16>
    %sum = tfm.add %h, %ba, %n2 : tensor<2x16x32xbf16>
    // CHECK: tfm.yield %{{.*}} : tensor<2x16x32xbf16>
    tfm.yield %sum : tensor<2x16x32xbf16>
  }
  // CHECK: %[[LOGITS:.*]] = tfm.lm_head %{{.*}}, %[[WTE]] : tensor<2x16x32xbf16>, tensor<64x32xbf16> -> tensor<2x16x64xbf16>
  %logits = tfm.lm_head %y, %wte : tensor<2x16x32xbf16>, tensor<64x32xbf16> -> tensor<2x16x64xbf16>
  // CHECK: %[[LOSS:.*]] = tfm.cross_entropy %[[LOGITS]], %labels : tensor<2x16x64xbf16>, tensor<2x16xi32> -> tensor<f32>
  %loss = tfm.cross_entropy %logits, %labels : tensor<2x16x64xbf16>, tensor<2x16xi32> -> tensor<f32>
  // CHECK: tfm.yield %[[LOSS]] : tensor<f32>
  tfm.yield %loss : tensor<f32>
}
