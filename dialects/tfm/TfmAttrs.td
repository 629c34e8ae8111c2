//===- TfmAttrs.td - tfm enums and attributes --------------*- tablegen -*-===//

#ifndef PARTITA_TFM_ATTRS
#define PARTITA_TFM_ATTRS

include "TfmDialect.td"
include "mlir/IR/EnumAttr.td"

def Tfm_InitZeros : I32EnumAttrCase<"zeros", 0>;
def Tfm_InitOnes : I32EnumAttrCase<"ones", 1>;
def Tfm_InitNormal : I32EnumAttrCase<"normal", 2>;
def Tfm_InitKind : I32EnumAttr<"InitKind",
    "how a parameter is initialised",
    [Tfm_InitZeros, Tfm_InitOnes, Tfm_InitNormal]> {
  let cppNamespace = "::partita::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_InitKindAttr : EnumAttr<Tfm_Dialect, Tfm_InitKind, "init"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_GeluExact : I32EnumAttrCase<"none", 0>;
def Tfm_GeluTanh : I32EnumAttrCase<"tanh", 1>;
def Tfm_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation used by gelu", [Tfm_GeluExact, Tfm_GeluTanh]> {
  let cppNamespace = "::partita::tfm";
  let genSpecializedAttr = 0;
}
def Tfm_GeluApproximationAttr
    : EnumAttr<Tfm_Dialect, Tfm_GeluApproximation, "gelu_approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_RopeScalingLinear : I32EnumAttrCase<"linear", 0>;
def Tfm_RopeScalingLlama3 : I32EnumAttrCase<"llama3", 1>;
def Tfm_RopeScalingKind : I32EnumAttr<"RopeScalingKind",
    "rotary frequency scaling rule",
    [Tfm_RopeScalingLinear, Tfm_RopeScalingLlama3]> {
  let cppNamespace = "::partita::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_RopeScalingAttr : Tfm_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "frequency scaling of rotary position embeddings";
  let description = [{
    How rotary frequencies are rescaled for context extension.

    - `linear`: every frequency divided by `factor` (position interpolation).
    - `llama3`: the Llama 3.1 rule: wavelengths shorter than
      `original_max_positions / high_freq_factor` are kept, those longer than
      `original_max_positions / low_freq_factor` are divided by `factor`, and
      the band between is interpolated smoothly.

    `low_freq_factor`, `high_freq_factor` and `original_max_positions` are
    used by `llama3` only.

    Examples:
    `#tfm.rope_scaling<linear, factor = 2.0>`,
    `#tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
    high_freq_factor = 4.0, original_max_positions = 8192>`
  }];
  let parameters = (ins
    "RopeScalingKind":$kind,
    APFloatParameter<"frequency divisor">:$factor,
    APFloatParameter<"llama3: low-frequency factor">:$low_freq_factor,
    APFloatParameter<"llama3: high-frequency factor">:$high_freq_factor,
    "int64_t":$original_max_positions
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // PARTITA_TFM_ATTRS
