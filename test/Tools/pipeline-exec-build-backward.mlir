// Backward phases, gradient reductions and the optimizer step for each kind
// of parallelism, on the tiny Llama (2 layers, 4 heads, 2 key/value heads,
// 21 parameters) and the tiny GPT-2 (tied embeddings).
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=TP
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,sp=1,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=SP
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=0,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=Z0
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=1,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=Z1
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=Z2
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=3,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=Z3
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:1 strategy=recompute=selective,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=SEL
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:1 strategy=recompute=full,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=FULL
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=tp=4,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=GQA
// RUN: plan-opt %examples/models/tiny-gpt2.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=pp=2,mbs=1 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=TIED
// RUN: plan-opt %examples/models/tiny-llama.json --dtype=bf16 --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=G16
// RUN: plan-opt %examples/models/tiny-llama.json --dtype=bf16 --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=dp=2,zero=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward{gradient-dtype=f32})' 2>/dev/null | FileCheck %s --check-prefix=G32
// Backward kernels take their forward's params: Gemma's embedding scale,
// norm weight offset and GeGLU form.
// RUN: plan-opt %examples/models/tiny-gemma.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward)' 2>/dev/null | FileCheck %s --check-prefix=GEMMA
// GEMMA: exec.kernel "rms_norm_bwd" ins [@d.rms_norm.31, @layers.1.add.30, @final_norm.weight] outs [@d.layers.1.add.30, @grad.final_norm.weight] accumulate [false, true] params {eps = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64}
// GEMMA: exec.kernel "geglu_bwd" ins [@d.layers.1.geglu.28, @layers.1.linear.26, @layers.1.linear.27] outs [@d.layers.1.linear.26, @d.layers.1.linear.27] params {approximate = "tanh"}
// GEMMA: exec.kernel "embedding_bwd" ins [@d.embedding.0, @tokens] outs [@grad.embed.tokens.weight] accumulate [true] params {scale = 8.000000e+00 : f64, vocab_parts = 2 : i64}

// tp=2: exactly two all-reduces per layer forward (attention out, MLP
// down) and two backward (the gradients of the two normed inputs of the
// column-parallel projections), plus one for the LM head's input.
// TP-LABEL: exec.phase forward chunk 0
// TP-COUNT-2: exec.collective all_reduce "tp" {{.*}} {layer = 0 : i64}
// TP-NOT: exec.collective all_reduce "tp" {{.*}} {layer = 0 : i64}
// TP-LABEL: exec.phase backward chunk 0
// TP-NEXT: exec.kernel "ce_bwd" ins [@lm_head.32, @loss.max, @loss.stats, @labels] outs [@d.lm_head.32]
// TP-NEXT: exec.kernel "linear_bwd" ins [@d.lm_head.32, @rms_norm.31, @lm_head.weight] outs [@d.rms_norm.31, @grad.lm_head.weight] accumulate [false, true]
// TP-NEXT: exec.collective all_reduce "tp" @d.rms_norm.31 -> @d.rms_norm.31
// TP-COUNT-2: exec.collective all_reduce "tp" {{.*}} {layer = 1 : i64}
// TP-COUNT-2: exec.collective all_reduce "tp" {{.*}} {layer = 0 : i64}
// TP-NOT: exec.collective all_reduce "tp"
// TP-LABEL: exec.phase step
// The global norm: replicated norm weights count once over the tp ranks.
// TP: exec.kernel "grad_sumsq" ins [@grad.embed.tokens.weight, @grad.layers.0.attn_norm.weight, {{.*}}] outs [@grad_sumsq] params {weights = [1.000000e+00, 5.000000e-01,
// TP-NEXT: exec.collective all_reduce "world" @grad_sumsq -> @grad_sumsq
// TP-NEXT: exec.kernel "clip_coefficient" ins [@grad_sumsq] outs [@clip_coefficient]
// TP-NEXT: exec.kernel "adamw" ins [@embed.tokens.weight, @grad.embed.tokens.weight, @adam_m.embed.tokens.weight, @adam_v.embed.tokens.weight, @clip_coefficient] outs [@embed.tokens.weight, @adam_m.embed.tokens.weight, @adam_v.embed.tokens.weight] params {dp_shard = false, weight_decay = true}
// TP-NEXT: exec.kernel "adamw" ins [@layers.0.attn_norm.weight, {{.*}} params {dp_shard = false, weight_decay = false}

