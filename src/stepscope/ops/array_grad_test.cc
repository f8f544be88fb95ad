// Gradients of the array family (Identity, Reshape, Transpose, ConcatV2, Cast, Fill, ZerosLike)
// against central differences, with static and run-time shapes; and the values and errors of
// the ops the rules use: Slice and ConcatOffset.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "stepscope/testing/gradient_checker.h"
#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;
using testing::count_ops;

using testing::eval;
using testing::expect_tensor_near;

// y * w summed by the checker's Jacobian: every element of y gets its own weight, so a
// gradient routed to the wrong element shows.
Output weighted(const Scope& s, Output y, const Shape& shape, unsigned seed) {
  return mul(s, y, constant(s, random_tensor(shape, seed)));
}

Shape unknown_dims(int rank) {
  Shape s;
  for (int i = 0; i < rank; ++i) s.add_dim(-1);
  return s;
}

TEST(ArrayGrad, IdentityPassesTheGradient) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{2, 2});
  expect_gradient_matches(x, random_tensor(Shape{2, 2}, 1), weighted(s, identity(s, x), Shape{2, 2}, 2));
}

TEST(ArrayGrad, Reshape) {
  struct Case {
    Shape static_shape, value_shape;
    std::vector<int64_t> target;
    Shape out;
  };
  for (const Case& c :
       {Case{Shape{2, 3}, Shape{2, 3}, {3, 2}, Shape{3, 2}}, Case{Shape{-1, 3}, Shape{4, 3}, {-1}, Shape{12}},
        Case{Shape{-1, -1}, Shape{2, 4}, {4, 2}, Shape{4, 2}},
        Case{Shape::unknown_rank(), Shape{2, 2, 2}, {8}, Shape{8}},
        Case{Shape{1, 6}, Shape{1, 6}, {2, 1, 3}, Shape{2, 1, 3}}}) {
    SCOPED_TRACE(c.static_shape.to_string());
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat64, c.static_shape);
    auto r = reshape(s, x, c.target);
    expect_gradient_matches(x, random_tensor(c.value_shape, 4), weighted(s, r, c.out, 3));
    EXPECT_EQ(gradients(s, {r}, {x})[0].shape(), c.static_shape);  // the static shape survives
  }
}

TEST(ArrayGrad, Transpose) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
    Shape out;
  };
  for (const Case& c :
       {Case{Shape{2, 3}, {}, Shape{3, 2}}, Case{Shape{2, 3, 4}, {2, 0, 1}, Shape{4, 2, 3}},
        Case{Shape{2, 3, 4, 2}, {0, 2, 3, 1}, Shape{2, 4, 2, 3}}, Case{Shape{2, 3, 4}, {}, Shape{4, 3, 2}}}) {
    SCOPED_TRACE(c.shape.to_string());
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat64, c.shape);
    auto t = transpose(s, x, c.perm);
    expect_gradient_matches(x, random_tensor(c.shape, 5), weighted(s, t, c.out, 6));
    auto u = placeholder(s.with_op_name("u"), DType::kFloat64, unknown_dims(c.shape.rank()));
    auto dx = gradients(s, {transpose(s, u, c.perm)}, {u})[0];
    EXPECT_EQ(dx.node->op_type(), "Transpose");
    expect_gradient_matches(u, random_tensor(c.shape, 7), weighted(s, transpose(s, u, c.perm), c.out, 8));
  }
}

