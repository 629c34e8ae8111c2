//===- CostReport.cpp - The cost report, for people and for tools ---------===//

#include "compiler/CostModel/CostReport.h"

#include "llvm/Support/Format.h"

namespace partita {

void printCostReport(const CostEstimate &e, const ModelProfile &profile,
                     llvm::StringRef topologyNote, llvm::raw_ostream &os) {
  using llvm::format;
  const ParallelConfig &c = e.config;
  os << "cost of \"" << profile.name << "\" on " << e.devices
     << " devices of topology \"" << e.topologyName << "\"\n";
  if (!topologyNote.empty())
    os << "  (" << topologyNote << ")\n";
  os << "  strategy  " << c.str() << "\n"
     << "  step      " << c.globalBatch()
     << " sequences = " << c.numMicroBatches << " micro-batches of "
     << c.microBatchSize << " per data-parallel rank\n";
  for (const std::string &name : e.costOverrides)
    os << "  cost-model override " << name << "\n";
  os << "\n";

  os << "per device and micro-batch: one layer by op class, and the LM head\n";
  os << format("  %-14s %12s %10s %10s\n", "op", "fwd GFLOP", "fwd ms",
               "bwd ms");
  for (const auto &[name, op] : e.layerOps)
    os << format("  %-14s %12.2f %10.3f %10.3f\n", name.c_str(),
                 op.forwardFlops / 1e9, op.forwardTimeS * 1e3,
                 op.backwardTimeS * 1e3);

  os << "\ntime per step (s)\n";
  auto row = [&](const char *name, double seconds) {
    os << format("  %-26s %10.4f\n", name, seconds);
  };
  row("forward", e.forwardS);
  row("backward", e.backwardS);
  row("recompute", e.recomputeS);
  row("pipeline bubble", e.bubbleS);
  row("tp communication", e.tpCommS);
  row("pp communication", e.ppCommS);
  row("  of which exposed", e.ppCommExposedS);
  row("dp communication", e.dpCommS);
  row("  of which exposed", e.dpCommExposedS + e.zero3GatherExposedS);
  row("optimizer", e.optimizerS);
  row("step", e.stepTimeS);
  os << format("  %-26s %10.1f%%\n", "bubble fraction", 100 * e.bubbleFraction);
  os << format("  %-26s %10.0f\n", "tokens/s", e.tokensPerS);
  os << format("  %-26s %10.1f  (hardware, with recompute: %.1f)\n",
               "model TFLOP/s per device", e.modelTflopsPerDevice,
               e.hardwareTflopsPerDevice);
  os << format("  %-26s %10.1f%%\n", "MFU", 100 * e.mfu);

  os << "\nmemory per device (GiB)\n";
  const MemoryBreakdown &m = e.memory;
  auto mem = [&](const char *name, double bytes) {
    os << format("  %-26s %10.2f\n", name, bytes / kGiB);
  };
  mem("parameters", m.parameters);
  mem("gradients", m.gradients);
  mem("optimizer states", m.optimizerStates);
  mem("activations", m.activations);
  mem("collective buffers", m.buffers);
  mem("runtime (CUDA, NCCL)", m.runtime);
  mem("total", m.total());
  os << format("  %-26s %10.2f  %s\n", "device memory",
               e.deviceMemoryBytes / kGiB, e.fits() ? "fits" : "DOES NOT FIT");

  os << "\ncommunication per step\n";
  os << format("  %-15s %-5s %-13s %6s %12s %10s %10s %10s\n", "collective",
               "group", "algorithm", "ranks", "MB/call", "calls", "ms/call",
               "total s");
  for (const CollectiveCost &cc : e.collectives)
    os << format("  %-15s %-5s %-13s %6lld %12.2f %10.0f %10.3f %10.4f\n",
                 toString(cc.kind).str().c_str(), cc.group.c_str(),
                 cc.algorithm.c_str(), static_cast<long long>(cc.groupSize),
                 cc.bytesPerCall / 1e6, cc.callsPerStep, cc.timePerCallS * 1e3,
                 cc.totalTimeS());
}

static llvm::json::Array stageLayersJson(const ParallelConfig &c,
                                         int64_t layers) {
  llvm::json::Array a;
  for (int64_t k = 0; k < c.pp * (c.stageLayers.empty() ? c.vpp : 1); ++k)
    a.push_back(c.stageLayers.empty() ? layers / (c.pp * c.vpp)
                                      : c.stageLayers[k]);
  return a;
}

llvm::json::Object strategyJson(const ParallelConfig &c, int64_t layers) {
  return llvm::json::Object{{"dp", c.dp},
                            {"tp", c.tp},
                            {"pp", c.pp},
                            {"vpp", c.vpp},
                            {"zero", c.zero},
                            {"micro_batch_size", c.microBatchSize},
                            {"num_micro_batches", c.numMicroBatches},
                            {"global_batch", c.globalBatch()},
                            {"recompute", toString(c.recompute)},
                            {"sequence_parallel", c.sequenceParallel},
                            {"schedule", toString(c.schedule)},
                            {"stage_layers", stageLayersJson(c, layers)}};
}

llvm::json::Object predictedJson(const CostEstimate &e) {
  const MemoryBreakdown &m = e.memory;
  return llvm::json::Object{
      {"step_time_s", e.stepTimeS},
      {"tokens_per_s", e.tokensPerS},
      {"tflops_per_gpu", e.modelTflopsPerDevice},
      {"hardware_tflops_per_gpu", e.hardwareTflopsPerDevice},
      {"mfu", e.mfu},
      {"peak_memory_bytes_per_gpu", m.total()},
      {"memory_breakdown",
       llvm::json::Object{{"parameters", m.parameters},
                          {"gradients", m.gradients},
                          {"optimizer_states", m.optimizerStates},
                          {"activations", m.activations},
                          {"buffers", m.buffers},
                          {"runtime", m.runtime}}},
      {"comm_time_breakdown", llvm::json::Object{{"tp", e.tpCommS},
                                                 {"pp", e.ppCommS},
                                                 {"dp", e.dpCommS}}},
      {"bubble_fraction", e.bubbleFraction},
      {"exposed_comm_s", e.exposedCommS}};
}

llvm::json::Object costReportJson(const CostEstimate &e,
                                  const ModelProfile &profile,
                                  bool defaultTopology) {
  using llvm::json::Array;
  using llvm::json::Object;
  Array layer;
  for (const auto &[name, op] : e.layerOps)
    layer.push_back(Object{{"op", name},
                           {"forward_flops", op.forwardFlops},
                           {"forward_time_s", op.forwardTimeS},
                           {"backward_time_s", op.backwardTimeS}});
  Array collectives;
  for (const CollectiveCost &cc : e.collectives)
    collectives.push_back(Object{{"kind", toString(cc.kind)},
                                 {"group", cc.group},
                                 {"algorithm", cc.algorithm},
                                 {"group_size", cc.groupSize},
                                 {"bytes_per_call", cc.bytesPerCall},
                                 {"calls_per_step", cc.callsPerStep},
                                 {"time_per_call_s", cc.timePerCallS},
                                 {"total_time_s", cc.totalTimeS()}});
  const MemoryBreakdown &m = e.memory;
  return Object{
      {"model", profile.name},
      {"topology", e.topologyName},
      {"default_topology", defaultTopology},
      {"devices", e.devices},
      {"strategy", strategyJson(e.config, profile.layers.size())},
      {"flops", Object{{"model_flops_per_step", e.modelFlops},
                       {"hardware_flops_per_step", e.hardwareFlops}}},
      {"layer", std::move(layer)},
      {"time_s", Object{{"forward", e.forwardS},
                        {"backward", e.backwardS},
                        {"recompute", e.recomputeS},
                        {"bubble", e.bubbleS},
                        {"tp_comm", e.tpCommS},
                        {"pp_comm", e.ppCommS},
                        {"pp_comm_exposed", e.ppCommExposedS},
                        {"dp_comm", e.dpCommS},
                        {"dp_comm_exposed", e.dpCommExposedS},
                        {"zero3_gather_exposed", e.zero3GatherExposedS},
                        {"optimizer", e.optimizerS}}},
      {"memory_bytes_per_device",
       Object{{"parameters", m.parameters},
              {"gradients", m.gradients},
              {"optimizer_states", m.optimizerStates},
              {"activations", m.activations},
              {"buffers", m.buffers},
              {"runtime", m.runtime},
              {"total", m.total()},
              {"device_capacity", e.deviceMemoryBytes},
              {"fits", e.fits()}}},
      {"collectives", std::move(collectives)},
      {"cost_overrides", llvm::json::Array(e.costOverrides)},
      {"predicted", predictedJson(e)}};
}

} // namespace partita
