#!/usr/bin/env bash
# Downloads, as .deb files into DIR, the Debian 12 packages the runtime
# needs on a GPU machine that has CUDA but not them (OpenMPI, OpenBLAS,
# nlohmann-json, GoogleTest, CLI11, and the libraries they load), about
# 20 MB.
# Run it here, where the Debian mirror is reachable; on the GPU machine
#
#   scripts/gpu-check.sh --debs DIR --plans PLANS
#
# unpacks them into a prefix and builds against it (docs/gpu.md).
set -euo pipefail
out="${1:?usage: scripts/gpu-deps.sh DIR}"
packages=(
  # MPI: headers, the mpicc wrapper CMake asks, mpirun, and what libmpi loads
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0
  libibverbs1 librdmacm1 libpsm2-2 libnl-3-200 libnl-route-3-200 libmunge2
  libxnvctrl0 libnuma1 libltdl7
  # OpenBLAS (the pthread build) and what it loads
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libblas-dev
  libgfortran5 libgomp1
  # headers and test libraries
  nlohmann-json3-dev libgtest-dev libcli11-dev
)
mkdir -p "$out"
cd "$out"
apt-get download "${packages[@]}"
echo "gpu-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in $out"
