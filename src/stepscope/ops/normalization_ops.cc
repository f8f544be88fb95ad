#include "stepscope/ops/normalization_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

namespace {

Output empty_like_dtype(const Scope& scope, DType dtype, const char* name, CallSite site) {
  return constant(scope.with_op_name(name), Tensor(dtype, Shape{0}), site);
}

}  // namespace

FusedBatchNormOutputs fused_batch_norm(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                                       Output variance, double epsilon, bool is_training, CallSite site) {
  if (!mean) mean = empty_like_dtype(scope, x.dtype(), "FusedBatchNorm/mean", site);
  if (!variance) variance = empty_like_dtype(scope, x.dtype(), "FusedBatchNorm/variance", site);
  Node* n = scope.add_node(op_def("FusedBatchNorm"), {x, scale, offset, mean, variance},
                           {{"epsilon", epsilon}, {"is_training", is_training}}, site);
  return {n->output(0), n->output(1), n->output(2), n->output(3), n->output(4)};
}

FusedBatchNormGradOutputs fused_batch_norm_grad(const Scope& scope, Output y_backprop, Output x, Output scale,
                                                Output reserve_space_1, Output reserve_space_2, double epsilon,
                                                bool is_training, CallSite site) {
  Node* n = scope.add_node(op_def("FusedBatchNormGrad"), {y_backprop, x, scale, reserve_space_1, reserve_space_2},
                           {{"epsilon", epsilon}, {"is_training", is_training}}, site);
  return {n->output(0), n->output(1), n->output(2)};
}

