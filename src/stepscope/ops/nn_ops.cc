#include "stepscope/ops/nn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/internal/vector_math.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

Output relu(const Scope& scope, Output features, CallSite site) {
  return scope.add_node(op_def("Relu"), {features}, {}, site)->output(0);
}

Output bias_add(const Scope& scope, Output value, Output bias, CallSite site) {
  return scope.add_node(op_def("BiasAdd"), {value, bias}, {}, site)->output(0);
}

Output softmax(const Scope& scope, Output logits, CallSite site) {
  return scope.add_node(op_def("Softmax"), {logits}, {}, site)->output(0);
}

Output log_softmax(const Scope& scope, Output logits, CallSite site) {
  return scope.add_node(op_def("LogSoftmax"), {logits}, {}, site)->output(0);
}

// The raw ops take (features, labels) like TensorFlow's; the builders take TF's keyword order.
Output sparse_softmax_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits, CallSite site) {
  return scope.add_node(op_def("SparseSoftmaxCrossEntropyWithLogits"), {logits, labels}, {}, site)->output(0);
}

Output softmax_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits, CallSite site) {
  return scope.add_node(op_def("SoftmaxCrossEntropyWithLogits"), {logits, labels}, {}, site)->output(0);
}

Output sigmoid_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits, CallSite site) {
  return scope.add_node(op_def("SigmoidCrossEntropyWithLogits"), {logits, labels}, {}, site)->output(0);
}

Output relu_grad(const Scope& scope, Output gradients, Output features, CallSite site) {
  return scope.add_node(op_def("ReluGrad"), {gradients, features}, {}, site)->output(0);
}

Output bias_add_grad(const Scope& scope, Output out_backprop, CallSite site) {
  return scope.add_node(op_def("BiasAddGrad"), {out_backprop}, {}, site)->output(0);
}

Output softmax_grad(const Scope& scope, Output gradients, Output softmax, CallSite site) {
  return scope.add_node(op_def("SoftmaxGrad"), {gradients, softmax}, {}, site)->output(0);
}

Output log_softmax_grad(const Scope& scope, Output gradients, Output log_softmax, CallSite site) {
  return scope.add_node(op_def("LogSoftmaxGrad"), {gradients, log_softmax}, {}, site)->output(0);
}

Output scale_rows(const Scope& scope, Output scale, Output x, CallSite site) {
  return scope.add_node(op_def("ScaleRows"), {scale, x}, {}, site)->output(0);
}

namespace {

template <typename F>
void dispatch_float(DType dtype, F&& f) {
  if (dtype == DType::kFloat64)
    f(double{});
  else
    f(float{});
}

// float32, float64, int32, int64: the dtypes TensorFlow's CPU Relu and BiasAdd accept that we have.
template <typename F>
void dispatch_real(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    default:
      return f(float{});
  }
}

void expect_real(const ShapeContext& c, int i) {
  DType d = c.input_dtype(i);
  if (d != DType::kFloat32 && d != DType::kFloat64 && d != DType::kInt32 && d != DType::kInt64)
    c.fail("input " + std::to_string(i) + " must be float32, float64, int32 or int64, got " +
           std::string(dtype_name(d)));
}

int64_t known_elements(const Shape& s) { return std::max<int64_t>(0, s.num_elements()); }

// Merges two possibly unknown (-1) dims; sets *ok to false when both are known and differ.
int64_t merge_dim(int64_t a, int64_t b, bool* ok) {
  if (a >= 0 && b >= 0 && a != b) *ok = false;
  return a >= 0 ? a : b;
}

// ---------------------------------------------------------------------------------------------
// Kernels. Rows are the last axis; each row is independent, so parallel_for splits over rows
// and results do not depend on the split.

template <typename T>
void relu_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  Tensor& y = c.allocate_output(0, x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  c.parallel_for(x.num_elements(), 1, [=](int64_t b, int64_t e) {
    // `in < 0 ? 0 : in` rather than max(in, 0): NaN must come out as NaN, like TensorFlow.
    for (int64_t i = b; i < e; ++i) out[i] = in[i] < T(0) ? T(0) : in[i];
  });
}

std::string bias_shape_error(const Shape& bias, const Shape& value) {
  return "Must provide as many biases as the last dimension of the input tensor: " + bias.to_string() + " vs. " +
         value.to_string();
}

