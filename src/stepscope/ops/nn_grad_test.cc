// Gradient rules of the nn family, checked numerically: gradient_checker compares the Jacobian
// that gradients() builds from each rule (one run per output element, seeded one-hot) with
// central differences of the forward op, in float64. Also: the graph the rules build (op types,
// "gradients/<node>_grad" scopes), what gets no gradient, and the unsupported second-order path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "stepscope/testing/gradient_checker.h"
#include "stepscope/autodiff/gradients.h"
#include "stepscope/graph/node.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/nn_ops.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::distinct_tensor;

TEST(NnGradients, Relu) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat64, Shape{3, 4});
  // |x| >= 0.1, so the +-1e-4 steps never cross the kink at 0.
  expect_gradient_matches(x, random_tensor(Shape{3, 4}, 1, -1, 1, 0.1), relu(s, x), {}, {.expect_nonzero = true});
}

TEST(NnGradients, BiasAddValueAndBias) {
  Graph g;
  Scope s(g);
  auto value = placeholder(s, DType::kFloat64, Shape{2, 3, 4});
  auto bias = placeholder(s, DType::kFloat64, Shape{4});
  auto y = bias_add(s, value, bias);
  const Tensor v = random_tensor(Shape{2, 3, 4}, 2), b = random_tensor(Shape{4}, 3);
  expect_gradient_matches(value, v, y, {{bias, b}}, {.expect_nonzero = true});
  expect_gradient_matches(bias, b, y, {{value, v}}, {.expect_nonzero = true});
}

TEST(NnGradients, SoftmaxAndLogSoftmax) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat64, Shape{3, 5});
  const Tensor xv = random_tensor(Shape{3, 5}, 4, -3, 3);
  expect_gradient_matches(x, xv, softmax(s, x), {}, {.expect_nonzero = true});
  expect_gradient_matches(x, xv, log_softmax(s, x), {}, {.expect_nonzero = true});
  auto x3 = placeholder(s, DType::kFloat64, Shape{2, 2, 3});
  const Tensor x3v = random_tensor(Shape{2, 2, 3}, 5, -2, 2);
  expect_gradient_matches(x3, x3v, softmax(s, x3), {}, {.expect_nonzero = true});
  expect_gradient_matches(x3, x3v, log_softmax(s, x3), {}, {.expect_nonzero = true});
}

TEST(NnGradients, SparseSoftmaxCrossEntropyLogits) {
  Graph g;
  Scope s(g);
  auto logits = placeholder(s, DType::kFloat64, Shape{4, 5});
  auto labels = constant<int64_t>(s, {0, 3, 4, 3}, Shape{4});
  // y is the loss vector itself: the checker seeds each loss element, so the row scaling by the
  // incoming gradient is exercised (not just a gradient of ones).
  expect_gradient_matches(logits, random_tensor(Shape{4, 5}, 6, -2, 2), sparse_softmax_cross_entropy_with_logits(s, labels, logits), {}, {.expect_nonzero = true});
}

TEST(NnGradients, SoftmaxCrossEntropyLogitsAndLabels) {
  Graph g;
  Scope s(g);
  auto logits = placeholder(s, DType::kFloat64, Shape{3, 4});
  auto labels = placeholder(s, DType::kFloat64, Shape{3, 4});
  auto loss = softmax_cross_entropy_with_logits(s, labels, logits);
  const Tensor lv = random_tensor(Shape{3, 4}, 7, -2, 2);
  // Rows of labels are distributions (the gradient formula does not need it, but that is the use).
  const Tensor raw = random_tensor(Shape{12}, 8, 0.1, 1);
  std::vector<double> p(raw.data<double>(), raw.data<double>() + 12);
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += p[r * 4 + j];
    for (int j = 0; j < 4; ++j) p[r * 4 + j] /= sum;
  }
  const Tensor pv = Tensor::from_vector<double>(p, Shape{3, 4});
  expect_gradient_matches(logits, lv, loss, {{labels, pv}}, {.expect_nonzero = true});
  expect_gradient_matches(labels, pv, loss, {{logits, lv}}, {.expect_nonzero = true});
}

struct ConvGradCase {
  Shape input, filter;
  int64_t stride;
  const char* padding;
};

