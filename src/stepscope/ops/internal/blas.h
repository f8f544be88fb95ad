// GEMM through OpenBLAS, loaded at first use rather than linked: the float64 MatMul and Conv2D
// kernels (float32 ones run on oneDNN, ops/internal/dnnl.h).
//
// Why: OpenBLAS picks its kernels when the library loads, and 0.3.21 (Debian 12) does not
// recognise recent Intel CPUs (e.g. Sapphire Rapids) and falls back to its "Prescott" SSE kernels,
// 5-10x slower. Loading it ourselves lets us set OPENBLAS_CORETYPE first (SkylakeX on AVX-512
// machines, Haswell on AVX2 ones) unless the user already chose one, and start it single-threaded:
// stepscope splits large products over its own intra-op pool instead.
#pragma once

#include <cstdint>
#include <string>

namespace stepscope::blas {

// Row-major C = alpha * op(A) * op(B) + beta * C, as cblas_{s,d}gemm with CblasRowMajor.
void sgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void dgemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
           int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Loads OpenBLAS now instead of at the first product. The float64 MatMul and Conv2D shape rules call it,
// so that the library's start-up (milliseconds) happens while the graph is built rather than
// inside the first step, which a profiler may be tracing.
void load();

// The kernel family OpenBLAS runs ("SkylakeX", "Haswell", ...), for benchmarks and diagnostics.
std::string core_name();
// OpenBLAS's own thread count (1 unless changed here; benchmarks compare against it).
void set_num_threads(int threads);

}  // namespace stepscope::blas
