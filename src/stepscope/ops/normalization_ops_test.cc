// FusedBatchNorm and FusedBatchNormGrad: values against hand computation (training and
// inference), the unbiased batch_variance, shape errors naming the node and the shapes, costs,
// and the gradient rule checked numerically (x, scale, offset; training and inference).
#include "stepscope/ops/normalization_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "stepscope/autodiff/gradients.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/testing/gradient_checker.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_gradient_matches;
using testing::expect_tensor_near;
using ::testing::HasSubstr;
using testing::random_tensor;

// x [2, 2, 1, 2] (rows of (channel 0, channel 1)): channel 0 is 1, 2, 3, 4; channel 1 is 2, 4, 6, 8.
Tensor small_x() { return Tensor::from_vector<float>({1, 2, 2, 4, 3, 6, 4, 8}, Shape{2, 2, 1, 2}); }

TEST(FusedBatchNorm, TrainingNormalisesWithTheBatchStatistics) {
  Graph g;
  Scope s(g);
  auto x = constant(s, small_x());
  auto scale = constant<float>(s, {1, 2}, Shape{2});
  auto offset = constant<float>(s, {0, 1}, Shape{2});
  auto bn = fused_batch_norm(s, x, scale, offset, Output{}, Output{}, 0.001, true);
  EXPECT_EQ(bn.y.shape(), (Shape{2, 2, 1, 2}));
  EXPECT_EQ(bn.batch_mean.shape(), (Shape{2}));
  auto out = eval({bn.y, bn.batch_mean, bn.batch_variance, bn.reserve_space_1, bn.reserve_space_2});
  // Channel 0: mean 2.5, biased variance 1.25 (unbiased 5/3); channel 1: mean 5, variance 5 (20/3).
  const double s0 = 1 / std::sqrt(1.25 + 0.001), s1 = 2 / std::sqrt(5 + 0.001);
  std::vector<float> y;
  for (int r = 0; r < 4; ++r) {
    y.push_back(static_cast<float>((r + 1 - 2.5) * s0));
    y.push_back(static_cast<float>((2 * (r + 1) - 5) * s1 + 1));
  }
  expect_tensor_near<float>(out[0], Shape{2, 2, 1, 2}, y);
  expect_tensor_near<float>(out[1], Shape{2}, {2.5f, 5.f});
  // batch_variance is the unbiased variance (n / (n - 1)), what TensorFlow's moving average uses.
  expect_tensor_near<float>(out[2], Shape{2}, {5.f / 3, 20.f / 3});
  expect_tensor_near<float>(out[3], Shape{2}, {2.5f, 5.f});
  expect_tensor_near<float>(out[4], Shape{2}, {1.25f, 5.f});
}

TEST(FusedBatchNorm, InferenceUsesTheGivenMeanAndVariance) {
  Graph g;
  Scope s(g);
  auto x = constant(s, small_x());
  auto bn = fused_batch_norm(s, x, constant<float>(s, {1, 2}, Shape{2}), constant<float>(s, {0, 1}, Shape{2}),
                             constant<float>(s, {1, 2}, Shape{2}), constant<float>(s, {4, 9}, Shape{2}), 0.0, false);
  auto out = eval({bn.y, bn.batch_mean, bn.batch_variance});
  std::vector<float> y;
  for (int r = 0; r < 4; ++r) {
    y.push_back(static_cast<float>((r + 1 - 1) / 2.0));
    y.push_back(static_cast<float>(2 * (2 * (r + 1) - 2) / 3.0 + 1));
  }
  expect_tensor_near<float>(out[0], Shape{2, 2, 1, 2}, y);
  expect_tensor_near<float>(out[1], Shape{2}, {1.f, 2.f});
  expect_tensor_near<float>(out[2], Shape{2}, {4.f, 9.f});
}

