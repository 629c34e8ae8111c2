//===- TfmOps.cpp - tfm operations: parsing, printing, verifiers ----------===//

#include "dialects/tfm/TfmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "support/Format.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace partita::tfm;
using partita::formatNumber;

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

/// Bound on the elements of a parameter and of a whole model, so that sums
/// and byte counts derived from them stay in int64.
constexpr int64_t kMaxElements = int64_t(1) << 62;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Every floating-point operand and result of a graph op has one element
/// type: the model's dtype (the loss alone is always f32).
static LogicalResult verifyOneFloatElementType(Operation *op) {
  Type expected;
  Value first;
  auto check = [&](Value v) -> LogicalResult {
    Type elem = tensorType(v).getElementType();
    if (!isa<FloatType>(elem))
      return success();
    if (!expected) {
      expected = elem;
      first = v;
      return success();
    }
    if (elem != expected)
      return op->emitOpError("mixes element types ")
             << expected << " and " << elem;
    return success();
  };
  for (Value v : op->getOperands())
    if (failed(check(v)))
      return failure();
  for (Value v : op->getResults())
    if (failed(check(v)))
      return failure();
  return success();
}

/// Activations are [batch, seq, features].
static LogicalResult verifyActivation(Operation *op, Value v, StringRef what) {
  RankedTensorType type = tensorType(v);
  if (type.getRank() != 3)
    return op->emitOpError() << what
                             << " must be a [batch, seq, features] tensor, got "
                             << type;
  return success();
}

/// `result` has the shape of `input` with the last dimension set to
/// `lastDim`.
static LogicalResult verifyResultShape(Operation *op, RankedTensorType input,
                                       RankedTensorType result,
                                       int64_t lastDim) {
  SmallVector<int64_t> expected(input.getShape());
  expected.back() = lastDim;
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("result shape [")
           << result.getShape() << "] does not match the expected ["
           << ArrayRef<int64_t>(expected) << "]";
  return success();
}

/// Normalisation weights and biases are vectors over the last dimension.
static LogicalResult verifyFeatureVector(Operation *op, Value vector,
                                         StringRef what, int64_t features) {
  RankedTensorType type = tensorType(vector);
  if (type.getRank() != 1 || type.getDimSize(0) != features)
    return op->emitOpError() << what << " must be tensor<" << features
                             << "x...> to match the last input dimension "
                             << features << ", got " << type;
  return success();
}

