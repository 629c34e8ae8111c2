// exec-plan-memory on a hand-built program: a parameter and its optimizer
// state (persistent, 64 bytes each), an activation kept from forward to
// backward (1 KiB, one copy per micro-batch in flight: two under GPipe
// with two micro-batches), and run-local buffers: two 2 KiB forward
// temporaries that are never live together, and a 1 KiB gradient of the
// backward phase. Arena: 128 + 2 x 1024 + 2048 = 4224 bytes.
// RUN: plan-opt %s -split-input-file --exec-plan-memory 2>/dev/null | FileCheck %s
// RUN: plan-opt %s -split-input-file --exec-plan-memory 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// REPORT: memory plan: peak 0.000 GiB per rank
// REPORT-NEXT: pp rank 0: 0.000 GiB = persistent 0.000 + kept activations 0.000 (2 micro-batches) + run-local 0.000
// CHECK: module attributes {exec.memory = {device_bytes_per_rank = 4224 : i64, peak_bytes_per_rank = 4224 : i64, runtime_bytes_per_rank = 0 : i64}}
// CHECK-NEXT: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 4224 : i64} {
// CHECK-NEXT: exec.buffer @w : tensor<16xf32> param {copies = 1 : i64, offset = 0 : i64}
// CHECK-NEXT: exec.buffer @m : tensor<16xf32> optimizer_state {copies = 1 : i64, offset = 64 : i64}
// CHECK-NEXT: exec.buffer @a : tensor<256xf32> activation {copies = 2 : i64, offset = 128 : i64}
// CHECK-NEXT: exec.buffer @t1 : tensor<512xf32> activation {copies = 1 : i64, offset = 2176 : i64}
// CHECK-NEXT: exec.buffer @t2 : tensor<512xf32> activation {copies = 1 : i64, offset = 2176 : i64}
// CHECK-NEXT: exec.buffer @d : tensor<256xf32> activation_grad {copies = 1 : i64, offset = 2176 : i64}
module {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @w : tensor<16xf32> param
    exec.buffer @m : tensor<16xf32> optimizer_state
    exec.buffer @a : tensor<256xf32> activation
    exec.buffer @t1 : tensor<512xf32> activation
    exec.buffer @t2 : tensor<512xf32> activation
    exec.buffer @d : tensor<256xf32> activation_grad
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@w] outs [@t1]
      exec.kernel "copy" ins [@t1] outs [@a]
      exec.kernel "copy" ins [@a] outs [@t2]
      exec.kernel "copy" ins [@t2] outs [@w]
    }
    exec.phase backward chunk 0 {
      exec.kernel "copy" ins [@a] outs [@d]
      exec.kernel "copy" ins [@d] outs [@m]
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run forward mb 1 chunk 0
      exec.run backward mb 0 chunk 0
      exec.run backward mb 1 chunk 0
    }
  }
}

// -----

// The input of an asynchronous collective stays live until its wait: the
// temporary written in between gets its own bytes. Run-local: x (1 KiB)
// at 0, t (1 KiB) at 1024, y (256 B, live from the start to the last
// read) at 2048; arena 64 + 2304 = 2368 bytes.
// CHECK-LABEL: module attributes {exec.memory = {device_bytes_per_rank = 2368 : i64, peak_bytes_per_rank = 2368 : i64, runtime_bytes_per_rank = 0 : i64}}
// CHECK: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 2368 : i64} {
// CHECK-NEXT: exec.buffer @w : tensor<16xf32> param {copies = 1 : i64, offset = 0 : i64}
// CHECK-NEXT: exec.buffer @x : tensor<256xf32> activation {copies = 1 : i64, offset = 64 : i64}
// CHECK-NEXT: exec.buffer @y : tensor<64xf32> activation {copies = 1 : i64, offset = 2112 : i64}
// CHECK-NEXT: exec.buffer @t : tensor<256xf32> activation {copies = 1 : i64, offset = 1088 : i64}
module {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @w : tensor<16xf32> param
    exec.buffer @x : tensor<256xf32> activation
    exec.buffer @y : tensor<64xf32> activation
    exec.buffer @t : tensor<256xf32> activation
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@w] outs [@x]
      exec.collective reduce_scatter "dp" @x -> @y async
      exec.kernel "copy" ins [@w] outs [@t]
      exec.wait @y
      exec.kernel "copy" ins [@y] outs [@w]
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
    }
  }
}

// -----

