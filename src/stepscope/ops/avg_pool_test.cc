// AvgPool and AvgPoolGrad (conv family): hand-computed values (VALID and SAME, where SAME divides
// by the count of in-image elements, as TF), channels and batches kept apart, shape rule errors
// and costs. Their gradients are checked numerically by registry_test's table.
#include <gtest/gtest.h>

#include <vector>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/conv_ops.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_build_error;
using testing::expect_tensor_near;
using testing::flops_of;

std::vector<float> iota(int n, float start = 1) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// ------------------------------------------------------------------------------ AvgPool

TEST(AvgPool, HandComputedValidAndSame) {
  Graph g;
  Scope s(g);
  auto x16 = constant<float>(s, iota(16), Shape{1, 4, 4, 1});
  auto x9 = constant<float>(s, iota(9), Shape{1, 3, 3, 1});
  auto out =
      eval({avg_pool(s, x16, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"), avg_pool(s, x9, {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME"),
            avg_pool(s, x16, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")});
  expect_tensor_near<float>(out[0], Shape{1, 2, 2, 1}, {3.5, 5.5, 11.5, 13.5});
  // SAME divides by the in-image count: the right column averages 2 values, the corner 1.
  expect_tensor_near<float>(out[1], Shape{1, 3, 3, 1}, {3, 4, 4.5, 6, 7, 7.5, 7.5, 8.5, 9});
  // TensorFlow: tf.nn.avg_pool(iota 4x4, 3x3, stride 2, SAME) = [[6, 7.5], [12, 13.5]].
  expect_tensor_near<float>(out[2], Shape{1, 2, 2, 1}, {6, 7.5, 12, 13.5});
}

TEST(AvgPool, ChannelsAndBatchesAreIndependent) {
  Graph g;
  Scope s(g);
  // Two images, two channels: channel 1 is channel 0 times -10, image 1 is image 0 plus 100.
  std::vector<double> v;
  for (int n = 0; n < 2; ++n)
    for (int i = 1; i <= 9; ++i) {
      v.push_back(i + 100.0 * n);
      v.push_back(-10.0 * i + 100.0 * n);
    }
  auto y = avg_pool(s, constant<double>(s, v, Shape{2, 3, 3, 2}), {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME");
  const std::vector<double> base = {3, 4.5, 7.5, 9};
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (double b : base) {
      want.push_back(b + 100.0 * n);
      want.push_back(-10 * b + 100.0 * n);
    }
  expect_tensor_near<double>(eval(y), Shape{2, 2, 2, 2}, want, 1e-12);
}

TEST(AvgPoolGrad, HandComputed) {
  Graph g;
  Scope s(g);
  // [a, b, c], 1x2 windows, stride 1, SAME: windows (a, b), (b, c), (c) with counts 2, 2, 1.
  auto dx = avg_pool_grad(s, constant<int32_t>(s, {1, 1, 3, 1}, Shape{4}),
                          constant<float>(s, {1, 2, 3}, Shape{1, 1, 3, 1}), {1, 1, 2, 1}, {1, 1, 1, 1}, "SAME");
  EXPECT_EQ(dx.shape(), (Shape{1, 1, 3, 1}));
  // 2x2 stride 2 VALID on 4x4: each gradient value spread as a quarter over its window.
  auto dx2 = avg_pool_grad(s, constant<int64_t>(s, {1, 4, 4, 1}, Shape{4}),
                           constant<double>(s, {4, 8, 12, 16}, Shape{1, 2, 2, 1}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  auto out = eval({dx, dx2});
  expect_tensor_near<float>(out[0], Shape{1, 1, 3, 1}, {0.5, 1.5, 4});
  expect_tensor_near<double>(out[1], Shape{1, 4, 4, 1}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(AvgPool, ShapeErrorsAndFlops) {
  expect_build_error(
      [](const Scope& s) {
        avg_pool(s.with_op_name("pool"), placeholder(s, DType::kFloat32, Shape{1, 4, 4}), {1, 2, 2, 1}, {1, 2, 2, 1},
                 "VALID");
      },
      "[AvgPool] pool: input must be 4-dimensional: [1,4,4]");
  expect_build_error(
      [](const Scope& s) {
        avg_pool(s.with_op_name("pool"), placeholder(s, DType::kFloat32, Shape{1, 4, 4, 1}), {1, 2, 2, 1}, {1, 2, 2, 1},
                 "FULL");
      },
      "[AvgPool] pool: Value for attr 'padding' of \"FULL\" is not in the list of allowed values: \"SAME\", "
      "\"VALID\"");
  expect_build_error(
      [](const Scope& s) {
        avg_pool_grad(s.with_op_name("grad"), constant<int32_t>(s, {1, 4, 4, 1}, Shape{4}),
                      placeholder(s, DType::kFloat32, Shape{1, 3, 3, 1}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
      },
      "[AvgPoolGrad] grad: grad must have shape [1,2,2,1] (pooled from orig_input [1,4,4,1]), got [1,3,3,1]");
  Graph g;
  Scope s(g);
  auto y = avg_pool(s, placeholder(s, DType::kFloat32, Shape{2, 4, 4, 3}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  EXPECT_EQ(flops_of(y), 24 * 5);
  auto dx = avg_pool_grad(s, constant<int32_t>(s, {2, 4, 4, 3}, Shape{4}), y, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  EXPECT_EQ(flops_of(dx), 2 * 24 * 4);
}

}  // namespace
}  // namespace stepscope