template <typename T>
void bias_add_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& bias = c.input(1);
  if (x.rank() < 2) c.fail("Input tensor must be at least 2D: " + x.shape().to_string());
  if (bias.rank() != 1) c.fail("Biases must be 1D: " + bias.shape().to_string());
  const int64_t channels = bias.dim(0);
  if (x.dim(-1) != channels) c.fail(bias_shape_error(bias.shape(), x.shape()));
  Tensor& y = c.allocate_output(0, x.dtype(), x.shape());
  if (channels == 0) return;
  const T* in = x.data<T>();
  const T* bb = bias.data<T>();
  T* out = y.data<T>();
  c.parallel_for(x.num_elements() / channels, channels, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = in + r * channels;
      T* yr = out + r * channels;
      for (int64_t j = 0; j < channels; ++j) yr[j] = xr[j] + bb[j];
    }
  });
}

template <typename T>
T row_max(const T* x, int64_t n) {
  T m = x[0];
  for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// e^x: the vectorisable float version (ops/internal/vector_math.h), libm's for double.
template <typename T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vector_math::exp(x);
  else
    return std::exp(x);
}

// y = exp(x - max) for the row; returns the sum of y. Two loops: the first vectorises, the
// second keeps the sum's order (and so its bits) fixed.
template <typename T>
T exp_shifted(const T* x, T* __restrict y, int64_t n, T max) {
  for (int64_t j = 0; j < n; ++j) y[j] = exp_of(x[j] - max);
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += y[j];
  return sum;
}

// Softmax and LogSoftmax share everything but the row function.
template <typename T, bool kLog>
void softmax_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() < 1) c.fail("logits must have >= 1 dimension, got " + x.shape().to_string());
  Tensor& y = c.allocate_output(0, x.dtype(), x.shape());
  const int64_t n = x.dim(-1);
  if (n == 0 || x.num_elements() == 0) return;
  const T* in = x.data<T>();
  T* out = y.data<T>();
  c.parallel_for(x.num_elements() / n, 10 * n, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = in + r * n;
      T* yr = out + r * n;
      const T m = row_max(xr, n);
      const T sum = exp_shifted(xr, yr, n, m);
      if constexpr (kLog) {
        // (x - max) - log(sum): subtracting the max first keeps large logits exact.
        const T log_sum = std::log(sum);
        for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) - log_sum;
      } else {
        const T inv = T(1) / sum;
        for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
      }
    }
  });
}

// TensorFlow's Tensor::SummarizeValue for a vector: values separated by spaces.
template <typename L>
std::string summarize_labels(const L* labels, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += std::to_string(labels[i]);
  }
  return s;
}

template <typename T, typename L>
void sparse_xent_kernel(KernelContext& c) {
  const Tensor& logits = c.input(0);
  const Tensor& labels = c.input(1);
  if (logits.rank() != 2) c.fail("logits must be 2-D, but got shape " + logits.shape().to_string());
  if (labels.rank() != 1) c.fail("labels must be 1-D, but got shape " + labels.shape().to_string());
  if (logits.dim(0) != labels.dim(0))
    c.fail("logits and labels must have the same first dimension, got logits shape " + logits.shape().to_string() +
           " and labels shape " + labels.shape().to_string());
  const int64_t batch = logits.dim(0), classes = logits.dim(1);
  if (classes == 0) c.fail("Must have at least one class, but got logits shape " + logits.shape().to_string());
  const L* lab = labels.data<L>();
  if (batch > 0) {
    // Like TensorFlow: report the smallest label if it is negative, else the largest.
    auto [lo, hi] = std::minmax_element(lab, lab + batch);
    if (*lo < 0 || *hi >= classes) {
      const int64_t bad = *lo < 0 ? *lo : *hi;
      c.fail("Received a label value of " + std::to_string(bad) + " which is outside the valid range of [0, " +
             std::to_string(classes) + ").  Label values: " + summarize_labels(lab, batch));
    }
  }
  T* loss = c.allocate_output(0, logits.dtype(), Shape{batch}).template data<T>();
  T* backprop = c.allocate_output(1, logits.dtype(), logits.shape()).template data<T>();
  const T* in = logits.data<T>();
  c.parallel_for(batch, 12 * classes, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = in + r * classes;
      T* br = backprop + r * classes;
      const int64_t label = lab[r];
      const T m = row_max(xr, classes);
      const T sum = exp_shifted(xr, br, classes, m);
      const T inv = T(1) / sum;
      for (int64_t j = 0; j < classes; ++j) br[j] *= inv;
      br[label] -= T(1);
      loss[r] = std::log(sum) - (xr[label] - m);
    }
  });
}

