#include "stepscope/ops/reduction_ops.h"

#include <climits>
#include <span>
#include <string>
#include <type_traits>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/reduce.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

namespace {

int32_t axis_to_int32(std::string_view op, int64_t axis) {
  if (axis < INT32_MIN || axis > INT32_MAX)
    throw InvalidArgumentError("[" + std::string(op) + "] axis " + std::to_string(axis) + " is out of range");
  return static_cast<int32_t>(axis);
}

// The axes argument as a Const beside the op. It is not named "Sum/reduction_indices" as in
// TensorFlow because a builder cannot learn the op node's final name before adding it.
Output axes_constant(const Scope& scope, const Tensor& value, std::string_view name, const CallSite& site) {
  // with_name_scope("") drops a with_op_name meant for the reduction itself.
  return scope.with_name_scope("").add_node(op_def("Const"), {}, {{"value", value}}, site, name)->output(0);
}

Output reduction(const Scope& scope, std::string_view op, Output x, std::vector<int64_t> axes, bool keep_dims,
                 const CallSite& site) {
  AttrMap attrs{{"keep_dims", keep_dims}};
  if (axes.empty()) {
    if (x && x.shape().known_rank())
      for (int i = 0; i < x.shape().rank(); ++i) axes.push_back(i);
    else
      attrs.set("reduce_all", true);
  }
  std::vector<int32_t> values;
  for (int64_t a : axes) values.push_back(axis_to_int32(op, a));
  const Tensor value = Tensor::from_vector<int32_t>(values, Shape{static_cast<int64_t>(values.size())});
  Output indices = axes_constant(scope, value, "reduction_indices", site);
  return scope.add_node(op_def(op), {x, indices}, std::move(attrs), site)->output(0);
}

}  // namespace

Output reduce_sum(const Scope& scope, Output x, std::vector<int64_t> axes, bool keep_dims, CallSite site) {
  return reduction(scope, "Sum", x, std::move(axes), keep_dims, site);
}
Output reduce_mean(const Scope& scope, Output x, std::vector<int64_t> axes, bool keep_dims, CallSite site) {
  return reduction(scope, "Mean", x, std::move(axes), keep_dims, site);
}
Output reduce_max(const Scope& scope, Output x, std::vector<int64_t> axes, bool keep_dims, CallSite site) {
  return reduction(scope, "Max", x, std::move(axes), keep_dims, site);
}

Output argmax(const Scope& scope, Output x, int64_t axis, DType output_type, CallSite site) {
  Output dimension = axes_constant(scope, Tensor::scalar<int32_t>(axis_to_int32("ArgMax", axis)), "dimension", site);
  return scope.add_node(op_def("ArgMax"), {x, dimension}, {{"output_type", output_type}}, site)->output(0);
}

namespace {

bool is_reducible(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64;
}

std::vector<int64_t> axis_values(const Tensor& t) {
  std::vector<int64_t> v;
  if (t.dtype() == DType::kInt32)
    for (int32_t a : t.flat<int32_t>()) v.push_back(a);
  else
    for (int64_t a : t.flat<int64_t>()) v.push_back(a);
  return v;
}

std::string invalid_axis_message(int64_t axis, int rank) {
  return "Invalid reduction dimension " + std::to_string(axis) + " for input with " + std::to_string(rank) +
         " dimensions";
}

// The reduced flag of each dimension of a rank-`rank` input, or the error text.
bool reduced_dims(const std::vector<int64_t>& axes, int rank, std::vector<bool>& reduced, std::string& error) {
  reduced.assign(rank, false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      error = invalid_axis_message(a, rank);
      return false;
    }
    reduced[a < 0 ? a + rank : a] = true;
  }
  return true;
}

Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keep_dims) {
  Shape out;
  for (int d = 0; d < in.rank(); ++d) {
    if (!reduced[d])
      out.add_dim(in.dim(d));
    else if (keep_dims)
      out.add_dim(1);
  }
  return out;
}

