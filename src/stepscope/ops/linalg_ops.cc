#include "stepscope/ops/linalg_ops.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/internal/blas.h"
#include "stepscope/ops/internal/dnnl.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

Output matmul(const Scope& scope, Output a, Output b, bool transpose_a, bool transpose_b, CallSite site) {
  return scope.add_node(op_def("MatMul"), {a, b}, {{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}, site)
      ->output(0);
}

namespace {

// "inner dimensions differ: [784,64] x [100,10] (transpose_a=true)": the shapes as given, so the
// user recognises their tensors, and the flags that explain which dimensions were compared.
std::string inner_dims_message(const Shape& a, const Shape& b, bool transpose_a, bool transpose_b) {
  std::string msg = "inner dimensions differ: " + a.to_string() + " x " + b.to_string();
  if (transpose_a && transpose_b) return msg + " (transpose_a=true, transpose_b=true)";
  if (transpose_a) return msg + " (transpose_a=true)";
  if (transpose_b) return msg + " (transpose_b=true)";
  return msg;
}

void matmul_shape(ShapeContext& c) {
  c.expect_floating(0);
  if (c.input_dtype(0) == DType::kFloat64) blas::load();  // float32 runs on oneDNN
  c.expect_dtype(1, c.input_dtype(0));
  c.expect_rank(0, 2);
  c.expect_rank(1, 2);
  const bool ta = c.node().attrs().get_or("transpose_a", false);
  const bool tb = c.node().attrs().get_or("transpose_b", false);
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  auto dim = [](const Shape& s, int i) { return s.known_rank() ? s.dim(i) : Shape::kUnknownDim; };
  const int64_t m = dim(a, ta ? 1 : 0), ka = dim(a, ta ? 0 : 1);
  const int64_t kb = dim(b, tb ? 1 : 0), n = dim(b, tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) c.fail(inner_dims_message(a, b, ta, tb));
  c.set_output(0, c.input_dtype(0), Shape{m, n});
}

inline void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* out,
                 int ldc) {
  blas::sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, out, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* out,
                 int ldc) {
  blas::dgemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, out, ldc);
}

// Rows (or columns) of the product per parallel block: a multiple of OpenBLAS's register tiles
// (16 rows x 4..8 columns for sgemm on AVX2/AVX-512) so blocks do not create ragged edge tiles.
constexpr int64_t kBlockRows = 32;
constexpr int64_t kBlockCols = 64;
// Rough single-core throughput used to size blocks for parallel_for (flops per nanosecond).
constexpr int64_t kFlopsPerNs = 40;

template <typename T>
void matmul_compute(KernelContext& c, bool ta, bool tb) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const int64_t m = a.dim(ta ? 1 : 0), k = a.dim(ta ? 0 : 1), n = b.dim(tb ? 0 : 1);
  Tensor& out = c.allocate_output(0, dtype_of<T>, Shape{m, n});
  if (m == 0 || n == 0) return;
  T* y = out.data<T>();
  if (k == 0) {
    std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(T));
    return;
  }
  if (std::max({m, n, k}) > INT_MAX) c.fail("dimensions too large for BLAS: " + out.shape().to_string());
  const T* x = a.data<T>();
  const T* w = b.data<T>();
  // Leading dimensions of the stored (untransposed) row-major matrices.
  const int lda = static_cast<int>(a.dim(1)), ldb = static_cast<int>(b.dim(1)), ldc = static_cast<int>(n);
  if constexpr (std::is_same_v<T, float>) {
    dnnl_kernels::matmul(c, ta, tb, m, n, k, x, lda, w, ldb, y);
    return;
  }
  // Split the larger side of the result: each block is an independent GEMM on a slice of a
  // (rows) or of b (columns), so no block depends on how many threads there are.
  if (m >= n) {
    const int64_t blocks = (m + kBlockRows - 1) / kBlockRows;
    const int64_t cost = std::max<int64_t>(1, 2 * kBlockRows * n * k / kFlopsPerNs);
    c.parallel_for(blocks, cost, [&](int64_t b0, int64_t b1) {
      const int64_t r0 = b0 * kBlockRows, r1 = std::min(m, b1 * kBlockRows);
      // Row r of op(a) starts at a[r, 0] (lda apart) or, transposed, at a[0, r] (consecutive).
      const T* a_rows = ta ? x + r0 : x + r0 * lda;
      gemm(ta, tb, static_cast<int>(r1 - r0), static_cast<int>(n), static_cast<int>(k), a_rows, lda, w, ldb,
           y + r0 * ldc, ldc);
    });
  } else {
    const int64_t blocks = (n + kBlockCols - 1) / kBlockCols;
    const int64_t cost = std::max<int64_t>(1, 2 * kBlockCols * m * k / kFlopsPerNs);
    c.parallel_for(blocks, cost, [&](int64_t b0, int64_t b1) {
      const int64_t c0 = b0 * kBlockCols, c1 = std::min(n, b1 * kBlockCols);
      // Column j of op(b) starts at b[0, j] (consecutive) or, transposed, at b[j, 0] (ldb apart).
      const T* b_cols = tb ? w + c0 * ldb : w + c0;
      gemm(ta, tb, static_cast<int>(m), static_cast<int>(c1 - c0), static_cast<int>(k), x, lda, b_cols, ldb, y + c0,
           ldc);
    });
  }
}

