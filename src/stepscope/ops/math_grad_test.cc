// Gradients of the elementwise math family: every rule against central differences (float64,
// small shapes, the broadcasting cases [2,3] with [3], [2,1] with [1,3] and scalars, unknown
// batch dims fed at run time), the graphs the rules build (no SumToShape where no broadcasting
// can happen), and the values and errors of the backward ops' kernels (SumToShape,
// BroadcastTo, MeanGrad, TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad, MaximumGrad, MinimumGrad).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "stepscope/testing/gradient_checker.h"
#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::count_ops;

using testing::eval;
using testing::expect_tensor_near;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using BinaryBuilder = Output (*)(const Scope&, Output, Output, CallSite);

struct BinaryCase {
  const char* name;
  BinaryBuilder build;
  double x_lo, x_hi, y_lo, y_hi;
};

// Operand ranges keep Div away from 0 and Maximum/Minimum away from ties (the numeric
// derivative is only one-sided there).
const BinaryCase kBinaryCases[] = {
    {"Add", &add, -2, 2, -2, 2},  {"Sub", &sub, -2, 2, -2, 2},         {"Mul", &mul, -2, 2, -2, 2},
    {"Div", &div, -2, 2, 0.5, 2}, {"Maximum", &maximum, -2, 2, -2, 2}, {"Minimum", &minimum, -2, 2, -2, 2},
};

struct ShapePair {
  Shape x, y;
};

// Shapes from the brief: equal, a row vector, an outer product, scalars on either side, and a
// rank-3 case that broadcasts in the middle.
const ShapePair kShapePairs[] = {
    {Shape{2, 3}, Shape{2, 3}}, {Shape{2, 3}, Shape{3}}, {Shape{3}, Shape{2, 3}},    {Shape{2, 1}, Shape{1, 3}},
    {Shape{2, 3}, Shape{}},     {Shape{}, Shape{2, 3}},  {Shape{2, 3}, Shape{2, 1}}, {Shape{2, 1, 3}, Shape{4, 1}},
    {Shape{1}, Shape{}},        {Shape{}, Shape{}},
};

TEST(MathGrad, BinaryOpsMatchNumericGradientsWithBroadcasting) {
  for (const BinaryCase& op : kBinaryCases) {
    for (const ShapePair& p : kShapePairs) {
      SCOPED_TRACE(std::string(op.name) + " " + p.x.to_string() + " " + p.y.to_string());
      Graph g;
      Scope s(g);
      auto x = placeholder(s.with_op_name("x"), DType::kFloat64, p.x);
      auto y = placeholder(s.with_op_name("y"), DType::kFloat64, p.y);
      auto z = op.build(s, x, y, CallSite::current());
      const Tensor xv = random_tensor(p.x, 1, op.x_lo, op.x_hi), yv = random_tensor(p.y, 2, op.y_lo, op.y_hi);
      expect_gradient_matches(x, xv, z, {{y, yv}});
      expect_gradient_matches(y, yv, z, {{x, xv}});
    }
  }
}

// The same shapes with every dim of both placeholders unknown when the graph is built: the
// rules must take the shapes at run time.
TEST(MathGrad, BinaryOpsWithUnknownDimsSumToRunTimeShapes) {
  for (const BinaryCase& op : kBinaryCases) {
    for (const ShapePair& p : kShapePairs) {
      SCOPED_TRACE(std::string(op.name) + " " + p.x.to_string() + " " + p.y.to_string());
      auto unknown = [](const Shape& shape) {
        Shape u;
        for (int i = 0; i < shape.rank(); ++i) u.add_dim(-1);
        return u;
      };
      Graph g;
      Scope s(g);
      auto x = placeholder(s.with_op_name("x"), DType::kFloat64, unknown(p.x));
      auto y = placeholder(s.with_op_name("y"), DType::kFloat64, unknown(p.y));
      auto z = op.build(s, x, y, CallSite::current());
      const Tensor xv = random_tensor(p.x, 3, op.x_lo, op.x_hi), yv = random_tensor(p.y, 4, op.y_lo, op.y_hi);
      expect_gradient_matches(x, xv, z, {{y, yv}});
      expect_gradient_matches(y, yv, z, {{x, xv}});
    }
  }
}

