#include "stepscope/ops/math_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/cwise.h"
#include "stepscope/ops/internal/math_functors.h"
#include "stepscope/ops/internal/reduce.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

// ---------------------------------------------------------------------------------------------
// Builders

namespace {

Output unary(const Scope& scope, const char* op, Output x, const CallSite& site) {
  return scope.add_node(op_def(op), {x}, {}, site)->output(0);
}

Output binary(const Scope& scope, const char* op, Output x, Output y, const CallSite& site) {
  return scope.add_node(op_def(op), {x, y}, {}, site)->output(0);
}

template <typename T>
bool fits_integer(double v) {
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());  // -2^(bits-1), exact
  return v == std::trunc(v) && v >= lo && v < -lo;
}

// A scalar Const of like's dtype holding `value`. The Const ignores a with_op_name() given to
// the scope: that name belongs to the op the user asked for.
Output scalar_like(const Scope& scope, const char* op, Output like, double value, const CallSite& site) {
  if (!like) throw InvalidArgumentError("[" + std::string(op) + "] input is a null Output");
  const DType dtype = like.dtype();
  Tensor t;
  switch (dtype) {
    case DType::kFloat32:
      t = Tensor::scalar<float>(static_cast<float>(value));
      break;
    case DType::kFloat64:
      t = Tensor::scalar<double>(value);
      break;
    case DType::kInt32:
      if (fits_integer<int32_t>(value)) t = Tensor::scalar<int32_t>(static_cast<int32_t>(value));
      break;
    case DType::kInt64:
      if (fits_integer<int64_t>(value)) t = Tensor::scalar<int64_t>(static_cast<int64_t>(value));
      break;
    default:
      break;
  }
  if (!t.initialized()) {
    std::ostringstream v;
    v << value;
    throw InvalidArgumentError("[" + std::string(op) + "] cannot convert " + v.str() + " to a scalar of dtype " +
                               std::string(dtype_name(dtype)));
  }
  return constant(scope.with_op_name(""), t, site);
}

}  // namespace

