// Layers: nn::dense and nn::conv2d with their initializers, nn::batch_normalization (moving
// statistics converge to the data's, inference uses them, the update ops and minimize), and
// nn::dropout.
#include "stepscope/train/layers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/optimizer.h"

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

// ------------------------------------------------------------------------------ batch norm

// Batches of [64, 3] drawn from N(means, stddevs) per column.
struct Data {
  std::vector<double> means = {1.0, -2.0, 3.0}, stddevs = {2.0, 0.5, 3.0};
  std::mt19937 rng{17};
  Tensor batch(int64_t rows = 64) {
    Tensor t(DType::kFloat32, Shape{rows, 3});
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < 3; ++j)
        t.data<float>()[r * 3 + j] = static_cast<float>(std::normal_distribution<double>(means[j], stddevs[j])(rng));
    return t;
  }
};

TEST(BatchNormalization, MovingStatisticsConvergeAndInferenceUsesThem) {
  Data data;
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 3});
  auto y = nn::batch_normalization(root.with_name_scope("bn"), x, {.training = true, .momentum = 0.9});
  const auto updates = get_update_ops(g);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0]->op_type(), "AssignSub");
  Variable mm = variable_named(g, "bn/moving_mean"), mv = variable_named(g, "bn/moving_variance");
  EXPECT_FALSE(mm.trainable());
  EXPECT_FALSE(mv.trainable());
  EXPECT_TRUE(variable_named(g, "bn/gamma").trainable());
  EXPECT_TRUE(variable_named(g, "bn/beta").trainable());
  Session sess(g);
  sess.run(global_variables_initializer(root));
  // The first step: moving = moving * 0.9 + batch * 0.1, with the batch's unbiased variance.
  {
    const Tensor b = data.batch();
    std::vector<Output> fetches = {y, Output{y.node, 1}, Output{y.node, 2}};
    auto out = sess.run({{x, b}}, fetches, updates);
    auto m = sess.run(mm.value()).to_vector<float>(), v = sess.run(mv.value()).to_vector<float>();
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(m[j], 0.1 * out[1].data<float>()[j], 1e-5);
      EXPECT_NEAR(v[j], 0.9 + 0.1 * out[2].data<float>()[j], 1e-5);
    }
    // Training output: normalised by the batch statistics (gamma 1, beta 0): column mean 0.
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int r = 0; r < 64; ++r) s += out[0].data<float>()[r * 3 + j];
      EXPECT_NEAR(s / 64, 0, 1e-4);
    }
  }
  for (int step = 0; step < 300; ++step) sess.run({{x, data.batch()}}, {}, updates);
  auto m = sess.run(mm.value()).to_vector<float>(), v = sess.run(mv.value()).to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    SCOPED_TRACE(j);
    // An average over ~10 batches of 64: within a few standard errors.
    EXPECT_NEAR(m[j], data.means[j], 0.1 * data.stddevs[j]);
    EXPECT_NEAR(v[j], data.stddevs[j] * data.stddevs[j], 0.15 * data.stddevs[j] * data.stddevs[j]);
  }

  // Inference (an evaluation graph, as TensorFlow's: same variable names, the trained moving
  // statistics put in): y = (x - moving_mean) / sqrt(moving_variance + eps) * gamma + beta.
  Graph eval_g;
  Scope eval_root(eval_g);
  auto ex = placeholder(eval_root, DType::kFloat32, Shape{-1, 3});
  auto ey = nn::batch_normalization(eval_root.with_name_scope("bn"), ex, {.training = false});
  EXPECT_TRUE(get_update_ops(eval_g).empty());
  Session eval_sess(eval_g);
  eval_sess.run(global_variables_initializer(eval_root));
  Variable emm = variable_named(eval_g, "bn/moving_mean"), emv = variable_named(eval_g, "bn/moving_variance");
  eval_sess.run(assign(eval_root, emm.value(), constant<float>(eval_root, m, Shape{3})).node);
  eval_sess.run(assign(eval_root, emv.value(), constant<float>(eval_root, v, Shape{3})).node);
  const Tensor b = data.batch(5);
  const auto out = eval_sess.run(ey, {{ex, b}}).to_vector<float>();
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(out[r * 3 + j], (b.data<float>()[r * 3 + j] - m[j]) / std::sqrt(v[j] + 1e-3), 1e-4);
}

TEST(BatchNormalization, MinimizeUnderTheUpdateOpsRunsThem) {
  Data data;
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 3});
  auto h = nn::dense(root.with_name_scope("dense"), x, 4, nn::Activation::none, {.seed = 1});
  h = nn::batch_normalization(root.with_name_scope("bn"), h, {.training = true, .center = false});
  auto loss = reduce_mean(root, square(root, h));
  auto step = get_or_create_global_step(root);
  // TensorFlow's pattern: with tf.control_dependencies(update_ops): train = opt.minimize(loss).
  Node* train = GradientDescentOptimizer(0.1).minimize(root.with_control_dependencies(get_update_ops(g)), loss, step);
  Variable mm = variable_named(g, "bn/moving_mean");
  EXPECT_EQ(trainable_variables(g).size(), 3u);  // dense kernel and bias, gamma (no beta)
  Session sess(g);
  sess.run(global_variables_initializer(root));
  sess.run(train, {{x, data.batch()}});
  const auto m = sess.run(mm.value()).to_vector<float>();
  EXPECT_NE(m, std::vector<float>(4, 0.f));
  EXPECT_EQ(sess.run(step.value()).scalar_value<int64_t>(), 1);
}

TEST(BatchNormalization, NhwcAndBadInputs) {
  Graph g;
  Scope root(g);
  auto x = placeholder(root, DType::kFloat32, Shape{-1, 4, 4, 2});
  auto y = nn::batch_normalization(root, x, {.training = true});
  EXPECT_EQ(y.shape(), (Shape{-1, 4, 4, 2}));
  EXPECT_EQ(y.node->op_type(), "FusedBatchNorm");
  EXPECT_THROW(nn::batch_normalization(root, placeholder(root, DType::kFloat32, Shape{-1, 4, 2})),
               InvalidArgumentError);
  EXPECT_THROW(nn::batch_normalization(root, x, {.momentum = 1.5}), InvalidArgumentError);
}

// ------------------------------------------------------------------------------ dropout

TEST(DropoutLayer, TrainingDropsInferenceIsIdentityBadRatesThrow) {
  Graph g;
  Scope root(g);
  auto x = constant<float>(root, std::vector<float>(1000, 1.f), Shape{10, 100});
  auto y = nn::dropout(root, x, 0.25, {.seed = 3});
  EXPECT_EQ(y.node->op_type(), "Dropout");
  EXPECT_EQ(nn::dropout(root, x, 0.25, {.training = false}), x);
  EXPECT_THROW(nn::dropout(root, x, 1.0), InvalidArgumentError);
  EXPECT_THROW(nn::dropout(root, x, -0.5, {.training = false}), InvalidArgumentError);
  Session sess(g);
  int kept = 0;
  for (float v : sess.run(y).to_vector<float>()) kept += v != 0;
  EXPECT_NEAR(kept / 1000.0, 0.75, 0.05);
}

}  // namespace
}  // namespace stepscope
