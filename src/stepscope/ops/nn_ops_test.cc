// Relu, BiasAdd, Softmax, LogSoftmax, the two softmax cross entropies and the backward ops
// (ReluGrad, BiasAddGrad, SoftmaxGrad, LogSoftmaxGrad, ScaleRows): values against hand
// computation, numerical stability, shape rules (errors and unknown dims), run-time errors and
// costs. Conv2D and MaxPool are tested in conv_ops_test.cc; the gradient rules numerically in
// nn_grad_test.cc.
#include "stepscope/ops/nn_ops.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_build_error;
using testing::expect_invalid_argument;
using testing::expect_tensor_near;
using testing::flops_of;

// Naive double-precision softmax of one row, for reference values.
std::vector<double> softmax_ref(const std::vector<double>& x) {
  double m = x[0];
  for (double v : x) m = std::max(m, v);
  double sum = 0;
  for (double v : x) sum += std::exp(v - m);
  std::vector<double> y;
  for (double v : x) y.push_back(std::exp(v - m) / sum);
  return y;
}

// e^1, e^2, e^3 normalised (sum 30.19287485).
const std::vector<float> kSoftmax123 = {0.09003057f, 0.24472847f, 0.66524096f};

// ------------------------------------------------------------------------------------------- Relu

TEST(Relu, Float32ValuesKeepNaN) {
  Graph g;
  Scope s(g);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto y = relu(s, constant<float>(s, {-2.5f, -0.0f, 0.0f, 1.5f, nan, 1e30f}, Shape{2, 3}));
  EXPECT_EQ(y.node->name(), "Relu");
  expect_tensor_near<float>(eval(y), Shape{2, 3}, {0, 0, 0, 1.5f, nan, 1e30f});
}

TEST(Relu, Float64AndInt32) {
  Graph g;
  Scope s(g);
  auto yd = relu(s, constant<double>(s, {-1e-300, 2.25, -7}, Shape{3}));
  auto yi = relu(s, constant<int32_t>(s, {-3, 0, 4, -2147483647}, Shape{2, 2}));
  auto yl = relu(s, constant<int64_t>(s, {-3, 5}, Shape{2}));
  auto out = eval({yd, yi, yl});
  expect_tensor_near<double>(out[0], Shape{3}, {0, 2.25, 0}, 0);
  expect_tensor_near<int32_t>(out[1], Shape{2, 2}, {0, 0, 4, 0});
  expect_tensor_near<int64_t>(out[2], Shape{2}, {0, 5});
}

TEST(Relu, LargeTensorSplitOverThreads) {
  Graph g;
  Scope s(g);
  const int64_t n = 200000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  auto y = relu(s, constant<float>(s, x, Shape{n}));
  Session session(g, {.inter_op_threads = 4, .intra_op_threads = 4});
  const Tensor result = session.run(y);
  auto got = result.flat<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], std::max(0.0f, x[i])) << i;
}

TEST(Relu, UnknownDimsAndDtypeError) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 2});
  auto y = relu(s, x);
  EXPECT_EQ(y.shape(), (Shape{-1, 2}));
  EXPECT_EQ(relu(s, placeholder(s, DType::kFloat32)).shape(), Shape::unknown_rank());
  expect_tensor_near<float>(eval(y, {{x, Tensor::from_vector<float>({-1, 2, 3, -4, 5, -6}, Shape{3, 2})}}), Shape{3, 2},
                            {0, 2, 3, 0, 5, 0});
  auto b = placeholder(s, DType::kBool, Shape{2});
  expect_invalid_argument([&] { relu(s.with_op_name("r"), b); },
                          "[Relu] r: input 0 must be float32, float64, int32 or int64, got bool");
}

// ---------------------------------------------------------------------------------------- BiasAdd

