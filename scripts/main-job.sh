#!/usr/bin/env bash
# The main job: install, build, and compile an example model.
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
  --report="$build/main-job-plan.json" \
  --cost-report="$build/main-job-cost.json" -o "$build/main-job.mlir"
echo "(JSON reports: $build/main-job-plan.json, $build/main-job-cost.json)"
echo
echo "== the imported tfm graph ($build/main-job.mlir), first layer:"
sed -n '1,/^    }$/p' "$build/main-job.mlir" | cut -c1-160
echo
echo "== the same model family from a Hugging Face config.json:"
"$build/bin/plan-opt" "$root/examples/hf/llama-3.1-8b/config.json" \
  --seq-len=8192 --global-batch=512 -o /dev/null
