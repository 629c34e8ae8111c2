//===- TfmDialect.cpp - The tfm model-graph dialect -----------------------===//

#include "dialects/tfm/TfmDialect.h"
#include "dialects/tfm/TfmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "support/Format.h"
#include "llvm/ADT/TypeSwitch.h"

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
Attribute RopeScalingAttr::parse(AsmParser &parser, Type) {
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<RopeScalingKind> kind = symbolizeRopeScalingKind(kindName);
  if (!kind) {
    parser.emitError(parser.getCurrentLocation(),
                     "unknown rope scaling kind '")
        << kindName << "', expected 'linear' or 'llama3'";
    return {};
  }
  // Fields a kind does not use keep these defaults, so that the printed
  // form (which omits them) reads back as the same attribute.
  double factor = 1.0, lowFreq = 1.0, highFreq = 1.0;
  int64_t originalMaxPositions = 0;
  bool isLlama3 = *kind == RopeScalingKind::llama3;
  auto parseKeyValue = [&](StringRef key) -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseEqual())
      return failure();
    if (key == "factor")
      return parser.parseFloat(factor);
    if (!isLlama3 && (key == "low_freq_factor" || key == "high_freq_factor" ||
                      key == "original_max_positions"))
      return parser.emitError(loc, "'")
             << key << "' applies to llama3 rope scaling only";
    if (key == "low_freq_factor")
      return parser.parseFloat(lowFreq);
    if (key == "high_freq_factor")
      return parser.parseFloat(highFreq);
    if (key == "original_max_positions")
      return parser.parseInteger(originalMaxPositions);
    return parser.emitError(loc, "unknown rope scaling field '") << key << "'";
  };
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    if (parser.parseKeyword(&key) || parseKeyValue(key))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<RopeScalingAttr>(
      parser.getContext(), *kind, APFloat(factor), APFloat(lowFreq),
      APFloat(highFreq), originalMaxPositions);
}

void RopeScalingAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyRopeScalingKind(getKind()) << ", factor = ";
  printer.printFloat(getFactor());
  if (getKind() == RopeScalingKind::llama3) {
    printer << ", low_freq_factor = ";
    printer.printFloat(getLowFreqFactor());
    printer << ", high_freq_factor = ";
    printer.printFloat(getHighFreqFactor());
    printer << ", original_max_positions = " << getOriginalMaxPositions();
  }
  printer << '>';
}

LogicalResult
RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        RopeScalingKind kind, APFloat factor, APFloat lowFreq,
                        APFloat highFreq, int64_t originalMaxPositions) {
  if (!(factor.convertToDouble() >= 1.0))
    return emitError() << "rope scaling factor must be >= 1, got "
                       << partita::formatNumber(factor.convertToDouble());
  if (kind != RopeScalingKind::llama3)
    return success();
  if (!(lowFreq.convertToDouble() > 0.0) ||
      !(highFreq.convertToDouble() > lowFreq.convertToDouble()))
    return emitError() << "llama3 rope scaling needs 0 < low_freq_factor < "
                          "high_freq_factor, got "
                       << partita::formatNumber(lowFreq.convertToDouble())
                       << " and "
                       << partita::formatNumber(highFreq.convertToDouble());
  if (originalMaxPositions <= 0)
    return emitError() << "llama3 rope scaling needs original_max_positions "
                          "> 0, got "
                       << originalMaxPositions;
  return success();
}