TEST(NnGradients, Conv2DInputAndFilter) {
  const ConvGradCase cases[] = {
      {Shape{2, 5, 5, 2}, Shape{3, 3, 2, 3}, 1, "SAME"},  {Shape{2, 5, 5, 2}, Shape{3, 3, 2, 3}, 1, "VALID"},
      {Shape{2, 5, 5, 2}, Shape{3, 3, 2, 3}, 2, "SAME"},  {Shape{2, 5, 5, 2}, Shape{3, 3, 2, 3}, 2, "VALID"},
      {Shape{1, 6, 5, 2}, Shape{2, 3, 2, 2}, 2, "SAME"},   // even window, odd padding split
      {Shape{2, 3, 3, 3}, Shape{1, 1, 3, 2}, 1, "SAME"},   // 1x1: the direct GEMM path
      {Shape{2, 3, 4, 2}, Shape{3, 4, 2, 2}, 1, "VALID"},  // filter covers the image: direct too
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(::testing::Message() << "input " << k.input.to_string() << " filter " << k.filter.to_string()
                                      << " stride " << k.stride << " " << k.padding);
    Graph g;
    Scope s(g);
    auto x = placeholder(s, DType::kFloat64, k.input);
    auto f = placeholder(s, DType::kFloat64, k.filter);
    auto y = conv2d(s, x, f, {1, k.stride, k.stride, 1}, k.padding);
    const Tensor xv = random_tensor(k.input, 9), fv = random_tensor(k.filter, 10);
    expect_gradient_matches(x, xv, y, {{f, fv}}, {.delta = 1e-3, .expect_nonzero = true});
    expect_gradient_matches(f, fv, y, {{x, xv}}, {.delta = 1e-3, .expect_nonzero = true});
  }
}

TEST(NnGradients, MaxPool) {
  struct Case {
    int64_t k, stride;
    const char* padding;
  };
  for (const Case& c : {Case{2, 1, "SAME"}, Case{2, 1, "VALID"}, Case{2, 2, "SAME"}, Case{2, 2, "VALID"},
                        Case{3, 2, "SAME"}, Case{3, 1, "VALID"}}) {
    SCOPED_TRACE(::testing::Message() << "ksize " << c.k << " stride " << c.stride << " " << c.padding);
    Graph g;
    Scope s(g);
    auto x = placeholder(s, DType::kFloat64, Shape{2, 4, 5, 2});
    auto y = max_pool(s, x, {1, c.k, c.k, 1}, {1, c.stride, c.stride, 1}, c.padding);
    expect_gradient_matches(x, distinct_tensor(Shape{2, 4, 5, 2}, 11), y, {}, {.delta = 1e-3, .expect_nonzero = true});
  }
}

TEST(NnGradients, ChainedConvBiasReluPool) {
  // The rules composed through the driver: conv -> bias_add -> relu -> max_pool -> softmax.
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat64, Shape{1, 4, 4, 2});
  auto f = placeholder(s, DType::kFloat64, Shape{2, 2, 2, 3});
  auto b = placeholder(s, DType::kFloat64, Shape{3});
  auto pre = bias_add(s, conv2d(s, x, f, {1, 1, 1, 1}, "SAME"), b);
  auto y = softmax(s, max_pool(s, relu(s, pre), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"));
  const Tensor xv = random_tensor(Shape{1, 4, 4, 2}, 12), fv = random_tensor(Shape{2, 2, 2, 3}, 13);
  const Tensor bv = random_tensor(Shape{3}, 14, 0.2, 0.5);
  // Relu's kink and the pool's ties are the only non-smooth points: check that these inputs keep
  // the pre-activations away from 0 and the positive ones apart, so the finite-difference steps
  // (which move a pre-activation by well under 1e-3) cross neither.
  Session session(g, {.inter_op_threads = 1});
  const Tensor pv = session.run({{x, xv}, {f, fv}, {b, bv}}, {pre})[0];
  std::vector<double> ps(pv.flat<double>().begin(), pv.flat<double>().end());
  std::sort(ps.begin(), ps.end());
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_GT(std::abs(ps[i]), 1e-2);
    if (i > 0 && ps[i - 1] > 0) {
      ASSERT_GT(ps[i] - ps[i - 1], 2e-3);
    }
  }
  expect_gradient_matches(f, fv, y, {{x, xv}, {b, bv}}, {.expect_nonzero = true});
  expect_gradient_matches(b, bv, y, {{x, xv}, {f, fv}}, {.expect_nonzero = true});
  expect_gradient_matches(x, xv, y, {{f, fv}, {b, bv}}, {.expect_nonzero = true});
}

