//===- TopologyGraph.cpp - Devices, switches and NICs as a graph ----------===//

#include "compiler/Topology/TopologyGraph.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <limits>

namespace partita {

void TopologyGraph::addEdge(size_t from, size_t to, double bytesPerS,
                            double latencyS) {
  boost::add_edge(from, to, EdgeProps{bytesPerS, latencyS}, graph);
}

void TopologyGraph::addLink(size_t from, size_t to, double bytesPerS,
                            double upLatency) {
  // A link is two directed edges; its latency is charged once, going up.
  addEdge(from, to, bytesPerS, upLatency);
  addEdge(to, from, bytesPerS, 0.0);
}

/// The nodes that hold ranks 0 .. `devices` - 1: at least one.
static int64_t nodesHolding(const Topology &topology, int64_t devices) {
  return std::clamp<int64_t>((devices + topology.devicesPerNode - 1) /
                                 topology.devicesPerNode,
                             1, topology.nodes);
}

TopologyGraph::TopologyGraph(const Topology &topology)
    : TopologyGraph(topology, topology.numDevices()) {}

TopologyGraph::TopologyGraph(const Topology &topology, int64_t usedDevices)
    : topo(topology), builtDevices(nodesHolding(topology, usedDevices) *
                                   topology.devicesPerNode),
      graph(builtDevices) {
  const int64_t nodes = builtDevices / topo.devicesPerNode;
  const int64_t perNode = topo.devicesPerNode;
  const IntraNodeLink &link = topo.intraNode;
  const InterNodeNetwork &net = topo.interNode;
  auto device = [&](int64_t node, int64_t local) {
    return static_cast<size_t>(node * perNode + local);
  };

  // Inside a node: a switch every device hangs off, or (nvlink) a direct
  // mesh where each pair gets an equal share of a device's links.
  for (int64_t n = 0; n < nodes; ++n) {
    if (link.kind == dist::LinkKind::nvlink) {
      double share = link.bytesPerS / std::max<int64_t>(perNode - 1, 1);
      for (int64_t a = 0; a < perNode; ++a)
        for (int64_t b = 0; b < perNode; ++b)
          if (a != b)
            boost::add_edge(device(n, a), device(n, b),
                            EdgeProps{share, link.latencyS}, graph);
      continue;
    }
    size_t fabric = boost::add_vertex(graph);
    for (int64_t d = 0; d < perNode; ++d)
      addLink(device(n, d), fabric, link.bytesPerS, link.latencyS);
  }
  if (topo.nodes == 1)
    return;

  // NICs: device d of a node uses NIC d * nics / devicesPerNode (its rail).
  // The device-to-NIC hop (PCIe) is taken not to be the bottleneck. A NIC
  // is two vertices, one sending to the network and one receiving from it,
  // so that no route turns around in a NIC: devices that share one talk
  // through their node's fabric.
  const int64_t nics = net.nicsPerNode;
  const double nicRate = net.bytesPerSPerNic / net.oversubscription;
  std::vector<size_t> nicSend(nodes * nics), nicReceive(nodes * nics);
  for (int64_t n = 0; n < nodes; ++n) {
    for (int64_t k = 0; k < nics; ++k) {
      nicSend[n * nics + k] = boost::add_vertex(graph);
      nicReceive[n * nics + k] = boost::add_vertex(graph);
    }
    for (int64_t d = 0; d < perNode; ++d) {
      int64_t nic = n * nics + d * nics / perNode;
      addEdge(device(n, d), nicSend[nic], net.bytesPerSPerNic, 0.0);
      addEdge(nicReceive[nic], device(n, d), net.bytesPerSPerNic, 0.0);
    }
  }
  auto attachNic = [&](size_t nic, size_t networkSwitch, double bytesPerS) {
    addEdge(nicSend[nic], networkSwitch, bytesPerS, net.latencyS);
    addEdge(networkSwitch, nicReceive[nic], bytesPerS, 0.0);
  };
  if (net.kind == dist::NetworkKind::fat_tree) {
    // A non-blocking (or oversubscribed) core every NIC reaches in one hop.
    size_t core = boost::add_vertex(graph);
    for (size_t nic = 0; nic < nicSend.size(); ++nic)
      attachNic(nic, core, nicRate);
    return;
  }
  // Rail-optimized: NIC k of every node on leaf switch k; leaves joined by
  // a spine carrying cross-rail traffic.
  std::vector<size_t> leaf(nics);
  for (int64_t k = 0; k < nics; ++k)
    leaf[k] = boost::add_vertex(graph);
  for (int64_t n = 0; n < nodes; ++n)
    for (int64_t k = 0; k < nics; ++k)
      attachNic(n * nics + k, leaf[k], net.bytesPerSPerNic);
  size_t spine = boost::add_vertex(graph);
  for (int64_t k = 0; k < nics; ++k)
    addLink(leaf[k], spine, topo.nodes * nicRate, 0.0);
}

const std::vector<TopologyGraph::Edge> &
TopologyGraph::route(int64_t src, int64_t dst) const {
  auto key = std::make_pair(src, dst);
  auto found = routes.find(key);
  if (found != routes.end())
    return found->second;
  if (std::max(src, dst) >= builtDevices || std::min(src, dst) < 0)
    llvm::report_fatal_error(llvm::Twine("TopologyGraph: a route from rank ") +
                             llvm::Twine(src) + " to rank " + llvm::Twine(dst) +
                             " in a graph of ranks 0 to " +
                             llvm::Twine(builtDevices - 1));

  // Breadth-first by hops; among routes of equal hops keep the lowest
  // latency. Stops after the level that reaches the destination. The
  // search's state lives across calls and only what a search reached is
  // reset: a large cluster's graph has hundreds of thousands of vertices,
  // and a route inside a node reaches a dozen.
  const size_t n = boost::num_vertices(graph);
  if (routeSearch.depth.size() != n) {
    routeSearch.latency.assign(n, 0.0);
    routeSearch.depth.assign(n, -1);
    routeSearch.via.assign(n, Edge());
  }
  std::vector<double> &latency = routeSearch.latency;
  std::vector<int64_t> &depth = routeSearch.depth;
  std::vector<Edge> &via = routeSearch.via;
  std::vector<size_t> reached{static_cast<size_t>(src)};
  std::vector<size_t> frontier{static_cast<size_t>(src)}, next;
  latency[src] = 0;
  depth[src] = 0;
  for (int64_t level = 0; !frontier.empty() && depth[dst] < 0; ++level) {
    next.clear();
    for (size_t v : frontier) {
      for (auto [e, end] = boost::out_edges(v, graph); e != end; ++e) {
        size_t w = boost::target(*e, graph);
        double l = latency[v] + graph[*e].latencyS;
        if (depth[w] < 0) {
          depth[w] = level + 1;
          next.push_back(w);
          reached.push_back(w);
        } else if (depth[w] != level + 1 || l >= latency[w]) {
          continue;
        }
        latency[w] = l;
        via[w] = *e;
      }
    }
    std::swap(frontier, next);
  }
  std::vector<Edge> edges;
  for (size_t v = dst; v != static_cast<size_t>(src);
       v = boost::source(via[v], graph))
    edges.push_back(via[v]);
  std::reverse(edges.begin(), edges.end());
  for (size_t v : reached)
    depth[v] = -1;
  return routes.emplace(key, std::move(edges)).first->second;
}

RingCost TopologyGraph::concurrentRings(
    const std::vector<std::vector<int64_t>> &rings) const {
  auto cached = ringCache.find(rings);
  if (cached != ringCache.end())
    return cached->second;
  RingCost cost;
  std::map<Edge, int64_t> flows;
  for (const std::vector<int64_t> &ring : rings) {
    cost.hops = std::max<int64_t>(cost.hops, ring.size());
    if (ring.size() < 2)
      continue;
    for (size_t i = 0; i < ring.size(); ++i) {
      int64_t from = ring[i], to = ring[(i + 1) % ring.size()];
      if (topo.nodeOf(from) != topo.nodeOf(to))
        cost.intraNode = false;
      double hopLatency = 0;
      for (const Edge &e : route(from, to)) {
        ++flows[e];
        hopLatency += graph[e].latencyS;
      }
      cost.latencyS = std::max(cost.latencyS, hopLatency);
    }
  }
  cost.bytesPerS = std::numeric_limits<double>::infinity();
  for (const auto &[edge, count] : flows)
    cost.bytesPerS = std::min(cost.bytesPerS, graph[edge].bytesPerS / count);
  ringCache.emplace(rings, cost);
  return cost;
}

RingCost TopologyGraph::ring(const std::vector<int64_t> &ranks) const {
  return concurrentRings({ranks});
}

const TopologyGraph &TopologyGraph::withNodes(int64_t nodes) const {
  if (nodes >= topo.nodes)
    return *this;
  std::unique_ptr<TopologyGraph> &graph = smaller[nodes];
  if (!graph) {
    Topology t = topo;
    t.nodes = nodes;
    graph = std::make_unique<TopologyGraph>(t);
  }
  return *graph;
}

RingCost TopologyGraph::path(int64_t src, int64_t dst) const {
  RingCost cost;
  cost.hops = 1;
  cost.intraNode = topo.nodeOf(src) == topo.nodeOf(dst);
  cost.bytesPerS = std::numeric_limits<double>::infinity();
  for (const Edge &e : route(src, dst)) {
    cost.bytesPerS = std::min(cost.bytesPerS, graph[e].bytesPerS);
    cost.latencyS += graph[e].latencyS;
  }
  return cost;
}

} // namespace partita
