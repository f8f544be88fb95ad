// The array family's block ops: Slice, its gradient SliceGrad, and Split: taking blocks of a
// tensor and putting them back (registered with the rest of the family by register_array_ops).
#include "stepscope/ops/internal/array_block_ops.h"

#include <array>
#include <cstring>
#include <functional>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/op_util.h"
#include "stepscope/ops/math_ops.h"
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

// ----- Slice -------------------------------------------------------------------------------

std::string slice_args_message(int rank, const Shape& begin, const Shape& size) {
  return "Expected begin and size arguments to be 1-D tensors of size " + std::to_string(rank) + ", but got shapes " +
         begin.to_string() + " and " + size.to_string() + " instead.";
}

// Checks begin[d] and size[d] (-1: the rest) against a dim of `dim` elements (-1: unknown) and
// returns the slice's size along d (-1 when unknown); TensorFlow's texts on error.
int64_t slice_dim(const ShapeContext* sc, KernelContext* kc, int d, int64_t dim, int64_t b, int64_t size) {
  auto fail = [&](const std::string& m) {
    if (sc) sc->fail(m);
    kc->fail(m);
  };
  if (dim >= 0 && (b < 0 || b > dim))
    fail("Expected begin[" + std::to_string(d) + "] in [0, " + std::to_string(dim) + "], but got " + std::to_string(b));
  if (size == -1) return dim >= 0 ? dim - b : -1;
  if (size < 0)
    fail("Expected size[" + std::to_string(d) + "] to be -1 or non-negative, but got " + std::to_string(size));
  if (dim >= 0 && b + size > dim)
    fail("Expected size[" + std::to_string(d) + "] in [0, " + std::to_string(dim - b) + "], but got " +
         std::to_string(size));
  return size;
}

void slice_shape(ShapeContext& c) {
  expect_not_string(c, 0);
  expect_index_vector(c, 1, "begin");
  expect_index_vector(c, 2, "size");
  if (c.input_dtype(1) != c.input_dtype(2))
    c.fail("begin and size must have the same dtype, got " + str(c.input_dtype(1)) + " and " + str(c.input_dtype(2)));
  const Shape& xs = c.input_shape(0);
  const Shape &bs = c.input_shape(1), &ss = c.input_shape(2);
  int rank = xs.known_rank() ? xs.rank() : -1;
  for (const Shape& arg : {bs, ss})
    if (arg.known_rank() && arg.dim(0) >= 0) {
      if (rank < 0) rank = static_cast<int>(std::min<int64_t>(arg.dim(0), Shape::kMaxRank + 1));
      if (arg.dim(0) != rank) c.fail(slice_args_message(rank, bs, ss));
    }
  if (rank < 0) return c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
  if (rank > Shape::kMaxRank) c.fail(slice_args_message(rank, bs, ss));
  const Tensor* begin_const = c.input_constant(1);
  const Tensor* size_const = c.input_constant(2);
  const std::vector<int64_t> begin = begin_const ? index_values(*begin_const) : std::vector<int64_t>{};
  const std::vector<int64_t> size = size_const ? index_values(*size_const) : std::vector<int64_t>{};
  // slice(x, offsets, shape(y)) (as ConcatV2's gradient does): y's static shape.
  const Output& size_producer = c.node().input(2);
  const Shape* size_of = size_producer.node->op_type() == "Shape" ? &size_producer.node->input(0).shape() : nullptr;
  Shape out = unknown_dims(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = xs.known_rank() ? xs.dim(d) : -1;
    if (begin_const) slice_dim(&c, nullptr, d, dim, begin[d], -1);
    if (size_const)  // with an unknown begin, only what size alone tells
      out.set_dim(d, slice_dim(&c, nullptr, d, begin_const ? dim : -1, begin_const ? begin[d] : 0, size[d]));
    else if (size_of && size_of->known_rank() && size_of->rank() == rank)
      out.set_dim(d, size_of->dim(d));
  }
  c.set_output(0, c.input_dtype(0), out);
}