TEST(FusedBatchNorm, LargeBatchMatchesADoublePrecisionReference) {
  // Enough rows for the grouped (parallel) reductions; data far from zero (no cancellation).
  const int64_t rows = 64 * 17, channels = 5;
  const Tensor xd = random_tensor(Shape{rows, channels}, 3, 99, 101);
  std::vector<float> xf(xd.data<double>(), xd.data<double>() + rows * channels);
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>(xf, Shape{64, 17, 1, channels}));
  auto ones = constant<float>(s, std::vector<float>(channels, 1.f), Shape{channels});
  auto zeros = constant<float>(s, std::vector<float>(channels, 0.f), Shape{channels});
  auto bn = fused_batch_norm(s, x, ones, zeros, Output{}, Output{}, 1e-3, true);
  auto out = testing::eval({bn.y, bn.batch_mean, bn.reserve_space_2}, {}, 4);
  for (int64_t j = 0; j < channels; ++j) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < rows; ++r) mean += xf[r * channels + j];
    mean /= rows;
    for (int64_t r = 0; r < rows; ++r) var += (xf[r * channels + j] - mean) * (xf[r * channels + j] - mean);
    var /= rows;
    EXPECT_NEAR(out[1].data<float>()[j], mean, 1e-4 * mean);
    EXPECT_NEAR(out[2].data<float>()[j], var, 1e-3 * var);
    for (int64_t r = 0; r < rows; r += 97)
      EXPECT_NEAR(out[0].data<float>()[r * channels + j], (xf[r * channels + j] - mean) / std::sqrt(var + 1e-3), 2e-3);
  }
}

void expect_build_error(const std::function<void(const Scope&)>& build, const std::vector<std::string>& parts) {
  Graph g;
  Scope s(g);
  try {
    build(s);
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    for (const auto& p : parts) EXPECT_THAT(std::string(e.what()), HasSubstr(p));
  }
}

TEST(FusedBatchNorm, BadShapesNameTheNodeAndTheShapes) {
  auto f = [](const Scope& s, Shape x, Shape scale, Shape offset, Shape mean, bool training) {
    auto p = [&](Shape sh) { return placeholder(s, DType::kFloat32, sh); };
    fused_batch_norm(s.with_op_name("bn"), p(x), p(scale), p(offset), p(mean), p(mean), 1e-3, training);
  };
  expect_build_error(
      [&](const Scope& s) {
        f(s, Shape{2, 4, 4, 3}, Shape{4}, Shape{3}, Shape{0}, true);
      },
      {"[FusedBatchNorm] bn: scale must be a vector of 3 elements", "[2,4,4,3]", "got [4]"});
  expect_build_error(
      [&](const Scope& s) {
        f(s, Shape{2, 4, 3}, Shape{3}, Shape{3}, Shape{0}, true);
      },
      {"[FusedBatchNorm] bn: x must be 4-dimensional (NHWC) or 2-dimensional", "[2,4,3]"});
  expect_build_error(
      [&](const Scope& s) {
        f(s, Shape{2, 3}, Shape{3}, Shape{3}, Shape{0}, false);
      },
      {"[FusedBatchNorm] bn: mean must be a vector of 3 elements", "got [0]"});
  expect_build_error(
      [&](const Scope& s) {
        f(s, Shape{2, 3}, Shape{3}, Shape{3, 1}, Shape{3}, false);
      },
      {"[FusedBatchNorm] bn: offset must be a vector of 3 elements", "got [3,1]"});
  // Run time: shapes known only when fed.
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32);
  auto scale = placeholder(s, DType::kFloat32);
  auto bn = fused_batch_norm(s.with_op_name("bn"), x, scale, scale, Output{}, Output{});
  try {
    eval(bn.y, {{x, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2})},
                {scale, Tensor::from_vector<float>({1, 2, 3}, Shape{3})}});
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("[FusedBatchNorm] bn: scale must be a vector of 2 elements"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("got [3]"));
  }
}