void check_reduction_inputs(ShapeContext& c, std::string_view index_name) {
  if (!is_reducible(c.input_dtype(0)))
    c.fail("input must be float32, float64, int32 or int64, got " + std::string(dtype_name(c.input_dtype(0))));
  if (c.input_dtype(1) != DType::kInt32 && c.input_dtype(1) != DType::kInt64)
    c.fail(std::string(index_name) + " must be int32 or int64, got " + std::string(dtype_name(c.input_dtype(1))));
}

void reduction_shape(ShapeContext& c) {
  check_reduction_inputs(c, "reduction_indices");
  const Shape& axes_shape = c.input_shape(1);
  if (axes_shape.known_rank() && axes_shape.rank() > 1)
    c.fail("reduction_indices must be a scalar or a vector, got shape " + axes_shape.to_string());
  const bool keep_dims = c.node().attrs().get_or("keep_dims", false);
  const bool reduce_all = c.node().attrs().get_or("reduce_all", false);
  const DType dtype = c.input_dtype(0);
  const Shape& in = c.input_shape(0);
  if (!in.known_rank()) {
    c.set_output(0, dtype, reduce_all && !keep_dims ? Shape{} : Shape::unknown_rank());
    return;
  }
  const int rank = in.rank();
  std::vector<bool> reduced(rank, true);
  if (!reduce_all) {
    const Tensor* axes = c.input_constant(1);
    if (!axes) {
      // Which axes go is known only at run time: the rank survives only with keep_dims.
      if (!keep_dims) {
        c.set_output(0, dtype, Shape::unknown_rank());
        return;
      }
      Shape out;
      for (int d = 0; d < rank; ++d) out.add_dim(Shape::kUnknownDim);
      c.set_output(0, dtype, out);
      return;
    }
    std::string error;
    if (!reduced_dims(axis_values(*axes), rank, reduced, error)) c.fail(error);
  }
  c.set_output(0, dtype, reduced_shape(in, reduced, keep_dims));
}

int64_t one_per_input_element(const CostContext& c) { return std::max<int64_t>(0, c.input_shapes[0].num_elements()); }

template <template <typename> class Reducer, bool kMean>
void reduction_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int rank = x.rank();
  std::vector<bool> reduced(rank, true);
  if (!c.attrs().get_or("reduce_all", false)) {
    std::string error;
    if (!reduced_dims(axis_values(c.input(1)), rank, reduced, error)) c.fail(error);
  }
  const Shape out_shape = reduced_shape(x.shape(), reduced, c.attrs().get_or("keep_dims", false));
  int64_t count = 1;
  bool any = false;  // a reduced dimension of size != 1 (otherwise the values are the input's)
  for (int d = 0; d < rank; ++d)
    if (reduced[d]) count *= x.dim(d), any |= x.dim(d) != 1;
  if (!any) {
    c.set_output(0, x.reshaped(out_shape));
    return;
  }
  dispatch_numeric(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      c.fail("bool input is not supported");
    } else {
      Tensor& out = c.allocate_output(0, x.dtype(), out_shape);
      T* y = out.data<T>();
      const int64_t n = out.num_elements();
      kernels::reduce_axes<Reducer<T>>(c, x, reduced, y, n);
      if constexpr (kMean) {
        if constexpr (std::is_floating_point_v<T>) {
          const T divisor = static_cast<T>(count);
          for (int64_t i = 0; i < n; ++i) y[i] /= divisor;
        } else if (count == 0) {
          // Integer division by zero would trap; TensorFlow leaves this undefined.
          std::fill(y, y + n, T(0));
        } else {
          const T divisor = static_cast<T>(count);
          for (int64_t i = 0; i < n; ++i) y[i] /= divisor;
        }
      }
    }
  });
}

std::string argmax_range_message(int64_t axis, int rank) {
  return "Expected dimension in the range [" + std::to_string(-rank) + ", " + std::to_string(rank) + "), but got " +
         std::to_string(axis);
}

std::string empty_axis_message(int64_t axis, const Shape& shape) {
  return "Reduction axis " + std::to_string(axis) + " is empty in shape " + shape.to_string();
}

