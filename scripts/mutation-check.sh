#!/usr/bin/env bash
# Applies plausible bugs to copies of plans and, with --kernels, of the CPU
# kernels, and checks that the suite's comparisons catch every one: the
# mutation score (caught / applied), which must stay at 100%.
#
#   scripts/mutation-check.sh [--kernels] [--keep]
#
# Plan mutations (test/Tools/mutate_plan.py, a few seconds each) run against
# the normal build (BUILD_DIR, default build/); ctest runs them as the
# `mutations` entry. A mutated plan is caught when plan-run stops on it
# (refusing the plan, or finding that replicas hold different copies of a
# tensor), or when its run differs from the unmutated run on one rank in
# the checks the equivalence tests make: losses and gradient norms at every
# step (same_losses.py), gradients after step 1 and parameters after the
# last (same_params.py). Kernel mutations patch a copy of the sources and
# build its plan-run (minutes); the C++ kernels are caught when their run
# differs from the numpy reference (test/Tools/plan_reference.py) in those
# checks, or their launches from PyTorch's (test/Runtime/kernel_oracle.py;
# each verdict says what each of the two found). A mutation of the CUDA
# kernels is caught by the kernel oracle on the CUDA emulator.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
python=/usr/bin/python3
tools="$root/test/Tools"
runtime_tests="$root/test/Runtime"
llama="$root/test/Passes/Inputs/tiny-llama-4l.json"
examples="$root/examples/models"
kernels=0 keep=0
for a in "$@"; do
  case "$a" in
  --kernels) kernels=1 ;;
  --keep) keep=1 ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2 && exit 2 ;;
  esac
