#include "stepscope/ops/reduction_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_tensor_near;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// 0, 1, 2, ... in the given shape.
template <typename T>
Tensor iota(const Shape& shape) {
  Tensor t(dtype_of<T>, shape);
  T v = 0;
  for (auto& x : t.flat<T>()) x = v++;
  return t;
}

// [[1,2,3],[4,5,6]]
Output m23(const Scope& s) { return constant<float>(s, {1, 2, 3, 4, 5, 6}, Shape{2, 3}); }

TEST(Sum, AllAxesRowsAndColumns) {
  Graph g;
  Scope root(g);
  auto x = m23(root);
  auto all = reduce_sum(root, x);
  EXPECT_EQ(all.node->name(), "Sum");
  EXPECT_EQ(all.node->input(1).node->op_type(), "Const");
  EXPECT_EQ(all.shape(), Shape{});
  expect_tensor_near<float>(eval(all), Shape{}, {21});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {0, 1})), Shape{}, {21});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {1})), Shape{2}, {6, 15});    // last axis (rows)
  expect_tensor_near<float>(eval(reduce_sum(root, x, {-1})), Shape{2}, {6, 15});   // negative
  expect_tensor_near<float>(eval(reduce_sum(root, x, {0})), Shape{3}, {5, 7, 9});  // first axis (columns)
  expect_tensor_near<float>(eval(reduce_sum(root, x, {-2})), Shape{3}, {5, 7, 9});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {0, -2})), Shape{3}, {5, 7, 9});  // duplicate axis
}

TEST(Sum, KeepDims) {
  Graph g;
  Scope root(g);
  auto x = m23(root);
  expect_tensor_near<float>(eval(reduce_sum(root, x, {}, true)), Shape{1, 1}, {21});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {1}, true)), Shape{2, 1}, {6, 15});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {0}, true)), Shape{1, 3}, {5, 7, 9});
}

TEST(Sum, GeneralPathOverAnyAxes) {
  Graph g;
  Scope root(g);
  // x[i][j][k] = 12i + 4j + k, shape [2,3,4].
  auto x = constant(root, iota<double>(Shape{2, 3, 4}));
  // Middle axis: batched columns. [i][k] = sum_j = 36i + 12 + 3k.
  expect_tensor_near<double>(eval(reduce_sum(root, x, {1})), Shape{2, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  // Outer and inner axes (reduced, kept, reduced): [j] = 4*(0+12) + 8*4j + 2*(0+1+2+3) = 60 + 32j.
  expect_tensor_near<double>(eval(reduce_sum(root, x, {0, 2})), Shape{3}, {60, 92, 124});
  expect_tensor_near<double>(eval(reduce_sum(root, x, {2, 0}, true)), Shape{1, 3, 1}, {60, 92, 124});
  // First two axes merge into one column reduction: [k] = 3*(0+12) + 2*4*(0+1+2) + 6k = 60 + 6k.
  expect_tensor_near<double>(eval(reduce_sum(root, x, {0, 1})), Shape{4}, {60, 66, 72, 78});
  // Last two axes merge into one row reduction: [i] = 12*12i + 4*4*(0+1+2) + 3*(0+1+2+3) = 144i + 66.
  expect_tensor_near<double>(eval(reduce_sum(root, x, {1, 2})), Shape{2}, {66, 210});
}

TEST(Sum, GeneralPathRank4AlternatingAxes) {
  Graph g;
  Scope root(g);
  // Shape [2,3,2,2], reduce axes 1 and 3 (kept, reduced, kept, reduced): two steps.
  Tensor t = iota<int64_t>(Shape{2, 3, 2, 2});
  auto x = constant(root, t);
  std::vector<int64_t> want(4, 0);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 2; ++d) want[a * 2 + c] += t.at<int64_t>({a, b, c, d});
  // x = 12a + 4b + 2c + d: [a][c] = 6*12a + 2*4*(0+1+2) + 6*2c + 3*(0+1) = 72a + 12c + 27.
  EXPECT_EQ(want, (std::vector<int64_t>{27, 39, 99, 111}));
  expect_tensor_near<int64_t>(eval(reduce_sum(root, x, {1, 3})), Shape{2, 2}, want);
  // Reduced, kept, reduced, kept: also two steps.
  std::vector<int64_t> want2(6, 0);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 2; ++d) want2[b * 2 + d] += t.at<int64_t>({a, b, c, d});
  expect_tensor_near<int64_t>(eval(reduce_sum(root, x, {0, 2})), Shape{3, 2}, want2);
}