Output add(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Add", x, y, site); }
Output sub(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Sub", x, y, site); }
Output mul(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Mul", x, y, site); }
Output div(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Div", x, y, site); }
Output div_no_nan(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "DivNoNan", x, y, site); }
Output maximum(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Maximum", x, y, site); }
Output minimum(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Minimum", x, y, site); }
Output equal(const Scope& s, Output x, Output y, CallSite site) { return binary(s, "Equal", x, y, site); }

Output add(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Add", x, scalar_like(s, "Add", x, y, site), site);
}
Output sub(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Sub", x, scalar_like(s, "Sub", x, y, site), site);
}
Output sub(const Scope& s, double x, Output y, CallSite site) {
  return binary(s, "Sub", scalar_like(s, "Sub", y, x, site), y, site);
}
Output mul(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Mul", x, scalar_like(s, "Mul", x, y, site), site);
}
Output div(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Div", x, scalar_like(s, "Div", x, y, site), site);
}
Output div(const Scope& s, double x, Output y, CallSite site) {
  return binary(s, "Div", scalar_like(s, "Div", y, x, site), y, site);
}
Output maximum(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Maximum", x, scalar_like(s, "Maximum", x, y, site), site);
}
Output minimum(const Scope& s, Output x, double y, CallSite site) {
  return binary(s, "Minimum", x, scalar_like(s, "Minimum", x, y, site), site);
}

Output neg(const Scope& s, Output x, CallSite site) { return unary(s, "Neg", x, site); }
Output square(const Scope& s, Output x, CallSite site) { return unary(s, "Square", x, site); }
Output sqrt(const Scope& s, Output x, CallSite site) { return unary(s, "Sqrt", x, site); }
Output rsqrt(const Scope& s, Output x, CallSite site) { return unary(s, "Rsqrt", x, site); }
Output exp(const Scope& s, Output x, CallSite site) { return unary(s, "Exp", x, site); }
Output log(const Scope& s, Output x, CallSite site) { return unary(s, "Log", x, site); }
Output tanh(const Scope& s, Output x, CallSite site) { return unary(s, "Tanh", x, site); }
Output sigmoid(const Scope& s, Output x, CallSite site) { return unary(s, "Sigmoid", x, site); }
Output is_finite(const Scope& s, Output x, CallSite site) { return unary(s, "IsFinite", x, site); }

Output check_numerics(const Scope& s, Output x, const std::string& message, CallSite site) {
  return s.add_node(op_def("CheckNumerics"), {x}, {{"message", message}}, site)->output(0);
}

Output sum_to_shape(const Scope& s, Output x, Output shape, CallSite site) {
  return binary(s, "SumToShape", x, shape, site);
}
Output broadcast_to(const Scope& s, Output x, Output shape, CallSite site) {
  return binary(s, "BroadcastTo", x, shape, site);
}
Output mean_grad(const Scope& s, Output grad, Output shape, CallSite site) {
  return binary(s, "MeanGrad", grad, shape, site);
}

Output shape_of(const Scope& s, Output x, CallSite site) {
  if (!x) throw InvalidArgumentError("shape_of: x is a null Output");
  const Shape& static_shape = x.shape();
  if (!static_shape.fully_defined()) return shape(s, x, DType::kInt64, site);
  const auto dims = static_shape.dims();
  const Tensor value = Tensor::from_vector<int64_t>({dims.begin(), dims.end()}, Shape{static_shape.rank()});
  return s.add_node(op_def("Const"), {}, {{"value", value}}, site, "Shape")->output(0);
}

Output tanh_grad(const Scope& s, Output y, Output dy, CallSite site) { return binary(s, "TanhGrad", y, dy, site); }
Output sigmoid_grad(const Scope& s, Output y, Output dy, CallSite site) {
  return binary(s, "SigmoidGrad", y, dy, site);
}
Output sqrt_grad(const Scope& s, Output y, Output dy, CallSite site) { return binary(s, "SqrtGrad", y, dy, site); }
Output rsqrt_grad(const Scope& s, Output y, Output dy, CallSite site) { return binary(s, "RsqrtGrad", y, dy, site); }

namespace {
Output select_grad(const Scope& s, const char* op, Output grad, Output x, Output y, int input, const CallSite& site) {
  return s.add_node(op_def(op), {grad, x, y}, {{"input", int64_t{input}}}, site)->output(0);
}
}  // namespace

Output maximum_grad(const Scope& s, Output grad, Output x, Output y, int input, CallSite site) {
  return select_grad(s, "MaximumGrad", grad, x, y, input, site);
}
Output minimum_grad(const Scope& s, Output grad, Output x, Output y, int input, CallSite site) {
  return select_grad(s, "MinimumGrad", grad, x, y, input, site);
}

namespace {

// True when z = op(x, other) is sure to have x's shape, from the static shapes alone: each dim
// of `other` is 1 or lies against a known dim of x other than 1 (which the output then has,
// or the op fails), and other's rank is not larger.
bool output_has_shape_of(Output x, Output other) {
  if (x == other) return true;
  const Shape& a = x.shape();
  const Shape& b = other.shape();
  if (!a.known_rank() || !b.known_rank() || b.rank() > a.rank()) return false;
  for (int i = 1; i <= b.rank(); ++i) {
    const int64_t db = b.dim(b.rank() - i), da = a.dim(a.rank() - i);
    if (db == 1 || (da >= 0 && da != 1)) continue;
    return false;
  }
  return true;
}

}  // namespace

Output unbroadcast(const Scope& s, Output grad, Output x, Output other, CallSite site) {
  if (!grad) return {};
  if (output_has_shape_of(x, other)) return grad;
  return sum_to_shape(s, grad, shape_of(s, x, site), site);
}

namespace {

using namespace math_functors;

// ---------------------------------------------------------------------------------------------
// Shape rules

void check_accepts(const ShapeContext& c, Types types, int i) {
  if (!accepts(types, c.input_dtype(i)))
    c.fail("input " + std::to_string(i) + " must be " + accepted_names(types) + ", got " +
           std::string(dtype_name(c.input_dtype(i))));
}

std::string incompatible_message(const Shape& a, const Shape& b) {
  return "incompatible shapes for broadcasting: " + a.to_string() + " and " + b.to_string();
}

// The NumPy broadcast of two partially known shapes: an unknown dim against 1 stays unknown,
// against n becomes n (the run-time check catches a mismatch); unknown rank gives unknown rank.
bool broadcast_static(const Shape& a, const Shape& b, Shape& out) {
  if (!a.known_rank() || !b.known_rank()) {
    out = Shape::unknown_rank();
    return true;
  }
  const int ra = a.rank(), rb = b.rank(), r = std::max(ra, rb);
  out = Shape();
  for (int i = 0; i < r; ++i) {
    const int64_t da = i < r - ra ? 1 : a.dim(i - (r - ra));
    const int64_t db = i < r - rb ? 1 : b.dim(i - (r - rb));
    int64_t d;
    if (da == 1)
      d = db;
    else if (db == 1 || db < 0)
      d = da;
    else if (da < 0 || da == db)
      d = db;
    else
      return false;
    out.add_dim(d);
  }
  return true;
}

template <typename F>
void binary_shape(ShapeContext& c) {
  check_accepts(c, F::kTypes, 0);
  check_accepts(c, F::kTypes, 1);
  if (c.input_dtype(0) != c.input_dtype(1))
    c.fail("inputs must have the same dtype, got " + std::string(dtype_name(c.input_dtype(0))) + " and " +
           std::string(dtype_name(c.input_dtype(1))));
  Shape out;
  if (!broadcast_static(c.input_shape(0), c.input_shape(1), out))
    c.fail(incompatible_message(c.input_shape(0), c.input_shape(1)));
  c.set_output(0, F::kBoolOut ? DType::kBool : c.input_dtype(0), out);
}

template <typename F>
void unary_shape(ShapeContext& c) {
  check_accepts(c, F::kTypes, 0);
  c.set_output(0, F::kBoolOut ? DType::kBool : c.input_dtype(0), c.input_shape(0));
}

void check_numerics_shape(ShapeContext& c) {
  check_accepts(c, Types::kFloat, 0);
  c.node().attrs().get<std::string>("message");  // must be present
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
}

// The shape a 1-D int32/int64 shape argument (input i) describes when the graph is built: a
// Const's values; x's static shape when it is shape(x); else as many unknown dims as its
// static length (unknown rank if that is unknown too).
Shape shape_argument(const ShapeContext& c, int i) {
  const DType dtype = c.input_dtype(i);
  if (dtype != DType::kInt32 && dtype != DType::kInt64)
    c.fail("shape must be int32 or int64, got " + std::string(dtype_name(dtype)));
  const Shape& arg = c.input_shape(i);
  if (arg.known_rank() && arg.rank() != 1) c.fail("shape must be 1-D, got shape " + arg.to_string());
  if (arg.known_rank() && arg.dim(0) > Shape::kMaxRank)
    c.fail("shape has " + std::to_string(arg.dim(0)) + " dims, more than the maximum rank " +
           std::to_string(Shape::kMaxRank));
  if (const Tensor* t = c.input_constant(i)) {
    Shape out;
    for (int64_t k = 0; k < t->num_elements(); ++k) {
      const int64_t d = dtype == DType::kInt32 ? t->data<int32_t>()[k] : t->data<int64_t>()[k];
      if (d < 0) c.fail("shape has a negative dim: " + std::to_string(d));
      out.add_dim(d);
    }
    return out;
  }
  const Output& producer = c.node().input(i);
  if (producer.node->op_type() == "Shape") return producer.node->input(0).shape();
  if (!arg.known_rank() || arg.dim(0) < 0) return Shape::unknown_rank();
  Shape out;
  for (int64_t k = 0; k < arg.dim(0); ++k) out.add_dim(Shape::kUnknownDim);
  return out;
}

// Whether `from` may broadcast to `to` (as far as the known dims tell).
bool may_broadcast_to(const Shape& from, const Shape& to) {
  if (!from.known_rank() || !to.known_rank()) return true;
  if (from.rank() > to.rank()) return false;
  for (int i = 1; i <= from.rank(); ++i) {
    const int64_t f = from.dim(from.rank() - i), t = to.dim(to.rank() - i);
    if (f >= 0 && t >= 0 && f != t && f != 1) return false;
  }
  return true;
}

std::string unable_to_sum_message(const Shape& x, const Shape& target) {
  return "Unable to sum tensor of shape " + x.to_string() + " to shape " + target.to_string();
}
std::string unable_to_broadcast_message(const Shape& x, const Shape& target) {
  return "Unable to broadcast tensor of shape " + x.to_string() + " to tensor of shape " + target.to_string();
}

void sum_to_shape_shape(ShapeContext& c) {
  check_accepts(c, Types::kNumeric, 0);
  const Shape target = shape_argument(c, 1);
  if (!may_broadcast_to(target, c.input_shape(0))) c.fail(unable_to_sum_message(c.input_shape(0), target));
  c.set_output(0, c.input_dtype(0), target);
}

// BroadcastTo and MeanGrad. An unknown target dim against a known dim of x other than 1 is
// that dim.
void broadcast_to_shape(ShapeContext& c) {
  check_accepts(c, Types::kNumeric, 0);
  Shape target = shape_argument(c, 1);
  const Shape& x = c.input_shape(0);
  if (!may_broadcast_to(x, target)) c.fail(unable_to_broadcast_message(x, target));
  if (x.known_rank() && target.known_rank())
    for (int i = 1; i <= x.rank(); ++i) {
      const int64_t d = x.dim(x.rank() - i);
      if (d >= 0 && d != 1 && target.dim(target.rank() - i) < 0) target.set_dim(target.rank() - i, d);
    }
  c.set_output(0, c.input_dtype(0), target);
}

void select_grad_shape(ShapeContext& c) {
  for (int i = 0; i < 3; ++i) check_accepts(c, Types::kNumeric, i);
  if (c.input_dtype(1) != c.input_dtype(0) || c.input_dtype(2) != c.input_dtype(0))
    c.fail("grad, x and y must have the same dtype, got " + std::string(dtype_name(c.input_dtype(0))) + ", " +
           std::string(dtype_name(c.input_dtype(1))) + " and " + std::string(dtype_name(c.input_dtype(2))));
  const int64_t input = c.node().attrs().get<int64_t>("input");
  if (input != 0 && input != 1) c.fail("attr input must be 0 (x) or 1 (y), got " + std::to_string(input));
  Shape out;
  if (!broadcast_static(c.input_shape(1), c.input_shape(2), out))
    c.fail(incompatible_message(c.input_shape(1), c.input_shape(2)));
  const Shape& grad = c.input_shape(0);
  if (!grad.compatible_with(out))
    c.fail("grad has shape " + grad.to_string() + ", the broadcast of x and y is " + out.to_string());
  c.set_output(0, c.input_dtype(0), grad.known_rank() ? grad : out);
}

int64_t elementwise_flops(const CostContext& c) {
  if (c.output_shapes.empty()) return 0;
  return std::max<int64_t>(0, c.output_shapes[0].num_elements());
}

// ---------------------------------------------------------------------------------------------
// Kernels

[[noreturn]] void unsupported_dtype(KernelContext& c, DType dtype) {
  c.fail("unsupported dtype " + std::string(dtype_name(dtype)));
}

template <typename T>
bool has_zero(const T* p, int64_t n) {
  int found = 0;
  for (int64_t i = 0; i < n; ++i) found |= p[i] == T{0};
  return found != 0;
}

template <typename F, typename T>
void binary_typed(KernelContext& c, const Tensor& a, const Tensor& b) {
  using R = decltype(F::apply(T{}, T{}));
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  const int64_t na = cwise::num_elements(a.shape());
  if constexpr (std::is_same_v<F, DivOp> && std::is_integral_v<T>) {
    // An empty operand means an empty output: no division happens.
    if (na > 0 && has_zero(pb, cwise::num_elements(b.shape()))) c.fail("Integer division by zero");
  }
  if (cwise::same_shape(a.shape(), b.shape())) {
    R* out = static_cast<R*>(c.allocate_output(0, dtype_of<R>, a.shape()).raw_data());
    cwise::for_range(c, na, F::kCostNs,
                     [=](int64_t i, int64_t end) { cwise::map_vv<F>(pa + i, pb + i, out + i, end - i); });
    return;
  }
  const int64_t nb = cwise::num_elements(b.shape());
  if (na == 1 && a.rank() <= b.rank()) {
    R* out = static_cast<R*>(c.allocate_output(0, dtype_of<R>, b.shape()).raw_data());
    const T s = pa[0];
    cwise::for_range(c, nb, F::kCostNs, [=](int64_t i, int64_t end) { cwise::map_sv<F>(s, pb + i, out + i, end - i); });
    return;
  }
  if (nb == 1 && b.rank() <= a.rank()) {
    R* out = static_cast<R*>(c.allocate_output(0, dtype_of<R>, a.shape()).raw_data());
    const T s = pb[0];
    cwise::for_range(c, na, F::kCostNs, [=](int64_t i, int64_t end) { cwise::map_vs<F>(pa + i, s, out + i, end - i); });
    return;
  }
  cwise::Broadcast bc;
  if (!cwise::analyze_broadcast(a.shape(), b.shape(), bc)) c.fail(incompatible_message(a.shape(), b.shape()));
  R* out = static_cast<R*>(c.allocate_output(0, dtype_of<R>, bc.out_shape).raw_data());
  if (na == 0 || nb == 0) return;
  cwise::broadcast_map<F>(c, bc, pa, pb, out, F::kCostNs);
}

template <typename F>
void binary_kernel(KernelContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  if (a.dtype() != b.dtype())
    c.fail("inputs must have the same dtype, got " + std::string(dtype_name(a.dtype())) + " and " +
           std::string(dtype_name(b.dtype())));
  if (!dispatch<F::kTypes>(a.dtype(), [&](auto t) { binary_typed<F, decltype(t)>(c, a, b); }))
    unsupported_dtype(c, a.dtype());
}

template <typename F, typename T>
void unary_typed(KernelContext& c, const Tensor& x) {
  using R = decltype(F::apply(T{}));
  const T* px = static_cast<const T*>(x.raw_data());
  R* out = static_cast<R*>(c.allocate_output(0, dtype_of<R>, x.shape()).raw_data());
  cwise::for_range(c, cwise::num_elements(x.shape()), F::kCostNs,
                   [=](int64_t i, int64_t end) { cwise::map_v<F>(px + i, out + i, end - i); });
}

template <typename F>
void unary_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (!dispatch<F::kTypes>(x.dtype(), [&](auto t) { unary_typed<F, decltype(t)>(c, x); }))
    unsupported_dtype(c, x.dtype());
}

constexpr int kNaNBit = 1, kInfBit = 2;

template <typename T>
int nonfinite_bits(const T* p, int64_t n) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  int nan = 0, infinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    nan |= p[i] != p[i];
    infinite |= std::abs(p[i]) == inf;
  }
  return (nan ? kNaNBit : 0) | (infinite ? kInfBit : 0);
}

void check_numerics_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  std::atomic<int> bits{0};
  const bool ok = dispatch<Types::kFloat>(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(x.raw_data());
    cwise::for_range(c, x.num_elements(), 1, [&bits, p](int64_t i, int64_t end) {
      if (int found = nonfinite_bits(p + i, end - i)) bits.fetch_or(found, std::memory_order_relaxed);
    });
  });
  if (!ok) unsupported_dtype(c, x.dtype());
  if (const int found = bits.load(std::memory_order_relaxed)) {
    // TensorFlow's wording, so logs and tests written against it keep matching.
    const char* what = found == (kNaNBit | kInfBit) ? "Inf and NaN" : found == kInfBit ? "Inf" : "NaN";
    c.fail(c.attrs().get<std::string>("message") + " : Tensor had " + what + " values");
  }
  c.set_output(0, x);
}

// The value of a 1-D int32/int64 shape argument at run time.
Shape read_shape_argument(KernelContext& c, int i) {
  const Tensor& t = c.input(i);
  if (t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64)
    c.fail("shape must be int32 or int64, got " + std::string(dtype_name(t.dtype())));
  if (t.rank() != 1) c.fail("shape must be 1-D, got shape " + t.shape().to_string());
  if (t.dim(0) > Shape::kMaxRank)
    c.fail("shape has " + std::to_string(t.dim(0)) + " dims, more than the maximum rank " +
           std::to_string(Shape::kMaxRank));
  Shape out;
  for (int64_t k = 0; k < t.dim(0); ++k) {
    const int64_t d = t.dtype() == DType::kInt32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k];
    if (d < 0) c.fail("shape has a negative dim: " + std::to_string(d));
    out.add_dim(d);
  }
  return out;
}