namespace {

template <typename F>
void dispatch_float(DType dtype, F&& f) {
  if (dtype == DType::kFloat64)
    f(double{});
  else
    f(float{});
}

int64_t known(int64_t d) { return std::max<int64_t>(0, d); }

// ---------------------------------------------------------------------------------------------
// Shapes. x is [..., channels] of rank 4 (NHWC) or 2; every other input is a vector.

template <typename Ctx>
void check_x(const Ctx& c, const Shape& x, const char* name) {
  if (x.known_rank() && x.rank() != 4 && x.rank() != 2)
    c.fail(std::string(name) + " must be 4-dimensional (NHWC) or 2-dimensional ([batch, channels]), got " +
           x.to_string());
}

// A [channels] vector input; `allow_empty`: [0] is accepted too (training's unused mean/variance).
template <typename Ctx>
void check_channel_vector(const Ctx& c, const Shape& v, const char* name, int64_t channels, const Shape& x,
                          bool allow_empty) {
  if (!v.known_rank()) return;
  const bool ok =
      v.rank() == 1 && (v.dim(0) < 0 || channels < 0 || v.dim(0) == channels || (allow_empty && v.dim(0) == 0));
  if (!ok)
    c.fail(std::string(name) + " must be a vector of " + (channels >= 0 ? std::to_string(channels) : "channels") +
           " elements (the last dimension of x " + x.to_string() + ")" + (allow_empty ? " or empty" : "") + ", got " +
           v.to_string());
}

int64_t channels_of(const Shape& x) { return x.known_rank() ? x.dim(-1) : -1; }

void fused_batch_norm_shape(ShapeContext& c) {
  c.expect_floating(0);
  for (int i = 1; i < 5; ++i) c.expect_dtype(i, c.input_dtype(0));
  const bool training = c.node().attrs().get<bool>("is_training");
  const Shape& x = c.input_shape(0);
  check_x(c, x, "x");
  int64_t channels = channels_of(x);
  if (channels < 0 && c.input_shape(1).known_rank() && c.input_shape(1).rank() == 1) channels = c.input_shape(1).dim(0);
  check_channel_vector(c, c.input_shape(1), "scale", channels, x, false);
  check_channel_vector(c, c.input_shape(2), "offset", channels, x, false);
  check_channel_vector(c, c.input_shape(3), "mean", channels, x, training);
  check_channel_vector(c, c.input_shape(4), "variance", channels, x, training);
  if (c.node().attrs().get<double>("epsilon") < 0)
    c.fail("epsilon must be >= 0, got " + std::to_string(c.node().attrs().get<double>("epsilon")));
  const DType d = c.input_dtype(0);
  c.set_output(0, d, x);
  for (int i = 1; i < 5; ++i) c.set_output(i, d, Shape{channels});
}

void fused_batch_norm_grad_shape(ShapeContext& c) {
  c.expect_floating(0);
  for (int i = 1; i < 5; ++i) c.expect_dtype(i, c.input_dtype(0));
  const Shape& dy = c.input_shape(0);
  const Shape& x = c.input_shape(1);
  check_x(c, x, "x");
  check_x(c, dy, "y_backprop");
  if (!dy.compatible_with(x))
    c.fail("y_backprop and x must have the same shape: " + dy.to_string() + " vs " + x.to_string());
  int64_t channels = channels_of(x);
  if (channels < 0) channels = channels_of(dy);
  check_channel_vector(c, c.input_shape(2), "scale", channels, x, false);
  check_channel_vector(c, c.input_shape(3), "reserve_space_1", channels, x, false);
  check_channel_vector(c, c.input_shape(4), "reserve_space_2", channels, x, false);
  const DType d = c.input_dtype(0);
  c.set_output(0, d, x.known_rank() ? x : dy);
  c.set_output(1, d, Shape{channels});
  c.set_output(2, d, Shape{channels});
}

// ---------------------------------------------------------------------------------------------
// Kernels. x is viewed as [rows, channels]; per-channel sums run over rows. Rows go in groups
// whose number depends on the size only (never on the thread count), each accumulated into its
// own partial [K, channels] by vectorisable loops over the channels; partials are then added in
// group order, so results do not depend on how parallel_for splits the work.

// out[k * channels + j] = sum over rows of what row_fn(r0, r1, acc) adds into acc (K rows of
// `channels`, zeroed first).
template <typename T, int K, typename RowFn>
void reduce_rows(const KernelContext& c, int64_t rows, int64_t channels, T* out, RowFn row_fn) {
  const int64_t width = K * channels;
  constexpr int64_t kGroupElements = 1 << 15, kMaxGroups = 64;
  const int64_t groups =
      std::clamp<int64_t>(rows * channels / kGroupElements, 1, std::max<int64_t>(1, std::min(rows, kMaxGroups)));
  if (groups <= 1) {
    std::fill(out, out + width, T(0));
    row_fn(int64_t{0}, rows, out);
    return;
  }
  Tensor partial_tensor(dtype_of<T>, Shape{groups, width}, c.allocator());
  T* partial = partial_tensor.data<T>();
  c.parallel_for(groups, rows / groups * channels * 2, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      T* acc = partial + g * width;
      std::fill(acc, acc + width, T(0));
      row_fn(g * rows / groups, (g + 1) * rows / groups, acc);
    }
  });
  std::copy(partial, partial + width, out);
  for (int64_t g = 1; g < groups; ++g) {
    const T* p = partial + g * width;
    for (int64_t j = 0; j < width; ++j) out[j] += p[j];
  }
}

// y[r, j] = x[r, j] * a[j] + b[j].
template <typename T>
void scale_shift(const KernelContext& c, const T* x, const T* a, const T* b, int64_t rows, int64_t channels, T* y) {
  c.parallel_for(rows, channels, [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * channels;
      T* yr = y + r * channels;
      for (int64_t j = 0; j < channels; ++j) yr[j] = xr[j] * a[j] + b[j];
    }
  });
}