static LogicalResult verifyNormCommon(Operation *op, Value input,
                                      Value weight, Value bias, double eps) {
  RankedTensorType inputType = tensorType(input);
  if (inputType.getRank() < 1)
    return op->emitOpError("input must have at least one dimension");
  // The weight spans the normalised group: the whole last dimension, or
  // one of the equal spans it is cut into (a head of a per-head norm).
  int64_t features = inputType.getShape().back();
  RankedTensorType weightType = tensorType(weight);
  int64_t span = weightType.getRank() == 1 ? weightType.getDimSize(0) : 0;
  if (span <= 0 || features % span != 0)
    return op->emitOpError("weight length (the span each normalisation "
                           "covers) must divide the last input dimension ")
           << features << ", got " << weightType;
  if (bias && tensorType(bias).getShape() != weightType.getShape())
    return op->emitOpError("bias must be shaped like the weight ")
           << weightType << ", got " << bias.getType();
  if (!(eps > 0.0))
    return op->emitOpError("eps must be positive, got ")
           << formatNumber(eps);
  if (op->getResult(0).getType() != inputType)
    return op->emitOpError("result type ")
           << op->getResult(0).getType() << " differs from the input type "
           << inputType;
  return verifyOneFloatElementType(op);
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

void ModelOp::getAsmBlockArgumentNames(Region &region,
                                       OpAsmSetValueNameFn setNameFn) {
  if (region.empty() || region.front().getNumArguments() != 2)
    return;
  setNameFn(region.front().getArgument(0), "tokens");
  setNameFn(region.front().getArgument(1), "labels");
}

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBodyBlock();
  if (body.getNumArguments() != 2)
    return emitOpError("body must take (tokens, labels), got ")
           << body.getNumArguments() << " arguments";
  auto tokens = dyn_cast<RankedTensorType>(body.getArgument(0).getType());
  auto labels = dyn_cast<RankedTensorType>(body.getArgument(1).getType());
  auto isTokenTensor = [](RankedTensorType t) {
    return t && t.getRank() == 2 && t.getElementType().isSignlessInteger() &&
           (t.getElementTypeBitWidth() == 32 ||
            t.getElementTypeBitWidth() == 64);
  };
  if (!isTokenTensor(tokens) || !isTokenTensor(labels))
    return emitOpError("tokens and labels must be [batch, seq] tensors of "
                       "i32 or i64, got ")
           << body.getArgument(0).getType() << " and "
           << body.getArgument(1).getType();
  if (!tokens.hasStaticShape() || !labels.hasStaticShape())
    return emitOpError("tokens and labels must have static shapes, got ")
           << tokens << " and " << labels;
  if (tokens.getShape() != labels.getShape())
    return emitOpError("tokens [")
           << tokens.getShape() << "] and labels [" << labels.getShape()
           << "] differ in shape";

  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return emitOpError("must end with a tfm.yield of one scalar loss");
  auto loss = cast<RankedTensorType>(yield.getValues()[0].getType());
  if (loss.getRank() != 0 || !loss.getElementType().isF32())
    return yield.emitOpError("loss must be a scalar tensor<f32>, got ")
           << loss;

  // Layer indices name a block's launches in the plan (recompute, ZeRO-3's
  // gathers, traces): 0, 1, ... in order, also once blocks sit in pipeline
  // stages.
  int64_t nextLayer = 0;
  WalkResult numbered = walk<WalkOrder::PreOrder>([&](BlockOp block) {
    if (static_cast<int64_t>(block.getLayer()) == nextLayer++)
      return WalkResult::advance();
    block.emitOpError("is layer ")
        << static_cast<int64_t>(block.getLayer()) << " but the model's block "
        << nextLayer - 1 << "; blocks are numbered 0, 1, ... in order";
    return WalkResult::interrupt();
  });
  if (numbered.wasInterrupted())
    return failure();

  // Parameter names identify tensors across shardings and checkpoints.
  llvm::StringMap<ParamOp> seen;
  int64_t totalElements = 0;
  WalkResult result = walk([&](ParamOp param) {
    // A pipeline stage's copy of a weight another stage also uses (tied
    // embeddings) shares the original's name.
    if (param->hasAttr("dist.tied"))
      return WalkResult::advance();
    // Each count is below 2^62 (ParamOp::verify); keep the sum there too so
    // that every later size computation fits in int64.
    totalElements += param.getNumElements();
    if (totalElements > kMaxElements) {
      param.emitOpError("brings the model past 2^62 parameter elements");
      return WalkResult::interrupt();
    }
    auto [it, inserted] = seen.try_emplace(param.getParamName(), param);
    if (inserted)
      return WalkResult::advance();
    param.emitOpError("parameter name '")
            .append(param.getParamName(), "' is already used")
            .attachNote(it->second.getLoc())
        << "first declared here";
    return WalkResult::interrupt();
  });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// BlockOp
//===----------------------------------------------------------------------===//

void BlockOp::getAsmBlockArgumentNames(Region &region,
                                       OpAsmSetValueNameFn setNameFn) {
  for (BlockArgument arg : region.getArguments())
    setNameFn(arg, "h");
}

LogicalResult BlockOp::verifyRegions() {
  // I64Attr reads back unsigned; the index is meant signed.
  auto layer = static_cast<int64_t>(getLayer());
  if (layer < 0)
    return emitOpError("layer index must be >= 0, got ") << layer;
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("region arguments (")
           << body.getArgumentTypes() << ") do not match the inputs ("
           << getInputs().getTypes() << ")";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("region must end with tfm.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return yield.emitOpError("yields (")
           << yield.getValues().getTypes() << ") but the block returns ("
           << getResultTypes() << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

// tfm.param "name" normal(0.02) : tensor<...>
ParseResult ParamOp::parse(OpAsmParser &parser, OperationState &result) {
  std::string name;
  StringRef initName;
  if (parser.parseString(&name) || parser.parseKeyword(&initName))
    return failure();
  std::optional<InitKind> init = symbolizeInitKind(initName);
  if (!init)
    return parser.emitError(parser.getCurrentLocation(), "unknown init rule '")
           << initName << "', expected zeros, ones or normal(std)";
  Builder &b = parser.getBuilder();
  result.addAttribute(getParamNameAttrName(result.name), b.getStringAttr(name));
  result.addAttribute(getInitAttrName(result.name),
                      InitKindAttr::get(b.getContext(), *init));
  if (succeeded(parser.parseOptionalLParen())) {
    double std = 0.0;
    if (parser.parseFloat(std) || parser.parseRParen())
      return failure();
    result.addAttribute(getStdAttrName(result.name), b.getF64FloatAttr(std));
  }
  Type type;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(type))
    return failure();
  result.addTypes(type);
  return success();
}

void ParamOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printString(getParamName());
  p << ' ' << stringifyInitKind(getInit());
  if (FloatAttr std = getStdAttr()) {
    p << '(';
    p.printFloat(std.getValue());
    p << ')';
  }
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getParamNameAttrName(), getInitAttrName(),
                           getStdAttrName()});
  p << " : " << getType();
}

