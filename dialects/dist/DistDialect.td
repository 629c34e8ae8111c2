//===- DistDialect.td - The dist distribution dialect ------*- tablegen -*-===//
//
// The `dist` dialect says where and how a model is distributed. It starts
// with the hardware: `#dist.topology` on the module makes every later pass a
// pure function of its input IR.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITA_DIST_DIALECT
#define PARTITA_DIST_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::partita::dist";
  let summary = "Hardware topology and the distribution of a model";
  let description = [{
    Attributes describing the cluster a model is compiled for. The module
    carries its topology as the `dist.topology` attribute:

    ```mlir
    module attributes {dist.topology = #dist.topology<"dgx-h100", nodes = 2,
        devices_per_node = 8,
        device = #dist.device<"H100-SXM-80GB", bf16_tflops = 989, ...>,
        intra_node = #dist.link<nvswitch, gbytes_per_s = 450, latency_us = 2>,
        inter_node = #dist.network<rail_optimized, nics_per_node = 8, ...>>} {
      ...
    }
    ```

    Units are part of every field name: `tflops` is 10^12 FLOP/s,
    `gbytes_per_s` is 10^9 bytes/s, `gbits_per_s` is 10^9 bits/s, `gib` is
    2^30 bytes, `us` is microseconds.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class Dist_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dist_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Dist_LinkNVSwitch : I32EnumAttrCase<"nvswitch", 0>;
def Dist_LinkNVLink : I32EnumAttrCase<"nvlink", 1>;
def Dist_LinkPCIe : I32EnumAttrCase<"pcie", 2>;
def Dist_LinkSharedMemory : I32EnumAttrCase<"shared_memory", 3>;
def Dist_LinkKind : I32EnumAttr<"LinkKind",
    "how the devices of one node are connected",
    [Dist_LinkNVSwitch, Dist_LinkNVLink, Dist_LinkPCIe,
     Dist_LinkSharedMemory]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}

def Dist_NetworkFatTree : I32EnumAttrCase<"fat_tree", 0>;
def Dist_NetworkRailOptimized : I32EnumAttrCase<"rail_optimized", 1>;
def Dist_NetworkKind : I32EnumAttr<"NetworkKind",
    "shape of the inter-node network",
    [Dist_NetworkFatTree, Dist_NetworkRailOptimized]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}

