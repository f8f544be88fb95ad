#include "stepscope/ops/array_ops.h"

#include <algorithm>
#include <cstring>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/internal/array_block_ops.h"
#include "stepscope/ops/internal/cast.h"
#include "stepscope/ops/internal/op_util.h"
#include "stepscope/ops/internal/transpose.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

using op_util::arg_const;
using op_util::constant_input;
using op_util::expect_index_vector;
using op_util::expect_not_string;
using op_util::index_values;
using op_util::int64_vector;
using op_util::is_index_dtype;
using op_util::unknown_dims;

std::string str(DType d) { return std::string(dtype_name(d)); }
std::string join(std::span<const int64_t> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// ----- Reshape -----------------------------------------------------------------------------

// The shape Reshape produces from `sizes` for an input of `in_elements` values (-1: unknown, in
// which case a -1 size stays unknown). Returns the error text, empty when fine.
std::string reshape_target(std::span<const int64_t> sizes, int64_t in_elements, Shape& out) {
  if (sizes.size() > static_cast<size_t>(Shape::kMaxRank))
    return "requested shape has rank " + std::to_string(sizes.size()) + ", more than the maximum " +
           std::to_string(Shape::kMaxRank);
  out = Shape();
  int unknown = -1;
  int64_t product = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t s = sizes[i];
    if (s == -1) {
      if (unknown >= 0)
        return "Only one input size may be -1, not both " + std::to_string(unknown) + " and " + std::to_string(i);
      unknown = static_cast<int>(i);
    } else if (s < 0) {
      return "Size " + std::to_string(i) + " must be non-negative, not " + std::to_string(s);
    } else if (__builtin_mul_overflow(product, s, &product)) {
      return "requested shape has more elements than a 64-bit count can hold (size " + std::to_string(i) + " is " +
             std::to_string(s) + "); check the sizes";
    }
    out.add_dim(s);
  }
  if (in_elements < 0) return {};
  const std::string values = "Input to reshape is a tensor with " + std::to_string(in_elements) + " values";
  if (unknown >= 0) {
    if (product == 0)
      return "Reshape cannot infer the missing input size for an empty tensor unless all specified input sizes "
             "are non-zero";
    if (in_elements % product != 0)
      return values + ", but the requested shape requires a multiple of " + std::to_string(product);
    out.set_dim(unknown, in_elements / product);
  } else if (product != in_elements) {
    return values + ", but the requested shape has " + std::to_string(product);
  }
  return {};
}

void reshape_shape(ShapeContext& c) {
  expect_index_vector(c, 1, "shape");
  if (const Tensor* t = c.input_constant(1)) {
    Shape out;
    std::string error = reshape_target(index_values(*t), c.input_shape(0).num_elements(), out);
    if (!error.empty()) c.fail(error);
    c.set_output(0, c.input_dtype(0), out);
  } else if (const Output& producer = c.node().input(1); producer.node->op_type() == "Shape") {
    // reshape(t, shape(y)) (as gradients do): y's static shape, checked when fully known.
    const Shape& target = producer.node->input(0).shape();
    if (target.fully_defined()) {
      Shape out;
      std::string error = reshape_target(target.dims(), c.input_shape(0).num_elements(), out);
      if (!error.empty()) c.fail(error);
    }
    c.set_output(0, c.input_dtype(0), target);
  } else {
    const Shape& s = c.input_shape(1);
    c.set_output(0, c.input_dtype(0), unknown_dims(s.known_rank() ? s.dim(0) : -1));
  }
}

void reshape_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 1) c.fail("shape must be 1-D, not " + c.input(1).shape().to_string());
  Shape out;
  std::string error = reshape_target(index_values(c.input(1)), x.num_elements(), out);
  if (!error.empty()) c.fail(error);
  c.set_output(0, x.reshaped(out));
}

// ----- Transpose ---------------------------------------------------------------------------

std::vector<int64_t> reversed_dims(int rank) {
  std::vector<int64_t> p(rank);
  for (int i = 0; i < rank; ++i) p[i] = rank - 1 - i;
  return p;
}

