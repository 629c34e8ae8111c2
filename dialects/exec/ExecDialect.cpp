//===- ExecDialect.cpp - The exec execution dialect -----------------------===//

#include "dialects/exec/ExecDialect.h"
#include "partita/plan/Kernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace partita::exec;

//===----------------------------------------------------------------------===//
// Kernels and groups by name
//===----------------------------------------------------------------------===//

/// A kernel as its registry name, a quoted string: `"linear"`.
static ParseResult parseKernelName(AsmParser &parser,
                                   partita::plan::Kernel &kernel) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseString(&name))
    return failure();
  std::optional<partita::plan::Kernel> known = partita::plan::kernelNamed(name);
  if (!known)
    return parser.emitError(loc, "unknown kernel '") << name << "'";
  kernel = *known;
  return success();
}

static void printKernelName(AsmPrinter &printer, partita::plan::Kernel kernel) {
  printer << '"' << partita::plan::name(kernel) << '"';
}

static ParseResult parseKernelName(OpAsmParser &parser, KernelAttr &kernel) {
  partita::plan::Kernel value;
  if (parseKernelName(static_cast<AsmParser &>(parser), value))
    return failure();
  kernel = KernelAttr::get(parser.getContext(), value);
  return success();
}

static void printKernelName(OpAsmPrinter &printer, Operation *,
                            KernelAttr kernel) {
  printKernelName(static_cast<AsmPrinter &>(printer), kernel.getKernel());
}

/// A group as its name in plan.json, a quoted string: `"tp"`.
static ParseResult parseGroupName(OpAsmParser &parser, GroupAttr &group) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseString(&name))
    return failure();
  std::optional<Group> known = symbolizeGroup(name);
  if (!known) {
    InFlightDiagnostic error = parser.emitError(loc, "unknown group '")
                               << name << "'; expected ";
    for (uint32_t g = 0; g <= getMaxEnumValForGroup(); ++g)
      error << (g == 0                         ? ""
                : g == getMaxEnumValForGroup() ? " or "
                                               : ", ")
            << stringifyGroup(Group(g));
    return error;
  }
  group = GroupAttr::get(parser.getContext(), *known);
  return success();
}

static void printGroupName(OpAsmPrinter &printer, Operation *,
                           GroupAttr group) {
  printer << '"' << stringifyGroup(group.getValue()) << '"';
}

Attribute KernelAttr::parse(AsmParser &parser, Type) {
  partita::plan::Kernel kernel;
  if (parser.parseLess() || parseKernelName(parser, kernel) ||
      parser.parseGreater())
    return {};
  return KernelAttr::get(parser.getContext(), kernel);
}

void KernelAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printKernelName(printer, getKernel());
  printer << '>';
}

#include "dialects/exec/ExecDialect.cpp.inc"
#include "dialects/exec/ExecEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/exec/ExecAttrs.cpp.inc"

void ExecDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/exec/ExecAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/exec/ExecOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

RegionKind ProgramOp::getRegionKind(unsigned) { return RegionKind::Graph; }

BufferOp ProgramOp::lookupBuffer(StringAttr name) {
  return dyn_cast_or_null<BufferOp>(
      mlir::SymbolTable::lookupSymbolIn(getOperation(), name));
}

std::optional<int64_t> partita::exec::launchLayer(Operation *launch) {
  if (auto layer = launch->getAttrOfType<IntegerAttr>("layer"))
    return layer.getInt();
  return std::nullopt;
}

