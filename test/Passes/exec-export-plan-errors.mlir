// Inputs exec-export-plan rejects, each with a located error.
// RUN: not plan-opt %s -split-input-file --exec-export-plan=output=%t.json -o /dev/null 2>&1 | FileCheck %s
// RUN: not plan-opt %s -split-input-file --exec-export-plan=output=%t.missing/dir/plan.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=WRITE
// RUN: not plan-opt %s -split-input-file --exec-export-plan="output=%t.json allow-unfit=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNFIT

// CHECK: error: exec-export-plan: the module has no dist.strategy to export; compile it with dist-lower-to-exec, exec-build-backward and exec-schedule-pipeline first
module {
}

// -----

// CHECK: error: exec-export-plan: the module has no exec programs to export
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, dist.topology = #dist.topology<"cpu", nodes = 1, devices_per_node = 1, device = #dist.device<"cpu-core", bf16_tflops = 0.05, fp16_tflops = 0.05, fp32_tflops = 0.05, memory_gib = 4, hbm_gbytes_per_s = 10>, intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>, inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 10, latency_us = 50, oversubscription = 1>>} {
}

// -----

// CHECK: error: exec-export-plan: exec.program @rank0 has no schedule; run exec-schedule-pipeline
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, dist.topology = #dist.topology<"cpu", nodes = 1, devices_per_node = 1, device = #dist.device<"cpu-core", bf16_tflops = 0.05, fp16_tflops = 0.05, fp32_tflops = 0.05, memory_gib = 4, hbm_gbytes_per_s = 10>, intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>, inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 10, latency_us = 50, oversubscription = 1>>, exec.model = "m", exec.seq_len = 8 : i64} {
  exec.program @rank0 pp_rank 0 {
    exec.phase forward chunk 0 {
    }
  }
}

// -----

// CHECK: error: exec-export-plan: the strategy needs 4 devices but topology 'cpu' has 1
module attributes {dist.strategy = #dist.strategy<dp = 4, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, dist.topology = #dist.topology<"cpu", nodes = 1, devices_per_node = 1, device = #dist.device<"cpu-core", bf16_tflops = 0.05, fp16_tflops = 0.05, fp32_tflops = 0.05, memory_gib = 4, hbm_gbytes_per_s = 10>, intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>, inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 10, latency_us = 50, oversubscription = 1>>, exec.model = "m", exec.seq_len = 8 : i64} {
}

// -----

// A complete plan that cannot be written.
// WRITE: error: exec-export-plan: cannot open output file
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, dist.topology = #dist.topology<"cpu", nodes = 1, devices_per_node = 1, device = #dist.device<"cpu-core", bf16_tflops = 0.05, fp16_tflops = 0.05, fp32_tflops = 0.05, memory_gib = 4, hbm_gbytes_per_s = 10>, intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>, inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 10, latency_us = 50, oversubscription = 1>>, exec.model = "m", exec.seq_len = 8 : i64} {
  exec.program @rank0 pp_rank 0 {
    exec.phase forward chunk 0 {
    }
    exec.phase backward chunk 0 {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run backward mb 0 chunk 0
    }
  }
}

// -----

// A plan needing more than the device has: an error unless allow-unfit.
// CHECK: error: exec-export-plan: the plan needs 6.00 GiB per rank (arena 5.00, runtime 1.00) and the device (cpu-core) has 4.00 GiB: it would not fit. Choose a strategy that fits, or more or larger devices, or write it anyway with --allow-unfit-plan
// UNFIT: error: exec-export-plan: the strategy needs 4 devices
// UNFIT-NOT: would not fit
// UNFIT: error: exec-export-plan: the module has no exec programs to export
// UNFIT-NOT: would not fit
module attributes {dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>, dist.topology = #dist.topology<"cpu", nodes = 1, devices_per_node = 1, device = #dist.device<"cpu-core", bf16_tflops = 0.05, fp16_tflops = 0.05, fp32_tflops = 0.05, memory_gib = 4, hbm_gbytes_per_s = 10>, intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>, inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 10, latency_us = 50, oversubscription = 1>>, exec.memory = {peak_bytes_per_rank = 5368709120 : i64, runtime_bytes_per_rank = 1073741824 : i64, device_bytes_per_rank = 6442450944 : i64}} {
}