done
for tool in plan-opt plan-run; do
  [ -x "$build/bin/$tool" ] ||
    { echo "mutation-check: $build/bin/$tool is missing: run scripts/build.sh" >&2; exit 1; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/partita-mutants.XXXXXX")"
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
applied=0 caught=0

# plan NAME SPEC STRATEGY [plan-opt flags...]: compiles a plan.
plan() {
  "$build/bin/plan-opt" "$2" --topology=cpu:8 --no-search --strategy="$3" \
    "${@:4}" -o "$1.json" 2>/dev/null
}

# train RUN NAME [plan-run]: 3 steps of NAME.json, with the log, the
# gradients after step 1 and the parameters after step 3 as RUN.*.
train() {
  "${3:-$build/bin/plan-run}" "$2.json" --steps 3 --log-json "$1.log" \
    --dump-grads "$1.grads" --save-params "$1.params" >"$1.out" 2>&1
}

# differs BASELINE RUN [GRADIENT_RTOL PARAMETER_RTOL]: what tells RUN from
# BASELINE, or nothing. The tolerances are the equivalence tests' (against
# the reference: against_reference.py's), about 10x the f32 noise measured.
differs() {
  local out grads="${3:-1e-5}" params="${4:-2e-5}"
  out="$("$python" "$runtime_tests/same_losses.py" "$1.log" "$2.log")" ||
    { echo "$out" | tail -1; return; }
  out="$("$python" "$runtime_tests/same_params.py" --rtol "$grads" "$1.grads" "$2.grads")" ||
    { echo "gradients after step 1: $out"; return; }
  out="$("$python" "$runtime_tests/same_params.py" --rtol "$params" --skip 'attn\.k\.bias' "$1.params" "$2.params")" ||
    { echo "parameters after step 3: $out"; return; }
}

# verdict MUTATION WHY: counts the mutation, caught when WHY is not empty.
verdict() {
  applied=$((applied + 1))
  if [ -n "$2" ]; then
    caught=$((caught + 1))
    echo "caught   $1: $2"
  else
    echo "SURVIVED $1: every check passed"
  fi
}

# plan_mutation MUTATION BASE BASELINE: mutates BASE.json and trains it.
plan_mutation() {
  local m="$1" base="$2" baseline="$3"
  if ! "$python" "$tools/mutate_plan.py" "$base.json" "m-$m.json" "$m"; then
    verdict "$m" "" && return
  fi
  if ! train "m-$m" "m-$m"; then
    verdict "$m" "plan-run stops: $(grep -m1 -E '^plan-run: (error|rank [0-9]+:)' "m-$m.out")"
    return
  fi
  verdict "$m" "$(differs "$baseline" "m-$m")"
}

plan_mutations() {
  plan one "$llama" dp=1,mbs=16 && train one one
  plan dp2 "$llama" dp=2,mbs=8 --overlap=false
  plan tp2 "$llama" dp=1,tp=2,mbs=16
  plan pp2 "$llama" dp=1,pp=2,mbs=4
  plan gpt2 "$examples/tiny-gpt2.json" dp=1 && train gpt2 gpt2
  plan gpt2-pp2 "$examples/tiny-gpt2.json" pp=2
  sed -e 's/"vocab_size": 512/"vocab_size": 510/' "$llama" >v510-spec.json
  plan v510 v510-spec.json dp=1,mbs=16 && train v510 v510
  plan v510-tp4 v510-spec.json dp=1,tp=4,mbs=16
  plan_mutation double-dp-gradients dp2 one
  plan_mutation drop-reduction dp2 one
  plan_mutation missing-tied-sum gpt2-pp2 gpt2
  plan_mutation double-loss-gradient one one
  plan_mutation norm-counts-replicas tp2 one
  plan_mutation padded-vocabulary v510-tp4 v510
  plan_mutation swap-pipeline-sends pp2 one
}

# A copy of the sources with a build of its own plan-run.
prepare_copy() {
  mkdir -p src
  (cd "$root" && git ls-files -z | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C src
  cmake -S src -B copy -G Ninja -DCMAKE_BUILD_TYPE=Release >copy.log 2>&1 &&
    ninja -C copy -j "${JOBS:-$(nproc)}" plan-run >>copy.log 2>&1 ||
    { echo "mutation-check: the copy does not build (see $work/copy.log)" >&2; exit 1; }
}

# mutate FILE FROM TO: replaces FROM (which must appear once) in FILE of
# the copy by TO, keeping the original as FILE.orig.
mutate() {
  cp "src/$1" "src/$1.orig"
  "$python" - "src/$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"mutation-check: {path}: expected one '{old}', found {text.count(old)}")
open(path, "w").write(text.replace(old, new))
EOF
}

# oracle RUNNER: the kernel oracle's first mismatch on RUNNER, or nothing.
oracle() {
  "$python" "$runtime_tests/kernel_oracle.py" --runner "$1" |
    grep -m1 '^MISMATCH' | sed 's/^MISMATCH //'
}

# findings RUNS ORACLE: what the runs' checks and the kernel oracle found,
# or nothing when neither found anything.
findings() {
  [ -z "$1$2" ] && return
  echo "runs: ${1:-passed}; kernel oracle: ${2:-passed}"
}

# kernel_mutation NAME FILE FROM TO BASELINE PLAN: mutates FILE of the copy,
# builds, trains PLAN and compares it with BASELINE's run, and runs the
# kernel oracle; then restores the file.
kernel_mutation() {
  local m="$1" file="$2" baseline="$5" planned="$6"
  if ! mutate "$file" "$3" "$4"; then
    mv "src/$file.orig" "src/$file"
    verdict "$m" "" && return
  fi
  local tolerances=()
  [[ "$baseline" == ref-* ]] && tolerances=(2e-5 4e-5)
  if ninja -C copy plan-run partita-kernel-run >>copy.log 2>&1 &&
    train "k-$m" "$planned" copy/bin/plan-run; then
    verdict "$m" "$(findings "$(differs "$baseline" "k-$m" "${tolerances[@]}")" \
      "$(oracle copy/bin/partita-kernel-run)")"
  else
    verdict "$m" "the mutated copy fails to build or run (see $work/copy.log)"
  fi
  mv "src/$file.orig" "src/$file"
}

# cuda_kernel_mutation NAME FILE FROM TO: mutates FILE of the copy, builds
# the CUDA backend for the emulator, and runs the kernel oracle on it.
cuda_kernel_mutation() {
  local m="$1" file="$2"
  if ! mutate "$file" "$3" "$4"; then
    mv "src/$file.orig" "src/$file"
    verdict "$m" "" && return
  fi
  if ninja -C copy partita-cuda-emulated-kernel-run >>copy.log 2>&1; then
    local found
    found="$(oracle "copy/bin/partita-cuda-emulated-kernel-run --device cuda")"
    verdict "$m" "${found:+kernel oracle on the emulator: $found}"
  else
    verdict "$m" "the mutated copy fails to build (see $work/copy.log)"
  fi
  mv "src/$file.orig" "src/$file"
}

# The reference's run of NAME.json, as train writes plan-run's.
reference() {
  "$python" "$tools/plan_reference.py" --steps 3 --log-json "$1.log" \
    --dump-grads "$1.grads" --save-params "$1.params" "$2.json" >/dev/null
}

kernel_mutations() {
  prepare_copy
  local cpu=runtime/cpu/CpuKernels.cpp
  reference ref-one one
  reference ref-gpt2 gpt2
  plan zero1 "$llama" dp=2,zero=1,mbs=8
  plan tp2sp "$llama" dp=1,tp=2,sp=1,mbs=16
  reference ref-tp2sp tp2sp
  kernel_mutation attention-ds-scale $cpu \
    'dr[j] = pr[j] * (dr[j] - dot) * scale;' 'dr[j] = pr[j] * (dr[j] - dot);' ref-one one
  kernel_mutation swiglu-derivative $cpu \
    'dg[i] = dy * u * (s + g * s * (1 - s));' 'dg[i] = dy * u * s * (1 - s);' ref-one one
  kernel_mutation gelu-derivative $cpu \
    '0.5f * x * (1 - t * t) * 0.7978845608f' '0.5f * x * (1 - t) * 0.7978845608f' ref-gpt2 gpt2
  kernel_mutation rotary-backward-position $cpu \
    'sn = sign * float(magnitude * std::sin(t * inv[i]));' \
    'sn = sign * float(magnitude * std::sin((t + (sign < 0)) * inv[i]));' ref-tp2sp tp2sp
  kernel_mutation zero-shard-offset $cpu \
    'begin = shard ? c.ctx.dpRank * chunk : 0;' 'begin = shard ? c.ctx.dpRank * (chunk - 1) : 0;' one zero1
  [ -x "$build/bin/partita-cuda-emulated-kernel-run" ] &&
    cuda_kernel_mutation cuda-silu-derivative runtime/cuda/Kernels.cu \
      'return s + x * s * (1 - s);' 'return s * (1 - s);'
}

plan_mutations
[ "$kernels" = 1 ] && kernel_mutations
echo "mutation score: $caught/$applied caught ($((100 * caught / (applied ? applied : 1)))%)"
[ "$caught" = "$applied" ] && [ "$applied" -gt 0 ]
