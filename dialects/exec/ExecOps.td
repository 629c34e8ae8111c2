//===- ExecOps.td - The exec execution dialect -------------*- tablegen -*-===//
//
// The last IR before plan.json: per pipeline rank, a program of named
// buffers and of kernel, collective and point-to-point launches, grouped in
// phases, and the order in which the rank runs them over the micro-batches
// of a step.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_EXEC_OPS
#define PARTITA_EXEC_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Exec_Dialect : Dialect {
  let name = "exec";
  let cppNamespace = "::partita::exec";
  let useDefaultAttributePrinterParser = 1;
  let summary = "Per-rank programs of kernels, collectives and buffers";
  let description = [{
    One `exec.program` per pipeline rank: every data- and tensor-parallel
    rank of that pipeline rank runs the same program (SPMD) and finds its
    own slice from its position in the mesh groups. Buffers are named
    symbols with static shapes; launches name the buffers they read and
    write. A step runs the `exec.schedule` of the program (forward and
    backward phases of model chunks over micro-batches), then its `step`
    phase (gradient reduction and the optimizer).

    ```mlir
    exec.program @rank0 pp_rank 0 {
      exec.buffer @x : tensor<2x128x64xf32> activation
      exec.buffer @"layers.0.attn.q.weight" : tensor<32x64xf32> param
      exec.phase forward chunk 0 {
        exec.kernel "linear" ins [@x, @"layers.0.attn.q.weight"] outs [@q]
        ...
      }
      exec.schedule {
        exec.run forward mb 0 chunk 0
        exec.run backward mb 0 chunk 0
      }
    }
    ```
  }];
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

def Exec_BufferKind : I32EnumAttr<"BufferKind", "what a buffer holds", [
    I32EnumAttrCase<"tokens", 0>,
    I32EnumAttrCase<"labels", 1>,
    I32EnumAttrCase<"activation", 2>,
    I32EnumAttrCase<"activation_grad", 3>,
    I32EnumAttrCase<"param", 4>,
    I32EnumAttrCase<"param_shard", 5>,
    I32EnumAttrCase<"param_grad", 6>,
    I32EnumAttrCase<"grad_shard", 7>,
    I32EnumAttrCase<"optimizer_state", 8>,
    I32EnumAttrCase<"scalar", 9>,
    I32EnumAttrCase<"param_gathered", 10>]> {
  let cppNamespace = "::partita::exec";
}

def Exec_PhaseKind : I32EnumAttr<"PhaseKind", "a part of a training step", [
    I32EnumAttrCase<"forward", 0>,
    I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"step", 2>]> {
  let cppNamespace = "::partita::exec";
}

def Exec_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "a collective over a mesh group", [
    I32EnumAttrCase<"all_reduce", 0>,
    I32EnumAttrCase<"all_gather", 1>,
    I32EnumAttrCase<"reduce_scatter", 2>]> {
  let cppNamespace = "::partita::exec";
}

// The groups plan.json declares (its "groups"), which collectives run over.
def Exec_Group : I32EnumAttr<"Group", "a mesh group", [
    I32EnumAttrCase<"tp", 0>,
    I32EnumAttrCase<"tp_kv", 1>,
    I32EnumAttrCase<"dp", 2>,
    I32EnumAttrCase<"pp", 3>,
    I32EnumAttrCase<"tied", 4>,
    I32EnumAttrCase<"world", 5>]> {
  let cppNamespace = "::partita::exec";
}

def Exec_Reduction : I32EnumAttr<"Reduction", "how a collective combines", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::partita::exec";
}

def Exec_Peer : I32EnumAttr<"Peer", "the neighbouring pipeline rank", [
    I32EnumAttrCase<"next", 0>,
    I32EnumAttrCase<"prev", 1>]> {
  let cppNamespace = "::partita::exec";
}

// A kernel of the registry, whose list lives in plan/Kernels.cpp alone:
// printed and parsed by its registry name.
def Exec_KernelAttr : AttrDef<Exec_Dialect, "Kernel"> {
  let mnemonic = "kernel";
  let summary = "a kernel of the registry (plan/Kernels.h)";
  let parameters = (ins "::partita::plan::Kernel":$kernel);
  let hasCustomAssemblyFormat = 1;
  let returnType = "::partita::plan::Kernel";
  let convertFromStorage = "$_self.getKernel()";
  let constBuilderCall =
      "::partita::exec::KernelAttr::get($_builder.getContext(), $0)";
}

def Exec_BufferRefs : TypedArrayAttrBase<FlatSymbolRefAttr,
    "buffer references">;

def Exec_ProgramOp : Exec_Op<"program", [Symbol, SymbolTable,
    IsolatedFromAbove, NoTerminator, SingleBlock,
    DeclareOpInterfaceMethods<RegionKindInterface>]> {
  let summary = "the program every rank of one pipeline rank runs";
  let description = [{
    Holds the buffers (`exec.buffer`), the phases (`exec.phase`) and the
    schedule (`exec.schedule`) of pipeline rank `pp_rank`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$pp_rank);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `pp_rank` $pp_rank attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The buffer `name` of this program, or null.
    BufferOp lookupBuffer(mlir::StringAttr name);
  }];
}

