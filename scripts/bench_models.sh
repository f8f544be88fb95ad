#!/usr/bin/env bash
# The model suite of BENCHMARKS.md: builds model_bench (Release, build/), installs Debian's
# PyTorch and OpenBLAS's OpenMP build if missing and selects the latter as PyTorch's libblas (the
# reference BLAS is ~20x slower), then runs bench/compare_models.py with the arguments given:
# every model trained in stepscope and in PyTorch, interleaved, medians over rounds.
#   scripts/bench_models.sh [--models mlp,lenet] [--threads 1,2] [--rounds 3] [--steps N]
#                           [--markdown FILE] [--no-pytorch]
# compare_models.py sets OPENBLAS_CORETYPE for the PyTorch processes only (to the kernels
# stepscope's OpenBLAS picked), so both sides run the same GEMM kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${JOBS:-2}" --target model_bench >/dev/null

pytorch=1
for arg in "$@"; do
  [ "$arg" = "--no-pytorch" ] && pytorch=0
done
if [ "$pytorch" = 1 ]; then
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || ! dpkg -s libopenblas0-openmp >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch libopenblas0-openmp >/dev/null
  fi
  update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 >/dev/null 2>&1 || true
fi
exec /usr/bin/python3 bench/compare_models.py --build-dir build "$@"
