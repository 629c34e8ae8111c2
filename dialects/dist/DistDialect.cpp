//===- DistDialect.cpp - The dist distribution dialect --------------------===//

#include "dialects/dist/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdlib>

using namespace mlir;
using namespace partita::dist;

#include "dialects/dist/DistDialect.cpp.inc"
#include "dialects/dist/DistEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dist/DistTypes.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/dist/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/dist/DistAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/dist/DistTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// `key = number` fields shared by #dist.device, #dist.link, #dist.network
//===----------------------------------------------------------------------===//

namespace {

/// Parses one `key = number` into `values`: a key of `keys` or
/// `optionalKeys`, given once.
ParseResult parseNumberField(AsmParser &parser, ArrayRef<StringRef> keys,
                             ArrayRef<StringRef> optionalKeys,
                             llvm::StringMap<double> &values) {
  StringRef key;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&key) || parser.parseEqual())
    return failure();
  // Numbers are printed in their shortest form, so 312 reads back too.
  double value;
  int64_t integer;
  OptionalParseResult isInteger = parser.parseOptionalInteger(integer);
  if (isInteger.has_value()) {
    if (failed(*isInteger))
      return failure();
    value = static_cast<double>(integer);
  } else if (parser.parseFloat(value)) {
    return failure();
  }
  if (!llvm::is_contained(keys, key) && !llvm::is_contained(optionalKeys, key))
    return parser.emitError(loc, "unknown field '") << key << "'";
  if (!values.try_emplace(key, value).second)
    return parser.emitError(loc, "field '") << key << "' given twice";
  return success();
}

/// Parses `, key = number` pairs up to `>`; every key in `keys` is required,
/// those in `optionalKeys` may be given, and no other is accepted.
ParseResult parseNumberFields(AsmParser &parser, ArrayRef<StringRef> keys,
                              llvm::StringMap<double> &values,
                              ArrayRef<StringRef> optionalKeys = {}) {
  while (succeeded(parser.parseOptionalComma()))
    if (parseNumberField(parser, keys, optionalKeys, values))
      return failure();
  for (StringRef key : keys)
    if (!values.count(key))
      return parser.emitError(parser.getCurrentLocation(), "missing field '")
             << key << "'";
  return parser.parseGreater();
}

/// Prints the shortest text that reads back as the same double.
void printNumber(AsmPrinter &printer, const APFloat &value) {
  double v = value.convertToDouble();
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    printer << static_cast<int64_t>(v);
    return;
  }
  std::string text;
  for (int digits = 1; digits <= 17; ++digits) {
    text = llvm::formatv("{0}", llvm::format("%.*g", digits, v)).str();
    if (std::strtod(text.c_str(), nullptr) == v)
      break;
  }
  // An exponent needs a fraction to lex as a float: 1e-06 as 1.0e-06.
  size_t exponent = text.find('e');
  if (exponent != std::string::npos && text.find('.') == std::string::npos)
    text.insert(exponent, ".0");
  printer << text;
}

void printNumberField(AsmPrinter &printer, StringRef key,
                      const APFloat &value) {
  printer << ", " << key << " = ";
  printNumber(printer, value);
}

void printIntField(AsmPrinter &printer, StringRef key, int64_t value) {
  printer << ", " << key << " = " << value;
}

LogicalResult checkPositive(function_ref<InFlightDiagnostic()> emitError,
                            StringRef what, const APFloat &value) {
  if (value.convertToDouble() > 0.0)
    return success();
  SmallString<24> text;
  value.toString(text);
  return emitError() << what << " must be positive, got " << text;
}

} // namespace

//===----------------------------------------------------------------------===//
// DeviceAttr
//===----------------------------------------------------------------------===//

Attribute DeviceAttr::parse(AsmParser &parser, Type) {
  std::string kind;
  llvm::StringMap<double> v;
  if (parser.parseLess() || parser.parseString(&kind) ||
      parseNumberFields(parser,
                        {"bf16_tflops", "fp16_tflops", "fp32_tflops",
                         "memory_gib", "hbm_gbytes_per_s"},
                        v))
    return {};
  return parser.getChecked<DeviceAttr>(
      parser.getContext(), kind, APFloat(v["bf16_tflops"]),
      APFloat(v["fp16_tflops"]), APFloat(v["fp32_tflops"]),
      APFloat(v["memory_gib"]), APFloat(v["hbm_gbytes_per_s"]));
}

void DeviceAttr::print(AsmPrinter &printer) const {
  printer << "<\"" << getKind() << "\"";
  printNumberField(printer, "bf16_tflops", getBf16Tflops());
  printNumberField(printer, "fp16_tflops", getFp16Tflops());
  printNumberField(printer, "fp32_tflops", getFp32Tflops());
  printNumberField(printer, "memory_gib", getMemoryGib());
  printNumberField(printer, "hbm_gbytes_per_s", getHbmGbytesPerS());
  printer << ">";
}