TEST(MathGrad, UnknownBatchDimWithBiasVector) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, 3});
  auto b = placeholder(s.with_op_name("b"), DType::kFloat64, Shape{3});
  auto c = placeholder(s.with_op_name("c"), DType::kFloat64, Shape{-1, 1});
  auto z = mul(s, add(s, x, b), c);
  for (int64_t batch : {1, 4}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Tensor xv = random_tensor(Shape{batch, 3}, 5, -2, 2), bv = random_tensor(Shape{3}, 6, -2, 2),
                 cv = random_tensor(Shape{batch, 1}, 8, -2, 2);
    expect_gradient_matches(x, xv, z, {{b, bv}, {c, cv}});
    expect_gradient_matches(b, bv, z, {{x, xv}, {c, cv}});
    expect_gradient_matches(c, cv, z, {{x, xv}, {b, bv}});
  }
}

// [?,3] + [3]: x's gradient is the incoming gradient itself, b's is summed to a Const shape
// (no run-time Shape op); equal static shapes add nothing at all.
TEST(MathGrad, RulesAddNoReductionWhereStaticShapesRuleOutBroadcasting) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto b = placeholder(s.with_op_name("b"), DType::kFloat32, Shape{3});
  auto z = add(s.with_op_name("z"), x, b);
  auto dz = placeholder(s.with_op_name("dz"), DType::kFloat32, Shape{-1, 3});
  auto grads = gradients(s, {z}, {x, b}, {dz});
  EXPECT_EQ(grads[0], dz);
  EXPECT_EQ(grads[1].node->op_type(), "SumToShape");
  EXPECT_EQ(grads[1].node->name(), "gradients/z_grad/SumToShape");
  EXPECT_EQ(grads[1].shape(), (Shape{3}));
  EXPECT_EQ(grads[1].node->input(1).node->op_type(), "Const");
  EXPECT_EQ(count_ops(g, "Shape"), 0);

  auto u = placeholder(s.with_op_name("u"), DType::kFloat32, Shape{2, 3});
  auto v = placeholder(s.with_op_name("v"), DType::kFloat32, Shape{2, 3});
  auto w = mul(s, u, v);
  const int before = count_ops(g, "SumToShape");
  auto g2 = gradients(s, {w}, {u, v});
  EXPECT_EQ(count_ops(g, "SumToShape"), before);
  EXPECT_EQ(g2[0].node->op_type(), "Mul");
  EXPECT_EQ(g2[0].shape(), (Shape{2, 3}));

  // Unknown on both sides: summed to shape(x) at run time, with x's static shape inferred.
  auto p = placeholder(s.with_op_name("p"), DType::kFloat32, Shape{-1, 3});
  auto q = placeholder(s.with_op_name("q"), DType::kFloat32, Shape{-1, 3});
  auto g3 = gradients(s, {sub(s, p, q)}, {p, q});
  EXPECT_EQ(g3[0].node->op_type(), "SumToShape");
  EXPECT_EQ(g3[0].node->input(1).node->op_type(), "Shape");
  EXPECT_EQ(g3[0].shape(), (Shape{-1, 3}));
  EXPECT_EQ(g3[1].node->op_type(), "Neg");
  EXPECT_EQ(g3[1].shape(), (Shape{-1, 3}));
  // Same shapes at run time: SumToShape forwards the gradient's buffer.
  Session sess(g);
  const Tensor pv = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto out = sess.run({{p, pv}, {q, pv}}, {g3[0], g3[1]});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {1, 1, 1, 1, 1, 1});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {-1, -1, -1, -1, -1, -1});
}

TEST(MathGrad, SameInputTwiceAddsBothContributions) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{2, 2});
  const Tensor xv = random_tensor(Shape{2, 2}, 9, 0.5, 2);
  expect_gradient_matches(x, xv, mul(s, x, x));
  expect_gradient_matches(x, xv, div(s, x, x));
  expect_gradient_matches(x, xv, sub(s, x, x));
}