TEST(BiasAdd, AddsAlongTheLastDimension) {
  Graph g;
  Scope s(g);
  auto y = bias_add(s, constant<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3}), constant<float>(s, {10, 20, 30}, Shape{3}));
  expect_tensor_near<float>(eval(y), Shape{2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(BiasAdd, Rank4Float64AndInt32) {
  Graph g;
  Scope s(g);
  std::vector<double> x(2 * 2 * 1 * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  auto yd = bias_add(s, constant<double>(s, x, Shape{2, 2, 1, 2}), constant<double>(s, {0.5, -100}, Shape{2}));
  auto yi = bias_add(s, constant<int32_t>(s, {1, 2, 3, 4}, Shape{2, 2}), constant<int32_t>(s, {-1, 1}, Shape{2}));
  auto out = eval({yd, yi});
  expect_tensor_near<double>(out[0], Shape{2, 2, 1, 2}, {0.5, -99, 2.5, -97, 4.5, -95, 6.5, -93}, 0);
  expect_tensor_near<int32_t>(out[1], Shape{2, 2}, {0, 3, 2, 5});
}

TEST(BiasAdd, ShapeRuleErrors) {
  auto x23 = [](const Scope& s) { return constant<float>(s, std::vector<float>(6, 1), Shape{2, 3}); };
  expect_build_error(
      [&](const Scope& s) {
        bias_add(s, x23(s), constant<float>(s, {1, 2, 3, 4}, Shape{4}));
      },
      "[BiasAdd] BiasAdd: Must provide as many biases as the last dimension of the input tensor: "
      "[4] vs. [2,3]");
  expect_build_error(
      [&](const Scope& s) {
        bias_add(s, constant<float>(s, {1, 2, 3}, Shape{3}), constant<float>(s, {1, 2, 3}, Shape{3}));
      },
      "[BiasAdd] BiasAdd: Input tensor must be at least 2D: [3]");
  expect_build_error(
      [&](const Scope& s) {
        bias_add(s, x23(s), constant<float>(s, {1, 2, 3}, Shape{1, 3}));
      },
      "[BiasAdd] BiasAdd: Biases must be 1D: [1,3]");
  expect_build_error(
      [&](const Scope& s) {
        bias_add(s, x23(s), constant<double>(s, {1, 2, 3}, Shape{3}));
      },
      "[BiasAdd] BiasAdd: input 1 must be float32, got float64");
}

TEST(BiasAdd, UnknownDimsAndRunTimeCheck) {
  Graph g;
  Scope s(g);
  auto bias = constant<float>(s, {1, 2, 3}, Shape{3});
  auto x = placeholder(s, DType::kFloat32, Shape{-1, -1});
  EXPECT_EQ(bias_add(s, x, bias).shape(), (Shape{-1, 3}));
  auto bias_unknown = placeholder(s, DType::kFloat32, Shape{-1});
  EXPECT_EQ(bias_add(s, x, bias_unknown).shape(), (Shape{-1, -1}));
  auto any = placeholder(s.with_op_name("any"), DType::kFloat32);
  auto y = bias_add(s.with_op_name("b"), any, bias);
  EXPECT_EQ(y.shape(), Shape::unknown_rank());
  expect_tensor_near<float>(eval(y, {{any, Tensor::from_vector<float>({0, 0, 0, 1, 1, 1}, Shape{2, 1, 3})}}),
                            Shape{2, 1, 3}, {1, 2, 3, 2, 3, 4});
  expect_invalid_argument(
      [&] {
        eval(y, {{any, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 4})}});
      },
      "[BiasAdd] b: Must provide as many biases as the last dimension of the input tensor: [3] vs. "
      "[2,4]");
  expect_invalid_argument(
      [&] {
        eval(y, {{any, Tensor::from_vector<float>({1, 2, 3}, Shape{3})}});
      },
      "[BiasAdd] b: Input tensor must be at least 2D: [3]");
}

// ---------------------------------------------------------------------------------------- Softmax

TEST(Softmax, HandComputedRows) {
  Graph g;
  Scope s(g);
  auto y = softmax(s, constant<float>(s, {1, 2, 3, 0, 0, 0}, Shape{2, 3}));
  expect_tensor_near<float>(eval(y), Shape{2, 3},
                            {kSoftmax123[0], kSoftmax123[1], kSoftmax123[2], 1.f / 3, 1.f / 3, 1.f / 3}, 1e-6);
}

TEST(Softmax, StableForLargeLogits) {
  Graph g;
  Scope s(g);
  // Naively exp(1000) overflows to inf and the result would be NaN.
  auto y = softmax(s, constant<float>(s, {1000, 1001, 1002, -1000, 0, 0}, Shape{2, 3}));
  auto ly = log_softmax(s, constant<float>(s, {1000, 1001, 1002, 0, -1000, 0}, Shape{2, 3}));
  auto out = eval({y, ly});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {kSoftmax123[0], kSoftmax123[1], kSoftmax123[2], 0, 0.5f, 0.5f}, 1e-6);
  const float log2 = std::log(2.0f);
  expect_tensor_near<float>(out[1], Shape{2, 3}, {-2.40760596f, -1.40760596f, -0.40760596f, -log2, -1000 - log2, -log2},
                            1e-6);
}

TEST(Softmax, Float64AgainstNaiveAndRank3) {
  Graph g;
  Scope s(g);
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> dist(-5, 5);
  std::vector<double> x(2 * 3 * 5);
  for (double& v : x) v = dist(gen);
  auto y = softmax(s, constant<double>(s, x, Shape{2, 3, 5}));
  auto ly = log_softmax(s, constant<double>(s, x, Shape{2, 3, 5}));
  auto out = eval({y, ly});
  std::vector<double> expected, expected_log;
  for (int r = 0; r < 6; ++r) {
    auto row = softmax_ref({x.begin() + r * 5, x.begin() + r * 5 + 5});
    for (double v : row) expected.push_back(v), expected_log.push_back(std::log(v));
  }
  expect_tensor_near<double>(out[0], Shape{2, 3, 5}, expected, 1e-12);
  expect_tensor_near<double>(out[1], Shape{2, 3, 5}, expected_log, 1e-12);
}

TEST(Softmax, Rank1AndUnknownDims) {
  Graph g;
  Scope s(g);
  expect_tensor_near<float>(eval(softmax(s, constant<float>(s, {1, 2, 3}, Shape{3}))), Shape{3}, kSoftmax123, 1e-6);
  auto x = placeholder(s, DType::kFloat64, Shape{-1, 3});
  auto y = log_softmax(s, x);
  EXPECT_EQ(y.shape(), (Shape{-1, 3}));
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  expect_tensor_near<double>(eval(y, {{x, Tensor::from_vector<double>({0, 0, 0}, Shape{1, 3})}}), Shape{1, 3},
                             {-std::log(3.0), -std::log(3.0), -std::log(3.0)}, 1e-14);
}

TEST(Softmax, Errors) {
  expect_build_error([](const Scope& s) { softmax(s, constant<float>(s, 1.0f)); },
                     "[Softmax] Softmax: logits must have >= 1 dimension, got []");
  expect_build_error(
      [](const Scope& s) {
        log_softmax(s, constant<int32_t>(s, {1, 2}, Shape{2}));
      },
      "[LogSoftmax] LogSoftmax: input 0 must be float32 or float64, got int32");
  Graph g;
  Scope s(g);
  auto any = placeholder(s.with_op_name("any"), DType::kFloat32);
  auto y = softmax(s.with_op_name("sm"), any);
  expect_invalid_argument(
      [&] {
        eval(y, {{any, Tensor::scalar<float>(2)}});
      },
      "[Softmax] sm: logits must have >= 1 dimension, got []");
}