LogicalResult DeviceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef kind, APFloat bf16, APFloat fp16,
                                 APFloat fp32, APFloat memory, APFloat hbm) {
  if (kind.empty())
    return emitError() << "device kind must not be empty";
  return success(succeeded(checkPositive(emitError, "bf16_tflops", bf16)) &&
                 succeeded(checkPositive(emitError, "fp16_tflops", fp16)) &&
                 succeeded(checkPositive(emitError, "fp32_tflops", fp32)) &&
                 succeeded(checkPositive(emitError, "memory_gib", memory)) &&
                 succeeded(checkPositive(emitError, "hbm_gbytes_per_s", hbm)));
}

//===----------------------------------------------------------------------===//
// LinkAttr
//===----------------------------------------------------------------------===//

Attribute LinkAttr::parse(AsmParser &parser, Type) {
  StringRef kindName;
  llvm::StringMap<double> v;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<LinkKind> kind = symbolizeLinkKind(kindName);
  if (!kind) {
    parser.emitError(parser.getCurrentLocation(), "unknown link kind '")
        << kindName << "', expected nvswitch, nvlink, pcie or shared_memory";
    return {};
  }
  if (parseNumberFields(parser, {"gbytes_per_s", "latency_us"}, v))
    return {};
  return parser.getChecked<LinkAttr>(parser.getContext(), *kind,
                                     APFloat(v["gbytes_per_s"]),
                                     APFloat(v["latency_us"]));
}

void LinkAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyLinkKind(getKind());
  printNumberField(printer, "gbytes_per_s", getGbytesPerS());
  printNumberField(printer, "latency_us", getLatencyUs());
  printer << ">";
}

LogicalResult LinkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               LinkKind, APFloat bandwidth, APFloat latency) {
  if (failed(checkPositive(emitError, "gbytes_per_s", bandwidth)))
    return failure();
  if (latency.convertToDouble() < 0.0)
    return emitError() << "latency_us must not be negative";
  return success();
}

//===----------------------------------------------------------------------===//
// NetworkAttr
//===----------------------------------------------------------------------===//

Attribute NetworkAttr::parse(AsmParser &parser, Type) {
  StringRef kindName;
  llvm::StringMap<double> v;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<NetworkKind> kind = symbolizeNetworkKind(kindName);
  if (!kind) {
    parser.emitError(parser.getCurrentLocation(), "unknown network kind '")
        << kindName << "', expected fat_tree or rail_optimized";
    return {};
  }
  if (parseNumberFields(
          parser,
          {"nics_per_node", "gbits_per_s", "latency_us", "oversubscription"},
          v))
    return {};
  double nics = v["nics_per_node"];
  if (nics != std::floor(nics) || nics < 1 || nics > 1024) {
    parser.emitError(parser.getCurrentLocation(),
                     "nics_per_node must be an integer from 1 to 1024");
    return {};
  }
  return parser.getChecked<NetworkAttr>(
      parser.getContext(), *kind, static_cast<int64_t>(nics),
      APFloat(v["gbits_per_s"]), APFloat(v["latency_us"]),
      APFloat(v["oversubscription"]));
}

void NetworkAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyNetworkKind(getKind());
  printIntField(printer, "nics_per_node", getNicsPerNode());
  printNumberField(printer, "gbits_per_s", getGbitsPerS());
  printNumberField(printer, "latency_us", getLatencyUs());
  printNumberField(printer, "oversubscription", getOversubscription());
  printer << ">";
}

LogicalResult NetworkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  NetworkKind, int64_t nics, APFloat bandwidth,
                                  APFloat latency, APFloat oversubscription) {
  if (nics < 1 || nics > 1024)
    return emitError() << "nics_per_node must be between 1 and 1024, got "
                       << nics;
  if (failed(checkPositive(emitError, "gbits_per_s", bandwidth)))
    return failure();
  if (latency.convertToDouble() < 0.0)
    return emitError() << "latency_us must not be negative";
  if (!(oversubscription.convertToDouble() >= 1.0))
    return emitError() << "oversubscription must be >= 1";
  return success();
}

//===----------------------------------------------------------------------===//
// CalibrationAttr
//===----------------------------------------------------------------------===//

namespace {
constexpr StringRef kCalibrationKeys[] = {
    "gemm_efficiency", "gemm_half_dim", "attention_efficiency",
    "hbm_efficiency", "collective_efficiency"};
} // namespace

