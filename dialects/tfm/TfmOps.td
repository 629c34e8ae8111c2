//===- TfmOps.td - tfm operations --------------------------*- tablegen -*-===//

#ifndef PARTITA_TFM_OPS
#define PARTITA_TFM_OPS

include "TfmDialect.td"
include "TfmAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Structure: model, block, yield
//===----------------------------------------------------------------------===//

def Tfm_ModelOp : Tfm_Op<"model", [
    IsolatedFromAbove, Symbol, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "one training step of a model: tokens and labels to a loss";
  let description = [{
    Holds the forward graph of one training step. The single block takes the
    global batch of token ids and of labels, both `tensor<BxSxi32>` (or
    i64), and ends with a `tfm.yield` of the scalar f32 loss.

    Parameter names (`tfm.param`) are unique within a model.

    ```mlir
    tfm.model @gpt2 {
    ^bb0(%tokens: tensor<512x1024xi32>, %labels: tensor<512x1024xi32>):
      ...
      tfm.yield %loss : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::Value getTokens() { return getBodyBlock().getArgument(0); }
    ::mlir::Value getLabels() { return getBodyBlock().getArgument(1); }
  }];
}

def Tfm_BlockOp : Tfm_Op<"block", [
    IsolatedFromAbove, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "one decoder layer: the unit pipeline stages cut at";
  let description = [{
    A decoder layer. The region owns the layer's parameters and receives its
    inputs (normally the residual stream) as block arguments; `tfm.yield`
    returns the outputs. `layer` is the index of the layer in the model.

    ```mlir
    %y = tfm.block 3 (%x) : (tensor<8x128x64xf32>) -> tensor<8x128x64xf32> {
    ^bb0(%h: tensor<8x128x64xf32>):
      ...
      tfm.yield %r : tensor<8x128x64xf32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$layer, Variadic<Tfm_FloatTensor>:$inputs);
  let results = (outs Variadic<Tfm_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $layer ` ` `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
    $body
  }];
  let hasRegionVerifier = 1;
}

def Tfm_YieldOp : Tfm_Op<"yield", [
    Pure, Terminator, ParentOneOf<["ModelOp", "BlockOp"]>]> {
  let summary = "returns the values of a block or model";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Tfm_ParamOp : Tfm_Op<"param", [Pure]> {
  let summary = "a named trainable parameter";
  let description = [{
    Declares a trainable tensor with its global shape, element type and
    initialisation rule: `zeros`, `ones`, or `normal(std)` (mean 0).
    A use of the same value in two places ties the weights (for example the
    token embedding and the LM head).

    ```mlir
    %w = tfm.param "layers.0.attn.q.weight" normal(2.000000e-02) : tensor<4096x4096xbf16>
    %g = tfm.param "layers.0.attn_norm.weight" ones : tensor<4096xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$param_name, Tfm_InitKindAttr:$init,
                       OptionalAttr<F64Attr>:$std);
  let results = (outs Tfm_FloatTensor:$result);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of scalar elements of the parameter.
    int64_t getNumElements();
  }];
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

def Tfm_EmbeddingOp : Tfm_Op<"embedding", [Pure]> {
  let summary = "token embedding lookup";
  let description = [{
    `result[b, s, :] = scale * table[tokens[b, s], :]` with
    `table : tensor<VxHxT>`. Gemma scales its embeddings by
    `sqrt(hidden)`; a tied LM head reads the table unscaled.
  }];
  let arguments = (ins Tfm_FloatTensor:$table, Tfm_TokenTensor:$tokens,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $tokens attr-dict `:` type($table) `,` type($tokens) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_PositionEmbeddingOp : Tfm_Op<"position_embedding", [Pure]> {
  let summary = "adds learned absolute position embeddings";
  let description = [{
    `result[b, s, :] = input[b, s, :] + table[s, :]`; the table has at least
    as many rows as the sequence is long.
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$table);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $table attr-dict `:` type($input) `,` type($table) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_RotaryOp : Tfm_Op<"rotary", [Pure]> {
  let summary = "rotary position embedding (RoPE) of queries or keys";
  let description = [{
    Rotates the first `rotary_dim` channels of each of the `num_heads` heads
    of `input : tensor<BxSx(num_heads*head_dim)>` by position-dependent
    angles with base `theta`. `rotary_dim < head_dim` is partial rotary
    (GPT-NeoX). An optional `scaling` rescales the frequencies
    (`#tfm.rope_scaling`: linear, Llama 3.1's, YaRN or LongRoPE, whose lists
    hold `rotary_dim / 2` factors).

    ```mlir
    %q2 = tfm.rotary %q {num_heads = 32 : i64, rotary_dim = 128 : i64, theta = 5.000000e+05 : f64}
        : tensor<8x128x4096xbf16> -> tensor<8x128x4096xbf16>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, I64Attr:$num_heads,
                       I64Attr:$rotary_dim, F64Attr:$theta,
                       OptionalAttr<Tfm_RopeScalingAttr>:$scaling);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation and linear layers
//===----------------------------------------------------------------------===//

def Tfm_LayerNormOp : Tfm_Op<"layer_norm", [Pure]> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + eps) * weight (+ bias)`; the bias is optional.
    Statistics are taken over spans of the weight's length along the last
    dimension: the whole of it, or each head of a per-head norm
    (`tensor<2x128x512xf32>` with `weight : tensor<64xf32>` normalises 8
    heads of 64 channels, each with the same weight).
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_RmsNormOp : Tfm_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * (weight_offset + weight)`, over spans of
    the weight's length along the last dimension, as `tfm.layer_norm`: a
    weight of one head's width normalises each head (Qwen3's query and key
    norms). Gemma keeps its weights as offsets from one (`weight_offset =
    1`, the weights initialised to zero), so that weight decay pulls the
    scale towards one rather than zero.

    ```mlir
    %qn = tfm.rms_norm %q, %w {eps = 1.000000e-06 : f64}
        : tensor<8x128x4096xbf16>, tensor<128xbf16> -> tensor<8x128x4096xbf16>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       F64Attr:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_offset);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_LinearOp : Tfm_Op<"linear", [Pure]> {
  let summary = "dense layer y = x W^T (+ b)";
  let description = [{
    `weight : tensor<OUTxIN>` (the PyTorch layout), optional
    `bias : tensor<OUT>`; the last dimension of the input goes from IN to
    OUT.
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
                       Optional<Tfm_FloatTensor>:$bias);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_LmHeadOp : Tfm_Op<"lm_head", [Pure]> {
  let summary = "projection of hidden states to vocabulary logits";
  let description = [{
    `logits = input W^T` with `weight : tensor<VxH>`. The weight may be the
    token embedding table (tied embeddings). Kept apart from `tfm.linear` so
    that partitioning can make it vocab-parallel together with the loss.
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Tfm_AttentionOp : Tfm_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention core (MHA, GQA, MQA)";
  let description = [{
    `q : tensor<BxSx(num_heads*head_dim)>`,
    `k, v : tensor<BxSx(num_kv_heads*head_dim)>`; each group of
    `num_heads / num_kv_heads` query heads shares one key/value head
    (`num_kv_heads == num_heads`: MHA, `1`: MQA). Scores are scaled by
    `1/sqrt(head_dim)`; `causal` masks future positions; an optional
    `window` limits each query to the last `window` positions (sliding
    window attention).

    ```mlir
    %o = tfm.attention %q, %k, %v {causal, num_heads = 32 : i64, num_kv_heads = 8 : i64}
        : tensor<8x128x4096xbf16>, tensor<8x128x1024xbf16>, tensor<8x128x1024xbf16> -> tensor<8x128x4096xbf16>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$query, Tfm_FloatTensor:$key,
                       Tfm_FloatTensor:$value, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` type($query) `,` type($key) `,`
    type($value) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Tfm_UnaryElementwiseOp<string mnemonic, string summaryText>
    : Tfm_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = summaryText;
  let arguments = (ins Tfm_FloatTensor:$input);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tfm_GeluOp : Tfm_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = none` is the exact erf form; `tanh` the GPT-2 form.
  }];
  let arguments = (ins Tfm_FloatTensor:$input,
      DefaultValuedAttr<Tfm_GeluApproximationAttr,
                        "GeluApproximation::none">:$approximate);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tfm_SiluOp : Tfm_UnaryElementwiseOp<"silu", "x * sigmoid(x)">;

def Tfm_SwigluOp : Tfm_Op<"swiglu", [Pure, SameOperandsAndResultType]> {
  let summary = "gated activation silu(gate) * up";
  let description = [{
    The gate of a gated MLP (Llama, Mistral, Qwen2): the gate and up
    projections are separate `tfm.linear` ops feeding this op.
  }];
  let arguments = (ins Tfm_FloatTensor:$gate, Tfm_FloatTensor:$up);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Tfm_GegluOp : Tfm_Op<"geglu", [Pure, SameOperandsAndResultType]> {
  let summary = "gated activation gelu(gate) * up";
  let description = [{
    The gate of a GeGLU MLP (Gemma: the tanh form), as `tfm.swiglu` with
    `tfm.gelu`'s `approximate` in place of silu.
  }];
  let arguments = (ins Tfm_FloatTensor:$gate, Tfm_FloatTensor:$up,
      DefaultValuedAttr<Tfm_GeluApproximationAttr,
                        "GeluApproximation::none">:$approximate);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Tfm_BiasAddOp : Tfm_Op<"bias_add", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "adds a bias vector along the last dimension";
  let description = [{
    `result[..., i] = input[..., i] + bias[i]`. Partitioning splits a
    row-parallel linear's bias off, to be added once after the reduction.
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$bias);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def Tfm_AddOp : Tfm_Op<"add", [Pure, SameOperandsAndResultType]> {
  let summary = "residual add of two or more tensors";
  let description = [{
    Elementwise sum. Three operands express the parallel attention + MLP
    residual of GPT-NeoX: `x + attn(ln1(x)) + mlp(ln2(x))`.
  }];
  let arguments = (ins Variadic<Tfm_FloatTensor>:$inputs);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Tfm_CrossEntropyOp : Tfm_Op<"cross_entropy", [Pure]> {
  let summary = "mean token cross-entropy of logits against labels";
  let description = [{
    Mean over all `B*S` tokens of `-log softmax(logits)[label]`, as a scalar
    f32 whatever the logits' type.
  }];
  let arguments = (ins Tfm_FloatTensor:$logits, Tfm_TokenTensor:$labels);
  let results = (outs Tfm_LossTensor:$loss);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->`
    type($loss)
  }];
  let hasVerifier = 1;
}

#endif // PARTITA_TFM_OPS
