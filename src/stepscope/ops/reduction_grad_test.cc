// Gradients of Sum, Mean and Max: checks against central differences over leading, trailing,
// middle, non-adjacent, negative and all axes, with and without keep_dims, with unknown dims
// (one, several, unknown rank) fed at run time; Max's split among ties; the graphs the rules
// build (a single MeanGrad, no Reshape where broadcasting suffices).
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "stepscope/testing/gradient_checker.h"
#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::count_ops;

using testing::eval;
using testing::expect_tensor_near;

// Distinct values (a shuffled ramp plus noise) so that Max has no near-ties within the step.
Tensor shuffled_tensor(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor t(DType::kFloat64, shape);
  auto v = t.flat<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) * 0.25;
  std::shuffle(v.begin(), v.end(), rng);
  std::uniform_real_distribution<double> noise(0, 0.1);
  for (double& x : v) x = x - 1 + noise(rng);
  return t;
}

using Reduction = Output (*)(const Scope&, Output, std::vector<int64_t>, bool, CallSite);

struct ReductionCase {
  const char* name;
  Reduction build;
};
const ReductionCase kReductions[] = {{"Sum", &reduce_sum}, {"Mean", &reduce_mean}, {"Max", &reduce_max}};

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};
const AxesCase kAxes[] = {
    {Shape{2, 3}, {}},
    {Shape{2, 3}, {0}},
    {Shape{2, 3}, {1}},
    {Shape{2, 3}, {-1}},
    {Shape{2, 3}, {0, 1}},
    {Shape{2, 3, 4}, {1}},
    {Shape{2, 3, 4}, {0, 2}},
    {Shape{2, 3, 4}, {0, 1}},
    {Shape{5}, {0}},
    {Shape{2, 1, 3}, {1}},
    {Shape{}, {}},
};

std::string describe(const AxesCase& c, bool keep_dims) {
  std::string s = c.shape.to_string() + " axes {";
  for (int64_t a : c.axes) s += std::to_string(a) + ",";
  return s + "} keep_dims=" + (keep_dims ? "true" : "false");
}

TEST(ReductionGrad, MatchNumericGradients) {
  for (const ReductionCase& op : kReductions)
    for (const AxesCase& c : kAxes)
      for (bool keep_dims : {false, true}) {
        SCOPED_TRACE(std::string(op.name) + " " + describe(c, keep_dims));
        Graph g;
        Scope s(g);
        auto x = placeholder(s.with_op_name("x"), DType::kFloat64, c.shape);
        auto y = op.build(s, x, c.axes, keep_dims, CallSite::current());
        expect_gradient_matches(x, shuffled_tensor(c.shape, 1), y);
      }
}

// Every dim unknown when the graph is built (so kept dims are unknown: the rules reshape to
// the run-time shape), and unknown rank (reduce_all).
TEST(ReductionGrad, UnknownDimsAndRank) {
  for (const ReductionCase& op : kReductions)
    for (const AxesCase& c : kAxes)
      for (bool keep_dims : {false, true}) {
        SCOPED_TRACE(std::string(op.name) + " " + describe(c, keep_dims));
        Shape unknown;
        for (int i = 0; i < c.shape.rank(); ++i) unknown.add_dim(-1);
        Graph g;
        Scope s(g);
        auto x = placeholder(s.with_op_name("x"), DType::kFloat64, unknown);
        auto y = op.build(s, x, c.axes, keep_dims, CallSite::current());
        expect_gradient_matches(x, shuffled_tensor(c.shape, 2), y);
        if (!c.axes.empty()) continue;
        auto z = placeholder(s.with_op_name("z"), DType::kFloat64);  // unknown rank: reduce_all
        expect_gradient_matches(z, shuffled_tensor(c.shape, 3), op.build(s, z, {}, keep_dims, CallSite::current()));
      }
}

TEST(ReductionGrad, UnknownBatchDim) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, 3});
  auto w = placeholder(s.with_op_name("w"), DType::kFloat64, Shape{3});
  // A loss: the mean over the batch of a per-row sum, plus the max of each column.
  auto y = add(s, reduce_mean(s, reduce_sum(s, mul(s, x, w), {1})), reduce_sum(s, reduce_max(s, x, {0})));
  for (int64_t batch : {1, 4}) {
    const Tensor xv = shuffled_tensor(Shape{batch, 3}, 4), wv = shuffled_tensor(Shape{3}, 5);
    expect_gradient_matches(x, xv, y, {{w, wv}});
    expect_gradient_matches(w, wv, y, {{x, xv}});
  }
}

// Max sends the gradient to the maximal elements, split equally among ties.
TEST(ReductionGrad, MaxSplitsTheGradientAmongTies) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>({3, 1, 3, 2, 5, 5, 5, 0, -1, -1, -2, -3}, Shape{3, 4}));
  auto rows = reduce_max(s, x, {1});
  auto all = reduce_max(s, x);
  auto d_rows = constant(s, Tensor::from_vector<float>({6, 9, 4}, Shape{3}));
  auto g_rows = gradients(s, {rows}, {x}, {d_rows})[0];
  auto g_all = gradients(s, {all}, {x})[0];
  auto out = eval({g_rows, g_all});
  expect_tensor_near<float>(out[0], Shape{3, 4}, {3, 0, 3, 0, 3, 3, 3, 0, 2, 2, 0, 0});
  expect_tensor_near<float>(out[1], Shape{3, 4}, {0, 0, 0, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3, 0, 0, 0, 0, 0});
}

