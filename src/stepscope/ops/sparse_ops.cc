#include "stepscope/ops/sparse_ops.h"

#include <cstring>
#include <string>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/op_util.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

using op_util::arg_const;
using op_util::index_values;
using op_util::int64_vector;
using op_util::is_index_dtype;

std::string str(DType d) { return std::string(dtype_name(d)); }

// "[3,1]" for flat position `i` of a tensor of `shape` ("" for a scalar), TensorFlow's
// SliceDebugString.
std::string position(const Shape& shape, int64_t i) {
  if (shape.rank() == 0) return "";
  std::vector<int64_t> at(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    const int64_t n = shape.dim(d);
    at[d] = n > 0 ? i % n : 0;
    i = n > 0 ? i / n : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < at.size(); ++d) s += (d ? "," : "") + std::to_string(at[d]);
  return s + "]";
}

// The first id of `ids` outside [0, limit) as TensorFlow words it, or "" when all are in range.
template <typename I>
std::string check_ids(const Tensor& ids, int64_t limit, const char* what) {
  const I* p = ids.data<I>();
  const int64_t n = ids.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(p[i]);
    if (id < 0 || id >= limit)
      return std::string(what) + position(ids.shape(), i) + " = " + std::to_string(id) + " is not in [0, " +
             std::to_string(limit) + ")";
  }
  return {};
}

std::string check_ids(const Tensor& ids, int64_t limit, const char* what) {
  return ids.dtype() == DType::kInt32 ? check_ids<int32_t>(ids, limit, what) : check_ids<int64_t>(ids, limit, what);
}

// ----- Gather ------------------------------------------------------------------------------

void gather_shape(ShapeContext& c) {
  if (c.input_dtype(0) == DType::kString) c.fail("params has dtype string, which Gather does not support");
  if (!is_index_dtype(c.input_dtype(1))) c.fail("indices must be int32 or int64, got " + str(c.input_dtype(1)));
  const Shape& params = c.input_shape(0);
  const Shape& ids = c.input_shape(1);
  if (params.known_rank() && params.rank() < 1) c.fail("params must be at least 1-D, got shape " + params.to_string());
  if (!params.known_rank() || !ids.known_rank()) return c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
  if (ids.rank() + params.rank() - 1 > Shape::kMaxRank)
    c.fail("output rank " + std::to_string(ids.rank() + params.rank() - 1) + " is more than the maximum " +
           std::to_string(Shape::kMaxRank));
  Shape out = ids;
  for (int d = 1; d < params.rank(); ++d) out.add_dim(params.dim(d));
  c.set_output(0, c.input_dtype(0), out);
}

template <typename I>
void copy_rows(KernelContext& c, const Tensor& params, const Tensor& ids, Tensor& out, size_t row_bytes) {
  const I* idx = ids.data<I>();
  const char* src = static_cast<const char*>(params.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  c.parallel_for(ids.num_elements(), 1 + static_cast<int64_t>(row_bytes / 16), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(dst + static_cast<size_t>(i) * row_bytes, src + static_cast<size_t>(idx[i]) * row_bytes, row_bytes);
  });
}

void gather_kernel(KernelContext& c) {
  const Tensor& params = c.input(0);
  const Tensor& ids = c.input(1);
  if (params.rank() < 1) c.fail("params must be at least 1-D, got shape " + params.shape().to_string());
  if (ids.rank() + params.rank() - 1 > Shape::kMaxRank)
    c.fail("output rank " + std::to_string(ids.rank() + params.rank() - 1) + " is more than the maximum " +
           std::to_string(Shape::kMaxRank));
  Shape out_shape = ids.shape();
  int64_t row = 1;
  for (int d = 1; d < params.rank(); ++d) {
    out_shape.add_dim(params.dim(d));
    row *= params.dim(d);
  }
  std::string error = check_ids(ids, params.dim(0), "indices");
  if (!error.empty()) c.fail(error);
  Tensor& out = c.allocate_output(0, params.dtype(), out_shape);
  const size_t row_bytes = static_cast<size_t>(row) * dtype_size(params.dtype());
  if (row_bytes == 0 || ids.num_elements() == 0) return;
  if (ids.dtype() == DType::kInt32)
    copy_rows<int32_t>(c, params, ids, out, row_bytes);
  else
    copy_rows<int64_t>(c, params, ids, out, row_bytes);
}

