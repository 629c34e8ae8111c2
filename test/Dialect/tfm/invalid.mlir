// Every diagnostic of the tfm verifiers and parsers.
// RUN: plan-opt %s -split-input-file -verify-diagnostics --allow-unregistered-dialect

// expected-error @+1 {{'tfm.model' op body must take (tokens, labels), got 1 arguments}}
tfm.model @m {
^bb0(%t: tensor<2x4xi32>):
  "test.end"() : () -> ()
}

// -----

// expected-error @+1 {{'tfm.model' op tokens and labels must be [batch, seq] tensors of i32 or i64, got 'tensor<2x4xf32>' and 'tensor<2x4xi32>'}}
tfm.model @m {
^bb0(%t: tensor<2x4xf32>, %l: tensor<2x4xi32>):
  "test.end"() : () -> ()
}

// -----

// expected-error @+1 {{'tfm.model' op tokens [2, 4] and labels [2, 8] differ in shape}}
tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x8xi32>):
  "test.end"() : () -> ()
}

// -----

// expected-error @+1 {{'tfm.model' op must end with a tfm.yield of one scalar loss}}
tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  "test.end"() : () -> ()
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %p = tfm.param "p" zeros : tensor<4xf32>
  // expected-error @+1 {{'tfm.yield' op loss must be a scalar tensor<f32>, got 'tensor<4xf32>'}}
  tfm.yield %p : tensor<4xf32>
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  // expected-note @+1 {{first declared here}}
  %a = tfm.param "w" zeros : tensor<f32>
  // expected-error @+1 {{'tfm.param' op parameter name 'w' is already used}}
  %b = tfm.param "w" zeros : tensor<f32>
  tfm.yield %b : tensor<f32>
}

// -----

// Blocks are numbered 0, 1, ... in order: a repeated index would give two
// layers' launches one name in the plan.
tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x8xf32>
  %y = tfm.block 0 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%h: tensor<2x4x8xf32>):
    tfm.yield %h : tensor<2x4x8xf32>
  }
  // expected-error @+1 {{'tfm.block' op is layer 0 but the model's block 1; blocks are numbered 0, 1, ... in order}}
  %z = tfm.block 0 (%y) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%h: tensor<2x4x8xf32>):
    tfm.yield %h : tensor<2x4x8xf32>
  }
  %loss = tfm.param "loss" zeros : tensor<f32>
  tfm.yield %loss : tensor<f32>
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x8xf32>
  // expected-error @+1 {{'tfm.block' op is layer 7 but the model's block 0; blocks are numbered 0, 1, ... in order}}
  %y = tfm.block 7 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%h: tensor<2x4x8xf32>):
    tfm.yield %h : tensor<2x4x8xf32>
  }
  %loss = tfm.param "loss" zeros : tensor<f32>
  tfm.yield %loss : tensor<f32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
// expected-error @+1 {{'tfm.block' op layer index must be >= 0, got -1}}
%y = tfm.block -1 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
^bb0(%h: tensor<2x4x8xf32>):
  tfm.yield %h : tensor<2x4x8xf32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
// expected-error @+1 {{'tfm.block' op region arguments ('tensor<2x4x4xf32>') do not match the inputs ('tensor<2x4x8xf32>')}}
%y = tfm.block 0 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
^bb0(%h: tensor<2x4x4xf32>):
  tfm.yield %h : tensor<2x4x4xf32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
// expected-error @+1 {{'tfm.block' op region must end with tfm.yield}}
%y = tfm.block 0 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
^bb0(%h: tensor<2x4x8xf32>):
  "test.end"() : () -> ()
}

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%y = tfm.block 0 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
^bb0(%h: tensor<2x4x8xf32>):
  %p = tfm.param "p" zeros : tensor<8xf32>
  // expected-error @+1 {{'tfm.yield' op yields ('tensor<8xf32>') but the block returns ('tensor<2x4x8xf32>')}}
  tfm.yield %p : tensor<8xf32>
}