Attribute CalibrationAttr::parse(AsmParser &parser, Type) {
  llvm::StringMap<double> v;
  if (parser.parseLess())
    return {};
  // Every field is optional: `<>` up to all five, in any order.
  if (failed(parser.parseOptionalGreater()) &&
      (parseNumberField(parser, {}, kCalibrationKeys, v) ||
       parseNumberFields(parser, {}, v, kCalibrationKeys)))
    return {};
  auto field = [&](StringRef key) -> std::optional<APFloat> {
    auto it = v.find(key);
    return it == v.end() ? std::nullopt : std::optional(APFloat(it->second));
  };
  return parser.getChecked<CalibrationAttr>(
      parser.getContext(), field("gemm_efficiency"), field("gemm_half_dim"),
      field("attention_efficiency"), field("hbm_efficiency"),
      field("collective_efficiency"));
}

void CalibrationAttr::print(AsmPrinter &printer) const {
  printer << "<";
  StringRef separator = "";
  std::optional<APFloat> values[] = {
      getGemmEfficiency(), getGemmHalfDim(), getAttentionEfficiency(),
      getHbmEfficiency(), getCollectiveEfficiency()};
  for (auto [key, value] : llvm::zip_equal(kCalibrationKeys, values)) {
    if (!value)
      continue;
    printer << separator << key << " = ";
    printNumber(printer, *value);
    separator = ", ";
  }
  printer << ">";
}

LogicalResult CalibrationAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, std::optional<APFloat> gemm,
    std::optional<APFloat> halfDim, std::optional<APFloat> attention,
    std::optional<APFloat> hbm, std::optional<APFloat> collective) {
  // The bounds --cost-params puts on the same parameters.
  auto outside = [&](StringRef key, const std::optional<APFloat> &value,
                     bool fraction) {
    if (!value)
      return false;
    double v = value->convertToDouble();
    if (fraction ? v >= 1e-6 && v <= 1 : v >= 0 && v <= 1e6)
      return false;
    SmallString<24> text;
    value->toString(text);
    emitError() << key << " must be from "
                << (fraction ? "1e-6 to 1" : "0 to 1e6") << ", got " << text;
    return true;
  };
  if (outside("gemm_efficiency", gemm, true) ||
      outside("gemm_half_dim", halfDim, false) ||
      outside("attention_efficiency", attention, true) ||
      outside("hbm_efficiency", hbm, true) ||
      outside("collective_efficiency", collective, true))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// TopologyAttr
//===----------------------------------------------------------------------===//

LogicalResult TopologyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef name, int64_t nodes,
                                   int64_t devicesPerNode, DeviceAttr, LinkAttr,
                                   NetworkAttr, CalibrationAttr) {
  if (nodes < 1)
    return emitError() << "topology '" << name
                       << "' needs at least one node, got " << nodes;
  if (devicesPerNode < 1)
    return emitError() << "topology '" << name
                       << "' needs at least one device per node, got "
                       << devicesPerNode;
  // The bound of the topology readers (compiler/Topology/Topology.h).
  constexpr int64_t maxDevices = int64_t(1) << 18;
  if (devicesPerNode > 1024 || nodes > maxDevices / devicesPerNode)
    return emitError() << "topology '" << name << "' has more than "
                       << maxDevices << " devices";
  return success();
}

//===----------------------------------------------------------------------===//
// all_gather, reduce_scatter
//===----------------------------------------------------------------------===//