// TensorFlow's texts for an invalid permutation of `rank` dims; empty when valid.
std::string check_perm(std::span<const int64_t> perm, int rank) {
  if (static_cast<int64_t>(perm.size()) != rank)
    return "transpose expects a vector of size " + std::to_string(rank) + ". But input(1) is a vector of size " +
           std::to_string(perm.size());
  std::array<bool, Shape::kMaxRank> seen{};
  for (int64_t d : perm) {
    if (d < 0 || d >= rank) return std::to_string(d) + " is out of range [0 .. " + std::to_string(rank) + ")";
    seen[d] = true;
  }
  for (int i = 0; i < rank; ++i)
    if (!seen[i]) return std::to_string(i) + " is missing from {" + join(perm) + "}.";
  return {};
}

void transpose_shape(ShapeContext& c) {
  expect_not_string(c, 0);
  expect_index_vector(c, 1, "perm");
  const Shape& xs = c.input_shape(0);
  const DType dtype = c.input_dtype(0);
  const Tensor* t = c.input_constant(1);
  if (!t) {
    const Shape& ps = c.input_shape(1);
    c.set_output(0, dtype, unknown_dims(xs.known_rank() ? xs.rank() : ps.known_rank() ? ps.dim(0) : -1));
    return;
  }
  std::vector<int64_t> perm = index_values(*t);
  if (perm.empty() && !xs.known_rank()) return c.set_output(0, dtype, Shape::unknown_rank());
  if (perm.empty()) perm = reversed_dims(xs.rank());
  const int rank = xs.known_rank() ? xs.rank() : static_cast<int>(std::min<size_t>(perm.size(), Shape::kMaxRank));
  std::string error = check_perm(perm, rank);
  if (!error.empty()) c.fail(error);
  Shape out;
  for (int64_t d : perm) out.add_dim(xs.known_rank() ? xs.dim(static_cast<int>(d)) : Shape::kUnknownDim);
  c.set_output(0, dtype, out);
}

void transpose_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 1) c.fail("perm must be 1-D, not " + c.input(1).shape().to_string());
  std::vector<int64_t> perm = index_values(c.input(1));
  if (perm.empty()) perm = reversed_dims(x.rank());
  std::string error = check_perm(perm, x.rank());
  if (!error.empty()) c.fail(error);
  Shape out_shape;
  std::array<int, Shape::kMaxRank> p{};
  for (int k = 0; k < x.rank(); ++k) {
    p[k] = static_cast<int>(perm[k]);
    out_shape.add_dim(x.dim(p[k]));
  }
  const TransposePlan plan = plan_transpose(x.shape(), std::span<const int>(p.data(), x.rank()));
  if (plan.identity()) return c.set_output(0, x.reshaped(out_shape));  // no data moves
  Tensor& out = c.allocate_output(0, x.dtype(), out_shape);
  transpose_into(c, x, plan, out);
}

// ----- ConcatV2 ----------------------------------------------------------------------------

