#include "stepscope/train/initializers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "stepscope/ops/all_ops.h"

namespace stepscope::initializers {
namespace {

Output scalar(const Scope& scope, DType dtype, double value) {
  Tensor t(dtype, Shape{});
  if (dtype == DType::kFloat64)
    t.data<double>()[0] = value;
  else
    t.data<float>()[0] = static_cast<float>(value);
  return stepscope::constant(scope, t);
}

Output filled(const Scope& scope, const std::vector<int64_t>& shape, DType dtype, double value, CallSite site) {
  Tensor t(dtype, Shape(std::span<const int64_t>(shape)));
  const int64_t n = t.num_elements();
  if (dtype == DType::kFloat64)
    std::fill(t.data<double>(), t.data<double>() + n, value);
  else
    std::fill(t.data<float>(), t.data<float>() + n, static_cast<float>(value));
  // TensorFlow's names: "<var>/Initializer/zeros", ".../ones", ".../Const".
  const char* name = value == 0.0 ? "zeros" : value == 1.0 ? "ones" : "Const";
  return stepscope::constant(scope.with_op_name(name), t, site);
}

// U(lo, hi) as TensorFlow builds it: random_uniform in [0, 1), times (hi - lo), plus lo (the
// graph nn::dense has always built, so its initial values are unchanged).
Output uniform(const Scope& scope, const std::vector<int64_t>& shape, DType dtype, double lo, double hi, uint64_t seed,
               CallSite site) {
  Output u = stepscope::random_uniform(scope.with_op_name("random_uniform"), shape, dtype, static_cast<int64_t>(seed),
                                       0, site);
  return sub(scope, mul(scope, u, scalar(scope, dtype, hi - lo)), scalar(scope, dtype, -lo));
}

// The truncated normal's stddev correction: the standard deviation of a standard normal
// truncated to [-2, 2].
constexpr double kTruncatedStddev = 0.87962566103423978;

}  // namespace

void compute_fans(const std::vector<int64_t>& shape, double* fan_in, double* fan_out) {
  if (shape.empty()) {
    *fan_in = *fan_out = 1;
  } else if (shape.size() == 1) {
    *fan_in = *fan_out = static_cast<double>(shape[0]);
  } else if (shape.size() == 2) {
    *fan_in = static_cast<double>(shape[0]);
    *fan_out = static_cast<double>(shape[1]);
  } else {
    double receptive = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= static_cast<double>(shape[i]);
    *fan_in = static_cast<double>(shape[shape.size() - 2]) * receptive;
    *fan_out = static_cast<double>(shape.back()) * receptive;
  }
}

Output Initializer::operator()(const Scope& scope, const std::vector<int64_t>& shape, DType dtype,
                               uint64_t default_seed, CallSite site) const {
  if (!is_floating(dtype))
    throw InvalidArgumentError("initializers: dtype must be float32 or float64, got " + std::string(dtype_name(dtype)));
  const auto s = static_cast<int64_t>(seed ? seed : default_seed);
  switch (kind) {
    case Kind::constant:
      return filled(scope, shape, dtype, value, site);
    case Kind::truncated_normal:
      return stepscope::truncated_normal(scope.with_op_name("truncated_normal"), shape, mean, stddev, dtype, s, 0,
                                         site);
    case Kind::random_normal:
      return stepscope::random_normal(scope.with_op_name("random_normal"), shape, mean, stddev, dtype, s, 0, site);
    case Kind::random_uniform:
      return uniform(scope, shape, dtype, minval, maxval, static_cast<uint64_t>(s), site);
    case Kind::variance_scaling: {
      if (scaling.scale <= 0)
        throw InvalidArgumentError("variance_scaling: scale must be positive, got " + std::to_string(scaling.scale));
      double fan_in = 0, fan_out = 0;
      compute_fans(shape, &fan_in, &fan_out);
      const double fan = scaling.mode == Mode::fan_in    ? fan_in
                         : scaling.mode == Mode::fan_out ? fan_out
                                                         : (fan_in + fan_out) / 2;
      const double v = scaling.scale / std::max(1.0, fan);
      switch (scaling.distribution) {
        case Distribution::truncated_normal:
          return stepscope::truncated_normal(scope.with_op_name("truncated_normal"), shape, 0.0,
                                             std::sqrt(v) / kTruncatedStddev, dtype, s, 0, site);
        case Distribution::untruncated_normal:
          return stepscope::random_normal(scope.with_op_name("random_normal"), shape, 0.0, std::sqrt(v), dtype, s, 0,
                                          site);
        case Distribution::uniform: {
          const double limit = std::sqrt(3.0 * v);
          return uniform(scope, shape, dtype, -limit, limit, static_cast<uint64_t>(s), site);
        }
      }
    }
  }
  throw InternalError("initializers: unknown kind");
}

Initializer zeros() { return constant(0.0); }
Initializer ones() { return constant(1.0); }
Initializer constant(double value) { return {.kind = Initializer::Kind::constant, .value = value, .scaling = {}}; }
Initializer truncated_normal(double stddev, double mean, uint64_t seed) {
  return {.kind = Initializer::Kind::truncated_normal, .mean = mean, .stddev = stddev, .scaling = {}, .seed = seed};
}
Initializer random_normal(double stddev, double mean, uint64_t seed) {
  return {.kind = Initializer::Kind::random_normal, .mean = mean, .stddev = stddev, .scaling = {}, .seed = seed};
}
Initializer random_uniform(double minval, double maxval, uint64_t seed) {
  return {.kind = Initializer::Kind::random_uniform, .minval = minval, .maxval = maxval, .scaling = {}, .seed = seed};
}
Initializer variance_scaling(VarianceScalingOptions options) {
  return {.kind = Initializer::Kind::variance_scaling, .scaling = options, .seed = options.seed};
}
Initializer glorot_uniform(uint64_t seed) {
  return variance_scaling({.scale = 1.0, .mode = Mode::fan_avg, .distribution = Distribution::uniform, .seed = seed});
}
Initializer glorot_normal(uint64_t seed) {
  return variance_scaling(
      {.scale = 1.0, .mode = Mode::fan_avg, .distribution = Distribution::truncated_normal, .seed = seed});
}
Initializer he_normal(uint64_t seed) {
  return variance_scaling(
      {.scale = 2.0, .mode = Mode::fan_in, .distribution = Distribution::truncated_normal, .seed = seed});
}
Initializer he_uniform(uint64_t seed) {
  return variance_scaling({.scale = 2.0, .mode = Mode::fan_in, .distribution = Distribution::uniform, .seed = seed});
}

}  // namespace stepscope::initializers