// Ties route the whole gradient to x, as TensorFlow's x >= y (x <= y for Minimum) mask.
TEST(MathGrad, MaximumAndMinimumRouteTiesToX) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<double>({1, 2, 3, kNaN, 5}, Shape{5}));
  auto y = constant(s, Tensor::from_vector<double>({1, 5, 0, 1, kNaN}, Shape{5}));
  auto dz = constant(s, Tensor::from_vector<double>({10, 20, 30, 40, 50}, Shape{5}));
  auto gmax = gradients(s, {maximum(s, x, y)}, {x, y}, {dz});
  auto gmin = gradients(s, {minimum(s, x, y)}, {x, y}, {dz});
  auto out = eval({gmax[0], gmax[1], gmin[0], gmin[1]});
  // NaN compares false: the gradient goes to y.
  expect_tensor_near<double>(out[0], Shape{5}, {10, 0, 30, 0, 0});
  expect_tensor_near<double>(out[1], Shape{5}, {0, 20, 0, 40, 50});
  expect_tensor_near<double>(out[2], Shape{5}, {10, 20, 0, 0, 0});
  expect_tensor_near<double>(out[3], Shape{5}, {0, 0, 30, 40, 50});
}

// maximum(x, 0) with a scalar: the scalar's gradient sums the unselected elements.
TEST(MathGrad, MaximumWithScalarConstant) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>({-1, 0, 2, 3}, Shape{2, 2}));
  auto z = maximum(s, x, 0.0);
  auto dz = constant(s, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2}));
  auto grads = gradients(s, {z}, {x, z.node->input(1)}, {dz});
  auto out = eval({grads[0], grads[1]});
  expect_tensor_near<float>(out[0], Shape{2, 2}, {0, 2, 3, 4});
  expect_tensor_near<float>(out[1], Shape{}, {1});
}

using UnaryBuilder = Output (*)(const Scope&, Output, CallSite);

TEST(MathGrad, UnaryOpsMatchNumericGradients) {
  struct Case {
    const char* name;
    UnaryBuilder build;
    double lo, hi;
  };
  const Case cases[] = {
      {"Neg", &neg, -2, 2}, {"Square", &square, -2, 2}, {"Sqrt", &sqrt, 0.5, 3}, {"Rsqrt", &rsqrt, 0.5, 3},
      {"Exp", &exp, -2, 2}, {"Log", &log, 0.5, 3},      {"Tanh", &tanh, -3, 3},  {"Sigmoid", &sigmoid, -4, 4},
  };
  for (const Case& c : cases) {
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3}}) {
      SCOPED_TRACE(std::string(c.name) + " " + shape.to_string());
      Graph g;
      Scope s(g);
      auto x = placeholder(s.with_op_name("x"), DType::kFloat64, shape);
      auto y = c.build(s, x, CallSite::current());
      expect_gradient_matches(x, random_tensor(shape, 11, c.lo, c.hi), y);
    }
  }
}

TEST(MathGrad, UnaryRulesUseTheFusedBackwardOps) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1});
  auto ops = std::vector<std::pair<Output, std::string>>{
      {tanh(s, x), "TanhGrad"}, {sigmoid(s, x), "SigmoidGrad"}, {sqrt(s, x), "SqrtGrad"}, {rsqrt(s, x), "RsqrtGrad"}};
  for (const auto& [y, op] : ops) {
    auto dx = gradients(s, {y}, {x})[0];
    EXPECT_EQ(dx.node->op_type(), op);
    EXPECT_EQ(dx.node->input(0), y);  // from the forward output, not x
  }
}

TEST(MathGrad, ChainOfOpsWithUnknownBatch) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{-1, 3});
  auto w = placeholder(s.with_op_name("w"), DType::kFloat64, Shape{3});
  // log(1 + exp(x * w)) - sqrt(x^2 + 1) / sigmoid(tanh(x) - w)
  auto t = log(s, add(s, exp(s, mul(s, x, w)), 1.0));
  auto y = sub(s, t, div(s, sqrt(s, add(s, square(s, x), 1.0)), sigmoid(s, sub(s, tanh(s, x), w))));
  const Tensor xv = random_tensor(Shape{4, 3}, 12, -1, 1), wv = random_tensor(Shape{3}, 13, -1, 1);
  expect_gradient_matches(x, xv, y, {{w, wv}});
  expect_gradient_matches(w, wv, y, {{x, xv}});
}

