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
def Tfm_RopeScalingYarn : I32EnumAttrCase<"yarn", 2>;
def Tfm_RopeScalingLongrope : I32EnumAttrCase<"longrope", 3>;
def Tfm_RopeScalingDynamic : I32EnumAttrCase<"dynamic", 4>;
def Tfm_RopeScalingKind : I32EnumAttr<"RopeScalingKind",
    "rotary frequency scaling rule",
    [Tfm_RopeScalingLinear, Tfm_RopeScalingLlama3, Tfm_RopeScalingYarn,
     Tfm_RopeScalingLongrope, Tfm_RopeScalingDynamic]> {
  let cppNamespace = "::partita::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_RopeScalingAttr : Tfm_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "frequency scaling of rotary position embeddings";
  let description = [{
    How rotary frequencies are rescaled for context extension. Frequency `i`
    of a head rotating `d` channels is `theta^(-2i/d)` before scaling.

    - `linear`: every frequency divided by `factor` (position interpolation).
    - `llama3`: the Llama 3.1 rule: wavelengths shorter than
      `original_max_positions / high_freq_factor` are kept, those longer than
      `original_max_positions / low_freq_factor` are divided by `factor`, and
      the band between is interpolated smoothly.
    - `yarn`: YaRN (Peng et al., 2023), as Hugging Face computes it. The
      frequencies that turn more than `beta_fast` times over
      `original_max_positions` positions are kept, those that turn fewer
      than `beta_slow` times are divided by `factor`, and those between are
      blended along a linear ramp over their index (with `truncate`, the
      ramp's ends are rounded outwards to whole indices).
    - `longrope`: LongRoPE (Phi-3): frequency `i` divided by
      `short_factor[i]`, or by `long_factor[i]` where the sequence is longer
      than `original_max_positions` (a rotary op's sequence dimension
      chooses).
    - `dynamic`: dynamic NTK scaling, as Hugging Face computes it: over a
      sequence of `s` positions longer than `original_max_positions` (`m`),
      the base `theta` grows to
      `theta * (factor * s / m - (factor - 1))^(d / (d - 2))`; over shorter
      ones it is kept (a rotary op's sequence dimension chooses).

    `yarn` and `longrope` also multiply the rotated channels (the cosines
    and sines) by `attention_factor`, so attention scores grow by its
    square; the importer resolves it from the config's keys
    (docs/model-spec.md).

    Fields a kind does not use are neither printed nor parsed:
    `low_freq_factor` and `high_freq_factor` are llama3's, `beta_fast`,
    `beta_slow` and `truncate` yarn's, `short_factor` and `long_factor`
    longrope's; `original_max_positions` belongs to all but linear, and
    `attention_factor` to yarn and longrope. longrope prints no `factor`.

    Examples:
    `#tfm.rope_scaling<linear, factor = 2.0>`,
    `#tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
    high_freq_factor = 4.0, original_max_positions = 8192>`,
    `#tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 32768,
    beta_fast = 32.0, beta_slow = 1.0, truncate = true,
    attention_factor = 1.1386>`,
    `#tfm.rope_scaling<longrope, original_max_positions = 4096,
    attention_factor = 1.19, short_factor = [1.0, 1.1],
    long_factor = [1.0, 4.2]>`,
    `#tfm.rope_scaling<dynamic, factor = 2.0, original_max_positions = 4096>`
  }];
  let parameters = (ins
    "RopeScalingKind":$kind,
    APFloatParameter<"frequency divisor">:$factor,
    APFloatParameter<"llama3: low-frequency factor">:$low_freq_factor,
    APFloatParameter<"llama3: high-frequency factor">:$high_freq_factor,
    "int64_t":$original_max_positions,
    APFloatParameter<"yarn: turns above which a frequency is kept">:$beta_fast,
    APFloatParameter<"yarn: turns below which a frequency is divided">:$beta_slow,
    "bool":$truncate,
    APFloatParameter<"yarn, longrope: magnitude of the rotated channels">:$attention_factor,
    OptionalParameter<"::mlir::DenseF64ArrayAttr",
                      "longrope: divisors up to original_max_positions">:$short_factor,
    OptionalParameter<"::mlir::DenseF64ArrayAttr",
                      "longrope: divisors beyond it">:$long_factor
  );
  let builders = [
    // Only the fields `kind` uses are taken from `fields`; the others keep
    // RopeScalingFields' defaults, as when parsed.
    AttrBuilder<(ins "RopeScalingKind":$kind,
                     "const RopeScalingFields &":$fields), [{
      RopeScalingFields used;
      auto take = [&](llvm::StringRef key, auto &field, const auto &value) {
        if (ropeScalingHasField(kind, key))
          field = value;
      };
      take("factor", used.factor, fields.factor);
      take("low_freq_factor", used.lowFreqFactor, fields.lowFreqFactor);
      take("high_freq_factor", used.highFreqFactor, fields.highFreqFactor);
      take("original_max_positions", used.originalMaxPositions,
           fields.originalMaxPositions);
      take("beta_fast", used.betaFast, fields.betaFast);
      take("beta_slow", used.betaSlow, fields.betaSlow);
      take("truncate", used.truncate, fields.truncate);
      take("attention_factor", used.attentionFactor, fields.attentionFactor);
      take("short_factor", used.shortFactor, fields.shortFactor);
      take("long_factor", used.longFactor, fields.longFactor);
      auto list = [&](llvm::ArrayRef<double> values) {
        return kind == RopeScalingKind::longrope
                   ? ::mlir::DenseF64ArrayAttr::get($_ctxt, values)
                   : ::mlir::DenseF64ArrayAttr();
      };
      return $_get($_ctxt, kind, llvm::APFloat(used.factor),
                   llvm::APFloat(used.lowFreqFactor),
                   llvm::APFloat(used.highFreqFactor),
                   used.originalMaxPositions, llvm::APFloat(used.betaFast),
                   llvm::APFloat(used.betaSlow), used.truncate,
                   llvm::APFloat(used.attentionFactor),
                   list(used.shortFactor), list(used.longFactor));
    }]>
  ];
  let extraClassDeclaration = [{
    /// The divisors longrope applies over a sequence of `seqLen` positions.
    ::llvm::ArrayRef<double> frequencyFactors(int64_t seqLen) const;
    /// The base dynamic scaling turns `rotaryDim` channels with over a
    /// sequence of `seqLen` positions, from the op's `theta`.
    double dynamicTheta(double theta, int64_t rotaryDim, int64_t seqLen) const;
  }];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // PARTITA_TFM_ATTRS