// ------------------------------------------------------------------ SparseSoftmaxCrossEntropyWithLogits

TEST(SparseSoftmaxCrossEntropyWithLogits, LossAndBackprop) {
  Graph g;
  Scope s(g);
  auto logits = constant<float>(s, {1, 2, 3, 1, 1, 1}, Shape{2, 3});
  auto loss32 = sparse_softmax_cross_entropy_with_logits(s, constant<int32_t>(s, {2, 0}, Shape{2}), logits);
  auto loss64 = sparse_softmax_cross_entropy_with_logits(s, constant<int64_t>(s, {2, 0}, Shape{2}), logits);
  EXPECT_EQ(loss32.index, 0);
  EXPECT_EQ(loss32.node->num_outputs(), 2);
  EXPECT_EQ(loss32.node->input(0), logits);  // TF's input order: features, labels
  auto out = eval({loss32, loss32.node->output(1), loss64, loss64.node->output(1)});
  // row 0: log(e + e^2 + e^3) - 3; row 1: log(3).
  const std::vector<float> loss = {0.40760596f, 1.09861229f};
  const std::vector<float> backprop = {kSoftmax123[0], kSoftmax123[1], kSoftmax123[2] - 1,
                                       1.f / 3 - 1,    1.f / 3,        1.f / 3};
  expect_tensor_near<float>(out[0], Shape{2}, loss, 1e-6);
  expect_tensor_near<float>(out[1], Shape{2, 3}, backprop, 1e-6);
  expect_tensor_near<float>(out[2], Shape{2}, loss, 1e-6);
  expect_tensor_near<float>(out[3], Shape{2, 3}, backprop, 1e-6);
}

TEST(SparseSoftmaxCrossEntropyWithLogits, Float64AgainstNaiveAndLargeLogits) {
  Graph g;
  Scope s(g);
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> dist(-4, 4);
  const int batch = 5, classes = 7;
  std::vector<double> x(batch * classes);
  for (double& v : x) v = dist(gen);
  x[3] = 1000;  // row 0 dominated by one huge logit
  const std::vector<int64_t> labels = {3, 0, 6, 2, 2};
  auto loss = sparse_softmax_cross_entropy_with_logits(s, constant<int64_t>(s, labels, Shape{batch}),
                                                       constant<double>(s, x, Shape{batch, classes}));
  auto out = eval({loss, loss.node->output(1)});
  std::vector<double> exp_loss, exp_backprop;
  for (int r = 0; r < batch; ++r) {
    auto p = softmax_ref({x.begin() + r * classes, x.begin() + (r + 1) * classes});
    exp_loss.push_back(-std::log(p[labels[r]]));
    for (int j = 0; j < classes; ++j) exp_backprop.push_back(p[j] - (j == labels[r] ? 1 : 0));
  }
  expect_tensor_near<double>(out[0], Shape{batch}, exp_loss, 1e-12);
  expect_tensor_near<double>(out[1], Shape{batch, classes}, exp_backprop, 1e-12);
  EXPECT_TRUE(std::isfinite(out[0].flat<double>()[0]));
}

TEST(SparseSoftmaxCrossEntropyWithLogits, HugeWrongLogitGivesFiniteLoss) {
  Graph g;
  Scope s(g);
  auto loss = sparse_softmax_cross_entropy_with_logits(s, constant<int32_t>(s, {1}, Shape{1}),
                                                       constant<float>(s, {1000, 0}, Shape{1, 2}));
  auto out = eval({loss, loss.node->output(1)});
  expect_tensor_near<float>(out[0], Shape{1}, {1000}, 1e-6);
  expect_tensor_near<float>(out[1], Shape{1, 2}, {1, -1}, 1e-6);
}

TEST(SparseSoftmaxCrossEntropyWithLogits, LabelOutOfRangeFailsTheRun) {
  Graph g;
  Scope s(g);
  auto labels = placeholder(s.with_op_name("labels"), DType::kInt32, Shape{-1});
  auto logits = constant<float>(s, std::vector<float>(30, 0.5f), Shape{3, 10});
  auto loss = sparse_softmax_cross_entropy_with_logits(s, labels, logits);
  Session session(g, {.inter_op_threads = 2});
  const std::string prefix = "[SparseSoftmaxCrossEntropyWithLogits] SparseSoftmaxCrossEntropyWithLogits: ";
  expect_invalid_argument(
      [&] {
        session.run(loss, {{labels, Tensor::from_vector<int32_t>({1, 12, 3})}});
      },
      prefix +
          "Received a label value of 12 which is outside the valid range of [0, 10).  Label "
          "values: 1 12 3");
  // A negative label is reported before a too-large one, like TensorFlow.
  expect_invalid_argument(
      [&] {
        session.run(loss, {{labels, Tensor::from_vector<int32_t>({-1, 10, 3})}});
      },
      prefix +
          "Received a label value of -1 which is outside the valid range of [0, 10).  Label "
          "values: -1 10 3");
  // The session stays usable.
  expect_tensor_near<float>(session.run(loss, {{labels, Tensor::from_vector<int32_t>({0, 9, 5})}}), Shape{3},
                            {std::log(10.0f), std::log(10.0f), std::log(10.0f)}, 1e-6);
}