// Output shape of concatenating `shapes` along `axis` (known parts checked); `norm_axis` gets the
// axis in [0, rank) (-1 when the rank is unknown). Returns the error text, empty when fine.
std::string concat_target(std::span<const Shape> shapes, int64_t axis, Shape& out, int& norm_axis) {
  int rank = -1, ref = -1;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].known_rank()) continue;
    if (ref < 0) {
      ref = static_cast<int>(i);
      rank = shapes[i].rank();
    } else if (shapes[i].rank() != rank) {
      return "ConcatOp : Ranks of all input tensors should match: shape[" + std::to_string(ref) +
             "] = " + shapes[ref].to_string() + " vs. shape[" + std::to_string(i) + "] = " + shapes[i].to_string();
    }
  }
  norm_axis = -1;
  if (rank < 0) {
    out = Shape::unknown_rank();
    return {};
  }
  if (rank == 0) return "Can't concatenate scalars (use tf.stack instead)";
  if (axis < -rank || axis >= rank)
    return "ConcatOp : Expected concatenating dimensions in the range [" + std::to_string(-rank) + ", " +
           std::to_string(rank) + "), but got " + std::to_string(axis);
  norm_axis = static_cast<int>(axis < 0 ? axis + rank : axis);
  out = unknown_dims(rank);
  int64_t axis_sum = 0;
  for (int d = 0; d < rank; ++d) {
    int known_from = -1;
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!shapes[i].known_rank()) continue;
      const int64_t dim = shapes[i].dim(d);
      if (d == norm_axis) {
        axis_sum = (dim < 0 || axis_sum < 0) ? -1 : axis_sum + dim;
        continue;
      }
      if (dim < 0) continue;
      if (known_from < 0) {
        known_from = static_cast<int>(i);
        out.set_dim(d, dim);
      } else if (dim != out.dim(d)) {
        return "ConcatOp : Dimensions of inputs should match: shape[" + std::to_string(known_from) +
               "] = " + shapes[known_from].to_string() + " vs. shape[" + std::to_string(i) +
               "] = " + shapes[i].to_string();
      }
    }
  }
  // An input of unknown rank may add any amount along the axis.
  for (const Shape& s : shapes)
    if (!s.known_rank()) axis_sum = -1;
  out.set_dim(norm_axis, axis_sum);
  return {};
}

void concat_shape(ShapeContext& c) {
  const int n = c.num_inputs() - 1;
  if (n < 1) c.fail("expects at least one value and the axis, got " + std::to_string(c.num_inputs()) + " inputs");
  const DType dtype = c.input_dtype(0);
  if (dtype == DType::kString) c.fail("values of dtype string are not supported");
  for (int i = 1; i < n; ++i)
    if (c.input_dtype(i) != dtype)
      c.fail("values[" + std::to_string(i) + "] has dtype " + str(c.input_dtype(i)) + ", but values[0] has dtype " +
             str(dtype));
  if (!is_index_dtype(c.input_dtype(n))) c.fail("axis must be int32 or int64, got " + str(c.input_dtype(n)));
  const Shape& as = c.input_shape(n);
  if (as.known_rank() && as.rank() != 0) c.fail("axis must be a scalar, got shape " + as.to_string());
  std::vector<Shape> shapes;
  for (int i = 0; i < n; ++i) shapes.push_back(c.input_shape(i));
  if (const Tensor* t = c.input_constant(n)) {
    Shape out;
    int axis;
    std::string error = concat_target(shapes, index_values(*t).at(0), out, axis);
    if (!error.empty()) c.fail(error);
    c.set_output(0, dtype, out);
    return;
  }
  int rank = -1;
  for (const Shape& s : shapes)
    if (s.known_rank()) rank = s.rank();
  c.set_output(0, dtype, unknown_dims(rank));
}

void concat_kernel(KernelContext& c) {
  const int n = c.num_inputs() - 1;
  const Tensor& axis_t = c.input(n);
  if (axis_t.num_elements() != 1) c.fail("axis must be a scalar, got shape " + axis_t.shape().to_string());
  std::vector<Shape> shapes;
  shapes.reserve(n);
  for (int i = 0; i < n; ++i) shapes.push_back(c.input(i).shape());
  Shape out_shape;
  int axis;
  std::string error = concat_target(shapes, index_values(axis_t)[0], out_shape, axis);
  if (!error.empty()) c.fail(error);
  if (n == 1) return c.set_output(0, c.input(0));
  Tensor& out = c.allocate_output(0, c.input(0).dtype(), out_shape);
  if (out.num_elements() == 0) return;
  const int64_t esize = static_cast<int64_t>(dtype_size(out.dtype()));
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= out_shape.dim(d);
  const int64_t row_bytes = out.num_elements() / outer * esize;
  std::vector<std::pair<const char*, int64_t>> parts;  // (data, bytes per outer row)
  parts.reserve(n);
  for (int i = 0; i < n; ++i) {
    const Tensor& t = c.input(i);
    if (t.num_elements() > 0)
      parts.emplace_back(static_cast<const char*>(t.raw_data()), t.num_elements() / outer * esize);
  }
  char* dst = static_cast<char*>(out.raw_data());
  c.parallel_for(outer, 1 + row_bytes / 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      char* o = dst + r * row_bytes;
      for (const auto& [src, bytes] : parts) {
        std::memcpy(o, src + r * bytes, static_cast<size_t>(bytes));
        o += bytes;
      }
    }
  });
}