/// The input and result agree but along `dim`, where `grow` says whether the
/// result is the larger (gather) or the smaller (scatter).
static LogicalResult verifyConcat(Operation *op, RankedTensorType input,
                                  RankedTensorType result, int64_t dim,
                                  bool grow) {
  if (dim < 0 || dim >= input.getRank())
    return op->emitOpError("dim ") << dim << " is out of range for " << input;
  if (input.getRank() != result.getRank() ||
      input.getElementType() != result.getElementType())
    return op->emitOpError("input ") << input << " and result " << result
                                     << " differ in rank or element type";
  for (int64_t d = 0; d < input.getRank(); ++d) {
    int64_t small = grow ? input.getDimSize(d) : result.getDimSize(d);
    int64_t large = grow ? result.getDimSize(d) : input.getDimSize(d);
    if (d != dim ? small != large : large % small != 0)
      return op->emitOpError("dimension ")
             << d << " goes from " << input.getDimSize(d) << " to "
             << result.getDimSize(d) << "; only dim " << dim
             << " may change, by a whole factor";
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyConcat(*this, getInput().getType(), getType(), getDim(), true);
}

LogicalResult ShardSliceOp::verify() {
  return verifyConcat(*this, getInput().getType(), getType(), getDim(), false);
}

LogicalResult ReduceScatterOp::verify() {
  return verifyConcat(*this, getInput().getType(), getType(), getDim(), false);
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verifyRegions() {
  Block &body = getBody().front();
  auto ret = dyn_cast<StageReturnOp>(body.getTerminator());
  if (!ret)
    return emitOpError("must end with dist.stage_return");
  if (ret.getValues().getTypes() != getResultTypes())
    return ret.emitOpError("returns (")
           << ret.getValues().getTypes() << ") but the stage yields ("
           << getResultTypes() << ")";
  // Stages run on different ranks: only the model's own inputs (the block
  // arguments of the enclosing op) may be read from outside.
  Block *enclosing = (*this)->getBlock();
  WalkResult result = body.walk([&](Operation *op) {
    for (Value operand : op->getOperands()) {
      if (operand.getParentRegion()->isProperAncestor(&getBody()) &&
          operand.getParentBlock() == enclosing &&
          !isa<BlockArgument>(operand)) {
        op->emitOpError("uses a value of another pipeline stage; pass it "
                        "with dist.send and dist.recv");
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// AsyncOp, WaitOp
//===----------------------------------------------------------------------===//

LogicalResult AsyncOp::verifyRegions() {
  Block &body = getBody().front();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  Operation *collective = &body.front();
  if (!yield || body.getOperations().size() != 2 || !isCollective(collective) ||
      yield.getValue() != collective->getResult(0))
    return emitOpError("must hold one dist.all_reduce, dist.all_gather or "
                       "dist.reduce_scatter and yield its result");
  if (!getToken().hasOneUse() || !isa<WaitOp>(*getToken().getUsers().begin()))
    return emitOpError("starts a collective that is not waited for exactly "
                       "once: its token needs one dist.wait");
  Operation *wait = *getToken().getUsers().begin();
  if (wait->getBlock() != (*this)->getBlock() ||
      !(*this)->isBeforeInBlock(wait))
    return emitOpError("is waited for before it or in another block; "
                       "dist.wait must follow it in its own");
  return success();
}

LogicalResult WaitOp::verify() {
  auto start = getToken().getDefiningOp<AsyncOp>();
  if (!start)
    return emitOpError("waits for a token no dist.async made");
  // A malformed region is the dist.async's to report (it may be verified
  // after this op in a graph region).
  Region &body = start.getBody();
  if (body.empty() || body.front().empty())
    return success();
  auto yield = dyn_cast<YieldOp>(body.front().back());
  if (!yield)
    return success();
  Type started = yield.getValue().getType();
  if (started != getType())
    return emitOpError("returns ")
           << getType() << " but the collective gives " << started;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.cpp.inc"

//===----------------------------------------------------------------------===//
// StrategyAttr
//===----------------------------------------------------------------------===//

LogicalResult
StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t dp,
                     int64_t tp, int64_t pp, int64_t vpp, int64_t zero,
                     int64_t microBatchSize, int64_t numMicroBatches,
                     RecomputeKind, int64_t sequenceParallel,
                     ScheduleKind schedule, DenseI64ArrayAttr stageLayers) {
  constexpr int64_t maxSize = int64_t(1) << 24;
  for (int64_t v : {dp, tp, pp, vpp, microBatchSize, numMicroBatches})
    if (v < 1 || v > maxSize)
      return emitError() << "dp, tp, pp, vpp, micro_batch_size and "
                            "num_micro_batches must be between 1 and "
                         << maxSize;
  int64_t devices, chunks;
  if (llvm::MulOverflow(dp, tp, devices) ||
      llvm::MulOverflow(devices, pp, devices) ||
      llvm::MulOverflow(pp, vpp, chunks) || devices > maxSize)
    return emitError() << "dp * tp * pp must be at most " << maxSize;
  if (zero < 0 || zero > 3)
    return emitError() << "zero must be 0, 1, 2 or 3, got " << zero;
  if (sequenceParallel != 0 && sequenceParallel != 1)
    return emitError() << "sequence_parallel must be 0 or 1";
  if ((vpp > 1) != (schedule == ScheduleKind::interleaved))
    return emitError() << "vpp > 1 goes with the interleaved schedule";
  if (schedule == ScheduleKind::interleaved && pp == 1)
    return emitError() << "the interleaved schedule needs pp > 1";
  // Its rounds of pp micro-batches per model chunk (Narayanan et al. 2021).
  if (schedule == ScheduleKind::interleaved && numMicroBatches % pp != 0)
    return emitError() << "the interleaved schedule needs num_micro_batches ("
                       << numMicroBatches << ") divisible by pp (" << pp << ")";
  if (static_cast<int64_t>(stageLayers.size()) != pp * vpp)
    return emitError() << "stage_layers has " << stageLayers.size()
                       << " entries for pp * vpp = " << pp * vpp
                       << " model chunks";
  for (int64_t n : stageLayers.asArrayRef())
    if (n < 1)
      return emitError() << "every pipeline stage needs at least one layer";
  return success();
}