TEST(ReductionGrad, SumAndMeanGradientValues) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto dz = constant(s, Tensor::from_vector<float>({2, 4}, Shape{2}));
  auto g_sum = gradients(s, {reduce_sum(s, x, {1})}, {x}, {dz})[0];
  auto g_mean = gradients(s, {reduce_mean(s, x, {1})}, {x}, {dz})[0];
  auto g_mean_all = gradients(s, {reduce_mean(s, x)}, {x})[0];
  EXPECT_EQ(g_sum.shape(), (Shape{2, 3}));  // the [2] gradient fixes the batch
  EXPECT_EQ(g_mean_all.shape(), (Shape{-1, 3}));
  Session sess(g);
  auto out = sess.run({{x, Tensor(DType::kFloat32, Shape{2, 3})}}, {g_sum, g_mean, g_mean_all});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {2, 2, 2, 4, 4, 4});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {2.0f / 3, 2.0f / 3, 2.0f / 3, 4.0f / 3, 4.0f / 3, 4.0f / 3});
  expect_tensor_near<float>(out[2], Shape{2, 3}, {1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6});
  // The batch size comes from the run-time shape.
  auto big = sess.run(g_mean_all, {{x, Tensor(DType::kFloat32, Shape{5, 3})}});
  EXPECT_FLOAT_EQ(big.flat<float>()[14], 1.0f / 15);
}

TEST(ReductionGrad, GraphsStaySmall) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 10});
  // The mean of a [?] loss vector: one MeanGrad (the count from the run-time shape), no Reshape.
  auto loss = reduce_mean(s, reduce_sum(s, x, {1}));
  auto dx = gradients(s, {loss}, {x})[0];
  EXPECT_EQ(count_ops(g, "MeanGrad"), 1);
  EXPECT_EQ(count_ops(g, "BroadcastTo"), 1);
  EXPECT_EQ(count_ops(g, "Reshape"), 1);  // the row sums' gradient [?] -> [?,1]: one unknown dim, static
  EXPECT_EQ(count_ops(g, "Shape"), 2);    // x's and the row sums' run-time shapes
  EXPECT_EQ(dx.node->op_type(), "BroadcastTo");
  // Reducing leading axes needs no Reshape at all; a reduction that changes nothing adds nothing.
  auto c = placeholder(s.with_op_name("c"), DType::kFloat32, Shape{4, 10});
  const int reshapes = count_ops(g, "Reshape");
  gradients(s, {reduce_sum(s, c, {0})}, {c});
  EXPECT_EQ(count_ops(g, "Reshape"), reshapes);
  auto same = reduce_sum(s, c, {1}, /*keep_dims=*/true);
  EXPECT_EQ(gradients(s, {same}, {c})[0].node->op_type(), "BroadcastTo");
  auto all = reduce_mean(s, c, std::vector<int64_t>{});  // {} means all axes for the builder
  EXPECT_EQ(gradients(s, {all}, {c})[0].node->op_type(), "MeanGrad");
  auto column = placeholder(s.with_op_name("column"), DType::kFloat32, Shape{4, 1});
  auto unchanged = reduce_mean(s, column, {1}, /*keep_dims=*/true);
  auto d_unchanged = placeholder(s.with_op_name("d_unchanged"), DType::kFloat32, Shape{4, 1});
  EXPECT_EQ(gradients(s, {unchanged}, {column}, {d_unchanged})[0], d_unchanged);
}

// Two unknown kept dims: the gradient is reshaped to x's run-time shape with 1 at the reduced
// axis (computed from shape(x)).
TEST(ReductionGrad, SeveralUnknownKeptDims) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, -1, 3});
  auto y = reduce_sum(s, square(s, x), {1});
  auto dx = gradients(s, {y}, {x})[0];
  EXPECT_EQ(dx.shape(), (Shape{-1, -1, 3}));
  expect_gradient_matches(x, shuffled_tensor(Shape{2, 4, 3}, 6), y);
  auto m = reduce_max(s, x, {2});
  expect_gradient_matches(x, shuffled_tensor(Shape{3, 2, 3}, 7), m);
}

TEST(ReductionGrad, UnsupportedCasesSayWhy) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32);  // unknown rank, explicit axes
  auto y = reduce_sum(s.with_op_name("rows"), x, {1});
  EXPECT_EQ(testing::error_text([&] { gradients(s, {y}, {x}); }), "[Sum] rows: the gradient needs an input of known rank");
  auto m = placeholder(s.with_op_name("m"), DType::kFloat32, Shape{2, 3});
  auto axes = placeholder(s.with_op_name("axes"), DType::kInt32, Shape{1});
  Node* sum = s.with_op_name("dyn").add_node(op_def("Sum"), {m, axes}, {}, CallSite::current());
  EXPECT_EQ(testing::error_text([&] { gradients(s, {sum->output(0)}, {m}); }),
            "[Sum] dyn: the gradient needs constant reduction_indices");
}

TEST(ReductionGrad, IntegerSum) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  auto dz = constant(s, Tensor::from_vector<int32_t>({7, 8}, Shape{2}));
  expect_tensor_near<int32_t>(eval(gradients(s, {reduce_sum(s, x, {1})}, {x}, {dz})[0]), Shape{2, 3},
                              {7, 7, 7, 8, 8, 8});
}

}  // namespace
}  // namespace stepscope