template <typename T>
void xent_kernel(KernelContext& c) {
  const Tensor& logits = c.input(0);
  const Tensor& labels = c.input(1);
  if (logits.shape() != labels.shape())
    c.fail("logits and labels must be same size: logits_size=" + logits.shape().to_string() +
           " labels_size=" + labels.shape().to_string());
  if (logits.rank() != 2) c.fail("logits must be 2-dimensional, got shape " + logits.shape().to_string());
  const int64_t batch = logits.dim(0), classes = logits.dim(1);
  T* loss = c.allocate_output(0, logits.dtype(), Shape{batch}).template data<T>();
  T* backprop = c.allocate_output(1, logits.dtype(), logits.shape()).template data<T>();
  if (classes == 0) {
    std::fill(loss, loss + batch, T(0));
    return;
  }
  const T* in = logits.data<T>();
  const T* lab = labels.data<T>();
  c.parallel_for(batch, 14 * classes, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = in + r * classes;
      const T* lr = lab + r * classes;
      T* br = backprop + r * classes;
      const T m = row_max(xr, classes);
      const T sum = exp_shifted(xr, br, classes, m);
      const T inv = T(1) / sum, log_sum = std::log(sum);
      // loss = sum(labels * (log(sum) - (x - max))), as TensorFlow computes it.
      T l = 0;
      for (int64_t j = 0; j < classes; ++j) {
        l += lr[j] * (log_sum - (xr[j] - m));
        br[j] = br[j] * inv - lr[j];
      }
      loss[r] = l;
    }
  });
}