// Sequence parallelism: each tp all-reduce is an all-gather / reduce-scatter
// pair, forward and backward; the norm weights, which see only this
// rank's tokens, are summed over tp in the step.
// SP-LABEL: exec.phase forward chunk 0
// SP-COUNT-2: exec.collective all_gather "tp" {{.*}} dim 1 {layer = 0 : i64}
// SP-NOT: exec.collective all_reduce "tp" {{.*}} {layer = 0 : i64}
// SP-LABEL: exec.phase backward chunk 0
// Backward gathers the LM head's and each layer's GEMM inputs again from
// their sequence shards, at their first use, instead of keeping them.
// SP: exec.collective all_gather "tp" @rms_norm.{{[0-9]+}} -> @[[HEAD:all_gather.[0-9]+.regathered]] dim 1
// SP-NEXT: exec.kernel "linear_bwd" ins [@d.lm_head.{{[0-9]+}}, @[[HEAD]], @lm_head.weight]
// SP: exec.collective all_gather "tp" @layers.1.rms_norm.{{[0-9]+}} -> @[[MLP:layers.1.all_gather.[0-9]+.regathered]] dim 1 {layer = 1 : i64}
// SP-NEXT: exec.kernel "linear_bwd" ins [@d.layers.1.linear.{{[0-9]+}}, @[[MLP]], @layers.1.mlp.up.weight]
// SP-NEXT: exec.kernel "linear_bwd" ins [@d.layers.1.linear.{{[0-9]+}}, @[[MLP]], @layers.1.mlp.gate.weight]
// SP: exec.collective reduce_scatter "tp" @d.layers.1.all_gather.{{[0-9]+}} -> @d.layers.1.rms_norm.{{[0-9]+}} dim 1 {layer = 1 : i64}
// SP: exec.collective all_gather "tp" @d.layers.1.reduce_scatter.{{[0-9]+}} -> @d.layers.1.linear.{{[0-9]+}} dim 1 {layer = 1 : i64}
// SP-NOT: exec.collective all_reduce "tp" {{.*}} {layer
// SP-LABEL: exec.phase step
// SP-NEXT: exec.collective all_reduce "tp" @grad.layers.0.attn_norm.weight -> @grad.layers.0.attn_norm.weight
// SP-NEXT: exec.collective all_reduce "tp" @grad.layers.0.mlp_norm.weight -> @grad.layers.0.mlp_norm.weight

// ZeRO-0: one all-reduce over dp per parameter gradient, in the backward
// phase as soon as the gradient is final, run by the last micro-batch only
// (the sum over micro-batches); the loss summed over dp for the report.
// Z0-LABEL: exec.phase backward chunk 0
// Z0: exec.kernel "linear_bwd" ins [@d.lm_head.32, @rms_norm.31, @lm_head.weight] outs [@d.rms_norm.31, @grad.lm_head.weight]
// Z0-NEXT: exec.collective all_reduce "dp" @grad.lm_head.weight -> @grad.lm_head.weight last_micro_batch
// Z0-COUNT-20: exec.collective all_reduce "dp" @grad.{{.*}} last_micro_batch
// Z0-LABEL: exec.phase step
// Z0-NOT: exec.collective {{.*}} "dp" @grad
// Z0: exec.kernel "grad_sumsq" {{.*}} params {weights = [5.000000e-01,
// Z0: exec.collective all_reduce "dp" @loss -> @loss

// ZeRO-1: per parameter one reduce-scatter of its gradient, in the last
// micro-batch's backward, and, after the sharded AdamW, one all-gather of
// the updated parameter.
// Z1: exec.buffer @adam_m.embed.tokens.weight : tensor<16384xf32> optimizer_state {dp_shard, param = "embed.tokens.weight"}
// Z1-LABEL: exec.phase backward chunk 0
// Z1-COUNT-21: exec.collective reduce_scatter "dp" @grad.{{.*}} -> @grad_shard.{{.*}} last_micro_batch
// Z1-LABEL: exec.phase step
// Z1-NOT: reduce_scatter
// Z1: exec.kernel "grad_sumsq" ins [@grad_shard.embed.tokens.weight,
// Z1: exec.kernel "adamw" ins [@embed.tokens.weight, @grad_shard.embed.tokens.weight, {{.*}} params {dp_shard = true, weight_decay = true}
// Z1-NEXT: exec.collective all_gather "dp" @embed.tokens.weight -> @embed.tokens.weight
// Z1-COUNT-20: exec.collective all_gather "dp"
// Z1-NOT: reduce_scatter

