// Round-trip of every exec op, in custom and generic form.
// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --verify-roundtrip -o /dev/null
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s

// CHECK-LABEL: exec.program @rank0 pp_rank 0 {
// CHECK: exec.buffer @tokens : tensor<1x8xi32> tokens
// CHECK: exec.buffer @w : tensor<16x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "w", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
// CHECK: exec.buffer @w.shard : tensor<64xf32> param_shard {dp_shard, param = "w"}
// CHECK: exec.phase forward chunk 0 {
// CHECK-NEXT: exec.recv @x from prev
// CHECK-NEXT: exec.collective all_gather "dp" @w.shard -> @w
// CHECK-NEXT: exec.kernel "linear" ins [@x, @w] outs [@y] {layer = 0 : i64}
// CHECK-NEXT: exec.collective reduce_scatter "tp" @y -> @y.shard dim 1
// CHECK-NEXT: exec.collective all_reduce "tp" @m -> @m reduce max
// CHECK-NEXT: exec.send @y.shard to next
// CHECK: exec.phase backward chunk 0 {
// CHECK-NEXT: exec.kernel "linear_bwd" ins [@dy, @x, @w] outs [@dx, @dw] accumulate [false, true] params {note = "dw adds up"}
// CHECK-NEXT: exec.collective reduce_scatter "dp" @dw -> @dw.shard accumulate async
// CHECK-NEXT: exec.kernel "copy" ins [@dx] outs [@dy]
// CHECK-NEXT: exec.wait @dw.shard
// CHECK-NEXT: exec.collective all_reduce "dp" @dw -> @dw async last_micro_batch
// CHECK: exec.phase step {
// CHECK-NEXT: exec.wait @dw
// CHECK: exec.schedule {
// CHECK-NEXT: exec.run forward mb 0 chunk 0
// CHECK-NEXT: exec.run backward mb 0 chunk 0
exec.program @rank0 pp_rank 0 {
  exec.buffer @tokens : tensor<1x8xi32> tokens
  exec.buffer @x : tensor<1x8x8xf32> activation
  exec.buffer @w : tensor<16x8xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "w", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
  exec.buffer @w.shard : tensor<64xf32> param_shard {dp_shard, param = "w"}
  exec.buffer @y : tensor<1x8x16xf32> activation
  exec.buffer @y.shard : tensor<1x4x16xf32> activation
  exec.buffer @m : tensor<1x8xf32> activation
  exec.buffer @dy : tensor<1x8x16xf32> activation_grad
  exec.buffer @dx : tensor<1x8x8xf32> activation_grad
  exec.buffer @dw : tensor<16x8xf32> param_grad
  exec.buffer @dw.shard : tensor<64xf32> grad_shard
  exec.buffer @sumsq : tensor<f32> scalar
  exec.phase forward chunk 0 {
    exec.recv @x from prev
    exec.collective all_gather "dp" @w.shard -> @w
    exec.kernel "linear" ins [@x, @w] outs [@y] {layer = 0 : i64}
    exec.collective reduce_scatter "tp" @y -> @y.shard dim 1
    exec.collective all_reduce "tp" @m -> @m reduce max
    exec.send @y.shard to next
  }
  exec.phase backward chunk 0 {
    exec.kernel "linear_bwd" ins [@dy, @x, @w] outs [@dx, @dw] accumulate [false, true] params {note = "dw adds up"}
    exec.collective reduce_scatter "dp" @dw -> @dw.shard accumulate async
    exec.kernel "copy" ins [@dx] outs [@dy]
    exec.wait @dw.shard
    exec.collective all_reduce "dp" @dw -> @dw async last_micro_batch
  }
  exec.phase step {
    exec.wait @dw
    exec.kernel "grad_sumsq" ins [@dw.shard] outs [@sumsq] params {weights = [1.0]}
    exec.collective all_reduce "world" @sumsq -> @sumsq
  }
  exec.schedule {
    exec.run forward mb 0 chunk 0
    exec.run backward mb 0 chunk 0
  }
}
