// RUN: plan-opt %s -split-input-file --dist-attach-topology=topology=dgx-a100:4 | FileCheck %s
// RUN: plan-opt %s -split-input-file --dist-attach-topology=topology=cpu:4 | FileCheck %s --check-prefix=CPU
// RUN: plan-opt %s -split-input-file --dist-attach-topology=topology=%S/Inputs/lab.json | FileCheck %s --check-prefix=FILE
// RUN: not plan-opt %s -split-input-file --dist-attach-topology=topology=tpu:2 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not plan-opt %s -split-input-file --dist-attach-topology 2>&1 | FileCheck %s --check-prefix=EMPTY

// CHECK: module attributes {dist.topology = #dist.topology<"dgx-a100", nodes = 4, devices_per_node = 8,
// CHECK-SAME: device = #dist.device<"A100-SXM-80GB", bf16_tflops = 312, fp16_tflops = 312, fp32_tflops = 19.5, memory_gib = 80, hbm_gbytes_per_s = 2039>
// CHECK-SAME: intra_node = #dist.link<nvswitch, gbytes_per_s = 300, latency_us = 3>
// CHECK-SAME: inter_node = #dist.network<fat_tree, nics_per_node = 8, gbits_per_s = 200, latency_us = 5, oversubscription = 1>>}
// CPU: #dist.topology<"cpu", nodes = 1, devices_per_node = 4, device = #dist.device<"cpu-core"
// FILE: #dist.topology<"lab", nodes = 2, devices_per_node = 4, {{.*}} intra_node = #dist.link<pcie, gbytes_per_s = 32, latency_us = 10>
// BAD: error: --topology=tpu:2: unknown topology preset 'tpu'; presets: dgx-a100, dgx-h100, hgx-h200, cpu (or a .json file)
// EMPTY: error: dist-attach-topology needs topology=NAME[:N] or a .json file
module {
}

// -----

// An existing topology is replaced.
// CHECK: module attributes {dist.topology = #dist.topology<"dgx-a100", nodes = 4
module attributes {dist.topology = #dist.topology<"old", nodes = 1, devices_per_node = 1,
    device = #dist.device<"d", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<pcie, gbytes_per_s = 1, latency_us = 1>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 1, latency_us = 1, oversubscription = 1>>} {
}