// ZeRO-2: the gradients are reduce-scattered during backward, after each
// layer's, into the accumulated shards.
// Z2-LABEL: exec.phase backward chunk 0
// Z2: exec.collective reduce_scatter "dp" @grad.lm_head.weight -> @grad_shard.lm_head.weight accumulate
// Z2: exec.collective reduce_scatter "dp" @grad.layers.1.mlp.down.weight -> @grad_shard.layers.1.mlp.down.weight accumulate {layer = 1 : i64}
// Z2: exec.kernel "embedding_bwd"
// Z2-NEXT: exec.collective reduce_scatter "dp" @grad.embed.tokens.weight -> @grad_shard.embed.tokens.weight accumulate
// Z2-LABEL: exec.phase step
// Z2-NOT: reduce_scatter
// Z2: exec.kernel "adamw" {{.*}} params {dp_shard = true

// ZeRO-3: parameters live as shards, gathered before each layer's forward
// and backward; but for the embedding table, which no backward reads (and
// so is not gathered for it).
// Z3: exec.buffer @layers.0.attn.q.weight : tensor<64x64xf32> param_gathered
// Z3: exec.buffer @layers.0.attn.q.weight.shard : tensor<2048xf32> param_shard {dp_shard, init = "normal", init_std = 2.000000e-02 : f64, layer = 0 : i64, local_type = tensor<64x64xf32>, param = "layers.0.attn.q.weight"}
// Z3-LABEL: exec.phase forward chunk 0
// Z3-COUNT-21: exec.collective all_gather "dp" @{{.*}}.shard -> @
// Z3-LABEL: exec.phase backward chunk 0
// Z3-NOT: all_gather "dp" @embed.tokens.weight.shard
// Z3-COUNT-20: exec.collective all_gather "dp" @{{.*}}.shard -> @
// Z3-NOT: all_gather "dp" @embed.tokens.weight.shard
// Z3-LABEL: exec.phase step
// Z3-NOT: all_gather
// Z3: exec.kernel "adamw" ins [@embed.tokens.weight.shard, @grad_shard.embed.tokens.weight,

// Selective recomputation: the attention core runs again just before its
// backward.
// SEL-LABEL: exec.phase backward chunk 0
// SEL: exec.kernel "attention" ins [@layers.1.rotary.{{[0-9]+}}, {{.*}}] outs [@layers.1.attention.[[A:[0-9]+]], @layers.1.attention.[[A]].lse]
// SEL-NEXT: exec.kernel "attention_bwd" ins [@d.layers.1.attention.[[A]], @layers.1.rotary.{{[0-9]+}}, @layers.1.rotary.{{[0-9]+}}, @layers.1.linear.{{[0-9]+}}, @layers.1.attention.[[A]], @layers.1.attention.[[A]].lse]

// Full recomputation: each layer's forward runs again before its backward,
// but for what the backward never reads: the MLP's output projection and
// the residual add into the layer's output (whose kept copy the next
// layer's backward read).
// FULL-LABEL: exec.phase backward chunk 0
// FULL: exec.kernel "rms_norm_bwd" ins [@d.rms_norm.{{[0-9]+}}, @layers.1.add.{{[0-9]+}}, @final_norm.weight]
// FULL-NEXT: exec.kernel "rms_norm" ins [@layers.0.add.{{[0-9]+}}, @layers.1.attn_norm.weight]
// FULL: exec.kernel "add" ins [@layers.0.add.{{[0-9]+}}, @layers.1.linear.{{[0-9]+}}] outs [@layers.1.add.[[MID:[0-9]+]]]
// FULL: exec.kernel "swiglu" ins [@layers.1.linear.{{[0-9]+}}, @layers.1.linear.{{[0-9]+}}] outs [@layers.1.swiglu.[[ACT:[0-9]+]]]
// FULL-NEXT: exec.kernel "copy" ins [@d.layers.1.add.{{[0-9]+}}] outs [@d.layers.1.add.[[MID]]]
// FULL-NOT: exec.kernel "linear" ins [@layers.1.swiglu.[[ACT]], @layers.1.mlp.down.weight]
// FULL: exec.kernel "linear_bwd" ins [@d.layers.1.linear.{{[0-9]+}}, @layers.1.swiglu.[[ACT]], @layers.1.mlp.down.weight]
// FULL: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.attn_norm.weight]
// FULL: exec.kernel "swiglu"
// FULL-NEXT: exec.kernel "copy"
// FULL-LABEL: exec.phase step