// ----- Fill, ZerosLike, OnesLike -------------------------------------------------------------

template <typename T>
void fill_tensor(const KernelContext& c, Tensor& out, T value) {
  T* p = out.data<T>();
  c.parallel_for(out.num_elements(), 1, [=](int64_t begin, int64_t end) { std::fill(p + begin, p + end, value); });
}

void fill_shape(ShapeContext& c) {
  expect_index_vector(c, 0, "dims");
  expect_not_string(c, 1);
  const Shape& vs = c.input_shape(1);
  if (vs.known_rank() && vs.rank() != 0) c.fail("value must be a scalar, got shape " + vs.to_string());
  const DType dtype = c.input_dtype(1);
  if (const Tensor* t = c.input_constant(0)) {
    std::vector<int64_t> dims = index_values(*t);
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
      c.fail("dims has " + std::to_string(dims.size()) + " entries, more than the maximum rank " +
             std::to_string(Shape::kMaxRank));
    for (int64_t d : dims)
      if (d < 0) c.fail("Fill dimensions must be >= 0, got [" + join(dims) + "]");
    c.set_output(0, dtype, Shape(dims));
  } else {
    const Shape& ds = c.input_shape(0);
    c.set_output(0, dtype, unknown_dims(ds.known_rank() ? ds.dim(0) : -1));
  }
}

void fill_kernel(KernelContext& c) {
  const Tensor& dims_t = c.input(0);
  const Tensor& value = c.input(1);
  if (dims_t.rank() != 1) c.fail("dims must be a vector, got shape " + dims_t.shape().to_string());
  if (value.rank() != 0) c.fail("value must be a scalar, got shape " + value.shape().to_string());
  std::vector<int64_t> dims = index_values(dims_t);
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    c.fail("dims has " + std::to_string(dims.size()) + " entries, more than the maximum rank " +
           std::to_string(Shape::kMaxRank));
  for (int64_t d : dims)
    if (d < 0) c.fail("Fill dimensions must be >= 0, got [" + join(dims) + "]");
  Tensor& out = c.allocate_output(0, value.dtype(), Shape(dims));
  dispatch_numeric(value.dtype(), [&](auto zero) {
    using T = decltype(zero);
    fill_tensor<T>(c, out, value.data<T>()[0]);
  });
}

void same_as_input_shape(ShapeContext& c) {
  expect_not_string(c, 0);
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
}

template <int kValue>
void constant_like_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  Tensor& out = c.allocate_output(0, x.dtype(), x.shape());
  dispatch_numeric(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    fill_tensor<T>(c, out, static_cast<T>(kValue));
  });
}

// ----- Cast --------------------------------------------------------------------------------

void cast_shape(ShapeContext& c) {
  const DType to = c.node().attrs().get<DType>("DstT");
  if (c.input_dtype(0) == DType::kString || to == DType::kString)
    c.fail("Cast " + str(c.input_dtype(0)) + " to " + str(to) + " is not supported");
  c.set_output(0, to, c.input_shape(0));
}

void cast_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const DType to = c.attrs().get<DType>("DstT");
  if (x.dtype() == to) return c.set_output(0, x);
  Tensor& out = c.allocate_output(0, to, x.shape());
  dispatch_numeric(x.dtype(), [&](auto from_zero) {
    using From = decltype(from_zero);
    dispatch_numeric(to, [&](auto to_zero) {
      using To = decltype(to_zero);
      const From* in = x.data<From>();
      To* o = out.data<To>();
      c.parallel_for(x.num_elements(), 1, [=](int64_t begin, int64_t end) {
        kernels::cast_range<To, From>(in + begin, o + begin, end - begin);
      });
    });
  });
}