TEST(MathGrad, CheckNumericsPassesTheGradientAndChecksIt) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{3});
  auto y = sqrt(s, check_numerics(s.with_op_name("cn"), x, "in x"));
  auto dx = gradients(s, {y}, {x})[0];
  expect_gradient_matches(x, random_tensor(Shape{3}, 14, 0.5, 2), y);
  Session sess(g);
  // sqrt'(0) = inf: the forward values are fine, the gradient is not.
  EXPECT_EQ(testing::error_text([&] {
              sess.run(dx, {{x, Tensor::from_vector<double>({1, 0, 4})}});
            }),
            "[CheckNumerics] gradients/cn_grad/CheckNumerics: Not a number (NaN) or infinity (Inf) values detected "
            "in gradient. in x : Tensor had Inf values");
}

TEST(MathGrad, EqualAndIsFiniteHaveNoGradient) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{3});
  auto e = equal(s.with_op_name("eq"), x, x);
  EXPECT_EQ(testing::error_text([&] { gradients(s, {e}, {x}); }), "No gradient defined for operation 'eq' (op type: Equal)");
  auto f = is_finite(s.with_op_name("fin"), x);
  EXPECT_EQ(testing::error_text([&] { gradients(s, {f}, {x}); }), "No gradient defined for operation 'fin' (op type: IsFinite)");
  // Off the path they are no obstacle.
  auto y = add(s, x, x);
  EXPECT_TRUE(gradients(s, {y}, {x})[0]);
}

// Integer ops get integer gradients (the rules never assume a float dtype).
TEST(MathGrad, IntegerGradients) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  auto b = constant(s, Tensor::from_vector<int32_t>({1, -1, 2}, Shape{3}));
  auto grads = gradients(s, {sub(s, square(s, x), mul(s, x, b))}, {x, b});
  auto out = eval({grads[0], grads[1]});
  expect_tensor_near<int32_t>(out[0], Shape{2, 3}, {1, 5, 4, 7, 11, 10});  // 2x - b
  expect_tensor_near<int32_t>(out[1], Shape{3}, {-5, -7, -9});             // -(sum of x's columns)
}

// ---------------------------------------------------------------------------------------------
// Backward ops: values

Output int64_shape(const Scope& s, std::vector<int64_t> dims) {
  return constant(s, Tensor::from_vector<int64_t>(dims, Shape{static_cast<int64_t>(dims.size())}));
}

TEST(MathGrad, SumToShapeValues) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  auto rows = sum_to_shape(s, x, int64_shape(s, {3}));
  auto rows_kept = sum_to_shape(s, x, int64_shape(s, {1, 3}));
  auto cols = sum_to_shape(s, x, int64_shape(s, {2, 1}));
  auto all = sum_to_shape(s, x, int64_shape(s, {}));
  auto all_kept = sum_to_shape(s, x, int64_shape(s, {1, 1}));
  auto same = sum_to_shape(s, x, int64_shape(s, {2, 3}));
  auto x3 = constant(s, Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Shape{2, 3, 2}));
  auto mid = sum_to_shape(s, x3, constant(s, Tensor::from_vector<int32_t>({2, 1, 2}, Shape{3})));
  auto outer = sum_to_shape(s, x3, constant(s, Tensor::from_vector<int32_t>({1, 3, 1}, Shape{3})));
  EXPECT_EQ(rows.shape(), (Shape{3}));
  EXPECT_EQ(mid.shape(), (Shape{2, 1, 2}));
  auto out = eval({rows, rows_kept, cols, all, all_kept, same, mid, outer});
  expect_tensor_near<float>(out[0], Shape{3}, {5, 7, 9});
  expect_tensor_near<float>(out[1], Shape{1, 3}, {5, 7, 9});
  expect_tensor_near<float>(out[2], Shape{2, 1}, {6, 15});
  expect_tensor_near<float>(out[3], Shape{}, {21});
  expect_tensor_near<float>(out[4], Shape{1, 1}, {21});
  expect_tensor_near<float>(out[5], Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  expect_tensor_near<int32_t>(out[6], Shape{2, 1, 2}, {9, 12, 27, 30});
  expect_tensor_near<int32_t>(out[7], Shape{1, 3, 1}, {1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12});
}