LogicalResult ParamOp::verify() {
  if (getParamName().empty())
    return emitOpError("parameter name must not be empty");
  if (!getType().hasStaticShape())
    return emitOpError("parameter '")
           << getParamName() << "' must have a static shape, got " << getType();
  int64_t elements = 1;
  for (int64_t dim : getType().getShape())
    if (llvm::MulOverflow(elements, dim, elements) || elements > kMaxElements)
      return emitOpError("parameter '")
             << getParamName() << "' has more than 2^62 elements";
  bool isNormal = getInit() == InitKind::normal;
  if (isNormal && !getStd())
    return emitOpError("parameter '")
           << getParamName() << "': normal init needs a standard deviation";
  if (!isNormal && getStd())
    return emitOpError("parameter '")
           << getParamName() << "': only normal init takes a standard deviation";
  if (isNormal && !(getStd()->convertToDouble() > 0.0))
    return emitOpError("parameter '")
           << getParamName() << "': standard deviation must be positive, got "
           << formatNumber(getStd()->convertToDouble());
  return success();
}

int64_t ParamOp::getNumElements() { return getType().getNumElements(); }

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  RankedTensorType table = getTable().getType();
  RankedTensorType tokens = getTokens().getType();
  if (table.getRank() != 2)
    return emitOpError("table must be [vocab, hidden], got ") << table;
  if (tokens.getRank() != 2)
    return emitOpError("tokens must be [batch, seq], got ") << tokens;
  double scale = getScale().convertToDouble();
  if (!(scale > 0.0) || !std::isfinite(scale))
    return emitOpError("scale must be positive and finite, got ")
           << formatNumber(scale);
  SmallVector<int64_t> expected(tokens.getShape());
  expected.push_back(table.getDimSize(1));
  if (getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("result shape [")
           << getType().getShape() << "] does not match [batch, seq, hidden] = ["
           << ArrayRef<int64_t>(expected) << "]";
  return verifyOneFloatElementType(*this);
}

LogicalResult PositionEmbeddingOp::verify() {
  if (failed(verifyActivation(*this, getInput(), "input")))
    return failure();
  RankedTensorType input = getInput().getType();
  RankedTensorType table = getTable().getType();
  if (table.getRank() != 2)
    return emitOpError("table must be [max_positions, hidden], got ") << table;
  if (table.getDimSize(1) != input.getDimSize(2))
    return emitOpError("table width ")
           << table.getDimSize(1) << " differs from the hidden size "
           << input.getDimSize(2);
  if (table.getDimSize(0) < input.getDimSize(1))
    return emitOpError("sequence length ")
           << input.getDimSize(1) << " exceeds the " << table.getDimSize(0)
           << " learned positions";
  if (getType() != input)
    return emitOpError("result type ")
           << getType() << " differs from the input type " << input;
  return verifyOneFloatElementType(*this);
}

LogicalResult RotaryOp::verify() {
  if (failed(verifyActivation(*this, getInput(), "input")))
    return failure();
  int64_t width = getInput().getType().getDimSize(2);
  int64_t heads = getNumHeads();
  if (heads <= 0 || width % heads != 0)
    return emitOpError("num_heads ")
           << heads << " does not divide the input width " << width;
  int64_t headDim = width / heads;
  int64_t rotaryDim = getRotaryDim();
  if (rotaryDim <= 0 || rotaryDim > headDim || rotaryDim % 2 != 0)
    return emitOpError("rotary_dim must be even and in (0, head_dim = ")
           << headDim << "], got " << rotaryDim;
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError("theta must be positive, got ")
           << formatNumber(getTheta().convertToDouble());
  RopeScalingAttr scaling = getScalingAttr();
  // YaRN places its ramp by the frequencies' turns, log-scaled by theta.
  if (scaling && scaling.getKind() == RopeScalingKind::yarn &&
      getTheta().convertToDouble() == 1.0)
    return emitOpError("yarn scaling needs a theta other than 1");
  // Dynamic NTK raises the base to the power rotary_dim / (rotary_dim - 2).
  if (scaling && scaling.getKind() == RopeScalingKind::dynamic &&
      rotaryDim <= 2)
    return emitOpError("dynamic scaling needs rotary_dim > 2, got ")
           << rotaryDim;
  if (scaling && scaling.getKind() == RopeScalingKind::longrope &&
      int64_t(scaling.getShortFactor().size()) != rotaryDim / 2)
    return emitOpError("longrope scaling has ")
           << scaling.getShortFactor().size() << " factors a list; rotary_dim "
           << rotaryDim << " needs " << rotaryDim / 2;
  if (getType() != getInput().getType())
    return emitOpError("result type ")
           << getType() << " differs from the input type "
           << getInput().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Norms, linear layers
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  return verifyNormCommon(*this, getInput(), getWeight(), getBias(),
                          getEps().convertToDouble());
}

