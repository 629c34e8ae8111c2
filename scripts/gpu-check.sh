#!/usr/bin/env bash
# The GPU check: on a machine with NVIDIA GPUs, in under 8 minutes,
#   1. builds the runtime with CUDA and runs the GPU tests: every kernel
#      against the CPU backend and against PyTorch's autograd in float64
#      (test/Runtime/kernel_oracle.py), and the tiny Llama's 20 steps on
#      one GPU against the CPU's losses;
#   2. with several GPUs, the multi-rank plans of the equivalence matrix;
#   3. benchmarks: our GEMM path against plain cuBLAS; each family of our
#      tensor-core attention kernels (PARTITA_CUDA_ATTENTION) against
#      PyTorch's fused attention on the block's shape, and cuDNN's fused
#      attention (PARTITA_CUDA_ATTENTION=cudnn); forward + backward
#      time and MFU of a Llama-3-8B-shaped block (seq 8192, with each
#      family) and of a GPT-2 small step; the memory-bound kernels'
#      bandwidth against a device-to-device copy's; NCCL all-reduce bus bandwidth
#      with several GPUs;
#   4. writes every number to OUT/gpu-check.json and a summary to
#      OUT/summary.txt.
# Within --budget seconds (default 450): a stage that would run past it
# is cut short or skipped, and named in the summary, so the results come
# back whatever the machine's speed. It exits 1 when any stage it ran,
# benchmarks included, failed or was skipped for time.
# Without a GPU it says so in one line and exits 0 (1 with --require-gpu).
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu-check.sh [--build DIR] [--plans DIR] [--out DIR]
                            [--deps DIR | --debs DIR] [--budget SECONDS]
                            [--only NAMES] [--require-gpu]
  --build DIR    where to build (default: ./build-gpu); configured once,
                 brought up to date every time
  --plans DIR    plans from scripts/gpu-plans.sh (default: compiled here
                 when plan-opt is built, in OUT/plans)
  --out DIR      results (default: BUILD/gpu-check)
  --deps DIR     a prefix of unpacked packages (MPI, OpenBLAS, nlohmann-json,
                 GoogleTest) for machines without them installed
  --debs DIR     those packages as .deb files (scripts/gpu-deps.sh), unpacked
                 into OUT/deps and used as --deps
  --budget S     the whole check's wall-clock seconds (default 450),
                 building included; stages past it are skipped
  --only NAMES   run only the stages whose names (those of their logs:
                 kernel-tests, tiny-cpu, head128-cuda-cudnn, gemm, ...)
                 match one of the comma-separated shell patterns NAMES,
                 e.g. 'kernel-tests,*cudnn*'
  --require-gpu  fail instead of skipping when there is no GPU
EOF
}

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu" plans="" out="" deps="" debs="" require=0 budget=450
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  -h | --help) usage; exit 0 ;;
  --build) build="${2:?--build needs a directory}"; shift 2 ;;
  --plans) plans="${2:?--plans needs a directory}"; shift 2 ;;
  --out) out="${2:?--out needs a directory}"; shift 2 ;;
  --deps) deps="${2:?--deps needs a directory}"; shift 2 ;;
  --debs)
    debs="${2:?--debs needs a directory}"
    [[ -d "$debs" ]] || { echo "gpu-check: error: --debs: no directory '$debs'" >&2; exit 2; }
    debs="$(cd "$debs" && pwd)"; shift 2 ;;
  --budget)
    budget="${2:?--budget needs a number of seconds}"
    [[ "$budget" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: error: --budget must be a positive number of seconds, got '$budget'" >&2; exit 2; }
    shift 2 ;;
  --only) only="${2:?--only needs stage names}"; shift 2 ;;
  --require-gpu) require=1; shift ;;
  *) echo "gpu-check: error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
out="${out:-$build/gpu-check}"
mkdir -p "$out"
say() { echo "gpu-check: $*"; }
# Seconds kept at the end for the summary.
deadline=$(($(date +%s) + budget - 15))

gpus=0
if command -v nvidia-smi > /dev/null; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
fi
if [[ "$gpus" -eq 0 ]]; then
  why="no NVIDIA GPU here (nvidia-smi $(command -v nvidia-smi > /dev/null &&
    echo lists none || echo is not installed))"
  echo "{\"skipped\": \"$why\"}" > "$out/gpu-check.json"
  say "skipped: $why"
  exit "$require"
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
say "$gpus GPU(s): $gpu_name"
# Kernels for this GPU only (8.0 -> 80): half the compile time of the
# default sm_80 + sm_90.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null |
  head -1 | tr -d ' .')