TEST(SparseSoftmaxCrossEntropyWithLogits, ShapeRuleErrors) {
  const std::string p = "[SparseSoftmaxCrossEntropyWithLogits] SparseSoftmaxCrossEntropyWithLogits: ";
  auto logits = [](const Scope& s) { return constant<float>(s, std::vector<float>(6, 0), Shape{2, 3}); };
  auto labels = [](const Scope& s) { return constant<int32_t>(s, {0, 1}, Shape{2}); };
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, labels(s), constant<float>(s, {1, 2}, Shape{2}));
      },
      p + "logits must be 2-D, but got shape [2]");
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, constant<int32_t>(s, {0, 1}, Shape{2, 1}), logits(s));
      },
      p + "labels must be 1-D, but got shape [2,1]");
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, constant<int32_t>(s, {0, 1, 2}, Shape{3}), logits(s));
      },
      p + "logits and labels must have the same first dimension, got logits shape [2,3] and labels shape [3]");
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, constant<float>(s, {0, 1}, Shape{2}), logits(s));
      },
      p + "labels must be int32 or int64, got float32");
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, labels(s), constant<int32_t>(s, {0, 1}, Shape{2, 1}));
      },
      p + "input 0 must be float32 or float64, got int32");
  expect_build_error(
      [&](const Scope& s) {
        sparse_softmax_cross_entropy_with_logits(s, labels(s), constant<float>(s, {}, Shape{2, 0}));
      },
      p + "Must have at least one class, but got logits shape [2,0]");
}

TEST(SparseSoftmaxCrossEntropyWithLogits, UnknownBatch) {
  Graph g;
  Scope s(g);
  auto logits = placeholder(s, DType::kFloat32, Shape{-1, 4});
  auto labels = placeholder(s, DType::kInt64, Shape{-1});
  auto loss = sparse_softmax_cross_entropy_with_logits(s, labels, logits);
  EXPECT_EQ(loss.shape(), (Shape{-1}));
  EXPECT_EQ(loss.node->output(1).shape(), (Shape{-1, 4}));
  // The batch comes from whichever input knows it.
  auto loss2 = sparse_softmax_cross_entropy_with_logits(s, placeholder(s, DType::kInt32, Shape{5}), logits);
  EXPECT_EQ(loss2.node->output(1).shape(), (Shape{5, 4}));
  auto loss3 = sparse_softmax_cross_entropy_with_logits(s, labels, placeholder(s, DType::kFloat64));
  EXPECT_EQ(loss3.shape(), (Shape{-1}));
  EXPECT_EQ(loss3.node->output(1).shape(), (Shape{-1, -1}));
  auto out = eval({loss, loss.node->output(1)},
                  {{logits, Tensor::from_vector<float>({0, 0, 0, 0, 1, 2, 3, 1000}, Shape{2, 4})},
                   {labels, Tensor::from_vector<int64_t>({1, 3})}});
  expect_tensor_near<float>(out[0], Shape{2}, {std::log(4.0f), 0}, 1e-6);
  expect_tensor_near<float>(out[1], Shape{2, 4}, {0.25f, -0.75f, 0.25f, 0.25f, 0, 0, 0, 0}, 1e-6);
}

// ------------------------------------------------------------------------ SoftmaxCrossEntropyWithLogits

TEST(SoftmaxCrossEntropyWithLogits, LossAndBackprop) {
  Graph g;
  Scope s(g);
  auto loss = softmax_cross_entropy_with_logits(s, constant<float>(s, {0, 0, 1, 0.5f, 0.5f, 0}, Shape{2, 3}),
                                                constant<float>(s, {1, 2, 3, 1001, 1002, 1003}, Shape{2, 3}));
  auto out = eval({loss, loss.node->output(1)});
  // log-sum-exp of (1, 2, 3) is 3.40760596; row 1 = 0.5 * (lse - 1) + 0.5 * (lse - 2).
  expect_tensor_near<float>(out[0], Shape{2}, {0.40760596f, 1.90760596f}, 1e-6);
  expect_tensor_near<float>(out[1], Shape{2, 3},
                            {kSoftmax123[0], kSoftmax123[1], kSoftmax123[2] - 1, kSoftmax123[0] - 0.5f,
                             kSoftmax123[1] - 0.5f, kSoftmax123[2]},
                            1e-6);
}

TEST(SoftmaxCrossEntropyWithLogits, Float64AgainstNaive) {
  Graph g;
  Scope s(g);
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> dist(-3, 3), unit(0, 1);
  const int batch = 4, classes = 6;
  std::vector<double> x(batch * classes), lab(batch * classes);
  for (double& v : x) v = dist(gen);
  for (int r = 0; r < batch; ++r) {
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += lab[r * classes + j] = unit(gen);
    for (int j = 0; j < classes; ++j) lab[r * classes + j] /= sum;
  }
  auto loss = softmax_cross_entropy_with_logits(s, constant<double>(s, lab, Shape{batch, classes}),
                                                constant<double>(s, x, Shape{batch, classes}));
  auto out = eval({loss, loss.node->output(1)});
  std::vector<double> exp_loss, exp_backprop;
  for (int r = 0; r < batch; ++r) {
    auto p = softmax_ref({x.begin() + r * classes, x.begin() + (r + 1) * classes});
    double l = 0;
    for (int j = 0; j < classes; ++j) {
      l -= lab[r * classes + j] * std::log(p[j]);
      exp_backprop.push_back(p[j] - lab[r * classes + j]);
    }
    exp_loss.push_back(l);
  }
  expect_tensor_near<double>(out[0], Shape{batch}, exp_loss, 1e-12);
  expect_tensor_near<double>(out[1], Shape{batch, classes}, exp_backprop, 1e-12);
}

