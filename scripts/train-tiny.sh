#!/usr/bin/env bash
# The last step of the main job: the tiny Llama trains for 20 steps with
# plan-run, on four CPU ranks over MPI, or, with NVIDIA GPUs and the CUDA
# backend built, on the GPUs: on four with the same plan, else alone on one.
#   scripts/train-tiny.sh BUILD_DIR
# BUILD_DIR holds bin/ and the plan the main job compiled for cpu:4
# (tiny-llama-cpu4-plan.json, and its predicted trace).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: train-tiny.sh BUILD_DIR}"
# The GPUs are those `nvidia-smi -L` lists (NVIDIA_SMI: another program to
# ask, as the tests do where there is none).
nvidia_smi="${NVIDIA_SMI:-nvidia-smi}"

gpus=0
if [ -x "$build/bin/partita-cuda-bench" ] && command -v "$nvidia_smi" >/dev/null; then
  gpus=$("$nvidia_smi" -L 2>/dev/null | grep -c '^GPU ' || true)
fi
plan="$build/tiny-llama-cpu4-plan.json"
predicted="$build/tiny-llama-cpu4-predicted-trace.json"
echo
if [ "$gpus" -ge 1 ]; then
  where="$([ "$gpus" -ge 4 ] && echo 4 || echo 1) GPU(s) (CUDA + NCCL)"
  if [ "$gpus" -lt 4 ]; then
    plan="$build/tiny-llama-gpu1-plan.json"
    predicted="$build/tiny-llama-gpu1-predicted-trace.json"
    "$build/bin/plan-opt" "$root/examples/models/tiny-llama.json" \
      --topology=cpu:1 --trace="$predicted" -o "$plan" >/dev/null
  fi
  device=cuda
else
  where="4 CPU ranks (MPI)"
  device=cpu
fi
echo "== plan-run: the tiny Llama trains on $where, 20 steps:"
"$build/bin/plan-run" "$plan" --steps 20 --device "$device" \
  --log-json "$build/tiny-llama-log.jsonl" \
  --trace "$build/tiny-llama-measured-trace.json"
echo "(per-step JSON log: $build/tiny-llama-log.jsonl)"
echo "Chrome traces (open in https://ui.perfetto.dev or chrome://tracing):"
echo "  predicted (simulated step): $predicted"
echo "  measured (plan-run):        $build/tiny-llama-measured-trace.json"