TEST(Sum, MediumRowsUseLanesAndTail) {
  Graph g;
  Scope root(g);
  // Rows of 100 = 6 x 16 lanes + 4: x[r][i] = 100r + i.
  auto x = constant(root, iota<int32_t>(Shape{3, 100}));
  expect_tensor_near<int32_t>(eval(reduce_sum(root, x, {1})), Shape{3}, {4950, 14950, 24950});
  expect_tensor_near<int32_t>(eval(reduce_max(root, x, {1})), Shape{3}, {99, 199, 299});
  auto f = constant(root, iota<float>(Shape{3, 100}));
  expect_tensor_near<float>(eval(reduce_mean(root, f, {-1})), Shape{3}, {49.5f, 149.5f, 249.5f});
  expect_tensor_near<float>(eval(reduce_max(root, f, {1})), Shape{3}, {99, 199, 299});
}

TEST(Sum, SizeOneAxesAndScalars) {
  Graph g;
  Scope root(g);
  auto x = constant<int32_t>(root, {1, 2, 3}, Shape{1, 3});
  expect_tensor_near<int32_t>(eval(reduce_sum(root, x, {0})), Shape{3}, {1, 2, 3});
  expect_tensor_near<int32_t>(eval(reduce_sum(root, x)), Shape{}, {6});
  auto s = constant<float>(root, 2.5f);
  expect_tensor_near<float>(eval(reduce_sum(root, s)), Shape{}, {2.5f});
}

TEST(Sum, EmptyInputs) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{0, 3});
  Tensor empty(DType::kFloat32, Shape{0, 3});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {0}), {{x, empty}}), Shape{3}, {0, 0, 0});
  expect_tensor_near<float>(eval(reduce_sum(root, x, {1}), {{x, empty}}), Shape{0}, {});
  expect_tensor_near<float>(eval(reduce_mean(root, x, {0}), {{x, empty}}), Shape{3}, {kNaN, kNaN, kNaN});
  EXPECT_EQ(eval(reduce_max(root, x), {{x, empty}}).scalar_value<float>(), -kInf);
}

TEST(Mean, FloatAndIntegerDivision) {
  Graph g;
  Scope root(g);
  expect_tensor_near<float>(eval(reduce_mean(root, m23(root))), Shape{}, {3.5f});
  expect_tensor_near<float>(eval(reduce_mean(root, m23(root), {0})), Shape{3}, {2.5f, 3.5f, 4.5f});
  expect_tensor_near<float>(eval(reduce_mean(root, m23(root), {1}, true)), Shape{2, 1}, {2, 5});
  // Like TensorFlow, integer means truncate toward zero.
  auto i = constant<int32_t>(root, {1, 2, 3, 5, -3, -4}, Shape{3, 2});
  expect_tensor_near<int32_t>(eval(reduce_mean(root, i, {1})), Shape{3}, {1, 4, -3});
  expect_tensor_near<int32_t>(eval(reduce_mean(root, i, {0})), Shape{2}, {0, 1});
  auto l = constant<int64_t>(root, {7, 8, 9, 10}, Shape{2, 2});
  expect_tensor_near<int64_t>(eval(reduce_mean(root, l)), Shape{}, {8});
}

TEST(Max, ValuesNegativesAndNaN) {
  Graph g;
  Scope root(g);
  auto x = constant<float>(root, {-1, -5, -3, 4, -2, -6}, Shape{2, 3});
  expect_tensor_near<float>(eval(reduce_max(root, x)), Shape{}, {4});
  expect_tensor_near<float>(eval(reduce_max(root, x, {1})), Shape{2}, {-1, 4});
  expect_tensor_near<float>(eval(reduce_max(root, x, {0}, true)), Shape{1, 3}, {4, -2, -3});
  auto n = constant<float>(root, {1, kNaN, 3, 4, 5, 6, kNaN, 0}, Shape{2, 4});
  expect_tensor_near<float>(eval(reduce_max(root, n, {1})), Shape{2}, {kNaN, kNaN});
  expect_tensor_near<float>(eval(reduce_max(root, n, {0})), Shape{4}, {5, kNaN, kNaN, 4});
  auto i = constant<int64_t>(root, {std::numeric_limits<int64_t>::lowest(), -7}, Shape{2});
  expect_tensor_near<int64_t>(eval(reduce_max(root, i)), Shape{}, {-7});
  auto d = constant(root, iota<double>(Shape{2, 3, 4}));
  expect_tensor_near<double>(eval(reduce_max(root, d, {0, 2})), Shape{3}, {15, 19, 23});
}