TEST(FusedBatchNorm, Costs) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{2, 4, 4, 3});
  auto v = placeholder(s, DType::kFloat32, Shape{3});
  auto train = fused_batch_norm(s, x, v, v, Output{}, Output{}, 1e-3, true);
  auto infer = fused_batch_norm(s, x, v, v, v, v, 1e-3, false);
  auto cost = [](Output o) {
    const Node& n = *o.node;
    std::vector<Shape> in, out;
    for (const Output& i : n.inputs()) in.push_back(i.shape());
    for (int i = 0; i < n.num_outputs(); ++i) out.push_back(n.output_shape(i));
    return n.op().flops(CostContext{n, in, out});
  };
  EXPECT_EQ(cost(train.y), 6 * 96);
  EXPECT_EQ(cost(infer.y), 2 * 96);
  auto grad = fused_batch_norm_grad(s, x, x, v, v, v);
  EXPECT_EQ(cost(grad.x_backprop), 8 * 96);
}

TEST(FusedBatchNormGradients, XScaleOffsetInTraining) {
  for (const Shape& shape : {Shape{2, 3, 3, 2}, Shape{5, 3}}) {
    SCOPED_TRACE(shape.to_string());
    const int64_t c = shape.dim(-1);
    Graph g;
    Scope s(g);
    auto x = placeholder(s, DType::kFloat64, shape);
    auto scale = placeholder(s, DType::kFloat64, Shape{c});
    auto offset = placeholder(s, DType::kFloat64, Shape{c});
    auto y = fused_batch_norm(s, x, scale, offset, Output{}, Output{}, 1e-3, true).y;
    const Tensor xv = random_tensor(shape, 11, -2, 2), sv = random_tensor(Shape{c}, 12, 0.5, 1.5),
                 ov = random_tensor(Shape{c}, 13);
    expect_gradient_matches(x, xv, y, {{scale, sv}, {offset, ov}}, {.expect_nonzero = true});
    expect_gradient_matches(scale, sv, y, {{x, xv}, {offset, ov}}, {.expect_nonzero = true});
    expect_gradient_matches(offset, ov, y, {{x, xv}, {scale, sv}}, {.expect_nonzero = true});
  }
}

TEST(FusedBatchNormGradients, XScaleOffsetInInference) {
  Graph g;
  Scope s(g);
  const Shape shape{2, 2, 3, 3};
  auto x = placeholder(s, DType::kFloat64, shape);
  auto scale = placeholder(s, DType::kFloat64, Shape{3});
  auto offset = placeholder(s, DType::kFloat64, Shape{3});
  auto mean = constant<double>(s, {0.1, -0.2, 0.3}, Shape{3});
  auto var = constant<double>(s, {0.5, 1.5, 2.0}, Shape{3});
  auto y = fused_batch_norm(s, x, scale, offset, mean, var, 1e-3, false).y;
  const Tensor xv = random_tensor(shape, 14), sv = random_tensor(Shape{3}, 15, 0.5, 1.5),
               ov = random_tensor(Shape{3}, 16);
  expect_gradient_matches(x, xv, y, {{scale, sv}, {offset, ov}}, {.expect_nonzero = true});
  expect_gradient_matches(scale, sv, y, {{x, xv}, {offset, ov}}, {.expect_nonzero = true});
  expect_gradient_matches(offset, ov, y, {{x, xv}, {scale, sv}}, {.expect_nonzero = true});
}

TEST(FusedBatchNormGradients, TheRuleBuildsFusedBatchNormGradAndStatisticsGetNoGradient) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{4, 2});
  auto v = constant<float>(s, {1, 1}, Shape{2});
  auto bn = fused_batch_norm(s, x, v, v, Output{}, Output{});
  auto grads = gradients(s, {bn.y}, {x});
  ASSERT_TRUE(grads[0]);
  EXPECT_EQ(grads[0].node->op_type(), "FusedBatchNormGrad");
  EXPECT_THROW(gradients(s, {bn.batch_mean}, {x}), UnimplementedError);
}

}  // namespace
}  // namespace stepscope