TEST(SoftmaxCrossEntropyWithLogits, ShapeRuleErrorsAndUnknownDims) {
  const std::string p = "[SoftmaxCrossEntropyWithLogits] SoftmaxCrossEntropyWithLogits: ";
  auto logits = [](const Scope& s) { return constant<float>(s, std::vector<float>(6, 0), Shape{2, 3}); };
  expect_build_error(
      [&](const Scope& s) {
        softmax_cross_entropy_with_logits(s, constant<float>(s, std::vector<float>(8, 0), Shape{2, 4}), logits(s));
      },
      p + "logits and labels must be same size: logits_size=[2,3] labels_size=[2,4]");
  expect_build_error(
      [&](const Scope& s) {
        softmax_cross_entropy_with_logits(s, constant<float>(s, {1, 2, 3}, Shape{3}), logits(s));
      },
      p + "labels must be 2-dimensional, got shape [3]");
  expect_build_error(
      [&](const Scope& s) {
        softmax_cross_entropy_with_logits(s, constant<double>(s, std::vector<double>(6, 0), Shape{2, 3}), logits(s));
      },
      p + "input 1 must be float32, got float64");

  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{-1, 3});
  auto l = placeholder(s, DType::kFloat32, Shape{4, -1});
  auto loss = softmax_cross_entropy_with_logits(s, l, x);
  EXPECT_EQ(loss.shape(), (Shape{4}));
  EXPECT_EQ(loss.node->output(1).shape(), (Shape{4, 3}));
  auto any = placeholder(s, DType::kFloat32);
  auto loss2 = softmax_cross_entropy_with_logits(s.with_op_name("x2"), any, x);
  EXPECT_EQ(loss2.node->output(1).shape(), (Shape{-1, 3}));
  expect_invalid_argument(
      [&] {
        eval(loss2, {{x, Tensor::from_vector<float>({1, 2, 3}, Shape{1, 3})},
                     {any, Tensor::from_vector<float>({1, 0}, Shape{1, 2})}});
      },
      "[SoftmaxCrossEntropyWithLogits] x2: logits and labels must be same size: "
      "logits_size=[1,3] labels_size=[1,2]");
}

// ---------------------------------------------------------------------------------- Backward ops

TEST(ReluGrad, PassesGradientWhereFeaturesArePositive) {
  Graph g;
  Scope s(g);
  auto grads = constant<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto features = constant<float>(s, {-1, 0, 2, -3, 0.5f, 7}, Shape{2, 3});
  auto dx = relu_grad(s, grads, features);
  EXPECT_EQ(dx.node->name(), "ReluGrad");
  expect_tensor_near<float>(eval(dx), Shape{2, 3}, {0, 0, 3, 0, 5, 6}, 0);
  // TensorFlow multiplies: a NaN or infinite gradient gives NaN even where the unit is off
  // (inf * 0); a NaN feature counts as off.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_tensor_near<float>(eval(relu_grad(s, constant<float>(s, {nan, nan, inf, -inf, inf, 2}, Shape{6}),
                                           constant<float>(s, {-1, 1, -1, 0, 3, nan}, Shape{6}))),
                            Shape{6}, {nan, nan, nan, nan, inf, 0});
  expect_tensor_near<int32_t>(
      eval(relu_grad(s, constant<int32_t>(s, {5, 6, 7}, Shape{3}), constant<int32_t>(s, {1, 0, -2}, Shape{3}))),
      Shape{3}, {5, 0, 0});
}

TEST(ReluGrad, LargeTensorFloat64OverThreads) {
  Graph g;
  Scope s(g);
  const int64_t n = 100003;
  std::vector<double> grads(n), features(n);
  for (int64_t i = 0; i < n; ++i) grads[i] = 0.5 * static_cast<double>(i), features[i] = (i % 3) - 1.0;
  auto dx = relu_grad(s, constant<double>(s, grads, Shape{n}), constant<double>(s, features, Shape{n}));
  Session session(g, {.inter_op_threads = 4, .intra_op_threads = 4});
  const Tensor result = session.run(dx);
  auto got = result.flat<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], features[i] > 0 ? grads[i] : 0.0) << i;
}

TEST(ReluGrad, ShapeRuleErrorsAndUnknownDims) {
  expect_build_error(
      [](const Scope& s) {
        relu_grad(s, placeholder(s, DType::kFloat32, Shape{2, 3}), placeholder(s, DType::kFloat32, Shape{3, 2}));
      },
      "[ReluGrad] ReluGrad: gradients and features must have the same shape: [2,3] vs [3,2]");
  expect_build_error(
      [](const Scope& s) {
        relu_grad(s, placeholder(s, DType::kFloat32, Shape{2}), placeholder(s, DType::kFloat64, Shape{2}));
      },
      "[ReluGrad] ReluGrad: input 1 must be float32, got float64");
  expect_build_error(
      [](const Scope& s) {
        relu_grad(s, placeholder(s, DType::kBool, Shape{2}), placeholder(s, DType::kBool, Shape{2}));
      },
      "[ReluGrad] ReluGrad: input 0 must be float32, float64, int32 or int64, got bool");
  Graph g;
  Scope s(g);
  auto a = placeholder(s.with_op_name("a"), DType::kFloat32, Shape{-1, 3});
  auto b = placeholder(s.with_op_name("b"), DType::kFloat32, Shape{2, -1});
  auto dx = relu_grad(s.with_op_name("dx"), a, b);
  EXPECT_EQ(dx.shape(), (Shape{2, 3}));
  EXPECT_EQ(relu_grad(s, a, placeholder(s, DType::kFloat32)).shape(), (Shape{-1, 3}));
  expect_invalid_argument(
      [&] {
        eval(dx, {{a, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})},
                  {b, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2})}});
      },
      "[ReluGrad] dx: gradients and features must have the same shape: [2,3] vs [2,2]");
}