[[ "$arch" =~ ^[0-9]+$ ]] && configure_arch=(-DCMAKE_CUDA_ARCHITECTURES="$arch") ||
  configure_arch=()

if [[ -n "$debs" ]]; then
  deps="$out/deps"
  say "unpacking $(ls "$debs"/*.deb | wc -l) packages from $debs into $deps"
  mkdir -p "$deps"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$deps"; done
fi
configure_deps=()
# The python3 on the PATH is the one whose wheels (PyTorch's NCCL and
# cuDNN) the build may link; CMake's own search could pick another.
command -v python3 > /dev/null &&
  configure_deps+=(-DPython3_EXECUTABLE="$(command -v python3)")
if [[ -n "$deps" ]]; then
  deps="$(cd "$deps" && pwd)"
  multiarch=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
  lib="$deps/usr/lib/$multiarch"
  export CMAKE_PREFIX_PATH="$deps/usr:$lib/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$deps/usr/bin:$PATH" OPAL_PREFIX="$deps/usr"
  # Unpacked, Debian's alternatives links are missing: name the MPI
  # wrapper and OpenBLAS directly.
  [[ -x "$deps/usr/bin/mpicc.openmpi" ]] &&
    configure_deps+=(-DMPI_C_COMPILER="$deps/usr/bin/mpicc.openmpi")
  [[ -f "$lib/openblas-pthread/libopenblas.so" ]] &&
    configure_deps+=(-DBLAS_LIBRARIES="$lib/openblas-pthread/libopenblas.so"
      -DPARTITA_CBLAS_INCLUDE="$deps/usr/include/$multiarch/openblas-pthread")
  [[ -x "$deps/usr/bin/mpirun.openmpi" && ! -e "$deps/usr/bin/mpirun" ]] &&
    ln -s mpirun.openmpi "$deps/usr/bin/mpirun"
fi

# 1. Build: the runtime alone (no MLIR needed), with CUDA (the CPU emulator
# of the CUDA backend is of no use where the GPU is).
start=$(date +%s)
# Configured once; built every time, so a build left from older sources
# is brought up to date (and costs nothing when it is).
say "building the runtime with CUDA in $build"
{ [[ -f "$build/CMakeCache.txt" ]] ||
  cmake -S "$root/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPARTITA_ENABLE_CUDA_EMULATOR=OFF \
    "${configure_arch[@]}" "${configure_deps[@]}" > "$out/configure.log" 2>&1; } &&
  timeout $((deadline > $(date +%s) ? deadline - $(date +%s) : 1)) \
    cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || {
  say "error: the build failed or ran past the budget; see $out/configure.log and $out/build.log"
  tail -20 "$out/build.log" "$out/configure.log" 2> /dev/null
  echo "{\"gpu\": \"$gpu_name\", \"error\": \"the build failed or ran past the budget of $budget s\"}" > "$out/gpu-check.json"
  exit 1
}
bin="$build/bin"
say "built in $(($(date +%s) - start)) s"
# The cuDNN and NCCL the build linked (beside CUDA, or from the wheels of
# the machine's PyTorch) come first on the loader's path: cuDNN loads its
# engine libraries from it, and NVRTC for the engines it compiles.
linked=$(sed -n 's/^PARTITA_\(CUDNN\|NCCL\)_LIBRARY:FILEPATH=\(\/.*\)$/\2/p' \
  "$build/CMakeCache.txt" | xargs -r -n1 dirname)
nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc as n; print(list(n.__path__)[0] + "/lib")' 2> /dev/null)
libs=$(printf '%s\n' $linked $nvrtc | awk '!seen[$0]++' | paste -sd: -)
[[ -n "$libs" ]] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The cudnn family's runs need cuDNN in the build (docs/gpu.md).
families=(mma mma-atomic)
if grep -q '^PARTITA_HAVE_CUDNN:INTERNAL=ON' "$build/CMakeCache.txt"; then
  families+=(cudnn)
else
  why="this build has no cuDNN (CMake's line on it: $build/CMakeCache.txt, configure.log)"
  say "the cudnn attention runs are skipped: $why"
  echo "$why" > "$out/cudnn-skipped.txt"
fi

if [[ -z "$plans" ]]; then
  plans="$out/plans"
  plan_opt_build=""
  for b in "$build" "$root/build"; do
    [[ -x "$b/bin/plan-opt" ]] && plan_opt_build="$b" && break
  done
  if [[ -z "$plan_opt_build" ]]; then
    say "error: no plans: run scripts/gpu-plans.sh DIR where plan-opt is built and pass --plans DIR"
    exit 1
  fi
  "$root/scripts/gpu-plans.sh" "$plans" "$plan_opt_build" > /dev/null || exit 1
fi

# Whether --only asks for the stage NAME (every stage without --only); its
# patterns are split at commas, spaces trimmed, and never expanded to files.
patterns=()
[[ -n "$only" ]] && IFS=, read -ra patterns <<< "$only"
wanted() {
  [[ -z "$only" ]] && return 0
  local pattern
  for pattern in "${patterns[@]}"; do
    pattern="${pattern// /}"
    # shellcheck disable=SC2053 # a pattern, unquoted on purpose
    [[ -n "$pattern" && "$1" == $pattern ]] && return 0
  done
  return 1
}
# The summary says which stages were asked for.
if [[ -n "$only" ]]; then echo "$only" > "$out/only.txt"; else rm -f "$out/only.txt"; fi

# NAME SECONDS COMMAND...: logs to OUT/NAME.log, given at most SECONDS and
# what is left of the budget; skipped (and listed in OUT/skipped.txt) when
# less than 10 s is left. A stage that fails or is skipped sets status; one
# --only leaves out returns 2, having left status as it was. Either way
# the stage's results from an earlier check in OUT are removed first, so
# that the summary reports this check's alone.
: > "$out/skipped.txt"
status=0
run() {
  local name="$1" seconds="$2"
  shift 2
  rm -f "$out/$name.log" "$out/$name.jsonl" "$out/$name.json"
  wanted "$name" || return 2
  local left=$((deadline - $(date +%s)))
  if [[ $left -lt 10 ]]; then
    say "$name skipped: the budget of $budget s is spent"
    echo "$name" >> "$out/skipped.txt"
    status=1
    return 1
  fi
  [[ $left -lt $seconds ]] && seconds=$left
  timeout "$seconds" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq 0 ]] || status=1
  [[ $rc -eq 0 ]] || say "$name failed (exit $rc$([[ $rc -eq 124 ]] &&
    echo ", out of time after $seconds s")); see $out/$name.log"
  return $rc
}