void partita::exec::getLaunchAccesses(Operation *op,
                                      SmallVectorImpl<StringRef> &reads,
                                      SmallVectorImpl<StringRef> &writes) {
  auto names = [](ArrayAttr refs, SmallVectorImpl<StringRef> &into) {
    for (Attribute ref : refs)
      into.push_back(cast<FlatSymbolRefAttr>(ref).getValue());
  };
  if (auto kernel = dyn_cast<KernelOp>(op)) {
    names(kernel.getIns(), reads);
    names(kernel.getOuts(), writes);
    if (auto accumulate = kernel.getAccumulate())
      for (auto [out, adds] : llvm::zip(kernel.getOuts(), *accumulate))
        if (adds)
          reads.push_back(cast<FlatSymbolRefAttr>(out).getValue());
  } else if (auto c = dyn_cast<CollectiveOp>(op)) {
    reads.push_back(c.getInput());
    writes.push_back(c.getOutput());
    if (c.getAccumulate())
      reads.push_back(c.getOutput());
  } else if (auto send = dyn_cast<SendOp>(op)) {
    reads.push_back(send.getBuffer());
  } else if (auto recv = dyn_cast<RecvOp>(op)) {
    writes.push_back(recv.getBuffer());
  }
}

namespace {

/// An async collective is waited for later in its phase, and nothing in
/// between writes its input or touches its output.
LogicalResult verifyAsyncCollectives(
    PhaseOp phase, llvm::MapVector<StringRef, CollectiveOp> &fromLastMicroBatch,
    const llvm::MapVector<StringRef, CollectiveOp> &fromLastStep,
    llvm::StringSet<> &waitedNextStep) {
  llvm::MapVector<StringRef, CollectiveOp> inFlight; // by output
  // The step phase waits for the last micro-batch's reductions.
  if (phase.getKind() == PhaseKind::step)
    std::swap(inFlight, fromLastMicroBatch);
  // A forward phase may wait for the previous step's gathers: they are in
  // flight from its start until that wait.
  if (phase.getKind() == PhaseKind::forward)
    for (auto wait : phase.getBody().front().getOps<WaitOp>())
      if (wait.getFirstMicroBatch()) {
        auto it = fromLastStep.find(wait.getBuffer());
        if (it == fromLastStep.end())
          return wait.emitOpError("waits in the first micro-batch for @")
                 << wait.getBuffer()
                 << ", which no next_step collective of the step phase "
                    "writes";
        if (!waitedNextStep.insert(wait.getBuffer()).second)
          return wait.emitOpError("waits for @")
                 << wait.getBuffer() << " from the previous step a second time";
        inFlight[wait.getBuffer()] = it->second;
      }
  // The step phase's next_step collectives stay in flight to its end.
  llvm::MapVector<StringRef, CollectiveOp> carried;
  for (Operation &op : phase.getBody().front()) {
    if (auto wait = dyn_cast<WaitOp>(op)) {
      if (wait.getFirstMicroBatch() && phase.getKind() != PhaseKind::forward)
        return wait.emitOpError("waits in the first micro-batch, which a ")
               << stringifyPhaseKind(phase.getKind()) << " phase does not have";
      if (carried.count(wait.getBuffer()))
        return wait.emitOpError("waits for @")
               << wait.getBuffer()
               << ", whose next_step collective is waited for in the next "
                  "step's forward phase";
      if (!inFlight.erase(wait.getBuffer()))
        return wait.emitOpError("waits for @")
               << wait.getBuffer()
               << ", which no asynchronous collective before it in this "
                  "phase writes";
      continue;
    }
    SmallVector<StringRef> reads, writes;
    getLaunchAccesses(&op, reads, writes);
    for (auto &[output, c] :
         llvm::concat<std::pair<StringRef, CollectiveOp>>(inFlight, carried)) {
      auto clash = [&](StringRef buffer, StringRef how) {
        InFlightDiagnostic d =
            op.emitOpError()
            << how << " @" << buffer << " while the asynchronous "
            << stringifyCollectiveKind(c.getKind()) << " into @" << output
            << " is in flight; wait for it first";
        d.attachNote(c.getLoc()) << "the collective starts here";
        return d;
      };
      for (StringRef w : writes)
        if (w == output || w == c.getInput())
          return clash(w, "writes");
      for (StringRef r : reads)
        if (r == output)
          return clash(r, "reads");
    }
    if (auto c = dyn_cast<CollectiveOp>(op)) {
      if (c.getLastMicroBatch() && phase.getKind() != PhaseKind::backward)
        return c.emitOpError("runs in the last micro-batch only, which a ")
               << stringifyPhaseKind(phase.getKind()) << " phase does not have";
      if (c.getNextStep() &&
          (phase.getKind() != PhaseKind::step || !c.getAsync()))
        return c.emitOpError("next_step needs an async collective of the "
                             "step phase");
      if (c.getAsync() && c.getLastMicroBatch())
        fromLastMicroBatch[c.getOutput()] = c;
      else if (c.getNextStep())
        carried[c.getOutput()] = c;
      else if (c.getAsync())
        inFlight[c.getOutput()] = c;
    }
  }
  if (!inFlight.empty()) {
    CollectiveOp c = inFlight.front().second;
    return c.emitOpError("is asynchronous but no exec.wait @")
           << c.getOutput() << " follows it in its phase";
  }
  return success();
}

} // namespace