void argmax_shape(ShapeContext& c) {
  check_reduction_inputs(c, "dimension");
  const DType out_type = c.node().attrs().get_or("output_type", DType::kInt64);
  if (out_type != DType::kInt32 && out_type != DType::kInt64)
    c.fail("output_type must be int32 or int64, got " + std::string(dtype_name(out_type)));
  const Shape& dim_shape = c.input_shape(1);
  if (dim_shape.known_rank() && dim_shape.rank() != 0)
    c.fail("dimension must be a scalar, got shape " + dim_shape.to_string());
  const Shape& in = c.input_shape(0);
  const Tensor* dimension = c.input_constant(1);
  if (!in.known_rank() || (!dimension && in.rank() == 0)) {
    c.set_output(0, out_type, Shape::unknown_rank());
    return;
  }
  const int rank = in.rank();
  Shape out;
  if (!dimension) {
    for (int d = 0; d + 1 < rank; ++d) out.add_dim(Shape::kUnknownDim);
    c.set_output(0, out_type, out);
    return;
  }
  const int64_t axis = axis_values(*dimension).at(0);
  if (axis < -rank || axis >= rank) c.fail(argmax_range_message(axis, rank));
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  if (in.dim(a) == 0) c.fail(empty_axis_message(a, in));
  for (int d = 0; d < rank; ++d)
    if (d != a) out.add_dim(in.dim(d));
  c.set_output(0, out_type, out);
}

void argmax_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const int rank = x.rank();
  const Tensor& dimension = c.input(1);
  if (dimension.num_elements() != 1) c.fail("dimension must be a scalar, got shape " + dimension.shape().to_string());
  const int64_t axis = axis_values(dimension)[0];
  if (axis < -rank || axis >= rank) c.fail(argmax_range_message(axis, rank));
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  if (x.dim(a) == 0) c.fail(empty_axis_message(a, x.shape()));
  int64_t outer = 1, inner = 1;
  Shape out_shape;
  for (int d = 0; d < rank; ++d) {
    if (d < a) outer *= x.dim(d);
    if (d > a) inner *= x.dim(d);
    if (d != a) out_shape.add_dim(x.dim(d));
  }
  const DType out_type = c.attrs().get_or("output_type", DType::kInt64);
  Tensor& out = c.allocate_output(0, out_type, out_shape);
  if (out.num_elements() == 0) return;
  dispatch_numeric(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      c.fail("bool input is not supported");
    } else if (out_type == DType::kInt32) {
      kernels::argmax(c, x.data<T>(), outer, x.dim(a), inner, out.data<int32_t>());
    } else {
      kernels::argmax(c, x.data<T>(), outer, x.dim(a), inner, out.data<int64_t>());
    }
  });
}

// ----- Gradients ---------------------------------------------------------------------------

// The reduction_indices of reduction node n as a list for the builders ({} under reduce_all).
std::vector<int64_t> reduction_axes(const Node& n) {
  if (n.attrs().get_or("reduce_all", false)) return {};
  const Output& axes = n.input(1);
  if (axes.node->op_type() != "Const")
    throw UnimplementedError(node_error_message(n, "the gradient needs constant reduction_indices"));
  return axis_values(axes.node->attrs().get<Tensor>("value"));
}

// t (the reduction's output, or its gradient) with size-1 dims at the reduced axes, as keep_dims
// would have given it, so that it broadcasts against the input. Nothing to do with keep_dims,
// with a scalar (reduce_all), or when only leading axes were reduced ([2,3] summed over axis 0
// is a [3], which broadcasts to [2,3] as it is). Otherwise a Reshape to a static shape when at
// most one kept dim is unknown, else to the input's run-time shape with 1 at the reduced axes.
Output with_kept_dims(const Scope& s, const Node& n, Output t) {
  if (n.attrs().get_or("keep_dims", false) || n.attrs().get_or("reduce_all", false)) return t;
  const Output x = n.input(0);
  const Shape& xs = x.shape();
  if (!xs.known_rank()) throw UnimplementedError(node_error_message(n, "the gradient needs an input of known rank"));
  std::vector<bool> reduced;
  std::string error;
  if (!reduced_dims(reduction_axes(n), xs.rank(), reduced, error)) throw InvalidArgumentError(error);
  int d = 0;
  while (d < xs.rank() && reduced[d]) ++d;
  bool leading = true;
  for (; d < xs.rank(); ++d) leading &= !reduced[d];
  if (leading) return t;
  std::vector<int64_t> kept, keep_mask, reduced_ones;
  int unknown = 0;
  for (int i = 0; i < xs.rank(); ++i) {
    kept.push_back(reduced[i] ? 1 : xs.dim(i));
    unknown += kept.back() < 0;
    keep_mask.push_back(reduced[i] ? 0 : 1);
    reduced_ones.push_back(reduced[i] ? 1 : 0);
  }
  if (unknown <= 1) return reshape(s, t, kept);
  // shape(x) * keep_mask + reduced_ones: x's dims, 1 where reduced.
  const Shape v{xs.rank()};
  Output dims = add(s, mul(s, shape(s, x, DType::kInt64), constant(s, Tensor::from_vector<int64_t>(keep_mask, v))),
                    constant(s, Tensor::from_vector<int64_t>(reduced_ones, v)));
  return reshape(s, t, dims);
}

