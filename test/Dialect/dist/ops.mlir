// Round-trip of the dist attributes.
// RUN: plan-opt %s -split-input-file --allow-unregistered-dialect | plan-opt -split-input-file --allow-unregistered-dialect | FileCheck %s
// RUN: plan-opt %s -split-input-file --allow-unregistered-dialect --verify-roundtrip -o /dev/null

// CHECK: module attributes {dist.topology = #dist.topology<"lab", nodes = 2, devices_per_node = 4,
// CHECK-SAME: device = #dist.device<"A100-SXM-80GB", bf16_tflops = 312, fp16_tflops = 312, fp32_tflops = 19.5, memory_gib = 80, hbm_gbytes_per_s = 2039>,
// CHECK-SAME: intra_node = #dist.link<nvlink, gbytes_per_s = 300, latency_us = 2.5>,
// CHECK-SAME: inter_node = #dist.network<fat_tree, nics_per_node = 2, gbits_per_s = 200, latency_us = 5, oversubscription = 2>>}
module attributes {dist.topology = #dist.topology<"lab", nodes = 2, devices_per_node = 4,
    device = #dist.device<"A100-SXM-80GB", bf16_tflops = 312, fp16_tflops = 312.0, fp32_tflops = 19.5, memory_gib = 80, hbm_gbytes_per_s = 2039>,
    intra_node = #dist.link<nvlink, gbytes_per_s = 300, latency_us = 2.5>,
    inter_node = #dist.network<fat_tree, nics_per_node = 2, gbits_per_s = 200, latency_us = 5, oversubscription = 2>>} {
}

// -----