TEST(Reduction, UnknownDimsAndRank) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 3});
  EXPECT_EQ(reduce_sum(root, x, {0}).shape(), (Shape{3}));
  EXPECT_EQ(reduce_sum(root, x, {1}).shape(), (Shape{-1}));
  EXPECT_EQ(reduce_sum(root, x, {1}, true).shape(), (Shape{-1, 1}));
  EXPECT_EQ(reduce_sum(root, x).shape(), Shape{});
  auto y = reduce_mean(root, x, {1});
  expect_tensor_near<float>(eval(y, {{x, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, Shape{3, 3})}}),
                            Shape{3}, {2, 5, 8});

  // Unknown rank: all axes still gives a scalar; the kernel reduces whatever rank is fed.
  auto u = placeholder(root, DType::kFloat32);
  auto all = reduce_sum(root, u);
  EXPECT_TRUE(all.node->attrs().get_or("reduce_all", false));
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_FALSE(reduce_sum(root, u, {}, true).shape().known_rank());
  EXPECT_FALSE(reduce_max(root, u, {0}).shape().known_rank());
  Tensor fed = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  expect_tensor_near<float>(eval(all, {{u, fed}}), Shape{}, {21});
  expect_tensor_near<float>(eval(reduce_sum(root, u, {}, true), {{u, fed}}), Shape{1, 1}, {21});
  expect_tensor_near<float>(eval(reduce_max(root, u, {0}), {{u, fed}}), Shape{3}, {4, 5, 6});
}

TEST(Reduction, AxesFromANonConstantInput) {
  Graph g;
  Scope root(g);
  auto x = m23(root);
  auto axes = placeholder(root, DType::kInt64, Shape{-1});
  // TensorFlow's raw Sum op: an empty reduction_indices reduces nothing.
  auto keep = root.add_node(op_def("Sum"), {x, axes}, {{"keep_dims", true}}, CallSite::current())->output(0);
  EXPECT_EQ(keep.shape(), (Shape{-1, -1}));
  auto drop = root.add_node(op_def("Sum"), {x, axes}, {}, CallSite::current())->output(0);
  EXPECT_FALSE(drop.shape().known_rank());
  expect_tensor_near<float>(eval(keep, {{axes, Tensor::from_vector<int64_t>({1})}}), Shape{2, 1}, {6, 15});
  expect_tensor_near<float>(eval(drop, {{axes, Tensor::from_vector<int64_t>({})}}), Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              eval(drop, {{axes, Tensor::from_vector<int64_t>({-3})}});
            }),
            "[Sum] Sum_1: Invalid reduction dimension -3 for input with 2 dimensions");
}

TEST(Reduction, Errors) {
  Graph g;
  Scope root(g);
  auto x = m23(root);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { reduce_sum(root, x, {3}); }),
            "[Sum] Sum: Invalid reduction dimension 3 for input with 2 dimensions");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { reduce_mean(root.with_op_name("loss"), x, {-3}); }),
            "[Mean] loss: Invalid reduction dimension -3 for input with 2 dimensions");
  auto s = constant<float>(root, 1.0f);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { reduce_max(root, s, {0}); }),
            "[Max] Max: Invalid reduction dimension 0 for input with 0 dimensions");
  auto b = placeholder(root, DType::kBool, Shape{2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { reduce_sum(root, b); }),
            "[Sum] Sum_1: input must be float32, float64, int32 or int64, got bool");
  // Checked again at run time when the rank is known only then.
  auto u = placeholder(root, DType::kFloat32);
  auto y = reduce_sum(root, u, {2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              eval(y, {{u, Tensor::from_vector<float>({1, 2})}});
            }),
            "[Sum] Sum_2: Invalid reduction dimension 2 for input with 1 dimensions");
}

TEST(Reduction, FlopsOnePerInputElement) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{64, 10});
  auto y = reduce_mean(root, x, {1});
  std::vector<Shape> in{x.shape(), Shape{1}}, out{y.shape()};
  EXPECT_EQ(y.node->op().flops(CostContext{*y.node, in, out}), 640);
}

