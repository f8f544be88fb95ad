// Initializers: how a layer's variables get their first values (tf.keras.initializers / TF1's
// tf.*_initializer). A value type that nn::dense and nn::conv2d take as options; it builds the
// initial-value subgraph under "<variable>/Initializer/".
//
// Seeds: an initializer with seed 0 takes the layer's seed (DenseOptions::seed, Conv2DOptions::
// seed), and a layer with seed 0 derives one from the graph's node count: deterministic for a
// given graph, so a program builds the same initial values on every run.
#pragma once

#include <cstdint>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope::initializers {

// Which fan variance_scaling divides by, and what it draws from (tf.keras.initializers.VarianceScaling).
enum class Mode { fan_in, fan_out, fan_avg };
enum class Distribution { truncated_normal, untruncated_normal, uniform };

struct VarianceScalingOptions {
  double scale = 1.0;
  Mode mode = Mode::fan_in;
  Distribution distribution = Distribution::truncated_normal;
  uint64_t seed = 0;
};

struct Initializer {
  enum class Kind { constant, truncated_normal, random_normal, random_uniform, variance_scaling };
  Kind kind = Kind::constant;
  double value = 0;                // constant
  double mean = 0, stddev = 1;     // truncated_normal, random_normal
  double minval = 0, maxval = 1;   // random_uniform
  VarianceScalingOptions scaling;  // variance_scaling (its seed is `seed`)
  uint64_t seed = 0;               // 0: the layer's seed

  // The initial value of a variable of `shape`: nodes under `scope` (the layer passes
  // "<variable>/Initializer/"). `default_seed` is used when `seed` is 0.
  Output operator()(const Scope& scope, const std::vector<int64_t>& shape, DType dtype, uint64_t default_seed,
                    CallSite site = CallSite::current()) const;
};

// TensorFlow's fans of a weight shape: [in, out] for rank 2; for a conv kernel [kh, kw, in, out],
// in * kh * kw and out * kh * kw; [n, n] for rank 1; [1, 1] for a scalar.
void compute_fans(const std::vector<int64_t>& shape, double* fan_in, double* fan_out);

Initializer zeros();
Initializer ones();
Initializer constant(double value);
// Normal(mean, stddev) with draws beyond 2 stddev drawn again (tf.truncated_normal_initializer;
// stddev first, the argument users set).
Initializer truncated_normal(double stddev = 1.0, double mean = 0.0, uint64_t seed = 0);
Initializer random_normal(double stddev = 1.0, double mean = 0.0, uint64_t seed = 0);
Initializer random_uniform(double minval = -0.05, double maxval = 0.05, uint64_t seed = 0);
// scale / fan (fan chosen by mode), then: truncated normal of stddev sqrt(that) / 0.8796...
// (the truncation's correction), untruncated normal of stddev sqrt(that), or uniform in
// +-sqrt(3 * that).
Initializer variance_scaling(VarianceScalingOptions options = {});
// variance_scaling(1, fan_avg, uniform): U(+-sqrt(6 / (fan_in + fan_out))). TensorFlow's default
// for tf.layers.dense and tf.layers.conv2d, and stepscope's.
Initializer glorot_uniform(uint64_t seed = 0);
Initializer glorot_normal(uint64_t seed = 0);  // variance_scaling(1, fan_avg, truncated_normal)
Initializer he_normal(uint64_t seed = 0);      // variance_scaling(2, fan_in, truncated_normal)
Initializer he_uniform(uint64_t seed = 0);     // variance_scaling(2, fan_in, uniform)

}  // namespace stepscope::initializers