// A measured cluster's calibration: any of its fields, printed in a fixed
// order; an empty one and none are both allowed.
// CHECK-LABEL: module attributes {dist.topology = #dist.topology<"measured", nodes = 2, devices_per_node = 2,
// CHECK-SAME: calibration = #dist.calibration<gemm_half_dim = 0>>
// CHECK-SAME: test.calibrations = [
// CHECK-SAME: #dist.calibration<gemm_efficiency = 1, gemm_half_dim = 12.5, attention_efficiency = 0.25, hbm_efficiency = 1, collective_efficiency = 0.9>
// CHECK-SAME: #dist.calibration<collective_efficiency = 1>
// CHECK-SAME: #dist.calibration<>
module attributes {test.calibrations = [
    #dist.calibration<collective_efficiency = 0.9, hbm_efficiency = 1.0, gemm_efficiency = 1, gemm_half_dim = 12.5, attention_efficiency = 0.25>,
    #dist.calibration<collective_efficiency = 1>,
    #dist.calibration<>],
  dist.topology = #dist.topology<"measured", nodes = 2, devices_per_node = 2,
    device = #dist.device<"cpu rank", bf16_tflops = 0.03, fp16_tflops = 0.03, fp32_tflops = 0.03, memory_gib = 4, hbm_gbytes_per_s = 5>,
    intra_node = #dist.link<shared_memory, gbytes_per_s = 0.4, latency_us = 10>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 0.1, latency_us = 40, oversubscription = 1>,
    calibration = #dist.calibration<gemm_half_dim = 0>>} {
}

// -----

// CHECK-LABEL: module attributes {test.links = [
// CHECK-SAME: #dist.link<nvswitch, gbytes_per_s = 450, latency_us = 3>
// CHECK-SAME: #dist.link<pcie, gbytes_per_s = 32, latency_us = 10>
// CHECK-SAME: #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>
// CHECK-SAME: #dist.network<rail_optimized, nics_per_node = 8, gbits_per_s = 400, latency_us = 5, oversubscription = 1>
module attributes {test.links = [
    #dist.link<nvswitch, gbytes_per_s = 450, latency_us = 3>,
    #dist.link<pcie, gbytes_per_s = 32, latency_us = 10>,
    #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>,
    #dist.network<rail_optimized, nics_per_node = 8, gbits_per_s = 400, latency_us = 5, oversubscription = 1>]} {
}

// -----

// CHECK-LABEL: module attributes {dist.strategy = #dist.strategy<dp = 8, tp = 8, pp = 2, vpp = 1, zero = 1, micro_batch_size = 1, num_micro_batches = 64, recompute = selective, sequence_parallel = 1, schedule = "1f1b", stage_layers = [17, 15]>}
module attributes {dist.strategy = #dist.strategy<dp = 8, tp = 8, pp = 2, vpp = 1, zero = 1, micro_batch_size = 1, num_micro_batches = 64, recompute = selective, sequence_parallel = 1, schedule = "1f1b", stage_layers = [17, 15]>} {
}

// -----

// CHECK-LABEL: module attributes {test.ops}
// CHECK: dist.all_reduce %{{.*}} {axis = #dist.axis<tp>} : tensor<2x8x64xf32>
// CHECK: dist.all_gather %{{.*}} {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
// CHECK: dist.reduce_scatter %{{.*}} {axis = #dist.axis<dp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x4x64xf32>
// CHECK: tfm.param "w" zeros {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<64x64xf32>
// CHECK: dist.vocab_embedding %{{.*}}, %{{.*}} {axis = #dist.axis<tp>} : tensor<64x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
// CHECK: dist.vocab_cross_entropy %{{.*}}, %{{.*}} {axis = #dist.axis<tp>} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
module attributes {test.ops} {
  %x = tfm.param "x" zeros : tensor<2x8x64xf32>
  %a = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x8x64xf32>
  %h = tfm.param "h" zeros : tensor<2x4x64xf32>
  %g = dist.all_gather %h {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x64xf32> -> tensor<2x8x64xf32>
  %s = dist.reduce_scatter %a {axis = #dist.axis<dp>, dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x4x64xf32>
  %t = "test.tokens"() : () -> tensor<2x8xi32>
  %w = tfm.param "w" zeros {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<64x64xf32>
  %e = dist.vocab_embedding %w, %t {axis = #dist.axis<tp>} : tensor<64x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  %l = dist.vocab_cross_entropy %e, %t {axis = #dist.axis<tp>} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<f32>
}

// -----

// CHECK-LABEL: tfm.model @staged
// CHECK: dist.stage chunk 0 rank 0 {
// CHECK: dist.send %{{.*}} {peer = #dist.peer<next>} : tensor<2x4x8xf32>
// CHECK: %[[L:.*]] = dist.stage chunk 1 rank 1 -> tensor<f32> {
// CHECK: dist.recv {peer = #dist.peer<prev>} : tensor<2x4x8xf32>
// CHECK: dist.stage_return %{{.*}} : tensor<f32>
// CHECK: tfm.yield %[[L]] : tensor<f32>
tfm.model @staged {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  dist.stage chunk 0 rank 0 {
    %x = tfm.param "x" zeros : tensor<2x4x8xf32>
    dist.send %x {peer = #dist.peer<next>} : tensor<2x4x8xf32>
    dist.stage_return
  }
  %loss = dist.stage chunk 1 rank 1 -> tensor<f32> {
    %y = dist.recv {peer = #dist.peer<prev>} : tensor<2x4x8xf32>
    %c = tfm.param "c" zeros : tensor<f32>
    dist.stage_return %c : tensor<f32>
  }
  tfm.yield %loss : tensor<f32>
}

// -----

// A collective in async form: the token is waited for once, and the ops
// between run while it is in flight.
// CHECK-LABEL: tfm.model @overlapped
// CHECK: %[[T:.*]] = dist.async {
// CHECK-NEXT: %[[S:.*]] = dist.all_reduce %{{.*}} {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
// CHECK-NEXT: dist.yield %[[S]] : tensor<2x4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: tfm.gelu
// CHECK-NEXT: %{{.*}} = dist.wait %[[T]] : tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = dist.async {
// CHECK-NEXT: dist.all_gather %{{.*}} {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
// CHECK: dist.wait %[[G]] : tensor<2x8x8xf32>
tfm.model @overlapped {
^bb0(%t: tensor<2x4xi32>, %l: tensor<2x4xi32>):
  %x = tfm.param "x" zeros : tensor<2x4x8xf32>
  %tok = dist.async {
    %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x4x8xf32>
    dist.yield %s : tensor<2x4x8xf32>
  }
  %g = tfm.gelu %x : tensor<2x4x8xf32>
  %y = dist.wait %tok : tensor<2x4x8xf32>
  %gather = dist.async {
    %a = dist.all_gather %y {axis = #dist.axis<tp>, dim = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
    dist.yield %a : tensor<2x8x8xf32>
  }
  %z = dist.wait %gather : tensor<2x8x8xf32>
  %c = tfm.param "c" zeros : tensor<f32>
  tfm.yield %c : tensor<f32>
}