// Two model chunks on one rank (the interleaved schedule): each keeps 1 KiB
// from its forward to its backward. Chunk 0 holds both micro-batches, then
// chunk 2 does: each would need two copies of its own (4 KiB), but their
// sets share one region of two (2 KiB after the 64-byte parameter).
// REPORT: pp rank 0: 0.000 GiB = persistent 0.000 + kept activations 0.000 (2 micro-batches, 2 chunk sets at once) + run-local 0.000
// CHECK-LABEL: module attributes {exec.memory = {device_bytes_per_rank = 2112 : i64, peak_bytes_per_rank = 2112 : i64, runtime_bytes_per_rank = 0 : i64}}
// CHECK: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 2112 : i64, kept_sets = [{bytes = 1024 : i64, chunk = 0 : i64, offsets = array<i64: 64, 1088>}, {bytes = 1024 : i64, chunk = 2 : i64, offsets = array<i64: 64, 1088>}]} {
// CHECK-NEXT: exec.buffer @w : tensor<16xf32> param {copies = 1 : i64, offset = 0 : i64}
// CHECK-NEXT: exec.buffer @a : tensor<256xf32> activation {kept_set = 0 : i64, set_offset = 0 : i64}
// CHECK-NEXT: exec.buffer @c : tensor<256xf32> activation {kept_set = 1 : i64, set_offset = 0 : i64}
module {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @w : tensor<16xf32> param
    exec.buffer @a : tensor<256xf32> activation
    exec.buffer @c : tensor<256xf32> activation
    exec.phase forward chunk 0 {
      exec.kernel "copy" ins [@w] outs [@a]
    }
    exec.phase backward chunk 0 {
      exec.kernel "copy" ins [@a] outs [@w]
    }
    exec.phase forward chunk 2 {
      exec.kernel "copy" ins [@w] outs [@c]
    }
    exec.phase backward chunk 2 {
      exec.kernel "copy" ins [@c] outs [@w]
    }
    exec.phase step {
    }
    exec.schedule {
      exec.run forward mb 0 chunk 0
      exec.run forward mb 1 chunk 0
      exec.run backward mb 0 chunk 0
      exec.run backward mb 1 chunk 0
      exec.run forward mb 0 chunk 2
      exec.run forward mb 1 chunk 2
      exec.run backward mb 0 chunk 2
      exec.run backward mb 1 chunk 2
    }
  }
}

// -----

// A bucket of in-place all-reduces (ZeRO-0's gradients) lies side by side
// in the bucket's order, wherever its buffers are declared, so that the
// runtime reduces it where it lies: g1 (100 B, 128 with alignment) then
// g0 from the first member's place on; the optimizer state declared
// between them comes after; g2, in no bucket, where it is declared.
// CHECK-LABEL: exec.program @rank0 pp_rank 0 attributes {arena_bytes = 448 : i64} {
// CHECK-NEXT: exec.buffer @w : tensor<16xf32> param {copies = 1 : i64, offset = 0 : i64}
// CHECK-NEXT: exec.buffer @g0 : tensor<16xf32> param_grad {copies = 1 : i64, offset = 192 : i64}
// CHECK-NEXT: exec.buffer @m : tensor<16xf32> optimizer_state {copies = 1 : i64, offset = 256 : i64}
// CHECK-NEXT: exec.buffer @g1 : tensor<25xf32> param_grad {copies = 1 : i64, offset = 64 : i64}
// CHECK-NEXT: exec.buffer @g2 : tensor<16xf32> param_grad {copies = 1 : i64, offset = 320 : i64}
// CHECK-NEXT: exec.buffer @x : tensor<16xf32> activation {copies = 1 : i64, offset = 384 : i64}
module {
  exec.program @rank0 pp_rank 0 {
    exec.buffer @w : tensor<16xf32> param
    exec.buffer @g0 : tensor<16xf32> param_grad
    exec.buffer @m : tensor<16xf32> optimizer_state
    exec.buffer @g1 : tensor<25xf32> param_grad
    exec.buffer @g2 : tensor<16xf32> param_grad
    exec.buffer @x : tensor<16xf32> activation
    exec.phase backward chunk 0 {
      exec.kernel "copy" ins [@w] outs [@x]
      exec.kernel "copy" ins [@x] outs [@g1] accumulate [true]
      exec.kernel "copy" ins [@x] outs [@g0] accumulate [true]
      exec.kernel "copy" ins [@x] outs [@g2] accumulate [true]
      exec.collective all_reduce "dp" @g1 -> @g1 async last_micro_batch {bucket = 0 : i64}
      exec.collective all_reduce "dp" @g0 -> @g0 async last_micro_batch {bucket = 0 : i64}
      exec.collective all_reduce "dp" @g2 -> @g2 async last_micro_batch
    }
    exec.phase step {
      exec.wait @g1
      exec.wait @g0
      exec.wait @g2
      exec.kernel "copy" ins [@g0] outs [@m]
    }
    exec.schedule {
      exec.run backward mb 0 chunk 0
    }
  }
}
