//===- TfmDialect.td - The tfm model-graph dialect ---------*- tablegen -*-===//
//
// The `tfm` dialect describes one training step's forward graph of a
// decoder-only Transformer with global (unsharded) shapes.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_TFM_DIALECT
#define PARTITA_TFM_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Tfm_Dialect : Dialect {
  let name = "tfm";
  let cppNamespace = "::partita::tfm";
  let summary = "Transformer model graphs with global shapes";
  let description = [{
    The `tfm` dialect holds what a user declares about a model: its named
    trainable parameters and the forward graph of one training step, from
    token ids to a scalar loss, with global (unsharded) tensor shapes. The
    leading two dimensions of every activation are the global batch (in
    sequences) and the sequence length.

    A `tfm.model` owns the graph. Each decoder layer sits in a `tfm.block`
    region that owns its parameters, so that pipeline stages can be cut
    between blocks. Later passes read the graph to cost it, search a
    strategy, and partition it; nothing here says how it is distributed.

    Example (one layer of a tiny Llama-style model):

    ```mlir
    tfm.model @tiny {
    ^bb0(%tokens: tensor<8x128xi32>, %labels: tensor<8x128xi32>):
      %wte = tfm.param "embed.weight" normal(2.000000e-02) : tensor<512x64xf32>
      %x = tfm.embedding %wte, %tokens : tensor<512x64xf32>, tensor<8x128xi32> -> tensor<8x128x64xf32>
      %y = tfm.block 0 (%x) : (tensor<8x128x64xf32>) -> tensor<8x128x64xf32> {
      ^bb0(%h: tensor<8x128x64xf32>):
        ...
        tfm.yield %out : tensor<8x128x64xf32>
      }
      ...
      tfm.yield %loss : tensor<f32>
    }
    ```

    The module may carry AdamW's settings to the plan in a `tfm.optimizer`
    dictionary (`lr`, `min_lr`, `warmup_steps`, `decay_steps`, `decay`,
    `beta1`, `beta2`, `eps`, `weight_decay`, `clip_norm`; those left out
    take their defaults). The dialect checks each against the range a
    model spec's `optimizer` takes, and refuses other `tfm.` attributes.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 0;
  // `tfm.optimizer` on the module: AdamW's settings, checked as a model
  // spec's are.
  let hasOperationAttrVerify = 1;
}

class Tfm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tfm_Dialect, mnemonic, traits>;

class Tfm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tfm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// Element types a model may be trained in.
def Tfm_FloatTensor : RankedTensorOf<[BF16, F16, F32]>;
def Tfm_TokenTensor : RankedTensorOf<[I32, I64]>;
def Tfm_LossTensor : 0DTensorOf<[F32]>;

#endif // PARTITA_TFM_DIALECT