// tp=4 with 2 key/value heads: each head on two ranks, its projection's
// gradient summed over them (tp_kv).
// GQA: exec.buffer @layers.0.attn.k.weight : tensor<16x64xf32> param {{{.*}}sharding_dim = 0 : i64, sharding_parts = 2 : i64}
// GQA: exec.kernel "attention" {{.*}} params {causal = true, num_heads = 1 : i64, num_kv_heads = 1 : i64}
// GQA-LABEL: exec.phase step
// GQA: exec.collective all_reduce "tp_kv" @grad.layers.0.attn.k.weight -> @grad.layers.0.attn.k.weight
// GQA-NEXT: exec.collective all_reduce "tp_kv" @grad.layers.0.attn.v.weight -> @grad.layers.0.attn.v.weight
// GQA: exec.kernel "grad_sumsq" ins [@grad.embed.tokens.weight, @grad.layers.0.attn_norm.weight, @grad.layers.0.attn.q.weight, @grad.layers.0.attn.k.weight, {{.*}}] outs [@grad_sumsq] params {weights = [1.000000e+00, 2.500000e-01, 1.000000e+00, 5.000000e-01,

// Tied embeddings over two stages: the copies' gradients are summed.
// TIED-LABEL: exec.program @rank0
// TIED: exec.kernel "embedding_bwd"
// TIED: exec.collective all_reduce "tied" @grad.embed.tokens.weight -> @grad.embed.tokens.weight
// TIED-LABEL: exec.program @rank1
// TIED: exec.phase backward chunk 1
// TIED-NEXT: exec.kernel "ce_bwd"
// TIED-NEXT: exec.kernel "linear_bwd" ins [@d.lm_head.{{[0-9]+}}, @layer_norm.{{[0-9]+}}, @embed.tokens.weight] outs [@d.layer_norm.{{[0-9]+}}, @grad.embed.tokens.weight]
// TIED: exec.send @d.recv.0 to prev
// TIED: exec.collective all_reduce "tied" @grad.embed.tokens.weight -> @grad.embed.tokens.weight

// Gradients are held and reduced in the parameter's dtype, or in f32
// (Megatron-LM's accumulate_allreduce_grads_in_fp32): bf16 parameters, f32
// gradients and their shards, f32 AdamW state either way.
// G16-DAG: exec.buffer @layers.0.attn.q.weight : tensor<64x64xbf16> param
// G16-DAG: exec.buffer @grad_shard.layers.0.attn.q.weight : tensor<2048xbf16> grad_shard
// G16-DAG: exec.buffer @grad.layers.0.attn.q.weight : tensor<64x64xbf16> param_grad
// G16-DAG: exec.buffer @master.layers.0.attn.q.weight : tensor<2048xf32> optimizer_state
// G32-DAG: exec.buffer @layers.0.attn.q.weight : tensor<64x64xbf16> param
// G32-DAG: exec.buffer @grad_shard.layers.0.attn.q.weight : tensor<2048xf32> grad_shard
// G32-DAG: exec.buffer @grad.layers.0.attn.q.weight : tensor<64x64xf32> param_grad
// G32-DAG: exec.buffer @master.layers.0.attn.q.weight : tensor<2048xf32> optimizer_state
// G32: exec.collective reduce_scatter "dp" @grad.layers.0.attn.q.weight -> @grad_shard.layers.0.attn.q.weight accumulate