// Whether the fully defined `from` broadcasts to `to` (every dim equal or 1).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  for (int i = 1; i <= from.rank(); ++i) {
    const int64_t f = from.dim(from.rank() - i);
    if (f != 1 && f != to.dim(to.rank() - i)) return false;
  }
  return true;
}

// Sums with the reduction kernels of Sum (pairwise for floats, deterministic for any thread
// count); only the dims that broadcast are reduced.
void sum_to_shape_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Shape target = read_shape_argument(c, 1);
  if (!broadcasts_to(target, x.shape())) c.fail(unable_to_sum_message(x.shape(), target));
  const int lead = x.rank() - target.rank();
  std::vector<bool> reduced(x.rank());
  bool any = false;  // a summed dim of size != 1: otherwise the values are x's
  for (int d = 0; d < x.rank(); ++d) {
    reduced[d] = d < lead || (target.dim(d - lead) == 1 && x.dim(d) != 1);
    any |= reduced[d] && x.dim(d) != 1;
  }
  if (!any) {
    c.set_output(0, cwise::same_shape(x.shape(), target) ? x : x.reshaped(target));
    return;
  }
  if (!dispatch<Types::kNumeric>(x.dtype(), [&](auto t) {
        using T = decltype(t);
        Tensor& out = c.allocate_output(0, x.dtype(), target);
        kernels::reduce_axes<kernels::SumReducer<T>>(c, x, reduced, out.data<T>(), out.num_elements());
      }))
    unsupported_dtype(c, x.dtype());
}