// Large inputs take the parallel, blocked paths; the results must match a double-precision
// reference and be bit-identical whatever the thread count.
TEST(Reduction, LargeFloatSumsAreAccurateAndDeterministic) {
  Graph g;
  Scope root(g);
  const int64_t rows = 1000, cols = 3000;
  Tensor t(DType::kFloat32, Shape{rows, cols});
  float* p = t.data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f + 0.001f;
  auto x = constant(root, t);
  std::vector<Output> fetches{reduce_sum(root, x), reduce_sum(root, x, {1}), reduce_sum(root, x, {0}),
                              reduce_mean(root, x, {0}), reduce_max(root, x, {0})};
  auto two = eval(fetches, {}, 2);
  auto one = eval(fetches, {}, 1);
  auto four = eval(fetches, {}, 4);  // several pool workers: the blocks certainly run in parallel
  for (size_t i = 0; i < fetches.size(); ++i) {
    EXPECT_TRUE(tensors_equal(one[i], two[i])) << "fetch " << i;
    EXPECT_TRUE(tensors_equal(one[i], four[i])) << "fetch " << i;
  }

  std::vector<double> row_sum(rows, 0), col_sum(cols, 0), col_max(cols, -1);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double v = p[r * cols + c];
      row_sum[r] += v, col_sum[c] += v, total += v, col_max[c] = std::max(col_max[c], v);
    }
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  expect_tensor_near<float>(two[0], Shape{}, {static_cast<float>(total)}, 1e-6);
  expect_tensor_near<float>(two[1], Shape{rows}, as_float(row_sum), 1e-6);
  expect_tensor_near<float>(two[2], Shape{cols}, as_float(col_sum), 1e-6);
  for (auto& v : col_sum) v /= rows;
  expect_tensor_near<float>(two[3], Shape{cols}, as_float(col_sum), 1e-6);
  expect_tensor_near<float>(two[4], Shape{cols}, as_float(col_max), 0);
}

// Sequential float32 accumulation of ten million 0.1f drifts by ~9%; pairwise summation stays
// within a few ulps. Both along a row and down a column.
TEST(Reduction, LongFloat32SumsStayAccurate) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1});
  Tensor ones(DType::kFloat32, Shape{10000000});
  for (auto& v : ones.flat<float>()) v = 0.1f;
  const double exact = 10000000.0 * static_cast<double>(0.1f);
  expect_tensor_near<float>(eval(reduce_sum(root, x), {{x, ones}}), Shape{}, {static_cast<float>(exact)}, 1e-6);
  auto tall = placeholder(root, DType::kFloat32, Shape{-1, 2});
  auto col = eval(reduce_sum(root, tall, {0}), {{tall, ones.reshaped(Shape{5000000, 2})}});
  expect_tensor_near<float>(col, Shape{2}, {static_cast<float>(exact / 2), static_cast<float>(exact / 2)}, 1e-6);
}

// Rows long enough for the lane-wise kernels (16 lanes, then a tail).
TEST(ArgMax, LongRowsTiesAcrossLanesTailAndNaN) {
  Graph g;
  Scope root(g);
  const int64_t n = 100;  // 6 rounds of 16 lanes, then a tail of 4
  std::vector<float> v(5 * n, 0.0f);
  v[0 * n + 40] = 5, v[0 * n + 23] = 5;                    // equal maxima in lanes 8 and 7: the first index wins
  v[1 * n + 17] = 5, v[1 * n + 33] = 5;                    // same lane
  v[2 * n + 98] = 7, v[2 * n + 99] = 7, v[2 * n + 3] = 6;  // in the tail
  v[3 * n + 70] = kNaN, v[3 * n + 60] = kNaN, v[3 * n + 5] = 9;
  for (int64_t i = 0; i < n; ++i) v[4 * n + i] = -kInf;
  auto x = constant<float>(root, v, Shape{5, n});
  expect_tensor_near<int64_t>(eval(argmax(root, x, 1)), Shape{5}, {23, 17, 98, 60, 0});
  std::vector<double> d(v.begin(), v.end());
  expect_tensor_near<int32_t>(eval(argmax(root, constant<double>(root, d, Shape{5, n}), -1, DType::kInt32)), Shape{5},
                              {23, 17, 98, 60, 0});
}

