#!/usr/bin/env bash
# The compiler under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# everything in build-fuzz/ as the fuzzers are built (clang-22; every
# library instrumented, line tables for the reports) and runs the lit
# suites that compile: Dialect, Import, Passes, Plugins and Tools (plan-run
# is sanitized there too). Needs clang-22 and libclang-rt-22-dev. About
# 10 minutes to build and 10 to test on two cores; not part of ctest. The
# runtime's own sanitizer run is scripts/sanitize.sh.
#   scripts/sanitize-compiler.sh [LIT_FILTER]   (default: the suites above)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
filter="${1:-Dialect|Import|Passes|Plugins|Tools}"
cmake -S "$root" -B "$build" -G Ninja -DPARTITA_BUILD_FUZZERS=ON \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DCMAKE_CXX_FLAGS=-gline-tables-only -DPARTITA_ENABLE_CUDA=OFF > /dev/null
ninja -C "$build" -j "${JOBS:-$(nproc)}"
# Debian's LLVM libraries are not instrumented but their headers are
# (test/fuzz/LlvmAsanOptions.cpp); leaks at exit (MPI's) are not ours.
export ASAN_OPTIONS="allow_user_poisoning=0:detect_leaks=0"
export UBSAN_OPTIONS="print_stacktrace=1"
/usr/lib/llvm-22/bin/lit "$build/test" -q --filter "$filter"
echo "sanitize-compiler.sh: clean"
