// Helpers shared by the builders and kernels of the array, random and state families.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/graph/scope.h"
#include "stepscope/ops/array_ops.h"

namespace stepscope::op_util {

inline bool is_index_dtype(DType d) { return d == DType::kInt32 || d == DType::kInt64; }

// The values of an int32 or int64 tensor.
inline std::vector<int64_t> index_values(const Tensor& t) {
  if (t.dtype() == DType::kInt32) {
    auto f = t.flat<int32_t>();
    return {f.begin(), f.end()};
  }
  return t.to_vector<int64_t>();
}

inline Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(v, Shape{static_cast<int64_t>(v.size())});
}

// The name Scope::add_node will give a node whose default name is `base` (when the scope carries
// no with_op_name), relative to the name scope; mirrors Graph::unique_name without reserving.
inline std::string predicted_name(const Scope& scope, const std::string& base) {
  const std::string& prefix = scope.name_prefix();
  if (!scope.graph().name_in_use(prefix + base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (!scope.graph().name_in_use(prefix + candidate)) return candidate;
  }
}

// A Const holding an argument of op `op` ("Reshape/shape"), named after the node the op is about
// to get so the two sit together in name-scope views, as in TensorFlow. (A with_op_name on
// `scope` is meant for the op's node, which Scope does not expose; the Const then keeps the
// default-name prefix.)
inline Output arg_const(const Scope& scope, const std::string& op, const char* arg, const Tensor& value,
                        CallSite site) {
  return constant(scope.with_op_name(predicted_name(scope, op) + "/" + arg), value, site);
}

// Fails the shape rule unless input i is a 1-D int32/int64 tensor (`what` names it).
inline void expect_index_vector(const ShapeContext& c, int i, const char* what) {
  if (!is_index_dtype(c.input_dtype(i)))
    c.fail(std::string(what) + " must be int32 or int64, got " + std::string(dtype_name(c.input_dtype(i))));
  const Shape& s = c.input_shape(i);
  if (s.known_rank() && s.rank() != 1) c.fail(std::string(what) + " must be 1-D, not " + s.to_string());
}

// Fails the shape rule when input i is a string tensor.
inline void expect_not_string(const ShapeContext& c, int i) {
  if (c.input_dtype(i) == DType::kString)
    c.fail("input " + std::to_string(i) + " has dtype string, which this op does not support");
}

// A shape of `n` unknown dims, or unknown rank when n < 0.
inline Shape unknown_dims(int64_t n) {
  if (n < 0 || n > Shape::kMaxRank) return Shape::unknown_rank();
  Shape s;
  for (int64_t i = 0; i < n; ++i) s.add_dim(Shape::kUnknownDim);
  return s;
}

// The value of a Const input of n, for gradient rules that need a constant argument.
inline const Tensor& constant_input(const Node& n, int i, const char* what) {
  const Output& in = n.input(i);
  if (in.node->op_type() != "Const")
    throw UnimplementedError(node_error_message(n, std::string("the gradient needs a constant ") + what));
  return in.node->attrs().get<Tensor>("value");
}

}  // namespace stepscope::op_util