// Elementwise: loss = max(x, 0) - x * z + log1p(exp(-|x|)), backprop = sigmoid(x) - z, where
// sigmoid(x) comes from the same e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) otherwise.
template <typename T>
void sigmoid_xent_kernel(KernelContext& c) {
  const Tensor& logits = c.input(0);
  const Tensor& labels = c.input(1);
  if (logits.shape() != labels.shape())
    c.fail("logits and labels must have the same shape: logits " + logits.shape().to_string() + " vs labels " +
           labels.shape().to_string());
  T* loss = c.allocate_output(0, logits.dtype(), logits.shape()).template data<T>();
  T* backprop = c.allocate_output(1, logits.dtype(), logits.shape()).template data<T>();
  const T* xp = logits.data<T>();
  const T* zp = labels.data<T>();
  c.parallel_for(logits.num_elements(), 20, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T x = xp[i], z = zp[i];
      const T ex = exp_of(-std::abs(x));
      const T inv = T(1) / (T(1) + ex);
      loss[i] = (x > T(0) ? x : T(0)) - x * z + std::log1p(ex);
      backprop[i] = (x >= T(0) ? inv : ex * inv) - z;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Backward kernels.

template <typename T>
void relu_grad_kernel(KernelContext& c) {
  const Tensor& g = c.input(0);
  const Tensor& f = c.input(1);
  if (g.shape() != f.shape())
    c.fail("gradients and features must have the same shape: " + g.shape().to_string() + " vs " +
           f.shape().to_string());
  Tensor& y = c.allocate_output(0, g.dtype(), g.shape());
  const T* gp = g.data<T>();
  const T* fp = f.data<T>();
  T* out = y.data<T>();
  c.parallel_for(g.num_elements(), 1, [=](int64_t b, int64_t e) {
    if constexpr (std::is_floating_point_v<T>) {
      // TensorFlow multiplies, gradients * (features > 0): where the unit is off that is 0, but
      // NaN for a NaN or infinite gradient, which check_numerics should still see. Written as
      // selects, without conditional arithmetic, so that the loop vectorises.
      constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
      for (int64_t i = b; i < e; ++i) {
        const T gi = gp[i];
        const T off = std::abs(gi) <= std::numeric_limits<T>::max() ? T(0) : kNaN;
        out[i] = fp[i] > T(0) ? gi : off;
      }
    } else {
      for (int64_t i = b; i < e; ++i) out[i] = fp[i] > T(0) ? gp[i] : T(0);
    }
  });
}

// Sums rows [r0, r1) of the [rows, channels] matrix `in` into acc (which it overwrites).
template <typename T>
void sum_rows(const T* in, int64_t r0, int64_t r1, int64_t channels, T* acc) {
  std::fill(acc, acc + channels, T(0));
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = in + r * channels;
    for (int64_t j = 0; j < channels; ++j) acc[j] += x[j];
  }
}

template <typename T>
void bias_add_grad_kernel(KernelContext& c) {
  const Tensor& g = c.input(0);
  if (g.rank() < 2) c.fail("Input tensor must be at least 2D: " + g.shape().to_string());
  const int64_t channels = g.dim(-1);
  T* out = c.allocate_output(0, g.dtype(), Shape{channels}).template data<T>();
  if (channels == 0) return;
  const int64_t rows = g.num_elements() / channels;
  const T* in = g.data<T>();
  // Rows go in groups whose number depends on the size only (never on the thread count), each
  // summed into its own partial row; the partials are then added in group order. So the float
  // result is the same however parallel_for splits the work.
  constexpr int64_t kGroupElements = 1 << 15, kMaxGroups = 64;
  const int64_t groups = std::clamp<int64_t>(g.num_elements() / kGroupElements, 1, std::min(rows, kMaxGroups));
  if (groups <= 1) return sum_rows(in, 0, rows, channels, out);
  Tensor partial_tensor(g.dtype(), Shape{groups, channels}, c.allocator());
  T* partial = partial_tensor.data<T>();
  c.parallel_for(groups, rows / groups * channels, [=](int64_t b, int64_t e) {
    for (int64_t grp = b; grp < e; ++grp)
      sum_rows(in, grp * rows / groups, (grp + 1) * rows / groups, channels, partial + grp * channels);
  });
  c.parallel_for(channels, groups, [=](int64_t b, int64_t e) {
    std::copy(partial + b, partial + e, out + b);
    for (int64_t grp = 1; grp < groups; ++grp) {
      const T* p = partial + grp * channels;
      for (int64_t j = b; j < e; ++j) out[j] += p[j];
    }
  });
}

// sum(a[j] * b[j]) (kDot) or sum(a[j]) over a row, in kLanes interleaved partial sums: a plain
// running sum is one dependency chain that GCC may not reorder, these are independent chains it
// turns into vector adds. The order is fixed, so the result does not depend on threads.
template <typename T, bool kDot>
T row_sum(const T* a, const T* b, int64_t n) {
  constexpr int kLanes = 32 / sizeof(T) * 2;  // two AVX2 registers
  T acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += kDot ? a[j + k] * b[j + k] : a[j + k];
  T sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += acc[k];
  for (; j < n; ++j) sum += kDot ? a[j] * b[j] : a[j];
  return sum;
}

// SoftmaxGrad and LogSoftmaxGrad: row-wise, like the forward kernels.
template <typename T, bool kLog>
void softmax_grad_kernel(KernelContext& c) {
  const Tensor& g = c.input(0);
  const Tensor& y = c.input(1);
  const char* what = kLog ? "log_softmax" : "softmax";
  if (g.shape() != y.shape())
    c.fail(std::string("gradients and ") + what + " must have the same shape: " + g.shape().to_string() + " vs " +
           y.shape().to_string());
  if (g.rank() < 1) c.fail("gradients must have >= 1 dimension, got " + g.shape().to_string());
  Tensor& dx = c.allocate_output(0, g.dtype(), g.shape());
  const int64_t n = g.dim(-1);
  if (n == 0 || g.num_elements() == 0) return;
  const T* gp = g.data<T>();
  const T* yp = y.data<T>();
  T* out = dx.data<T>();
  c.parallel_for(g.num_elements() / n, (kLog ? 8 : 4) * n, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* gr = gp + r * n;
      const T* yr = yp + r * n;
      T* o = out + r * n;
      if constexpr (kLog) {
        const T sum = row_sum<T, false>(gr, nullptr, n);
        for (int64_t j = 0; j < n; ++j) o[j] = gr[j] - exp_of(yr[j]) * sum;
      } else {
        const T sum = row_sum<T, true>(gr, yr, n);
        for (int64_t j = 0; j < n; ++j) o[j] = (gr[j] - sum) * yr[j];
      }
    }
  });
}

