#include "stepscope/train/layers.h"

#include <cmath>
#include <string>

#include "stepscope/ops/all_ops.h"

namespace stepscope::nn {
namespace {

Output activate(const Scope& scope, Output y, Activation activation, CallSite site) {
  switch (activation) {
    case Activation::none:
      return y;
    case Activation::relu:
      return relu(scope, y, site);
    case Activation::tanh:
      return tanh(scope, y, site);
    case Activation::sigmoid:
      return sigmoid(scope, y, site);
  }
  return y;
}

// A variable `name` under `scope` whose initial value `init` builds under "<scope>/<name>/Initializer/"
// (absolute, so that the variable keeps its name), TensorFlow's layout.
Variable layer_variable(const Scope& scope, const char* name, const initializers::Initializer& init,
                        const std::vector<int64_t>& shape, DType dtype, uint64_t seed, bool trainable, CallSite site) {
  Scope init_scope = scope.with_name_scope(scope.name_prefix() + name + "/Initializer/");
  return make_variable(scope, name, init(init_scope, shape, dtype, seed, site), trainable, site);
}

uint64_t layer_seed(const Scope& scope, uint64_t seed) {
  return seed ? seed : static_cast<uint64_t>(scope.graph().num_nodes()) + 1;
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
  const uint64_t seed = layer_seed(scope, options.seed);
  Variable w =
      layer_variable(scope, "kernel", options.kernel_initializer, {fan_in, units}, x.dtype(), seed, true, site);
  Output y = matmul(scope, x, w.value(), false, false, site);
  if (options.use_bias) {
    Variable b = layer_variable(scope, "bias", options.bias_initializer, {units}, x.dtype(), seed + 1, true, site);
    y = bias_add(scope, y, b.value(), site);
  }
  return activate(scope, y, activation, site);
}

Output conv2d(const Scope& scope, Output x, int64_t filters, std::array<int64_t, 2> kernel_size, Conv2DOptions options,
              CallSite site) {
  const Shape& in_shape = x.shape();
  if (!in_shape.known_rank() || in_shape.rank() != 4 || in_shape.dim(3) < 0)
    throw InvalidArgumentError("conv2d: input " + x.name() + " must be rank 4 (NHWC) with a known channel count, got " +
                               in_shape.to_string());
  if (filters <= 0) throw InvalidArgumentError("conv2d: filters must be positive, got " + std::to_string(filters));
  if (kernel_size[0] <= 0 || kernel_size[1] <= 0)
    throw InvalidArgumentError("conv2d: kernel_size must be positive, got [" + std::to_string(kernel_size[0]) + "," +
                               std::to_string(kernel_size[1]) + "]");
  const uint64_t seed = layer_seed(scope, options.seed);
  Variable k = layer_variable(scope, "kernel", options.kernel_initializer,
                              {kernel_size[0], kernel_size[1], in_shape.dim(3), filters}, x.dtype(), seed, true, site);
  Output y =
      stepscope::conv2d(scope, x, k.value(), {1, options.strides[0], options.strides[1], 1}, options.padding, site);
  if (options.use_bias) {
    Variable b = layer_variable(scope, "bias", options.bias_initializer, {filters}, x.dtype(), seed + 1, true, site);
    y = bias_add(scope, y, b.value(), site);
  }
  return activate(scope, y, options.activation, site);
}

Output batch_normalization(const Scope& scope, Output x, BatchNormOptions options, CallSite site) {
  const Shape& in_shape = x.shape();
  if (!in_shape.known_rank() || (in_shape.rank() != 4 && in_shape.rank() != 2) || in_shape.dim(-1) < 0)
    throw InvalidArgumentError("batch_normalization: input " + x.name() +
                               " must be rank 4 (NHWC) or rank 2 with a known last dimension, got " +
                               in_shape.to_string());
  if (!(options.momentum >= 0 && options.momentum <= 1))
    throw InvalidArgumentError("batch_normalization: momentum must be in [0, 1], got " +
                               std::to_string(options.momentum));
  const int64_t channels = in_shape.dim(-1);
  const DType dtype = x.dtype();
  Output gamma, beta;
  if (options.scale) {
    gamma = layer_variable(scope, "gamma", initializers::ones(), {channels}, dtype, 0, true, site).value();
  } else {
    gamma =
        initializers::ones()(scope.with_name_scope(scope.name_prefix() + "ones_gamma/"), {channels}, dtype, 0, site);
  }
  if (options.center) {
    beta = layer_variable(scope, "beta", initializers::zeros(), {channels}, dtype, 0, true, site).value();
  } else {
    beta =
        initializers::zeros()(scope.with_name_scope(scope.name_prefix() + "zeros_beta/"), {channels}, dtype, 0, site);
  }
  Variable moving_mean = layer_variable(scope, "moving_mean", initializers::zeros(), {channels}, dtype, 0, false, site);
  Variable moving_variance =
      layer_variable(scope, "moving_variance", initializers::ones(), {channels}, dtype, 0, false, site);
  if (!options.training) {
    return fused_batch_norm(scope, x, gamma, beta, moving_mean.value(), moving_variance.value(), options.epsilon,
                            /*is_training=*/false, site)
        .y;
  }
  FusedBatchNormOutputs bn =
      fused_batch_norm(scope, x, gamma, beta, Output{}, Output{}, options.epsilon, /*is_training=*/true, site);
  // TensorFlow's assign_moving_average: variable -= (variable - value) * (1 - momentum).
  Graph& g = scope.graph();
  const auto update = [&](const Variable& var, Output value, const char* name) {
    Scope s = scope.with_name_scope(std::string("AssignMovingAvg") + (name[0] ? "_" : "") + name);
    Tensor decay(dtype, Shape{});
    if (dtype == DType::kFloat64)
      decay.data<double>()[0] = 1.0 - options.momentum;
    else
      decay.data<float>()[0] = static_cast<float>(1.0 - options.momentum);
    Output delta = mul(s, sub(s, var.value(), value, site), constant(s.with_op_name("decay"), decay, site), site);
    Node* n = assign_sub(s.with_op_name(s.name_prefix()), var.value(), delta, site).node;
    g.add_to_collection(kUpdateOps, n);
  };
  update(moving_mean, bn.batch_mean, "");
  update(moving_variance, bn.batch_variance, "1");
  return bn.y;
}

Output dropout(const Scope& scope, Output x, double rate, DropoutOptions options, CallSite site) {
  if (!(rate >= 0.0 && rate < 1.0))
    throw InvalidArgumentError("dropout: rate must be in [0, 1), got " + std::to_string(rate) + " (input " + x.name() +
                               ")");
  if (!options.training) return x;
  return stepscope::dropout(scope, x, rate, options.seed, 0, site);
}

}  // namespace stepscope::nn
