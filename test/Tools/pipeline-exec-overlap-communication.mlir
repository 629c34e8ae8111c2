// Where exec-overlap-communication starts and waits for each kind of
// collective, on the tiny Llama (2 layers), and what it leaves synchronous.
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=3,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>/dev/null | FileCheck %s --check-prefix=Z3
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>/dev/null | FileCheck %s --check-prefix=BUCKET
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=3,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication{bucket-mb=0.01})' 2>/dev/null | FileCheck %s --check-prefix=Z3-SMALL
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication{bucket-mb=0.01})' 2>/dev/null | FileCheck %s --check-prefix=Z2
// RUN: not plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication{bucket-mb=0})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=1,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication{bucket-mb=0.01})' 2>/dev/null | FileCheck %s --check-prefix=Z1
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=0,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication{bucket-mb=0.01})' 2>/dev/null | FileCheck %s --check-prefix=Z0
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>&1 >/dev/null | FileCheck %s --check-prefix=TP-REPORT
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>/dev/null | FileCheck %s --check-prefix=TP
// RUN: plan-opt %examples/models/tiny-gpt2.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=dp=2,tp=2,sp=1,zero=3,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-overlap-communication)' 2>/dev/null | FileCheck %s --check-prefix=Z3-TP

// ZeRO-3, forward: the gathers of block 1 start before block 0's first
// kernel and are waited for at block 1's first use of each parameter; the
// embedding's gather, used by the first launch, stays synchronous.
// Z3-LABEL: exec.phase forward chunk 0 {
// Z3-NEXT: exec.collective all_gather "dp" @embed.tokens.weight.shard -> @embed.tokens.weight{{$}}
// Z3-NEXT: exec.kernel "embedding"
// Z3: exec.collective all_gather "dp" @layers.1.attn_norm.weight.shard -> @layers.1.attn_norm.weight async
// Z3: exec.wait @layers.0.attn_norm.weight
// Z3-NEXT: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.attn_norm.weight]
// Z3: exec.wait @layers.1.attn_norm.weight
// Z3-NEXT: exec.kernel "rms_norm" ins [@layers.0.add.15, @layers.1.attn_norm.weight]
// ZeRO-3, backward: block 0's gathers start when block 1's backward
// starts, after block 1's own and ahead of the reduce-scatters that are
// needed only at the end of the phase.
// Z3-LABEL: exec.phase backward chunk 0 {
// Z3: exec.collective all_gather "dp" @layers.1.mlp.down.weight.shard -> @layers.1.mlp.down.weight async {bucket = [[B1:[0-9]+]] : i64, layer = 1 : i64}
// Z3-NEXT: exec.collective all_gather "dp" @layers.0.attn_norm.weight.shard -> @layers.0.attn_norm.weight async {bucket = [[B0:[0-9]+]] : i64, layer = 0 : i64}
// Z3: exec.collective all_gather "dp" @layers.0.mlp.down.weight.shard -> @layers.0.mlp.down.weight async {bucket = [[B0]] : i64, layer = 0 : i64}
// Z3-NEXT: exec.collective reduce_scatter "dp" @grad.final_norm.weight -> @grad_shard.final_norm.weight accumulate async
// Z3: exec.wait @layers.1.mlp.down.weight
// Z3: exec.wait @layers.0.mlp.down.weight
// Z3-NEXT: exec.kernel "linear_bwd" ins [@d.layers.0.linear.14, @layers.0.swiglu.13, @layers.0.mlp.down.weight]
// ZeRO-3's parameter gathers of a layer are one bucket whatever bucket-mb
// says (a layer needs all of them; at large dp each collective's latency
// costs more than its bytes), while gradients keep to the limit.
// Z3-SMALL-LABEL: exec.phase backward chunk 0 {
// Z3-SMALL: exec.collective all_gather "dp" @layers.0.attn_norm.weight.shard -> @layers.0.attn_norm.weight async {bucket = [[G:[0-9]+]] : i64, layer = 0 : i64}
// Z3-SMALL-COUNT-8: exec.collective all_gather "dp" @layers.0.{{.*}} async {bucket = [[G]] : i64, layer = 0 : i64}
// Z3-SMALL: exec.collective reduce_scatter "dp" @grad.layers.1.mlp.down.weight -> @grad_shard.layers.1.mlp.down.weight accumulate async {layer = 1 : i64}{{$}}

// ZeRO-2 with one bucket per gradient: each reduce-scatter starts as soon
// as its gradient is final and is waited for at the end of the backward
// phase.
// Z2-LABEL: exec.phase backward chunk 0 {
// Z2: exec.collective reduce_scatter "dp" @grad.layers.1.mlp.down.weight -> @grad_shard.layers.1.mlp.down.weight accumulate async {layer = 1 : i64}
// Z2-NEXT: exec.kernel
// Z2: exec.wait @grad_shard.embed.tokens.weight
// Z2-NEXT: }