template <typename T>
void scale_rows_kernel(KernelContext& c) {
  const Tensor& scale = c.input(0);
  const Tensor& x = c.input(1);
  if (scale.rank() != 1) c.fail("scale must be 1-D, got shape " + scale.shape().to_string());
  if (x.rank() != 2) c.fail("x must be 2-D, got shape " + x.shape().to_string());
  if (scale.dim(0) != x.dim(0))
    c.fail("scale and x must have the same first dimension, got scale shape " + scale.shape().to_string() +
           " and x shape " + x.shape().to_string());
  Tensor& y = c.allocate_output(0, x.dtype(), x.shape());
  const int64_t n = x.dim(1);
  if (x.num_elements() == 0) return;
  const T* sp = scale.data<T>();
  const T* xp = x.data<T>();
  T* out = y.data<T>();
  c.parallel_for(x.dim(0), n, [=](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T s = sp[r];
      const T* xr = xp + r * n;
      T* o = out + r * n;
      for (int64_t j = 0; j < n; ++j) o[j] = xr[j] * s;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Shape rules.

void bias_add_shape(ShapeContext& c) {
  expect_real(c, 0);
  c.expect_dtype(1, c.input_dtype(0));
  const Shape& value = c.input_shape(0);
  const Shape& bias = c.input_shape(1);
  if (value.known_rank() && value.rank() < 2) c.fail("Input tensor must be at least 2D: " + value.to_string());
  if (bias.known_rank() && bias.rank() != 1) c.fail("Biases must be 1D: " + bias.to_string());
  if (!value.known_rank()) return c.set_output(0, c.input_dtype(0), value);
  Shape out = value;
  if (bias.known_rank()) {
    bool ok = true;
    out.set_dim(value.rank() - 1, merge_dim(value.dim(-1), bias.dim(0), &ok));
    if (!ok) c.fail(bias_shape_error(bias, value));
  }
  c.set_output(0, c.input_dtype(0), out);
}

void softmax_shape(ShapeContext& c) {
  c.expect_floating(0);
  const Shape& logits = c.input_shape(0);
  if (logits.known_rank() && logits.rank() < 1) c.fail("logits must have >= 1 dimension, got " + logits.to_string());
  c.set_output(0, c.input_dtype(0), logits);
}

void sparse_xent_shape(ShapeContext& c) {
  c.expect_floating(0);
  const DType label_dtype = c.input_dtype(1);
  if (label_dtype != DType::kInt32 && label_dtype != DType::kInt64)
    c.fail("labels must be int32 or int64, got " + std::string(dtype_name(label_dtype)));
  const Shape& logits = c.input_shape(0);
  const Shape& labels = c.input_shape(1);
  if (logits.known_rank() && logits.rank() != 2) c.fail("logits must be 2-D, but got shape " + logits.to_string());
  if (labels.known_rank() && labels.rank() != 1) c.fail("labels must be 1-D, but got shape " + labels.to_string());
  bool ok = true;
  const int64_t batch =
      merge_dim(logits.known_rank() ? logits.dim(0) : -1, labels.known_rank() ? labels.dim(0) : -1, &ok);
  if (!ok)
    c.fail("logits and labels must have the same first dimension, got logits shape " + logits.to_string() +
           " and labels shape " + labels.to_string());
  const int64_t classes = logits.known_rank() ? logits.dim(1) : -1;
  if (classes == 0) c.fail("Must have at least one class, but got logits shape " + logits.to_string());
  c.set_output(0, c.input_dtype(0), Shape{batch});
  c.set_output(1, c.input_dtype(0), Shape{batch, classes});
}

void xent_shape(ShapeContext& c) {
  c.expect_floating(0);
  c.expect_dtype(1, c.input_dtype(0));
  const Shape& logits = c.input_shape(0);
  const Shape& labels = c.input_shape(1);
  if (logits.known_rank() && logits.rank() != 2)
    c.fail("logits must be 2-dimensional, got shape " + logits.to_string());
  if (labels.known_rank() && labels.rank() != 2)
    c.fail("labels must be 2-dimensional, got shape " + labels.to_string());
  if (!logits.compatible_with(labels))
    c.fail("logits and labels must be same size: logits_size=" + logits.to_string() +
           " labels_size=" + labels.to_string());
  bool ok = true;
  const int64_t batch =
      merge_dim(logits.known_rank() ? logits.dim(0) : -1, labels.known_rank() ? labels.dim(0) : -1, &ok);
  const int64_t classes =
      merge_dim(logits.known_rank() ? logits.dim(1) : -1, labels.known_rank() ? labels.dim(1) : -1, &ok);
  c.set_output(0, c.input_dtype(0), Shape{batch});
  c.set_output(1, c.input_dtype(0), Shape{batch, classes});
}

// Merges two possibly partially known shapes; false when they cannot describe the same tensor.
bool merge_shapes(const Shape& a, const Shape& b, Shape* out) {
  if (!a.known_rank() || !b.known_rank()) {
    *out = a.known_rank() ? a : b;
    return true;
  }
  if (a.rank() != b.rank()) return false;
  bool ok = true;
  *out = a;
  for (int i = 0; i < a.rank(); ++i) out->set_dim(i, merge_dim(a.dim(i), b.dim(i), &ok));
  return ok;
}

// The elementwise backward ops: (gradients, <second>) of one dtype and shape.
void same_shape_grad_shape(ShapeContext& c, const char* second) {
  c.expect_dtype(1, c.input_dtype(0));
  Shape out;
  if (!merge_shapes(c.input_shape(0), c.input_shape(1), &out))
    c.fail(std::string("gradients and ") + second + " must have the same shape: " + c.input_shape(0).to_string() +
           " vs " + c.input_shape(1).to_string());
  c.set_output(0, c.input_dtype(0), out);
}

void softmax_grad_shape(ShapeContext& c, const char* second) {
  c.expect_floating(0);
  const Shape& g = c.input_shape(0);
  if (g.known_rank() && g.rank() < 1) c.fail("gradients must have >= 1 dimension, got " + g.to_string());
  same_shape_grad_shape(c, second);
}

void bias_add_grad_shape(ShapeContext& c) {
  expect_real(c, 0);
  const Shape& g = c.input_shape(0);
  if (g.known_rank() && g.rank() < 2) c.fail("Input tensor must be at least 2D: " + g.to_string());
  c.set_output(0, c.input_dtype(0), Shape{g.known_rank() ? g.dim(-1) : -1});
}

void scale_rows_shape(ShapeContext& c) {
  c.expect_floating(0);
  c.expect_dtype(1, c.input_dtype(0));
  const Shape& scale = c.input_shape(0);
  const Shape& x = c.input_shape(1);
  if (scale.known_rank() && scale.rank() != 1) c.fail("scale must be 1-D, got shape " + scale.to_string());
  if (x.known_rank() && x.rank() != 2) c.fail("x must be 2-D, got shape " + x.to_string());
  bool ok = true;
  const int64_t batch = merge_dim(scale.known_rank() ? scale.dim(0) : -1, x.known_rank() ? x.dim(0) : -1, &ok);
  if (!ok)
    c.fail("scale and x must have the same first dimension, got scale shape " + scale.to_string() + " and x shape " +
           x.to_string());
  c.set_output(0, c.input_dtype(0), Shape{batch, x.known_rank() ? x.dim(1) : -1});
}

void sigmoid_xent_shape(ShapeContext& c) {
  c.expect_floating(0);
  c.expect_dtype(1, c.input_dtype(0));
  Shape out;
  if (!merge_shapes(c.input_shape(0), c.input_shape(1), &out))
    c.fail("logits and labels must have the same shape: logits " + c.input_shape(0).to_string() + " vs labels " +
           c.input_shape(1).to_string());
  c.set_output(0, c.input_dtype(0), out);
  c.set_output(1, c.input_dtype(0), out);
}

// ---------------------------------------------------------------------------------------------
// Gradient rules.

std::vector<Output> relu_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  return {relu_grad(scope, grads[0], node.output(0))};
}

std::vector<Output> bias_add_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  return {grads[0], bias_add_grad(scope, grads[0])};
}

std::vector<Output> softmax_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  return {softmax_grad(scope, grads[0], node.output(0))};
}