LogicalResult RmsNormOp::verify() {
  double offset = getWeightOffset().convertToDouble();
  if (!std::isfinite(offset))
    return emitOpError("weight_offset must be finite, got ")
           << formatNumber(offset);
  return verifyNormCommon(*this, getInput(), getWeight(), Value(),
                          getEps().convertToDouble());
}

/// Shared by linear and lm_head: weight [out, in] applied to the input's
/// last dimension.
static LogicalResult verifyProjection(Operation *op, Value input, Value weight,
                                      Value bias, Value result) {
  RankedTensorType inputType = tensorType(input);
  RankedTensorType weightType = tensorType(weight);
  if (inputType.getRank() < 1)
    return op->emitOpError("input must have at least one dimension");
  if (weightType.getRank() != 2)
    return op->emitOpError("weight must be [out_features, in_features], got ")
           << weightType;
  int64_t inFeatures = inputType.getShape().back();
  int64_t outFeatures = weightType.getDimSize(0);
  if (weightType.getDimSize(1) != inFeatures)
    return op->emitOpError("weight [")
           << weightType.getShape() << "] expects " << weightType.getDimSize(1)
           << " input features, but the input has " << inFeatures;
  if (bias && failed(verifyFeatureVector(op, bias, "bias", outFeatures)))
    return failure();
  if (failed(verifyResultShape(op, inputType, tensorType(result),
                               outFeatures)))
    return failure();
  return verifyOneFloatElementType(op);
}

LogicalResult LinearOp::verify() {
  return verifyProjection(*this, getInput(), getWeight(), getBias(),
                          getResult());
}

LogicalResult LmHeadOp::verify() {
  if (failed(verifyActivation(*this, getInput(), "input")))
    return failure();
  return verifyProjection(*this, getInput(), getWeight(), Value(),
                          getResult());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  for (auto [value, what] : {std::pair{getQuery(), "query"},
                             std::pair{getKey(), "key"},
                             std::pair{getValue(), "value"}})
    if (failed(verifyActivation(*this, value, what)))
      return failure();
  RankedTensorType q = getQuery().getType();
  RankedTensorType k = getKey().getType();
  RankedTensorType v = getValue().getType();
  int64_t heads = getNumHeads();
  int64_t kvHeads = getNumKvHeads();
  int64_t width = q.getDimSize(2);
  if (heads <= 0 || width % heads != 0)
    return emitOpError("num_heads ")
           << heads << " does not divide the query width " << width;
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError("num_kv_heads ")
           << kvHeads << " does not divide num_heads " << heads;
  int64_t headDim = width / heads;
  for (auto [type, what] : {std::pair{k, "key"}, std::pair{v, "value"}}) {
    if (type.getDimSize(0) != q.getDimSize(0) ||
        type.getDimSize(1) != q.getDimSize(1))
      return emitOpError() << what << " [" << type.getShape()
                           << "] differs from the query [" << q.getShape()
                           << "] in batch or sequence";
    if (type.getDimSize(2) != kvHeads * headDim)
      return emitOpError() << what << " width " << type.getDimSize(2)
                           << " must be num_kv_heads * head_dim = " << kvHeads
                           << " * " << headDim << " = " << kvHeads * headDim;
  }
  if (std::optional<int64_t> window = getWindow(); window && *window <= 0)
    return emitOpError("window must be positive, got ") << *window;
  if (getType() != q)
    return emitOpError("result type ")
           << getType() << " differs from the query type " << q;
  return verifyOneFloatElementType(*this);
}

//===----------------------------------------------------------------------===//
// AddOp, CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult BiasAddOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 1)
    return emitOpError("input must have at least one dimension");
  if (failed(verifyFeatureVector(*this, getBias(), "bias",
                                 input.getShape().back())))
    return failure();
  return verifyOneFloatElementType(*this);
}

LogicalResult AddOp::verify() {
  if (getInputs().size() < 2)
    return emitOpError("needs at least two operands, got ")
           << getInputs().size();
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  RankedTensorType logits = getLogits().getType();
  RankedTensorType labels = getLabels().getType();
  if (logits.getRank() != 3)
    return emitOpError("logits must be [batch, seq, vocab], got ") << logits;
  if (labels.getShape() != logits.getShape().drop_back())
    return emitOpError("labels [")
           << labels.getShape() << "] do not match the logits' [batch, seq] = ["
           << logits.getShape().drop_back() << "]";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/tfm/TfmOps.cpp.inc"