// ----- Shape -------------------------------------------------------------------------------

void shape_shape(ShapeContext& c) {
  const DType out = c.node().attrs().get<DType>("out_type");
  if (!is_index_dtype(out)) c.fail("out_type must be int32 or int64, got " + str(out));
  const Shape& xs = c.input_shape(0);
  c.set_output(0, out, Shape{xs.known_rank() ? xs.rank() : Shape::kUnknownDim});
}

void shape_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const DType out_type = c.attrs().get<DType>("out_type");
  Tensor& out = c.allocate_output(0, out_type, Shape{x.rank()});
  for (int i = 0; i < x.rank(); ++i) {
    if (out_type == DType::kInt64) {
      out.data<int64_t>()[i] = x.dim(i);
    } else {
      if (x.dim(i) > INT32_MAX)
        c.fail("Shape output type is 32-bit but dim " + std::to_string(i) + " is " + std::to_string(x.dim(i)));
      out.data<int32_t>()[i] = static_cast<int32_t>(x.dim(i));
    }
  }
}

// ----- ConcatOffset ------------------------------------------------------------------------

void concat_offset_shape(ShapeContext& c) {
  const int n = c.num_inputs() - 1;
  if (n < 1) c.fail("expects the axis and at least one shape, got " + std::to_string(c.num_inputs()) + " inputs");
  if (!is_index_dtype(c.input_dtype(0))) c.fail("axis must be int32 or int64, got " + str(c.input_dtype(0)));
  const DType dtype = c.input_dtype(1);
  for (int i = 1; i <= n; ++i) {
    expect_index_vector(c, i, "shape");
    if (c.input_dtype(i) != dtype)
      c.fail("shape " + std::to_string(i - 1) + " has dtype " + str(c.input_dtype(i)) + ", but shape 0 has " +
             str(dtype));
  }
  for (int i = 0; i < n; ++i) c.set_output(i, dtype, c.input_shape(i + 1));
}

void concat_offset_kernel(KernelContext& c) {
  const int n = c.num_inputs() - 1;
  if (c.input(0).num_elements() != 1) c.fail("axis must be a scalar, got shape " + c.input(0).shape().to_string());
  const int64_t axis_arg = index_values(c.input(0))[0];
  const std::vector<int64_t> first = index_values(c.input(1));
  const int64_t rank = static_cast<int64_t>(first.size());
  if (axis_arg < -rank || axis_arg >= rank)
    c.fail("Concat dim is out of range: " + std::to_string(axis_arg) + " vs. " + std::to_string(rank));
  const int64_t axis = axis_arg < 0 ? axis_arg + rank : axis_arg;
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const Tensor& shape_t = c.input(i + 1);
    const std::vector<int64_t> dims = index_values(shape_t);
    if (static_cast<int64_t>(dims.size()) != rank)
      c.fail("input " + std::to_string(i) + " should contain " + std::to_string(rank) + " elements, but got " +
             std::to_string(dims.size()));
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && dims[d] != first[d])
        c.fail("All dimensions except " + std::to_string(axis) + " must match. Input " + std::to_string(i) +
               " has shape [" + join(dims) + "] and doesn't match input 0 with shape [" + join(first) + "].");
    Tensor& out = c.allocate_output(i, shape_t.dtype(), shape_t.shape());
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t v = d == axis ? offset : 0;
      if (out.dtype() == DType::kInt32)
        out.data<int32_t>()[d] = static_cast<int32_t>(v);
      else
        out.data<int64_t>()[d] = v;
    }
    offset += dims[axis];
  }
}

// ----- Gradients ---------------------------------------------------------------------------

using Grads = std::vector<Output>;

