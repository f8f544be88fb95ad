// Layers: nn::dense and nn::conv2d with their initializers.
#include "stepscope/train/layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

Variable variable_named(Graph& g, const std::string& name) {
  for (const Variable& v : global_variables(g))
    if (v.name() == name) return v;
  ADD_FAILURE() << "no variable " << name;
  return {};
}

struct Stats {
  double mean = 0, stddev = 0, max_abs = 0;
};
Stats stats_of(const Tensor& t) {
  Stats s;
  const auto v = t.to_vector<float>();
  for (float x : v) s.mean += x, s.max_abs = std::max<double>(s.max_abs, std::abs(x));
  s.mean /= static_cast<double>(v.size());
  for (float x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(s.stddev / static_cast<double>(v.size()));
  return s;
}

// ------------------------------------------------------------------------------ initializers

TEST(Initializers, FansAsTensorFlowComputesThem) {
  double in = 0, out = 0;
  initializers::compute_fans({3, 3, 16, 32}, &in, &out);
  EXPECT_EQ(in, 144);
  EXPECT_EQ(out, 288);
  initializers::compute_fans({784, 10}, &in, &out);
  EXPECT_EQ(in, 784);
  EXPECT_EQ(out, 10);
  initializers::compute_fans({7}, &in, &out);
  EXPECT_EQ(in, 7);
  EXPECT_EQ(out, 7);
}

TEST(Conv2DLayer, ShapesVariablesAndTheGlorotDefault) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 8, 8, 3});
  auto y = nn::conv2d(root.with_name_scope("conv1"), x, 16, {3, 3},
                      {.strides = {2, 2}, .padding = "SAME", .activation = nn::Activation::relu, .seed = 5});
  EXPECT_EQ(y.shape(), (Shape{-1, 4, 4, 16}));
  EXPECT_EQ(y.node->op_type(), "Relu");
  Variable k = variable_named(g, "conv1/kernel"), b = variable_named(g, "conv1/bias");
  EXPECT_EQ(k.shape(), (Shape{3, 3, 3, 16}));
  EXPECT_EQ(b.shape(), (Shape{16}));
  EXPECT_TRUE(k.trainable());
  Session sess(g);
  sess.run(global_variables_initializer(root));
  // Glorot uniform: U(+-sqrt(6 / (27 + 144))), stddev limit / sqrt(3).
  const double limit = std::sqrt(6.0 / (27 + 144));
  const Stats ks = stats_of(sess.run(k.value()));
  EXPECT_LE(ks.max_abs, limit);
  EXPECT_NEAR(ks.stddev, limit / std::sqrt(3.0), 0.15 * limit);
  EXPECT_EQ(stats_of(sess.run(b.value())).max_abs, 0);
  Tensor xv(DType::kFloat32, Shape{2, 8, 8, 3});
  for (int i = 0; i < xv.num_elements(); ++i) xv.data<float>()[i] = static_cast<float>(i % 7) - 3;
  EXPECT_EQ(sess.run(y, {{x, xv}}).shape(), (Shape{2, 4, 4, 16}));
}

TEST(Conv2DLayer, InitializersAreSeededAndHaveTheirDistributions) {
  auto build = [](Graph& g, initializers::Initializer kernel, initializers::Initializer bias) {
    Scope root(g);
    auto x = placeholder(root, DType::kFloat32, Shape{-1, 16, 16, 32});
    nn::conv2d(root.with_name_scope("c"), x, 64, {5, 5}, {.kernel_initializer = kernel, .bias_initializer = bias});
    Session sess(g);
    sess.run(global_variables_initializer(root));
    return std::pair{sess.run(variable_named(g, "c/kernel").value()), sess.run(variable_named(g, "c/bias").value())};
  };
  {
    // he_normal: truncated normal with stddev sqrt(2 / fan_in) after the truncation (fan_in 800).
    Graph g1, g2;
    auto [k1, b1] = build(g1, initializers::he_normal(3), initializers::constant(0.5));
    auto [k2, b2] = build(g2, initializers::he_normal(3), initializers::constant(0.5));
    EXPECT_EQ(k1.to_vector<float>(), k2.to_vector<float>());  // same seed, same values
    const Stats s = stats_of(k1);
    EXPECT_NEAR(s.stddev, std::sqrt(2.0 / 800), 0.03 * std::sqrt(2.0 / 800));
    EXPECT_LE(s.max_abs, 2 * std::sqrt(2.0 / 800) / 0.87962566103423978 + 1e-6);
    for (float v : b1.to_vector<float>()) EXPECT_EQ(v, 0.5f);
  }
  {
    Graph g1, g2;
    auto [k1, b1] = build(g1, initializers::truncated_normal(0.1, 0.0, 4), initializers::zeros());
    auto [k2, b2] = build(g2, initializers::truncated_normal(0.1, 0.0, 5), initializers::zeros());
    EXPECT_NE(k1.to_vector<float>(), k2.to_vector<float>());  // another seed, other values
    const Stats s = stats_of(k1);
    EXPECT_LE(s.max_abs, 0.2 + 1e-6);
    EXPECT_NEAR(s.stddev, 0.1 * 0.8796, 0.005);
  }
  {
    Graph g;
    auto [k, b] = build(g,
                        initializers::variance_scaling({.scale = 3.0,
                                                        .mode = initializers::Mode::fan_out,
                                                        .distribution = initializers::Distribution::uniform,
                                                        .seed = 1}),
                        initializers::zeros());
    const double limit = std::sqrt(3.0 * 3.0 / (25 * 64));
    const Stats s = stats_of(k);
    EXPECT_LE(s.max_abs, limit);
    EXPECT_NEAR(s.stddev, limit / std::sqrt(3.0), 0.05 * limit);
  }
}

TEST(Conv2DLayer, BadInputsAreInvalidArguments) {
  Graph g;
  Scope root(g);
  auto x3 = placeholder(root, DType::kFloat32, Shape{-1, 8, 8});
  EXPECT_THROW(nn::conv2d(root, x3, 4, {3, 3}), InvalidArgumentError);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 8, 8, 1});
  EXPECT_THROW(nn::conv2d(root, x, 0, {3, 3}), InvalidArgumentError);
  EXPECT_THROW(nn::conv2d(root, x, 4, {0, 3}), InvalidArgumentError);
}

TEST(DenseLayer, TakesInitializers) {
  Graph g;
  Scope root(g);
  auto x = constant<float>(root, {1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto y = nn::dense(root.with_name_scope("d"), x, 2, nn::Activation::none,
                     {.kernel_initializer = initializers::ones(), .bias_initializer = initializers::constant(0.25)});
  Session sess(g);
  sess.run(global_variables_initializer(root));
  EXPECT_EQ(sess.run(y).to_vector<float>(), (std::vector<float>{6.25f, 6.25f, 15.25f, 15.25f}));
}

}  // namespace
}  // namespace stepscope
