// Linear algebra ops: MatMul.
//
// float32 MatMul runs on oneDNN (ops/internal/dnnl.h), float64 on OpenBLAS (ops/internal/blas.h,
// which loads it single-threaded and with kernels that match the CPU). Either way a large
// product is split into blocks of rows or columns of the result (whichever side is longer),
// fixed by the shapes, over the session's intra-op pool (KernelContext::parallel_for). Why:
//  - one pool for every kernel: no oversubscription when the executor runs several MatMuls, or
//    a MatMul beside other kernels, at once (OpenBLAS's and OpenMP's threads spin while they
//    wait: on a loaded 2-core machine 2-thread GEMMs ran at half the speed of ours);
//  - each block is an independent GEMM (no cross-thread sums) and the blocks do not depend on
//    the thread count, so results are the same bit for bit whatever it is;
//  - OpenBLAS's thread count is process-wide, ours is per session.
// Measured on an AVX-512 machine where OPENBLAS_CORETYPE pins OpenBLAS to AVX2: oneDNN's sgemm
// 190-230 GFLOP/s on one core, OpenBLAS's 100 (bench/matmul_bench, BENCHMARKS.md).
//
// Gradient: TensorFlow's _MatMulGrad, for all four transpose combinations, with GEMM's transpose
// flags rather than Transpose nodes.
#pragma once

#include "stepscope/graph/scope.h"

namespace stepscope {

// product = op(a) x op(b), op(m) = transpose(m) when the flag is set. a and b are rank-2 and of
// the same dtype (float32 or float64); the inner dimensions must agree.
Output matmul(const Scope& scope, Output a, Output b, bool transpose_a = false, bool transpose_b = false,
              CallSite site = CallSite::current());

}  // namespace stepscope
