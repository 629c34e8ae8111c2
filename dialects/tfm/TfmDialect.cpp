//===- TfmDialect.cpp - The tfm model-graph dialect -----------------------===//

#include "dialects/tfm/TfmDialect.h"
#include "dialects/tfm/TfmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "support/Format.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace partita::tfm;

#include "dialects/tfm/TfmDialect.cpp.inc"
#include "dialects/tfm/TfmEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/tfm/TfmAttrs.cpp.inc"

void TfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/tfm/TfmOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/tfm/TfmAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// tfm.optimizer
//===----------------------------------------------------------------------===//

const OptimizerRealRange *partita::tfm::findOptimizerReal(StringRef key) {
  for (const OptimizerRealRange &range : kOptimizerReals)
    if (range.key == key)
      return &range;
  return nullptr;
}

LogicalResult TfmDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == kStepMissingAttrName) {
    if (!isa<ModuleOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError("'")
             << kStepMissingAttrName << "' must be a unit attribute on the "
             << "module";
    return success();
  }
  if (attr.getName() != kOptimizerAttrName)
    return op->emitError("unknown tfm attribute '")
           << attr.getName().getValue() << "'";
  auto settings = dyn_cast<DictionaryAttr>(attr.getValue());
  if (!isa<ModuleOp>(op) || !settings)
    return op->emitError("'")
           << kOptimizerAttrName << "' must be a dictionary on the module";
  auto fail = [&](StringRef key) {
    return op->emitError("'") << kOptimizerAttrName << "' " << key << ": ";
  };
  std::optional<double> lr, minLr;
  for (NamedAttribute setting : settings) {
    StringRef key = setting.getName().getValue();
    Attribute value = setting.getValue();
    if (llvm::is_contained(kOptimizerStepCounts, key)) {
      auto steps = dyn_cast<IntegerAttr>(value);
      if (!steps || !steps.getType().isSignlessInteger(64) ||
          steps.getInt() < 0)
        return fail(key) << "expected a count of steps (i64, at least 0), got "
                         << value;
    } else if (key == "decay") {
      auto decay = dyn_cast<StringAttr>(value);
      if (!decay || !llvm::is_contained(kOptimizerDecays, decay.getValue()))
        return fail(key) << "expected \"cosine\", \"linear\" or "
                            "\"constant\", got "
                         << value;
    } else if (const OptimizerRealRange *range = findOptimizerReal(key)) {
      auto real = dyn_cast<FloatAttr>(value);
      double v = real ? real.getValueAsDouble() : 0;
      if (!real || !range->contains(v))
        return fail(key) << "expected a number in "
                         << (range->minExclusive ? "(" : "[")
                         << formatNumber(range->min) << ", "
                         << formatNumber(range->max)
                         << (range->maxExclusive ? ")" : "]") << ", got "
                         << value;
      if (key == "lr")
        lr = v;
      else if (key == "min_lr")
        minLr = v;
    } else {
      return fail(key) << "not a setting of AdamW";
    }
  }
  if (lr && minLr && *minLr > *lr)
    return fail("min_lr") << formatNumber(*minLr) << " exceeds lr "
                          << formatNumber(*lr);
  return success();
}

//===----------------------------------------------------------------------===//
// RopeScalingAttr
//===----------------------------------------------------------------------===//

// #tfm.rope_scaling<linear, factor = 2.0>
// #tfm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
//                   high_freq_factor = 4.0, original_max_positions = 8192>
// #tfm.rope_scaling<yarn, factor = 4.0, original_max_positions = 32768,
//                   beta_fast = 32.0, beta_slow = 1.0, truncate = true,
//                   attention_factor = 1.1386>
// #tfm.rope_scaling<longrope, original_max_positions = 4096,
//                   attention_factor = 1.19, short_factor = [1.0, 1.1],
//                   long_factor = [1.0, 4.2]>

bool partita::tfm::ropeScalingHasField(RopeScalingKind kind, StringRef key) {
  using K = RopeScalingKind;
  if (key == "factor")
    return kind != K::longrope;
  if (key == "low_freq_factor" || key == "high_freq_factor")
    return kind == K::llama3;
  if (key == "original_max_positions")
    return kind != K::linear;
  if (key == "beta_fast" || key == "beta_slow" || key == "truncate")
    return kind == K::yarn;
  if (key == "attention_factor")
    return kind == K::yarn || kind == K::longrope;
  if (key == "short_factor" || key == "long_factor")
    return kind == K::longrope;
  return false;
}