// ZeRO-2 with the default 25 MiB buckets: the tiny model's gradients fit in
// one, which starts when the last of them (the embedding's) is final.
// BUCKET-LABEL: exec.phase backward chunk 0 {
// BUCKET: exec.kernel "embedding_bwd"
// BUCKET-NEXT: exec.collective reduce_scatter "dp" @grad.lm_head.weight -> @grad_shard.lm_head.weight accumulate async {bucket = [[B:[0-9]+]] : i64}
// BUCKET-COUNT-20: exec.collective reduce_scatter "dp" {{.*}} async {bucket = [[B]] : i64
// BUCKET-NEXT: exec.wait @grad_shard.lm_head.weight

// BAD: error: exec-overlap-communication: bucket-mb must be positive, got 0

// ZeRO-1, one bucket per parameter: the parameter all-gather after each
// AdamW is carried to the next step (next_step) and waited for in the
// first micro-batch's forward, right before the parameter's first read, so
// that it overlaps the first layers; the step phase waits for none of them.
// Z1-LABEL: exec.phase forward chunk 0 {
// Z1-NEXT: exec.wait @embed.tokens.weight first_micro_batch
// Z1-NEXT: exec.kernel "embedding" ins [@embed.tokens.weight,
// Z1-NEXT: exec.wait @layers.0.attn_norm.weight first_micro_batch
// Z1-NEXT: exec.kernel "rms_norm" ins [@embedding.{{[0-9]+}}, @layers.0.attn_norm.weight]
// Z1: exec.wait @lm_head.weight first_micro_batch
// Z1-NEXT: exec.kernel "linear" ins [@{{.*}}, @lm_head.weight]
// Z1-LABEL: exec.phase step {
// Z1: exec.kernel "adamw" ins [@embed.tokens.weight,
// Z1-NEXT: exec.collective all_gather "dp" @embed.tokens.weight -> @embed.tokens.weight async next_step
// Z1-NEXT: exec.kernel "adamw" ins [@layers.0.attn_norm.weight,
// Z1-NOT: exec.wait @{{.*}}.weight
// Z1: exec.collective all_reduce "dp" @loss -> @loss
// Z1-NEXT: }

// ZeRO-0: the gradient all-reduces of the last micro-batch's backward start
// as gradients become final and are waited for in the step phase, before
// the gradient norm reads them.
// Z0-LABEL: exec.phase backward chunk 0 {
// Z0: exec.kernel "linear_bwd" ins [@d.lm_head.32, @rms_norm.31, @lm_head.weight]
// Z0-NEXT: exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight async last_micro_batch
// Z0-NOT: exec.wait
// Z0-LABEL: exec.phase step {
// Z0-COUNT-21: exec.wait @grad.
// Z0-NEXT: exec.kernel "grad_sumsq"

// Tensor parallelism: every collective sits between the launch that
// produces its input and the one that reads its output.
// TP-REPORT: overlap: tp 0 of 12 async (12 not: the launch after it needs its result at once); world 0 of 1 async (1 not: its group spans ranks of other programs);
// TP-NOT: async
// TP-NOT: exec.wait

// ZeRO-3 with tp=2 and sequence parallelism (GPT-2, with biases): each
// group has a comm stream of its own, so a block's gathers start ahead of
// the previous block's tensor-parallel collectives. A bucket moves as one,
// and no other bucket comes between its members. The biases (and the
// position table), which no backward reads, are gathered for the forward
// only.
// Z3-TP-LABEL: exec.phase forward chunk 0 {
// Z3-TP: exec.collective all_gather "dp" @layers.1.attn_norm.weight.shard -> @layers.1.attn_norm.weight async {bucket = [[F1:[0-9]+]] : i64}
// Z3-TP-COUNT-15: exec.collective all_gather "dp" @layers.1.{{.*}} async {bucket = [[F1]] : i64}
// Z3-TP: exec.kernel "layer_norm" ins [@{{.*}}, @layers.0.attn_norm.weight, @layers.0.attn_norm.bias]
// Z3-TP-NEXT: exec.collective all_gather "tp" @layers.0.layer_norm.{{[0-9]+}} -> @layers.0.all_gather.{{[0-9]+}} dim 1 async
// Z3-TP-LABEL: exec.phase backward chunk 0 {
// Z3-TP: exec.collective all_gather "dp" @layers.1.attn_norm.weight.shard -> @layers.1.attn_norm.weight async {bucket = [[B1:[0-9]+]] : i64, layer = 1 : i64}
// Z3-TP-COUNT-7: exec.collective all_gather "dp" @layers.1.{{.*}}.weight.shard -> {{.*}} async {bucket = [[B1]] : i64, layer = 1 : i64}
// Z3-TP-NEXT: exec.collective all_gather "dp" @layers.0.attn_norm.weight.shard -> @layers.0.attn_norm.weight async {bucket = [[B0:[0-9]+]] : i64, layer = 0 : i64}
// Z3-TP-COUNT-7: exec.collective all_gather "dp" @layers.0.{{.*}}.weight.shard -> {{.*}} async {bucket = [[B0]] : i64, layer = 0 : i64}
// Z3-TP-NOT: exec.collective all_gather "dp" @layers.
// Z3-TP: exec.collective all_gather "tp" {{.*}} async {layer = 1 : i64}
