#!/usr/bin/env bash
# Line coverage of the runtime: builds its programs (not the compiler) with
# gcov's instrumentation in build-coverage/, runs its unit tests, the CUDA
# kernel cases and benchmarks on the CPU emulator, and the lit tests that
# run them (Runtime's, and Tools' training and emulated benchmark tests,
# whose plans the normal build's plan-opt compiles: build it first,
# scripts/build.sh), and reports, for each source file of runtime/, the
# lines that ran. A template's lines count once for each instantiation
# (a kernel compiled for heads of 32, 64 and 128 is three kernels), so a
# case missing for one tile size shows. Lines that only a process ending in
# MPI_Abort runs (the fault tests) are not recorded: gcov writes its counts
# at a normal exit.
# About 15 minutes on two cores; not part of ctest.
#   scripts/coverage.sh [LIT_FILTER]   (a regular expression of test names)
# Writes build-coverage/coverage.txt (the table and every line that did not
# run, by function) and prints the table.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
coverage="${COVERAGE_DIR:-$root/build-coverage}"
filter="${1:-.}"

if [ ! -x "$build/bin/plan-opt" ]; then
  echo "coverage.sh: $build/bin/plan-opt is missing: run scripts/build.sh first" >&2
  exit 1
fi
# -O1: gcov's line counts stay close to the source, and the emulated
# kernels stay fast enough.
flags="--coverage -O1"
cmake -S "$root" -B "$coverage" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="$flags" -DCMAKE_C_FLAGS_RELEASE="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage \
  > /dev/null
targets=(plan-run partita-runtime-tests partita-guarded-run partita-comm-check
         partita-gemm-bench)
# (grep without -q reads all of ninja's list: pipefail would take a
# listing cut short for a missing target.)
if ninja -C "$coverage" -t targets all | grep '^partita-cuda-emulated-run:' > /dev/null; then
  targets+=(partita-cuda-emulated-run partita-cuda-emulated-tests
           partita-cuda-emulated-bench)
fi
ninja -C "$coverage" -j "${JOBS:-$(nproc)}" "${targets[@]}"
ln -sf "$build/bin/plan-opt" "$coverage/bin/plan-opt"
# Counts from an earlier run would add to this one's.
find "$coverage" -name '*.gcda' -delete

"$coverage/bin/partita-runtime-tests" > /dev/null
if [ -x "$coverage/bin/partita-cuda-emulated-tests" ]; then
  "$coverage/bin/partita-cuda-emulated-tests" > /dev/null
  # The benchmarks' code, on small shapes.
  "$coverage/bin/partita-cuda-emulated-bench" memory --tokens 16 --hidden 64 > /dev/null
  "$coverage/bin/partita-cuda-emulated-bench" attention --seq 64 > /dev/null
fi
# The Runtime lit tests, and the Tools tests that train or run the
# emulated benchmarks. A failing test is reported after the table.
failed=0
/usr/lib/llvm-22/bin/lit "$coverage/test/Runtime" \
  "$coverage/test/Tools/train-tiny.test" \
  "$coverage/test/Tools/cuda-bench-emulated.test" -q --filter "$filter" ||
  failed=1
python3 "$root/scripts/coverage_report.py" "$coverage" "$root/runtime" \
  "$coverage/coverage.txt"
[ "$failed" = 0 ] || echo "coverage.sh: some lit tests failed (above)" >&2
exit "$failed"
