#!/usr/bin/env bash
# Builds (Release) and prints the benchmark figures of BENCHMARKS.md: op dispatch, MatMul,
# MLP forward and training step (traced and not), the hooks' overhead, timelines (ns and bytes
# per event), tfprof's views, and the model suite: each model trained in stepscope and in
# Debian's PyTorch side by side (scripts/bench_models.sh, which installs PyTorch with OpenBLAS's
# OpenMP build selected, as the reference BLAS is ~20x slower; the table also goes to
# build/model_suite.md).
#   scripts/bench.sh [--no-pytorch]     (--no-pytorch: the stepscope side only)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTEPSCOPE_BENCHMARKS=ON >/dev/null
cmake --build build -j"${JOBS:-2}" --target runtime_bench matmul_bench train_bench hooks_bench timeline_bench tfprof_bench scale_bench \
  allreduce_bench model_bench >/dev/null

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
echo "== the profiler's cost on chains of 10^3 to 10^6 tiny ops (bench/scale_bench.cc; ~5 minutes, ~6 GB at 10^6)"
./build/scale_bench --markdown
# Data-parallel (issue 18): as root, Open MPI needs these two to start; shared memory between
# the ranks without CMA single copies (containers often forbid the ptrace it needs).
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "== the fused Allreduce op vs a bare MPI_Allreduce, 2 ranks (bench/allreduce_bench.cc)"
mpirun -np 2 --oversubscribe ./build/allreduce_bench
echo "== data-parallel step: 1 rank, then 2 ranks of one thread each (model_bench --distributed)"
for model in mlp lenet; do
  ./build/model_bench --model "$model" --threads 1
  mpirun -np 2 --oversubscribe ./build/model_bench --model "$model" --threads 1 --distributed
done

# The model suite: MLP, LeNet, deeper CNN, each in stepscope and in PyTorch (see
# scripts/bench_models.sh; with --no-pytorch the stepscope side only).
echo "== model suite: stepscope and PyTorch side by side (bench/compare_models.py)"
scripts/bench_models.sh ${1:+"$1"} --markdown build/model_suite.md
