#include "stepscope/ops/random_ops.h"

#include <cmath>
#include <string>
#include <vector>

#include "stepscope/autodiff/gradients.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/philox.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/testing/gradient_checker.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

struct Moments {
  double mean = 0, stddev = 0, min = INFINITY, max = -INFINITY;
};

template <typename T>
Moments moments(const Tensor& t) {
  Moments m;
  double sum = 0, sq = 0;
  for (T v : t.flat<T>()) {
    sum += v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  const double n = static_cast<double>(t.num_elements());
  m.mean = sum / n;
  for (T v : t.flat<T>()) sq += (v - m.mean) * (v - m.mean);
  m.stddev = std::sqrt(sq / n);
  return m;
}

TEST(Philox, MatchesTheRandom123KnownAnswers) {
  using philox::philox4x32_10;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (philox::Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (philox::Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (philox::Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, StreamCarriesIntoTheHighHalfOfTheCounter) {
  philox::Stream s(1, 0);
  s.base[0] = s.base[1] = 0xffffffff;
  EXPECT_EQ(s.block(1), philox::philox4x32_10({0, 0, 1, 0}, {1, 0}));
}

TEST(Philox, BatchedGenerationMatchesBlockByBlock) {
  // Low counter words near their wrap points, so batches straddle the carries.
  for (uint32_t low0 : {0u, 0xfffffff0u, 0xfffffffcu}) {
    for (uint32_t low1 : {0u, 0xffffffffu}) {
      philox::Stream s(0x1234567890abcdefull, 0xfedcba9876543210ull);
      s.base[0] = low0;
      s.base[1] = low1;
      for (uint64_t first : {0ull, 3ull, 8ull}) {
        std::vector<philox::Block> batched(37);
        philox::generate_blocks(s, first, 37, batched.data());
        for (int i = 0; i < 37; ++i)
          ASSERT_EQ(batched[i], s.block(first + i)) << low0 << " " << low1 << " " << first << " " << i;
      }
    }
  }
}

TEST(Philox, UniformConversionsStayInUnitInterval) {
  EXPECT_EQ(philox::uniform_float(0), 0.0f);
  EXPECT_LT(philox::uniform_float(0xffffffff), 1.0f);
  EXPECT_EQ(philox::uniform_double(0, 0), 0.0);
  EXPECT_LT(philox::uniform_double(0xffffffff, 0xffffffff), 1.0);
}

TEST(RandomUniform, ShapeDtypeAndRange) {
  Graph g;
  Scope s(g);
  auto f = random_uniform(s, {100, 1000}, DType::kFloat32, 7);
  auto d = random_uniform(s, {100000}, DType::kFloat64, 7);
  auto r = random_uniform(s, {100000}, -2.0, 3.0, DType::kFloat32, 7);
  EXPECT_EQ(f.shape(), (Shape{100, 1000}));
  EXPECT_EQ(f.node->op_type(), "RandomUniform");
  EXPECT_TRUE(f.node->op().stateful);
  EXPECT_EQ(f.node->input(0).node->name(), "RandomUniform/shape");
  auto out = testing::eval({f, d, r});
  Moments mf = moments<float>(out[0]), md = moments<double>(out[1]), mr = moments<float>(out[2]);
  EXPECT_GE(mf.min, 0.0);
  EXPECT_LT(mf.max, 1.0);
  EXPECT_NEAR(mf.mean, 0.5, 0.01);
  EXPECT_NEAR(mf.stddev, std::sqrt(1.0 / 12), 0.01);
  EXPECT_GE(md.min, 0.0);
  EXPECT_LT(md.max, 1.0);
  EXPECT_NEAR(md.mean, 0.5, 0.01);
  EXPECT_NEAR(md.stddev, std::sqrt(1.0 / 12), 0.01);
  EXPECT_GE(mr.min, -2.0);
  EXPECT_LT(mr.max, 3.0);
  EXPECT_NEAR(mr.mean, 0.5, 0.05);
  EXPECT_NEAR(mr.stddev, 5 * std::sqrt(1.0 / 12), 0.05);
}

TEST(RandomNormal, MeanAndStddevOf100kSamples) {
  Graph g;
  Scope s(g);
  auto std_f = random_normal(s, {100000}, 0.0, 1.0, DType::kFloat32, 1, 2);
  auto f = random_normal(s, {100000}, 3.0, 2.0, DType::kFloat32, 1, 3);
  auto d = random_normal(s, {100000}, -1.0, 0.5, DType::kFloat64, 1, 4);
  auto out = testing::eval({std_f, f, d});
  Moments m0 = moments<float>(out[0]), m1 = moments<float>(out[1]), m2 = moments<double>(out[2]);
  EXPECT_NEAR(m0.mean, 0.0, 0.02);
  EXPECT_NEAR(m0.stddev, 1.0, 0.02);
  EXPECT_GT(m0.max, 3.5);  // the tails are there
  EXPECT_LT(m0.min, -3.5);
  EXPECT_NEAR(m1.mean, 3.0, 0.04);
  EXPECT_NEAR(m1.stddev, 2.0, 0.04);
  EXPECT_NEAR(m2.mean, -1.0, 0.01);
  EXPECT_NEAR(m2.stddev, 0.5, 0.01);
}

TEST(TruncatedNormal, StaysWithinTwoStddevs) {
  Graph g;
  Scope s(g);
  auto f = truncated_normal(s, {100000}, 1.0, 3.0, DType::kFloat32, 5);
  auto d = truncated_normal(s, {333, 301}, 0.0, 1.0, DType::kFloat64, 5);
  auto out = testing::eval({f, d});
  Moments mf = moments<float>(out[0]), md = moments<double>(out[1]);
  EXPECT_GE(mf.min, 1.0 - 6.0);
  EXPECT_LE(mf.max, 1.0 + 6.0);
  EXPECT_NEAR(mf.mean, 1.0, 0.05);
  // The standard deviation of a standard normal truncated to [-2, 2] is 0.8796.
  EXPECT_NEAR(mf.stddev, 3.0 * 0.8796, 0.05);
  EXPECT_GE(md.min, -2.0);
  EXPECT_LE(md.max, 2.0);
  EXPECT_NEAR(md.stddev, 0.8796, 0.02);
  EXPECT_GT(md.max, 1.99);  // and it reaches out to the cut
}

// Three runs of each op in one session.
std::vector<std::vector<Tensor>> three_runs(Graph& g, const std::vector<Output>& ops, int threads) {
  Session session(g, {.inter_op_threads = threads});
  std::vector<std::vector<Tensor>> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(session.run(ops));
  return runs;
}

std::vector<Output> one_of_each(const Scope& s, int64_t seed, int64_t seed2) {
  return {random_uniform(s, {70001}, DType::kFloat32, seed, seed2),
          random_uniform(s, {3, 5}, DType::kFloat64, seed, seed2),
          random_normal(s, {50001}, 0.0, 1.0, DType::kFloat32, seed, seed2),
          random_normal(s, {7}, 0.0, 1.0, DType::kFloat64, seed, seed2),
          truncated_normal(s, {60003}, 0.0, 1.0, DType::kFloat32, seed, seed2),
          truncated_normal(s, {9}, 0.0, 1.0, DType::kFloat64, seed, seed2)};
}

TEST(RandomOps, SameSeedSameSequenceInEverySessionAndThreadCount) {
  Graph g;
  Scope s(g);
  auto ops = one_of_each(s, 42, 0);
  auto a = three_runs(g, ops, 2);
  auto b = three_runs(g, ops, 2);
  auto single = three_runs(g, ops, 1);
  auto many = three_runs(g, ops, 4);
  for (int run = 0; run < 3; ++run) {
    for (size_t op = 0; op < ops.size(); ++op) {
      SCOPED_TRACE("run " + std::to_string(run) + " op " + ops[op].name());
      EXPECT_TRUE(tensors_equal(a[run][op], b[run][op]));
      EXPECT_TRUE(tensors_equal(a[run][op], single[run][op]));
      EXPECT_TRUE(tensors_equal(a[run][op], many[run][op]));
      if (run > 0) {
        EXPECT_FALSE(tensors_equal(a[run][op], a[run - 1][op]));
      }
    }
  }
  // The same seeds in another graph give the same values too (they depend on attrs only).
  Graph g2;
  Scope s2(g2);
  Output unrelated = random_normal(s2, {10});  // other nodes do not shift the stream
  (void)unrelated;
  auto ops2 = one_of_each(s2, 42, 0);
  auto c = three_runs(g2, ops2, 2);
  for (size_t op = 0; op < ops.size(); ++op) EXPECT_TRUE(tensors_equal(a[2][op], c[2][op])) << op;
}

TEST(RandomOps, DifferentSeedsDifferentValues) {
  Graph g;
  Scope s(g);
  auto x = random_uniform(s, {16}, DType::kFloat32, 1, 0);
  auto y = random_uniform(s, {16}, DType::kFloat32, 2, 0);
  auto z = random_uniform(s, {16}, DType::kFloat32, 1, 1);
  auto out = testing::eval({x, y, z});
  EXPECT_FALSE(tensors_equal(out[0], out[1]));
  EXPECT_FALSE(tensors_equal(out[0], out[2]));
}

TEST(RandomOps, ZeroSeedsPickFreshSeedsAtGraphConstruction) {
  Graph g;
  Scope s(g);
  auto x = random_uniform(s, {8});
  auto y = random_uniform(s, {8});
  EXPECT_NE(x.node->attrs().get<int64_t>("seed"), 0);
  EXPECT_NE(x.node->attrs().get<int64_t>("seed2"), 0);
  EXPECT_NE(x.node->attrs().get<int64_t>("seed"), y.node->attrs().get<int64_t>("seed"));
  auto out = testing::eval({x, y});
  EXPECT_FALSE(tensors_equal(out[0], out[1]));
  // Once drawn, the seeds are fixed: two sessions over this graph agree.
  EXPECT_TRUE(tensors_equal(testing::eval(x), testing::eval(x)));
}

TEST(RandomOps, ShapeErrorsAndRunTimeDims) {
  Graph g;
  Scope s(g);
  try {
    random_uniform(s, {2, -1});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "[RandomUniform] RandomUniform: shape dimensions must be >= 0, got [2,-1]");
  }
  try {
    random_normal(s, {2}, 0.0, 1.0, DType::kInt32);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "[RandomStandardNormal] RandomStandardNormal: dtype must be float32 or float64, got int32");
  }
  auto empty = random_normal(s, {0, 3});
  EXPECT_EQ(testing::eval(empty).shape(), (Shape{0, 3}));
}

// ------------------------------------------------------------------------------ Dropout

TEST(Dropout, KeepsOneMinusRateScaledSoTheExpectedValueIsPreserved) {
  Graph g;
  Scope s(g);
  const int64_t n = 200001;
  auto x = constant<float>(s, std::vector<float>(n, 2.f), Shape{n});
  auto y = dropout(s, x, 0.3, 7, 0);
  EXPECT_EQ(y.shape(), (Shape{n}));
  auto out = testing::eval({y, Output{y.node, 1}}, {}, 4);
  int64_t kept = 0;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = out[0].data<float>()[i], m = out[1].data<float>()[i];
    ASSERT_TRUE(v == 0.f || v == 2.f / 0.7f) << v;
    ASSERT_EQ(v, 2.f * m);
    kept += v != 0.f;
    sum += v;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.005);
  EXPECT_NEAR(sum / n, 2.0, 0.02);
}

TEST(Dropout, RateZeroIsTheIdentity) {
  Graph g;
  Scope s(g);
  const Tensor xv = testing::random_tensor(Shape{3, 7}, 5);
  auto y = dropout(s, constant(s, xv), 0.0, 1, 2);
  const Tensor out = testing::eval(y);
  for (int i = 0; i < 21; ++i) EXPECT_EQ(out.data<double>()[i], xv.data<double>()[i]);
}

TEST(Dropout, BadRateIsAnInvalidArgumentNamingTheNode) {
  for (double rate : {-0.1, 1.0, 1.5}) {
    Graph g;
    Scope s(g);
    auto x = placeholder(s, DType::kFloat32, Shape{4});
    try {
      dropout(s.with_op_name("drop"), x, rate, 1);
      ADD_FAILURE() << "expected InvalidArgumentError for rate " << rate;
    } catch (const InvalidArgumentError& e) {
      EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("[Dropout] drop: rate must be"));
      EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("[0, 1)"));
    }
  }
}