def Dist_DeviceAttr : Dist_Attr<"Device", "device"> {
  let summary = "an accelerator (or CPU rank) and its peak figures";
  let description = [{
    Peak dense throughput per element type in TFLOP/s (10^12 FLOP/s),
    memory in GiB, HBM bandwidth in GB/s (10^9 bytes/s).

    `#dist.device<"A100-SXM-80GB", bf16_tflops = 312, fp16_tflops = 312,
    fp32_tflops = 19.5, memory_gib = 80, hbm_gbytes_per_s = 2039>`
  }];
  let parameters = (ins
    StringRefParameter<"device kind">:$kind,
    APFloatParameter<"dense bf16 TFLOP/s">:$bf16_tflops,
    APFloatParameter<"dense fp16 TFLOP/s">:$fp16_tflops,
    APFloatParameter<"dense fp32 TFLOP/s">:$fp32_tflops,
    APFloatParameter<"memory in GiB">:$memory_gib,
    APFloatParameter<"HBM bandwidth in GB/s">:$hbm_gbytes_per_s
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_LinkAttr : Dist_Attr<"Link", "link"> {
  let summary = "the links between the devices of one node";
  let description = [{
    Bandwidth per device and per direction in GB/s, and the latency of one
    transfer in microseconds.

    `#dist.link<nvswitch, gbytes_per_s = 300, latency_us = 3>`
  }];
  let parameters = (ins
    "LinkKind":$kind,
    APFloatParameter<"GB/s per device per direction">:$gbytes_per_s,
    APFloatParameter<"latency in microseconds">:$latency_us
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_NetworkAttr : Dist_Attr<"Network", "network"> {
  let summary = "the network between nodes";
  let description = [{
    NICs per node with their line rate in Gb/s (10^9 bits/s) per direction,
    the end-to-end latency of one message in microseconds, the network's
    shape, and its oversubscription (1: full bisection bandwidth, 2: half).

    `#dist.network<rail_optimized, nics_per_node = 8, gbits_per_s = 200,
    latency_us = 5, oversubscription = 1>`
  }];
  let parameters = (ins
    "NetworkKind":$kind,
    "int64_t":$nics_per_node,
    APFloatParameter<"Gb/s per NIC per direction">:$gbits_per_s,
    APFloatParameter<"latency in microseconds">:$latency_us,
    APFloatParameter<"oversubscription ratio (>= 1)">:$oversubscription
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_CalibrationAttr : Dist_Attr<"Calibration", "calibration"> {
  let summary = "efficiencies measured on the cluster";
  let description = [{
    What a measurement of the cluster found (plan-run --bandwidth-test
    --write-topology): the fraction of the device's peak a large GEMM
    reaches, the size at which GEMM efficiency halves in each dimension,
    the fractions of peak of attention and of memory bandwidth of
    memory-bound kernels, and the fraction of the links' bandwidth a
    collective reaches. Each is optional; one given replaces the cost
    model's default (docs/cost-model.md), and --cost-params replaces it in
    turn.

    `#dist.calibration<gemm_efficiency = 1, gemm_half_dim = 12.5,
    collective_efficiency = 1>`
  }];
  let parameters = (ins
    OptionalParameter<"std::optional<::llvm::APFloat>">:$gemm_efficiency,
    OptionalParameter<"std::optional<::llvm::APFloat>">:$gemm_half_dim,
    OptionalParameter<"std::optional<::llvm::APFloat>">:$attention_efficiency,
    OptionalParameter<"std::optional<::llvm::APFloat>">:$hbm_efficiency,
    OptionalParameter<"std::optional<::llvm::APFloat>">:$collective_efficiency
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_TopologyAttr : Dist_Attr<"Topology", "topology"> {
  let summary = "the cluster a model is compiled for";
  let description = [{
    `nodes` identical nodes of `devices_per_node` devices. Ranks are
    numbered node by node: rank `r` is device `r % devices_per_node` of node
    `r / devices_per_node`, so the innermost mesh axis stays in a node.
  }];
  let parameters = (ins
    StringRefParameter<"topology name">:$name,
    "int64_t":$nodes,
    "int64_t":$devices_per_node,
    "DeviceAttr":$device,
    "LinkAttr":$intra_node,
    "NetworkAttr":$inter_node,
    OptionalParameter<"CalibrationAttr">:$calibration
  );
  let assemblyFormat = [{
    `<` $name `,` `nodes` `=` $nodes `,` `devices_per_node` `=`
    $devices_per_node `,` `device` `=` qualified($device) `,` `intra_node`
    `=` qualified($intra_node) `,` `inter_node` `=` qualified($inter_node)
    (`,` `calibration` `=` qualified($calibration)^)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumDevices() const { return getNodes() * getDevicesPerNode(); }
  }];
}

def Dist_RecomputeNone : I32EnumAttrCase<"none", 0>;
def Dist_RecomputeSelective : I32EnumAttrCase<"selective", 1>;
def Dist_RecomputeFull : I32EnumAttrCase<"full", 2>;
def Dist_RecomputeKind : I32EnumAttr<"RecomputeKind",
    "activation recomputation",
    [Dist_RecomputeNone, Dist_RecomputeSelective, Dist_RecomputeFull]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}

def Dist_ScheduleGPipe : I32EnumAttrCase<"gpipe", 0>;
def Dist_Schedule1F1B : I32EnumAttrCase<"one_f_one_b", 1, "1f1b">;
def Dist_ScheduleInterleaved : I32EnumAttrCase<"interleaved", 2>;
def Dist_ScheduleKind : I32EnumAttr<"ScheduleKind", "pipeline schedule",
    [Dist_ScheduleGPipe, Dist_Schedule1F1B, Dist_ScheduleInterleaved]> {
  let cppNamespace = "::partita::dist";
  let genSpecializedAttr = 0;
}

def Dist_StrategyAttr : Dist_Attr<"Strategy", "strategy"> {
  let summary = "the parallel configuration chosen for a model";
  let description = [{
    Data, tensor and pipeline parallel sizes (`dp * tp * pp` devices),
    virtual pipeline stages, the ZeRO stage, micro-batch size and count,
    recomputation, sequence parallelism, the pipeline schedule and the
    layers of each pipeline stage. `dist-search-strategy` sets it as the
    module's `dist.strategy`; later passes partition by it. The verifier
    holds the rules between them: `vpp > 1` exactly with the interleaved
    schedule, which needs `pp > 1` and `num_micro_batches` divisible by
    `pp`, and one positive `stage_layers` entry per model chunk
    (`pp * vpp`).

    ```mlir
    #dist.strategy<dp = 8, tp = 8, pp = 2, vpp = 1, zero = 1,
      micro_batch_size = 1, num_micro_batches = 64, recompute = selective,
      sequence_parallel = 1, schedule = "1f1b",
      stage_layers = [16, 16]>
    ```
  }];
  let parameters = (ins
    "int64_t":$dp, "int64_t":$tp, "int64_t":$pp, "int64_t":$vpp,
    "int64_t":$zero, "int64_t":$micro_batch_size,
    "int64_t":$num_micro_batches, "RecomputeKind":$recompute,
    "int64_t":$sequence_parallel, "ScheduleKind":$schedule,
    "::mlir::DenseI64ArrayAttr":$stage_layers
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // PARTITA_DIST_DIALECT