template <bool kMean>
void broadcast_to_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Shape target = read_shape_argument(c, 1);
  if (!broadcasts_to(x.shape(), target)) c.fail(unable_to_broadcast_message(x.shape(), target));
  const int64_t n_in = cwise::num_elements(x.shape()), n_out = cwise::num_elements(target);
  if (n_in == n_out) {  // only dims of size 1 differ; a mean over them divides by 1
    c.set_output(0, cwise::same_shape(x.shape(), target) ? x : x.reshaped(target));
    return;
  }
  Tensor& out = c.allocate_output(0, x.dtype(), target);
  if (n_out == 0) return;
  cwise::Broadcast bc;
  cwise::analyze_broadcast(x.shape(), target, bc);
  if (!dispatch<Types::kNumeric>(x.dtype(), [&](auto t) {
        using T = decltype(t);
        const T* in = static_cast<const T*>(x.raw_data());
        T* o = static_cast<T*>(out.raw_data());
        if constexpr (kMean) {
          // Divided once per input element (there are fewer), then copied: the same values as
          // dividing every output element, without a division in the copy loops.
          const T count = static_cast<T>(n_out / n_in);  // exact: every element repeats as often
          if (n_in == 1) {
            const T v = in[0] / count;
            cwise::for_range(c, n_out, 1, [=](int64_t b, int64_t e) { std::fill(o + b, o + e, v); });
            return;
          }
          Tensor scaled_t(x.dtype(), x.shape(), c.allocator());
          T* scaled = static_cast<T*>(scaled_t.raw_data());
          for (int64_t i = 0; i < n_in; ++i) scaled[i] = in[i] / count;
          cwise::broadcast_copy(c, bc, static_cast<const T*>(scaled), o, [](T v) { return v; });
        } else {
          cwise::broadcast_copy(c, bc, in, o, [](T v) { return v; });
        }
      }))
    unsupported_dtype(c, x.dtype());
}

