#!/usr/bin/env bash
# Line coverage of the runtime: builds its programs (not the compiler) with
# gcov's instrumentation in build-coverage/, runs its unit tests, the CUDA
# kernel cases and benchmarks on the CPU emulator, the cuDNN graph cases
# (where cuDNN is found), and the lit tests that run them (Runtime's, and
# Tools' training and emulated benchmark tests, whose plans the normal
# build's plan-opt compiles: build it first, scripts/build.sh), and
# reports, for each source file of runtime/ and tools/plan-run/, the lines
# that ran. A template's lines count once for each instantiation (a kernel
# compiled for heads of 32, 64 and 128 is three kernels), so a case missing
# for one tile size shows. Lines that only a process ending in MPI_Abort
# runs (the fault tests) are not recorded: gcov writes its counts at a
# normal exit.
# About 15 minutes on two cores; not part of ctest.
#   scripts/coverage.sh [LIT_FILTER]   (a regular expression of test names)
# Writes build-coverage/coverage.txt (the table and every line that did not
# run, by function) and prints the table; exits 1 if a test failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
coverage="${COVERAGE_DIR:-$root/build-coverage}"
filter="${1:-.}"
source "$root/scripts/runtime-variant.sh"

# -O1: gcov's line counts stay close to the source, and the emulated
# kernels fast enough. (A build type of its own adds no flags of its own.)
build_runtime_variant coverage.sh "$coverage" Coverage \
  "--coverage -O1 -DNDEBUG" --coverage
cudnn_tests=0
if ninja -C "$coverage" -t targets all | grep '^partita-cudnn-tests:' > /dev/null; then
  ninja -C "$coverage" -j "${JOBS:-$(nproc)}" partita-cudnn-tests
  cudnn_tests=1
fi
# Counts from an earlier run would add to this one's.
find "$coverage" -name '*.gcda' -delete

failed=()
run() { "$@" > /dev/null || failed+=("$(basename "$1")"); }
run "$coverage/bin/partita-runtime-tests"
if [ -x "$coverage/bin/partita-cuda-emulated-tests" ]; then
  run "$coverage/bin/partita-cuda-emulated-tests"
  # The benchmarks' code, on small shapes.
  run "$coverage/bin/partita-cuda-emulated-bench" memory --tokens 16 --hidden 64
  run "$coverage/bin/partita-cuda-emulated-bench" attention --seq 64
fi
# Without a driver, the toolkit's stub stands in (runtime/CMakeLists.txt).
[ "$cudnn_tests" = 1 ] &&
  LD_LIBRARY_PATH="$coverage/cuda-stub-driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    run "$coverage/bin/partita-cudnn-tests"
/usr/lib/llvm-22/bin/lit "$coverage/test/Runtime" \
  "$coverage/test/Tools/train-tiny.test" \
  "$coverage/test/Tools/cuda-bench-emulated.test" -q --filter "$filter" ||
  failed+=(lit)
python3 "$root/scripts/coverage_report.py" "$coverage" "$root" \
  "$coverage/coverage.txt" runtime tools/plan-run
if [ "${#failed[@]}" -gt 0 ]; then
  echo "coverage.sh: failed: ${failed[*]} (run them alone to see why)" >&2
  exit 1
fi