TEST(BiasAddGrad, SumsAllButTheLastDimension) {
  Graph g;
  Scope s(g);
  auto db = bias_add_grad(s, constant<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_EQ(db.node->name(), "BiasAddGrad");
  EXPECT_EQ(db.shape(), (Shape{3}));
  expect_tensor_near<float>(eval(db), Shape{3}, {5, 7, 9}, 0);
  // Rank 4: [2, 1, 2, 2] sums 4 rows of 2 channels.
  expect_tensor_near<double>(eval(bias_add_grad(s, constant<double>(s, {1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 1, 2, 2}))),
                             Shape{2}, {16, 20}, 0);
  expect_tensor_near<int64_t>(eval(bias_add_grad(s, constant<int64_t>(s, {1, -2, 3, -4}, Shape{4, 1}))), Shape{1},
                              {-2});
  // No rows: zeros.
  expect_tensor_near<float>(eval(bias_add_grad(s, constant<float>(s, {}, Shape{0, 2}))), Shape{2}, {0, 0});
}

TEST(BiasAddGrad, LargeInputIsExactAndIndependentOfThreads) {
  // 3000 x 37 (several row groups): integer-valued floats, so every order of summation is exact
  // and the float32 result must equal the exact sums; then bit-equality across thread counts on
  // values whose sums do round.
  const int64_t rows = 3000, channels = 37;
  std::vector<float> exact(rows * channels), rounding(rows * channels);
  for (int64_t i = 0; i < rows * channels; ++i) {
    exact[i] = static_cast<float>((i * 7) % 13) - 6.0f;
    rounding[i] = 1.0f / static_cast<float>(1 + i % 101);
  }
  std::vector<float> expected(channels, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < channels; ++j) expected[j] += exact[r * channels + j];
  std::vector<Tensor> results;
  for (int threads : {1, 2, 4}) {
    Graph g;
    Scope s(g);
    auto a = bias_add_grad(s, constant<float>(s, exact, Shape{rows, channels}));
    auto b = bias_add_grad(s, constant<float>(s, rounding, Shape{rows, 1, channels}));
    Session session(g, {.inter_op_threads = threads, .intra_op_threads = threads});
    auto out = session.run({}, {a, b});
    expect_tensor_near<float>(out[0], Shape{channels}, expected, 0);
    results.push_back(out[1]);
  }
  for (size_t t = 1; t < results.size(); ++t)
    for (int64_t j = 0; j < channels; ++j)
      EXPECT_EQ(results[t].flat<float>()[j], results[0].flat<float>()[j]) << "threads case " << t << " at " << j;
}

TEST(BiasAddGrad, ShapeRuleErrorsAndUnknownDims) {
  expect_build_error([](const Scope& s) { bias_add_grad(s, placeholder(s, DType::kFloat32, Shape{3})); },
                     "[BiasAddGrad] BiasAddGrad: Input tensor must be at least 2D: [3]");
  expect_build_error(
      [](const Scope& s) {
        bias_add_grad(s, placeholder(s, DType::kString, Shape{2, 3}));
      },
      "[BiasAddGrad] BiasAddGrad: input 0 must be float32, float64, int32 or int64, got string");
  Graph g;
  Scope s(g);
  EXPECT_EQ(bias_add_grad(s, placeholder(s, DType::kFloat32, Shape{-1, -1, 5})).shape(), (Shape{5}));
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32);
  auto db = bias_add_grad(s.with_op_name("db"), x);
  EXPECT_EQ(db.shape(), (Shape{-1}));
  expect_tensor_near<float>(eval(db, {{x, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2})}}), Shape{2}, {4, 6});
  expect_invalid_argument(
      [&] {
        eval(db, {{x, Tensor::from_vector<float>({1, 2}, Shape{2})}});
      },
      "[BiasAddGrad] db: Input tensor must be at least 2D: [2]");
}

TEST(SoftmaxGrad, HandComputedRows) {
  Graph g;
  Scope s(g);
  // y = [0.2, 0.3, 0.5], g = [1, 2, 3]: sum(g * y) = 2.3, dx = (g - 2.3) * y.
  // Second row: y = [0.5, 0.5, 0], g = [4, 0, 9]: sum = 2, dx = [1, -1, 0].
  auto y = constant<float>(s, {0.2f, 0.3f, 0.5f, 0.5f, 0.5f, 0}, Shape{2, 3});
  auto grads = constant<float>(s, {1, 2, 3, 4, 0, 9}, Shape{2, 3});
  auto dx = softmax_grad(s, grads, y);
  EXPECT_EQ(dx.node->name(), "SoftmaxGrad");
  expect_tensor_near<float>(eval(dx), Shape{2, 3}, {-0.26f, -0.09f, 0.35f, 1, -1, 0});
}

TEST(LogSoftmaxGrad, HandComputedRows) {
  Graph g;
  Scope s(g);
  // y = log([0.2, 0.3, 0.5]), g = [1, 2, 3]: sum(g) = 6, dx = g - exp(y) * 6 = [-0.2, 0.2, 0].
  auto y = constant<double>(s, {std::log(0.2), std::log(0.3), std::log(0.5)}, Shape{1, 3});
  auto dx = log_softmax_grad(s, constant<double>(s, {1, 2, 3}, Shape{1, 3}), y);
  EXPECT_EQ(dx.node->name(), "LogSoftmaxGrad");
  expect_tensor_near<double>(eval(dx), Shape{1, 3}, {-0.2, 0.2, 0}, 1e-14);
  // Rank 1 and rank 3 rows.
  expect_tensor_near<double>(eval(log_softmax_grad(s, constant<double>(s, {1, 1}, Shape{2}),
                                                   constant<double>(s, {std::log(0.25), std::log(0.75)}, Shape{2}))),
                             Shape{2}, {0.5, -0.5}, 1e-14);
  expect_tensor_near<float>(eval(softmax_grad(s, constant<float>(s, {1, 0, 0, 1}, Shape{2, 1, 2}),
                                              constant<float>(s, {0.5f, 0.5f, 0.25f, 0.75f}, Shape{2, 1, 2}))),
                            Shape{2, 1, 2}, {0.25f, -0.25f, -0.1875f, 0.1875f});
}

