//===- Topology.cpp - Clusters: presets, JSON, attribute ------------------===//

#include "compiler/Topology/Topology.h"
#include "compiler/Import/JsonReader.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using llvm::StringRef;

namespace partita {

constexpr double kTera = 1e12, kGiga = 1e9, kMicro = 1e-6;

double DeviceSpec::peakFlops(DType type) const {
  switch (type) {
  case DType::BF16:
    return bf16Flops;
  case DType::F16:
    return fp16Flops;
  case DType::F32:
    return fp32Flops;
  }
  return fp32Flops;
}

//===----------------------------------------------------------------------===//
// Presets (sources in docs/topology.md)
//===----------------------------------------------------------------------===//

namespace {

Topology dgxA100() {
  Topology t;
  t.name = "dgx-a100";
  t.devicesPerNode = 8;
  t.device = {"A100-SXM-80GB", 312 * kTera, 312 * kTera,
              19.5 * kTera,    80 * kGiB,   2039 * kGiga};
  t.intraNode = {dist::LinkKind::nvswitch, 300 * kGiga, 3 * kMicro};
  t.interNode = {dist::NetworkKind::fat_tree, 8, 200 * kGiga / 8, 5 * kMicro,
                 1.0};
  return t;
}

Topology dgxH100() {
  Topology t;
  t.name = "dgx-h100";
  t.devicesPerNode = 8;
  t.device = {"H100-SXM-80GB", 989 * kTera, 989 * kTera,
              67 * kTera,      80 * kGiB,   3350 * kGiga};
  t.intraNode = {dist::LinkKind::nvswitch, 450 * kGiga, 3 * kMicro};
  t.interNode = {dist::NetworkKind::rail_optimized, 8, 400 * kGiga / 8,
                 5 * kMicro, 1.0};
  return t;
}

Topology hgxH200() {
  Topology t = dgxH100();
  t.name = "hgx-h200";
  t.device = {"H200-SXM-141GB", 989 * kTera, 989 * kTera,
              67 * kTera,       140 * kGiB,  4800 * kGiga};
  return t;
}

/// Ranks are processes on this host, one core each. The figures are the
/// documented assumptions of docs/topology.md, not measurements.
Topology cpuHost() {
  Topology t;
  t.name = "cpu";
  t.device = {"cpu-core",   0.05 * kTera, 0.05 * kTera,
              0.05 * kTera, 4 * kGiB,     10 * kGiga};
  t.intraNode = {dist::LinkKind::shared_memory, 5 * kGiga, 1 * kMicro};
  t.interNode = {dist::NetworkKind::fat_tree, 1, 10 * kGiga / 8, 50 * kMicro,
                 1.0};
  return t;
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

} // namespace

std::vector<std::string> topologyPresetNames() {
  return {"dgx-a100", "dgx-h100", "hgx-h200", "cpu"};
}

llvm::Expected<Topology> presetTopology(StringRef name, int64_t count) {
  if (count < 1 || count > kMaxDevices)
    return makeError("topology count must be between 1 and " +
                     llvm::Twine(kMaxDevices) + ", got " + llvm::Twine(count));
  Topology t;
  if (name == "dgx-a100")
    t = dgxA100();
  else if (name == "dgx-h100")
    t = dgxH100();
  else if (name == "hgx-h200")
    t = hgxH200();
  else if (name == "cpu")
    t = cpuHost();
  else
    return makeError("unknown topology preset '" + name +
                     "'; presets: " + llvm::join(topologyPresetNames(), ", ") +
                     " (or a .json file)");
  if (name == "cpu")
    t.devicesPerNode = count; // N ranks on this host
  else
    t.nodes = count;
  if (t.numDevices() > kMaxDevices)
    return makeError(name + ":" + llvm::Twine(count) + " has " +
                     llvm::Twine(t.numDevices()) + " devices; at most " +
                     llvm::Twine(kMaxDevices) + " are supported");
  return t;
}

Topology defaultTopology() { return *presetTopology("dgx-h100", 1); }

llvm::Expected<Topology> parseTopologyOption(StringRef value) {
  if (value.ends_with_insensitive(".json"))
    return readTopologyFile(value);
  auto [name, countText] = value.split(':');
  int64_t count = 1;
  if (value.contains(':') && (countText.getAsInteger(10, count) || count < 1))
    return makeError("--topology=" + value +
                     ": expected NAME:N with N a positive integer");
  llvm::Expected<Topology> preset = presetTopology(name, count);
  if (!preset)
    return makeError("--topology=" + value + ": " +
                     llvm::toString(preset.takeError()));
  return preset;
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

/// Rates and sizes by default: at least 1e-6 in their units, as small as
/// a divisor may be for every time the cost model forms to stay finite.
void readNumber(ObjectReader &r, StringRef key, double scale, double &field,
                ObjectReader::Need need, double min = 1e-6,
                bool exclusive = false) {
  // Far beyond any machine, and small enough that every product the cost
  // model forms stays finite (a report must not say inf).
  constexpr double kLargest = 1e9;
  if (auto v = r.number(key, need, min, kLargest, exclusive))
    field = *v * scale;
}

/// The measured efficiencies, within the bounds of --cost-params.
void readCalibration(ObjectReader &c, Calibration &calibration) {
  using N = ObjectReader::Need;
  for (auto [key, field] :
       {std::pair{"gemm_efficiency", &calibration.gemmEfficiency},
        {"attention_efficiency", &calibration.attentionEfficiency},
        {"hbm_efficiency", &calibration.hbmEfficiency},
        {"collective_efficiency", &calibration.collectiveEfficiency}})
    *field = c.number(key, N::Optional, 1e-6, 1.0);
  calibration.gemmHalfDim = c.number("gemm_half_dim", N::Optional, 0.0, 1e6);
  c.rejectUnknownKeys();
}

} // namespace

llvm::Expected<Topology> readTopology(StringRef text, StringRef fileName) {
  ErrorList errors;
  std::optional<nlohmann::json> doc = parseJsonObject(text, fileName, errors);
  if (!doc)
    return errors.takeError();
  using N = ObjectReader::Need;
  ObjectReader root(*doc, fileName.str(), "", errors);
  std::optional<int64_t> version = root.integer("version", N::Required, 1);
  if (version && *version != 1)
    errors.add(root.where("version"), "unsupported topology version " +
                                          llvm::Twine(*version) +
                                          "; this Partita reads version 1");
  if (!errors.empty())
    return errors.takeError();

  // A preset gives defaults for every field; without one all are required.
  Topology t;
  N need = N::Required;
  if (auto preset = root.oneOf("preset", N::Optional,
                               {"dgx-a100", "dgx-h100", "hgx-h200", "cpu"})) {
    t = *presetTopology(*preset, 1);
    need = N::Optional;
  }
  t.name = llvm::sys::path::stem(fileName).str();
  if (auto name = root.string("name", N::Optional))
    t.name = *name;
  if (auto nodes = root.integer("nodes", need, 1, kMaxDevices))
    t.nodes = *nodes;
  if (auto perNode =
          root.integer("devices_per_node", need, 1, kMaxDevicesPerNode))
    t.devicesPerNode = *perNode;

  if (auto d = root.object("device", need)) {
    if (auto kind = d->string("kind", need)) {
      // Reports name the device by it, and #dist.device requires one.
      if (kind->empty())
        errors.add(d->where("kind"), "must not be empty");
      t.device.kind = *kind;
    }
    readNumber(*d, "bf16_tflops", kTera, t.device.bf16Flops, need);
    readNumber(*d, "fp16_tflops", kTera, t.device.fp16Flops, need);
    readNumber(*d, "fp32_tflops", kTera, t.device.fp32Flops, need);
    readNumber(*d, "memory_gib", kGiB, t.device.memoryBytes, need);
    readNumber(*d, "hbm_gbytes_per_s", kGiga, t.device.hbmBytesPerS, need);
    d->rejectUnknownKeys();
  }
  if (auto l = root.object("intra_node", need)) {
    if (auto kind = l->oneOf("kind", need,
                             {"nvswitch", "nvlink", "pcie", "shared_memory"}))
      t.intraNode.kind = *dist::symbolizeLinkKind(*kind);
    readNumber(*l, "gbytes_per_s", kGiga, t.intraNode.bytesPerS, need);
    readNumber(*l, "latency_us", kMicro, t.intraNode.latencyS, need, 0.0,
               false);
    l->rejectUnknownKeys();
  }
  if (auto n = root.object("inter_node", need)) {
    if (auto kind = n->oneOf("kind", need, {"fat_tree", "rail_optimized"}))
      t.interNode.kind = *dist::symbolizeNetworkKind(*kind);
    if (auto nics = n->integer("nics_per_node", need, 1, kMaxNicsPerNode))
      t.interNode.nicsPerNode = *nics;
    // Line rates are quoted in bits: 400 Gb/s is 50 GB/s.
    readNumber(*n, "gbits_per_s", kGiga / 8, t.interNode.bytesPerSPerNic, need);
    readNumber(*n, "latency_us", kMicro, t.interNode.latencyS, need, 0.0,
               false);
    readNumber(*n, "oversubscription", 1.0, t.interNode.oversubscription,
               N::Optional, 1.0, false);
    n->rejectUnknownKeys();
  }
  if (auto c = root.object("calibration", N::Optional))
    readCalibration(*c, t.calibration);
  root.rejectUnknownKeys();
  if (errors.empty() && t.numDevices() > kMaxDevices)
    errors.add(root.where("nodes"),
               llvm::Twine(t.nodes) + " nodes of " +
                   llvm::Twine(t.devicesPerNode) + " devices exceed the " +
                   llvm::Twine(kMaxDevices) + " devices supported");
  if (!errors.empty())
    return errors.takeError();
  return t;
}

llvm::Expected<Topology> readTopologyFile(StringRef path) {
  ErrorList errors;
  std::optional<std::string> text = readFileText(path, errors);
  if (!text)
    return errors.takeError();
  return readTopology(*text, path);
}

//===----------------------------------------------------------------------===//
// #dist.topology
//===----------------------------------------------------------------------===//

dist::TopologyAttr toAttr(const Topology &t, mlir::MLIRContext *ctx) {
  ctx->getOrLoadDialect<dist::DistDialect>();
  using llvm::APFloat;
  auto device = dist::DeviceAttr::get(
      ctx, t.device.kind, APFloat(t.device.bf16Flops / kTera),
      APFloat(t.device.fp16Flops / kTera), APFloat(t.device.fp32Flops / kTera),
      APFloat(t.device.memoryBytes / kGiB),
      APFloat(t.device.hbmBytesPerS / kGiga));
  auto link = dist::LinkAttr::get(ctx, t.intraNode.kind,
                                  APFloat(t.intraNode.bytesPerS / kGiga),
                                  APFloat(t.intraNode.latencyS / kMicro));
  auto network =
      dist::NetworkAttr::get(ctx, t.interNode.kind, t.interNode.nicsPerNode,
                             APFloat(t.interNode.bytesPerSPerNic * 8 / kGiga),
                             APFloat(t.interNode.latencyS / kMicro),
                             APFloat(t.interNode.oversubscription));
  const Calibration &c = t.calibration;
  auto f = [](std::optional<double> v) -> std::optional<APFloat> {
    return v ? std::optional(APFloat(*v)) : std::nullopt;
  };
  auto calibration = c.empty()
                         ? dist::CalibrationAttr()
                         : dist::CalibrationAttr::get(
                               ctx, f(c.gemmEfficiency), f(c.gemmHalfDim),
                               f(c.attentionEfficiency), f(c.hbmEfficiency),
                               f(c.collectiveEfficiency));
  return dist::TopologyAttr::get(ctx, t.name, t.nodes, t.devicesPerNode, device,
                                 link, network, calibration);
}

Topology fromAttr(dist::TopologyAttr attr) {
  auto d = [](const llvm::APFloat &v) { return v.convertToDouble(); };
  Topology t;
  t.name = attr.getName().str();
  t.nodes = attr.getNodes();
  t.devicesPerNode = attr.getDevicesPerNode();
  dist::DeviceAttr dev = attr.getDevice();
  t.device = {dev.getKind().str(),
              d(dev.getBf16Tflops()) * kTera,
              d(dev.getFp16Tflops()) * kTera,
              d(dev.getFp32Tflops()) * kTera,
              d(dev.getMemoryGib()) * kGiB,
              d(dev.getHbmGbytesPerS()) * kGiga};
  dist::LinkAttr link = attr.getIntraNode();
  t.intraNode = {link.getKind(), d(link.getGbytesPerS()) * kGiga,
                 d(link.getLatencyUs()) * kMicro};
  dist::NetworkAttr net = attr.getInterNode();
  t.interNode = {net.getKind(), net.getNicsPerNode(),
                 d(net.getGbitsPerS()) * kGiga / 8,
                 d(net.getLatencyUs()) * kMicro, d(net.getOversubscription())};
  auto od = [&](const std::optional<llvm::APFloat> &v) {
    return v ? std::optional(d(*v)) : std::nullopt;
  };
  if (dist::CalibrationAttr c = attr.getCalibration())
    t.calibration = {od(c.getGemmEfficiency()), od(c.getGemmHalfDim()),
                     od(c.getAttentionEfficiency()), od(c.getHbmEfficiency()),
                     od(c.getCollectiveEfficiency())};
  return t;
}

} // namespace partita