TEST(MathGrad, SumToShapeForwardsWhenNothingIsSummed) {
  Graph g;
  Scope s(g);
  const Tensor v = Tensor::from_vector<double>({1, 2, 3}, Shape{1, 3});
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64);
  auto same = sum_to_shape(s, x, int64_shape(s, {1, 3}));
  auto dropped = sum_to_shape(s, x, int64_shape(s, {3}));  // only a leading 1 goes
  Session sess(g);
  auto out = sess.run({{x, v}}, {same, dropped});
  EXPECT_TRUE(out[0].shares_buffer_with(v));
  EXPECT_TRUE(out[1].shares_buffer_with(v));
  EXPECT_EQ(out[1].shape(), (Shape{3}));
}

TEST(MathGrad, SumToShapeOfEmptyTensorsGivesZeros) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor(DType::kFloat32, Shape{0, 3}));
  auto out = eval({sum_to_shape(s, x, int64_shape(s, {3})), sum_to_shape(s, x, int64_shape(s, {0, 1}))});
  expect_tensor_near<float>(out[0], Shape{3}, {0, 0, 0});
  EXPECT_EQ(out[1].shape(), (Shape{0, 1}));
}

TEST(MathGrad, SumToShapeErrors) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  EXPECT_EQ(testing::error_text([&] { sum_to_shape(s.with_op_name("st"), x, int64_shape(s, {4})); }),
            "[SumToShape] st: Unable to sum tensor of shape [2,3] to shape [4]");
  EXPECT_EQ(testing::error_text([&] {
              sum_to_shape(s.with_op_name("st1"), x, int64_shape(s, {1, 2, 3}));
            }),
            "[SumToShape] st1: Unable to sum tensor of shape [2,3] to shape [1,2,3]");
  EXPECT_EQ(testing::error_text([&] {
              sum_to_shape(s.with_op_name("st2"), x, int64_shape(s, {-1, 3}));
            }),
            "[SumToShape] st2: shape has a negative dim: -1");
  EXPECT_EQ(testing::error_text([&] { sum_to_shape(s.with_op_name("st3"), x, constant(s, 1.5f)); }),
            "[SumToShape] st3: shape must be int32 or int64, got float32");
  // Caught at run time when the shape is only known then.
  auto dims = placeholder(s.with_op_name("dims"), DType::kInt64, Shape{-1});
  auto r = sum_to_shape(s.with_op_name("rt"), x, dims);
  EXPECT_EQ(r.shape(), Shape::unknown_rank());
  Session sess(g);
  EXPECT_EQ(testing::error_text([&] {
              sess.run(r, {{dims, Tensor::from_vector<int64_t>({2, 2})}});
            }),
            "[SumToShape] rt: Unable to sum tensor of shape [2,3] to shape [2,2]");
  expect_tensor_near<float>(sess.run(r, {{dims, Tensor::from_vector<int64_t>({2, 1})}}), Shape{2, 1}, {6, 15});
}

// Big enough to split over threads: the result must not depend on the thread count, and float
// sums are pairwise (accurate far beyond a running float32 sum).
TEST(MathGrad, SumToShapeLargeIsDeterministicAcrossThreadCounts) {
  for (const auto& [shape, target] :
       std::vector<std::pair<Shape, std::vector<int64_t>>>{{Shape{20000, 10}, {10}},
                                                           {Shape{300, 700}, {700}},
                                                           {Shape{700, 300}, {700, 1}},
                                                           {Shape{64, 50, 32}, {1, 50, 1}},
                                                           {Shape{100000}, {}}}) {
    SCOPED_TRACE(shape.to_string());
    Graph g;
    Scope s(g);
    Tensor xv(DType::kFloat32, shape);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(0, 1);
    for (float& v : xv.flat<float>()) v = dist(rng);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat32, shape);
    auto y = sum_to_shape(s, x, int64_shape(s, target));
    Tensor first;
    for (int threads : {1, 2, 4}) {
      Session sess(g, {.inter_op_threads = threads, .intra_op_threads = threads});
      Tensor got = sess.run(y, {{x, xv}});
      if (threads == 1) {
        first = got;
        continue;
      }
      EXPECT_TRUE(tensors_equal(got, first)) << threads << " threads";
    }
    // Against a float64 reference computed index by index.
    const Shape out_shape = first.shape();
    std::vector<double> ref(first.num_elements(), 0.0);
    const int lead = shape.rank() - out_shape.rank();
    const float* p = xv.data<float>();
    for (int64_t i = 0; i < xv.num_elements(); ++i) {
      int64_t rest = i, o = 0, stride = 1;
      for (int d = shape.rank() - 1; d >= 0; --d) {
        const int64_t idx = rest % shape.dim(d);
        rest /= shape.dim(d);
        if (d >= lead && out_shape.dim(d - lead) != 1) {
          o += idx * stride;
          stride *= out_shape.dim(d - lead);
        }
      }
      ref[o] += p[i];
    }
    for (int64_t o = 0; o < first.num_elements(); ++o)
      EXPECT_NEAR(first.data<float>()[o], ref[o], 1e-6 * ref[o] + 1e-6) << "at " << o;
  }
}

