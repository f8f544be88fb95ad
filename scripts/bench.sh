#!/usr/bin/env bash
# Builds (Release) and prints the benchmark figures of BENCHMARKS.md: op dispatch, MatMul,
# MLP forward and training step (traced and not), the hooks' overhead, timelines (ns and bytes
# per event), tfprof's views, and the same training step in Debian's PyTorch (installed here
# with OpenBLAS's OpenMP build selected, as the reference BLAS is ~20x slower).
#   scripts/bench.sh [--no-pytorch]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_BENCHMARKS=ON >/dev/null
cmake --build build -j"${JOBS:-2}" --target runtime_bench matmul_bench train_bench hooks_bench timeline_bench tfprof_bench >/dev/null

fmt='--benchmark_format=console --benchmark_counters_tabular=true'
echo "== op dispatch and MLP forward (bench/runtime_bench.cc)"
./build/runtime_bench $fmt
echo "== MatMul (bench/matmul_bench.cc)"
./build/matmul_bench $fmt --benchmark_filter='BM_MatMulSession'
echo "== MLP 784-256-256-10 training step, batch 64 (bench/train_bench.cc)"
./build/train_bench $fmt --benchmark_out=build/train_bench.json --benchmark_out_format=json
echo "== MonitoredSession with quiet hooks vs Session::run (bench/hooks_bench.cc)"
./build/hooks_bench $fmt
echo "== timelines: StepStats to Chrome trace JSON (bench/timeline_bench.cc)"
./build/timeline_bench $fmt
echo "== tfprof: add_step, views, save/load (bench/tfprof_bench.cc)"
./build/tfprof_bench $fmt

if [ "${1:-}" != "--no-pytorch" ]; then
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-openmp >/dev/null
  fi
  update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 >/dev/null 2>&1 || true
  # The same OpenBLAS kernels stepscope picks (ops/kernels/blas.h), so both sides run equal GEMMs.
  core=$(./build/matmul_bench --benchmark_filter=NONE 2>&1 | sed -n 's/^openblas_core: //p')
  echo "== the same step in PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') (OPENBLAS_CORETYPE=${core:-default})"
  OPENBLAS_CORETYPE=$core /usr/bin/python3 bench/pytorch_mlp.py | tee build/pytorch_mlp.txt
  /usr/bin/python3 - <<'PY'
import json, re
ours = {}
for b in json.load(open("build/train_bench.json"))["benchmarks"]:
    m = re.search(r"threads:(\d)/traced:0", b["name"])
    if m: ours[int(m.group(1))] = b["ms_per_step"]
torch = {int(t): float(ms) for t, ms in re.findall(r"threads=(\d) ms_per_step=([\d.]+)", open("build/pytorch_mlp.txt").read())}
for t in sorted(ours):
    print(f"threads={t}: stepscope {ours[t]:.3f} ms, pytorch {torch[t]:.3f} ms, ratio {ours[t] / torch[t]:.2f}x")
PY
fi
