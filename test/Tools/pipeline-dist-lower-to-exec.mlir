// The staged models of examples/ through the pipeline up to dist-lower-to-exec:
// one exec.program per pipeline rank.
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=tp=2,pp=2,sp=0,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s
// Sequence parallelism keeps the dist collectives' groups and dims.
// RUN: plan-opt %examples/models/tiny-llama.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,sp=1,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=SP
// A rotary scaling's fields become the kernel's params; LongRoPE's list is
// the one for the plan's sequence (17 positions, past the pretrained 16:
// the long factors), whatever the ranks' share of the heads.
// RUN: plan-opt %inputs/rope/phi3-longrope.json --seq-len=17 --global-batch=2 --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=LONGROPE
// LONGROPE: exec.kernel "rotary" ins [{{.*}}] outs [{{.*}}] params {attention_factor = 1.2247448713915889 : f64, frequency_factors = [1.000000e+00, 2.000000e+00, 4.000000e+00, 8.000000e+00], num_heads = 2 : i64, original_max_positions = 16 : i64, rotary_dim = 8 : i64, scaling = "longrope", theta = 1.000000e+04 : f64}
// RUN: plan-opt %inputs/rope/qwen2-yarn.json --seq-len=32 --global-batch=2 --pass-pipeline='builtin.module(partita-compile{topology=cpu:1 strategy=mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=YARN
// YARN: exec.kernel "rotary" ins [{{.*}}] outs [{{.*}}] params {attention_factor = 1.1386294361119891 : f64, beta_fast = 3.200000e+01 : f64, beta_slow = 1.000000e+00 : f64, num_heads = 4 : i64, original_max_positions = 32768 : i64, rotary_dim = 8 : i64, scaling = "yarn", scaling_factor = 4.000000e+00 : f64, theta = 1.000000e+06 : f64, truncate = true}
// Gemma's pieces keep their params through the vocabulary split: the
// embedding's scale, the norms' weight offset and the GeGLU's GELU.
// RUN: plan-opt %examples/models/tiny-gemma.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=tp=2,mbs=2 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=GEMMA
// GEMMA: exec.kernel "embedding" ins [@embed.tokens.weight, @tokens] outs [@embedding.0] params {scale = 8.000000e+00 : f64, vocab_parts = 2 : i64}
// GEMMA: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.attn_norm.weight] outs [@layers.0.rms_norm.1] params {eps = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64}
// GEMMA: exec.kernel "geglu" ins [@layers.0.linear.11, @layers.0.linear.12] outs [@layers.0.geglu.13] params {approximate = "tanh"}
// Dynamic NTK becomes the base for the plan's sequence: 32 positions past
// the pretrained 16 with factor 2 and 8 rotated channels give
// 10^4 * 3^(8/6); 16 positions keep 10^4.
// RUN: plan-opt %inputs/rope/llama-dynamic.json --seq-len=32 --global-batch=1 --pass-pipeline='builtin.module(partita-compile{topology=cpu:1 strategy=mbs=1 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=DYNAMIC
// DYNAMIC: exec.kernel "rotary" ins [{{.*}}] outs [{{.*}}] params {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 43267.487109222246 : f64}
// RUN: plan-opt %inputs/rope/llama-dynamic.json --seq-len=16 --global-batch=1 --pass-pipeline='builtin.module(partita-compile{topology=cpu:1 strategy=mbs=1 summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec)' 2>/dev/null | FileCheck %s --check-prefix=DYNAMIC-SHORT
// DYNAMIC-SHORT: exec.kernel "rotary" ins [{{.*}}] outs [{{.*}}] params {num_heads = 4 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64}

// The model is replaced by the programs; the module says what they run.
// CHECK: module attributes {{{.*}}exec.model = "tiny-llama", exec.seq_len = 128 : i64, tfm.optimizer = {
// CHECK-NOT: tfm.model

// Buffers first: inputs, parameters with their init rule and sharding,
// activations named after their layer and kernel.
// CHECK-LABEL: exec.program @rank0 pp_rank 0 {
// CHECK-NEXT: exec.buffer @tokens : tensor<2x128xi32> tokens
// CHECK-NEXT: exec.buffer @embed.tokens.weight : tensor<256x64xf32> param {init = "normal", init_std = 2.000000e-02 : f64, param = "embed.tokens.weight", sharding_dim = 0 : i64, sharding_parts = 2 : i64}
// CHECK-NEXT: exec.buffer @embedding.0 : tensor<2x128x64xf32> activation
// CHECK-NEXT: exec.buffer @layers.0.attn_norm.weight : tensor<64xf32> param {init = "ones", layer = 0 : i64, param = "layers.0.attn_norm.weight"}
// CHECK: exec.buffer @layers.0.attention.7.lse : tensor<2x2x128xf32> activation
// CHECK-NEXT: exec.buffer @layers.0.attn.out.weight : tensor<64x32xf32> param {{{.*}}sharding_dim = 1 : i64, sharding_parts = 2 : i64}