TEST(MathGrad, BroadcastToValues) {
  Graph g;
  Scope s(g);
  auto row = constant(s, Tensor::from_vector<float>({1, 2, 3}, Shape{3}));
  auto col = constant(s, Tensor::from_vector<int64_t>({7, 8}, Shape{2, 1}));
  auto three = constant(s, Tensor::from_vector<double>({1, 2, 3, 4}, Shape{2, 1, 2}));
  auto a = broadcast_to(s, row, int64_shape(s, {2, 3}));
  auto b = broadcast_to(s, col, int64_shape(s, {2, 3}));
  auto c = broadcast_to(s, constant(s, 5.0f), int64_shape(s, {2, 2}));
  auto d = broadcast_to(s, three, int64_shape(s, {2, 2, 3, 2}));
  auto e = broadcast_to(s, row, int64_shape(s, {0, 3}));
  auto out = eval({a, b, c, d, e});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {1, 2, 3, 1, 2, 3});
  expect_tensor_near<int64_t>(out[1], Shape{2, 3}, {7, 7, 7, 8, 8, 8});
  expect_tensor_near<float>(out[2], Shape{2, 2}, {5, 5, 5, 5});
  expect_tensor_near<double>(out[3], Shape{2, 2, 3, 2},
                             {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  EXPECT_EQ(out[4].shape(), (Shape{0, 3}));
  EXPECT_EQ(testing::error_text([&] {
              broadcast_to(s.with_op_name("bt"), row, int64_shape(s, {3, 2}));
            }),
            "[BroadcastTo] bt: Unable to broadcast tensor of shape [3] to tensor of shape [3,2]");
}

TEST(MathGrad, BroadcastToTakesStaticShapesFromShapeOf) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto v = placeholder(s.with_op_name("v"), DType::kFloat32, Shape{-1});
  auto b = broadcast_to(s, v, shape(s, x));
  EXPECT_EQ(b.shape(), (Shape{-1, 3}));
  auto bias = placeholder(s.with_op_name("bias"), DType::kFloat32, Shape{3});
  auto dims = placeholder(s.with_op_name("dims"), DType::kInt32, Shape{2});
  EXPECT_EQ(broadcast_to(s, bias, dims).shape(), (Shape{-1, 3}));  // the known dim of x fills in
  Session sess(g);
  auto out = sess.run(b, {{x, Tensor(DType::kFloat32, Shape{2, 3})}, {v, Tensor::from_vector<float>({1, 2, 3})}});
  expect_tensor_near<float>(out, Shape{2, 3}, {1, 2, 3, 1, 2, 3});
  EXPECT_EQ(testing::error_text([&] {
              sess.run(b, {{x, Tensor(DType::kFloat32, Shape{2, 3})}, {v, Tensor::from_vector<float>({1, 2})}});
            }),
            "[BroadcastTo] BroadcastTo: Unable to broadcast tensor of shape [2] to tensor of shape [2,3]");
}

