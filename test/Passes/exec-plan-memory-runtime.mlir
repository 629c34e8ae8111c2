// exec-plan-memory counts the device memory the runtime holds outside the
// arena: its own (runtime_gib) and the buffers of each NCCL communicator a
// program uses: groups of more than one rank that its collectives name
// (nccl_collective_gib each), and pipeline directions it sends or receives
// in (nccl_p2p_gib each).
// RUN: plan-opt %s -split-input-file --exec-plan-memory="cost-params=runtime_gib=0.25,nccl_collective_gib=0.5,nccl_p2p_gib=0.125" 2>&1 >/dev/null | FileCheck %s --check-prefix=SET
// RUN: plan-opt %s -split-input-file --exec-plan-memory 2>&1 >/dev/null | FileCheck %s --check-prefix=DEFAULT
// RUN: plan-opt %s -split-input-file --exec-plan-memory 2>/dev/null | FileCheck %s --check-prefix=ATTR

// dp = 2, pp = 2 on GPUs. Rank 0 reduces over dp (two ranks) and the world
// (four), and over tp, which is one rank and needs no buffers; it sends to
// and receives from the next stage: 0.25 + 2 x 0.5 + 2 x 0.125 = 1.5 GiB,
// and a 4-byte staging copy of what it sends. Rank 1 reduces over dp and
// talks to the previous stage both ways: 0.25 + 0.5 + 2 x 0.125 = 1 GiB
// and 4 bytes. Defaults (3, 0.5, 1/16): rank 0 needs 3 + 1 + 0.125 GiB
// and 4 bytes, 4429185028 bytes, beside its 128-byte arena.
// SET: memory plan: peak 0.000 GiB per rank, 1.500 GiB of device memory with the runtime's
// SET-NEXT: pp rank 0: 0.000 GiB = {{.*}}; runtime 1.500 (2 collective and 2 pipeline NCCL communicators)
// SET-NEXT: pp rank 1: 0.000 GiB = {{.*}}; runtime 1.000 (1 collective and 2 pipeline NCCL communicators)
// DEFAULT: memory plan: peak 0.000 GiB per rank, 4.125 GiB of device memory with the runtime's
// ATTR: exec.memory = {device_bytes_per_rank = 4429185156 : i64, peak_bytes_per_rank = 128 : i64, runtime_bytes_per_rank = 4429185028 : i64}
// ATTR: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 128 : i64, runtime_bytes = 4429185028 : i64}
// ATTR: exec.program @rank1 pp_rank 1 attributes {arena_bytes = 128 : i64, runtime_bytes = 3892314116 : i64}
module attributes {
  dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 2, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [1, 1]>,
  dist.topology = #dist.topology<"gpus", nodes = 1, devices_per_node = 4,
    device = #dist.device<"gpu", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 80, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<nvswitch, gbytes_per_s = 100, latency_us = 0>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @g : tensor<16xf32> param_grad
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@g] outs [@m]
      exec.send @m to next
    }
    exec.phase backward chunk 0 {
      exec.recv @m from next
      exec.kernel "copy" ins [@m] outs [@g]
      exec.collective all_reduce "dp" @g -> @g
      exec.collective all_reduce "tp" @g -> @g
      exec.collective all_reduce "world" @g -> @g
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run backward mb 0 chunk 0
    }
  }
  exec.program @rank1 pp_rank 1 {
    exec.buffer @g : tensor<16xf32> param_grad
    exec.buffer @m : tensor<1xf32> activation
    exec.phase forward chunk 1 {
      exec.recv @m from prev
      exec.kernel "copy" ins [@m] outs [@g]
    }
    exec.phase backward chunk 1 {
      exec.kernel "copy" ins [@g] outs [@m]
      exec.send @m to prev
      exec.collective all_reduce "dp" @g -> @g
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 1
      exec.run backward mb 0 chunk 1
    }
  }
}

// -----

// CPU ranks keep the runtime's memory in the host: nothing counted by
// default; a value given is counted.
// SET: memory plan: peak 0.000 GiB per rank, 0.750 GiB of device memory with the runtime's
// SET-NEXT: pp rank 0: 0.000 GiB = {{.*}}; runtime 0.750 (1 collective and 0 pipeline NCCL communicators)
// DEFAULT: memory plan: peak 0.000 GiB per rank, 0.000 GiB of device memory with the runtime's
// ATTR: exec.memory = {device_bytes_per_rank = 64 : i64, peak_bytes_per_rank = 64 : i64, runtime_bytes_per_rank = 0 : i64}
// ATTR: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 64 : i64, runtime_bytes = 0 : i64}
module attributes {
  dist.strategy = #dist.strategy<dp = 2, tp = 1, pp = 1, vpp = 1, zero = 0, micro_batch_size = 1, num_micro_batches = 1, recompute = none, sequence_parallel = 0, schedule = "1f1b", stage_layers = [2]>,
  dist.topology = #dist.topology<"cpus", nodes = 1, devices_per_node = 2,
    device = #dist.device<"cpu-core", bf16_tflops = 1, fp16_tflops = 1, fp32_tflops = 1, memory_gib = 4, hbm_gbytes_per_s = 1>,
    intra_node = #dist.link<shared_memory, gbytes_per_s = 5, latency_us = 1>,
    inter_node = #dist.network<fat_tree, nics_per_node = 1, gbits_per_s = 100, latency_us = 0, oversubscription = 1>>} {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @g : tensor<16xf32> param_grad
    exec.phase backward chunk 0 {
      exec.collective all_reduce "dp" @g -> @g
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run backward mb 0 chunk 0
    }
  }
}
