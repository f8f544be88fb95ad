// float32 convolutions and GEMMs through oneDNN (Debian's libdnnl, the library PyTorch's CPU
// convolutions use), for Conv2D, its two backprops and MatMul.
//
// Why: oneDNN's JIT kernels use the widest vector unit the CPU has. On this workplace's AVX-512
// machines, where OPENBLAS_CORETYPE pins OpenBLAS to its AVX2 kernels (older OpenBLAS builds
// compute wrong results with the AVX-512 ones there), oneDNN runs the MNIST-tutorial net's
// convolutions at 2.0-2.6x the speed of im2col + OpenBLAS and its GEMMs at ~2x (the tfprof op
// view of model_bench's LeNet, bench/matmul_bench; BENCHMARKS.md, round 4). float64 stays on
// OpenBLAS (oneDNN has no f64 kernels).
//
// How, so that results are the same bit for bit for any thread count:
//  - oneDNN's own (OpenMP) threading is turned off on every thread that calls it: its backward-
//    weights kernels sum over threads, which would make the result depend on the thread count;
//  - the work is split over stepscope's intra-op pool in pieces fixed by the shapes: images in
//    chunks of kImagesPerChunk, a GEMM's result in fixed blocks of rows or columns; the filter
//    gradient is summed over the chunks' partial gradients in chunk order;
//  - primitives (and their JIT code) are built once per shape and kept (primitive_cache_size());
//    their scratch memory comes from the session's allocator, so steps stay free of page faults
//    and the memory figures count it.
// A oneDNN failure is an InternalError naming the node; running out of memory for the scratch
// memory, a ResourceExhaustedError like any allocation.
#pragma once

#include <cstdint>

#include "stepscope/graph/kernel_context.h"

namespace stepscope::dnnl_kernels {

// Images per parallel chunk of a convolution (fixed, so chunks never depend on thread counts).
inline constexpr int64_t kImagesPerChunk = 8;

// A 2-D convolution over NHWC input, HWIO filter, NHWC output; all sizes > 0.
struct ConvShape {
  int64_t batch, in_h, in_w, depth;
  int64_t k_h, k_w, out_depth;
  int64_t stride_h, stride_w;
  int64_t out_h, out_w;
  int64_t pad_top, pad_left;  // TensorFlow's SAME split (or 0 for VALID)
};

void conv2d_forward(KernelContext& c, const ConvShape& s, const float* input, const float* filter, float* output);
void conv2d_backward_input(KernelContext& c, const ConvShape& s, const float* filter, const float* dy, float* dx);
void conv2d_backward_filter(KernelContext& c, const ConvShape& s, const float* input, const float* dy, float* dfilter);

// Row-major out[m, n] = op(a) x op(b), op = transpose when the flag is set; lda/ldb are the row
// lengths of a and b as stored. m, n, k > 0.
void matmul(KernelContext& c, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
            int64_t lda, const float* b, int64_t ldb, float* out);

// Primitives built so far (for tests and diagnostics).
int64_t primitive_cache_size();

}  // namespace stepscope::dnnl_kernels
