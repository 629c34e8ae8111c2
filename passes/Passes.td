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

#endif // PARTITA_PASSES