TEST(ArrayGrad, ConcatWithStaticSizesUsesConstSlices) {
  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Graph g;
    Scope s(g);
    const int a = static_cast<int>(axis < 0 ? axis + 2 : axis);
    auto shape_with = [&](int64_t extent) { return a == 0 ? Shape{extent, 3} : Shape{3, extent}; };
    auto x0 = placeholder(s.with_op_name("x0"), DType::kFloat64, shape_with(2));
    auto x1 = placeholder(s.with_op_name("x1"), DType::kFloat64, shape_with(1));
    auto x2 = placeholder(s.with_op_name("x2"), DType::kFloat64, shape_with(3));
    auto c = concat(s, {x0, x1, x2}, axis);
    auto y = weighted(s, c, shape_with(6), 9);
    const Tensor v0 = random_tensor(shape_with(2), 10), v1 = random_tensor(shape_with(1), 11),
                 v2 = random_tensor(shape_with(3), 12);
    expect_gradient_matches(x0, v0, y, {{x1, v1}, {x2, v2}});
    expect_gradient_matches(x1, v1, y, {{x0, v0}, {x2, v2}});
    expect_gradient_matches(x2, v2, y, {{x0, v0}, {x1, v1}});
    auto grads = gradients(s, {c}, {x0, x1, x2});
    EXPECT_EQ(count_ops(g, "ConcatOffset"), 0);
    EXPECT_EQ(count_ops(g, "Shape"), 0);
    EXPECT_EQ(grads[1].node->op_type(), "Slice");
    EXPECT_EQ(grads[1].shape(), shape_with(1));
  }
}

// Sizes along the axis known only at run time: ConcatOffset and shape() give the slices.
TEST(ArrayGrad, ConcatWithRunTimeSizes) {
  Graph g;
  Scope s(g);
  auto x0 = placeholder(s.with_op_name("x0"), DType::kFloat64, Shape{-1, 2});
  auto x1 = placeholder(s.with_op_name("x1"), DType::kFloat64, Shape{-1, 2});
  auto x2 = placeholder(s.with_op_name("x2"), DType::kFloat64, Shape{1, 2});
  auto c = concat(s, {x0, x1, x2}, 0);
  auto y = mul(s, c, constant(s, random_tensor(Shape{2}, 13)));
  const Tensor v0 = random_tensor(Shape{3, 2}, 14), v1 = random_tensor(Shape{2, 2}, 15),
               v2 = random_tensor(Shape{1, 2}, 16);
  expect_gradient_matches(x0, v0, y, {{x1, v1}, {x2, v2}});
  expect_gradient_matches(x1, v1, y, {{x0, v0}, {x2, v2}});
  expect_gradient_matches(x2, v2, y, {{x0, v0}, {x1, v1}});
  const int before = count_ops(g, "ConcatOffset");
  auto grads = gradients(s, {c}, {x0, x1, x2});
  EXPECT_EQ(count_ops(g, "ConcatOffset"), before + 1);
  EXPECT_EQ(grads[0].shape(), (Shape{-1, 2}));
  EXPECT_EQ(grads[2].shape(), (Shape{1, 2}));
  // A value of unknown rank: the whole gradient at run time.
  auto u = placeholder(s.with_op_name("u"), DType::kFloat64);
  auto cu = concat(s, {x2, u}, -1);
  const Tensor vu = random_tensor(Shape{1, 3}, 17);
  expect_gradient_matches(u, vu, mul(s, cu, constant(s, random_tensor(Shape{5}, 18))), {{x2, v2}});
}

TEST(ArrayGrad, ConcatOfOneValue) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{2});
  auto dz = placeholder(s.with_op_name("dz"), DType::kFloat64, Shape{2});
  EXPECT_EQ(gradients(s, {concat(s, {x}, 0)}, {x}, {dz})[0], dz);
}

TEST(ArrayGrad, CastBetweenFloatsCastsBackAndStopsAtIntegers) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{3});
  auto y = square(s, cast(s, x, DType::kFloat32));
  auto dx = gradients(s, {y}, {x})[0];
  EXPECT_EQ(dx.dtype(), DType::kFloat64);
  // float32 in the middle: a larger step keeps its rounding out of the difference quotient.
  expect_gradient_matches(x, Tensor::from_vector<double>({0.5, -1.25, 2}), y, {}, {.delta = 1e-2, .tolerance = 1e-5});
  auto through_int = cast(s, cast(s, x, DType::kInt32), DType::kFloat64);
  EXPECT_FALSE(gradients(s, {through_int}, {x})[0]);  // no path for a gradient
  auto both = add(s, through_int, x);
  expect_tensor_near<double>(eval(gradients(s, {both}, {x})[0], {{x, Tensor::from_vector<double>({1, 2, 3})}}),
                             Shape{3}, {1, 1, 1});
}

