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
  # plan-run's command line
  libcli11-dev
  # tests (numpy: the reference executor that checks plans train like one
  # device)
  googletest libgtest-dev python3-numpy
  # PyTorch's autograd: the independent oracle of every kernel's forward
  # and backward
  python3-torch
  # lit's per-test --timeout
  python3-psutil
  # the namespace cluster of scripts/cluster.sh: its daemons run only
  # inside the cluster's hosts, never on this machine
  openssh-server munge slurmd slurmctld slurm-client
)
# The services these packages would start or enable on this machine.
declare -A service_of=([openssh-server]=ssh [munge]=munge [slurmd]=slurmd
  [slurmctld]=slurmctld)

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
# Hold every service start during the install (Debian's policy-rc.d), and
# leave the cluster's services disabled: they belong to the namespace hosts.
held=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod 755 /usr/sbin/policy-rc.d
  held=1
fi
release() { if [ -n "$held" ]; then $sudo rm -f /usr/sbin/policy-rc.d; fi; }
trap release EXIT
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
for p in "${missing[@]}"; do
  service="${service_of[$p]:-}"
  if [ -n "$service" ] && command -v systemctl >/dev/null; then
    $sudo systemctl disable "$service" >/dev/null 2>&1 || true
  fi
done