template <typename T>
void fused_batch_norm_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const bool training = c.attrs().get<bool>("is_training");
  const T epsilon = static_cast<T>(c.attrs().get<double>("epsilon"));
  check_x(c, x.shape(), "x");
  const int64_t channels = x.dim(-1);
  for (int i = 1; i < 5; ++i) {
    static const char* const kNames[] = {"", "scale", "offset", "mean", "variance"};
    check_channel_vector(c, c.input(i).shape(), kNames[i], channels, x.shape(), training && i >= 3);
  }
  const int64_t rows = channels == 0 ? 0 : x.num_elements() / channels;
  Tensor& y_t = c.allocate_output(0, x.dtype(), x.shape());
  T* outs[4];
  for (int i = 1; i < 5; ++i) outs[i - 1] = c.allocate_output(i, x.dtype(), Shape{channels}).template data<T>();
  if (channels == 0) return;
  T* mean = outs[2];  // reserve_space_1
  T* var = outs[3];   // reserve_space_2
  const T* in = x.data<T>();
  if (training) {
    const T inv_n = rows > 0 ? T(1) / static_cast<T>(rows) : T(0);
    reduce_rows<T, 1>(c, rows, channels, mean, [=](int64_t r0, int64_t r1, T* acc) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = in + r * channels;
        for (int64_t j = 0; j < channels; ++j) acc[j] += xr[j];
      }
    });
    for (int64_t j = 0; j < channels; ++j) mean[j] *= inv_n;
    // Two passes (mean, then centred squares): no cancellation for data far from zero.
    reduce_rows<T, 1>(c, rows, channels, var, [=](int64_t r0, int64_t r1, T* acc) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = in + r * channels;
        for (int64_t j = 0; j < channels; ++j) {
          const T d = xr[j] - mean[j];
          acc[j] += d * d;
        }
      }
    });
    for (int64_t j = 0; j < channels; ++j) var[j] *= inv_n;
    const T adjust = rows > 1 ? static_cast<T>(rows) / static_cast<T>(rows - 1) : T(1);
    for (int64_t j = 0; j < channels; ++j) {
      outs[0][j] = mean[j];
      outs[1][j] = var[j] * adjust;
    }
  } else {
    const T* m = c.input(3).data<T>();
    const T* v = c.input(4).data<T>();
    for (int64_t j = 0; j < channels; ++j) {
      outs[0][j] = mean[j] = m[j];
      outs[1][j] = var[j] = v[j];
    }
  }
  // y = x * a + b with a = scale / sqrt(var + eps), b = offset - mean * a.
  Tensor ab(x.dtype(), Shape{2, channels}, c.allocator());
  T* a = ab.data<T>();
  T* b = a + channels;
  const T* scale = c.input(1).data<T>();
  const T* offset = c.input(2).data<T>();
  for (int64_t j = 0; j < channels; ++j) {
    a[j] = scale[j] / std::sqrt(var[j] + epsilon);
    b[j] = offset[j] - mean[j] * a[j];
  }
  scale_shift(c, in, a, b, rows, channels, y_t.data<T>());
}

