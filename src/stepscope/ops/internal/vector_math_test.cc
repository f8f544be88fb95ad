// vector_math against libm (in double, rounded: the correctly rounded float result), on a
// sweep of bit patterns and on the special values; and the ops that use it give the same bits
// whatever the intra-op thread count (a vectorised loop body and its scalar tail agree).
#include "stepscope/ops/internal/vector_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

namespace vm = vector_math;

// Distance in units in the last place; NaN only matches NaN.
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  const int64_t ia = std::bit_cast<int32_t>(a), ib = std::bit_cast<int32_t>(b);
  if ((ia < 0) != (ib < 0)) return INT64_MAX;
  return std::llabs(ia - ib);
}

template <typename F, typename G>
void expect_within_ulps(const char* name, F ours, G reference, int64_t max_ulps) {
  int64_t worst = 0;
  float worst_at = 0;
  // Every 4099th bit pattern (~1M floats of both signs, denormals, infinities and NaNs).
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    const int64_t d = ulps(ours(x), static_cast<float>(reference(static_cast<double>(x))));
    if (d > worst) worst = d, worst_at = x;
  }
  EXPECT_LE(worst, max_ulps) << name << " at x = " << worst_at << ": " << ours(worst_at) << " vs "
                             << static_cast<float>(reference(static_cast<double>(worst_at)));
}

TEST(VectorMath, WithinAnUlpOfLibmOverTheWholeRange) {
  expect_within_ulps(
      "exp", vm::exp, [](double x) { return std::exp(x); }, 1);
  expect_within_ulps(
      "log", vm::log, [](double x) { return std::log(x); }, 1);
  expect_within_ulps(
      "tanh", vm::tanh, [](double x) { return std::tanh(x); }, 1);
  // Four roundings in float (e, 1 + e, the division, e * r), as the scalar formula had.
  expect_within_ulps(
      "sigmoid", vm::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, 3);
}

TEST(VectorMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vm::exp(0.0f), 1.0f);
  EXPECT_EQ(vm::exp(inf), inf);
  EXPECT_EQ(vm::exp(-inf), 0.0f);
  EXPECT_EQ(vm::exp(88.8f), inf);
  EXPECT_EQ(vm::exp(-104.0f), 0.0f);
  EXPECT_GT(vm::exp(-100.0f), 0.0f);  // a denormal, not flushed
  EXPECT_TRUE(std::isnan(vm::exp(nan)));
  EXPECT_EQ(vm::log(1.0f), 0.0f);
  EXPECT_EQ(vm::log(0.0f), -inf);
  EXPECT_EQ(vm::log(-0.0f), -inf);
  EXPECT_EQ(vm::log(inf), inf);
  EXPECT_TRUE(std::isnan(vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vm::log(-inf)));
  EXPECT_TRUE(std::isnan(vm::log(nan)));
  EXPECT_EQ(vm::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(vm::tanh(-0.0f)));
  EXPECT_EQ(vm::tanh(inf), 1.0f);
  EXPECT_EQ(vm::tanh(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(vm::tanh(nan)));
  EXPECT_EQ(vm::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(vm::sigmoid(inf), 1.0f);
  EXPECT_EQ(vm::sigmoid(-inf), 0.0f);
  EXPECT_EQ(vm::sigmoid(-100.0f), std::exp(-100.0f) / (1 + std::exp(-100.0f)));
  EXPECT_TRUE(std::isnan(vm::sigmoid(nan)));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.num_elements() == b.num_elements() &&
         std::memcmp(a.data<float>(), b.data<float>(), a.num_elements() * sizeof(float)) == 0;
}

// 100,003 elements: parallel_for cuts them at different places for each thread count, so
// some elements move between a vectorised body and a scalar tail.
TEST(VectorMath, OpsGiveTheSameBitsForAnyIntraOpThreadCount) {
  Graph g;
  Scope s(g);
  const int64_t n = 100003;
  Tensor xv(DType::kFloat32, Shape{n});
  float* p = xv.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 4001) * 0.01f - 20.0f;
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{n});
  std::vector<Output> ys = {exp(s, x), log(s, square(s, x)), tanh(s, x), sigmoid(s, x)};
  std::vector<Tensor> first;
  for (int threads : {1, 2, 3, 4}) {
    Session sess(g, {.inter_op_threads = 1, .intra_op_threads = threads});
    std::vector<Tensor> got = sess.run({{x, xv}}, ys);
    if (threads == 1) {
      first = got;
      continue;
    }
    for (size_t i = 0; i < ys.size(); ++i)
      EXPECT_TRUE(same_bits(got[i], first[i])) << ys[i].node->name() << " with " << threads << " threads";
  }
  // And each element is what the scalar function gives.
  for (int64_t i = 0; i < n; i += 997) EXPECT_EQ(first[2].data<float>()[i], vm::tanh(p[i]));
}

}  // namespace
}  // namespace stepscope
