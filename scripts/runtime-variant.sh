# Sourced by scripts/sanitize.sh and scripts/coverage.sh: builds the
# runtime's programs (not the compiler) in a build directory of their own
# with extra compiler and linker flags, the CUDA emulator's too where CUDA's
# headers are found, and links the normal build's plan-opt beside them, by
# which the lit tests compile their plans.
#   build_runtime_variant SCRIPT DIR BUILD_TYPE FLAGS LINK_FLAGS
# ($root is the repository; BUILD_DIR names the normal build, default
# build/.)
build_runtime_variant() {
  local script="$1" dir="$2" type="$3" flags="$4" link="$5"
  local build="${BUILD_DIR:-$root/build}"
  if [ ! -x "$build/bin/plan-opt" ]; then
    echo "$script: $build/bin/plan-opt is missing: run scripts/build.sh first" >&2
    exit 1
  fi
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" \
    > /dev/null
  local targets=(plan-run partita-runtime-tests partita-guarded-run
                 partita-comm-check partita-gemm-bench)
  # (grep without -q reads all of ninja's list: pipefail would take a
  # listing cut short for a missing target.)
  if ninja -C "$dir" -t targets all | grep '^partita-cuda-emulated-run:' > /dev/null; then
    targets+=(partita-cuda-emulated-run partita-cuda-emulated-tests
              partita-cuda-emulated-bench)
  fi
  ninja -C "$dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"
  ln -sf "$build/bin/plan-opt" "$dir/bin/plan-opt"
}
