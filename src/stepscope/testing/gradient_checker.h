// Numerical gradient checks for op gradient rules: central differences against the symbolic
// Jacobian that gradients() builds, plus the helpers every gradient test wants.
#pragma once

#include <string_view>

#include "stepscope/runtime/session.h"

namespace stepscope {

struct GradientCheckResult {
  double max_error = 0;  // max |symbolic - numeric| over the Jacobian
  double max_value = 0;  // max |numeric|, for relative judgement
};

// x is fed with x_value (x may be any output: a placeholder or an intermediate); `feeds` feed the
// other inputs. y must be floating point. delta is the finite-difference step.
GradientCheckResult check_gradient(Output x, const Tensor& x_value, Output y, const FeedList& feeds = {},
                                   double delta = 1e-3);

namespace testing {

struct GradientExpectation {
  // Float64 differences with step 1e-4: truncation error ~1e-9 * |f'''| on smooth ops and
  // rounding ~1e-12, so 1e-6 relative is a tight bound for a correct rule and far below a wrong one.
  double delta = 1e-4;
  double tolerance = 1e-6;  // on max |symbolic - numeric|, relative to 1 + max |numeric|
  bool expect_nonzero = false;  // fail on a (nearly) zero Jacobian too, where a zero would check nothing
};

// A gtest expectation that d y / d x by the gradient rules matches central differences at x_value.
void expect_gradient_matches(Output x, const Tensor& x_value, Output y, const FeedList& feeds = {},
                             const GradientExpectation& expectation = {});

// Float64 values uniform in [lo, hi) from mt19937(seed), in order, skipping those with magnitude
// below `min_abs` (keeps inputs off kinks such as relu's at 0).
Tensor random_tensor(const Shape& shape, unsigned seed, double lo = -1, double hi = 1, double min_abs = 0);

// Distinct float64 values 0.1 apart in a shuffled order: no ties, and a 1e-3 step never reorders them.
Tensor distinct_tensor(const Shape& shape, unsigned seed);

// Number of nodes of op type `op` in g.
int count_ops(const Graph& g, std::string_view op);

}  // namespace testing
}  // namespace stepscope