void matmul_kernel(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const bool ta = c.attrs().get_or("transpose_a", false);
  const bool tb = c.attrs().get_or("transpose_b", false);
  // Shapes fed at run time may be more specific than what the shape rule saw.
  if (a.rank() != 2 || b.rank() != 2)
    c.fail("inputs must have rank 2, got shapes " + a.shape().to_string() + " and " + b.shape().to_string());
  if (a.dim(ta ? 0 : 1) != b.dim(tb ? 1 : 0)) c.fail(inner_dims_message(a.shape(), b.shape(), ta, tb));
  if (a.dtype() == DType::kFloat64)
    matmul_compute<double>(c, ta, tb);
  else
    matmul_compute<float>(c, ta, tb);
}

int64_t matmul_flops(const CostContext& c) {
  const Shape& a = c.input_shapes[0];
  const Shape& out = c.output_shapes[0];
  if (!a.fully_defined() || !out.fully_defined() || a.rank() != 2 || out.rank() != 2) return 0;
  const int64_t k = c.node.attrs().get_or("transpose_a", false) ? a.dim(0) : a.dim(1);
  return 2 * out.dim(0) * out.dim(1) * k;
}

// TensorFlow's _MatMulGrad: for z = op(a) x op(b), da and db are products of dz with the other
// operand, written with the transpose flags instead of Transpose nodes, for each of the four
// combinations (so GEMM reads every operand in place).
std::vector<Output> matmul_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output g = dz[0], a = n.input(0), b = n.input(1);
  const bool ta = n.attrs().get_or("transpose_a", false);
  const bool tb = n.attrs().get_or("transpose_b", false);
  if (!ta && !tb) return {matmul(s, g, b, false, true), matmul(s, a, g, true, false)};
  if (!ta && tb) return {matmul(s, g, b, false, false), matmul(s, g, a, true, false)};
  if (ta && !tb) return {matmul(s, b, g, false, true), matmul(s, a, g, false, false)};
  return {matmul(s, b, g, true, true), matmul(s, g, a, true, true)};
}

}  // namespace

void register_linalg_ops(OpRegistry& registry) {
  registry.add({.name = "MatMul",
                .num_inputs = 2,
                .shape = matmul_shape,
                .kernel = matmul_kernel,
                .flops = matmul_flops,
                .gradient = matmul_grad,
                .doc = "Matrix product of two rank-2 float tensors, op(a) x op(b), where attrs transpose_a / "
                       "transpose_b transpose an operand first. OpenBLAS GEMM, split over the intra-op pool."});
}

}  // namespace stepscope