// True when the reduction provably changed nothing: its output has the input's fully known shape.
bool reduces_nothing(const Node& n) {
  const Shape& xs = n.input(0).shape();
  return xs.fully_defined() && xs == n.output_shape(0);
}

std::vector<Output> sum_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  if (reduces_nothing(n)) return {dz[0], Output{}};
  return {broadcast_to(s, with_kept_dims(s, n, dz[0]), shape_of(s, n.input(0))), Output{}};
}

// One fused MeanGrad: broadcast and division by the count in a single pass, the count taken
// from the run-time shapes.
std::vector<Output> mean_grad_rule(const Scope& s, const Node& n, std::span<const Output> dz) {
  if (reduces_nothing(n)) return {dz[0], Output{}};
  return {mean_grad(s, with_kept_dims(s, n, dz[0]), shape_of(s, n.input(0))), Output{}};
}

// TensorFlow's _MinOrMaxGrad: the gradient goes to the elements equal to the max, split
// equally among ties.
std::vector<Output> max_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0);
  const Output indicators = cast(s, equal(s, x, with_kept_dims(s, n, n.output(0))), x.dtype());
  const Output count = reduce_sum(s, indicators, reduction_axes(n), /*keep_dims=*/true);
  return {mul(s, div(s, indicators, count), with_kept_dims(s, n, dz[0])), Output{}};
}

}  // namespace

void register_reduction_ops(OpRegistry& registry) {
  const std::string common =
      " over the axes listed by input 1 (reduction_indices: int32/int64 scalar or vector, negative axes count "
      "from the end; empty reduces nothing unless attr reduce_all). Attr keep_dims keeps reduced axes with size 1.";
  registry.add({.name = "Sum",
                .num_inputs = 2,
                .shape = reduction_shape,
                .kernel = reduction_kernel<kernels::SumReducer, false>,
                .flops = one_per_input_element,
                .gradient = sum_grad,
                .doc = "Sum of the elements" + common + " Float sums are pairwise."});
  registry.add({.name = "Mean",
                .num_inputs = 2,
                .shape = reduction_shape,
                .kernel = reduction_kernel<kernels::SumReducer, true>,
                .flops = one_per_input_element,
                .gradient = mean_grad_rule,
                .doc = "Mean of the elements" + common + " Integer means truncate."});
  registry.add({.name = "Max",
                .num_inputs = 2,
                .shape = reduction_shape,
                .kernel = reduction_kernel<kernels::MaxReducer, false>,
                .flops = one_per_input_element,
                .gradient = max_grad,
                .doc = "Maximum of the elements" + common + " NaN if any element is NaN."});
  registry.add({.name = "ArgMax",
                .num_inputs = 2,
                .shape = argmax_shape,
                .kernel = argmax_kernel,
                .flops = one_per_input_element,
                .not_differentiable = true,
                .doc = "Index of the largest element along the axis given by input 1 (dimension: int32/int64 "
                       "scalar; negative counts from the end), first index on ties, first NaN if any. Attr "
                       "output_type: int64 (default) or int32."});
}

}  // namespace stepscope