Grads identity_grad(const Scope&, const Node&, std::span<const Output> dz) { return {dz[0]}; }

// Back to x's shape: a static Reshape when at most one dim of x is unknown, else shape(x).
Grads reshape_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output x = n.input(0);
  const Shape& xs = x.shape();
  if (xs.fully_defined() && dz[0].shape() == xs) return {dz[0], Output{}};
  if (xs.known_rank()) {
    int unknown = 0;
    for (int64_t d : xs.dims()) unknown += d < 0;
    if (unknown <= 1) return {reshape(s, dz[0], xs.dim_vector()), Output{}};
  }
  return {reshape(s, dz[0], shape(s, x, DType::kInt64)), Output{}};
}

Grads transpose_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const std::vector<int64_t> perm = index_values(constant_input(n, 1, "perm"));
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {transpose(s, dz[0], inverse), Output{}};  // an empty perm (reversal) is its own inverse
}

// Each value's block of the gradient. With the axis and the values' sizes along it known, the
// Slice arguments are Consts (size -1 elsewhere: the whole dim); otherwise ConcatOffset and
// shape() give them at run time.
Grads concat_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const int count = n.num_inputs() - 1;
  Grads grads(n.num_inputs());
  if (count == 1) {
    grads[0] = dz[0];
    return grads;
  }
  const Output axis = n.input(count);
  int rank = -1;
  for (int i = 0; i < count; ++i)
    if (n.input(i).shape().known_rank()) rank = n.input(i).shape().rank();
  bool offsets_known = rank > 0 && axis.node->op_type() == "Const";
  int64_t ax = 0;
  if (offsets_known) {
    ax = index_values(axis.node->attrs().get<Tensor>("value"))[0];
    if (ax < 0) ax += rank;
    for (int i = 0; i + 1 < count; ++i) {
      const Shape& xs = n.input(i).shape();
      offsets_known &= xs.known_rank() && xs.dim(static_cast<int>(ax)) >= 0;
    }
  }
  if (offsets_known) {
    int64_t offset = 0;
    for (int i = 0; i < count; ++i) {
      const Shape& xs = n.input(i).shape();
      std::vector<int64_t> begin(rank, 0);
      begin[ax] = offset;
      const int64_t extent = xs.known_rank() ? xs.dim(static_cast<int>(ax)) : -1;
      if (extent >= 0) {
        std::vector<int64_t> size(rank, -1);
        size[ax] = extent;
        grads[i] = slice(s, dz[0], begin, size);
        offset += extent;
      } else {  // the last value (the only one whose extent the offsets do not need)
        grads[i] = slice(s, dz[0], begin, std::vector<int64_t>(rank, -1));
      }
    }
    return grads;
  }
  std::vector<Output> shapes;
  for (int i = 0; i < count; ++i) shapes.push_back(shape_of(s, n.input(i)));
  const std::vector<Output> offsets = concat_offset(s, axis, shapes);
  for (int i = 0; i < count; ++i) grads[i] = slice(s, dz[0], offsets[i], shapes[i]);
  return grads;
}

// TensorFlow's _CastGrad: only between floating-point dtypes.
Grads cast_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const DType from = n.input(0).dtype();
  if (!is_floating(from) || !is_floating(n.output_dtype(0))) return {Output{}};
  return {cast(s, dz[0], from)};
}

Grads fill_grad(const Scope& s, const Node&, std::span<const Output> dz) { return {Output{}, reduce_sum(s, dz[0])}; }

// TensorFlow's NotDifferentiable: no gradient flows through, and none is an error.
Grads not_differentiable(const Scope&, const Node& n, std::span<const Output>) { return Grads(n.num_inputs()); }

}  // namespace

// ----- Builders ----------------------------------------------------------------------------

Output placeholder(const Scope& scope, DType dtype, const Shape& shape, CallSite site) {
  return scope.add_node(op_def("Placeholder"), {}, {{"dtype", dtype}, {"shape", shape}}, site)->output(0);
}