Attribute RopeScalingAttr::parse(AsmParser &parser, Type) {
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<RopeScalingKind> kind = symbolizeRopeScalingKind(kindName);
  if (!kind) {
    parser.emitError(parser.getCurrentLocation(), "unknown rope scaling kind '")
        << kindName
        << "', expected 'linear', 'llama3', 'yarn', 'longrope' or 'dynamic'";
    return {};
  }
  RopeScalingFields f;
  auto parseList = [&](SmallVectorImpl<double> &list) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
      return parser.parseFloat(list.emplace_back());
    });
  };
  auto parseKeyValue = [&](StringRef key) -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseEqual())
      return failure();
    if (!ropeScalingHasField(*kind, key)) {
      // A field of another kind, or of none.
      for (unsigned other = 0; other <= getMaxEnumValForRopeScalingKind();
           ++other)
        if (ropeScalingHasField(RopeScalingKind(other), key))
          return parser.emitError(loc, "'") << key << "' does not apply to "
                                            << kindName << " rope scaling";
      return parser.emitError(loc, "unknown rope scaling field '")
             << key << "'";
    }
    if (key == "factor")
      return parser.parseFloat(f.factor);
    if (key == "low_freq_factor")
      return parser.parseFloat(f.lowFreqFactor);
    if (key == "high_freq_factor")
      return parser.parseFloat(f.highFreqFactor);
    if (key == "original_max_positions")
      return parser.parseInteger(f.originalMaxPositions);
    if (key == "beta_fast")
      return parser.parseFloat(f.betaFast);
    if (key == "beta_slow")
      return parser.parseFloat(f.betaSlow);
    if (key == "attention_factor")
      return parser.parseFloat(f.attentionFactor);
    if (key == "short_factor")
      return parseList(f.shortFactor);
    if (key == "long_factor")
      return parseList(f.longFactor);
    // The one boolean field: truncate.
    StringRef value;
    if (parser.parseKeyword(&value))
      return failure();
    if (value != "true" && value != "false")
      return parser.emitError(loc, "truncate must be true or false");
    f.truncate = value == "true";
    return success();
  };
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    if (parser.parseKeyword(&key) || parseKeyValue(key))
      return {};
  }
  if (parser.parseGreater())
    return {};
  // Fields the kind does not use hold RopeScalingFields' defaults.
  MLIRContext *ctx = parser.getContext();
  auto list = [&](ArrayRef<double> values) {
    return *kind == RopeScalingKind::longrope
               ? DenseF64ArrayAttr::get(ctx, values)
               : DenseF64ArrayAttr();
  };
  return parser.getChecked<RopeScalingAttr>(
      ctx, *kind, APFloat(f.factor), APFloat(f.lowFreqFactor),
      APFloat(f.highFreqFactor), f.originalMaxPositions, APFloat(f.betaFast),
      APFloat(f.betaSlow), f.truncate, APFloat(f.attentionFactor),
      list(f.shortFactor), list(f.longFactor));
}

void RopeScalingAttr::print(AsmPrinter &printer) const {
  RopeScalingKind kind = getKind();
  printer << '<' << stringifyRopeScalingKind(kind);
  auto number = [&](StringRef key, const APFloat &value) {
    if (!ropeScalingHasField(kind, key))
      return;
    printer << ", " << key << " = ";
    printer.printFloat(value);
  };
  auto list = [&](StringRef key, DenseF64ArrayAttr values) {
    if (!ropeScalingHasField(kind, key))
      return;
    printer << ", " << key << " = [";
    llvm::interleaveComma(values.asArrayRef(), printer,
                          [&](double v) { printer.printFloat(APFloat(v)); });
    printer << ']';
  };
  number("factor", getFactor());
  number("low_freq_factor", getLowFreqFactor());
  number("high_freq_factor", getHighFreqFactor());
  if (ropeScalingHasField(kind, "original_max_positions"))
    printer << ", original_max_positions = " << getOriginalMaxPositions();
  number("beta_fast", getBetaFast());
  number("beta_slow", getBetaSlow());
  if (ropeScalingHasField(kind, "truncate"))
    printer << ", truncate = " << (getTruncate() ? "true" : "false");
  number("attention_factor", getAttentionFactor());
  list("short_factor", getShortFactor());
  list("long_factor", getLongFactor());
  printer << '>';
}