// Rows long enough for the interleaved partial sums (16 float / 8 double lanes) plus a tail.
template <typename T>
void check_softmax_grads_against_naive(int64_t rows, int64_t n) {
  Graph g;
  Scope s(g);
  std::mt19937 gen(static_cast<unsigned>(rows * 100 + n));
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<T> grads(rows * n), y(rows * n), log_y(rows * n);
  std::vector<T> expected_sm(rows * n), expected_lsm(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> x(n);
    for (double& v : x) v = dist(gen);
    const std::vector<double> p = softmax_ref(x);
    double dot = 0, sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      grads[r * n + j] = static_cast<T>(dist(gen));
      y[r * n + j] = static_cast<T>(p[j]);
      log_y[r * n + j] = static_cast<T>(std::log(p[j]));
      dot += double(grads[r * n + j]) * double(y[r * n + j]);
      sum += double(grads[r * n + j]);
    }
    for (int64_t j = 0; j < n; ++j) {
      expected_sm[r * n + j] = static_cast<T>((double(grads[r * n + j]) - dot) * double(y[r * n + j]));
      expected_lsm[r * n + j] = static_cast<T>(double(grads[r * n + j]) - std::exp(double(log_y[r * n + j])) * sum);
    }
  }
  const Shape shape{rows, n};
  auto gc = constant<T>(s, grads, shape);
  auto out =
      eval({softmax_grad(s, gc, constant<T>(s, y, shape)), log_softmax_grad(s, gc, constant<T>(s, log_y, shape))});
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  expect_tensor_near<T>(out[0], shape, expected_sm, tolerance);
  expect_tensor_near<T>(out[1], shape, expected_lsm, tolerance);
}

TEST(SoftmaxGrad, LongRowsAgainstNaive) {
  for (int64_t n : {16, 37, 100}) {
    SCOPED_TRACE(::testing::Message() << "row length " << n);
    check_softmax_grads_against_naive<float>(3, n);
    check_softmax_grads_against_naive<double>(3, n);
  }
  check_softmax_grads_against_naive<float>(2000, 53);  // split over threads
}

TEST(SoftmaxGrad, ErrorsAndUnknownDims) {
  expect_build_error(
      [](const Scope& s) {
        softmax_grad(s, placeholder(s, DType::kFloat32, Shape{2, 3}), placeholder(s, DType::kFloat32, Shape{2, 4}));
      },
      "[SoftmaxGrad] SoftmaxGrad: gradients and softmax must have the same shape: [2,3] vs [2,4]");
  expect_build_error(
      [](const Scope& s) {
        log_softmax_grad(s, placeholder(s, DType::kFloat32, Shape{}), placeholder(s, DType::kFloat32, Shape{}));
      },
      "[LogSoftmaxGrad] LogSoftmaxGrad: gradients must have >= 1 dimension, got []");
  expect_build_error(
      [](const Scope& s) {
        log_softmax_grad(s, placeholder(s, DType::kInt32, Shape{2}), placeholder(s, DType::kInt32, Shape{2}));
      },
      "[LogSoftmaxGrad] LogSoftmaxGrad: input 0 must be float32 or float64, got int32");
  Graph g;
  Scope s(g);
  auto a = placeholder(s.with_op_name("a"), DType::kFloat32, Shape{-1, 2});
  auto b = placeholder(s.with_op_name("b"), DType::kFloat32);
  auto dx = log_softmax_grad(s.with_op_name("dx"), a, b);
  EXPECT_EQ(dx.shape(), (Shape{-1, 2}));
  expect_invalid_argument(
      [&] {
        eval(dx, {{a, Tensor::from_vector<float>({1, 2}, Shape{1, 2})},
                  {b, Tensor::from_vector<float>({1, 2}, Shape{2, 1})}});
      },
      "[LogSoftmaxGrad] dx: gradients and log_softmax must have the same shape: [1,2] vs [2,1]");
}