// The forward phase of chunk 0: the vocab-parallel embedding completed by
// an in-place all-reduce, column- then row-parallel projections.
// CHECK: exec.phase forward chunk 0 {
// CHECK-NEXT: exec.kernel "embedding" ins [@embed.tokens.weight, @tokens] outs [@embedding.0] params {vocab_parts = 2 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @embedding.0 -> @embedding.0
// CHECK-NEXT: exec.kernel "rms_norm" ins [@embedding.0, @layers.0.attn_norm.weight] outs [@layers.0.rms_norm.1] params {eps = 1.000000e-05 : f64} {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.rms_norm.1, @layers.0.attn.q.weight] outs [@layers.0.linear.2] {layer = 0 : i64}
// Attention keeps each query row's log-sum-exp, per local head, for its
// backward.
// CHECK: exec.kernel "attention" ins [@layers.0.rotary.5, @layers.0.rotary.6, @layers.0.linear.4] outs [@layers.0.attention.7, @layers.0.attention.7.lse] params {causal = true, num_heads = 2 : i64, num_kv_heads = 1 : i64} {layer = 0 : i64}
// CHECK-NEXT: exec.kernel "linear" ins [@layers.0.attention.7, @layers.0.attn.out.weight] outs [@layers.0.linear.8] {layer = 0 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @layers.0.linear.8 -> @layers.0.linear.8 {layer = 0 : i64}
// The stage's output leaves as this tp rank's half of the sequence.
// CHECK: exec.kernel "shard_slice" ins [@layers.0.add.15] outs [@layers.0.add.15.slice] params {dim = 1 : i64, group = "tp"}
// CHECK-NEXT: exec.send @layers.0.add.15.slice to next
// CHECK-NEXT: }
// CHECK-NEXT: }

// The last stage receives, and computes the loss without gathering the
// logits: row maxima and (sum of exponents, target logit) reduced over tp.
// CHECK-LABEL: exec.program @rank1 pp_rank 1 {
// CHECK-NEXT: exec.buffer @labels : tensor<2x128xi32> labels
// CHECK-NEXT: exec.buffer @recv.0 : tensor<2x128x64xf32> activation
// CHECK-NEXT: exec.buffer @recv.0.slice : tensor<2x64x64xf32> activation
// CHECK: exec.buffer @loss.max : tensor<2x128xf32> activation
// CHECK-NEXT: exec.buffer @loss.stats : tensor<2x128x2xf32> activation
// CHECK-NEXT: exec.buffer @loss : tensor<f32> scalar
// CHECK: exec.phase forward chunk 1 {
// CHECK-NEXT: exec.recv @recv.0.slice from prev
// CHECK-NEXT: exec.collective all_gather "tp" @recv.0.slice -> @recv.0 dim 1
// CHECK: exec.kernel "linear" ins [@rms_norm.16, @lm_head.weight] outs [@lm_head.17]
// CHECK-NEXT: exec.kernel "ce_max" ins [@lm_head.17] outs [@loss.max] params {vocab_parts = 2 : i64, vocab_size = 512 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @loss.max -> @loss.max reduce max
// CHECK-NEXT: exec.kernel "ce_stats" ins [@lm_head.17, @loss.max, @labels] outs [@loss.stats] params {vocab_parts = 2 : i64, vocab_size = 512 : i64}
// CHECK-NEXT: exec.collective all_reduce "tp" @loss.stats -> @loss.stats
// 1 / (8 sequences x 128 tokens): the micro-batches add up to the mean.
// CHECK-NEXT: exec.kernel "ce_loss" ins [@loss.max, @loss.stats] outs [@loss] accumulate [true] params {scale = 9.765625E-4 : f64}
// CHECK-NEXT: }

// SP: exec.collective reduce_scatter "tp" @embedding.0 -> @reduce_scatter.1 dim 1
// SP: exec.kernel "rms_norm" ins [@reduce_scatter.1, @layers.0.attn_norm.weight] outs [@layers.0.rms_norm.2]
// SP-NEXT: exec.collective all_gather "tp" @layers.0.rms_norm.2 -> @layers.0.all_gather.3 dim 1 {layer = 0 : i64}
// SP-NEXT: exec.kernel "linear" ins [@layers.0.all_gather.3, @layers.0.attn.q.weight]