TEST(MathGrad, BroadcastToLargeMatchesAcrossThreadCounts) {
  Graph g;
  Scope s(g);
  auto v = constant(s, random_tensor(Shape{1, 1000}, 21, -1, 1));
  auto col = constant(s, random_tensor(Shape{300, 1}, 22, -1, 1));
  auto a = broadcast_to(s, v, int64_shape(s, {300, 1000}));
  auto b = mean_grad(s, col, int64_shape(s, {2, 300, 1000}));
  std::vector<Tensor> first;
  for (int threads : {1, 4}) {
    Session sess(g, {.inter_op_threads = threads, .intra_op_threads = threads});
    auto out = sess.run({}, {a, b});
    if (first.empty()) {
      first = out;
      const double* pv = v.node->attrs().get<Tensor>("value").data<double>();
      const double* pc = col.node->attrs().get<Tensor>("value").data<double>();
      for (int64_t r = 0; r < 300; r += 37)
        for (int64_t j = 0; j < 1000; j += 91) {
          EXPECT_EQ(out[0].at<double>({r, j}), pv[j]);
          EXPECT_EQ(out[1].at<double>({1, r, j}), pc[r] / 2000);
        }
      continue;
    }
    EXPECT_TRUE(tensors_equal(out[0], first[0]));
    EXPECT_TRUE(tensors_equal(out[1], first[1]));
  }
}

TEST(MathGrad, MeanGradDividesByTheRepeatCount) {
  Graph g;
  Scope s(g);
  auto grad = constant(s, Tensor::from_vector<float>({6, 12}, Shape{2, 1}));
  auto a = mean_grad(s, grad, int64_shape(s, {2, 3}));
  auto b = mean_grad(s, constant(s, 8.0), int64_shape(s, {2, 2}));
  auto c = mean_grad(s, grad, int64_shape(s, {2, 1}));  // nothing repeats: forwarded
  auto d = mean_grad(s, constant(s, Tensor::from_vector<int32_t>({7}, Shape{1})), int64_shape(s, {2}));
  auto out = eval({a, b, c, d});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {2, 2, 2, 4, 4, 4});
  expect_tensor_near<double>(out[1], Shape{2, 2}, {2, 2, 2, 2});
  expect_tensor_near<float>(out[2], Shape{2, 1}, {6, 12});
  expect_tensor_near<int32_t>(out[3], Shape{2}, {3, 3});  // integer division, as TensorFlow
}

TEST(MathGrad, FusedUnaryBackwardOpValues) {
  Graph g;
  Scope s(g);
  auto y = constant(s, Tensor::from_vector<double>({0.5, -0.25, 2}, Shape{3}));
  auto dy = constant(s, Tensor::from_vector<double>({2, 4, -1}, Shape{3}));
  auto out = eval({tanh_grad(s, y, dy), sigmoid_grad(s, y, dy), sqrt_grad(s, y, dy), rsqrt_grad(s, y, dy)});
  expect_tensor_near<double>(out[0], Shape{3}, {2 * 0.75, 4 * (1 - 0.0625), -1 * (1 - 4)}, 1e-12);
  expect_tensor_near<double>(out[1], Shape{3}, {2 * 0.5 * 0.5, 4 * -0.25 * 1.25, -1 * 2 * -1}, 1e-12);
  expect_tensor_near<double>(out[2], Shape{3}, {2 * 0.5 / 0.5, 4 * 0.5 / -0.25, -1 * 0.5 / 2}, 1e-12);
  expect_tensor_near<double>(out[3], Shape{3}, {-0.5 * 2 * 0.125, -0.5 * 4 * -0.015625, -0.5 * -1 * 8}, 1e-12);
  // float32; inf * 0 is NaN, as in TensorFlow's kernel.
  auto yf = constant(s, Tensor::from_vector<float>({0, 1}, Shape{2}));
  auto dyf = constant(s, Tensor::from_vector<float>({static_cast<float>(kInf), 3}, Shape{2}));
  testing::expect_tensor_near<float>(eval(sigmoid_grad(s, yf, dyf)), Shape{2}, {static_cast<float>(kNaN), 0});
  EXPECT_EQ(testing::error_text([&] { tanh_grad(s.with_op_name("tg"), constant(s, 1), constant(s, 1)); }),
            "[TanhGrad] tg: input 0 must be float32 or float64, got int32");
}

