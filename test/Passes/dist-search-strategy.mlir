// The strategy search on tiny-llama (4 heads, 2 kv heads, 2 layers,
// global batch 8, f32).
// RUN: plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy -o %t.a.mlir 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=ATTR < %t.a.mlir
// Deterministic: the same input gives the same plan and report.
// RUN: plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy="report=%t.1.json" -o %t.b.mlir 2>/dev/null
// RUN: plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy="report=%t.2.json" -o %t.c.mlir 2>/dev/null
// RUN: diff %t.b.mlir %t.c.mlir
// RUN: grep -v search_time_s %t.1.json > %t.1.txt
// RUN: grep -v search_time_s %t.2.json > %t.2.txt
// RUN: diff %t.1.txt %t.2.txt
// RUN: FileCheck %s --check-prefix=JSON < %t.1.json
// RUN: plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy="strategy=tp=2,recompute=full" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PINNED
// RUN: plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy="objective=memory" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not plan-opt %s --dist-search-strategy="strategy=tp=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not plan-opt %s --dist-search-strategy="strategy=pp=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PP
// RUN: not plan-opt %s --dist-attach-topology=topology=cpu:4 --dist-search-strategy="strategy=dp=16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not plan-opt %s --dist-attach-topology=topology=%S/Inputs/pairs.json --dist-search-strategy="strategy=tp=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CROSS
// RUN: not plan-opt %s --dist-attach-topology=topology=cpu:1 --dist-search-strategy="memory-cap-gib=0.001" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFIT
// RUN: not plan-opt %s --dist-search-strategy="objective=speed" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OBJECTIVE

// CHECK: plan for "tiny-llama" on 4 devices of topology "cpu"
// CHECK-NEXT: strategy dp={{[0-9]+}},tp={{[0-9]+}},pp={{[0-9]+}},vpp=
// CHECK-NEXT: stage layers
// CHECK-NEXT: why
// CHECK-NEXT: step {{.*}} tokens/s, {{.*}} TFLOP/s per device, MFU
// CHECK-NEXT: memory {{.*}} of 4.0 GiB per device
// CHECK: searched {{[0-9]+}} configurations in {{.*}} s ({{[0-9]+}} costed); rejected: {{[0-9]+}} out of memory, {{[0-9]+}} indivisible, {{[0-9]+}} slower

// ATTR: module attributes {dist.strategy = #dist.strategy<dp = {{[0-9]+}}, tp = {{[0-9]+}}, pp = {{[0-9]+}}, vpp = 1,

// JSON-DAG: "model": "tiny-llama"
// JSON-DAG: "strategy": {
// JSON-DAG: "stage_layers": [
// JSON-DAG: "predicted": {
// JSON-DAG: "memory_breakdown": {
// JSON-DAG: "comm_time_breakdown": {
// JSON-DAG: "exposed_comm_s":
// JSON-DAG: "why":
// JSON-DAG: "candidates": [
// JSON-DAG: "rejected": {
// JSON-DAG: "out_of_memory":
// JSON-DAG: "indivisible":
// JSON-DAG: "slower":
// JSON-DAG: "candidates_costed":
// JSON-DAG: "search_time_s":

// PINNED: strategy dp={{[0-9]+}},tp=2,{{.*}},recompute=full,
// MEMORY: plan for "tiny-llama"
// TP: error: --strategy: tp=3 does not divide the 4 attention heads
// PP: error: --strategy: pp=4 exceeds the 2 layers
// DEVICES: error: --strategy: the pinned dp * tp * pp = 16 exceeds the 4 devices of topology 'cpu'
// CROSS: error: --strategy: tp=4 crosses nodes of 2 devices; allow it with --allow-tp-across-nodes
// NOFIT: error: no parallel configuration of tiny-llama fits: the smallest needs {{.*}} per device ({{.*}}) and a device has 1 MiB; needs at least {{[0-9]+}} devices of 1 MiB
// OBJECTIVE: error: dist-search-strategy: objective must be throughput or memory, got 'speed'