Output constant(const Scope& scope, const Tensor& value, CallSite site) {
  if (!value.initialized()) throw InvalidArgumentError("[Const] constant value is an uninitialized tensor");
  return scope.add_node(op_def("Const"), {}, {{"value", value}}, site)->output(0);
}

Output identity(const Scope& scope, Output input, CallSite site) {
  return scope.add_node(op_def("Identity"), {input}, {}, site)->output(0);
}

Output reshape(const Scope& scope, Output x, std::vector<int64_t> shape, CallSite site) {
  return reshape(scope, x, arg_const(scope, "Reshape", "shape", int64_vector(shape), site), site);
}

Output reshape(const Scope& scope, Output x, Output shape, CallSite site) {
  return scope.add_node(op_def("Reshape"), {x, shape}, {}, site)->output(0);
}

Output transpose(const Scope& scope, Output x, std::vector<int64_t> perm, CallSite site) {
  std::vector<int32_t> p(perm.begin(), perm.end());
  Output perm_const = arg_const(scope, "Transpose", "perm", Tensor::from_vector<int32_t>(p), site);
  return scope.add_node(op_def("Transpose"), {x, perm_const}, {}, site)->output(0);
}

Output concat(const Scope& scope, std::vector<Output> values, int64_t axis, CallSite site) {
  if (values.empty()) throw InvalidArgumentError("[ConcatV2] concat needs at least one value");
  values.push_back(arg_const(scope, "ConcatV2", "axis", Tensor::scalar<int32_t>(static_cast<int32_t>(axis)), site));
  return scope.add_node(op_def("ConcatV2"), std::move(values), {}, site)->output(0);
}

Output fill(const Scope& scope, std::vector<int64_t> dims, Output value, CallSite site) {
  return fill(scope, arg_const(scope, "Fill", "dims", int64_vector(dims), site), value, site);
}

Output fill(const Scope& scope, std::vector<int64_t> dims, const Tensor& value, CallSite site) {
  Output dims_const = arg_const(scope, "Fill", "dims", int64_vector(dims), site);
  Output value_const = arg_const(scope, "Fill", "value", value, site);
  return fill(scope, dims_const, value_const, site);
}

Output fill(const Scope& scope, Output dims, Output value, CallSite site) {
  return scope.add_node(op_def("Fill"), {dims, value}, {}, site)->output(0);
}

Output zeros_like(const Scope& scope, Output x, CallSite site) {
  return scope.add_node(op_def("ZerosLike"), {x}, {}, site)->output(0);
}

Output ones_like(const Scope& scope, Output x, CallSite site) {
  return scope.add_node(op_def("OnesLike"), {x}, {}, site)->output(0);
}

Output cast(const Scope& scope, Output x, DType to, CallSite site) {
  return scope.add_node(op_def("Cast"), {x}, {{"SrcT", x.dtype()}, {"DstT", to}}, site)->output(0);
}

Output shape(const Scope& scope, Output x, DType out_type, CallSite site) {
  return scope.add_node(op_def("Shape"), {x}, {{"out_type", out_type}}, site)->output(0);
}

std::vector<Output> concat_offset(const Scope& scope, Output axis, std::vector<Output> shapes, CallSite site) {
  shapes.insert(shapes.begin(), axis);
  Node* node = scope.add_node(op_def("ConcatOffset"), std::move(shapes), {}, site);
  std::vector<Output> offsets;
  for (int i = 0; i < node->num_outputs(); ++i) offsets.push_back(node->output(i));
  return offsets;
}

// ----- Registration ------------------------------------------------------------------------