def Exec_BufferOp : Exec_Op<"buffer", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a named buffer of static shape";
  let description = [{
    `kind` says what the buffer holds and so its lifetime: `tokens`,
    `labels`, `activation` and `activation_grad` exist once per micro-batch
    in flight; `param`, `param_shard`, `param_grad`, `grad_shard`,
    `optimizer_state` and `scalar` once per rank; `param_gathered` is a
    whole (tensor-parallel local) parameter gathered from its ZeRO-3 shards
    for one layer's forward or backward. Gradients (`param_grad`,
    `grad_shard`) and scalars are zero at the start of a step.

    Parameter buffers carry what a checkpoint and the initialiser need:
    `param` (the parameter's name), its `init` rule, its tensor-parallel
    `sharding` and `padded_from` (a padded vocabulary), `tied` for the copy
    of a parameter shared by two pipeline stages, and `dp_shard` when the
    buffer holds only this rank's flat 1/dp slice (ZeRO). Gradient and
    optimizer-state buffers carry `param` and `dp_shard` too. A parameter
    of a decoder layer carries its `layer`: only that layer's launches read
    it (the optimizer's aside).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyRankedTensor>:$type,
                       Exec_BufferKind:$kind,
                       OptionalAttr<StrAttr>:$param,
                       OptionalAttr<StrAttr>:$init,
                       OptionalAttr<F64Attr>:$init_std,
                       OptionalAttr<I64Attr>:$sharding_dim,
                       OptionalAttr<I64Attr>:$sharding_parts,
                       OptionalAttr<I64Attr>:$padded_from,
                       UnitAttr:$tied,
                       UnitAttr:$dp_shard,
                       OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name `:` $type $kind attr-dict";
  let builders = [
    OpBuilder<(ins "llvm::StringRef":$name, "mlir::Type":$type,
                   "BufferKind":$kind), [{
      build($_builder, $_state, name, llvm::cast<mlir::RankedTensorType>(type),
            kind, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
            /*tied=*/false, /*dp_shard=*/false, /*layer=*/nullptr);
    }]>
  ];
  let extraClassDeclaration = [{
    mlir::RankedTensorType getTensorType() {
      return llvm::cast<mlir::RankedTensorType>(getType());
    }
    /// Elements of the local tensor.
    int64_t getNumElements() { return getTensorType().getNumElements(); }
  }];
}

def Exec_PhaseOp : Exec_Op<"phase", [NoTerminator, SingleBlock,
    HasParent<"ProgramOp">]> {
  let summary = "the launches of one part of a step";
  let description = [{
    `forward chunk c` / `backward chunk c`: one micro-batch through model
    chunk c (run as the schedule says); `step`: once per step, after every
    micro-batch: gradient reduction, the global gradient norm and the
    optimizer. Launches run in order.
  }];
  let arguments = (ins Exec_PhaseKind:$kind, OptionalAttr<I64Attr>:$chunk);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind (`chunk` $chunk^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Exec_KernelOp : Exec_Op<"kernel", [HasParent<"PhaseOp">]> {
  let summary = "launches a kernel on the compute stream";
  let description = [{
    Runs `kernel` (one of the registry's, listed in docs/plan-format.md) reading
    `ins` and writing `outs`; `params` are the kernel's parameters. An
    output listed in `accumulate` is added to instead of overwritten.
  }];
  let arguments = (ins Exec_KernelAttr:$kernel, Exec_BufferRefs:$ins,
                       Exec_BufferRefs:$outs,
                       OptionalAttr<DenseBoolArrayAttr>:$accumulate,
                       OptionalAttr<DictionaryAttr>:$params);
  let assemblyFormat = [{
    custom<KernelName>($kernel) `ins` $ins `outs` $outs
    (`accumulate` $accumulate^)? (`params` $params^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The kernel's registry name.
    llvm::StringRef getKernelName() {
      return ::partita::plan::name(getKernel());
    }
  }];
}

def Exec_CollectiveOp : Exec_Op<"collective", [HasParent<"PhaseOp">]> {
  let summary = "launches a collective over a mesh group";
  let description = [{
    `all_reduce` of `input` into `output` (the same buffer: in place);
    `all_gather` / `reduce_scatter` concatenate / split along `dim`, or,
    without `dim`, over the flattened buffers (the full buffer padded to a
    multiple of the group size, each rank owning one contiguous slice).
    `group` names a mesh group: `tp`, `dp`, `world`, `tied` (the first and
    last pipeline ranks) or `tp_kv` (tensor-parallel ranks that hold the same
    key/value heads). With `accumulate`, the result is added to `output`
    (not for `all_reduce`, which is in place).

    A collective runs on the comm stream. Without `async` the compute
    stream waits for it at once; with `async` the launches after it run
    while it is in flight, until the `exec.wait` on its `output` later in
    the same phase. No launch in between may write its `input` or touch its
    `output` (the verifier checks).

    With `last_micro_batch` (in a `backward` phase) it runs only in the
    run of the last micro-batch, when the gradients it reduces are final;
    an `async` one is then waited for in the `step` phase.

    With `next_step` (an `async` collective of the `step` phase) it is
    waited for in the next step, by an `exec.wait ... first_micro_batch` in
    a `forward` phase before the first launch that needs it: ZeRO-1/2's
    parameter gathers then overlap the next step's first layers. Nothing
    after it in the step phase may touch its buffers.
  }];
  let arguments = (ins Exec_CollectiveKind:$kind, Exec_Group:$group,
                       FlatSymbolRefAttr:$input, FlatSymbolRefAttr:$output,
                       DefaultValuedAttr<Exec_Reduction, "Reduction::sum">:$reduction,
                       OptionalAttr<I64Attr>:$dim, UnitAttr:$accumulate,
                       UnitAttr:$async, UnitAttr:$last_micro_batch,
                       UnitAttr:$next_step);
  let assemblyFormat = [{
    $kind custom<GroupName>($group) $input `->` $output
    (`reduce` $reduction^)?
    (`dim` $dim^)? (`accumulate` $accumulate^)? (`async` $async^)?
    (`last_micro_batch` $last_micro_batch^)? (`next_step` $next_step^)?
    attr-dict
  }];
  let builders = [
    OpBuilder<(ins "CollectiveKind":$kind, "Group":$group,
                   "mlir::FlatSymbolRefAttr":$input,
                   "mlir::FlatSymbolRefAttr":$output,
                   "Reduction":$reduction, "std::optional<int64_t>":$dim,
                   "bool":$accumulate), [{
      build($_builder, $_state,
            CollectiveKindAttr::get($_builder.getContext(), kind),
            GroupAttr::get($_builder.getContext(), group), input, output,
            ReductionAttr::get($_builder.getContext(), reduction),
            dim ? $_builder.getI64IntegerAttr(*dim) : mlir::IntegerAttr(),
            accumulate ? $_builder.getUnitAttr() : mlir::UnitAttr(),
            mlir::UnitAttr(), mlir::UnitAttr(), mlir::UnitAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Exec_WaitOp : Exec_Op<"wait", [HasParent<"PhaseOp">]> {
  let summary = "waits for the asynchronous collective into a buffer";
  let description = [{
    The compute stream waits until the `async` collective whose output is
    `buffer`, launched earlier in the same phase, has completed.

    With `first_micro_batch` (in a `forward` phase) it waits, in the first
    micro-batch's run, for the `next_step` collective the previous step's
    `step` phase started into `buffer`; in the first step there is none,
    and it does nothing.
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer,
                       UnitAttr:$first_micro_batch);
  let assemblyFormat =
      "$buffer (`first_micro_batch` $first_micro_batch^)? attr-dict";
}

def Exec_SendOp : Exec_Op<"send", [HasParent<"PhaseOp">]> {
  let summary = "sends a buffer to the neighbouring pipeline rank";
  let arguments = (ins FlatSymbolRefAttr:$buffer, Exec_Peer:$peer);
  let assemblyFormat = "$buffer `to` $peer attr-dict";
  let builders = [
    OpBuilder<(ins "mlir::FlatSymbolRefAttr":$buffer, "Peer":$peer), [{
      build($_builder, $_state, buffer,
            PeerAttr::get($_builder.getContext(), peer));
    }]>
  ];
}

def Exec_RecvOp : Exec_Op<"recv", [HasParent<"PhaseOp">]> {
  let summary = "receives a buffer from the neighbouring pipeline rank";
  let arguments = (ins FlatSymbolRefAttr:$buffer, Exec_Peer:$peer);
  let assemblyFormat = "$buffer `from` $peer attr-dict";
  let builders = [
    OpBuilder<(ins "mlir::FlatSymbolRefAttr":$buffer, "Peer":$peer), [{
      build($_builder, $_state, buffer,
            PeerAttr::get($_builder.getContext(), peer));
    }]>
  ];
}

def Exec_ScheduleOp : Exec_Op<"schedule", [NoTerminator, SingleBlock,
    HasParent<"ProgramOp">]> {
  let summary = "the order of forward and backward phases over micro-batches";
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Exec_RunOp : Exec_Op<"run", [HasParent<"ScheduleOp">]> {
  let summary = "runs one phase of one model chunk on one micro-batch";
  let arguments = (ins Exec_PhaseKind:$phase, I64Attr:$micro_batch,
                       I64Attr:$chunk);
  let assemblyFormat = "$phase `mb` $micro_batch `chunk` $chunk attr-dict";
}

#endif // PARTITA_EXEC_OPS