TEST(Dropout, SameSeedSameMasksInEverySessionNewMaskEveryStep) {
  auto masks = [](int threads) {
    Graph g;
    Scope s(g);
    auto y = dropout(s, constant<float>(s, std::vector<float>(1000, 1.f), Shape{10, 100}), 0.5, 42, 3);
    Session session(g, {.inter_op_threads = threads});
    std::vector<std::vector<float>> runs;
    for (int i = 0; i < 2; ++i) runs.push_back(session.run(y).to_vector<float>());
    return runs;
  };
  const auto a = masks(1), b = masks(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
}

TEST(Dropout, TheGradientUsesTheStepsMask) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat64, Shape{500});
  auto y = dropout(s, x, 0.4, 9, 0);
  auto w = placeholder(s, DType::kFloat64, Shape{500});
  auto dx = gradients(s, {mul(s, y, w)}, {x})[0];
  const Tensor xv = testing::random_tensor(Shape{500}, 1, -1, 1, 0.1), wv = testing::random_tensor(Shape{500}, 2);
  Session session(g);
  for (int step = 0; step < 3; ++step) {
    auto out = session.run({{x, xv}, {w, wv}}, {y, dx});
    int64_t dropped = 0;
    for (int i = 0; i < 500; ++i) {
      const double yi = out[0].data<double>()[i], di = out[1].data<double>()[i];
      const double mask = yi == 0 ? 0 : 1 / 0.6;
      if (yi == 0) ++dropped;
      EXPECT_NEAR(yi, xv.data<double>()[i] * mask, 1e-12);
      EXPECT_NEAR(di, wv.data<double>()[i] * mask, 1e-12) << "at " << i;
    }
    EXPECT_GT(dropped, 100);
    EXPECT_LT(dropped, 300);
  }
}

}  // namespace
}  // namespace stepscope