std::vector<Output> log_softmax_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  return {log_softmax_grad(scope, grads[0], node.output(0))};
}

void expect_no_backprop_gradient(const Node& node, std::span<const Output> grads) {
  if (grads[1])
    throw UnimplementedError(node_error_message(
        node, "the gradient of output 1 (backprop) is not implemented; differentiate output 0 (the loss)"));
}

// d loss[r] / d logits[r, :] is the backprop row, so the logits gradient scales each backprop row
// by the incoming loss gradient. Integer labels get none.
std::vector<Output> sparse_xent_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  expect_no_backprop_gradient(node, grads);
  return {scale_rows(scope, grads[0], node.output(1)), Output{}};
}

// As the sparse rule for the logits; labels get -log_softmax(logits) per row, like TensorFlow
// (so soft targets produced by the graph, e.g. a teacher's softmax, are trained too).
std::vector<Output> xent_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  expect_no_backprop_gradient(node, grads);
  return {scale_rows(scope, grads[0], node.output(1)),
          scale_rows(scope, neg(scope, grads[0]), log_softmax(scope, node.input(0)))};
}

// d loss / d logits = sigmoid(x) - z (the backprop output), d loss / d labels = -x (TensorFlow's
// composite formula differentiated: its gradient for labels is -logits).
std::vector<Output> sigmoid_xent_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  expect_no_backprop_gradient(node, grads);
  if (!grads[0]) return {Output{}, Output{}};
  return {mul(scope, grads[0], node.output(1)), mul(scope, grads[0], neg(scope, node.input(0)))};
}

