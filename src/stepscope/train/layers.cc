#include "stepscope/train/layers.h"

#include <cmath>

#include "stepscope/ops/all_ops.h"

namespace stepscope::nn {
namespace {
Output scalar(const Scope& scope, DType dtype, double value) {
  Tensor t(dtype, Shape{});
  if (dtype == DType::kFloat64) t.data<double>()[0] = value;
  else t.data<float>()[0] = static_cast<float>(value);
  return constant(scope, t);
}
}  // namespace

Output dense(const Scope& scope, Output x, int64_t units, Activation activation, DenseOptions options,
             CallSite site) {
  const Shape& in_shape = x.shape();
  if (!in_shape.known_rank() || in_shape.rank() != 2 || in_shape.dim(1) < 0)
    throw InvalidArgumentError("dense: input " + x.name() + " must be rank 2 with a known last dimension, got " +
                               in_shape.to_string());
  if (units <= 0) throw InvalidArgumentError("dense: units must be positive, got " + std::to_string(units));
  const int64_t fan_in = in_shape.dim(1);
  const uint64_t seed = options.seed ? options.seed : static_cast<uint64_t>(scope.graph().num_nodes()) + 1;
  // Glorot uniform: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)).
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + units));
  // TensorFlow's names: <scope>/kernel/Initializer/random_uniform (absolute, so that the
  // variable named "kernel" below keeps its name).
  Scope init = scope.with_name_scope(scope.name_prefix() + "kernel/Initializer/");
  Output u = random_uniform(init.with_op_name("random_uniform"), {fan_in, units}, x.dtype(),
                            static_cast<int64_t>(seed), 0, site);
  Output w0 = sub(init, mul(init, u, scalar(init, x.dtype(), 2 * limit)), scalar(init, x.dtype(), limit));
  Variable w = make_variable(scope, "kernel", w0, true, site);
  Output y = matmul(scope, x, w.value(), false, false, site);
  if (options.use_bias) {
    Tensor zeros(x.dtype(), Shape{units});
    std::memset(zeros.raw_data(), 0, static_cast<size_t>(zeros.bytes()));
    Variable b = make_variable(scope, "bias", constant(scope.with_name_scope(scope.name_prefix() + "bias/Initializer/").with_op_name("zeros"), zeros), true, site);
    y = bias_add(scope, y, b.value(), site);
  }
  switch (activation) {
    case Activation::none: return y;
    case Activation::relu: return relu(scope, y, site);
    case Activation::tanh: return tanh(scope, y, site);
    case Activation::sigmoid: return sigmoid(scope, y, site);
  }
  return y;
}

}  // namespace stepscope::nn