// ----- UnsortedSegmentSum ------------------------------------------------------------------

void segment_sum_shape(ShapeContext& c) {
  const DType dtype = c.input_dtype(0);
  if (dtype == DType::kString || dtype == DType::kBool) c.fail("data must be a number, got " + str(dtype));
  if (!is_index_dtype(c.input_dtype(1))) c.fail("segment_ids must be int32 or int64, got " + str(c.input_dtype(1)));
  if (!is_index_dtype(c.input_dtype(2))) c.fail("num_segments must be int32 or int64, got " + str(c.input_dtype(2)));
  const Shape& data = c.input_shape(0);
  const Shape& ids = c.input_shape(1);
  const Shape& ns = c.input_shape(2);
  if (ns.known_rank() && ns.rank() != 0) c.fail("num_segments must be a scalar, got shape " + ns.to_string());
  int64_t segments = Shape::kUnknownDim;
  if (const Tensor* t = c.input_constant(2)) {
    segments = index_values(*t)[0];
    if (segments < 0) c.fail("num_segments must be non-negative, got " + std::to_string(segments));
  }
  if (!data.known_rank() || !ids.known_rank()) return c.set_output(0, dtype, Shape::unknown_rank());
  if (ids.rank() > data.rank())
    c.fail("segment_ids shape " + ids.to_string() + " is not a prefix of data shape " + data.to_string());
  for (int d = 0; d < ids.rank(); ++d)
    if (ids.dim(d) >= 0 && data.dim(d) >= 0 && ids.dim(d) != data.dim(d))
      c.fail("segment_ids shape " + ids.to_string() + " is not a prefix of data shape " + data.to_string());
  Shape out{segments};
  for (int d = ids.rank(); d < data.rank(); ++d) out.add_dim(data.dim(d));
  c.set_output(0, dtype, out);
}

template <typename T, typename I>
void segment_sum(const Tensor& data, const Tensor& ids, Tensor& out, int64_t row) {
  const T* src = data.data<T>();
  const I* idx = ids.data<I>();
  T* dst = out.data<T>();
  std::fill(dst, dst + out.num_elements(), T(0));
  const int64_t n = ids.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    T* o = dst + static_cast<int64_t>(idx[i]) * row;
    const T* s = src + i * row;
    for (int64_t k = 0; k < row; ++k) o[k] += s[k];
  }
}

void segment_sum_kernel(KernelContext& c) {
  const Tensor& data = c.input(0);
  const Tensor& ids = c.input(1);
  const Tensor& ns = c.input(2);
  if (ns.rank() != 0) c.fail("num_segments must be a scalar, got shape " + ns.shape().to_string());
  const int64_t segments = index_values(ns)[0];
  if (segments < 0) c.fail("num_segments must be non-negative, got " + std::to_string(segments));
  bool prefix = ids.rank() <= data.rank();
  for (int d = 0; prefix && d < ids.rank(); ++d) prefix = ids.dim(d) == data.dim(d);
  if (!prefix)
    c.fail("segment_ids shape " + ids.shape().to_string() + " is not a prefix of data shape " +
           data.shape().to_string());
  std::string error = check_ids(ids, segments, "segment_ids");
  if (!error.empty()) c.fail(error);
  Shape out_shape{segments};
  int64_t row = 1;
  for (int d = ids.rank(); d < data.rank(); ++d) {
    out_shape.add_dim(data.dim(d));
    row *= data.dim(d);
  }
  Tensor& out = c.allocate_output(0, data.dtype(), out_shape);
  dispatch_numeric(data.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      if (ids.dtype() == DType::kInt32)
        segment_sum<T, int32_t>(data, ids, out, row);
      else
        segment_sum<T, int64_t>(data, ids, out, row);
    }
  });
}

// ----- Gradients ---------------------------------------------------------------------------

using Grads = std::vector<Output>;