template <typename Cmp>
void select_grad_kernel(KernelContext& c) {
  const Tensor& g = c.input(0);
  const Tensor& x = c.input(1);
  const Tensor& y = c.input(2);
  if (x.dtype() != g.dtype() || y.dtype() != g.dtype())
    c.fail("grad, x and y must have the same dtype, got " + std::string(dtype_name(g.dtype())) + ", " +
           std::string(dtype_name(x.dtype())) + " and " + std::string(dtype_name(y.dtype())));
  cwise::Broadcast bc;
  if (!cwise::analyze_broadcast(x.shape(), y.shape(), bc)) c.fail(incompatible_message(x.shape(), y.shape()));
  if (!cwise::same_shape(bc.out_shape, g.shape()))
    c.fail("grad has shape " + g.shape().to_string() + ", the broadcast of x and y is " + bc.out_shape.to_string());
  const bool for_x = c.attrs().get<int64_t>("input") == 0;
  Tensor& out = c.allocate_output(0, g.dtype(), g.shape());
  if (cwise::num_elements(g.shape()) == 0) return;
  if (!dispatch<Types::kNumeric>(g.dtype(), [&](auto t) {
        using T = decltype(t);
        const T* pg = static_cast<const T*>(g.raw_data());
        const T* px = static_cast<const T*>(x.raw_data());
        const T* py = static_cast<const T*>(y.raw_data());
        T* o = static_cast<T*>(out.raw_data());
        if (for_x)
          cwise::select_grad<Cmp, true>(c, bc, px, py, pg, o);
        else
          cwise::select_grad<Cmp, false>(c, bc, px, py, pg, o);
      }))
    unsupported_dtype(c, g.dtype());
}