TEST(MathGrad, SelectGradValuesWithBroadcasting) {
  Graph g;
  Scope s(g);
  auto x = constant(s, Tensor::from_vector<float>({1, 5, 3, 0, 2, 7}, Shape{2, 3}));
  auto y = constant(s, Tensor::from_vector<float>({2, 5, 1}, Shape{3}));
  auto col = constant(s, Tensor::from_vector<float>({3, 1}, Shape{2, 1}));
  auto gr = constant(s, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  auto out = eval({maximum_grad(s, gr, x, y, 0), maximum_grad(s, gr, x, y, 1), minimum_grad(s, gr, x, y, 0),
                   minimum_grad(s, gr, x, y, 1), maximum_grad(s, gr, col, y, 0), minimum_grad(s, gr, y, col, 1)});
  expect_tensor_near<float>(out[0], Shape{2, 3}, {0, 2, 3, 0, 0, 6});  // x >= y
  expect_tensor_near<float>(out[1], Shape{2, 3}, {1, 0, 0, 4, 5, 0});
  expect_tensor_near<float>(out[2], Shape{2, 3}, {1, 2, 0, 4, 5, 0});  // x <= y
  expect_tensor_near<float>(out[3], Shape{2, 3}, {0, 0, 3, 0, 0, 6});
  expect_tensor_near<float>(out[4], Shape{2, 3}, {1, 0, 3, 0, 0, 6});  // [3;1] >= [2,5,1]
  expect_tensor_near<float>(out[5], Shape{2, 3}, {0, 2, 0, 4, 5, 0});  // to y where [2,5,1] > [3;1]
  EXPECT_EQ(testing::error_text([&] { maximum_grad(s.with_op_name("mg"), y, x, y, 0); }),
            "[MaximumGrad] mg: grad has shape [3], the broadcast of x and y is [2,3]");
  EXPECT_EQ(testing::error_text([&] { maximum_grad(s.with_op_name("mg2"), gr, x, y, 2); }),
            "[MaximumGrad] mg2: attr input must be 0 (x) or 1 (y), got 2");
}

TEST(MathGrad, SelectGradLargeMatchesSmallPath) {
  Graph g;
  Scope s(g);
  auto x = constant(s, random_tensor(Shape{50, 40, 30}, 31, -1, 1));
  auto y = constant(s, random_tensor(Shape{40, 1}, 32, -1, 1));
  auto gr = constant(s, random_tensor(Shape{50, 40, 30}, 33, -1, 1));
  auto gx = minimum_grad(s, gr, x, y, 0), gy = minimum_grad(s, gr, x, y, 1);
  Session sess(g, {.inter_op_threads = 4, .intra_op_threads = 4});
  auto out = sess.run({}, {gx, gy});
  const Tensor& xv = x.node->attrs().get<Tensor>("value");
  const Tensor& yv = y.node->attrs().get<Tensor>("value");
  const Tensor& gv = gr.node->attrs().get<Tensor>("value");
  for (int64_t i = 0; i < 50; i += 7)
    for (int64_t j = 0; j < 40; ++j)
      for (int64_t k = 0; k < 30; k += 5) {
        const bool to_x = xv.at<double>({i, j, k}) <= yv.at<double>({j, 0});
        EXPECT_EQ(out[0].at<double>({i, j, k}), to_x ? gv.at<double>({i, j, k}) : 0.0);
        EXPECT_EQ(out[1].at<double>({i, j, k}), to_x ? 0.0 : gv.at<double>({i, j, k}));
      }
}

// The reverse pair differentiates too (second-order uses of broadcasting).
TEST(MathGrad, BroadcastToAndSumToShapeGradients) {
  Graph g;
  Scope s(g);
  auto v = placeholder(s.with_op_name("v"), DType::kFloat64, Shape{-1, 1});
  auto m = placeholder(s.with_op_name("m"), DType::kFloat64, Shape{2, 3});
  auto b = mul(s, broadcast_to(s, v, int64_shape(s, {2, 3})), m);
  auto t = mul(s, sum_to_shape(s, m, int64_shape(s, {3})), 3.0);
  expect_gradient_matches(v, random_tensor(Shape{2, 1}, 41, -1, 1), b, {{m, random_tensor(Shape{2, 3}, 42, -1, 1)}});
  expect_gradient_matches(m, random_tensor(Shape{2, 3}, 43, -1, 1), t);
}

}  // namespace
}  // namespace stepscope