TEST(ArrayGrad, FillValueGetsTheSum) {
  Graph g;
  Scope s(g);
  auto v = placeholder(s.with_op_name("v"), DType::kFloat64, Shape{});
  auto f = fill(s, {2, 3}, v);
  expect_gradient_matches(v, Tensor::scalar<double>(0.7), weighted(s, f, Shape{2, 3}, 19));
  auto dz = constant(s, Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, Shape{2, 3}));
  expect_tensor_near<double>(eval(gradients(s, {f}, {v}, {dz})[0], {{v, Tensor::scalar<double>(0)}}), Shape{}, {21});
}

// ZerosLike and OnesLike pass no gradient, without an error (TensorFlow's NotDifferentiable).
TEST(ArrayGrad, ZerosLikeAndOnesLikeAreNotDifferentiable) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat64, Shape{2});
  auto y = add(s, mul(s, x, ones_like(s, x)), zeros_like(s, x));
  expect_tensor_near<double>(eval(gradients(s, {y}, {x})[0], {{x, Tensor::from_vector<double>({3, 4})}}), Shape{2},
                             {1, 1});
}

// ---------------------------------------------------------------------------------------------
// Slice and ConcatOffset

TEST(ArrayGrad, SliceValues) {
  Graph g;
  Scope s(g);
  Tensor v(DType::kInt32, Shape{3, 4, 2});
  for (int i = 0; i < 24; ++i) v.data<int32_t>()[i] = i;
  auto x = constant(s, v);
  auto a = slice(s, x, {1, 0, 0}, {2, -1, -1});  // contiguous rows
  auto b = slice(s, x, {0, 1, 0}, {-1, 2, 2});   // a middle block in each row
  auto c = slice(s, x, {2, 3, 1}, {1, 1, 1});    // one element
  auto d = slice(s, x, {0, 0, 1}, {3, 4, 1});    // a strided column
  auto e = slice(s, x, {1, 4, 0}, {2, 0, -1});   // empty
  EXPECT_EQ(a.shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(b.shape(), (Shape{3, 2, 2}));
  auto out = eval({a, b, c, d, e});
  expect_tensor_near<int32_t>(out[0], Shape{2, 4, 2}, {8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  expect_tensor_near<int32_t>(out[1], Shape{3, 2, 2}, {2, 3, 4, 5, 10, 11, 12, 13, 18, 19, 20, 21});
  expect_tensor_near<int32_t>(out[2], Shape{1, 1, 1}, {23});
  expect_tensor_near<int32_t>(out[3], Shape{3, 4, 1}, {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23});
  EXPECT_EQ(out[4].shape(), (Shape{2, 0, 2}));
}

TEST(ArrayGrad, SliceForwardsWholeInputAndTakesRunTimeArguments) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto whole = slice(s, x, {0, 0}, {-1, 3});
  EXPECT_EQ(whole.shape(), (Shape{-1, 3}));
  auto begin = placeholder(s.with_op_name("begin"), DType::kInt32, Shape{2});
  auto size = placeholder(s.with_op_name("size"), DType::kInt32, Shape{2});
  auto part = slice(s.with_op_name("part"), x, begin, size);
  EXPECT_EQ(part.shape(), (Shape{-1, -1}));
  const Tensor xv = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Session sess(g);
  auto out =
      sess.run({{x, xv}, {begin, Tensor::from_vector<int32_t>({1, 1})}, {size, Tensor::from_vector<int32_t>({1, -1})}},
               {whole, part});
  EXPECT_TRUE(out[0].shares_buffer_with(xv));
  expect_tensor_near<float>(out[1], Shape{1, 2}, {5, 6});
  EXPECT_EQ(testing::error_text([&] {
              sess.run(part, {{x, xv},
                              {begin, Tensor::from_vector<int32_t>({1, 2})},
                              {size, Tensor::from_vector<int32_t>({1, 2})}});
            }),
            "[Slice] part: Expected size[1] in [0, 1], but got 2");
  EXPECT_EQ(testing::error_text([&] {
              sess.run(part, {{x, xv},
                              {begin, Tensor::from_vector<int32_t>({3, 0})},
                              {size, Tensor::from_vector<int32_t>({1, 2})}});
            }),
            "[Slice] part: Expected begin[0] in [0, 2], but got 3");
}

TEST(ArrayGrad, SliceGradPlacesTheBlockInZeros) {
  Graph g;
  Scope root(g);
  auto dy = constant(root, std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  auto dx = slice_grad(root, dy, constant(root, std::vector<int64_t>{3, 3}, Shape{2}),
                       constant(root, std::vector<int64_t>{1, 0}, Shape{2}));
  EXPECT_EQ(dx.shape(), (Shape{3, 3}));
  EXPECT_EQ(eval(dx).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
  // Run-time x shape, and a block that does not fit.
  auto x_shape = placeholder(root, DType::kInt64, Shape{2});
  auto dx2 = slice_grad(root, dy, x_shape, constant(root, std::vector<int64_t>{0, 2}, Shape{2}));
  EXPECT_EQ(eval(dx2, {{x_shape, Tensor::from_vector<int64_t>({2, 4})}}).to_vector<float>(),
            (std::vector<float>{0, 0, 1, 2, 0, 0, 3, 4}));
  EXPECT_THROW(eval(dx2, {{x_shape, Tensor::from_vector<int64_t>({2, 3})}}), InvalidArgumentError);
}

TEST(ArrayGrad, SplitValuesGradientAndErrors) {
  Graph g;
  Scope root(g);
  auto x = constant(root, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, Shape{2, 4});
  auto cols = split(root, x, 2, 1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[1].shape(), (Shape{2, 2}));
  EXPECT_EQ(eval(cols[0]).to_vector<float>(), (std::vector<float>{0, 1, 4, 5}));
  EXPECT_EQ(eval(cols[1]).to_vector<float>(), (std::vector<float>{2, 3, 6, 7}));
  auto rows = split(root, x, 2, -2);
  EXPECT_EQ(eval(rows[1]).to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  // The gradient is one Concat, zeros standing in for a part nobody used.
  auto dx = gradients(root, {reduce_sum(root, cols[1])}, {x})[0];
  EXPECT_EQ(eval(dx).to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(count_ops(g, "ConcatV2"), 1);
  EXPECT_THROW(split(root, x, 3, 1), InvalidArgumentError);
  EXPECT_THROW(split(root, x, 2, 2), InvalidArgumentError);
  auto unknown = placeholder(root, DType::kFloat32, Shape{-1, 3});
  auto parts = split(root, unknown, 2, 0);
  EXPECT_THROW(eval(parts[0], {{unknown, Tensor(DType::kFloat32, Shape{3, 3})}}), InvalidArgumentError);
}

TEST(ArrayGrad, SliceShapeRuleErrors) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2, 3});
  EXPECT_EQ(testing::error_text([&] { slice(s.with_op_name("s1"), x, {0}, {1}); }),
            "[Slice] s1: Expected begin and size arguments to be 1-D tensors of size 2, but got shapes [1] and [1] "
            "instead.");
  EXPECT_EQ(testing::error_text([&] {
              slice(s.with_op_name("s2"), x, {0, 4}, {1, -1});
            }),
            "[Slice] s2: Expected begin[1] in [0, 3], but got 4");
  EXPECT_EQ(testing::error_text([&] {
              slice(s.with_op_name("s3"), x, {1, 1}, {2, 1});
            }),
            "[Slice] s3: Expected size[0] in [0, 1], but got 2");
  EXPECT_EQ(testing::error_text([&] {
              slice(s.with_op_name("s4"), x, {0, 0}, {-2, 1});
            }),
            "[Slice] s4: Expected size[0] to be -1 or non-negative, but got -2");
}

TEST(ArrayGrad, SliceLargeSplitsOverThreads) {
  Graph g;
  Scope s(g);
  Tensor v(DType::kFloat32, Shape{300, 200, 10});
  for (int64_t i = 0; i < v.num_elements(); ++i) v.data<float>()[i] = static_cast<float>(i);
  auto x = constant(s, v);
  auto y = slice(s, x, {7, 11, 2}, {250, 150, 5});
  Session sess(g, {.inter_op_threads = 4, .intra_op_threads = 4});
  Tensor out = sess.run(y);
  ASSERT_EQ(out.shape(), (Shape{250, 150, 5}));
  for (int64_t i = 0; i < 250; i += 13)
    for (int64_t j = 0; j < 150; j += 7)
      for (int64_t k = 0; k < 5; ++k) ASSERT_EQ(out.at<float>({i, j, k}), v.at<float>({i + 7, j + 11, k + 2}));
}

TEST(ArrayGrad, ConcatOffsetValuesAndErrors) {
  Graph g;
  Scope s(g);
  auto axis = constant(s, 1);
  auto offsets = concat_offset(
      s.with_op_name("co"), axis,
      {constant(s, Tensor::from_vector<int32_t>({2, 3, 5})), constant(s, Tensor::from_vector<int32_t>({2, 7, 5})),
       constant(s, Tensor::from_vector<int32_t>({2, 1, 5}))});
  ASSERT_EQ(offsets.size(), 3u);
  EXPECT_EQ(offsets[2].shape(), (Shape{3}));
  auto out = eval(offsets);
  expect_tensor_near<int32_t>(out[0], Shape{3}, {0, 0, 0});
  expect_tensor_near<int32_t>(out[1], Shape{3}, {0, 3, 0});
  expect_tensor_near<int32_t>(out[2], Shape{3}, {0, 10, 0});
  auto negative = concat_offset(
      s, constant(s, -2),
      {constant(s, Tensor::from_vector<int64_t>({4, 1})), constant(s, Tensor::from_vector<int64_t>({6, 1}))});
  expect_tensor_near<int64_t>(eval(negative[1]), Shape{2}, {4, 0});
  auto bad = concat_offset(
      s.with_op_name("bad"), axis,
      {constant(s, Tensor::from_vector<int32_t>({2, 3})), constant(s, Tensor::from_vector<int32_t>({4, 3}))});
  EXPECT_EQ(testing::error_text([&] { eval(bad[1]); }),
            "[ConcatOffset] bad: All dimensions except 1 must match. Input 1 has shape [4,3] and doesn't match input 0 "
            "with shape [2,3].");
  auto out_of_range =
      concat_offset(s.with_op_name("oor"), constant(s, 2), {constant(s, Tensor::from_vector<int32_t>({2, 3}))});
  EXPECT_EQ(testing::error_text([&] { eval(out_of_range[0]); }), "[ConcatOffset] oor: Concat dim is out of range: 2 vs. 2");
  EXPECT_EQ(testing::error_text([&] {
              concat_offset(
                  s.with_op_name("mixed"), axis,
                  {constant(s, Tensor::from_vector<int32_t>({2})), constant(s, Tensor::from_vector<int64_t>({2}))});
            }),
            "[ConcatOffset] mixed: shape 1 has dtype int64, but shape 0 has int32");
}

TEST(ArrayGrad, ReshapeToShapeOfTakesItsStaticShape) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 6});
  auto y = placeholder(s.with_op_name("y"), DType::kFloat32, Shape{-1, 2, 3});
  EXPECT_EQ(reshape(s, x, shape(s, y)).shape(), (Shape{-1, 2, 3}));
  auto z = placeholder(s.with_op_name("z"), DType::kFloat32, Shape{4, 5});
  auto w = constant(s, Tensor(DType::kFloat32, Shape{2, 6}));
  EXPECT_EQ(testing::error_text([&] { reshape(s.with_op_name("r"), w, shape(s, z)); }),
            "[Reshape] r: Input to reshape is a tensor with 12 values, but the requested shape has 20");
}

}  // namespace
}  // namespace stepscope