template <typename T>
void fused_batch_norm_grad_kernel(KernelContext& c) {
  const Tensor& dy = c.input(0);
  const Tensor& x = c.input(1);
  const bool training = c.attrs().get<bool>("is_training");
  const T epsilon = static_cast<T>(c.attrs().get<double>("epsilon"));
  check_x(c, x.shape(), "x");
  if (dy.shape() != x.shape())
    c.fail("y_backprop and x must have the same shape: " + dy.shape().to_string() + " vs " + x.shape().to_string());
  const int64_t channels = x.dim(-1);
  check_channel_vector(c, c.input(2).shape(), "scale", channels, x.shape(), false);
  check_channel_vector(c, c.input(3).shape(), "reserve_space_1", channels, x.shape(), false);
  check_channel_vector(c, c.input(4).shape(), "reserve_space_2", channels, x.shape(), false);
  const int64_t rows = channels == 0 ? 0 : x.num_elements() / channels;
  T* dx = c.allocate_output(0, x.dtype(), x.shape()).template data<T>();
  T* dscale = c.allocate_output(1, x.dtype(), Shape{channels}).template data<T>();
  T* doffset = c.allocate_output(2, x.dtype(), Shape{channels}).template data<T>();
  if (channels == 0) return;
  const T* g = dy.data<T>();
  const T* in = x.data<T>();
  const T* scale = c.input(2).data<T>();
  const T* mean = c.input(3).data<T>();
  const T* var = c.input(4).data<T>();
  // sums[0] = sum(dy), sums[1] = sum(dy * (x - mean)), per channel.
  Tensor work(x.dtype(), Shape{5, channels}, c.allocator());
  T* sums = work.data<T>();
  reduce_rows<T, 2>(c, rows, channels, sums, [=](int64_t r0, int64_t r1, T* acc) {
    T* __restrict s0 = acc;
    T* __restrict s1 = acc + channels;
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * channels;
      const T* xr = in + r * channels;
      for (int64_t j = 0; j < channels; ++j) {
        s0[j] += gr[j];
        s1[j] += gr[j] * (xr[j] - mean[j]);
      }
    }
  });
  // dx = k1 * dy + k2 * x + k3 per channel (one fused multiply-add pass).
  T* k1 = sums + 2 * channels;
  T* k2 = k1 + channels;
  T* k3 = k2 + channels;
  const T inv_n = rows > 0 ? T(1) / static_cast<T>(rows) : T(0);
  for (int64_t j = 0; j < channels; ++j) {
    const T inv = T(1) / std::sqrt(var[j] + epsilon);
    doffset[j] = sums[j];
    dscale[j] = sums[channels + j] * inv;
    k1[j] = scale[j] * inv;
    if (training) {
      // dx = k1 * (dy - mean(dy) - (x - mu) * inv^2 * mean(dy * (x - mu)))
      const T c2 = inv * inv * sums[channels + j] * inv_n;
      k2[j] = -k1[j] * c2;
      k3[j] = k1[j] * (c2 * mean[j] - sums[j] * inv_n);
    } else {
      k2[j] = T(0);
      k3[j] = T(0);
    }
  }
  c.parallel_for(rows, channels * 2, [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * channels;
      const T* xr = in + r * channels;
      T* o = dx + r * channels;
      for (int64_t j = 0; j < channels; ++j) o[j] = k1[j] * gr[j] + (k2[j] * xr[j] + k3[j]);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Gradient rule and costs.

std::vector<Output> fused_batch_norm_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  for (size_t i = 1; i < grads.size(); ++i)
    if (grads[i])
      throw UnimplementedError(
          node_error_message(node, "the gradient of output " + std::to_string(i) +
                                       " (a batch statistic) is not implemented; differentiate output 0 (y)"));
  if (!grads[0]) return {Output{}, Output{}, Output{}, Output{}, Output{}};
  const AttrMap& attrs = node.attrs();
  FusedBatchNormGradOutputs g =
      fused_batch_norm_grad(scope, grads[0], node.input(0), node.input(1), node.output(3), node.output(4),
                            attrs.get<double>("epsilon"), attrs.get<bool>("is_training"));
  return {g.x_backprop, g.scale_backprop, g.offset_backprop, Output{}, Output{}};
}

// Training: the mean (1 add), the centred squares (3), y = x * a + b (2) per element.
// Inference: y = x * a + b (2). Per channel work is negligible.
int64_t fused_batch_norm_flops(const CostContext& c) {
  const int64_t n = known(c.input_shapes[0].num_elements());
  return (c.node.attrs().get<bool>("is_training") ? 6 : 2) * n;
}

// The two sums (sub, mul, 2 adds) and dx = k1 * dy + k2 * x + k3 (4) per element.
int64_t fused_batch_norm_grad_flops(const CostContext& c) { return 8 * known(c.input_shapes[1].num_elements()); }

}  // namespace

void register_normalization_ops(OpRegistry& registry) {
  registry.add({.name = "FusedBatchNorm",
                .num_inputs = 5,
                .num_outputs = 5,
                .shape = fused_batch_norm_shape,
                .kernel =
                    [](KernelContext& c) {
                      dispatch_float(c.input(0).dtype(), [&](auto t) { fused_batch_norm_kernel<decltype(t)>(c); });
                    },
                .flops = fused_batch_norm_flops,
                .gradient = fused_batch_norm_gradient,
                .doc = "Inputs (x [N,H,W,C] or [N,C], scale, offset, mean, variance [C]); attrs epsilon, "
                       "is_training. Outputs y, batch_mean, batch_variance (unbiased in training), "
                       "reserve_space_1 (mean), reserve_space_2 (biased variance): TensorFlow 1.x semantics."});
  registry.add({.name = "FusedBatchNormGrad",
                .num_inputs = 5,
                .num_outputs = 3,
                .shape = fused_batch_norm_grad_shape,
                .kernel =
                    [](KernelContext& c) {
                      dispatch_float(c.input(0).dtype(), [&](auto t) { fused_batch_norm_grad_kernel<decltype(t)>(c); });
                    },
                .flops = fused_batch_norm_grad_flops,
                .not_differentiable = true,
                .doc = "Inputs (y_backprop, x, scale, reserve_space_1, reserve_space_2); attrs epsilon, "
                       "is_training. Outputs x_backprop, scale_backprop, offset_backprop: FusedBatchNorm's "
                       "gradient."});
}

}  // namespace stepscope
