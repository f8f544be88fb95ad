// Gradients of MatMul (all four transpose combinations, unknown batch dims) and of a small MLP
// built from MatMul, Add with a [units] bias, Tanh, Maximum, Sigmoid, Square and Mean, each
// parameter's gradient checked against central differences.
#include <random>
#include <string>
#include <vector>

#include "stepscope/testing/gradient_checker.h"
#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/linalg_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/reduction_ops.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::count_ops;

using testing::eval;
using testing::expect_tensor_near;

TEST(LinalgGrad, MatMulAllTransposeCombinations) {
  // op(a) is [3,4], op(b) is [4,2].
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transpose_a=") + (ta ? "true" : "false") + " transpose_b=" + (tb ? "true" : "false"));
      Graph g;
      Scope s(g);
      const Shape as = ta ? Shape{4, 3} : Shape{3, 4}, bs = tb ? Shape{2, 4} : Shape{4, 2};
      auto a = placeholder(s.with_op_name("a"), DType::kFloat64, as);
      auto b = placeholder(s.with_op_name("b"), DType::kFloat64, bs);
      auto z = matmul(s, a, b, ta, tb);
      const Tensor av = random_tensor(as, 1), bv = random_tensor(bs, 2);
      expect_gradient_matches(a, av, z, {{b, bv}});
      expect_gradient_matches(b, bv, z, {{a, av}});
      // The rule uses GEMM's transpose flags, never a Transpose node; gradients keep the
      // operands' static shapes.
      auto grads = gradients(s, {z}, {a, b});
      EXPECT_EQ(count_ops(g, "Transpose"), 0);
      EXPECT_EQ(grads[0].shape(), as);
      EXPECT_EQ(grads[1].shape(), bs);
    }
}

TEST(LinalgGrad, MatMulGradientValues) {
  Graph g;
  Scope s(g);
  auto a = constant(s, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  auto b = constant(s, Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, Shape{3, 2}));
  auto dz = constant(s, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2}));
  auto grads = gradients(s, {matmul(s, a, b)}, {a, b}, {dz});
  auto out = eval({grads[0], grads[1]});
  // da = dz b^T, db = a^T dz.
  expect_tensor_near<float>(out[0], Shape{2, 3}, {1, 2, 3, 3, 4, 7});
  expect_tensor_near<float>(out[1], Shape{3, 2}, {13, 18, 17, 24, 21, 30});
}

TEST(LinalgGrad, MatMulWithUnknownBatch) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, 3});
  auto w = placeholder(s.with_op_name("w"), DType::kFloat64, Shape{3, 2});
  auto z = matmul(s, x, w);
  auto grads = gradients(s, {z}, {x, w});
  EXPECT_EQ(grads[0].shape(), (Shape{-1, 3}));
  EXPECT_EQ(grads[1].shape(), (Shape{3, 2}));
  for (int64_t batch : {1, 5}) {
    const Tensor xv = random_tensor(Shape{batch, 3}, 3), wv = random_tensor(Shape{3, 2}, 4);
    expect_gradient_matches(x, xv, z, {{w, wv}});
    expect_gradient_matches(w, wv, z, {{x, xv}});
  }
}

// A two-layer MLP with a [units] bias added by Add (broadcasting over the unknown batch), a
// tanh and a "leaky" maximum hidden layer, and a mean squared error of a sigmoid output.
struct Mlp {
  Output x, labels, w1, b1, w2, b2, loss;
};

Mlp build_mlp(const Scope& s) {
  Mlp m;
  m.x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, 4});
  m.labels = placeholder(s.with_op_name("labels"), DType::kFloat64, Shape{-1, 2});
  m.w1 = placeholder(s.with_op_name("w1"), DType::kFloat64, Shape{4, 5});
  m.b1 = placeholder(s.with_op_name("b1"), DType::kFloat64, Shape{5});
  m.w2 = placeholder(s.with_op_name("w2"), DType::kFloat64, Shape{5, 2});
  m.b2 = placeholder(s.with_op_name("b2"), DType::kFloat64, Shape{2});
  Scope h = s.with_name_scope("hidden");
  auto pre = add(h, matmul(h, m.x, m.w1), m.b1);
  auto hidden = maximum(h, tanh(h, pre), mul(h, pre, 0.1));
  Scope o = s.with_name_scope("out");
  auto prediction = sigmoid(o, add(o, matmul(o, hidden, m.w2), m.b2));
  m.loss = reduce_mean(s.with_op_name("loss"), square(s, sub(s, prediction, m.labels)));
  return m;
}

