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

struct BatchNormOptions {
  bool training = false;  // batch statistics and moving-average updates; else the moving statistics
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // add beta (trainable, zeros)
  bool scale = true;   // multiply by gamma (trainable, ones)
};

// tf.layers.batch_normalization over the last axis of x (NHWC [N, H, W, C] or [N, C]; C known),
// one FusedBatchNorm node. Creates under `scope`: gamma and beta (trainable; only when scale /
// center), moving_mean (zeros) and moving_variance (ones), not trainable but global (so they are
// checkpointed). In training, y uses the batch's statistics and two update ops
//   moving_mean     -= (moving_mean - batch_mean) * (1 - momentum)
//   moving_variance -= (moving_variance - batch_variance) * (1 - momentum)
// (batch_variance the unbiased one, as TensorFlow) are added to the kUpdateOps collection: make
// the train op depend on them (see get_update_ops). In inference, y uses the moving statistics.
Output batch_normalization(const Scope& scope, Output x, BatchNormOptions options = {},
                           CallSite site = CallSite::current());

struct DropoutOptions {
  int64_t seed = 0;      // 0: nondeterministic, as TensorFlow
  bool training = true;  // false: x is returned unchanged
};

// tf.layers.dropout: in training, each element of x is zeroed with probability `rate` and the
// others scaled by 1 / (1 - rate) (one Dropout node; its gradient uses the same mask); at
// inference x itself. rate outside [0, 1) is an InvalidArgumentError in both modes.
Output dropout(const Scope& scope, Output x, double rate, DropoutOptions options = {},
               CallSite site = CallSite::current());

}  // namespace stepscope::nn
