#!/usr/bin/env bash
# The runtime under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# the runtime's programs (not the compiler) in build-sanitize/, and runs
# its unit tests, the CUDA kernel cases and benchmarks on the CPU emulator
# and the Runtime lit tests, whose plans the normal build's plan-opt
# compiles (build it first: scripts/build.sh). Under ASan the emulator's
# cudaMalloc rounding and the bytes around a block's dynamic shared memory
# are out of bounds, so a kernel that strays past its buffer stops there.
# About 20 minutes on two cores; not part of ctest.
#   scripts/sanitize.sh [LIT_FILTER]   (a regular expression of test names)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sanitize="${SANITIZE_DIR:-$root/build-sanitize}"
filter="${1:-.}"
source "$root/scripts/runtime-variant.sh"

build_runtime_variant sanitize.sh "$sanitize" RelWithDebInfo \
  "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  "-fsanitize=address,undefined"

# The emulator switches between fibers, which ASan's stack-use-after-return
# check does not follow; leaks at exit (MPI's) are not the runtime's.
export ASAN_OPTIONS="detect_stack_use_after_return=0:detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1"
"$sanitize/bin/partita-runtime-tests"
if [ -x "$sanitize/bin/partita-cuda-emulated-tests" ]; then
  "$sanitize/bin/partita-cuda-emulated-tests"
  # The benchmarks' code, on small shapes.
  "$sanitize/bin/partita-cuda-emulated-bench" memory --tokens 16 --hidden 64 > /dev/null
  "$sanitize/bin/partita-cuda-emulated-bench" attention --seq 64 > /dev/null
fi
# One test at a time: with two sanitized emulated tests side by side, a
# multi-rank run once stopped (not seen with one at a time).
/usr/lib/llvm-22/bin/lit "$sanitize/test/Runtime" -j1 -q --filter "$filter"
echo "sanitize.sh: clean"