TEST(LinalgGrad, MlpGradientsMatchNumericGradients) {
  Graph g;
  Scope s(g);
  Mlp m = build_mlp(s);
  const Tensor xv = random_tensor(Shape{6, 4}, 10, -2, 2), lv = random_tensor(Shape{6, 2}, 11, 0, 1);
  const Tensor w1 = random_tensor(Shape{4, 5}, 12), b1 = random_tensor(Shape{5}, 13),
               w2 = random_tensor(Shape{5, 2}, 14), b2 = random_tensor(Shape{2}, 15);
  const std::vector<std::pair<Output, Tensor>> params = {{m.w1, w1}, {m.b1, b1}, {m.w2, w2}, {m.b2, b2}};
  for (const auto& [param, value] : params) {
    SCOPED_TRACE(param.name());
    FeedList feeds = {{m.x, xv}, {m.labels, lv}};
    for (const auto& [other, other_value] : params)
      if (!(other == param)) feeds.emplace_back(other, other_value);
    expect_gradient_matches(param, value, m.loss, feeds);
  }
  // Also with respect to the input (through both MatMuls).
  expect_gradient_matches(m.x, xv, m.loss, {{m.labels, lv}, {m.w1, w1}, {m.b1, b1}, {m.w2, w2}, {m.b2, b2}});
}

// One gradients() call for every parameter: the shapes are the parameters', the bias gradients
// are each one SumToShape over the batch, and the values agree with per-parameter checks.
TEST(LinalgGrad, MlpGradientsInOneCall) {
  Graph g;
  Scope s(g);
  Mlp m = build_mlp(s);
  auto grads = gradients(s, {m.loss}, {m.w1, m.b1, m.w2, m.b2});
  EXPECT_EQ(grads[0].shape(), (Shape{4, 5}));
  EXPECT_EQ(grads[1].shape(), (Shape{5}));
  EXPECT_EQ(grads[2].shape(), (Shape{5, 2}));
  EXPECT_EQ(grads[3].shape(), (Shape{2}));
  EXPECT_EQ(grads[1].node->op_type(), "SumToShape");
  EXPECT_EQ(grads[3].node->op_type(), "SumToShape");
  EXPECT_EQ(grads[3].node->name(), "gradients/out/Add_grad/SumToShape");
  EXPECT_EQ(count_ops(g, "MeanGrad"), 1);
  const Tensor xv = random_tensor(Shape{3, 4}, 20, -2, 2), lv = random_tensor(Shape{3, 2}, 21, 0, 1);
  const Tensor w1 = random_tensor(Shape{4, 5}, 22), b1 = random_tensor(Shape{5}, 23),
               w2 = random_tensor(Shape{5, 2}, 24), b2 = random_tensor(Shape{2}, 25);
  FeedList feeds = {{m.x, xv}, {m.labels, lv}, {m.w1, w1}, {m.b1, b1}, {m.w2, w2}, {m.b2, b2}};
  Session sess(g, {.inter_op_threads = 2});
  auto out = sess.run(feeds, grads);
  // A finite-difference spot check of one entry of each gradient.
  const std::vector<std::pair<Output, Tensor>> params = {{m.w1, w1}, {m.b1, b1}, {m.w2, w2}, {m.b2, b2}};
  for (size_t p = 0; p < params.size(); ++p) {
    const auto& [param, value] = params[p];
    Tensor plus = value.deep_copy(), minus = value.deep_copy();
    plus.data<double>()[1] += 1e-5;
    minus.data<double>()[1] -= 1e-5;
    FeedList fp = feeds, fm = feeds;
    for (auto& [o, t] : fp)
      if (o == param) t = plus;
    for (auto& [o, t] : fm)
      if (o == param) t = minus;
    const double numeric =
        (sess.run(m.loss, fp).scalar_value<double>() - sess.run(m.loss, fm).scalar_value<double>()) / 2e-5;
    EXPECT_NEAR(out[p].data<double>()[1], numeric, 1e-7) << param.name();
  }
}

}  // namespace
}  // namespace stepscope