// Copies the block with memcpy runs: the dims after the last one that is cut are whole, so a
// run is the block's extent along that dim times everything inside it.
void slice_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor &begin_t = c.input(1), &size_t_ = c.input(2);
  const int rank = x.rank();
  if (begin_t.rank() != 1 || size_t_.rank() != 1 || begin_t.dim(0) != rank || size_t_.dim(0) != rank)
    c.fail(slice_args_message(rank, begin_t.shape(), size_t_.shape()));
  const std::vector<int64_t> begin = index_values(begin_t), size_arg = index_values(size_t_);
  Shape out_shape;
  int last_cut = -1;
  for (int d = 0; d < rank; ++d) {
    out_shape.add_dim(slice_dim(nullptr, &c, d, x.dim(d), begin[d], size_arg[d]));
    if (out_shape.dim(d) != x.dim(d)) last_cut = d;
  }
  if (last_cut < 0) return c.set_output(0, x);
  Tensor& out = c.allocate_output(0, x.dtype(), out_shape);
  if (out.num_elements() == 0) return;
  const int64_t esize = static_cast<int64_t>(dtype_size(x.dtype()));
  std::array<int64_t, Shape::kMaxRank> stride{};  // input strides in elements
  int64_t st = 1;
  for (int d = rank - 1; d >= 0; --d) stride[d] = st, st *= x.dim(d);
  int64_t base = 0;
  for (int d = 0; d <= last_cut; ++d) base += begin[d] * stride[d];
  const int64_t run_bytes = out_shape.dim(last_cut) * stride[last_cut] * esize;
  int64_t runs = 1;
  for (int d = 0; d < last_cut; ++d) runs *= out_shape.dim(d);
  const char* src = static_cast<const char*>(x.raw_data()) + base * esize;
  char* dst = static_cast<char*>(out.raw_data());
  c.parallel_for(runs, 1 + run_bytes / 16, [&](int64_t first, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> idx{};
    int64_t rest = first, offset = 0;
    for (int d = last_cut - 1; d >= 0; --d) {
      idx[d] = rest % out_shape.dim(d);
      rest /= out_shape.dim(d);
      offset += idx[d] * stride[d];
    }
    for (int64_t r = first; r < end; ++r) {
      std::memcpy(dst + r * run_bytes, src + offset * esize, static_cast<size_t>(run_bytes));
      for (int d = last_cut - 1; d >= 0; --d) {
        offset += stride[d];
        if (++idx[d] < out_shape.dim(d)) break;
        offset -= idx[d] * stride[d];
        idx[d] = 0;
      }
    }
  });
}

// ----- SliceGrad ---------------------------------------------------------------------------
// Inputs (dy, x_shape, begin): zeros of x_shape with dy written at begin (TensorFlow pads dy;
// one op that zeroes once and copies dy's rows is the same without a Pad).

void slice_grad_shape(ShapeContext& c) {
  for (int i = 1; i < 3; ++i)
    if (!is_index_dtype(c.input_dtype(i)))
      c.fail("x_shape and begin must be int32 or int64, got " + str(c.input_dtype(i)));
  if (const Tensor* t = c.input_constant(1)) return c.set_output(0, c.input_dtype(0), Shape(index_values(*t)));
  const Shape& dy = c.input_shape(0);
  c.set_output(0, c.input_dtype(0), unknown_dims(dy.known_rank() ? dy.rank() : -1));
}

