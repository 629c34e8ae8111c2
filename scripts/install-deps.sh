#!/usr/bin/env bash
# Installs what Partita needs on Debian 12 (bookworm). Idempotent: when every
# package is already there it only checks, in well under a second.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ ccache python3
  # compiler: LLVM/MLIR 22 (lit, FileCheck, not and mlir-tblgen come with
  # the tools packages)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  nlohmann-json3-dev libboost-graph-dev
  # the CUDA emulator: CUDA threads as fibers
  libboost-context-dev
  # runtime: MPI and OpenBLAS for the CPU backend
  libopenmpi-dev openmpi-bin libopenblas-dev
  # tests (numpy: the reference executor that checks plans train like one
  # device)
  googletest libgtest-dev python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