// ---------------------------------------------------------------------------------------------
// Costs. TensorFlow registers no flops for the softmax family; we count, per element, the row
// max, the subtraction, the exponential, the sum and the final scale (or log subtraction): 5.
// The cross entropies add the backprop subtraction (sparse: 6 per element) and, for dense
// labels, the multiply-add of the loss (dense: 8 per element).
constexpr int64_t kSoftmaxFlopsPerElement = 5;
constexpr int64_t kSparseXentFlopsPerElement = 6;
constexpr int64_t kXentFlopsPerElement = 8;
// SoftmaxGrad: multiply-add for the row sum, subtraction, multiply. LogSoftmaxGrad: add for the
// row sum, exponential, multiply, subtraction.
constexpr int64_t kSoftmaxGradFlopsPerElement = 4;
// SigmoidCrossEntropyWithLogits: |x|, exp, log1p, max, x * z, two subtractions, and the sigmoid's
// add and divide plus the backprop subtraction.
constexpr int64_t kSigmoidXentFlopsPerElement = 10;

int64_t output_elements_flops(const CostContext& c) { return known_elements(c.output_shapes[0]); }

}  // namespace

void register_nn_ops(OpRegistry& registry) {
  registry.add(
      {.name = "Relu",
       .num_inputs = 1,
       .shape =
           [](ShapeContext& c) {
             expect_real(c, 0);
             c.set_output(0, c.input_dtype(0), c.input_shape(0));
           },
       .kernel =
           [](KernelContext& c) { dispatch_real(c.input(0).dtype(), [&](auto t) { relu_kernel<decltype(t)>(c); }); },
       .flops = output_elements_flops,
       .gradient = relu_gradient,
       .doc = "max(features, 0), elementwise."});
  registry.add({.name = "BiasAdd",
                .num_inputs = 2,
                .shape = bias_add_shape,
                .kernel =
                    [](KernelContext& c) {
                      dispatch_real(c.input(0).dtype(), [&](auto t) { bias_add_kernel<decltype(t)>(c); });
                    },
                .flops = output_elements_flops,
                .gradient = bias_add_gradient,
                .doc = "value + bias, the rank-1 bias added along the last dimension."});
  registry.add(
      {.name = "Softmax",
       .num_inputs = 1,
       .shape = softmax_shape,
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) { softmax_kernel<decltype(t), false>(c); });
           },
       .flops = [](const CostContext& c) { return kSoftmaxFlopsPerElement * known_elements(c.output_shapes[0]); },
       .gradient = softmax_gradient,
       .doc = "exp(logits) / sum(exp(logits)) over the last axis (max-shifted for stability)."});
  registry.add(
      {.name = "LogSoftmax",
       .num_inputs = 1,
       .shape = softmax_shape,
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) { softmax_kernel<decltype(t), true>(c); });
           },
       .flops = [](const CostContext& c) { return kSoftmaxFlopsPerElement * known_elements(c.output_shapes[0]); },
       .gradient = log_softmax_gradient,
       .doc = "logits - log(sum(exp(logits))) over the last axis (max-shifted for stability)."});
  registry.add(
      {.name = "SparseSoftmaxCrossEntropyWithLogits",
       .num_inputs = 2,
       .num_outputs = 2,
       .shape = sparse_xent_shape,
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) {
               using T = decltype(t);
               if (c.input(1).dtype() == DType::kInt64)
                 sparse_xent_kernel<T, int64_t>(c);
               else
                 sparse_xent_kernel<T, int32_t>(c);
             });
           },
       .flops = [](const CostContext& c) { return kSparseXentFlopsPerElement * known_elements(c.input_shapes[0]); },
       .gradient = sparse_xent_gradient,
       .doc = "Inputs (features [batch, classes], labels [batch] int). Outputs loss [batch] = "
              "-log(softmax(features)[label]) and backprop = softmax(features) - onehot(labels)."});
  registry.add(
      {.name = "SoftmaxCrossEntropyWithLogits",
       .num_inputs = 2,
       .num_outputs = 2,
       .shape = xent_shape,
       .kernel =
           [](KernelContext& c) { dispatch_float(c.input(0).dtype(), [&](auto t) { xent_kernel<decltype(t)>(c); }); },
       .flops = [](const CostContext& c) { return kXentFlopsPerElement * known_elements(c.input_shapes[0]); },
       .gradient = xent_gradient,
       .doc = "Inputs (features, labels), both [batch, classes]. Outputs loss [batch] = "
              "-sum(labels * log_softmax(features)) and backprop = softmax(features) - labels."});
  registry.add(
      {.name = "SigmoidCrossEntropyWithLogits",
       .num_inputs = 2,
       .num_outputs = 2,
       .shape = sigmoid_xent_shape,
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) { sigmoid_xent_kernel<decltype(t)>(c); });
           },
       .flops = [](const CostContext& c) { return kSigmoidXentFlopsPerElement * known_elements(c.input_shapes[0]); },
       .gradient = sigmoid_xent_gradient,
       .doc = "Inputs (logits, labels) of one shape. Outputs loss = max(logits, 0) - logits * labels + "
              "log(1 + exp(-|logits|)) elementwise and backprop = sigmoid(logits) - labels."});
  registry.add({.name = "ReluGrad",
                .num_inputs = 2,
                .shape =
                    [](ShapeContext& c) {
                      expect_real(c, 0);
                      same_shape_grad_shape(c, "features");
                    },
                .kernel =
                    [](KernelContext& c) {
                      dispatch_real(c.input(0).dtype(), [&](auto t) { relu_grad_kernel<decltype(t)>(c); });
                    },
                .flops = output_elements_flops,
                .not_differentiable = true,
                .doc = "Inputs (gradients, features). gradients * (features > 0): Relu's backprop."});
  registry.add({.name = "BiasAddGrad",
                .num_inputs = 1,
                .shape = bias_add_grad_shape,
                .kernel =
                    [](KernelContext& c) {
                      dispatch_real(c.input(0).dtype(), [&](auto t) { bias_add_grad_kernel<decltype(t)>(c); });
                    },
                .flops = [](const CostContext& c) { return known_elements(c.input_shapes[0]); },
                .not_differentiable = true,
                .doc = "Sum of out_backprop over all but the last dimension: BiasAdd's bias gradient."});
  registry.add(
      {.name = "SoftmaxGrad",
       .num_inputs = 2,
       .shape = [](ShapeContext& c) { softmax_grad_shape(c, "softmax"); },
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) { softmax_grad_kernel<decltype(t), false>(c); });
           },
       .flops = [](const CostContext& c) { return kSoftmaxGradFlopsPerElement * known_elements(c.output_shapes[0]); },
       .not_differentiable = true,
       .doc = "Inputs (gradients, softmax). (gradients - sum(gradients * softmax, last axis)) * softmax."});
  registry.add(
      {.name = "LogSoftmaxGrad",
       .num_inputs = 2,
       .shape = [](ShapeContext& c) { softmax_grad_shape(c, "log_softmax"); },
       .kernel =
           [](KernelContext& c) {
             dispatch_float(c.input(0).dtype(), [&](auto t) { softmax_grad_kernel<decltype(t), true>(c); });
           },
       .flops = [](const CostContext& c) { return kSoftmaxGradFlopsPerElement * known_elements(c.output_shapes[0]); },
       .not_differentiable = true,
       .doc = "Inputs (gradients, log_softmax). gradients - exp(log_softmax) * sum(gradients, last axis)."});
  registry.add({.name = "ScaleRows",
                .num_inputs = 2,
                .shape = scale_rows_shape,
                .kernel =
                    [](KernelContext& c) {
                      dispatch_float(c.input(0).dtype(), [&](auto t) { scale_rows_kernel<decltype(t)>(c); });
                    },
                .flops = output_elements_flops,
                .not_differentiable = true,
                .doc = "Inputs (scale [batch], x [batch, n]). x with row r multiplied by scale[r] (TensorFlow's "
                       "expand_dims(scale, -1) * x in the cross-entropy gradients)."});
  register_conv_ops(registry);
  register_normalization_ops(registry);
}

}  // namespace stepscope
