//===- Topology.h - Clusters: devices, links, networks ----------*- C++ -*-===//
//
// A topology in SI units (FLOP/s, bytes, bytes/s, seconds), read from a JSON
// file or a preset, and converted to and from the #dist.topology attribute
// that passes read. docs/topology.md documents the format and the presets.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_TOPOLOGY_TOPOLOGY_H
#define PARTITA_COMPILER_TOPOLOGY_TOPOLOGY_H

#include "dialects/dist/DistDialect.h"
#include "support/DType.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace partita {

struct DeviceSpec {
  std::string kind;
  double bf16Flops = 0, fp16Flops = 0, fp32Flops = 0; // dense peak, FLOP/s
  double memoryBytes = 0;
  double hbmBytesPerS = 0;
  double peakFlops(DType type) const;
};

struct IntraNodeLink {
  dist::LinkKind kind = dist::LinkKind::nvswitch;
  double bytesPerS = 0; // per device, per direction
  double latencyS = 0;
};

struct InterNodeNetwork {
  dist::NetworkKind kind = dist::NetworkKind::fat_tree;
  int64_t nicsPerNode = 1;
  double bytesPerSPerNic = 0; // per direction
  double latencyS = 0;
  double oversubscription = 1;
};

/// Efficiencies measured on the cluster (#dist.calibration): each given one
/// replaces the cost model's default (CostParams), --cost-params replaces
/// it in turn.
struct Calibration {
  std::optional<double> gemmEfficiency, gemmHalfDim, attentionEfficiency,
      hbmEfficiency, collectiveEfficiency;
  bool empty() const {
    return !gemmEfficiency && !gemmHalfDim && !attentionEfficiency &&
           !hbmEfficiency && !collectiveEfficiency;
  }
};

/// Bytes in a GiB, the unit of memory sizes in files and reports.
constexpr double kGiB = 1073741824.0;

/// The largest cluster Partita models: every size derived from a topology
/// then fits int64 and memory.
constexpr int64_t kMaxDevices = int64_t(1) << 18;
constexpr int64_t kMaxDevicesPerNode = 1024;
constexpr int64_t kMaxNicsPerNode = 1024;

struct Topology {
  std::string name;
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  DeviceSpec device;
  IntraNodeLink intraNode;
  InterNodeNetwork interNode;
  Calibration calibration;

  int64_t numDevices() const { return nodes * devicesPerNode; }
  int64_t nodeOf(int64_t rank) const { return rank / devicesPerNode; }
};

/// The names of the built-in presets: dgx-a100, dgx-h100, hgx-h200, cpu.
std::vector<std::string> topologyPresetNames();

/// A preset with `count` nodes (for `cpu`: `count` ranks on one host).
llvm::Expected<Topology> presetTopology(llvm::StringRef name, int64_t count);

/// What plan-opt uses without --topology: one dgx-h100 node.
Topology defaultTopology();

/// Parses a --topology value: `NAME`, `NAME:N` or a path ending in `.json`.
llvm::Expected<Topology> parseTopologyOption(llvm::StringRef value);

/// Reads a topology JSON document; errors name the file and JSON pointer.
llvm::Expected<Topology> readTopology(llvm::StringRef text,
                                      llvm::StringRef fileName);
llvm::Expected<Topology> readTopologyFile(llvm::StringRef path);

dist::TopologyAttr toAttr(const Topology &topology, mlir::MLIRContext *context);
Topology fromAttr(dist::TopologyAttr attr);

} // namespace partita

#endif // PARTITA_COMPILER_TOPOLOGY_TOPOLOGY_H
