// Helpers shared by the builders and kernels of the array, random and state families.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepscope/core/tensor.h"
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

}  // namespace stepscope::op_util
