// Layers: small builders that create variables and ops together (tf.layers / Keras style).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "stepscope/graph/scope.h"
#include "stepscope/train/initializers.h"
#include "stepscope/train/variables.h"

namespace stepscope::nn {

enum class Activation { none, relu, tanh, sigmoid };

struct DenseOptions {
  bool use_bias = true;
  uint64_t seed = 0;  // 0: derived from the graph's node count (deterministic for a given graph)
  initializers::Initializer kernel_initializer = initializers::glorot_uniform();
  initializers::Initializer bias_initializer = initializers::zeros();
};

// y = activation(x · W + b), with W [in, units] from kernel_initializer (Glorot uniform by
// default) and b from bias_initializer (zeros), created under `scope` ("<scope>/kernel",
// "<scope>/bias"). x must be rank 2 with a known last dimension.
Output dense(const Scope& scope, Output x, int64_t units, Activation activation = Activation::none,
             DenseOptions options = {}, CallSite site = CallSite::current());

struct Conv2DOptions {
  std::array<int64_t, 2> strides = {1, 1};
  std::string padding = "VALID";  // or "SAME"; tf.layers.conv2d's default is "valid"
  Activation activation = Activation::none;
  bool use_bias = true;
  uint64_t seed = 0;  // 0: derived from the graph's node count
  initializers::Initializer kernel_initializer = initializers::glorot_uniform();
  initializers::Initializer bias_initializer = initializers::zeros();
};

// tf.layers.conv2d: y = activation(conv2d(x, kernel) + bias), x NHWC with a known channel count,
// kernel [kh, kw, in_channels, filters] ("<scope>/kernel"), bias [filters] ("<scope>/bias").
Output conv2d(const Scope& scope, Output x, int64_t filters, std::array<int64_t, 2> kernel_size,
              Conv2DOptions options = {}, CallSite site = CallSite::current());

}  // namespace stepscope::nn
