// RUN: plan-opt %s -split-input-file --exec-simulate-plan -verify-diagnostics -o /dev/null

// Both ranks receive first: neither message is ever sent.
// expected-error @below {{exec-simulate-plan: the schedules deadlock: @rank0 (forward of micro-batch 0), @rank1 (forward of micro-batch 0) each wait for a message never sent}}
module attributes {
  dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>,
  dist.topology = #dist.topology<"slow", nodes = 1, devices_per_node = 2,
    device = #dist.device<"slow", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 0 {
      exec.recv @m from next
      exec.send @m to next
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 1 {
      exec.recv @m from prev
      exec.send @m to prev
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 1
    }
  }
}

// -----

// expected-error @below {{exec-simulate-plan: the module has no dist.strategy to simulate with}}
module {
}

// -----

// expected-error @below {{exec-simulate-plan: exec.program @rank0 has no schedule; run exec-schedule-pipeline first}}
module attributes {
  dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>,
  dist.topology = #dist.topology<"slow", nodes = 1, devices_per_node = 1,
    device = #dist.device<"slow", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
  }
}
