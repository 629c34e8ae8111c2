//===- DistOps.td - dist collectives and distributed ops ---*- tablegen -*-===//

#ifndef PARTITA_DIST_OPS
#define PARTITA_DIST_OPS

include "DistDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Dist_AxisTp : I32EnumAttrCase<"tp", 0>;
def Dist_AxisDp : I32EnumAttrCase<"dp", 1>;
def Dist_AxisPp : I32EnumAttrCase<"pp", 2>;
def Dist_AxisAll : I32EnumAttrCase<"all", 3>;
def Dist_MeshAxis : I32EnumAttr<"MeshAxis",
    "the communicator a collective runs on",
    [Dist_AxisTp, Dist_AxisDp, Dist_AxisPp, Dist_AxisAll]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}
def Dist_MeshAxisAttr : EnumAttr<Dist_Dialect, Dist_MeshAxis, "axis"> {
  let assemblyFormat = "`<` $value `>`";
}

def Dist_ShardingAttr : Dist_Attr<"Sharding", "sharding"> {
  let summary = "how a parameter is split over a mesh axis";
  let description = [{
    Dimension `dim` of the global tensor is cut into `parts` equal slices
    over the ranks of `axis`; rank r of an axis of size n holds slice
    `r * parts / n` (so `parts < n` replicates each slice `n / parts`
    times, as key/value heads are when tp exceeds them). A parameter whose
    `dim` was padded to a multiple of `parts` (the vocabulary) also carries
    `dist.padded_from`, the size before padding; the padding rows are zero
    and never indexed.

    `#dist.sharding<axis = tp, dim = 0, parts = 2>`
  }];
  let parameters = (ins "MeshAxis":$axis, "int64_t":$dim, "int64_t":$parts);
  let assemblyFormat = "`<` struct(params) `>`";
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_AnyTensor : RankedTensorOf<[BF16, F16, F32]>;

def Dist_AllReduceOp : Dist_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "sum of a tensor over the ranks of a mesh axis";
  let description = [{
    `%y = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<2x16x64xbf16>`
  }];
  let arguments = (ins Dist_AnyTensor:$input, Dist_MeshAxisAttr:$axis);
  let results = (outs Dist_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class Dist_ConcatOp<string mnemonic, string summaryText>
    : Dist_Op<mnemonic, [Pure]> {
  let summary = summaryText;
  let arguments = (ins Dist_AnyTensor:$input, Dist_MeshAxisAttr:$axis,
                       I64Attr:$dim);
  let results = (outs Dist_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dist_AllGatherOp : Dist_ConcatOp<"all_gather",
    "concatenation of every rank's tensor along `dim`"> {
  let description = [{
    The result's `dim` is the input's times the axis size.
  }];
}

def Dist_ReduceScatterOp : Dist_ConcatOp<"reduce_scatter",
    "sum over the ranks, each keeping its slice along `dim`"> {
  let description = [{
    The result's `dim` is the input's divided by the axis size.
  }];
}

def Dist_ShardSliceOp : Dist_ConcatOp<"shard_slice",
    "this rank's slice of a tensor every rank holds, along `dim`"> {
  let description = [{
    No communication: rank r of an axis of size n keeps slice r of n. Used to
    enter a sequence-parallel region from a replicated tensor.
  }];
}

def Dist_VocabEmbeddingOp : Dist_Op<"vocab_embedding", [Pure]> {
  let summary = "embedding lookup in this rank's slice of the vocabulary";
  let description = [{
    The table holds rows `[r * V/n, (r+1) * V/n)` of the vocabulary for rank
    r of `axis` (size n); tokens outside that range give zero rows, so an
    all-reduce over the axis completes the lookup. V may be the vocabulary
    padded to a multiple of n; no token indexes the padding rows. Rows are
    multiplied by `scale`, as `tfm.embedding`'s.
  }];
  let arguments = (ins Dist_AnyTensor:$table, RankedTensorOf<[I32, I64]>:$tokens,
                       Dist_MeshAxisAttr:$axis,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Dist_AnyTensor:$result);
  let assemblyFormat = [{
    $table `,` $tokens attr-dict `:` type($table) `,` type($tokens) `->`
    type($result)
  }];
}

def Dist_VocabCrossEntropyOp : Dist_Op<"vocab_cross_entropy", [Pure]> {
  let summary = "cross-entropy over logits split along the vocabulary";
  let description = [{
    Each rank of `axis` holds the logits of its vocabulary slice; the loss
    is computed with reductions of the row maxima and exponent sums over the
    axis (Megatron-LM's vocab-parallel cross-entropy): the full logits are
    never gathered. The mean over the local tokens, as a scalar f32. With
    `vocab_size`, the vocabulary was padded to a multiple of the axis size:
    logits of the padding entries (index vocab_size and above over all
    ranks) are ignored.
  }];
  let arguments = (ins Dist_AnyTensor:$logits, RankedTensorOf<[I32, I64]>:$labels,
                       Dist_MeshAxisAttr:$axis,
                       OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->`
    type($loss)
  }];
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

def Dist_PeerNext : I32EnumAttrCase<"next", 0>;
def Dist_PeerPrev : I32EnumAttrCase<"prev", 1>;
def Dist_Peer : I32EnumAttr<"Peer", "the neighbouring pipeline stage",
    [Dist_PeerNext, Dist_PeerPrev]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}
def Dist_PeerAttr : EnumAttr<Dist_Dialect, Dist_Peer, "peer"> {
  let assemblyFormat = "`<` $value `>`";
}

def Dist_StageOp : Dist_Op<"stage", [SingleBlock]> {
  let summary = "one model chunk of a pipeline: the ops one stage runs";
  let description = [{
    Model chunk `chunk` of a pipelined model, run by pipeline rank `rank`
    (`chunk % pp` when model chunks are interleaved over the ranks). Values
    cross between stages only through `dist.send` / `dist.recv`; a stage
    may read the model's tokens and labels. The last stage returns the loss.

    ```mlir
    dist.stage chunk 0 rank 0 {
      ...
      dist.send %x {peer = #dist.peer<next>} : tensor<1x128x64xf32>
      dist.stage_return
    }
    %loss = dist.stage chunk 1 rank 1 -> tensor<f32> {
      %x = dist.recv {peer = #dist.peer<prev>} : tensor<1x128x64xf32>
      ...
      dist.stage_return %l : tensor<f32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$chunk, I64Attr:$rank);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `chunk` $chunk `rank` $rank (`->` type($results)^)? attr-dict-with-keyword
    $body
  }];
  let hasRegionVerifier = 1;
}

def Dist_StageReturnOp : Dist_Op<"stage_return", [
    Pure, Terminator, HasParent<"StageOp">]> {
  let summary = "ends a pipeline stage, returning its results";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

def Dist_SendOp : Dist_Op<"send"> {
  let summary = "sends a tensor to the neighbouring pipeline stage";
  let arguments = (ins Dist_AnyTensor:$input, Dist_PeerAttr:$peer);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "receives a tensor from the neighbouring pipeline stage";
  let arguments = (ins Dist_PeerAttr:$peer);
  let results = (outs Dist_AnyTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives
//===----------------------------------------------------------------------===//

def Dist_TokenType : TypeDef<Dist_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "a collective in flight";
  let description = [{
    Produced by `dist.async`, consumed by the one `dist.wait` that ends the
    collective and gives its result.
  }];
}

def Dist_AsyncOp : Dist_Op<"async", [SingleBlock]> {
  let summary = "starts a collective that later ops overlap with";
  let description = [{
    The region holds one `dist.all_reduce`, `dist.all_gather` or
    `dist.reduce_scatter` and yields its result. The collective starts here,
    on the communication stream; its result exists only at the `dist.wait`
    of the token, which must follow in the same block, exactly once. The ops
    between the two run while the collective is in flight
    (`dist-overlap-collectives` places them).

    ```mlir
    %t = dist.async {
      %s = dist.all_reduce %x {axis = #dist.axis<tp>} : tensor<1x32x64xf32>
      dist.yield %s : tensor<1x32x64xf32>
    }
    %m = tfm.gelu %u : tensor<1x32x128xf32>   // overlaps the all-reduce
    %y = dist.wait %t : tensor<1x32x64xf32>
    ```
  }];
  let results = (outs Dist_TokenType:$token);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The collective the region holds.
    ::mlir::Operation *getCollective() { return &getBody().front().front(); }
  }];
}

def Dist_YieldOp : Dist_Op<"yield", [Pure, Terminator, HasParent<"AsyncOp">]> {
  let summary = "ends a dist.async region with the collective's result";
  let arguments = (ins Dist_AnyTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Dist_WaitOp : Dist_Op<"wait"> {
  let summary = "waits for a collective started by dist.async";
  let description = [{
    Blocks until the collective of `token` is done and returns its result.
  }];
  let arguments = (ins Dist_TokenType:$token);
  let results = (outs Dist_AnyTensor:$result);
  let assemblyFormat = "$token attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // PARTITA_DIST_OPS
