#include "stepscope/ops/conv_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/blas.h"
#include "stepscope/ops/internal/dnnl.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

Output conv2d(const Scope& scope, Output input, Output filter, std::vector<int64_t> strides, std::string padding,
              CallSite site) {
  return scope
      .add_node(op_def("Conv2D"), {input, filter}, {{"strides", std::move(strides)}, {"padding", std::move(padding)}},
                site)
      ->output(0);
}

Output max_pool(const Scope& scope, Output value, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                std::string padding, CallSite site) {
  return scope
      .add_node(op_def("MaxPool"), {value},
                {{"ksize", std::move(ksize)}, {"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

Output avg_pool(const Scope& scope, Output value, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                std::string padding, CallSite site) {
  return scope
      .add_node(op_def("AvgPool"), {value},
                {{"ksize", std::move(ksize)}, {"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

Output avg_pool_grad(const Scope& scope, Output orig_input_shape, Output grad, std::vector<int64_t> ksize,
                     std::vector<int64_t> strides, std::string padding, CallSite site) {
  return scope
      .add_node(op_def("AvgPoolGrad"), {orig_input_shape, grad},
                {{"ksize", std::move(ksize)}, {"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

Output conv2d_backprop_input(const Scope& scope, Output input_sizes, Output filter, Output out_backprop,
                             std::vector<int64_t> strides, std::string padding, CallSite site) {
  return scope
      .add_node(op_def("Conv2DBackpropInput"), {input_sizes, filter, out_backprop},
                {{"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

Output conv2d_backprop_filter(const Scope& scope, Output input, Output filter_sizes, Output out_backprop,
                              std::vector<int64_t> strides, std::string padding, CallSite site) {
  return scope
      .add_node(op_def("Conv2DBackpropFilter"), {input, filter_sizes, out_backprop},
                {{"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

Output max_pool_grad(const Scope& scope, Output orig_input, Output orig_output, Output grad, std::vector<int64_t> ksize,
                     std::vector<int64_t> strides, std::string padding, CallSite site) {
  return scope
      .add_node(op_def("MaxPoolGrad"), {orig_input, orig_output, grad},
                {{"ksize", std::move(ksize)}, {"strides", std::move(strides)}, {"padding", std::move(padding)}}, site)
      ->output(0);
}

namespace {

// The geometry of one windowed op (Conv2D or MaxPool) over an NHWC input; -1 where unknown
// (only while inferring shapes).
struct Window2D {
  int64_t batch = -1, in_h = -1, in_w = -1, depth = -1;
  int64_t k_h = -1, k_w = -1, stride_h = 1, stride_w = 1;
  int64_t out_h = -1, out_w = -1, pad_top = 0, pad_left = 0;
  int64_t out_depth = -1;
};

// TensorFlow's GetWindowedOutputSize: SAME gives ceil(in / stride) with the padding split
// before = total / 2; VALID gives (in - k + stride) / stride, truncated like C++ (so an input
// one smaller than the window yields an empty output, and a smaller one an error).
template <typename Ctx>
void windowed_output_size(const Ctx& c, int64_t in, int64_t k, int64_t stride, bool same, int64_t* out,
                          int64_t* pad_before) {
  *pad_before = 0;
  if (in < 0 || (!same && k < 0)) {
    *out = -1;
    return;
  }
  if (same) {
    *out = (in + stride - 1) / stride;
    if (k >= 0) *pad_before = std::max<int64_t>(0, (*out - 1) * stride + k - in) / 2;
  } else {
    *out = (in - k + stride) / stride;
  }
  if (*out < 0)
    c.fail("Computed output size would be negative: " + std::to_string(*out) + " [input_size: " + std::to_string(in) +
           ", effective_filter_size: " + std::to_string(k) + ", stride: " + std::to_string(stride) + "]");
}

template <typename Ctx>
bool parse_padding(const Ctx& c, const AttrMap& attrs) {
  const auto& padding = attrs.get<std::string>("padding");
  if (padding == "SAME") return true;
  if (padding != "VALID")
    c.fail("Value for attr 'padding' of \"" + padding + "\" is not in the list of allowed values: \"SAME\", \"VALID\"");
  return false;
}

template <typename Ctx>
const std::vector<int64_t>& parse_strides(const Ctx& c, const AttrMap& attrs) {
  const auto& strides = attrs.get<std::vector<int64_t>>("strides");
  if (strides.size() != 4) c.fail("Sliding window strides field must specify 4 dimensions");
  for (int i = 1; i < 3; ++i)
    if (strides[i] <= 0) c.fail("Stride must be > 0, but got " + std::to_string(strides[i]));
  return strides;
}

// Validates Conv2D's inputs and attrs (shape rule and kernel alike) and computes its geometry.
template <typename Ctx>
Window2D conv_geometry(const Ctx& c, const AttrMap& attrs, const Shape& input, const Shape& filter) {
  const auto& strides = parse_strides(c, attrs);
  if (strides[0] != 1 || strides[3] != 1)
    c.fail("Current implementation does not yet support strides in the batch and depth dimensions.");
  const bool same = parse_padding(c, attrs);
  if (input.known_rank() && input.rank() != 4) c.fail("input must be 4-dimensional: " + input.to_string());
  if (filter.known_rank() && filter.rank() != 4) c.fail("filter must be 4-dimensional: " + filter.to_string());
  Window2D w;
  w.stride_h = strides[1], w.stride_w = strides[2];
  if (input.known_rank()) w.batch = input.dim(0), w.in_h = input.dim(1), w.in_w = input.dim(2), w.depth = input.dim(3);
  if (filter.known_rank()) {
    w.k_h = filter.dim(0), w.k_w = filter.dim(1), w.out_depth = filter.dim(3);
    const int64_t filter_depth = filter.dim(2);
    if (w.depth >= 0 && filter_depth >= 0 && w.depth != filter_depth)
      c.fail("input and filter must have the same depth: " + std::to_string(w.depth) + " vs " +
             std::to_string(filter_depth));
    if (w.depth < 0) w.depth = filter_depth;
  }
  windowed_output_size(c, w.in_h, w.k_h, w.stride_h, same, &w.out_h, &w.pad_top);
  windowed_output_size(c, w.in_w, w.k_w, w.stride_w, same, &w.out_w, &w.pad_left);
  return w;
}

template <typename Ctx>
Window2D pool_geometry(const Ctx& c, const AttrMap& attrs, const Shape& input) {
  const auto& ksize = attrs.get<std::vector<int64_t>>("ksize");
  if (ksize.size() != 4) c.fail("Sliding window ksize field must specify 4 dimensions");
  const auto& strides = attrs.get<std::vector<int64_t>>("strides");
  if (strides.size() != 4) c.fail("Sliding window stride field must specify 4 dimensions");
  for (int i = 0; i < 4; ++i)
    if (ksize[i] <= 0) c.fail("Sliding window ksize for dimension " + std::to_string(i) + " was zero.");
  if (ksize[0] != 1 || strides[0] != 1) c.fail("Pooling is not yet supported on the batch dimension.");
  if (ksize[3] != 1 || strides[3] != 1) c.fail("Pooling on the depth dimension is not supported.");
  parse_strides(c, attrs);
  const bool same = parse_padding(c, attrs);
  if (input.known_rank() && input.rank() != 4) c.fail("input must be 4-dimensional: " + input.to_string());
  Window2D w;
  w.k_h = ksize[1], w.k_w = ksize[2], w.stride_h = strides[1], w.stride_w = strides[2];
  if (input.known_rank()) w.batch = input.dim(0), w.in_h = input.dim(1), w.in_w = input.dim(2), w.depth = input.dim(3);
  w.out_depth = w.depth;
  windowed_output_size(c, w.in_h, w.k_h, w.stride_h, same, &w.out_h, &w.pad_top);
  windowed_output_size(c, w.in_w, w.k_w, w.stride_w, same, &w.out_w, &w.pad_left);
  return w;
}

void conv2d_shape(ShapeContext& c) {
  c.expect_floating(0);
  if (c.input_dtype(0) == DType::kFloat64) blas::load();  // float32 runs on oneDNN
  c.expect_dtype(1, c.input_dtype(0));
  const Window2D w = conv_geometry(c, c.node().attrs(), c.input_shape(0), c.input_shape(1));
  c.set_output(0, c.input_dtype(0), Shape{w.batch, w.out_h, w.out_w, w.out_depth});
}

void max_pool_shape(ShapeContext& c) {
  const DType d = c.input_dtype(0);
  if (d != DType::kFloat32 && d != DType::kFloat64 && d != DType::kInt32 && d != DType::kInt64)
    c.fail("input 0 must be float32, float64, int32 or int64, got " + std::string(dtype_name(d)));
  const Window2D w = pool_geometry(c, c.node().attrs(), c.input_shape(0));
  c.set_output(0, d, Shape{w.batch, w.out_h, w.out_w, w.depth});
}

// ---------------------------------------------------------------------------------------------
// The backward ops' shapes. Their sizes input (input_sizes, filter_sizes) is a tensor, as in
// TensorFlow; its value is known at build time when it is a Const or, as the gradient rule
// builds it, Shape(x), whose input's inferred shape it then is.

template <typename Ctx>
Shape sizes_from_tensor(const Ctx& c, const Tensor& t, const std::string& name) {
  if (t.rank() != 1 || t.dim(0) != 4)
    c.fail(name + " must be a vector of 4 elements, got shape " + t.shape().to_string());
  Shape s{0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const int64_t v = t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
    if (v < 0) c.fail(name + " must be non-negative, got " + std::to_string(v) + " at index " + std::to_string(i));
    s.set_dim(i, v);
  }
  return s;
}

Shape sizes_input_shape(const ShapeContext& c, int i, const std::string& name) {
  const DType d = c.input_dtype(i);
  if (d != DType::kInt32 && d != DType::kInt64)
    c.fail(name + " must be int32 or int64, got " + std::string(dtype_name(d)));
  const Shape& s = c.input_shape(i);
  if (s.known_rank() && (s.rank() != 1 || (s.dim(0) >= 0 && s.dim(0) != 4)))
    c.fail(name + " must be a vector of 4 elements, got shape " + s.to_string());
  if (const Tensor* t = c.input_constant(i)) return sizes_from_tensor(c, *t, name);
  const Output& in = c.node().input(i);
  if (in.node->op_type() == "Shape" && in.node->input(0).shape().known_rank()) return in.node->input(0).shape();
  return Shape{-1, -1, -1, -1};
}

// Checks out_backprop against the forward output that input and filter give.
template <typename Ctx>
void check_out_backprop(const Ctx& c, const Window2D& w, const Shape& input, const Shape& filter, const Shape& dy) {
  if (dy.known_rank() && dy.rank() != 4) c.fail("out_backprop must be 4-dimensional: " + dy.to_string());
  const Shape expected{w.batch, w.out_h, w.out_w, w.out_depth};
  if (!dy.compatible_with(expected))
    c.fail("out_backprop must have shape " + expected.to_string() + " for input " + input.to_string() + " and filter " +
           filter.to_string() + ", got " + dy.to_string());
}

int64_t known_or(int64_t a, int64_t b) { return a >= 0 ? a : b; }
int64_t dim_or_unknown(const Shape& s, int i) { return s.known_rank() ? s.dim(i) : -1; }

void conv2d_backprop_input_shape(ShapeContext& c) {
  c.expect_floating(1);
  c.expect_dtype(2, c.input_dtype(1));
  const Shape input = sizes_input_shape(c, 0, "input_sizes");
  const Shape& filter = c.input_shape(1);
  const Shape& dy = c.input_shape(2);
  const Window2D w = conv_geometry(c, c.node().attrs(), input, filter);
  check_out_backprop(c, w, input, filter, dy);
  c.set_output(0, c.input_dtype(1), Shape{known_or(w.batch, dim_or_unknown(dy, 0)), w.in_h, w.in_w, w.depth});
}

void conv2d_backprop_filter_shape(ShapeContext& c) {
  c.expect_floating(0);
  c.expect_dtype(2, c.input_dtype(0));
  const Shape& input = c.input_shape(0);
  const Shape filter = sizes_input_shape(c, 1, "filter_sizes");
  const Shape& dy = c.input_shape(2);
  const Window2D w = conv_geometry(c, c.node().attrs(), input, filter);
  check_out_backprop(c, w, input, filter, dy);
  c.set_output(0, c.input_dtype(0), Shape{w.k_h, w.k_w, w.depth, known_or(w.out_depth, dim_or_unknown(dy, 3))});
}

// orig_output and grad must both be max_pool(orig_input)'s shape.
template <typename Ctx>
void check_pooled(const Ctx& c, const Window2D& w, const Shape& input, const Shape& s, const char* name) {
  const Shape expected{w.batch, w.out_h, w.out_w, w.depth};
  if (!s.compatible_with(expected))
    c.fail(std::string(name) + " must have shape " + expected.to_string() + " (pooled from orig_input " +
           input.to_string() + "), got " + s.to_string());
}

void max_pool_grad_shape(ShapeContext& c) {
  c.expect_floating(0);
  c.expect_dtype(1, c.input_dtype(0));
  c.expect_dtype(2, c.input_dtype(0));
  const Shape& input = c.input_shape(0);
  const Window2D w = pool_geometry(c, c.node().attrs(), input);
  check_pooled(c, w, input, c.input_shape(1), "orig_output");
  check_pooled(c, w, input, c.input_shape(2), "grad");
  c.set_output(0, c.input_dtype(0), input.known_rank() ? input : Shape{-1, -1, -1, -1});
}

void avg_pool_shape(ShapeContext& c) {
  c.expect_floating(0);
  const Window2D w = pool_geometry(c, c.node().attrs(), c.input_shape(0));
  c.set_output(0, c.input_dtype(0), Shape{w.batch, w.out_h, w.out_w, w.depth});
}

void avg_pool_grad_shape(ShapeContext& c) {
  c.expect_floating(1);
  const Shape input = sizes_input_shape(c, 0, "orig_input_shape");
  const Window2D w = pool_geometry(c, c.node().attrs(), input);
  check_pooled(c, w, input, c.input_shape(1), "grad");
  const Shape& g = c.input_shape(1);
  c.set_output(0, c.input_dtype(1),
               Shape{known_or(w.batch, dim_or_unknown(g, 0)), w.in_h, w.in_w, known_or(w.depth, dim_or_unknown(g, 3))});
}

// ---------------------------------------------------------------------------------------------
// Conv2D: float32 on oneDNN (ops/internal/dnnl.h); float64 here, im2col + GEMM. Each output pixel (n, oh, ow) is one row of the patch matrix
// [rows, kh*kw*depth] (laid out like the HWIO filter's first three axes), so that
// output[rows, out_depth] = patches x filter[kh*kw*depth, out_depth]. Rows go in blocks sized to
// keep a block's patches in cache; blocks are fixed by the geometry (not by the thread count),
// so results do not depend on how parallel_for splits them.

inline void gemm(int m, int n, int k, const float* a, const float* b, float* c) {
  blas::sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
inline void gemm(int m, int n, int k, const double* a, const double* b, double* c) {
  blas::dgemm(false, false, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
}
// C[m, n] = A[m, k] x B[n, k]^T (the backprop input's dy x filter^T).
inline void gemm_nt(int m, int n, int k, const float* a, const float* b, float* c) {
  blas::sgemm(false, true, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}
inline void gemm_nt(int m, int n, int k, const double* a, const double* b, double* c) {
  blas::dgemm(false, true, m, n, k, 1.0, a, k, b, k, 0.0, c, n);
}
// C[m, n] (+)= A[k, m]^T x B[k, n] (the backprop filter's patches^T x dy); accumulates when `add`.
inline void gemm_tn(int m, int n, int k, const float* a, const float* b, float* c, bool add) {
  blas::sgemm(true, false, m, n, k, 1.0f, a, m, b, n, add ? 1.0f : 0.0f, c, n);
}
inline void gemm_tn(int m, int n, int k, const double* a, const double* b, double* c, bool add) {
  blas::dgemm(true, false, m, n, k, 1.0, a, m, b, n, add ? 1.0 : 0.0, c, n);
}

// Writes the patch rows [r0, r1) into `patches`.
template <typename T>
void im2col(const Window2D& w, const T* in, int64_t r0, int64_t r1, T* patches) {
  const int64_t depth = w.depth, row_len = w.k_h * w.k_w * depth, kw_len = w.k_w * depth;
  const int64_t per_image = w.out_h * w.out_w;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / per_image, oh = (r % per_image) / w.out_w, ow = r % w.out_w;
    const int64_t ih0 = oh * w.stride_h - w.pad_top, iw0 = ow * w.stride_w - w.pad_left;
    // The filter columns that land inside the image form one contiguous run of the input row.
    const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(w.k_w, w.in_w - iw0);
    T* p = patches + (r - r0) * row_len;
    for (int64_t kh = 0; kh < w.k_h; ++kh, p += kw_len) {
      const int64_t ih = ih0 + kh;
      if (ih < 0 || ih >= w.in_h || kw_lo >= kw_hi) {
        std::fill(p, p + kw_len, T(0));
        continue;
      }
      std::fill(p, p + kw_lo * depth, T(0));
      std::memcpy(p + kw_lo * depth, in + ((n * w.in_h + ih) * w.in_w + iw0 + kw_lo) * depth,
                  sizeof(T) * (kw_hi - kw_lo) * depth);
      std::fill(p + kw_hi * depth, p + kw_len, T(0));
    }
  }
}

// The input already is the patch matrix for 1x1 stride-1 filters and for filters covering the
// whole (unpadded) image.
bool patches_are_input(const Window2D& w) {
  return (w.k_h == 1 && w.k_w == 1 && w.stride_h == 1 && w.stride_w == 1) ||
         (w.k_h == w.in_h && w.k_w == w.in_w && w.out_h == 1 && w.out_w == 1 && w.pad_top == 0 && w.pad_left == 0);
}

// Patch rows per block: about 1 MiB of patches, so that a block stays in cache.
template <typename T>
int64_t patch_block_rows(int64_t k) {
  constexpr int64_t kBlockBytes = 1 << 20;
  return std::clamp<int64_t>(kBlockBytes / (std::max<int64_t>(1, k) * int64_t(sizeof(T))), 64, 4096);
}

dnnl_kernels::ConvShape dnnl_shape(const Window2D& w) {
  return {w.batch, w.in_h,     w.in_w,     w.depth, w.k_h,   w.k_w,   w.out_depth,
          w.stride_h, w.stride_w, w.out_h, w.out_w, w.pad_top, w.pad_left};
}

template <typename T>
void conv2d_kernel(KernelContext& c) {
  const Tensor& input = c.input(0);
  const Tensor& filter = c.input(1);
  const Window2D w = conv_geometry(c, c.attrs(), input.shape(), filter.shape());
  Tensor& output = c.allocate_output(0, input.dtype(), Shape{w.batch, w.out_h, w.out_w, w.out_depth});
  const int64_t rows = w.batch * w.out_h * w.out_w, k = w.k_h * w.k_w * w.depth, n = w.out_depth;
  if (rows == 0 || n == 0) return;
  T* out = output.data<T>();
  if (k == 0) {
    std::fill(out, out + rows * n, T(0));
    return;
  }
  const T* in = input.data<T>();
  const T* f = filter.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    dnnl_kernels::conv2d_forward(c, dnnl_shape(w), in, f, out);
    return;
  }
  const bool direct = patches_are_input(w);
  const int64_t block = patch_block_rows<T>(k);
  const int64_t num_blocks = (rows + block - 1) / block;
  // ~16 flops per ns per core for the GEMM, plus the patch copy.
  const int64_t block_cost = std::max<int64_t>(1, block * k * (n / 8 + 1));
  Allocator* allocator = c.allocator();
  c.parallel_for(num_blocks, block_cost, [&](int64_t b, int64_t e) {
    Tensor scratch;
    T* patches = nullptr;
    if (!direct) {
      scratch = Tensor(input.dtype(), Shape{std::min(block, rows), k}, allocator);
      patches = scratch.data<T>();
    }
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t r0 = blk * block, r1 = std::min(rows, r0 + block);
      const T* a = in + r0 * k;
      if (!direct) {
        im2col(w, in, r0, r1, patches);
        a = patches;
      }
      gemm(static_cast<int>(r1 - r0), static_cast<int>(n), static_cast<int>(k), a, f, out + r0 * n);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Conv2DBackpropInput: col[rows, kh*kw*depth] = dy[rows, out_depth] x filter^T, then col2im adds
// each patch row back onto the input pixels it came from. Patches of neighbouring output pixels
// overlap, so images are the unit of parallelism (each image's rows run in order: deterministic);
// the direct cases have no overlap and split by row blocks.

// Adds the patch rows [r0, r1) of one image (row r = oh * out_w + ow) into that image's gradient.
template <typename T>
void col2im_add(const Window2D& w, const T* __restrict col, int64_t r0, int64_t r1, T* __restrict dx) {
  const int64_t depth = w.depth, kw_len = w.k_w * depth, row_len = w.k_h * kw_len;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t oh = r / w.out_w, ow = r % w.out_w;
    const int64_t ih0 = oh * w.stride_h - w.pad_top, iw0 = ow * w.stride_w - w.pad_left;
    const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(w.k_w, w.in_w - iw0);
    if (kw_lo >= kw_hi) continue;
    const int64_t len = (kw_hi - kw_lo) * depth;
    const T* p = col + (r - r0) * row_len + kw_lo * depth;
    for (int64_t kh = 0; kh < w.k_h; ++kh, p += kw_len) {
      const int64_t ih = ih0 + kh;
      if (ih < 0 || ih >= w.in_h) continue;
      T* d = dx + (ih * w.in_w + iw0 + kw_lo) * depth;
      for (int64_t i = 0; i < len; ++i) d[i] += p[i];
    }
  }
}

template <typename T>
void conv2d_backprop_input_kernel(KernelContext& c) {
  const Shape input_shape = sizes_from_tensor(c, c.input(0), "input_sizes");
  const Tensor& filter = c.input(1);
  const Tensor& dy = c.input(2);
  const Window2D w = conv_geometry(c, c.attrs(), input_shape, filter.shape());
  check_out_backprop(c, w, input_shape, filter.shape(), dy.shape());
  Tensor& dx_tensor = c.allocate_output(0, filter.dtype(), input_shape);
  T* dx = dx_tensor.data<T>();
  const int64_t k = w.k_h * w.k_w * w.depth, n = w.out_depth;
  const int64_t per_image = w.out_h * w.out_w, image_size = w.in_h * w.in_w * w.depth;
  const int64_t rows = w.batch * per_image;
  if (dx_tensor.num_elements() == 0) return;
  if (rows == 0 || n == 0 || k == 0) {
    std::fill(dx, dx + dx_tensor.num_elements(), T(0));
    return;
  }
  const T* g = dy.data<T>();
  const T* f = filter.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    dnnl_kernels::conv2d_backward_input(c, dnnl_shape(w), f, g, dx);
    return;
  }
  const int64_t block = patch_block_rows<T>(k);
  const int64_t block_cost = std::max<int64_t>(1, block * k * (n / 8 + 1));
  if (patches_are_input(w)) {
    // Each patch row is one input pixel (1x1) or one image (whole-image filter): write in place.
    const int64_t num_blocks = (rows + block - 1) / block;
    c.parallel_for(num_blocks, block_cost, [=](int64_t b, int64_t e) {
      for (int64_t blk = b; blk < e; ++blk) {
        const int64_t r0 = blk * block, r1 = std::min(rows, r0 + block);
        gemm_nt(static_cast<int>(r1 - r0), static_cast<int>(k), static_cast<int>(n), g + r0 * n, f, dx + r0 * k);
      }
    });
    return;
  }
  const int64_t image_block = std::min(block, per_image);
  Allocator* allocator = c.allocator();
  const DType dtype = filter.dtype();
  c.parallel_for(w.batch, std::max<int64_t>(1, per_image * k * (n / 8 + 2)), [&](int64_t b, int64_t e) {
    Tensor scratch(dtype, Shape{image_block, k}, allocator);
    T* col = scratch.data<T>();
    for (int64_t img = b; img < e; ++img) {
      T* dx_img = dx + img * image_size;
      std::fill(dx_img, dx_img + image_size, T(0));
      for (int64_t r0 = 0; r0 < per_image; r0 += image_block) {
        const int64_t r1 = std::min(per_image, r0 + image_block);
        gemm_nt(static_cast<int>(r1 - r0), static_cast<int>(k), static_cast<int>(n), g + (img * per_image + r0) * n, f,
                col);
        col2im_add(w, col, r0, r1, dx_img);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Conv2DBackpropFilter: dfilter[k, out_depth] = sum over patch rows of patches^T x dy. Blocks of
// rows go into a fixed number of groups (set by the geometry, not the thread count), each
// accumulated by GEMM into its own partial; partials are added in group order, so the result
// does not depend on how parallel_for splits the groups.

template <typename T>
void conv2d_backprop_filter_kernel(KernelContext& c) {
  const Tensor& input = c.input(0);
  const Shape filter_shape = sizes_from_tensor(c, c.input(1), "filter_sizes");
  const Tensor& dy = c.input(2);
  const Window2D w = conv_geometry(c, c.attrs(), input.shape(), filter_shape);
  check_out_backprop(c, w, input.shape(), filter_shape, dy.shape());
  Tensor& df_tensor = c.allocate_output(0, input.dtype(), filter_shape);
  T* df = df_tensor.data<T>();
  const int64_t k = w.k_h * w.k_w * w.depth, n = w.out_depth, size = k * n;
  const int64_t rows = w.batch * w.out_h * w.out_w;
  if (size == 0) return;
  if (rows == 0) {
    std::fill(df, df + size, T(0));
    return;
  }
  const T* in = input.data<T>();
  const T* g = dy.data<T>();
  if constexpr (std::is_same_v<T, float>) {
    dnnl_kernels::conv2d_backward_filter(c, dnnl_shape(w), in, g, df);
    return;
  }
  const bool direct = patches_are_input(w);
  const int64_t block = patch_block_rows<T>(k);
  const int64_t num_blocks = (rows + block - 1) / block;
  constexpr int64_t kMaxGroups = 16;
  const int64_t groups = std::min(num_blocks, kMaxGroups);
  Tensor partial_tensor;
  if (groups > 1) partial_tensor = Tensor(input.dtype(), Shape{groups - 1, size}, c.allocator());
  T* partial = groups > 1 ? partial_tensor.data<T>() : nullptr;
  Allocator* allocator = c.allocator();
  const int64_t group_cost = std::max<int64_t>(1, (rows / groups) * k * (n / 8 + 1));
  c.parallel_for(groups, group_cost, [&](int64_t b, int64_t e) {
    Tensor scratch;
    T* patches = nullptr;
    if (!direct) {
      scratch = Tensor(input.dtype(), Shape{std::min(block, rows), k}, allocator);
      patches = scratch.data<T>();
    }
    for (int64_t grp = b; grp < e; ++grp) {
      T* acc = grp == 0 ? df : partial + (grp - 1) * size;
      const int64_t blk_begin = grp * num_blocks / groups, blk_end = (grp + 1) * num_blocks / groups;
      for (int64_t blk = blk_begin; blk < blk_end; ++blk) {
        const int64_t r0 = blk * block, r1 = std::min(rows, r0 + block);
        const T* a = in + r0 * k;
        if (!direct) {
          im2col(w, in, r0, r1, patches);
          a = patches;
        }
        gemm_tn(static_cast<int>(k), static_cast<int>(n), static_cast<int>(r1 - r0), a, g + r0 * n, acc,
                blk != blk_begin);
      }
    }
  });
  if (groups > 1)
    c.parallel_for(size, groups, [=](int64_t b, int64_t e) {
      for (int64_t grp = 0; grp + 1 < groups; ++grp) {
        const T* p = partial + grp * size;
        for (int64_t i = b; i < e; ++i) df[i] += p[i];
      }
    });
}

// ---------------------------------------------------------------------------------------------
// MaxPool: for each output pixel, the max over the window's in-image positions of contiguous
// depth vectors. With TensorFlow's SAME split every window holds at least one real pixel, so
// the padding never wins.

template <typename T>
void max_pool_kernel(KernelContext& c) {
  const Tensor& input = c.input(0);
  const Window2D w = pool_geometry(c, c.attrs(), input.shape());
  Tensor& output = c.allocate_output(0, input.dtype(), Shape{w.batch, w.out_h, w.out_w, w.depth});
  const int64_t depth = w.depth;
  if (output.num_elements() == 0) return;
  const T* in = input.data<T>();
  T* out = output.data<T>();
  c.parallel_for(w.batch * w.out_h, w.out_w * w.k_h * w.k_w * depth, [=](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / w.out_h, oh = row % w.out_h;
      const int64_t ih0 = oh * w.stride_h - w.pad_top;
      const int64_t kh_lo = std::max<int64_t>(0, -ih0), kh_hi = std::min<int64_t>(w.k_h, w.in_h - ih0);
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const int64_t iw0 = ow * w.stride_w - w.pad_left;
        const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(w.k_w, w.in_w - iw0);
        T* o = out + (row * w.out_w + ow) * depth;
        std::fill(o, o + depth, std::numeric_limits<T>::lowest());
        for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
          for (int64_t kw = kw_lo; kw < kw_hi; ++kw) {
            const T* x = in + ((n * w.in_h + ih0 + kh) * w.in_w + iw0 + kw) * depth;
            for (int64_t d = 0; d < depth; ++d) o[d] = x[d] > o[d] ? x[d] : o[d];
          }
        }
      }
    }
  });
}

// MaxPoolGrad: each output's gradient goes to the first maximum of its window in row-major order
// (TensorFlow's CPU rule: the first in-window value is taken, later ones only if strictly
// greater). The argmax is found for a whole depth vector at once with selects, then scattered.
// Windows overlap when strides < ksize, so images are the unit of parallelism.

// One image. `arg` holds pixel indices as an integer as wide as T, so that the select loop
// vectorises with one lane width. Every size is copied into a local first: the stores to `arg`
// could otherwise alias the Window2D fields (also int64) and stop vectorisation.
template <typename T, typename Arg>
void max_pool_grad_image(const Window2D& win, const T* x, const T* g, T* dx, T* __restrict best, Arg* __restrict arg) {
  const int64_t depth = win.depth, in_h = win.in_h, in_w = win.in_w, out_h = win.out_h, out_w = win.out_w;
  const int64_t k_h = win.k_h, k_w = win.k_w, stride_h = win.stride_h, stride_w = win.stride_w;
  const int64_t pad_top = win.pad_top, pad_left = win.pad_left;
  std::fill(dx, dx + in_h * in_w * depth, T(0));
  for (int64_t oh = 0; oh < out_h; ++oh) {
    const int64_t ih0 = oh * stride_h - pad_top;
    const int64_t kh_lo = std::max<int64_t>(0, -ih0), kh_hi = std::min<int64_t>(k_h, in_h - ih0);
    for (int64_t ow = 0; ow < out_w; ++ow, g += depth) {
      const int64_t iw0 = ow * stride_w - pad_left;
      const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(k_w, in_w - iw0);
      if (kh_lo >= kh_hi || kw_lo >= kw_hi) continue;
      const Arg first = static_cast<Arg>((ih0 + kh_lo) * in_w + iw0 + kw_lo);
      std::copy(x + first * depth, x + (first + 1) * depth, best);
      std::fill(arg, arg + depth, first);
      for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
        for (int64_t kw = kw_lo; kw < kw_hi; ++kw) {
          const Arg pixel = static_cast<Arg>((ih0 + kh) * in_w + iw0 + kw);
          const T* v = x + pixel * depth;
          for (int64_t ch = 0; ch < depth; ++ch) {
            const bool greater = v[ch] > best[ch];
            best[ch] = greater ? v[ch] : best[ch];
            arg[ch] = greater ? pixel : arg[ch];
          }
        }
      }
      for (int64_t ch = 0; ch < depth; ++ch) dx[arg[ch] * depth + ch] += g[ch];
    }
  }
}

template <typename T>
void max_pool_grad_kernel(KernelContext& c) {
  const Tensor& input = c.input(0);
  const Window2D w = pool_geometry(c, c.attrs(), input.shape());
  check_pooled(c, w, input.shape(), c.input(1).shape(), "orig_output");
  check_pooled(c, w, input.shape(), c.input(2).shape(), "grad");
  Tensor& dx_tensor = c.allocate_output(0, input.dtype(), input.shape());
  if (dx_tensor.num_elements() == 0) return;
  const int64_t depth = w.depth, image_in = w.in_h * w.in_w * depth, image_out = w.out_h * w.out_w * depth;
  // Pixel indices fit in int32 for any image below 2^31 pixels; float32 uses them.
  using Arg = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  if (w.in_h * w.in_w > std::numeric_limits<Arg>::max())
    c.fail(ErrorCode::kUnimplemented, "images of more than 2^31 pixels are not supported");
  const T* in = input.data<T>();
  const T* grad = c.input(2).data<T>();
  T* dx = dx_tensor.data<T>();
  Allocator* allocator = c.allocator();
  c.parallel_for(w.batch, std::max<int64_t>(1, w.out_h * w.out_w * w.k_h * w.k_w * depth), [&](int64_t b, int64_t e) {
    Tensor best(input.dtype(), Shape{depth}, allocator), arg(dtype_of<Arg>, Shape{depth}, allocator);
    for (int64_t img = b; img < e; ++img)
      max_pool_grad_image(w, in + img * image_in, grad + img * image_out, dx + img * image_in, best.data<T>(),
                          arg.data<Arg>());
  });
}

// ---------------------------------------------------------------------------------------------
// AvgPool: for each output pixel, the sum over the window's in-image positions of contiguous
// depth vectors, times 1 / (their count). AvgPoolGrad: each output's gradient times that same
// 1 / count, added to every in-image position of its window; windows overlap when strides <
// ksize, so images are the unit of parallelism there.

template <typename T>
void avg_pool_kernel(KernelContext& c) {
  const Tensor& input = c.input(0);
  const Window2D w = pool_geometry(c, c.attrs(), input.shape());
  Tensor& output = c.allocate_output(0, input.dtype(), Shape{w.batch, w.out_h, w.out_w, w.depth});
  const int64_t depth = w.depth;
  if (output.num_elements() == 0) return;
  const T* in = input.data<T>();
  T* out = output.data<T>();
  c.parallel_for(w.batch * w.out_h, w.out_w * w.k_h * w.k_w * depth, [=](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / w.out_h, oh = row % w.out_h;
      const int64_t ih0 = oh * w.stride_h - w.pad_top;
      const int64_t kh_lo = std::max<int64_t>(0, -ih0), kh_hi = std::min<int64_t>(w.k_h, w.in_h - ih0);
      for (int64_t ow = 0; ow < w.out_w; ++ow) {
        const int64_t iw0 = ow * w.stride_w - w.pad_left;
        const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(w.k_w, w.in_w - iw0);
        T* __restrict o = out + (row * w.out_w + ow) * depth;
        std::fill(o, o + depth, T(0));
        for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
          for (int64_t kw = kw_lo; kw < kw_hi; ++kw) {
            const T* x = in + ((n * w.in_h + ih0 + kh) * w.in_w + iw0 + kw) * depth;
            for (int64_t d = 0; d < depth; ++d) o[d] += x[d];
          }
        }
        const int64_t count = std::max<int64_t>(0, kh_hi - kh_lo) * std::max<int64_t>(0, kw_hi - kw_lo);
        const T scale = count > 0 ? T(1) / static_cast<T>(count) : T(0);
        for (int64_t d = 0; d < depth; ++d) o[d] *= scale;
      }
    }
  });
}

template <typename T>
void avg_pool_grad_kernel(KernelContext& c) {
  const Shape input = sizes_from_tensor(c, c.input(0), "orig_input_shape");
  const Tensor& grad_t = c.input(1);
  const Window2D w = pool_geometry(c, c.attrs(), input);
  check_pooled(c, w, input, grad_t.shape(), "grad");
  Tensor& dx_tensor = c.allocate_output(0, grad_t.dtype(), input);
  if (dx_tensor.num_elements() == 0) return;
  const int64_t depth = w.depth, image_in = w.in_h * w.in_w * depth, image_out = w.out_h * w.out_w * depth;
  const T* grad = grad_t.data<T>();
  T* dx = dx_tensor.data<T>();
  c.parallel_for(w.batch, std::max<int64_t>(1, w.out_h * w.out_w * w.k_h * w.k_w * depth), [=](int64_t b, int64_t e) {
    for (int64_t img = b; img < e; ++img) {
      T* __restrict d_img = dx + img * image_in;
      const T* g = grad + img * image_out;
      std::fill(d_img, d_img + image_in, T(0));
      for (int64_t oh = 0; oh < w.out_h; ++oh) {
        const int64_t ih0 = oh * w.stride_h - w.pad_top;
        const int64_t kh_lo = std::max<int64_t>(0, -ih0), kh_hi = std::min<int64_t>(w.k_h, w.in_h - ih0);
        for (int64_t ow = 0; ow < w.out_w; ++ow, g += depth) {
          const int64_t iw0 = ow * w.stride_w - w.pad_left;
          const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(w.k_w, w.in_w - iw0);
          const int64_t count = std::max<int64_t>(0, kh_hi - kh_lo) * std::max<int64_t>(0, kw_hi - kw_lo);
          if (count == 0) continue;
          const T scale = T(1) / static_cast<T>(count);
          for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
            for (int64_t kw = kw_lo; kw < kw_hi; ++kw) {
              T* __restrict d = d_img + ((ih0 + kh) * w.in_w + iw0 + kw) * depth;
              for (int64_t ch = 0; ch < depth; ++ch) d[ch] += g[ch] * scale;
            }
          }
        }
      }
    }
  });
}

int64_t known(int64_t d) { return std::max<int64_t>(0, d); }

// ---------------------------------------------------------------------------------------------
// Gradient rules.

std::vector<Output> conv2d_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  const auto& strides = node.attrs().get<std::vector<int64_t>>("strides");
  const auto& padding = node.attrs().get<std::string>("padding");
  const Output input = node.input(0), filter = node.input(1);
  return {conv2d_backprop_input(scope, shape(scope, input), filter, grads[0], strides, padding),
          conv2d_backprop_filter(scope, input, shape(scope, filter), grads[0], strides, padding)};
}

std::vector<Output> max_pool_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  const AttrMap& attrs = node.attrs();
  return {max_pool_grad(scope, node.input(0), node.output(0), grads[0], attrs.get<std::vector<int64_t>>("ksize"),
                        attrs.get<std::vector<int64_t>>("strides"), attrs.get<std::string>("padding"))};
}

std::vector<Output> avg_pool_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  const AttrMap& attrs = node.attrs();
  return {avg_pool_grad(scope, shape(scope, node.input(0)), grads[0], attrs.get<std::vector<int64_t>>("ksize"),
                        attrs.get<std::vector<int64_t>>("strides"), attrs.get<std::string>("padding"))};
}

// 2 * N * OH * OW * KH * KW * IC * OC for a conv shape (out_backprop's elements times the taps
// of one output element); zero while anything is unknown.
int64_t conv_flops(const Shape& dy, const Shape& filter) {
  if (!dy.known_rank() || !filter.known_rank()) return 0;
  return 2 * known(dy.num_elements()) * known(filter.dim(0)) * known(filter.dim(1)) * known(filter.dim(2));
}

}  // namespace

void register_conv_ops(OpRegistry& registry) {
  registry.add({.name = "Conv2D",
                .num_inputs = 2,
                .shape = conv2d_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(0).dtype() == DType::kFloat64)
                        conv2d_kernel<double>(c);
                      else
                        conv2d_kernel<float>(c);
                    },
                .flops = [](const CostContext& c) { return conv_flops(c.output_shapes[0], c.input_shapes[1]); },
                .gradient = conv2d_gradient,
                .doc = "2-D convolution of an NHWC input with an HWIO filter; attrs strides "
                       "[1,sh,sw,1] and padding SAME or VALID."});
  registry.add({.name = "MaxPool",
                .num_inputs = 1,
                .shape = max_pool_shape,
                .kernel =
                    [](KernelContext& c) {
                      switch (c.input(0).dtype()) {
                        case DType::kFloat64:
                          return max_pool_kernel<double>(c);
                        case DType::kInt32:
                          return max_pool_kernel<int32_t>(c);
                        case DType::kInt64:
                          return max_pool_kernel<int64_t>(c);
                        default:
                          return max_pool_kernel<float>(c);
                      }
                    },
                .flops =
                    [](const CostContext& c) {
                      const auto& ksize = c.node.attrs().get<std::vector<int64_t>>("ksize");
                      // One comparison per window position of each output element.
                      return known(c.output_shapes[0].num_elements()) * ksize[1] * ksize[2];
                    },
                .gradient = max_pool_gradient,
                .doc = "Max pooling of an NHWC input over ksize [1,kh,kw,1] windows; attrs strides "
                       "[1,sh,sw,1] and padding SAME or VALID."});
  registry.add({.name = "AvgPool",
                .num_inputs = 1,
                .shape = avg_pool_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(0).dtype() == DType::kFloat64)
                        avg_pool_kernel<double>(c);
                      else
                        avg_pool_kernel<float>(c);
                    },
                .flops =
                    [](const CostContext& c) {
                      const auto& ksize = c.node.attrs().get<std::vector<int64_t>>("ksize");
                      // One add per window position of each output element, and the scale.
                      return known(c.output_shapes[0].num_elements()) * (ksize[1] * ksize[2] + 1);
                    },
                .gradient = avg_pool_gradient,
                .doc = "Average pooling of an NHWC input over ksize [1,kh,kw,1] windows; attrs strides "
                       "[1,sh,sw,1] and padding SAME or VALID (SAME averages the in-image positions only)."});
  registry.add({.name = "AvgPoolGrad",
                .num_inputs = 2,
                .shape = avg_pool_grad_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(1).dtype() == DType::kFloat64)
                        avg_pool_grad_kernel<double>(c);
                      else
                        avg_pool_grad_kernel<float>(c);
                    },
                .flops =
                    [](const CostContext& c) {
                      const auto& ksize = c.node.attrs().get<std::vector<int64_t>>("ksize");
                      // A multiply-add per window position of each gradient element.
                      return 2 * known(c.input_shapes[1].num_elements()) * ksize[1] * ksize[2];
                    },
                .not_differentiable = true,
                .doc = "Inputs (orig_input_shape, grad). AvgPool's gradient: each grad value divided by its "
                       "window's in-image count and added over the window; attrs as the forward AvgPool."});
  registry.add({.name = "Conv2DBackpropInput",
                .num_inputs = 3,
                .shape = conv2d_backprop_input_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(1).dtype() == DType::kFloat64)
                        conv2d_backprop_input_kernel<double>(c);
                      else
                        conv2d_backprop_input_kernel<float>(c);
                    },
                // The same multiply-adds as the forward conv.
                .flops = [](const CostContext& c) { return conv_flops(c.input_shapes[2], c.input_shapes[1]); },
                .not_differentiable = true,
                .doc = "Inputs (input_sizes, filter, out_backprop). Conv2D's gradient with respect to its "
                       "input, of shape input_sizes; attrs strides and padding as the forward Conv2D."});
  registry.add({.name = "Conv2DBackpropFilter",
                .num_inputs = 3,
                .shape = conv2d_backprop_filter_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(0).dtype() == DType::kFloat64)
                        conv2d_backprop_filter_kernel<double>(c);
                      else
                        conv2d_backprop_filter_kernel<float>(c);
                    },
                .flops = [](const CostContext& c) { return conv_flops(c.input_shapes[2], c.output_shapes[0]); },
                .not_differentiable = true,
                .doc = "Inputs (input, filter_sizes, out_backprop). Conv2D's gradient with respect to its "
                       "filter, of shape filter_sizes; attrs strides and padding as the forward Conv2D."});
  registry.add({.name = "MaxPoolGrad",
                .num_inputs = 3,
                .shape = max_pool_grad_shape,
                .kernel =
                    [](KernelContext& c) {
                      if (c.input(0).dtype() == DType::kFloat64)
                        max_pool_grad_kernel<double>(c);
                      else
                        max_pool_grad_kernel<float>(c);
                    },
                .flops =
                    [](const CostContext& c) {
                      const auto& ksize = c.node.attrs().get<std::vector<int64_t>>("ksize");
                      // The forward's comparisons to find each window's maximum, plus one add.
                      return known(c.input_shapes[2].num_elements()) * (ksize[1] * ksize[2] + 1);
                    },
                .not_differentiable = true,
                .doc = "Inputs (orig_input, orig_output, grad). MaxPool's gradient: each grad value added "
                       "at the first maximum of its window; attrs as the forward MaxPool."});
}

}  // namespace stepscope