template <typename F>
OpDef binary_op(const char* name, const char* doc) {
  return {.name = name,
          .num_inputs = 2,
          .shape = &binary_shape<F>,
          .kernel = &binary_kernel<F>,
          .flops = &elementwise_flops,
          .doc = doc};
}

template <typename F>
OpDef unary_op(const char* name, const char* doc) {
  return {.name = name,
          .num_inputs = 1,
          .shape = &unary_shape<F>,
          .kernel = &unary_kernel<F>,
          .flops = &elementwise_flops,
          .doc = doc};
}

// ---------------------------------------------------------------------------------------------
// Gradient rules (dz: the gradient of each output; one gradient per input, null for none)

using Grads = std::vector<Output>;

Grads add_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  return {unbroadcast(s, dz[0], x, y), unbroadcast(s, dz[0], y, x)};
}

// Negated after summing: the Neg then runs on y's (often smaller) shape.
Grads sub_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  return {unbroadcast(s, dz[0], x, y), neg(s, unbroadcast(s, dz[0], y, x))};
}

Grads mul_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  return {unbroadcast(s, mul(s, dz[0], y), x, y), unbroadcast(s, mul(s, x, dz[0]), y, x)};
}

// dz/dx = g / y; dz/dy = -g * x / y^2 = -(g / y) * z, reusing g / y and the forward output z.
Grads div_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  const Output g_over_y = div(s, dz[0], y);
  return {unbroadcast(s, g_over_y, x, y), neg(s, unbroadcast(s, mul(s, g_over_y, n.output(0)), y, x))};
}

