#!/usr/bin/env bash
# Compiles the plans scripts/gpu-check.sh runs, into DIR. Run it where
# plan-opt is built (it needs MLIR); the GPU machine then needs only the
# runtime: scripts/gpu-check.sh --plans DIR.
#
#   scripts/gpu-plans.sh DIR [BUILD]      (BUILD defaults to ./build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: scripts/gpu-plans.sh DIR [BUILD]}"
build="${2:-$root/build}"
plan_opt="$build/bin/plan-opt"
[[ -x "$plan_opt" ]] || { echo "gpu-plans: no $plan_opt; build first" >&2; exit 1; }
mkdir -p "$out"
tiny="$root/examples/models/tiny-llama.json"
compile() { # NAME MODEL ARGS...
  local name="$1" model="$2"
  shift 2
  "$plan_opt" "$model" "$@" -o "$out/$name.json" > /dev/null 2>&1 ||
    { echo "gpu-plans: plan-opt failed for $name" >&2; exit 1; }
}
# The tiny Llama on one device, and the multi-rank plans of the runtime's
# equivalence matrix on two.
compile tiny-llama-1 "$tiny" --topology=cpu:1
# ... and with bf16 buffers (f32 master weights and moments).
compile tiny-llama-bf16 "$tiny" --topology=cpu:1 --dtype=bf16
# ... with f32 gradients (gradient_bytes=4): bf16 GEMMs writing f32.
compile tiny-llama-f32-grads "$tiny" --topology=cpu:1 --dtype=bf16 --cost-params=gradient_bytes=4
# Gemma's kernels (GeGLU, norm weights offset from one, scaled embeddings)
# in bf16.
compile tiny-gemma-bf16 "$root/examples/models/tiny-gemma.json" --topology=cpu:1 --dtype=bf16
# Heads of 128 in bf16: the tensor-core attention inside a training run.
compile small-llama-head128 "$root/bench/gpu/small-llama-head128.json" --topology=cpu:1
compile tiny-llama-dp2 "$tiny" --topology=cpu:2 --strategy=dp=2,tp=1,pp=1
compile tiny-llama-tp2 "$tiny" --topology=cpu:2 --strategy=dp=1,tp=2,pp=1
compile tiny-llama-pp2 "$tiny" --topology=cpu:2 --strategy=dp=1,tp=1,pp=2
compile tiny-llama-zero3 "$tiny" --topology=cpu:2 --strategy=dp=2,tp=1,pp=1,zero=3
# One Llama-3-8B-shaped block (seq 8192) and a GPT-2 small step, each on
# one H200: in bf16, and in f32 buffers for comparison.
one="$root/bench/gpu/one-h200.json"
for model in llama3-8b-block gpt2-small; do
  compile "$model" "$root/bench/gpu/$model.json" --topology="$one" --strategy=dp=1,tp=1,pp=1 --dtype=bf16
  compile "$model-f32" "$root/bench/gpu/$model.json" --topology="$one" --strategy=dp=1,tp=1,pp=1 --dtype=f32
done
echo "gpu-plans: $(ls "$out"/*.json | wc -l) plans in $out"
