// MatMul throughput (GFLOP/s, flops = 2*M*N*K), float32, for the two ways of using several
// threads that linalg_ops.h weighs:
//   BM_MatMulSession/M/K/N/threads: the MatMul op in a Session (OpenBLAS single-threaded, the
//     product split into row or column blocks over the session's pool); includes the ~µs of
//     Session::run overhead.
//   BM_OpenBlasThreads/M/K/N/threads: one cblas_sgemm call with OpenBLAS's own threads.
// The context line "openblas_core" shows which kernels OpenBLAS runs (ops/internal/blas.h picks
// them unless OPENBLAS_CORETYPE is set).
#include <benchmark/benchmark.h>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/blas.h"
#include "stepscope/ops/linalg_ops.h"
#include "stepscope/ops/registry.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

Tensor filled(int64_t rows, int64_t cols, float value) {
  Tensor t(DType::kFloat32, Shape{rows, cols});
  for (auto& v : t.flat<float>()) v = value;
  return t;
}

void set_flops(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_MatMulSession(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Graph g;
  Scope root(g);
  auto y = matmul(root, constant(root, filled(m, k, 0.5f)), constant(root, filled(k, n, 0.25f)));
  Session session(g, {.inter_op_threads = static_cast<int>(state.range(3))});
  for (auto _ : state) benchmark::DoNotOptimize(session.run(y));
  set_flops(state, m, k, n);
}

void BM_OpenBlasThreads(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor a = filled(m, k, 0.5f), b = filled(k, n, 0.25f), c(DType::kFloat32, Shape{m, n});
  blas::set_num_threads(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    blas::sgemm(false, false, m, n, k, 1.0f, a.data<float>(), k, b.data<float>(), n, 0.0f,
                c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
  }
  blas::set_num_threads(1);
  set_flops(state, m, k, n);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2, 4})
    for (auto s : {std::array<int64_t, 3>{64, 784, 256}, std::array<int64_t, 3>{256, 256, 256}})
      b->Args({s[0], s[1], s[2], threads});
  b->ArgNames({"M", "K", "N", "threads"})->UseRealTime();
}

BENCHMARK(BM_MatMulSession)->Apply(shapes);
BENCHMARK(BM_OpenBlasThreads)->Apply(shapes);

}  // namespace
}  // namespace stepscope

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("openblas_core", stepscope::blas::core_name());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