module {
  tfm.model @"tiny-llama" {
  ^bb0(%tokens: tensor<8x128xi32>, %labels: tensor<8x128xi32>):
    %0 = tfm.param "embed.tokens.weight" normal(2.000000e-02) : tensor<512x64xf32>
    %1 = tfm.embedding %0, %tokens : tensor<512x64xf32>, tensor<8x128xi32> -> tensor<8x128x64xf32>
    %2 = tfm.block 0 (%1) : (tensor<8x128x64xf32>) -> tensor<8x128x64xf32> {
    ^bb0(%h: tensor<8x128x64xf32>):
      %9 = tfm.param "layers.0.attn_norm.weight" ones : tensor<64xf32>
      %10 = tfm.rms_norm %h, %9 {eps = 1.000000e-05 : f64} : tensor<8x128x64xf32>, tensor<64xf32> -> tensor<8x128x64xf32>
      %11 = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<64x64xf32>
      %12 = tfm.linear %10, %11 : tensor<8x128x64xf32>, tensor<64x64xf32> -> tensor<8x128x64xf32>
      %13 = tfm.param "layers.0.attn.k.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %14 = tfm.linear %10, %13 : tensor<8x128x64xf32>, tensor<32x64xf32> -> tensor<8x128x32xf32>
      %15 = tfm.param "layers.0.attn.v.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %16 = tfm.linear %10, %15 : tensor<8x128x64xf32>, tensor<32x64xf32> -> tensor<8x128x32xf32>
      %17 = tfm.rotary %12 {num_heads = 4 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<8x128x64xf32> -> tensor<8x128x64xf32>
      %18 = tfm.rotary %14 {num_heads = 2 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<8x128x32xf32> -> tensor<8x128x32xf32>
      %19 = tfm.attention %17, %18, %16 {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<8x128x64xf32>, tensor<8x128x32xf32>, tensor<8x128x32xf32> -> tensor<8x128x64xf32>
      %20 = tfm.param "layers.0.attn.out.weight" normal(1.000000e-02) : tensor<64x64xf32>
      %21 = tfm.linear %19, %20 : tensor<8x128x64xf32>, tensor<64x64xf32> -> tensor<8x128x64xf32>
      %22 = tfm.add %h, %21 : tensor<8x128x64xf32>
      %23 = tfm.param "layers.0.mlp_norm.weight" ones : tensor<64xf32>
      %24 = tfm.rms_norm %22, %23 {eps = 1.000000e-05 : f64} : tensor<8x128x64xf32>, tensor<64xf32> -> tensor<8x128x64xf32>
      %25 = tfm.param "layers.0.mlp.gate.weight" normal(2.000000e-02) : tensor<192x64xf32>
      %26 = tfm.linear %24, %25 : tensor<8x128x64xf32>, tensor<192x64xf32> -> tensor<8x128x192xf32>
      %27 = tfm.param "layers.0.mlp.up.weight" normal(2.000000e-02) : tensor<192x64xf32>
      %28 = tfm.linear %24, %27 : tensor<8x128x64xf32>, tensor<192x64xf32> -> tensor<8x128x192xf32>
      %29 = tfm.swiglu %26, %28 : tensor<8x128x192xf32>
      %30 = tfm.param "layers.0.mlp.down.weight" normal(1.000000e-02) : tensor<64x192xf32>
      %31 = tfm.linear %29, %30 : tensor<8x128x192xf32>, tensor<64x192xf32> -> tensor<8x128x64xf32>
      %32 = tfm.add %22, %31 : tensor<8x128x64xf32>
      tfm.yield %32 : tensor<8x128x64xf32>
    }
    %3 = tfm.block 1 (%2) : (tensor<8x128x64xf32>) -> tensor<8x128x64xf32> {
    ^bb0(%h: tensor<8x128x64xf32>):
      %9 = tfm.param "layers.1.attn_norm.weight" ones : tensor<64xf32>
      %10 = tfm.rms_norm %h, %9 {eps = 1.000000e-05 : f64} : tensor<8x128x64xf32>, tensor<64xf32> -> tensor<8x128x64xf32>
      %11 = tfm.param "layers.1.attn.q.weight" normal(2.000000e-02) : tensor<64x64xf32>
      %12 = tfm.linear %10, %11 : tensor<8x128x64xf32>, tensor<64x64xf32> -> tensor<8x128x64xf32>
      %13 = tfm.param "layers.1.attn.k.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %14 = tfm.linear %10, %13 : tensor<8x128x64xf32>, tensor<32x64xf32> -> tensor<8x128x32xf32>
      %15 = tfm.param "layers.1.attn.v.weight" normal(2.000000e-02) : tensor<32x64xf32>
      %16 = tfm.linear %10, %15 : tensor<8x128x64xf32>, tensor<32x64xf32> -> tensor<8x128x32xf32>
      %17 = tfm.rotary %12 {num_heads = 4 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<8x128x64xf32> -> tensor<8x128x64xf32>
      %18 = tfm.rotary %14 {num_heads = 2 : i64, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<8x128x32xf32> -> tensor<8x128x32xf32>
      %19 = tfm.attention %17, %18, %16 {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<8x128x64xf32>, tensor<8x128x32xf32>, tensor<8x128x32xf32> -> tensor<8x128x64xf32>
      %20 = tfm.param "layers.1.attn.out.weight" normal(1.000000e-02) : tensor<64x64xf32>
      %21 = tfm.linear %19, %20 : tensor<8x128x64xf32>, tensor<64x64xf32> -> tensor<8x128x64xf32>
      %22 = tfm.add %h, %21 : tensor<8x128x64xf32>
      %23 = tfm.param "layers.1.mlp_norm.weight" ones : tensor<64xf32>
      %24 = tfm.rms_norm %22, %23 {eps = 1.000000e-05 : f64} : tensor<8x128x64xf32>, tensor<64xf32> -> tensor<8x128x64xf32>
      %25 = tfm.param "layers.1.mlp.gate.weight" normal(2.000000e-02) : tensor<192x64xf32>
      %26 = tfm.linear %24, %25 : tensor<8x128x64xf32>, tensor<192x64xf32> -> tensor<8x128x192xf32>
      %27 = tfm.param "layers.1.mlp.up.weight" normal(2.000000e-02) : tensor<192x64xf32>
      %28 = tfm.linear %24, %27 : tensor<8x128x64xf32>, tensor<192x64xf32> -> tensor<8x128x192xf32>
      %29 = tfm.swiglu %26, %28 : tensor<8x128x192xf32>
      %30 = tfm.param "layers.1.mlp.down.weight" normal(1.000000e-02) : tensor<64x192xf32>
      %31 = tfm.linear %29, %30 : tensor<8x128x192xf32>, tensor<64x192xf32> -> tensor<8x128x64xf32>
      %32 = tfm.add %22, %31 : tensor<8x128x64xf32>
      tfm.yield %32 : tensor<8x128x64xf32>
    }
    %4 = tfm.param "final_norm.weight" ones : tensor<64xf32>
    %5 = tfm.rms_norm %3, %4 {eps = 1.000000e-05 : f64} : tensor<8x128x64xf32>, tensor<64xf32> -> tensor<8x128x64xf32>
    %6 = tfm.param "lm_head.weight" normal(2.000000e-02) : tensor<512x64xf32>
    %7 = tfm.lm_head %5, %6 : tensor<8x128x64xf32>, tensor<512x64xf32> -> tensor<8x128x512xf32>
    %8 = tfm.cross_entropy %7, %labels : tensor<8x128x512xf32>, tensor<8x128xi32> -> tensor<f32>
    tfm.yield %8 : tensor<f32>
  }
}

