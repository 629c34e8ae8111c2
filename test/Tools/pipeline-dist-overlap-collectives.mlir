// Forward collectives in async form. In the tiny GPT-NeoX's parallel
// residual the attention's output all-reduce overlaps the MLP, and with
// sequence parallelism the MLP input's all-gather overlaps the attention; a
// sequential block (the tiny Llama) has nothing to overlap and keeps its
// order.
// RUN: plan-opt %examples/models/tiny-neox.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives)' 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.err
// RUN: plan-opt %examples/models/tiny-neox.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=tp=4,sp=1 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives)' 2>/dev/null | FileCheck %s --check-prefix=SP
// RUN: plan-opt %examples/models/tiny-neox.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=EXEC
// RUN: plan-opt %examples/models/tiny-neox.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>/dev/null | FileCheck %s --check-prefix=BWD
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives)' 2>%t.llama.err | FileCheck %s --check-prefix=SEQ
// RUN: FileCheck %s --check-prefix=SEQ-REPORT < %t.llama.err
// The output parses back.
// RUN: plan-opt %examples/models/tiny-neox.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-overlap-collectives)' 2>/dev/null | plan-opt --verify-roundtrip -o /dev/null

// The embedding's all-reduce is read at once: it stays synchronous.
// CHECK-LABEL: dist.stage chunk 0
// CHECK-NOT: dist.async
// CHECK: dist.all_reduce
// CHECK-NEXT: tfm.block 0

// Both branches' norms read only the block's input and go first (in
// backward their gradients' reductions then overlap the other branch). The
// attention's output projection starts its all-reduce; the MLP's GEMMs and
// activation run; the wait comes right before the bias that reads the sum.
// The MLP's all-reduce then overlaps that bias.
// CHECK: %[[N1:.*]] = tfm.layer_norm %h,
// CHECK-NOT: tfm.linear
// CHECK: %[[N2:.*]] = tfm.layer_norm %h,
// CHECK: %[[ATTN:.*]] = tfm.attention
// CHECK-NEXT: %[[OUT:.*]] = tfm.linear %[[ATTN]],
// CHECK-NEXT: %[[T1:.*]] = dist.async {
// CHECK-NEXT: %[[S1:.*]] = dist.all_reduce %[[OUT]] {axis = #dist.axis<tp>}
// CHECK-NEXT: dist.yield %[[S1]]
// CHECK-NEXT: }
// CHECK-NEXT: tfm.linear %[[N2]],
// CHECK-NEXT: tfm.gelu
// CHECK-NEXT: %[[DOWN:.*]] = tfm.linear
// CHECK-NEXT: %[[T2:.*]] = dist.async {
// CHECK-NEXT: dist.all_reduce %[[DOWN]]
// CHECK-NEXT: dist.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[W1:.*]] = dist.wait %[[T1]] : tensor<1x32x64xf32>
// CHECK-NEXT: %[[B1:.*]] = tfm.bias_add %[[W1]],
// CHECK-NEXT: %[[W2:.*]] = dist.wait %[[T2]] : tensor<1x32x64xf32>
// CHECK-NEXT: %[[B2:.*]] = tfm.bias_add %[[W2]],
// CHECK-NEXT: tfm.add %h, %[[B1]], %[[B2]]
// REPORT: overlap in forward: tp 4 of 5 async (1 not: nothing independent of its result runs while it is in flight);

// Sequence parallel: both norms' gathers start before the attention; the
// second is waited for only by the MLP, after the attention's
// reduce-scatter started.
// SP-LABEL: tfm.block 0
// SP: %[[N1:.*]] = tfm.layer_norm %h,
// SP-NEXT: %[[G1:.*]] = dist.async {
// SP-NEXT: dist.all_gather %[[N1]] {axis = #dist.axis<tp>, dim = 1 : i64}
// SP: %[[N2:.*]] = tfm.layer_norm %h,
// SP-NEXT: %[[G2:.*]] = dist.async {
// SP-NEXT: dist.all_gather %[[N2]]
// SP: dist.wait %[[G1]] : tensor<1x32x64xf32>
// SP: tfm.attention
// SP-NEXT: %[[OUT:.*]] = tfm.linear
// SP-NEXT: dist.async {
// SP-NEXT: dist.reduce_scatter %[[OUT]]
// SP: dist.wait %[[G2]] : tensor<1x32x64xf32>

// Lowered: an async collective on the comm stream and an exec.wait of its
// buffer, in the layer's forward.
// EXEC-LABEL: exec.phase forward chunk 0
// EXEC: exec.collective all_reduce "tp" @layers.0.linear.9 -> @layers.0.linear.9 async {layer = 0 : i64}
// EXEC-NEXT: exec.kernel "linear" ins [@layers.0.layer_norm.2,
// EXEC-NEXT: exec.kernel "gelu"
// EXEC: exec.collective all_reduce "tp" @layers.0.linear.12 -> @layers.0.linear.12 async {layer = 0 : i64}
// EXEC-NEXT: exec.wait @layers.0.linear.9 {layer = 0 : i64}
// EXEC-NEXT: exec.kernel "bias_add" ins [@layers.0.linear.9,
// EXEC-NEXT: exec.wait @layers.0.linear.12 {layer = 0 : i64}

// In backward, the norms come last: the MLP norm's input-gradient
// all-reduce runs during the attention's backward.
// BWD-LABEL: exec.phase backward chunk 0
// BWD: exec.collective all_reduce "tp" @d.layers.0.layer_norm.2 -> @d.layers.0.layer_norm.2 async {layer = 0 : i64}
// BWD-NEXT: exec.kernel "linear_bwd" ins [@d.layers.0.linear.9,
// BWD-NEXT: exec.kernel "attention_bwd"
// BWD: exec.wait @d.layers.0.layer_norm.2
// BWD-NEXT: exec.kernel "layer_norm_bwd" ins [@d.layers.0.layer_norm.2,

// SEQ: dist.all_reduce
// SEQ-NOT: dist.async
// SEQ-NOT: dist.wait
// SEQ-REPORT: overlap in forward: tp 0 of 5 async (5 not: nothing independent of its result runs while it is in flight);