// As Div's, with 0 where y == 0: dz/dx = div_no_nan(g, y); dz/dy = -div_no_nan(g, y) * z (z is 0
// there too).
Grads div_no_nan_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  const Output g_over_y = div_no_nan(s, dz[0], y);
  return {unbroadcast(s, g_over_y, x, y), neg(s, unbroadcast(s, mul(s, g_over_y, n.output(0)), y, x))};
}

template <Output (*Select)(const Scope&, Output, Output, Output, int, CallSite)>
Grads select_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0), y = n.input(1);
  const CallSite site = CallSite::current();
  return {unbroadcast(s, Select(s, dz[0], x, y, 0, site), x, y), unbroadcast(s, Select(s, dz[0], x, y, 1, site), y, x)};
}

Grads neg_grad(const Scope& s, const Node&, std::span<const Output> dz) { return {neg(s, dz[0])}; }

// (g * x) * 2: both products run in the backward pass, so nothing x-sized is made early and
// kept until then; times 2 is exact, so this equals g * (2 * x).
Grads square_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {mul(s, mul(s, dz[0], n.input(0)), 2.0)};
}

Grads sqrt_grad_rule(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {sqrt_grad(s, n.output(0), dz[0])};
}
Grads rsqrt_grad_rule(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {rsqrt_grad(s, n.output(0), dz[0])};
}
Grads exp_grad(const Scope& s, const Node& n, std::span<const Output> dz) { return {mul(s, dz[0], n.output(0))}; }
Grads log_grad(const Scope& s, const Node& n, std::span<const Output> dz) { return {div(s, dz[0], n.input(0))}; }
Grads tanh_grad_rule(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {tanh_grad(s, n.output(0), dz[0])};
}
Grads sigmoid_grad_rule(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {sigmoid_grad(s, n.output(0), dz[0])};
}

Grads check_numerics_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {check_numerics(
      s, dz[0],
      "Not a number (NaN) or infinity (Inf) values detected in gradient. " + n.attrs().get<std::string>("message"))};
}

// The reverse pairs: broadcasting's gradient sums, summing's gradient broadcasts.
Grads broadcast_to_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0);
  if (x.shape().fully_defined() && x.shape() == n.output_shape(0)) return {dz[0], Output{}};
  return {sum_to_shape(s, dz[0], shape_of(s, x)), Output{}};
}
Grads sum_to_shape_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0);
  if (x.shape().fully_defined() && x.shape() == n.output_shape(0)) return {dz[0], Output{}};
  return {broadcast_to(s, dz[0], shape_of(s, x)), Output{}};
}

}  // namespace