TEST(ScaleRows, MultipliesEachRowByItsScale) {
  Graph g;
  Scope s(g);
  auto y = scale_rows(s, constant<float>(s, {2, -1}, Shape{2}), constant<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_EQ(y.node->name(), "ScaleRows");
  expect_tensor_near<float>(eval(y), Shape{2, 3}, {2, 4, 6, -4, -5, -6}, 0);
  expect_tensor_near<double>(
      eval(scale_rows(s, constant<double>(s, {0.5}, Shape{1}), constant<double>(s, {3}, Shape{1, 1}))), Shape{1, 1},
      {1.5}, 0);
}

TEST(ScaleRows, ErrorsAndUnknownDims) {
  expect_build_error(
      [](const Scope& s) {
        scale_rows(s, placeholder(s, DType::kFloat32, Shape{3}), placeholder(s, DType::kFloat32, Shape{2, 4}));
      },
      "[ScaleRows] ScaleRows: scale and x must have the same first dimension, got scale shape [3] and x shape [2,4]");
  expect_build_error(
      [](const Scope& s) {
        scale_rows(s, placeholder(s, DType::kFloat32, Shape{2, 1}), placeholder(s, DType::kFloat32, Shape{2, 4}));
      },
      "[ScaleRows] ScaleRows: scale must be 1-D, got shape [2,1]");
  expect_build_error(
      [](const Scope& s) {
        scale_rows(s, placeholder(s, DType::kFloat32, Shape{2}), placeholder(s, DType::kFloat32, Shape{2}));
      },
      "[ScaleRows] ScaleRows: x must be 2-D, got shape [2]");
  expect_build_error(
      [](const Scope& s) {
        scale_rows(s, placeholder(s, DType::kFloat64, Shape{2}), placeholder(s, DType::kFloat32, Shape{2, 2}));
      },
      "[ScaleRows] ScaleRows: input 1 must be float64, got float32");
  Graph g;
  Scope s(g);
  auto scale = placeholder(s.with_op_name("scale"), DType::kFloat32, Shape{-1});
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto y = scale_rows(s.with_op_name("y"), scale, x);
  EXPECT_EQ(y.shape(), (Shape{-1, 3}));
  EXPECT_EQ(scale_rows(s, placeholder(s, DType::kFloat32, Shape{4}), placeholder(s, DType::kFloat32)).shape(),
            (Shape{4, -1}));
  expect_invalid_argument(
      [&] {
        eval(y, {{scale, Tensor::from_vector<float>({1, 2})}, {x, Tensor::from_vector<float>({1, 2, 3}, Shape{1, 3})}});
      },
      "[ScaleRows] y: scale and x must have the same first dimension, got scale shape [2] and x shape [1,3]");
}

// ------------------------------------------------------------------------------------------ Costs

TEST(NnOps, Flops) {
  Graph g;
  Scope s(g);
  auto x = constant<float>(s, std::vector<float>(6, 0), Shape{2, 3});
  EXPECT_EQ(flops_of(relu(s, x)), 6);
  EXPECT_EQ(flops_of(bias_add(s, x, constant<float>(s, {1, 2, 3}, Shape{3}))), 6);
  EXPECT_EQ(flops_of(softmax(s, x)), 30);
  EXPECT_EQ(flops_of(log_softmax(s, x)), 30);
  EXPECT_EQ(flops_of(sparse_softmax_cross_entropy_with_logits(s, constant<int32_t>(s, {0, 1}, Shape{2}), x)), 36);
  EXPECT_EQ(flops_of(softmax_cross_entropy_with_logits(s, x, x)), 48);
  EXPECT_EQ(flops_of(relu_grad(s, x, x)), 6);
  EXPECT_EQ(flops_of(bias_add_grad(s, x)), 6);
  EXPECT_EQ(flops_of(softmax_grad(s, x, x)), 24);
  EXPECT_EQ(flops_of(log_softmax_grad(s, x, x)), 24);
  EXPECT_EQ(flops_of(scale_rows(s, constant<float>(s, {1, 2}, Shape{2}), x)), 6);
  // Unknown shapes count nothing rather than garbage.
  EXPECT_EQ(flops_of(relu(s, placeholder(s, DType::kFloat32, Shape{-1, 3}))), 0);
}

// ------------------------------------------------------------------ SigmoidCrossEntropyWithLogits

TEST(SigmoidCrossEntropyWithLogits, MatchesTheLogisticLossAndItsBackprop) {
  Graph g;
  Scope s(g);
  const std::vector<double> x = {-3, -1, 0, 0.5, 1, 2.5}, z = {0, 1, 0.5, 0.25, 0, 1};
  auto logits = constant<double>(s, x, Shape{2, 3});
  auto labels = constant<double>(s, z, Shape{2, 3});
  auto loss = sigmoid_cross_entropy_with_logits(s, labels, logits);
  EXPECT_EQ(loss.shape(), (Shape{2, 3}));
  auto out = eval({loss, Output{loss.node, 1}});
  std::vector<double> want_loss, want_backprop;
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = 1 / (1 + std::exp(-x[i]));
    want_loss.push_back(-z[i] * std::log(p) - (1 - z[i]) * std::log(1 - p));
    want_backprop.push_back(p - z[i]);
  }
  expect_tensor_near<double>(out[0], Shape{2, 3}, want_loss, 1e-12);
  expect_tensor_near<double>(out[1], Shape{2, 3}, want_backprop, 1e-12);
}

TEST(SigmoidCrossEntropyWithLogits, LargeLogitsStayFinite) {
  Graph g;
  Scope s(g);
  auto logits = constant<float>(s, {-1000, -100, 100, 1000, -1000, 1000}, Shape{6});
  auto labels = constant<float>(s, {0, 0, 1, 1, 1, 0}, Shape{6});
  auto loss = sigmoid_cross_entropy_with_logits(s, labels, logits);
  auto out = eval({loss, Output{loss.node, 1}});
  // Right labels: (almost) no loss; wrong ones: |logit|. The naive formula gives inf or NaN.
  expect_tensor_near<float>(out[0], Shape{6}, {0, 0, 0, 0, 1000, 1000});
  expect_tensor_near<float>(out[1], Shape{6}, {0, 0, 0, 0, -1, 1});
}

TEST(SigmoidCrossEntropyWithLogits, ShapeErrorsNameTheNodeAndTheShapes) {
  expect_build_error(
      [](const Scope& s) {
        sigmoid_cross_entropy_with_logits(s.with_op_name("loss"), placeholder(s, DType::kFloat32, Shape{4, 1}),
                                          placeholder(s, DType::kFloat32, Shape{4, 2}));
      },
      "[SigmoidCrossEntropyWithLogits] loss: logits and labels must have the same shape: logits [4,2] vs labels "
      "[4,1]");
  Graph g;
  Scope s(g);
  auto labels = placeholder(s, DType::kFloat32);
  auto logits = placeholder(s, DType::kFloat32);
  auto loss = sigmoid_cross_entropy_with_logits(s.with_op_name("loss"), labels, logits);
  expect_invalid_argument(
      [&] {
        eval(loss, {{labels, Tensor::from_vector<float>({1, 0})}, {logits, Tensor::from_vector<float>({1, 2, 3})}});
      },
      "[SigmoidCrossEntropyWithLogits] loss: logits and labels must have the same shape: logits [3] vs labels [2]");
  EXPECT_EQ(flops_of(sigmoid_cross_entropy_with_logits(s, placeholder(s, DType::kFloat32, Shape{2, 3}),
                                                       placeholder(s, DType::kFloat32, Shape{2, 3}))),
            60);
}

}  // namespace
}  // namespace stepscope