// TensorFlow's _GatherGrad: IndexedSlices(reshape(dz, [-1] + params.shape[1:]), reshape(ids, [-1]),
// shape(params)); static shapes as Consts when params' shape is fully known (a variable's is).
IndexedSlices gather_sparse_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  const Output params = n.input(0);
  const Shape& ps = params.shape();
  IndexedSlices r;
  if (ps.fully_defined()) {
    std::vector<int64_t> values_shape{-1};
    for (int d = 1; d < ps.rank(); ++d) values_shape.push_back(ps.dim(d));
    r.values = reshape(s, dz[0], values_shape);
    r.dense_shape = constant(s.with_op_name("dense_shape"), int64_vector(ps.dim_vector()));
  } else {
    Output pshape = shape(s, params, DType::kInt64);
    Output inner = slice(s, pshape, {1}, {-1});
    r.values = reshape(s, dz[0], concat(s, {constant(s, int64_vector({-1})), inner}, 0));
    r.dense_shape = pshape;
  }
  r.indices = reshape(s, n.input(1), {-1});
  return r;
}

Grads gather_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {to_dense(s, gather_sparse_grad(s, n, dz)), Output{}};
}

Grads segment_sum_grad(const Scope& s, const Node& n, std::span<const Output> dz) {
  return {gather(s, dz[0], n.input(1)), Output{}, Output{}};
}

}  // namespace

// ----- Builders ----------------------------------------------------------------------------

Output gather(const Scope& scope, Output params, Output ids, CallSite site) {
  return scope.add_node(op_def("Gather"), {params, ids}, {}, site)->output(0);
}

Output embedding_lookup(const Scope& scope, Output params, Output ids, CallSite site) {
  return gather(scope.with_name_scope("embedding_lookup"), params, ids, site);
}

Output unsorted_segment_sum(const Scope& scope, Output data, Output segment_ids, Output num_segments, CallSite site) {
  return scope.add_node(op_def("UnsortedSegmentSum"), {data, segment_ids, num_segments}, {}, site)->output(0);
}

Output unsorted_segment_sum(const Scope& scope, Output data, Output segment_ids, int64_t num_segments, CallSite site) {
  Output n = arg_const(scope, "UnsortedSegmentSum", "num_segments", Tensor::scalar<int64_t>(num_segments), site);
  return unsorted_segment_sum(scope, data, segment_ids, n, site);
}

SparseGradientFn sparse_gradient_rule(std::string_view op_type) {
  return op_type == "Gather" ? &gather_sparse_grad : nullptr;
}

Output to_dense(const Scope& scope, const IndexedSlices& slices, CallSite site) {
  if (!slices) throw InvalidArgumentError("to_dense: the IndexedSlices are empty");
  const Output& ds = slices.dense_shape;
  if (ds.node->op_type() == "Const") {
    const std::vector<int64_t> dims = index_values(ds.node->attrs().get<Tensor>("value"));
    if (dims.empty()) throw InvalidArgumentError("to_dense: dense_shape " + ds.name() + " is empty");
    return unsorted_segment_sum(scope, slices.values, slices.indices, dims[0], site);
  }
  Output rows = reshape(scope, slice(scope, ds, {0}, {1}), std::vector<int64_t>{});
  return unsorted_segment_sum(scope, slices.values, slices.indices, rows, site);
}

// ----- Registration ------------------------------------------------------------------------

void register_sparse_ops(OpRegistry& registry) {
  registry.add({.name = "Gather",
                .num_inputs = 2,
                .shape = gather_shape,
                .kernel = gather_kernel,
                .flops = no_float_ops,
                .gradient = gather_grad,
                .doc = "Inputs (params: [V, D...], indices: int32/int64 of any shape). The rows of params picked by "
                       "indices: shape indices.shape + params.shape[1:]; an index outside [0, V) is an error. The "
                       "gradient w.r.t. params is IndexedSlices."});
  registry.add({.name = "UnsortedSegmentSum",
                .num_inputs = 3,
                .shape = segment_sum_shape,
                .kernel = segment_sum_kernel,
                .flops = [](const CostContext& c) { return c.input_shapes[0].num_elements(); },
                .gradient = segment_sum_grad,
                .doc = "Inputs (data, segment_ids: int32/int64, a prefix of data's shape, num_segments: scalar). "
                       "out[segment_ids[i...], ...] += data[i..., ...]; shape [num_segments] + "
                       "data.shape[segment_ids.rank:]."});
}

}  // namespace stepscope