LogicalResult
RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        RopeScalingKind kind, APFloat factor, APFloat lowFreq,
                        APFloat highFreq, int64_t originalMaxPositions,
                        APFloat betaFast, APFloat betaSlow, bool truncate,
                        APFloat attentionFactor, DenseF64ArrayAttr shortFactor,
                        DenseF64ArrayAttr longFactor) {
  StringRef kindName = stringifyRopeScalingKind(kind);
  if (!(factor.convertToDouble() >= 1.0))
    return emitError() << "rope scaling factor must be >= 1, got "
                       << partita::formatNumber(factor.convertToDouble());
  if (kind != RopeScalingKind::linear && originalMaxPositions <= 0)
    return emitError() << kindName
                       << " rope scaling needs original_max_positions > 0, "
                          "got "
                       << originalMaxPositions;
  double attention = attentionFactor.convertToDouble();
  if (!(attention > 0.0) || !std::isfinite(attention))
    return emitError() << "rope scaling attention_factor must be positive, "
                          "got "
                       << partita::formatNumber(attention);
  switch (kind) {
  case RopeScalingKind::linear:
  case RopeScalingKind::dynamic:
    return success();
  case RopeScalingKind::llama3:
    if (!(lowFreq.convertToDouble() > 0.0) ||
        !(highFreq.convertToDouble() > lowFreq.convertToDouble()))
      return emitError() << "llama3 rope scaling needs 0 < low_freq_factor < "
                            "high_freq_factor, got "
                         << partita::formatNumber(lowFreq.convertToDouble())
                         << " and "
                         << partita::formatNumber(highFreq.convertToDouble());
    return success();
  case RopeScalingKind::yarn:
    if (!(betaSlow.convertToDouble() > 0.0) ||
        !(betaFast.convertToDouble() >= betaSlow.convertToDouble()))
      return emitError() << "yarn rope scaling needs 0 < beta_slow <= "
                            "beta_fast, got "
                         << partita::formatNumber(betaSlow.convertToDouble())
                         << " and "
                         << partita::formatNumber(betaFast.convertToDouble());
    return success();
  case RopeScalingKind::longrope:
    for (auto [name, list] : {std::pair{"short_factor", shortFactor},
                              std::pair{"long_factor", longFactor}}) {
      if (!list || list.empty())
        return emitError() << "longrope rope scaling needs a " << name;
      for (double v : list.asArrayRef())
        if (!(v > 0.0) || !std::isfinite(v))
          return emitError()
                 << "longrope " << name << " values must be positive, got "
                 << partita::formatNumber(v);
    }
    if (shortFactor.size() != longFactor.size())
      return emitError() << "longrope short_factor and long_factor differ in "
                            "length: "
                         << shortFactor.size() << " and " << longFactor.size();
    return success();
  }
  return success();
}

ArrayRef<double> RopeScalingAttr::frequencyFactors(int64_t seqLen) const {
  assert(getKind() == RopeScalingKind::longrope && "longrope only");
  // As Hugging Face's LongRoPE: the long factors once positions go past
  // the pretrained length.
  return (seqLen > getOriginalMaxPositions() ? getLongFactor()
                                             : getShortFactor())
      .asArrayRef();
}

double RopeScalingAttr::dynamicTheta(double theta, int64_t rotaryDim,
                                     int64_t seqLen) const {
  assert(getKind() == RopeScalingKind::dynamic && "dynamic only");
  // As Hugging Face's dynamic NTK: no change up to the pretrained length.
  double original = double(getOriginalMaxPositions());
  double s = std::max(double(seqLen), original);
  double factor = getFactor().convertToDouble();
  double d = double(rotaryDim);
  return theta * std::pow(factor * s / original - (factor - 1), d / (d - 2));
}