// -----

// expected-error @+1 {{'tfm.param' op parameter name must not be empty}}
%p = tfm.param "" zeros : tensor<4xf32>

// -----

// expected-error @+1 {{'tfm.param' op parameter 'p' must have a static shape, got 'tensor<?x4xf32>'}}
%p = tfm.param "p" zeros : tensor<?x4xf32>

// -----

// expected-error @+1 {{'tfm.param' op parameter 'p': normal init needs a standard deviation}}
%p = tfm.param "p" normal : tensor<4xf32>

// -----

// expected-error @+1 {{'tfm.param' op parameter 'p': only normal init takes a standard deviation}}
%p = tfm.param "p" ones(1.0) : tensor<4xf32>

// -----

// expected-error @+1 {{'tfm.param' op parameter 'p': standard deviation must be positive, got 0}}
%p = tfm.param "p" normal(0.0) : tensor<4xf32>

// -----

// expected-error @+1 {{unknown init rule 'uniform', expected zeros, ones or normal(std)}}
%p = tfm.param "p" uniform : tensor<4xf32>

// -----

// An element type a model cannot be trained in.
// expected-error @+1 {{'tfm.param' op result #0 must be ranked tensor of bfloat16 type or 16-bit float or 32-bit float values, but got 'tensor<4xf64>'}}
%p = tfm.param "p" zeros : tensor<4xf64>

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %w = tfm.param "w" zeros : tensor<16xf32>
  // expected-error @+1 {{'tfm.embedding' op table must be [vocab, hidden], got 'tensor<16xf32>'}}
  %x = tfm.embedding %w, %t : tensor<16xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
  "test.end"() : () -> ()
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %w = tfm.param "w" zeros : tensor<16x8xf32>
  %p = tfm.param "p" zeros : tensor<4xf32>
  // expected-error @+1 {{'tfm.embedding' op result shape [2, 4, 16] does not match [batch, seq, hidden] = [2, 4, 8]}}
  %x = tfm.embedding %w, %t : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
  "test.end"() : () -> ()
}

// -----

