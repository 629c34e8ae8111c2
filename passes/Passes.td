//===- Passes.td - Partita compiler passes -----------------*- tablegen -*-===//

#ifndef PARTITA_PASSES
#define PARTITA_PASSES

include "mlir/Pass/PassBase.td"

def TfmSummarizeModel : Pass<"tfm-summarize-model", "mlir::ModuleOp"> {
  let summary = "Print each model's parameter count and step shape";
  let description = [{
    Reads every `tfm.model` in the module and prints, to standard error,
    what the compiler knows about it before any distribution decision: the
    number of layers (`tfm.block`s), hidden size, heads and KV heads,
    vocabulary, the exact parameter count (split into parameters inside
    blocks and outside them: embeddings, final norm, LM head), the bytes of
    one copy of the parameters in the model's dtype, and the tokens of one
    global step. The IR is not changed.

    Example: for `examples/models/llama3-8b.json` it prints

    ```
    model "llama3-8b": 32 blocks, hidden 4096, 32 heads (8 kv), vocab 128256
      parameters        8,030,261,248 (8.03 B) in 291 tensors
        in blocks       6,979,584,000
        outside blocks  1,050,677,248 (embeddings, final norm, LM head)
      parameter memory  16.06 GB as bf16
      step              512 sequences x 8,192 tokens = 4,194,304 tokens
    ```
  }];
  let dependentDialects = ["::partita::tfm::TfmDialect"];
}

