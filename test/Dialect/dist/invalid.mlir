// Every diagnostic of the dist attribute verifiers and parsers.
// RUN: plan-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{device kind must not be empty}}
module attributes {t = #dist.device<"", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>} {}

// -----

// expected-error @+1 {{memory_gib must be positive, got 0}}
module attributes {t = #dist.device<"x", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 0, hbm_gbytes_per_s = 1>} {}

// -----

// expected-error @+1 {{missing field 'hbm_gbytes_per_s'}}
module attributes {t = #dist.device<"x", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1>} {}

// -----

// expected-error @+1 {{unknown field 'tf32_tflops'}}
module attributes {t = #dist.device<"x", tf32_tflops = 1>} {}

// -----

// expected-error @+1 {{field 'bf16_tflops' given twice}}
module attributes {t = #dist.device<"x", bf16_tflops = 1, bf16_tflops = 2>} {}

// -----

// expected-error @+1 {{unknown link kind 'infinityfabric', expected nvswitch, nvlink, pcie or shared_memory}}
module attributes {t = #dist.link<infinityfabric, gbytes_per_s = 1, latency_us = 1>} {}

// -----

// expected-error @+1 {{gbytes_per_s must be positive, got -1}}
module attributes {t = #dist.link<pcie, gbytes_per_s = -1, latency_us = 1>} {}

// -----

// expected-error @+1 {{latency_us must not be negative}}
module attributes {t = #dist.link<pcie, gbytes_per_s = 1, latency_us = -1>} {}

// -----

// expected-error @+1 {{unknown network kind 'torus', expected fat_tree or rail_optimized}}
module attributes {t = #dist.network<torus, nics_per_node = 1, gbits_per_s = 1, latency_us = 1, oversubscription = 1>} {}

// -----

// expected-error @+1 {{nics_per_node must be an integer from 1 to 1024}}
module attributes {t = #dist.network<fat_tree, nics_per_node = 0, gbits_per_s = 1, latency_us = 1, oversubscription = 1>} {}

// -----

// expected-error @+1 {{gbits_per_s must be positive, got 0}}
module attributes {t = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 0, latency_us = 1, oversubscription = 1>} {}

// -----

// expected-error @+1 {{latency_us must not be negative}}
module attributes {t = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 1, latency_us = -5, oversubscription = 1>} {}

// -----

// expected-error @+1 {{oversubscription must be >= 1}}
module attributes {t = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 1, latency_us = 1, oversubscription = 0.5>} {}

// -----

// expected-error @+1 {{collective_efficiency must be from 1e-6 to 1, got 1.5}}
module attributes {t = #dist.calibration<collective_efficiency = 1.5>} {}

// -----

// expected-error @+1 {{gemm_half_dim must be from 0 to 1e6, got -1}}
module attributes {t = #dist.calibration<gemm_half_dim = -1>} {}

// -----

// expected-error @+1 {{unknown field 'gemm'}}
module attributes {t = #dist.calibration<gemm = 1>} {}

// -----

// expected-error @+1 {{field 'hbm_efficiency' given twice}}
module attributes {t = #dist.calibration<hbm_efficiency = 1, hbm_efficiency = 0.5>} {}

// -----

// expected-error @+1 {{topology 'x' needs at least one node, got 0}}
module attributes {t = #dist.topology<"x", nodes = 0, devices_per_node = 1,
    device = #dist.device<"d", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<pcie, gbytes_per_s = 1, latency_us = 1>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 1, latency_us = 1, oversubscription = 1>>} {}

// -----

// expected-error @+1 {{topology 'x' needs at least one device per node, got 0}}
module attributes {t = #dist.topology<"x", nodes = 1, devices_per_node = 0,
    device = #dist.device<"d", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<pcie, gbytes_per_s = 1, latency_us = 1>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 1, latency_us = 1, oversubscription = 1>>} {}

// -----

// expected-error @+1 {{zero must be 0, 1, 2 or 3, got 4}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 4, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [2]>} {}

// -----

// expected-error @+1 {{dp, tp, pp, vpp, micro_batch_size and num_micro_batches must be between 1 and 16777216}}
module attributes {t = #dist.strategy<dp = 0, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [2]>} {}

// -----

// expected-error @+1 {{sequence_parallel must be 0 or 1}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 2, schedule = "1f1b", stage_layers = [2]>} {}

// -----

// expected-error @+1 {{vpp > 1 goes with the interleaved schedule}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 2, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1, 1, 1]>} {}

// -----

// expected-error @+1 {{the interleaved schedule needs num_micro_batches (3) divisible by pp (2)}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 2, zero = 0, micro_batch_size = 1, num_micro_batches = 3, recompute = none, sequence_parallel = 0, schedule = "interleaved", stage_layers = [1, 1, 1, 1]>} {}

// -----

// expected-error @+1 {{stage_layers has 1 entries for pp * vpp = 2 model chunks}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "gpipe", stage_layers = [2]>} {}

// -----

// expected-error @+1 {{every pipeline stage needs at least one layer}}
module attributes {t = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 2, recompute = none, sequence_parallel = 0, schedule = "gpipe", stage_layers = [2, 0]>} {}

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.all_gather' op dimension 2 goes from 64 to 32; only dim 1 may change, by a whole factor}}
%g = dist.all_gather %x {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x16x32xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.reduce_scatter' op dimension 1 goes from 8 to 3; only dim 1 may change, by a whole factor}}
%s = dist.reduce_scatter %x {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x3x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.all_gather' op dim 3 is out of range for 'tensor<2x8x64xf32>'}}
%g = dist.all_gather %x {axis = #dist.axis<tp>, dim = 3 : i64} : tensor<2x8x64xf32> -> tensor<2x8x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.all_gather' op input 'tensor<2x8x64xf32>' and result 'tensor<2x16xf32>' differ in rank or element type}}
%g = dist.all_gather %x {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x16xf32>

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<f32>
  dist.stage chunk 0 rank 0 {
    // expected-error @+1 {{'dist.stage_return' op returns ('tensor<f32>') but the stage yields ()}}
    dist.stage_return %x : tensor<f32>
  }
  tfm.yield %x : tensor<f32>
}

// -----

tfm.model @m {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x8xf32>
  dist.stage chunk 0 rank 0 {
    // expected-error @+1 {{'dist.send' op uses a value of another pipeline stage; pass it with dist.send and dist.recv}}
    dist.send %x {peer = #dist.peer<next>} : tensor<2x4x8xf32>
    dist.stage_return
  }
  %c = tfm.param "c" zeros : tensor<f32>
  tfm.yield %c : tensor<f32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.async' op must hold one dist.all_reduce, dist.all_gather or dist.reduce_scatter and yield its result}}
%t = dist.async {
  %g = tfm.gelu %x : tensor<2x8x64xf32>
  dist.yield %g : tensor<2x8x64xf32>
}
%y = dist.wait %t : tensor<2x8x64xf32>

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.async' op starts a collective that is not waited for exactly once: its token needs one dist.wait}}
%t = dist.async {
  %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x8x64xf32>
  dist.yield %s : tensor<2x8x64xf32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.async' op starts a collective that is not waited for exactly once: its token needs one dist.wait}}
%t = dist.async {
  %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x8x64xf32>
  dist.yield %s : tensor<2x8x64xf32>
}
%y = dist.wait %t : tensor<2x8x64xf32>
%z = dist.wait %t : tensor<2x8x64xf32>

// -----

tfm.model @m {
^bb0(%tok: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x8xf32>
  // expected-error @+1 {{'dist.async' op is waited for before it or in another block; dist.wait must follow it in its own}}
  %t = dist.async {
    %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
    dist.yield %s : tensor<2x4x8xf32>
  }
  dist.stage chunk 0 rank 0 {
    %y = dist.wait %t : tensor<2x4x8xf32>
    dist.stage_return
  }
  %c = tfm.param "c" zeros : tensor<f32>
  tfm.yield %c : tensor<f32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
%t = dist.async {
  %g = dist.all_gather %x {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x16x64xf32>
  dist.yield %g : tensor<2x16x64xf32>
}
// expected-error @+1 {{'dist.wait' op returns 'tensor<2x8x64xf32>' but the collective gives 'tensor<2x16x64xf32>'}}
%y = dist.wait %t : tensor<2x8x64xf32>

// -----

%t = builtin.unrealized_conversion_cast to !dist.token
// expected-error @+1 {{'dist.wait' op waits for a token no dist.async made}}
%y = dist.wait %t : tensor<2x8x64xf32>

// -----

// At the module's top level (a graph region) nothing orders the ops but the
// verifier: the wait comes first, and the region has no dist.yield.
%x = tfm.param "x" zeros : tensor<2x8x64xf32>
%y = dist.wait %t : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.async' op is waited for before it or in another block; dist.wait must follow it in its own}}
%t = dist.async {
  %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x8x64xf32>
  dist.yield %s : tensor<2x8x64xf32>
}

// -----

%x = tfm.param "x" zeros : tensor<2x8x64xf32>
%y = dist.wait %t : tensor<2x8x64xf32>
// expected-error @+1 {{'dist.async' op expects a non-empty block}}
%t = dist.async {
}