TEST(ArgMax, HandComputedTiesAndAxes) {
  Graph g;
  Scope root(g);
  auto x = constant<float>(root, {1, 5, 5, 7, 2, 7}, Shape{2, 3});
  auto rows = argmax(root, x, 1);
  EXPECT_EQ(rows.node->name(), "ArgMax");
  EXPECT_EQ(rows.dtype(), DType::kInt64);
  EXPECT_EQ(rows.shape(), (Shape{2}));
  expect_tensor_near<int64_t>(eval(rows), Shape{2}, {1, 0});  // first index on ties
  expect_tensor_near<int64_t>(eval(argmax(root, x, -1)), Shape{2}, {1, 0});
  expect_tensor_near<int64_t>(eval(argmax(root, x, 0)), Shape{3}, {1, 0, 1});
  expect_tensor_near<int32_t>(eval(argmax(root, x, 0, DType::kInt32)), Shape{3}, {1, 0, 1});
  // Middle axis of [2,3,4] (columns within each outer slice), integer input.
  auto i = constant(root, iota<int32_t>(Shape{2, 3, 4}));
  expect_tensor_near<int64_t>(eval(argmax(root, i, 1)), Shape{2, 4}, {2, 2, 2, 2, 2, 2, 2, 2});
  expect_tensor_near<int64_t>(eval(argmax(root, i, 2)), Shape{2, 3}, {3, 3, 3, 3, 3, 3});
  auto d = constant<double>(root, {3, -1, 3, 9, 9, -2}, Shape{3, 2});
  expect_tensor_near<int32_t>(eval(argmax(root, d, 0, DType::kInt32)), Shape{2}, {2, 1});
}

TEST(ArgMax, NaNIsTheMaximumFirstOneWins) {
  Graph g;
  Scope root(g);
  auto x = constant<float>(root, {1, kNaN, 3, kNaN, 2, 9, 0, 1}, Shape{2, 4});
  expect_tensor_near<int64_t>(eval(argmax(root, x, 1)), Shape{2}, {1, 1});
  expect_tensor_near<int64_t>(eval(argmax(root, x, 0)), Shape{4}, {1, 0, 0, 0});
  auto y = constant<float>(root, {1, 4, kNaN, 0, kNaN, kNaN}, Shape{3, 2});
  expect_tensor_near<int64_t>(eval(argmax(root, y, 0)), Shape{2}, {1, 2});
}

TEST(ArgMax, LargeColumnsAndRowsThroughThreadedSessions) {
  Graph g;
  Scope root(g);
  const int64_t n = 2000;
  Tensor t(DType::kFloat32, Shape{n, n});
  float* p = t.data<float>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < n; ++c) p[r * n + c] = static_cast<float>(((r + 3 * c) * 7919) % n);
  auto x = constant(root, t);
  auto two = eval({argmax(root, x, 1), argmax(root, x, 0)}, {}, 2);
  auto four = eval({argmax(root, x, 1), argmax(root, x, 0)}, {}, 4);
  EXPECT_TRUE(tensors_equal(two[0], four[0]));
  EXPECT_TRUE(tensors_equal(two[1], four[1]));
  const Tensor& by_row = four[0];
  const Tensor& by_col = four[1];
  for (int64_t i = 0; i < n; ++i) {
    int64_t best_c = 0, best_r = 0;
    for (int64_t j = 1; j < n; ++j) {
      if (p[i * n + j] > p[i * n + best_c]) best_c = j;
      if (p[j * n + i] > p[best_r * n + i]) best_r = j;
    }
    ASSERT_EQ(by_row.data<int64_t>()[i], best_c) << "row " << i;
    ASSERT_EQ(by_col.data<int64_t>()[i], best_r) << "column " << i;
  }
}

TEST(ArgMax, ShapesAndErrors) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 10});
  EXPECT_EQ(argmax(root, x, 1).shape(), (Shape{-1}));
  EXPECT_EQ(argmax(root, x, 0, DType::kInt32).shape(), (Shape{10}));
  EXPECT_FALSE(argmax(root, placeholder(root, DType::kFloat32), 0).shape().known_rank());
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { argmax(root, x, 2); }),
            "[ArgMax] ArgMax_3: Expected dimension in the range [-2, 2), but got 2");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { argmax(root, x, -3); }),
            "[ArgMax] ArgMax_4: Expected dimension in the range [-2, 2), but got -3");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { argmax(root, x, 1, DType::kFloat32); }),
            "[ArgMax] ArgMax_5: output_type must be int32 or int64, got float32");
  auto e = placeholder(root, DType::kFloat32, Shape{2, 0});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { argmax(root, e, 1); }), "[ArgMax] ArgMax_6: Reduction axis 1 is empty in shape [2,0]");
  // Empty axis known only at run time.
  auto y = argmax(root, x, 0);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              eval(y, {{x, Tensor(DType::kFloat32, Shape{0, 10})}});
            }),
            "[ArgMax] ArgMax_7: Reduction axis 0 is empty in shape [0,10]");
  // Empty output, non-empty axis: nothing to compute.
  auto z = argmax(root, x, 1);
  expect_tensor_near<int64_t>(eval(z, {{x, Tensor(DType::kFloat32, Shape{0, 10})}}), Shape{0}, {});
}

}  // namespace
}  // namespace stepscope