say "1. kernel tests (every kernel against the CPU backend)"
run kernel-tests 240 "$bin/partita-cuda-tests" \
  --gtest_output="json:$out/kernel-tests.json"

say "1. kernel oracle (every kernel against PyTorch's autograd, float64)"
run kernel-oracle 120 python3 "$root/test/Runtime/kernel_oracle.py" \
  --runner "$bin/partita-cuda-kernel-run --device cuda" \
  --json "$out/kernel-oracle.json"

say "1. the tiny Llama, 20 steps: CPU, GPU with fp32 and with bf16 GEMMs"
tiny="$plans/tiny-llama-1.json"
run tiny-cpu 120 "$bin/plan-run" "$tiny" --steps 20 --device cpu \
  --log-json "$out/tiny-cpu.jsonl" --dump-grads "$out/tiny-cpu.grads"
for p in fp32 bf16; do
  run "tiny-$p" 120 "$bin/plan-run" "$tiny" --steps 20 --device cuda \
    --gemm-precision "$p" --log-json "$out/tiny-$p.jsonl" \
    --dump-grads "$out/tiny-$p.grads"
done
# Every gradient after step 1, fp32 GEMMs against the CPU's (the summary
# judges the worst against its limit).
run tiny-fp32-gradients 60 python3 "$root/test/Runtime/same_params.py" \
  --rtol 1 "$out/tiny-cpu.grads" "$out/tiny-fp32.grads"
say "1. the tiny Llama with bf16 buffers, 20 steps: CPU and GPU"
run tiny-bf16-buffers-cpu 120 "$bin/plan-run" "$plans/tiny-llama-bf16.json" \
  --steps 20 --device cpu --log-json "$out/tiny-bf16-buffers-cpu.jsonl"
run tiny-bf16-buffers-cuda 120 "$bin/plan-run" "$plans/tiny-llama-bf16.json" \
  --steps 20 --device cuda --gemm-precision fp32 \
  --log-json "$out/tiny-bf16-buffers-cuda.jsonl"
say "1. the tiny Llama with bf16 parameters and f32 gradients, 20 steps: CPU and GPU"
for d in cpu cuda; do
  run "f32-grads-$d" 120 "$bin/plan-run" "$plans/tiny-llama-f32-grads.json" \
    --steps 20 --device "$d" --gemm-precision fp32 \
    --log-json "$out/f32-grads-$d.jsonl"
