//===- TopologyGraph.h - Devices, switches and NICs as a graph --*- C++ -*-===//
//
// A Boost.Graph model of a Topology: one vertex per device, per node fabric
// switch (NVSwitch, PCIe switch or host memory), per network switch, and two
// per NIC (sending, receiving); directed edges carry a bandwidth per
// direction and a latency. It
// answers what collectives need: the bottleneck bandwidth and the latency of
// rings over groups of ranks, taking into account links that several flows
// share.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_COMPILER_TOPOLOGY_TOPOLOGYGRAPH_H
#define PARTITA_COMPILER_TOPOLOGY_TOPOLOGYGRAPH_H

#include "compiler/Topology/Topology.h"

#include <boost/graph/adjacency_list.hpp>

#include <map>
#include <memory>
#include <vector>

namespace partita {

/// What a set of concurrent rings sees.
struct RingCost {
  /// Bandwidth each ring gets per direction: the minimum over the links it
  /// uses of the link's bandwidth divided by the flows that share it.
  double bytesPerS = 0;
  /// Latency of the slowest hop: one step of the ring.
  double latencyS = 0;
  /// Every hop stays inside one node.
  bool intraNode = true;
  /// Number of hops of one ring (its size).
  int64_t hops = 0;
};

class TopologyGraph {
public:
  explicit TopologyGraph(const Topology &topology);
  /// The graph of the nodes that hold ranks 0 .. `usedDevices` - 1, for a
  /// plan on those ranks: routes and bandwidths between them are those of
  /// the whole cluster, whose size still sets the shared switches'
  /// capacity, at a fraction of the whole graph's cost on a large cluster.
  /// Routing other ranks is a fatal error.
  TopologyGraph(const Topology &topology, int64_t usedDevices);

  const Topology &topology() const { return topo; }
  size_t numVertices() const { return boost::num_vertices(graph); }
  size_t numEdges() const { return boost::num_edges(graph); }

  /// One ring over `ranks` in the given order (rank i sends to rank i+1,
  /// the last to the first).
  RingCost ring(const std::vector<int64_t> &ranks) const;
  /// Rings that run at the same time and share links (e.g. the per-rail
  /// rings of a hierarchical all-reduce).
  RingCost
  concurrentRings(const std::vector<std::vector<int64_t>> &rings) const;
  /// A single transfer from `src` to `dst`.
  RingCost path(int64_t src, int64_t dst) const;

  /// The same topology with at most `nodes` nodes. Groups whose ranks repeat
  /// one pattern on every node load each link of a node, and each network
  /// link per node, alike however many nodes they span, so their rings are
  /// costed on a few nodes (built once, memoised).
  const TopologyGraph &withNodes(int64_t nodes) const;

private:
  struct EdgeProps {
    double bytesPerS = 0;
    double latencyS = 0;
  };
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                            boost::no_property, EdgeProps>;
  using Edge = Graph::edge_descriptor;

  void addEdge(size_t from, size_t to, double bytesPerS, double latencyS);
  void addLink(size_t from, size_t to, double bytesPerS, double upLatency);
  /// The fewest-hop route from device `src` to device `dst`, ties broken by
  /// the lower latency; memoised.
  const std::vector<Edge> &route(int64_t src, int64_t dst) const;

  Topology topo;
  /// Ranks 0 .. builtDevices - 1 are in the graph.
  int64_t builtDevices;
  Graph graph;
  mutable std::map<std::pair<int64_t, int64_t>, std::vector<Edge>> routes;
  /// The strategy search asks for the same few groups many times.
  mutable std::map<std::vector<std::vector<int64_t>>, RingCost> ringCache;
  mutable std::map<int64_t, std::unique_ptr<TopologyGraph>> smaller;
  /// route()'s breadth-first search, per vertex: unreached (depth -1)
  /// between calls.
  mutable struct {
    std::vector<double> latency;
    std::vector<int64_t> depth;
    std::vector<Edge> via;
  } routeSearch;
};

} // namespace partita

#endif // PARTITA_COMPILER_TOPOLOGY_TOPOLOGYGRAPH_H