def DistAttachTopology : Pass<"dist-attach-topology", "mlir::ModuleOp"> {
  let summary = "Attach a cluster topology to the module as #dist.topology";
  let description = [{
    Sets the module's `dist.topology` attribute from a preset (`NAME` or
    `NAME:N`: `dgx-a100`, `dgx-h100`, `hgx-h200`, `cpu`) or a topology JSON
    file (docs/topology.md), replacing any topology already there. Later
    passes read the attribute, so each is a pure function of its input IR.

    Before: `module { ... }`; after `--dist-attach-topology=topology=dgx-a100:2`:

    ```mlir
    module attributes {dist.topology = #dist.topology<"dgx-a100", nodes = 2,
        devices_per_node = 8, device = #dist.device<"A100-SXM-80GB", ...>,
        intra_node = #dist.link<nvswitch, ...>,
        inter_node = #dist.network<fat_tree, ...>>} { ... }
    ```
  }];
  let options = [
    Option<"topology", "topology", "std::string", /*default=*/"",
           "Preset NAME or NAME:N, or a .json topology file">
  ];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistSearchStrategy : Pass<"dist-search-strategy", "mlir::ModuleOp"> {
  let summary = "Choose the fastest parallel strategy that fits";
  let description = [{
    Searches data, tensor and pipeline parallelism, virtual pipeline stages,
    the ZeRO stage, micro-batch size, recomputation, sequence parallelism,
    the pipeline schedule and the cut of layers into stages for the
    module's `tfm.model` on its `#dist.topology` (one dgx-h100 node when
    there is none), pruning what cannot divide or fit and costing the rest
    with the cost model (docs/cost-model.md). Dimensions given in `strategy`
    are pinned. The winner becomes the module's `dist.strategy`; a table
    saying why it wins goes to stderr and `report` receives the JSON report
    (docs/search.md). When nothing fits, the pass fails with the smallest
    memory any configuration needs and what would make it fit.

    After `--dist-search-strategy`:

    ```mlir
    module attributes {dist.strategy = #dist.strategy<dp = 2, tp = 8, pp = 1,
        vpp = 1, zero = 1, ...>, dist.topology = ...} { ... }
    ```
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"",
           "Pinned dimensions, e.g. tp=8,zero=1 (same syntax as the cost "
           "report)">,
    Option<"objective", "objective", "std::string", /*default=*/"\"throughput\"",
           "throughput (fastest step) or memory (least memory per device)">,
    Option<"memoryCapGib", "memory-cap-gib", "double", /*default=*/"0",
           "Memory a device may use in GiB (0: all of it)">,
    Option<"allowTpAcrossNodes", "allow-tp-across-nodes", "bool",
           /*default=*/"false", "Let tensor-parallel groups span nodes">,
    Option<"freeGlobalBatch", "free-global-batch", "bool",
           /*default=*/"false",
           "Let the global batch move to the nearest multiple of dp * mbs">,
    Option<"topK", "top-k", "int64_t", /*default=*/"5",
           "Runners-up in the report">,
    Option<"report", "report", "std::string", /*default=*/"",
           "Write the JSON report to this file">,
    Option<"costParams", "cost-params", "std::string", /*default=*/"",
           "Override the cost model's physical parameters">,
    Option<"recordRunnersUp", "record-runners-up", "int64_t", "0",
           "Record this many runners-up, best first, as dist.runners_up "
           "for dist-confirm-strategy (the report still lists top-k)">,
    Option<"confirm", "confirm", "int64_t", "0",
           "Compile and simulate at least this many of the best candidates "
           "and keep the fastest whose memory plan fits, as "
           "dist-confirm-strategy does, before the report (0: the closed "
           "form's choice)">,
    Option<"overlap", "overlap", "bool", "true",
           "With confirm: compile the candidates with "
           "exec-overlap-communication">,
  ];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistConfirmStrategy : Pass<"dist-confirm-strategy", "mlir::ModuleOp"> {
  let summary = "Compile the search's best candidates and keep the one "
                "the simulator finds fastest that fits";
  let description = [{
    The closed-form estimate ranks the candidates; this pass checks the
    first `candidates` of them (the search's winner and its runners-up,
    `dist.runners_up`) on the plans they compile to: each is partitioned,
    staged, lowered, differentiated, overlapped, scheduled, given a memory
    plan and simulated (docs/simulator.md), and the fastest whose memory
    plan fits the device (or `memory-cap-gib`) becomes `dist.strategy`
    (with `objective=memory`, the one whose memory plan is smallest). It
    goes on down the runners-up while none fits, and, for throughput,
    while the last one checked promised better than the fastest that fits
    simulates, or within 1% of it: the closed form is a few percent off the
    simulation either way, and may have missed a cost of that plan that it
    does not of the next.
    Prints one line per candidate with both estimates and the memory plan's
    peak. When none of the search's candidates fits, its winner stays, with
    a warning.
  }];
  let options = [
    Option<"candidates", "candidates", "int64_t", "3",
           "How many of the best candidates to compile and simulate">,
    Option<"memoryCapGib", "memory-cap-gib", "double", "0",
           "Memory a device may use, in GiB (default: all of it)">,
    Option<"costParams", "cost-params", "std::string", "\"\"",
           "Cost-model parameter overrides, as plan-opt --cost-params">,
    Option<"overlap", "overlap", "bool", "true",
           "Compile the candidates with exec-overlap-communication">,
    Option<"objective", "objective", "std::string", "\"throughput\"",
           "What the search ranked by: throughput (keep the fastest that "
           "fits) or memory (keep the smallest that fits)">,
  ];
}

def DistEstimateCost : Pass<"dist-estimate-cost", "mlir::ModuleOp"> {
  let summary = "Report the predicted cost of a training step under a strategy";
  let description = [{
    For each `tfm.model`, costs one training step under the parallel
    configuration given by `strategy` (the `--strategy` syntax of plan-opt:
    `dp=64,tp=8,pp=2,vpp=1,zero=1,mbs=1,recompute=selective,sp=1,schedule=1f1b`;
    keys left out take the defaults of docs/cost-model.md) or, without
    `strategy`, by the module's `dist.strategy` (as chosen by
    `dist-search-strategy`) on the module's
    `#dist.topology`, or on one `dgx-h100` node when there is none (the
    report says so). The model is the analytical one of docs/cost-model.md.

    The report gives per-layer FLOPs and times per op class, the step's time
    breakdown (forward, backward, recomputation, bubble, communication per
    group and what of it is exposed), memory per device by kind, every
    collective with its algorithm, size and time, and the predicted step
    time, tokens/s, TFLOP/s per device and MFU. `format=text` prints a table
    to stderr; `format=json` writes the keys of docs/cost-model.md;
    `format=none` writes nothing. The prediction (the report's `predicted`
    object) is recorded as the module's `dist.predicted` attribute, which
    plan.json carries; a module without `dist.strategy` gets the costed
    strategy.
  }];
  let options = [
    Option<"strategy", "strategy", "std::string", /*default=*/"",
           "Parallel configuration, e.g. dp=8,tp=8,pp=2,zero=1">,
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Report format: text, json or none">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the report ('-': standard error)">,
    Option<"costParams", "cost-params", "std::string", /*default=*/"",
           "Override the cost model's physical parameters, e.g. "
           "gemm_efficiency=0.8,attention=unfused (docs/cost-model.md)">
  ];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistPartitionTensors : Pass<"dist-partition-tensors", "mlir::ModuleOp"> {
  let summary = "Apply data and tensor parallelism: local shapes and collectives";
  let description = [{
    Rewrites each `tfm.model` from global shapes to the program one rank
    runs for one micro-batch under the module's `#dist.strategy`:

    - the batch dimension becomes the micro-batch size;
    - tensor parallelism the Megatron-LM way: the q, k, v and MLP gate/up
      projections (whose input comes from a norm) are column-parallel, their
      weights split along the output dimension; the attention output and MLP
      down projections are row-parallel, split along the input dimension
      and followed by a `dist.all_reduce` over tp (then the bias, by
      `tfm.bias_add`); attention and rotary ops keep their share of the
      heads. With more tp ranks than key/value heads, each rank holds one
      kv head, replicated;
    - the token embedding becomes a `dist.vocab_embedding` over this rank's
      slice of the vocabulary followed by an all-reduce, the LM head a
      column-parallel projection onto the slice, and the loss a
      `dist.vocab_cross_entropy` (the full logits are never gathered);
    - with sequence parallelism (Korthikanti et al. 2022) the residual
      stream, norms and adds hold 1/tp of the sequence: one
      `dist.all_gather` before the projections that share an input (and
      before the LM head), a `dist.reduce_scatter` instead of each
      all-reduce; learned positions are added to the full sequence, which
      `dist.shard_slice` then splits;
    - every parameter gets its local shape and a `dist.sharding` attribute
      saying which slice of the global tensor it holds.

    Before (tp=2, mbs=1, one q projection of a 64-wide model):

    ```mlir
    %w = tfm.param "layers.0.attn.q.weight" normal(2.0e-02) : tensor<64x64xf32>
    %q = tfm.linear %n, %w : tensor<8x128x64xf32>, tensor<64x64xf32> -> tensor<8x128x64xf32>
    ```

    after:

    ```mlir
    %w = tfm.param "layers.0.attn.q.weight" normal(2.0e-02) {dist.sharding = #dist.sharding<axis = tp, dim = 0, parts = 2>} : tensor<32x64xf32>
    %q = tfm.linear %n, %w : tensor<1x128x64xf32>, tensor<32x64xf32> -> tensor<1x128x32xf32>
    ```

    A vocabulary tp does not divide is padded to a multiple of tp: the
    table and head weight get zero rows, `dist.padded_from` records the
    true size, and the loss ignores the padding. Other shapes a strategy
    does not divide (heads, kv heads, MLP width, batch, sequence) are
    errors at the op concerned. Pipeline stages
    are not this pass's: it partitions within a stage.
  }];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistSplitStages : Pass<"dist-split-stages", "mlir::ModuleOp"> {
  let summary = "Cut a model into the pipeline stages of its strategy";
  let description = [{
    Moves the ops of each `tfm.model` into `dist.stage` regions following
    the module's `#dist.strategy`: `stage_layers` gives the `tfm.block`s of
    each model chunk (chunk c runs on pipeline rank `c % pp`, so interleaved
    chunks alternate over the ranks); the embedding goes with the first
    chunk, the final norm, LM head and loss with the last. The activation
    crossing each cut is sent with `dist.send` and received with
    `dist.recv`. A parameter used by several chunks (the token embedding
    and a tied LM head) gets a copy in each, marked `dist.tied` (their
    gradients are summed across the chunks' ranks). With pp = 1 there is
    one stage.

    After `--dist-split-stages` (pp=2, one block per stage):

    ```mlir
    tfm.model @m {
    ^bb0(%tokens: tensor<1x8xi32>, %labels: tensor<1x8xi32>):
      dist.stage chunk 0 rank 0 {
        ... embedding, tfm.block 0 ...
        dist.send %x {peer = #dist.peer<next>} : tensor<1x8x64xf32>
        dist.stage_return
      }
      %loss = dist.stage chunk 1 rank 1 -> tensor<f32> {
        %x = dist.recv {peer = #dist.peer<prev>} : tensor<1x8x64xf32>
        ... tfm.block 1, final norm, LM head, loss ...
        dist.stage_return %l : tensor<f32>
      }
      tfm.yield %loss : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistOverlapCollectives
    : Pass<"dist-overlap-collectives", "mlir::ModuleOp"> {
  let summary = "Put forward collectives in async form (!dist.token) and "
                "wait for them as late as the data allows";
  let description = [{
    Runs after `dist-split-stages`. In every block (each pipeline stage,
    each `tfm.block`), the runs of pure ops between pipeline sends and
    receives are list-scheduled: among the ops whose operands are ready, a
    collective goes first, so that it starts as soon as its input exists;
    then ops that read only the block's inputs and parameters (the norms at
    the head of each branch of a parallel residual: backward then runs them
    last, and their input gradients' reductions overlap the other branch's
    backward); then ops that do not read a collective still in flight, in
    program order; the reader of the collective started first only when
    nothing else is left. A collective with compute between its start and its first
    reader becomes a `dist.async` whose `!dist.token` one `dist.wait`
    consumes right before that reader; `dist-lower-to-exec` lowers the pair
    to an `async` collective on the communication stream and an
    `exec.wait`. A block keeps its program order when nothing overlaps.

    What this overlaps: in blocks with a parallel residual (GPT-NeoX,
    GPT-J), the attention's output all-reduce (or reduce-scatter) with the
    MLP, and with sequence parallelism the MLP input's all-gather with the
    attention; in their backward (by exec-overlap-communication, thanks to
    this order) the MLP norm's input-gradient all-reduce with the
    attention's backward. In a sequential block every collective's result is read by
    the next op and it stays synchronous (overlapping those needs the GEMMs
    cut into chunks). Backward, ZeRO and optimizer collectives are built by
    `exec-build-backward`; `exec-overlap-communication` overlaps those.

    Before (one parallel-residual block, tp = 2):

    ```mlir
    %28 = tfm.linear %25, %26 : ...
    %29 = dist.all_reduce %28 {axis = #dist.axis<tp>} : tensor<1x32x64xf32>
    %30 = tfm.bias_add %29, %27 : ...
    %33 = tfm.layer_norm %h, %31, %32 : ...
    ...
    %40 = tfm.linear %37, %38 : ...
    ```

    After:

    ```mlir
    %28 = tfm.linear %25, %26 : ...
    %t = dist.async {
      %29 = dist.all_reduce %28 {axis = #dist.axis<tp>} : tensor<1x32x64xf32>
      dist.yield %29 : tensor<1x32x64xf32>
    }
    %33 = tfm.layer_norm %h, %31, %32 : ...
    ...
    %40 = tfm.linear %37, %38 : ...
    %w = dist.wait %t : tensor<1x32x64xf32>
    %30 = tfm.bias_add %w, %27 : ...
    ```

    Prints, per mesh axis, how many forward collectives became async.
  }];
  let options = [
    Option<"quiet", "quiet", "bool", "false", "Print nothing">,
  ];
  let dependentDialects = ["::partita::dist::DistDialect"];
}

def DistLowerToExec : Pass<"dist-lower-to-exec", "mlir::ModuleOp"> {
  let summary = "Lower the staged model to one exec.program per pipeline rank";
  let description = [{
    Runs after `dist-partition-tensors` and `dist-split-stages`. Every SSA
    value becomes a named `exec.buffer` (parameters by their name, with
    their init rule and sharding; activations as `<layer>.<kernel>.<n>`),
    every op a kernel or collective launch in the `forward` phase of its
    model chunk, on the program of the chunk's pipeline rank. Dist
    collectives keep their group; an all-reduce whose input nothing else
    reads runs in place. The loss becomes `ce_max`, `ce_stats` and
    `ce_loss` kernels with the tensor-parallel reductions between them
    (Megatron-LM's vocab-parallel cross-entropy), scaled so that the sum
    over micro-batches and data-parallel ranks is the mean over the global
    batch. The `tfm.model` is replaced by the programs.

    ```mlir
    exec.program @rank0 pp_rank 0 {
      exec.buffer @tokens : tensor<2x128xi32> tokens
      exec.buffer @"embed.tokens.weight" : tensor<256x64xf32> param {...}
      exec.buffer @embedding.0 : tensor<2x128x64xf32> activation
      exec.phase forward chunk 0 {
        exec.kernel "embedding" ins [@"embed.tokens.weight", @tokens]
            outs [@embedding.0] params {vocab_parts = 2 : i64}
        exec.collective all_reduce "tp" @embedding.0 -> @embedding.0
        ...
        exec.send @"layers.0.add.18" to next
      }
    }
    ```
  }];
  let dependentDialects = ["::partita::exec::ExecDialect"];
}

def ExecBuildBackward : Pass<"exec-build-backward", "mlir::ModuleOp"> {
  let summary = "Add the backward phases, gradient reduction and AdamW";
  let description = [{
    For every `forward` phase, a `backward` phase with a backward kernel for
    each forward launch in reverse order, accumulating activation gradients
    in `activation_grad` buffers and parameter gradients in `param_grad`
    buffers across micro-batches. Tensor parallelism: the gradient of a
    replicated activation read by column-parallel projections is
    all-reduced over `tp` (Megatron-LM's `f`); sequence-parallel all-gathers
    and reduce-scatters swap. Pipeline: received activations send their
    gradients back. Recomputation as the strategy says: `selective` re-runs
    each attention core before its backward, `full` each layer's forward,
    less the launches whose outputs no later backward launch reads (a
    layer's output projection into its residual output, whose kept copy the
    next layer's backward read before).

    Then a `step` phase: tied copies summed over `tied`, sequence-parallel
    norm and bias gradients over `tp`, replicated key/value projections over
    `tp_kv`; data parallelism by ZeRO stage (0: all-reduce; 1: reduce-scatter
    then an all-gather of the updated parameters; 2: reduce-scatter after
    each micro-batch's backward; 3: parameters held as shards, gathered
    before each layer's forward and backward); the global gradient norm
    (`grad_sumsq`, all-reduced over `world`, each gradient weighted by
    one over the ranks that hold a copy of it) and `clip_coefficient`;
    `adamw` on each parameter or shard; the loss summed over `dp`.

    Gradients (`param_grad`, `grad_shard`) are held, summed over
    micro-batches and reduced in `gradient-dtype`: `param`, the parameter's
    dtype, or `f32`, which below f32 is Megatron-LM's
    `accumulate_allreduce_grads_in_fp32` (twice the gradient memory and
    data-parallel bytes, no bf16 rounding of the sums). `partita-compile`
    takes it from the cost model's `gradient_bytes` (4: `f32`), so that the
    plan holds and moves what the search counted.
  }];
  let options = [
    Option<"gradientDtype", "gradient-dtype", "std::string",
           /*default=*/"\"param\"",
           "dtype of parameter gradients: param or f32">
  ];
  let dependentDialects = ["::partita::exec::ExecDialect"];
}

def ExecOverlapCommunication
    : Pass<"exec-overlap-communication", "mlir::ModuleOp"> {
  let summary = "Launch collectives asynchronously, as early as they may "
                "start, and wait for them as late as they may end";
  let description = [{
    First, data-parallel collectives of one kind that follow each other
    (gradient reductions as gradients become final, ZeRO-3 parameter
    gathers of a block) form buckets of at most `bucket-mb` MiB (default 25,
    PyTorch DDP's; a block's ZeRO-3 gathers are one bucket whatever their
    size): the members move down to the last one and carry a
    common `bucket` number (the simulator and the cost model charge a
    bucket as one collective of all its bytes, its latency once, and the
    CPU and CUDA runtimes run it so). Then, in every phase,
    each collective over `tp`, `tp_kv` or `dp` becomes
    `async`: its start moves up past launches that neither write its input
    nor touch its output, within one block of prefetch, but not above the
    previous collective of its group that is needed before it, nor above a
    pipeline send or receive (a group's collectives keep their order on its
    comm stream; other groups' run on their own streams, so it passes
    them). A bucket moves as one, in time for the member needed first. An
    `exec.wait` on its output goes right before
    the first later launch that touches its output or writes its input, or
    at the end of the phase. What this overlaps, in the plans the compiler
    builds:
    - ZeRO-3 parameter all-gathers with the previous block's compute, in
      forward and backward (a prefetch of one block);
    - ZeRO-2/3 gradient reduce-scatters with the rest of the backward pass;
    - ZeRO-1/2 parameter all-gathers after AdamW with the later parameters'
      AdamW.
    - ZeRO-0/1 gradient reductions, which run in the last micro-batch's
      backward (`last_micro_batch`), with the rest of that backward pass;
      their waits go to the step phase, before the first launch that needs
      the reduced gradient.
    A collective whose input the launch before it writes and whose output
    the launch after it reads stays synchronous: tensor-parallel
    all-reduces, all-gathers and reduce-scatters of the forward and
    backward passes (each sits between the GEMM that produces its input
    and the one that consumes its output).
    `tied` and `world` collectives involve ranks that run other programs
    and stay synchronous, so that every rank meets them in the same order.

    Prints, per group, how many collectives became asynchronous and why
    the others did not; the simulator (exec-simulate-plan) reports the
    communication time that stays exposed.
  }];
  let options = [
    Option<"quiet", "quiet", "bool", "false", "Print nothing">,
    Option<"bucketMb", "bucket-mb", "double", "25",
           "Largest bucket of data-parallel collectives, in MiB (a "
           "block's ZeRO-3 parameter gathers are one bucket regardless)">,
  ];
}

def ExecSchedulePipeline : Pass<"exec-schedule-pipeline", "mlir::ModuleOp"> {
  let summary = "Order forward and backward phases over the micro-batches";
  let description = [{
    Adds an `exec.schedule` to every program, in the strategy's schedule:
    `gpipe` (all forwards, then all backwards), `1f1b` (pp - rank - 1
    warm-up forwards, then one forward and one backward alternately, then
    the remaining backwards: at most pp - rank micro-batches in flight) or
    `interleaved` (Megatron-LM's interleaved 1F1B over the rank's model
    chunks, micro-batches in groups of pp). Gradients accumulate across
    micro-batches; the `step` phase runs once after the schedule.

    For pp = 2 and 4 micro-batches, rank 0 under `1f1b`:

    ```mlir
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run forward mb 1 chunk 0
      exec.run backward mb 0 chunk 0
      exec.run forward mb 2 chunk 0
      ...
    }
    ```
  }];
}

def ExecPlanMemory : Pass<"exec-plan-memory", "mlir::ModuleOp"> {
  let summary = "Give every buffer an offset in one arena per rank";
  let description = [{
    A static memory plan (docs/simulator.md, "Memory plan"). Each program's
    buffers fall in three classes:
    - *persistent*: parameters, their shards and gradients, optimizer
      states, scalars: live for the whole step, in the order declared,
      except that the buffers of a bucket of in-place all-reduces
      (ZeRO-0's gradients, exec-overlap-communication's `bucket`) go side
      by side in the bucket's order, so that the runtime reduces the
      bucket where it lies, with no copy through a workspace;
    - *kept per micro-batch*: tokens, labels, and activations (or their
      gradients) that carry a value from one run of a phase to another
      (forward to backward): one copy per micro-batch in flight under the
      schedule (`max_in_flight`);
    - *run-local*: activations, activation gradients and gathered ZeRO-3
      parameters that every phase using them writes before reading: live
      from that write to their last use in the run (to the wait of an
      asynchronous collective that reads them). They share one region,
      packed by size (largest first) at the lowest offset that does not
      overlap a buffer live at the same time in any phase.
    Sets `offset` (bytes, of the first copy, 64-byte aligned) and `copies`
    on every buffer and `arena_bytes` on every program. Outside the arena
    the runtime holds its own device memory: the CUDA context and
    workspaces, and the buffers of every NCCL communicator the program's
    collectives and pipeline messages use (docs/cost-model.md, "Memory per
    device"); counted when the module names its topology and strategy.
    Records the peaks over programs as `exec.memory` (the arena, the
    runtime's, and their sum per device), and prints each rank's next to
    the cost model's memory estimate (`dist.predicted`).
  }];
  let options = [
    Option<"quiet", "quiet", "bool", "false", "Print nothing">,
    Option<"costParams", "cost-params", "std::string", "\"\"",
           "Cost-model parameter overrides, as plan-opt --cost-params (the "
           "runtime's own memory: runtime_gib, nccl_collective_gib, "
           "nccl_p2p_gib)">,
  ];
}

def ExecSimulatePlan : Pass<"exec-simulate-plan", "mlir::ModuleOp"> {
  let summary = "Predict a step of the scheduled exec programs by simulation";
  let description = [{
    A discrete-event simulation of one training step (docs/simulator.md):
    each pipeline rank's program runs its schedule on a representative
    rank, kernels on the compute stream timed by the cost model's roofline,
    collectives on their group's comm stream timed by its collective model
    over the module's topology, pipeline messages matched in order between
    neighbouring ranks. Prints the predicted step time next to the
    closed-form estimate (`dist.predicted`), the busy time of each stream,
    the communication the compute stream waited for by group, and the
    bubble; records them as `exec.simulated` (exported to plan.json);
    optionally writes a Chrome trace.
  }];
  let options = [
    Option<"trace", "trace", "std::string", "\"\"",
           "Write a Chrome trace (Perfetto) of the simulated step here">,
    Option<"report", "report", "std::string", "\"\"",
           "Write the simulation report as JSON here">,
    Option<"quiet", "quiet", "bool", "false",
           "Print nothing; only record exec.simulated">,
    Option<"costParams", "cost-params", "std::string", "\"\"",
           "Cost-model parameter overrides, as plan-opt --cost-params">,
  ];
}

def ExecExportPlan : Pass<"exec-export-plan", "mlir::ModuleOp"> {
  let summary = "Write the exec programs as plan.json";
  let description = [{
    Writes the plan a runtime executes (docs/plan-format.md): the mesh and
    rank-to-device map, the groups, each pipeline rank's buffers, phases and
    schedule, parameter shards for checkpoints, optimizer settings and the
    predicted step time. The module is not changed.

    A plan whose ranks need more memory than the topology's device
    (`exec.memory`'s `device_bytes_per_rank`: the arena and the runtime's
    allowance) would fail on it; it is an error, naming both, unless
    `allow-unfit` asks for the file anyway.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"plan.json\"",
           "File to write the plan to ('-' for stdout)">,
    Option<"allowUnfit", "allow-unfit", "bool", /*default=*/"false",
           "Write the plan even when it needs more memory than the device "
           "has">,
  ];
}

#endif // PARTITA_PASSES