void register_array_ops(OpRegistry& registry) {
  register_array_block_ops(registry);
  registry.add({.name = "Placeholder",
                .num_inputs = 0,
                .shape =
                    [](ShapeContext& c) {
                      c.set_output(0, c.node().attrs().get<DType>("dtype"), c.node().attrs().get<Shape>("shape"));
                    },
                .kernel =
                    [](KernelContext& c) {
                      const auto& shape = c.attrs().get<Shape>("shape");
                      c.fail("You must feed a value for placeholder tensor '" + c.node().name() + "' with dtype " +
                             std::string(dtype_name(c.attrs().get<DType>("dtype"))) + " and shape " +
                             shape.to_string());
                    },
                .not_differentiable = true,
                .doc = "A value fed to Session::run."});
  registry.add({.name = "Const",
                .num_inputs = 0,
                .shape =
                    [](ShapeContext& c) {
                      const auto& v = c.node().attrs().get<Tensor>("value");
                      c.set_output(0, v.dtype(), v.shape());
                    },
                .kernel = [](KernelContext& c) { c.set_output(0, c.attrs().get<Tensor>("value")); },
                .not_differentiable = true,
                .doc = "A constant tensor (its buffer is shared, never copied, by each run)."});
  registry.add({.name = "Identity",
                .num_inputs = 1,
                .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
                .kernel = [](KernelContext& c) { c.set_output(0, c.input(0)); },
                .gradient = identity_grad,
                .doc = "Forwards its input (sharing the buffer)."});
  registry.add({.name = "Reshape",
                .num_inputs = 2,
                .shape = reshape_shape,
                .kernel = reshape_kernel,
                .gradient = reshape_grad,
                .doc = "Inputs (tensor, shape: 1-D int32/int64, one entry may be -1). The same elements in another "
                       "shape; shares the input's buffer."});
  registry.add({.name = "Transpose",
                .num_inputs = 2,
                .shape = transpose_shape,
                .kernel = transpose_kernel,
                .gradient = transpose_grad,
                .doc = "Inputs (x, perm: 1-D int32/int64). Output dim i is input dim perm[i]; an empty perm "
                       "reverses the dims. Forwards the buffer when no data moves."});
  registry.add({.name = "ConcatV2",
                .num_inputs = -1,
                .shape = concat_shape,
                .kernel = concat_kernel,
                .gradient = concat_grad,
                .doc = "Inputs (values..., axis: int32/int64 scalar). Joins the values along axis (negative counts "
                       "from the end)."});
  registry.add({.name = "Fill",
                .num_inputs = 2,
                .shape = fill_shape,
                .kernel = fill_kernel,
                .gradient = fill_grad,
                .doc = "Inputs (dims: 1-D int32/int64, value: scalar). A tensor of shape dims filled with value."});
  registry.add({.name = "ZerosLike",
                .num_inputs = 1,
                .shape = same_as_input_shape,
                .kernel = constant_like_kernel<0>,
                .gradient = not_differentiable,
                .doc = "Zeros (false for bool) of x's dtype and shape."});
  registry.add({.name = "OnesLike",
                .num_inputs = 1,
                .shape = same_as_input_shape,
                .kernel = constant_like_kernel<1>,
                .gradient = not_differentiable,
                .doc = "Ones (true for bool) of x's dtype and shape."});
  registry.add({.name = "Cast",
                .num_inputs = 1,
                .shape = cast_shape,
                .kernel = cast_kernel,
                .gradient = cast_grad,
                .doc = "Attr DstT (SrcT records the input dtype). Converts numbers and bools: float to int truncates "
                       "toward zero (NaN -> 0, out of range saturates), x != 0 to bool. Forwards when the dtypes "
                       "match."});
  registry.add({.name = "Shape",
                .num_inputs = 1,
                .shape = shape_shape,
                .kernel = shape_kernel,
                .not_differentiable = true,
                .doc = "Attr out_type (int32 or int64). The run-time shape of x as a 1-D tensor."});
  registry.add({.name = "ConcatOffset",
                .num_inputs = -1,
                .num_outputs = -1,
                .shape = concat_offset_shape,
                .kernel = concat_offset_kernel,
                .not_differentiable = true,
                .doc = "Inputs (axis, shapes...: 1-D int32/int64). Where each shape's tensor starts in their "
                       "concatenation along axis: one offset vector per shape."});
}

}  // namespace stepscope
