#!/usr/bin/env bash
# The main job: install, build, compile an example model to its plan, and
# compile a tiny model for four CPU ranks and train it there with plan-run
# (on the GPUs instead where there are NVIDIA GPUs and the CUDA backend).
#   scripts/main-job.sh [MODEL_SPEC [TOPOLOGY [STRATEGY]]]
# (default: Llama-3 8B on two DGX H100 nodes; the search fills in what the
# strategy leaves out)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
model="${1:-$root/examples/models/llama3-8b.json}"
topology="${2:-dgx-h100:2}"
strategy="${3:-}" # pins for the search, e.g. tp=8,zero=1; none by default

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

echo
pins=()
if [ -n "$strategy" ]; then
  pins=(--strategy="$strategy")
fi
echo "== plan-opt $(basename "$model") --topology=$topology ${pins[*]}"
"$build/bin/plan-opt" "$model" --topology="$topology" "${pins[@]}" \
  --report="$build/main-job-search.json" \
  --cost-report="$build/main-job-cost.json" -o "$build/main-job.mlir"
echo "(JSON reports: $build/main-job-search.json, $build/main-job-cost.json)"
echo
echo "== the imported tfm graph ($build/main-job.mlir), first layer:"
sed -n '1,/^    }$/p' "$build/main-job.mlir" | cut -c1-160
echo
echo "== the same model family from a Hugging Face config.json:"
"$build/bin/plan-opt" "$root/examples/hf/llama-3.1-8b/config.json" \
  --seq-len=8192 --global-batch=512 -o /dev/null

echo
echo "== the executable plans (docs/plan-format.md), checked:"
"$build/bin/plan-opt" "$model" --topology="$topology" "${pins[@]}" \
  -o "$build/main-job-plan.json" 2>/dev/null
"$build/bin/plan-opt" "$root/examples/models/tiny-llama.json" \
  --topology=cpu:4 --strategy=dp=1,tp=2,pp=2 \
  --trace="$build/tiny-llama-cpu4-predicted-trace.json" \
  -o "$build/tiny-llama-cpu4-plan.json" 2>/dev/null
python3 "$root/test/Tools/check_plan.py" --docs "$root/docs" \
  "$build/main-job-plan.json" "$build/tiny-llama-cpu4-plan.json"
python3 - "$build/tiny-llama-cpu4-plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
print(f"{sys.argv[1]}: {plan['mesh']['world_size']} ranks, predicted step "
      f"{plan['predicted']['step_time_s'] * 1e3:.1f} ms (closed form), "
      f"{plan['simulated']['step_time_s'] * 1e3:.1f} ms (simulated); "
      f"arena {plan['memory']['peak_bytes_per_rank'] / 2**20:.1f} MiB per rank")
for program in plan["programs"]:
    launches = sum(len(p["launches"]) for p in program["phases"])
    order = " ".join(f"{r['phase'][0].upper()}{r['micro_batch']}"
                     for r in program["schedule"])
    print(f"  pipeline rank {program['pp_rank']}: {len(program['buffers'])} "
          f"buffers, {launches} launches; schedule {order}")
PY

"$root/scripts/train-tiny.sh" "$build"