TEST(NnGradients, RulesBuildTheBackwardOpsUnderGradientScopes) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 8, 8, 3});
  auto f = placeholder(s.with_op_name("f"), DType::kFloat32, Shape{3, 3, 3, 4});
  auto b = placeholder(s.with_op_name("b"), DType::kFloat32, Shape{4});
  auto conv = conv2d(s, x, f, {1, 2, 2, 1}, "SAME");
  auto pooled = max_pool(s, relu(s, bias_add(s, conv, b)), {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME");
  auto grads = gradients(s, {pooled}, {x, f, b});
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(grads[0].node->op_type(), "Conv2DBackpropInput");
  EXPECT_EQ(grads[0].node->name(), "gradients/Conv2D_grad/Conv2DBackpropInput");
  EXPECT_EQ(grads[1].node->op_type(), "Conv2DBackpropFilter");
  EXPECT_EQ(grads[1].node->name(), "gradients/Conv2D_grad/Conv2DBackpropFilter");
  EXPECT_EQ(grads[2].node->op_type(), "BiasAddGrad");
  EXPECT_EQ(grads[2].node->name(), "gradients/BiasAdd_grad/BiasAddGrad");
  // Shape(x) as input_sizes: the static shape still comes through, unknown batch included.
  EXPECT_EQ(grads[0].shape(), (Shape{-1, 8, 8, 3}));
  EXPECT_EQ(grads[1].shape(), (Shape{3, 3, 3, 4}));
  EXPECT_EQ(grads[2].shape(), (Shape{4}));
  // The relu rule reads the forward output, the pool rule the forward input and output.
  const Node* relu_grad_node = grads[2].node->input(0).node;
  EXPECT_EQ(relu_grad_node->op_type(), "ReluGrad");
  EXPECT_EQ(relu_grad_node->input(1).node->op_type(), "Relu");
  EXPECT_EQ(relu_grad_node->input(0).node->op_type(), "MaxPoolGrad");
}

TEST(NnGradients, CrossEntropyRulesAndWhatGetsNoGradient) {
  Graph g;
  Scope s(g);
  auto logits = placeholder(s.with_op_name("logits"), DType::kFloat32, Shape{-1, 10});
  auto labels = placeholder(s.with_op_name("labels"), DType::kInt32, Shape{-1});
  auto loss = sparse_softmax_cross_entropy_with_logits(s.with_op_name("xent"), labels, logits);
  auto grads = gradients(s, {loss}, {logits, labels});
  EXPECT_EQ(grads[0].node->op_type(), "ScaleRows");
  EXPECT_EQ(grads[0].node->name(), "gradients/xent_grad/ScaleRows");
  EXPECT_EQ(grads[0].shape(), (Shape{-1, 10}));
  EXPECT_FALSE(grads[1]) << "integer labels get no gradient";

  // A gradient into the backprop output (output 1) is the unsupported second-order path.
  try {
    gradients(s, {loss.node->output(1)}, {logits});
    ADD_FAILURE() << "expected UnimplementedError";
  } catch (const UnimplementedError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[SparseSoftmaxCrossEntropyWithLogits] xent: the gradient of output 1 (backprop) is not implemented; "
              "differentiate output 0 (the loss)");
  }
  auto dense_labels = placeholder(s.with_op_name("p"), DType::kFloat32, Shape{-1, 10});
  auto dense = softmax_cross_entropy_with_logits(s.with_op_name("dense"), dense_labels, logits);
  EXPECT_THROW(gradients(s, {dense, dense.node->output(1)}, {logits}), UnimplementedError);

  // Softmax and LogSoftmax rules read their forward outputs.
  auto sm = softmax(s, logits);
  auto sm_grad = gradients(s, {sm}, {logits})[0];
  EXPECT_EQ(sm_grad.node->op_type(), "SoftmaxGrad");
  EXPECT_EQ(sm_grad.node->input(1), sm);
  auto lsm = log_softmax(s, logits);
  auto lsm_grad = gradients(s, {lsm}, {logits})[0];
  EXPECT_EQ(lsm_grad.node->op_type(), "LogSoftmaxGrad");
  EXPECT_EQ(lsm_grad.node->input(1), lsm);
}

TEST(NnGradients, AvgPool) {
  struct Case {
    Shape input;
    int64_t kh, kw, stride;
    const char* padding;
  };
  const Case cases[] = {{Shape{2, 4, 4, 2}, 2, 2, 2, "VALID"},
                        {Shape{2, 4, 4, 2}, 2, 2, 1, "SAME"},
                        {Shape{1, 5, 5, 1}, 3, 3, 2, "SAME"},
                        {Shape{1, 5, 4, 3}, 3, 2, 1, "VALID"}};
  for (const auto& k : cases) {
    SCOPED_TRACE(::testing::Message() << k.input.to_string() << " " << k.kh << "x" << k.kw << " stride " << k.stride
                                      << " " << k.padding);
    Graph g;
    Scope s(g);
    auto x = placeholder(s, DType::kFloat64, k.input);
    auto y = avg_pool(s, x, {1, k.kh, k.kw, 1}, {1, k.stride, k.stride, 1}, k.padding);
    expect_gradient_matches(x, random_tensor(k.input, 21), y, {}, {.expect_nonzero = true});
  }
}

TEST(NnGradients, SigmoidCrossEntropyLogitsAndLabels) {
  Graph g;
  Scope s(g);
  auto logits = placeholder(s, DType::kFloat64, Shape{3, 4});
  auto labels = placeholder(s, DType::kFloat64, Shape{3, 4});
  auto loss = sigmoid_cross_entropy_with_logits(s, labels, logits);
  // |logits| >= 0.1: the formula's max(x, 0) and |x| have kinks at 0 (the loss itself is smooth).
  const Tensor lv = random_tensor(Shape{3, 4}, 22, -4, 4, 0.1), zv = random_tensor(Shape{3, 4}, 23, 0, 1);
  expect_gradient_matches(logits, lv, loss, {{labels, zv}}, {.expect_nonzero = true});
  expect_gradient_matches(labels, zv, loss, {{logits, lv}}, {.expect_nonzero = true});
}

}  // namespace
}  // namespace stepscope