%t = "test.tokens"() : () -> tensor<8xi32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.embedding' op tokens must be [batch, seq], got 'tensor<8xi32>'}}
%x = tfm.embedding %w, %t : tensor<16x8xf32>, tensor<8xi32> -> tensor<8x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<4x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.position_embedding' op input must be a [batch, seq, features] tensor, got 'tensor<4x8xf32>'}}
%y = tfm.position_embedding %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.position_embedding' op table must be [max_positions, hidden], got 'tensor<8xf32>'}}
%y = tfm.position_embedding %x, %w : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16x4xf32>
// expected-error @+1 {{'tfm.position_embedding' op table width 4 differs from the hidden size 8}}
%y = tfm.position_embedding %x, %w : tensor<2x4x8xf32>, tensor<16x4xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x32x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.position_embedding' op sequence length 32 exceeds the 16 learned positions}}
%y = tfm.position_embedding %x, %w : tensor<2x32x8xf32>, tensor<16x8xf32> -> tensor<2x32x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.position_embedding' op result type 'tensor<2x4x9xf32>' differs from the input type 'tensor<2x4x8xf32>'}}
%y = tfm.position_embedding %x, %w : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x9xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op num_heads 6 does not divide the input width 64}}
%y = tfm.rotary %x {num_heads = 6 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op rotary_dim must be even and in (0, head_dim = 16], got 7}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 7 : i64, theta = 1.0e4 : f64} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op theta must be positive, got -1}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = -1.0 : f64} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op result type 'tensor<2x4x64xbf16>' differs from the input type 'tensor<2x4x64xf32>'}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64} : tensor<2x4x64xf32> -> tensor<2x4x64xbf16>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{rope scaling factor must be >= 1, got 0.5}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<linear, factor = 0.5>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor, got 4 and 1}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_positions = 8192>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{llama3 rope scaling needs original_max_positions > 0, got 0}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{unknown rope scaling kind 'ntk', expected 'linear', 'llama3', 'yarn', 'longrope' or 'dynamic'}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<ntk, factor = 8.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{unknown rope scaling field 'beta'}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<linear, beta = 8.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<f32>
%w = tfm.param "w" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.rms_norm' op input must have at least one dimension}}
%y = tfm.rms_norm %x, %w {eps = 1.0e-5 : f64} : tensor<f32>, tensor<8xf32> -> tensor<f32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.rms_norm' op weight_offset must be finite, got inf}}
%y = tfm.rms_norm %x, %w {eps = 1.0e-5 : f64, weight_offset = 0x7FF0000000000000 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>

// -----

%t = "test.tokens"() : () -> tensor<2x4xi32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.embedding' op scale must be positive and finite, got 0}}
%x = tfm.embedding %w, %t {scale = 0.0 : f64} : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<3xf32>
// expected-error @+1 {{'tfm.rms_norm' op weight length (the span each normalisation covers) must divide the last input dimension 8, got 'tensor<3xf32>'}}
%y = tfm.rms_norm %x, %w {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<3xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xf32>
%b = tfm.param "b" zeros : tensor<2x8xf32>
// expected-error @+1 {{'tfm.layer_norm' op bias must be shaped like the weight 'tensor<8xf32>', got 'tensor<2x8xf32>'}}
%y = tfm.layer_norm %x, %w, %b {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x8xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.layer_norm' op eps must be positive, got 0}}
%y = tfm.layer_norm %x, %w {eps = 0.0 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.layer_norm' op result type 'tensor<2x4x8xbf16>' differs from the input type 'tensor<2x4x8xf32>'}}
%y = tfm.layer_norm %x, %w {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xbf16>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<8xbf16>
// expected-error @+1 {{'tfm.rms_norm' op mixes element types 'f32' and 'bf16'}}
%y = tfm.rms_norm %x, %w {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xbf16> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16xf32>
// expected-error @+1 {{'tfm.linear' op weight must be [out_features, in_features], got 'tensor<16xf32>'}}
%y = tfm.linear %x, %w : tensor<2x4x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16x4xf32>
// expected-error @+1 {{'tfm.linear' op weight [16, 4] expects 4 input features, but the input has 8}}
%y = tfm.linear %x, %w : tensor<2x4x8xf32>, tensor<16x4xf32> -> tensor<2x4x16xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
%b = tfm.param "b" zeros : tensor<8xf32>
// expected-error @+1 {{'tfm.linear' op bias must be tensor<16x...> to match the last input dimension 16, got 'tensor<8xf32>'}}
%y = tfm.linear %x, %w, %b : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<8xf32> -> tensor<2x4x16xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.linear' op result shape [2, 4, 8] does not match the expected [2, 4, 16]}}
%y = tfm.linear %x, %w : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>

// -----

%x = tfm.param "x" zeros : tensor<4x8xf32>
%w = tfm.param "w" zeros : tensor<16x8xf32>
// expected-error @+1 {{'tfm.lm_head' op input must be a [batch, seq, features] tensor, got 'tensor<4x8xf32>'}}
%y = tfm.lm_head %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.attention' op num_heads 6 does not divide the query width 64}}
%o = tfm.attention %q, %k, %k {causal, num_heads = 6 : i64, num_kv_heads = 6 : i64} : tensor<2x4x64xf32>, tensor<2x4x64xf32>, tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x4x48xf32>
// expected-error @+1 {{'tfm.attention' op num_kv_heads 3 does not divide num_heads 4}}
%o = tfm.attention %q, %k, %k {causal, num_heads = 4 : i64, num_kv_heads = 3 : i64} : tensor<2x4x64xf32>, tensor<2x4x48xf32>, tensor<2x4x48xf32> -> tensor<2x4x64xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x8x32xf32>
// expected-error @+1 {{'tfm.attention' op key [2, 8, 32] differs from the query [2, 4, 64] in batch or sequence}}
%o = tfm.attention %q, %k, %k {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<2x4x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32> -> tensor<2x4x64xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x4x32xf32>
%v = tfm.param "v" zeros : tensor<2x4x16xf32>
// expected-error @+1 {{'tfm.attention' op value width 16 must be num_kv_heads * head_dim = 2 * 16 = 32}}
%o = tfm.attention %q, %k, %v {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<2x4x64xf32>, tensor<2x4x32xf32>, tensor<2x4x16xf32> -> tensor<2x4x64xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x4x32xf32>
// expected-error @+1 {{'tfm.attention' op window must be positive, got 0}}
%o = tfm.attention %q, %k, %k {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64, window = 0 : i64} : tensor<2x4x64xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x64xf32>

// -----

%q = tfm.param "q" zeros : tensor<2x4x64xf32>
%k = tfm.param "k" zeros : tensor<2x4x32xf32>
// expected-error @+1 {{'tfm.attention' op result type 'tensor<2x4x32xf32>' differs from the query type 'tensor<2x4x64xf32>'}}
%o = tfm.attention %q, %k, %k {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<2x4x64xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32> -> tensor<2x4x32xf32>

// -----

%q = tfm.param "q" zeros : tensor<4x64xf32>
// expected-error @+1 {{'tfm.attention' op query must be a [batch, seq, features] tensor, got 'tensor<4x64xf32>'}}
%o = tfm.attention %q, %q, %q {causal, num_heads = 4 : i64, num_kv_heads = 4 : i64} : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
// expected-error @+1 {{'tfm.add' op needs at least two operands, got 1}}
%y = tfm.add %x : tensor<2x4x8xf32>

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<8x16xf32>
  // expected-error @+1 {{'tfm.cross_entropy' op logits must be [batch, seq, vocab], got 'tensor<8x16xf32>'}}
  %loss = tfm.cross_entropy %x, %l : tensor<8x16xf32>, tensor<2x4xi32> -> tensor<f32>
  tfm.yield %loss : tensor<f32>
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x8x16xf32>
  // expected-error @+1 {{'tfm.cross_entropy' op labels [2, 4] do not match the logits' [batch, seq] = [2, 8]}}
  %loss = tfm.cross_entropy %x, %l : tensor<2x8x16xf32>, tensor<2x4xi32> -> tensor<f32>
  tfm.yield %loss : tensor<f32>
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x16xf32>
  // expected-error @+1 {{'tfm.cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<2x4xf32>'}}
  %loss = tfm.cross_entropy %x, %l : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<2x4xf32>
  "test.end"() : () -> ()
}

// -----

// expected-error @+1 {{'tfm.model' op tokens and labels must have static shapes, got 'tensor<?x4xi32>' and 'tensor<?x4xi32>'}}
tfm.model @m {
^bb0(%t: tensor<?x4xi32>, %l: tensor<?x4xi32>):
  "test.end"() : () -> ()
}

// -----

// expected-error @+1 {{'tfm.param' op parameter 'w' has more than 2^62 elements}}
%p = tfm.param "w" ones : tensor<4294967296x4294967296xf32>

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %a = tfm.param "a" zeros : tensor<4611686018427387904xf32>
  // expected-error @+1 {{'tfm.param' op brings the model past 2^62 parameter elements}}
  %b = tfm.param "b" zeros : tensor<2xf32>
  %c = tfm.param "c" zeros : tensor<f32>
  tfm.yield %c : tensor<f32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'low_freq_factor' does not apply to linear rope scaling}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<linear, factor = 2.0, low_freq_factor = 1.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'factor' does not apply to longrope rope scaling}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<longrope, factor = 2.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'beta_fast' does not apply to llama3 rope scaling}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<llama3, beta_fast = 2.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{yarn rope scaling needs 0 < beta_slow <= beta_fast, got 32 and 1}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 64, beta_fast = 1.0, beta_slow = 32.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{yarn rope scaling needs original_max_positions > 0, got 0}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{rope scaling attention_factor must be positive, got 0}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 64, attention_factor = 0.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{truncate must be true or false}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 64, truncate = yes>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op yarn scaling needs a theta other than 1}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0 : f64, scaling = #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 64>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{longrope rope scaling needs a long_factor}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 64, short_factor = [1.0, 1.0, 1.0, 1.0]>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{longrope long_factor values must be positive, got -2}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 64, short_factor = [1.0, 1.0, 1.0, 1.0], long_factor = [1.0, -2.0, 1.0, 1.0]>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{longrope short_factor and long_factor differ in length: 4 and 3}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 64, short_factor = [1.0, 1.0, 1.0, 1.0], long_factor = [1.0, 2.0, 1.0]>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op longrope scaling has 3 factors a list; rotary_dim 8 needs 4}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<longrope, original_max_positions = 64, short_factor = [1.0, 1.0, 1.0], long_factor = [1.0, 2.0, 1.0]>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{'tfm.rotary' op dynamic scaling needs rotary_dim > 2, got 2}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 2 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<dynamic, factor = 2.0, original_max_positions = 64>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x64xf32>
// expected-error @+1 {{dynamic rope scaling needs original_max_positions > 0, got 0}}
%y = tfm.rotary %x {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, scaling = #tfm.rope_scaling<dynamic, factor = 2.0>} : tensor<2x4x64xf32> -> tensor<2x4x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x4x8xf32>
%b = tfm.param "b" zeros : tensor<4xf32>
// expected-error @+1 {{'tfm.bias_add' op bias must be tensor<8x...> to match the last input dimension 8, got 'tensor<4xf32>'}}
%y = tfm.bias_add %x, %b : tensor<2x4x8xf32>, tensor<4xf32>

// -----

// AdamW's settings on the module, in the ranges a model spec's optimizer
// takes (docs/model-spec.md).
// expected-error @+1 {{'tfm.optimizer' lr: expected a number in (0, 1], got -3.000000e+00 : f64}}
module attributes {tfm.optimizer = {lr = -3.0 : f64}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' beta1: expected a number in [0, 1), got 1.000000e+00 : f64}}
module attributes {tfm.optimizer = {beta1 = 1.0 : f64}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' decay: expected "cosine", "linear" or "constant", got 5 : i64}}
module attributes {tfm.optimizer = {decay = 5}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' warmup_steps: expected a count of steps (i64, at least 0), got -1 : i64}}
module attributes {tfm.optimizer = {warmup_steps = -1}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' momentum: not a setting of AdamW}}
module attributes {tfm.optimizer = {momentum = 0.9 : f64}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' min_lr: 0.01 exceeds lr 0.001}}
module attributes {tfm.optimizer = {lr = 1.0e-3 : f64, min_lr = 1.0e-2 : f64}} {}

// -----

// expected-error @+1 {{'tfm.optimizer' must be a dictionary on the module}}
module attributes {tfm.optimizer = 3} {}

// -----

module {
  // expected-error @+1 {{'tfm.optimizer' must be a dictionary on the module}}
  "test.op"() {tfm.optimizer = {lr = 1.0e-3 : f64}} : () -> ()
}

// -----

// expected-error @+1 {{unknown tfm attribute 'tfm.optimiser'}}
module attributes {tfm.optimiser = {lr = 1.0e-3 : f64}} {}

// -----

// expected-error @+1 {{'tfm.step_missing' must be a unit attribute on the module}}
module attributes {tfm.step_missing = 1 : i64} {}

// -----

module {
  // expected-error @+1 {{'tfm.step_missing' must be a unit attribute on the module}}
  "test.op"() {tfm.step_missing} : () -> ()
}
