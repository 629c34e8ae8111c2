// Forward/backward orders over the micro-batches, on a 4-layer tiny Llama
// (global batch 16).
// 1F1B, pp=4, 8 micro-batches: rank r runs pp - r - 1 warm-up forwards.
// RUN: plan-opt %S/../Passes/Inputs/tiny-llama-4l.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=pp=4,mbs=2,schedule=1f1b summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-schedule-pipeline)' 2>/dev/null | FileCheck %s --check-prefix=ONE
// RUN: plan-opt %S/../Passes/Inputs/tiny-llama-4l.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:4 strategy=pp=4,mbs=2,schedule=gpipe summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-schedule-pipeline)' 2>/dev/null | FileCheck %s --check-prefix=GPIPE
// Interleaved, pp=2 with 2 chunks per rank, 4 micro-batches.
// RUN: plan-opt %S/../Passes/Inputs/tiny-llama-4l.json --pass-pipeline='builtin.module(partita-compile{topology=cpu:2 strategy=pp=2,vpp=2,mbs=4,schedule=interleaved summarize=false search=false},dist-partition-tensors,dist-split-stages,dist-lower-to-exec,exec-build-backward,exec-schedule-pipeline)' 2>/dev/null | FileCheck %s --check-prefix=INTER

// ONE-LABEL: exec.program @rank0 pp_rank 0
// ONE: exec.schedule {
// ONE-NEXT: exec.run forward mb 0 chunk 0
// ONE-NEXT: exec.run forward mb 1 chunk 0
// ONE-NEXT: exec.run forward mb 2 chunk 0
// ONE-NEXT: exec.run forward mb 3 chunk 0
// ONE-NEXT: exec.run backward mb 0 chunk 0
// ONE-NEXT: exec.run forward mb 4 chunk 0
// ONE-NEXT: exec.run backward mb 1 chunk 0
// ONE-NEXT: exec.run forward mb 5 chunk 0
// ONE-NEXT: exec.run backward mb 2 chunk 0
// ONE-NEXT: exec.run forward mb 6 chunk 0
// ONE-NEXT: exec.run backward mb 3 chunk 0
// ONE-NEXT: exec.run forward mb 7 chunk 0
// ONE-NEXT: exec.run backward mb 4 chunk 0
// ONE-NEXT: exec.run backward mb 5 chunk 0
// ONE-NEXT: exec.run backward mb 6 chunk 0
// ONE-NEXT: exec.run backward mb 7 chunk 0
// ONE-NEXT: }
// ONE-LABEL: exec.program @rank2 pp_rank 2
// ONE: exec.schedule {
// ONE-NEXT: exec.run forward mb 0 chunk 2
// ONE-NEXT: exec.run forward mb 1 chunk 2
// ONE-NEXT: exec.run backward mb 0 chunk 2
// ONE-NEXT: exec.run forward mb 2 chunk 2
// ONE-LABEL: exec.program @rank3 pp_rank 3
// ONE: exec.schedule {
// ONE-NEXT: exec.run forward mb 0 chunk 3
// ONE-NEXT: exec.run backward mb 0 chunk 3
// ONE-NEXT: exec.run forward mb 1 chunk 3
// ONE-NEXT: exec.run backward mb 1 chunk 3

// GPIPE-LABEL: exec.program @rank1 pp_rank 1
// GPIPE: exec.schedule {
// GPIPE-COUNT-8: exec.run forward mb
// GPIPE-NEXT: exec.run backward mb 0 chunk 1
// GPIPE-COUNT-7: exec.run backward mb
// GPIPE-NEXT: }

// INTER-LABEL: exec.program @rank0 pp_rank 0
// INTER: exec.phase forward chunk 0
// INTER: exec.phase forward chunk 2
// INTER: exec.schedule {
// INTER-NEXT: exec.run forward mb 0 chunk 0
// INTER-NEXT: exec.run forward mb 1 chunk 0
// INTER-NEXT: exec.run forward mb 0 chunk 2
// INTER-NEXT: exec.run forward mb 1 chunk 2
// INTER-NEXT: exec.run forward mb 2 chunk 0
// INTER-NEXT: exec.run backward mb 0 chunk 2
// INTER-NEXT: exec.run forward mb 3 chunk 0
// INTER-NEXT: exec.run backward mb 1 chunk 2
// INTER-NEXT: exec.run forward mb 2 chunk 2
// INTER-NEXT: exec.run backward mb 0 chunk 0
// INTER-NEXT: exec.run forward mb 3 chunk 2
// INTER-NEXT: exec.run backward mb 1 chunk 0
// INTER-NEXT: exec.run backward mb 2 chunk 2
// INTER-NEXT: exec.run backward mb 3 chunk 2
// INTER-NEXT: exec.run backward mb 2 chunk 0
// INTER-NEXT: exec.run backward mb 3 chunk 0
// INTER-NEXT: }
// The last chunk lives on rank 1; its sends wrap to rank 0.
// INTER-LABEL: exec.program @rank1 pp_rank 1
// INTER: exec.phase forward chunk 1
// INTER: exec.send @{{.*}} to next