/// Every buffer a launch names must be one of the program's: checked here,
/// with one table for the whole program, rather than by each launch.
LogicalResult ProgramOp::verifyRegions() {
  int schedules = 0;
  llvm::StringMap<BufferOp> buffers;
  for (Operation &op : getBody().front()) {
    if (auto buffer = dyn_cast<BufferOp>(op))
      buffers[buffer.getSymName()] = buffer;
    else if (isa<ScheduleOp>(op))
      ++schedules;
    else if (!isa<PhaseOp>(op))
      return op.emitOpError("cannot appear in an exec.program");
  }
  if (schedules > 1)
    return emitOpError("has ") << schedules << " schedules; at most one";
  auto check = [&](Operation *op, Attribute ref) -> LogicalResult {
    auto symbol = cast<FlatSymbolRefAttr>(ref);
    if (!buffers.count(symbol.getValue()))
      return op->emitOpError("names ")
             << symbol << ", which is not a buffer of its exec.program";
    return success();
  };
  // Async last-micro-batch collectives are waited for in the step phase,
  // which comes after every other; next_step ones of the step phase in the
  // next step's forward phases.
  llvm::MapVector<StringRef, CollectiveOp> fromLastMicroBatch, fromLastStep;
  llvm::StringSet<> waitedNextStep;
  for (auto phase : getBody().front().getOps<PhaseOp>())
    if (phase.getKind() == PhaseKind::step)
      for (auto c : phase.getBody().front().getOps<CollectiveOp>())
        if (c.getNextStep())
          fromLastStep[c.getOutput()] = c;
  SmallVector<PhaseOp> ordered;
  for (auto phase : getBody().front().getOps<PhaseOp>())
    if (phase.getKind() != PhaseKind::step)
      ordered.push_back(phase);
  for (auto phase : getBody().front().getOps<PhaseOp>())
    if (phase.getKind() == PhaseKind::step)
      ordered.push_back(phase);
  for (PhaseOp phase : ordered) {
    for (Operation &op : phase.getBody().front()) {
      SmallVector<Attribute> refs;
      if (auto kernel = dyn_cast<KernelOp>(op)) {
        llvm::append_range(refs, kernel.getIns());
        llvm::append_range(refs, kernel.getOuts());
      } else if (auto c = dyn_cast<CollectiveOp>(op)) {
        refs = {c.getInputAttr(), c.getOutputAttr()};
        if (c.getDim()) {
          RankedTensorType type =
              buffers.lookup(c.getInput())
                  ? buffers.lookup(c.getInput()).getTensorType()
                  : RankedTensorType();
          if (type && static_cast<int64_t>(*c.getDim()) >= type.getRank())
            return c.emitOpError("dim ")
                   << *c.getDim() << " is out of range for " << type;
        }
      } else if (auto send = dyn_cast<SendOp>(op)) {
        refs = {send.getBufferAttr()};
      } else if (auto recv = dyn_cast<RecvOp>(op)) {
        refs = {recv.getBufferAttr()};
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        refs = {wait.getBufferAttr()};
      }
      for (Attribute ref : refs)
        if (failed(check(&op, ref)))
          return failure();
    }
    if (failed(verifyAsyncCollectives(phase, fromLastMicroBatch, fromLastStep,
                                      waitedNextStep)))
      return failure();
  }
  for (auto &[output, c] : fromLastStep)
    if (!waitedNextStep.contains(output))
      return c.emitOpError("is carried to the next step but no exec.wait @")
             << output << " first_micro_batch in a forward phase waits for it";
  if (!fromLastMicroBatch.empty()) {
    CollectiveOp c = fromLastMicroBatch.front().second;
    return c.emitOpError("is asynchronous but no exec.wait @")
           << c.getOutput() << " follows it in the step phase";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

namespace {

LogicalResult checkCount(Operation *op, StringRef what, size_t count,
                         unsigned min, unsigned max) {
  if (!partita::plan::countWithin(count, min, max)) {
    InFlightDiagnostic diag = op->emitOpError("takes ");
    if (min == max)
      diag << min;
    else if (max == partita::plan::kAnyCount)
      diag << "at least " << min;
    else
      diag << min << " to " << max;
    return diag << " " << what << ", got " << count;
  }
  return success();
}

} // namespace

LogicalResult PhaseOp::verify() {
  bool perChunk = getKind() != PhaseKind::step;
  if (perChunk != getChunk().has_value())
    return emitOpError(perChunk ? "of a model chunk needs `chunk`"
                                : "`step` runs once per step and takes no "
                                  "`chunk`");
  return success();
}

LogicalResult KernelOp::verify() {
  const partita::plan::KernelInfo &signature = partita::plan::info(getKernel());
  if (failed(checkCount(*this, "inputs", getIns().size(), signature.minIns,
                        signature.maxIns)) ||
      failed(checkCount(*this, "outputs", getOuts().size(), signature.minOuts,
                        signature.maxOuts)))
    return failure();
  if (auto accumulate = getAccumulate();
      accumulate && accumulate->size() != getOuts().size())
    return emitOpError("has ") << accumulate->size() << " accumulate flags for "
                               << getOuts().size() << " outputs";
  return success();
}

LogicalResult CollectiveOp::verify() {
  if (getKind() == CollectiveKind::all_reduce) {
    if (getInput() != getOutput())
      return emitOpError("all_reduce is in place: input and output must be "
                         "the same buffer");
    if (getDim())
      return emitOpError("all_reduce takes no `dim`");
    if (getAccumulate())
      return emitOpError("all_reduce is in place: it cannot `accumulate`");
    return success();
  }
  if (getReduction() != Reduction::sum)
    return emitOpError("only all_reduce takes a reduction other than sum");
  return success();
}

LogicalResult ScheduleOp::verify() {
  auto program = (*this)->getParentOfType<ProgramOp>();
  // The program's phases, found once: its body is mostly buffers.
  SmallVector<PhaseOp> phases(program.getBody().front().getOps<PhaseOp>());
  for (Operation &op : getBody().front()) {
    auto run = dyn_cast<RunOp>(op);
    if (!run)
      return op.emitOpError("cannot appear in an exec.schedule");
    if (run.getPhase() == PhaseKind::step)
      return run.emitOpError("the step phase runs once, after the schedule");
    bool found = llvm::any_of(phases, [&](PhaseOp phase) {
      return phase.getKind() == run.getPhase() &&
             phase.getChunk() == run.getChunk();
    });
    if (!found)
      return run.emitOpError("runs ")
             << stringifyPhaseKind(run.getPhase()) << " of chunk "
             << run.getChunk() << ", which the program does not have";
  }
  return success();
}

#define GET_OP_CLASSES
#include "dialects/exec/ExecOps.cpp.inc"
