// exec-simulate-plan on hand-built programs whose step time is known. The
// device reads and writes 1 GB/s at full efficiency, so a copy of
// 125,000,000 floats (0.5 GB in, 0.5 GB out) takes 1 s; the pipeline link
// carries 4-byte messages in about a nanosecond.
// RUN: plan-opt %s -split-input-file --exec-simulate-plan="cost-params=hbm_efficiency=1,collective_efficiency=1" 2>&1 | FileCheck %s

// Two stages, four micro-batches, GPipe: forward 1 s, backward 2 s per
// stage and micro-batch, so the step is (m + p - 1)(f + b) = 5 x 3 s and
// each stage idles (p - 1)(f + b) = 3 s of it: a bubble of 1/5. The first
// stage waits 3 s for the first gradient; the last waits 1 s for the first
// activation and is done 2 s early.
// CHECK-LABEL: simulated step 15.0000 s, bubble 20.0%, exposed communication 0.0000 s
// CHECK-NEXT: pp rank 0: compute 12.0000 s, comm 0.0000 s, waits for pipeline messages 3.0000 s, done at 15.0000 s
// CHECK-NEXT: pp rank 1: compute 12.0000 s, comm 0.0000 s, waits for pipeline messages 1.0000 s, done at 13.0000 s
module attributes {
  dist.strategy = #dist.strategy<dp = 1, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 4, recompute = none, sequence_parallel = 0, schedule = "gpipe", stage_layers = [1, 1]>,
  dist.topology = #dist.topology<"slow", nodes = 1, devices_per_node = 2,
    device = #dist.device<"slow", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @a : tensor<125000000xf32> activation
    exec.buffer @b : tensor<125000000xf32> activation
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@a] outs [@b]
      exec.send @m to next
    }
    exec.phase backward chunk 0 {
      exec.recv @m from next
      exec.kernel "copy" ins [@b] outs [@a]
      exec.kernel "copy" ins [@a] outs [@b]
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run forward mb 1 chunk 0
      exec.run forward mb 2 chunk 0
      exec.run forward mb 3 chunk 0
      exec.run backward mb 0 chunk 0
      exec.run backward mb 1 chunk 0
      exec.run backward mb 2 chunk 0
      exec.run backward mb 3 chunk 0
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @a : tensor<125000000xf32> activation
    exec.buffer @b : tensor<125000000xf32> activation
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 1 {
      exec.recv @m from prev
      exec.kernel "copy" ins [@a] outs [@b]
    }
    exec.phase backward chunk 1 {
      exec.kernel "copy" ins [@b] outs [@a]
      exec.kernel "copy" ins [@a] outs [@b]
      exec.send @m to prev
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 1
      exec.run forward mb 1 chunk 1
      exec.run forward mb 2 chunk 1
      exec.run forward mb 3 chunk 1
      exec.run backward mb 0 chunk 1
      exec.run backward mb 1 chunk 1
      exec.run backward mb 2 chunk 1
      exec.run backward mb 3 chunk 1
    }
  }
}

// -----

// Data parallelism over two ranks of a 100 GB/s node: the all-reduce of
// 50 GB takes B / bandwidth = 0.5 s. Launched asynchronously before a 1 s
// kernel that does not touch it, it is hidden completely.
// CHECK-LABEL: simulated step 2.0000 s, bubble 0.0%, exposed communication 0.0000 s (dp 0.0000)
// CHECK-NEXT: pp rank 0: compute 2.0000 s, comm 0.5000 s
module attributes {
  dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>,
  dist.topology = #dist.topology<"slow", nodes = 1, devices_per_node = 2,
    device = #dist.device<"slow", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @a : tensor<125000000xf32> activation
    exec.buffer @b : tensor<125000000xf32> activation
    exec.buffer @g : tensor<12500000000xf32> param_grad
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@a] outs [@b]
      exec.collective all_reduce "dp" @g -> @g async
      exec.kernel "copy" ins [@b] outs [@a]
      exec.wait @g
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
    }
  }
}

// -----

// The same all-reduce, waited for before the kernel: nothing to hide it
// behind, so all of it is exposed (as it is when synchronous).
// CHECK-LABEL: simulated step 2.5000 s, bubble 0.0%, exposed communication 0.5000 s (dp 0.5000)
module attributes {
  dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1]>,
  dist.topology = #dist.topology<"slow", nodes = 1, devices_per_node = 2,
    device = #dist.device<"slow", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 1, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @a : tensor<125000000xf32> activation
    exec.buffer @b : tensor<125000000xf32> activation
    exec.buffer @g : tensor<12500000000xf32> param_grad
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@a] outs [@b]
      exec.collective all_reduce "dp" @g -> @g async
      exec.wait @g
      exec.kernel "copy" ins [@b] outs [@a]
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
    }
  }
}