done
say "1. the tiny Gemma in bf16 (GeGLU, offset norm weights, scaled embeddings), 20 steps: CPU and GPU"
for d in cpu cuda; do
  run "gemma-$d" 120 "$bin/plan-run" "$plans/tiny-gemma-bf16.json" \
    --steps 20 --device "$d" --gemm-precision fp32 \
    --log-json "$out/gemma-$d.jsonl"
done
say "1. a small Llama with heads of 128 in bf16 (tensor-core attention), 20 steps: CPU, GPU with each attention family"
run head128-cpu 120 "$bin/plan-run" "$plans/small-llama-head128.json" \
  --steps 20 --device cpu --log-json "$out/head128-cpu.jsonl"
run head128-cuda 120 env PARTITA_CUDA_ATTENTION=wmma "$bin/plan-run" \
  "$plans/small-llama-head128.json" --steps 20 --device cuda \
  --log-json "$out/head128-cuda.jsonl"
for kernels in "${families[@]}"; do
  run "head128-cuda-$kernels" 120 env PARTITA_CUDA_ATTENTION=$kernels \
    "$bin/plan-run" "$plans/small-llama-head128.json" --steps 20 \
    --device cuda --log-json "$out/head128-cuda-$kernels.jsonl"
done

if [[ "$gpus" -ge 2 ]]; then
  say "2. multi-rank plans on 2 GPUs against the CPU"
  for s in dp2 tp2 pp2 zero3; do
    run "equiv-$s-cpu" 120 "$bin/plan-run" "$plans/tiny-llama-$s.json" \
      --steps 10 --device cpu --log-json "$out/equiv-$s-cpu.jsonl"
    run "equiv-$s-cuda" 120 "$bin/plan-run" "$plans/tiny-llama-$s.json" \
      --steps 10 --device cuda --gemm-precision fp32 \
      --log-json "$out/equiv-$s-cuda.jsonl"
  done
  run allreduce 120 mpirun --allow-run-as-root -np "$gpus" \
    "$bin/partita-cuda-bench" allreduce
  [[ -s "$out/allreduce.log" ]] && cp "$out/allreduce.log" "$out/allreduce.json"
else
  say "2. skipped: one GPU (the multi-rank plans need 2)"
fi

say "3. benchmarks"
run gemm 180 "$bin/partita-cuda-bench" gemm && cp "$out/gemm.log" "$out/gemm.json"
# Each family of our attention kernels, and PyTorch's fused attention, on
# the block's shape.
run attention 90 "$bin/partita-cuda-bench" attention &&
  cp "$out/attention.log" "$out/attention.json"
run torch-attention 90 python3 "$root/bench/gpu/torch_attention.py" \
  --seq 8192 --heads 32 --kv-heads 8 --head-dim 128 &&
  cp "$out/torch-attention.log" "$out/torch-attention.json"
# The memory-bound kernels' bandwidth against a device-to-device copy's.
run memory 60 "$bin/partita-cuda-bench" memory && cp "$out/memory.log" "$out/memory.json"
# A -mma run is its plan with the register-resident attention kernels, a
# -mma-atomic one with their one-pass backward, a -cudnn one with cuDNN's
# fused attention (the fastest on an H200, so second; the f32 runs and the
# newest of our own kernels last, skipped first when time runs short).
for model in llama3-8b-block llama3-8b-block-cudnn llama3-8b-block-mma \
  gpt2-small gpt2-small-cudnn llama3-8b-block-f32 gpt2-small-f32 \
  llama3-8b-block-mma-atomic; do
  case "$model" in
  *-mma-atomic) kernels=mma-atomic ;;
  *-mma) kernels=mma ;;
  *-cudnn)
    kernels=cudnn
    [[ " ${families[*]} " == *" cudnn "* ]] || continue ;;
  *) kernels=wmma ;;
  esac
  run "$model" 120 env PARTITA_CUDA_ATTENTION=$kernels "$bin/plan-run" \
    "$plans/${model%-$kernels}.json" --steps 6 --device cuda \
    --gemm-precision bf16 --log-json "$out/$model.jsonl" --profile
done

say "4. results"
# A comparison above its limit fails the check as a failing stage does.
python3 "$root/scripts/gpu_check_summary.py" "$out" "$plans" "$gpu_name" "$gpus" "$status" ||
  status=1
say "results in $out/gpu-check.json and $out/summary.txt"
exit $status
