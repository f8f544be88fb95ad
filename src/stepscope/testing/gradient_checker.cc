#include "stepscope/testing/gradient_checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "stepscope/autodiff/gradients.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/array_ops.h"

namespace stepscope {
namespace {

double element(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kFloat64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}
void set_element(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::kFloat64) t.data<double>()[i] = v;
  else t.data<float>()[i] = static_cast<float>(v);
}

}  // namespace

GradientCheckResult check_gradient(Output x, const Tensor& x_value, Output y, const FeedList& feeds, double delta) {
  Graph& graph = *x.graph();
  Scope scope(graph);
  Output dy = placeholder(scope.with_op_name("check_gradient/dy"), y.dtype(), y.shape());
  Output dx = gradients(scope, {y}, {x}, {dy})[0];
  Session session(graph, {.inter_op_threads = 1});

  FeedList base = feeds;
  base.emplace_back(x, x_value);
  const Tensor y0 = session.run(base, {y})[0];
  const int64_t nx = x_value.num_elements(), ny = y0.num_elements();

  // Symbolic Jacobian, one row per y element (seed dy with a one-hot).
  std::vector<double> symbolic(static_cast<size_t>(nx * ny), 0.0);
  for (int64_t j = 0; j < ny; ++j) {
    Tensor seed(y.dtype(), y0.shape());
    for (int64_t k = 0; k < ny; ++k) set_element(seed, k, k == j ? 1.0 : 0.0);
    FeedList f = base;
    f.emplace_back(dy, seed);
    if (!dx) continue;  // no path: the symbolic gradient is zero
    Tensor g = session.run(f, {dx})[0];
    for (int64_t i = 0; i < nx; ++i) symbolic[j * nx + i] = element(g, i);
  }
  GradientCheckResult result;
  for (int64_t i = 0; i < nx; ++i) {
    Tensor plus = x_value.deep_copy(), minus = x_value.deep_copy();
    set_element(plus, i, element(x_value, i) + delta);
    set_element(minus, i, element(x_value, i) - delta);
    FeedList fp = feeds, fm = feeds;
    fp.emplace_back(x, plus);
    fm.emplace_back(x, minus);
    Tensor yp = session.run(fp, {y})[0], ym = session.run(fm, {y})[0];
    for (int64_t j = 0; j < ny; ++j) {
      double numeric = (element(yp, j) - element(ym, j)) / (2 * delta);
      result.max_error = std::max(result.max_error, std::abs(numeric - symbolic[j * nx + i]));
      result.max_value = std::max(result.max_value, std::abs(numeric));
    }
  }
  return result;
}

namespace testing {

void expect_gradient_matches(Output x, const Tensor& x_value, Output y, const FeedList& feeds,
                             const GradientExpectation& expectation) {
  const GradientCheckResult r = check_gradient(x, x_value, y, feeds, expectation.delta);
  if (expectation.expect_nonzero) {
    EXPECT_GT(r.max_value, 1e-3) << "the Jacobian should not be (nearly) zero";
  }
  EXPECT_LE(r.max_error, expectation.tolerance * (1 + r.max_value))
      << "d " << y.name() << " / d " << x.name() << ": max error " << r.max_error << ", max value " << r.max_value;
}

Tensor random_tensor(const Shape& shape, unsigned seed, double lo, double hi, double min_abs) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v;
  v.reserve(static_cast<size_t>(shape.num_elements()));
  while (static_cast<int64_t>(v.size()) < shape.num_elements()) {
    const double x = dist(gen);
    if (std::abs(x) >= min_abs) v.push_back(x);
  }
  return Tensor::from_vector<double>(v, shape);
}

Tensor distinct_tensor(const Shape& shape, unsigned seed) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i) - 1.0;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return Tensor::from_vector<double>(v, shape);
}

int count_ops(const Graph& g, std::string_view op) {
  int n = 0;
  for (int id = 0; id < g.num_nodes(); ++id) n += g.node(id)->op_type() == op;
  return n;
}

}  // namespace testing
}  // namespace stepscope