void slice_grad_kernel(KernelContext& c) {
  const Tensor& dy = c.input(0);
  const std::vector<int64_t> x_dims = index_values(c.input(1)), begin = index_values(c.input(2));
  const int rank = dy.rank();
  if (static_cast<int>(x_dims.size()) != rank || static_cast<int>(begin.size()) != rank)
    c.fail("dy of rank " + std::to_string(rank) + " against x_shape and begin of " + std::to_string(x_dims.size()) +
           " and " + std::to_string(begin.size()) + " elements");
  Shape x_shape;
  for (int d = 0; d < rank; ++d) {
    if (begin[d] < 0 || begin[d] + dy.dim(d) > x_dims[d])
      c.fail("the block of " + dy.shape().to_string() + " at begin " + std::to_string(begin[d]) + " of dim " +
             std::to_string(d) + " does not fit in x's " + std::to_string(x_dims[d]));
    x_shape.add_dim(x_dims[d]);
  }
  Tensor& dx = c.allocate_output(0, dy.dtype(), x_shape);
  const int64_t esize = static_cast<int64_t>(dtype_size(dy.dtype()));
  std::memset(dx.raw_data(), 0, static_cast<size_t>(dx.num_elements() * esize));
  if (dy.num_elements() == 0) return;
  int last_cut = -1;
  for (int d = 0; d < rank; ++d)
    if (dy.dim(d) != x_dims[d]) last_cut = d;
  if (last_cut < 0) {
    std::memcpy(dx.raw_data(), dy.raw_data(), static_cast<size_t>(dy.num_elements() * esize));
    return;
  }
  std::array<int64_t, Shape::kMaxRank> stride{};  // dx strides in elements
  int64_t st = 1;
  for (int d = rank - 1; d >= 0; --d) stride[d] = st, st *= x_dims[d];
  int64_t base = 0;
  for (int d = 0; d <= last_cut; ++d) base += begin[d] * stride[d];
  const int64_t run_bytes = dy.dim(last_cut) * stride[last_cut] * esize;
  int64_t runs = 1;
  for (int d = 0; d < last_cut; ++d) runs *= dy.dim(d);
  const char* src = static_cast<const char*>(dy.raw_data());
  char* dst = static_cast<char*>(dx.raw_data()) + base * esize;
  const Shape& dy_shape = dy.shape();
  c.parallel_for(runs, 1 + run_bytes / 16, [&](int64_t first, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> idx{};
    int64_t rest = first, offset = 0;
    for (int d = last_cut - 1; d >= 0; --d) {
      idx[d] = rest % dy_shape.dim(d);
      rest /= dy_shape.dim(d);
      offset += idx[d] * stride[d];
    }
    for (int64_t r = first; r < end; ++r) {
      std::memcpy(dst + offset * esize, src + r * run_bytes, static_cast<size_t>(run_bytes));
      for (int d = last_cut - 1; d >= 0; --d) {
        offset += stride[d];
        if (++idx[d] < dy_shape.dim(d)) break;
        offset -= idx[d] * stride[d];
        idx[d] = 0;
      }
    }
  });
}

// ----- Split -------------------------------------------------------------------------------
// Inputs (split_dim: scalar Const, value); attr num_split. num_split equal parts of value along
// split_dim (TensorFlow's Split). The axis must be a Const: the outputs' shapes depend on it.

int split_axis(const Tensor& axis_t, int rank, const std::function<void(const std::string&)>& fail) {
  if (axis_t.num_elements() != 1) fail("split_dim must be a scalar, got shape " + axis_t.shape().to_string());
  int64_t axis = index_values(axis_t)[0];
  if (axis < -rank || axis >= rank)
    fail("split_dim " + std::to_string(axis) + " is out of range for a value of rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

void split_shape(ShapeContext& c) {
  if (!is_index_dtype(c.input_dtype(0))) c.fail("split_dim must be int32 or int64, got " + str(c.input_dtype(0)));
  const Tensor* axis_t = c.input_constant(0);
  if (!axis_t) c.fail("split_dim must be a constant");
  const int64_t n = c.node().attrs().get<int64_t>("num_split");
  if (n < 1) c.fail("num_split must be at least 1, got " + std::to_string(n));
  const Shape& x = c.input_shape(1);
  if (!x.known_rank()) c.fail("value must have a known rank");
  const int axis = split_axis(*axis_t, x.rank(), [&](const std::string& m) { c.fail(m); });
  Shape part = x;
  if (x.dim(axis) >= 0) {
    if (x.dim(axis) % n != 0)
      c.fail("Number of ways to split should evenly divide the split dimension, but got split_dim " +
             std::to_string(axis) + " (size = " + std::to_string(x.dim(axis)) + ") and num_split " + std::to_string(n));
    part.set_dim(axis, x.dim(axis) / n);
  }
  for (int64_t i = 0; i < n; ++i) c.set_output(static_cast<int>(i), c.input_dtype(1), part);
}

void split_kernel(KernelContext& c) {
  const Tensor& x = c.input(1);
  const int axis = split_axis(c.input(0), x.rank(), [&](const std::string& m) { c.fail(m); });
  const int64_t n = c.attrs().get<int64_t>("num_split");
  if (x.dim(axis) % n != 0)
    c.fail("Number of ways to split should evenly divide the split dimension, but got split_dim " +
           std::to_string(axis) + " (size = " + std::to_string(x.dim(axis)) + ") and num_split " + std::to_string(n));
  Shape part = x.shape();
  part.set_dim(axis, x.dim(axis) / n);
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(x.dtype()));
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t run = part.dim(axis) * inner;  // bytes of one output per outer index
  const char* src = static_cast<const char*>(x.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    Tensor& out = c.allocate_output(static_cast<int>(i), x.dtype(), part);
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * run, src + (o * n + i) * run, static_cast<size_t>(run));
  }
}