// Flops follow TensorFlow's convention of one per output element for every elementwise op,
// transcendental or not. CheckNumerics computes no value and counts none (TensorFlow
// registers no flops for it).
void register_math_ops(OpRegistry& registry) {
  auto differentiable = [](OpDef def, GradientFn gradient) {
    def.gradient = gradient;
    return def;
  };
  auto not_differentiable = [](OpDef def) {
    def.not_differentiable = true;
    return def;
  };
  registry.add(differentiable(binary_op<AddOp>("Add", "x + y, broadcasting. Integers wrap on overflow."), add_grad));
  registry.add(differentiable(binary_op<SubOp>("Sub", "x - y, broadcasting. Integers wrap on overflow."), sub_grad));
  registry.add(differentiable(binary_op<MulOp>("Mul", "x * y, broadcasting. Integers wrap on overflow."), mul_grad));
  registry.add(differentiable(
      binary_op<DivOp>("Div",
                       "x / y, broadcasting. Integer division truncates toward zero and fails on a zero divisor."),
      div_grad));
  registry.add(
      differentiable(binary_op<DivNoNanOp>("DivNoNan", "x / y, broadcasting, and 0 where y == 0 (float32/float64)."),
                     div_no_nan_grad));
  registry.add(differentiable(binary_op<MaximumOp>("Maximum", "max(x, y), broadcasting; NaN if either is NaN."),
                              select_grad<maximum_grad>));
  registry.add(differentiable(binary_op<MinimumOp>("Minimum", "min(x, y), broadcasting; NaN if either is NaN."),
                              select_grad<minimum_grad>));
  registry.add(not_differentiable(binary_op<EqualOp>("Equal", "x == y (bool), broadcasting; NaN equals nothing.")));

  registry.add(differentiable(unary_op<NegOp>("Neg", "-x. Integers wrap on overflow."), neg_grad));
  registry.add(differentiable(unary_op<SquareOp>("Square", "x * x. Integers wrap on overflow."), square_grad));
  registry.add(differentiable(unary_op<SqrtOp>("Sqrt", "sqrt(x); NaN for x < 0."), sqrt_grad_rule));
  registry.add(differentiable(unary_op<RsqrtOp>("Rsqrt", "1 / sqrt(x)."), rsqrt_grad_rule));
  registry.add(differentiable(unary_op<ExpOp>("Exp", "e^x."), exp_grad));
  registry.add(differentiable(unary_op<LogOp>("Log", "Natural logarithm; -inf at 0, NaN for x < 0."), log_grad));
  registry.add(differentiable(unary_op<TanhOp>("Tanh", "Hyperbolic tangent."), tanh_grad_rule));
  registry.add(differentiable(unary_op<SigmoidOp>("Sigmoid", "1 / (1 + e^-x), without overflow for large |x|."),
                              sigmoid_grad_rule));
  registry.add(not_differentiable(unary_op<IsFiniteOp>("IsFinite", "True where x is neither NaN nor infinite.")));
  registry.add({.name = "CheckNumerics",
                .num_inputs = 1,
                .shape = &check_numerics_shape,
                .kernel = &check_numerics_kernel,
                .flops = &no_float_ops,
                .gradient = &check_numerics_grad,
                .doc = "Forwards x; fails with \"<message> : Tensor had NaN values\" (or Inf) when x is not "
                       "finite. Its gradient is checked the same way."});

  // Broadcasting and its reverse. Summing counts one flop per input element, like Sum;
  // broadcasting copies (MeanGrad divides: one per output element).
  registry.add({.name = "SumToShape",
                .num_inputs = 2,
                .shape = &sum_to_shape_shape,
                .kernel = &sum_to_shape_kernel,
                .flops = [](const CostContext& c) { return std::max<int64_t>(0, c.input_shapes[0].num_elements()); },
                .gradient = &sum_to_shape_grad,
                .doc = "Inputs (x, shape: 1-D int32/int64). x summed over the dims along which shape broadcasts to "
                       "x's shape: the gradient of broadcasting. Forwards x when nothing is summed."});
  registry.add({.name = "BroadcastTo",
                .num_inputs = 2,
                .shape = &broadcast_to_shape,
                .kernel = &broadcast_to_kernel<false>,
                .flops = &no_float_ops,
                .gradient = &broadcast_to_grad,
                .doc = "Inputs (x, shape: 1-D int32/int64). x broadcast to shape (NumPy rules)."});
  registry.add({.name = "MeanGrad",
                .num_inputs = 2,
                .shape = &broadcast_to_shape,
                .kernel = &broadcast_to_kernel<true>,
                .flops = &elementwise_flops,
                .not_differentiable = true,
                .doc = "Inputs (grad, shape: 1-D int32/int64). grad broadcast to shape, divided by the number of "
                       "output elements per grad element: the gradient of Mean."});

  // Backward ops. The (y, dy) ones broadcast like any binary op (they never need to). None has a
  // gradient of its own: second-order gradients are not supported.
  registry.add(not_differentiable(
      binary_op<TanhGradOp>("TanhGrad", "Inputs (y, dy): dy * (1 - y^2), the gradient of y = tanh(x).")));
  registry.add(not_differentiable(
      binary_op<SigmoidGradOp>("SigmoidGrad", "Inputs (y, dy): dy * y * (1 - y), the gradient of y = sigmoid(x).")));
  registry.add(not_differentiable(
      binary_op<SqrtGradOp>("SqrtGrad", "Inputs (y, dy): dy * 0.5 / y, the gradient of y = sqrt(x).")));
  registry.add(not_differentiable(
      binary_op<RsqrtGradOp>("RsqrtGrad", "Inputs (y, dy): dy * -0.5 * y^3, the gradient of y = rsqrt(x).")));
  for (const auto& [name, kernel, what] :
       {std::tuple{"MaximumGrad", &select_grad_kernel<GreaterEqual>, "maximum(x, y): where x >= y"},
        std::tuple{"MinimumGrad", &select_grad_kernel<LessEqual>, "minimum(x, y): where x <= y"}})
    registry.add({.name = name,
                  .num_inputs = 3,
                  .shape = &select_grad_shape,
                  .kernel = kernel,
                  .flops = &elementwise_flops,
                  .not_differentiable = true,
                  .doc = std::string("Inputs (grad, x, y), attr input (0: x, 1: y). The gradient grad of ") + what +
                         " it goes to x, elsewhere to y; 0 for the other input. In grad's shape (not summed to "
                         "the input's)."});
}

}  // namespace stepscope