// ----- Gradients ---------------------------------------------------------------------------

using Grads = std::vector<Output>;

// TensorFlow's _SplitGrad: the parts' gradients concatenated (zeros for a part without one).
Grads split_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  std::vector<Output> parts;
  for (int i = 0; i < n.num_outputs(); ++i) parts.push_back(dz[i] ? dz[i] : zeros_like(s, n.output(i)));
  const int64_t axis = index_values(constant_input(n, 0, "split_dim"))[0];
  return {Output{}, concat(s, parts, axis)};
}

// TensorFlow's _SliceGrad: dy placed at begin in zeros of x's shape.
Grads slice_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {slice_grad(s, dz[0], shape_of(s, n.input(0)), n.input(1)), Output{}, Output{}};
}

}  // namespace

Output slice(const Scope& scope, Output x, std::vector<int64_t> begin, std::vector<int64_t> size, CallSite site) {
  Output b = arg_const(scope, "Slice", "begin", int64_vector(begin), site);
  Output sz = arg_const(scope, "Slice", "size", int64_vector(size), site);
  return slice(scope, x, b, sz, site);
}

Output slice(const Scope& scope, Output x, Output begin, Output size, CallSite site) {
  return scope.add_node(op_def("Slice"), {x, begin, size}, {}, site)->output(0);
}

std::vector<Output> split(const Scope& scope, Output value, int64_t num_split, int64_t axis, CallSite site) {
  Output dim = arg_const(scope, "Split", "split_dim", Tensor::scalar<int64_t>(axis), site);
  Node* node = scope.add_node(op_def("Split"), {dim, value}, {{"num_split", num_split}}, site);
  std::vector<Output> parts;
  for (int i = 0; i < node->num_outputs(); ++i) parts.push_back(node->output(i));
  return parts;
}

Output slice_grad(const Scope& scope, Output dy, Output x_shape, Output begin, CallSite site) {
  return scope.add_node(op_def("SliceGrad"), {dy, x_shape, begin}, {}, site)->output(0);
}

void register_array_block_ops(OpRegistry& registry) {
  registry.add({.name = "Slice",
                .num_inputs = 3,
                .shape = slice_shape,
                .kernel = slice_kernel,
                .gradient = slice_grad,
                .doc = "Inputs (x, begin, size: 1-D int32/int64). The block of x at begin with size elements per "
                       "dim (-1: the rest of the dim). Forwards x when the block is all of x."});
  registry.add({.name = "Split",
                .num_inputs = 2,
                .num_outputs = -1,
                .shape = split_shape,
                .kernel = split_kernel,
                .gradient = split_grad,
                .doc = "Inputs (split_dim: a scalar Const, value); attr num_split. num_split equal parts of value "
                       "along split_dim."});
  registry.add({.name = "SliceGrad",
                .num_inputs = 3,
                .shape = slice_grad_shape,
                .kernel = slice_grad_kernel,
                .not_differentiable = true,
                .doc = "Inputs (dy, x_shape, begin: 1-D int32/int64). Slice's gradient: zeros of x_shape with dy "
                       "at begin."});
}

}  // namespace stepscope
