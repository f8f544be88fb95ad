// LSTM and GRU cells unrolled by static_rnn: the forward values against a plain reimplementation
// of TF's equations, the gradients through every step against central differences (inputs,
// initial state and every variable), variable sharing across steps, and the errors.
#include "stepscope/train/rnn.h"

#include <gtest/gtest.h>

#include <cmath>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/gradient_checker.h"

namespace stepscope {
namespace {

using testing::expect_gradient_matches;
using testing::random_tensor;

constexpr int64_t kBatch = 2, kDepth = 3, kUnits = 4, kSteps = 3;

double sigm(double x) { return 1 / (1 + std::exp(-x)); }

// [B, D] x [D+H ...] helpers on row-major double vectors.
std::vector<double> affine(const std::vector<double>& xh, int64_t in, const std::vector<double>& w,
                           const std::vector<double>& b, int64_t out) {
  std::vector<double> y(kBatch * out);
  for (int64_t r = 0; r < kBatch; ++r)
    for (int64_t c = 0; c < out; ++c) {
      double acc = b[c];
      for (int64_t k = 0; k < in; ++k) acc += xh[r * in + k] * w[k * out + c];
      y[r * out + c] = acc;
    }
  return y;
}

std::vector<double> join(const std::vector<double>& x, int64_t dx, const std::vector<double>& h, int64_t dh) {
  std::vector<double> xh;
  for (int64_t r = 0; r < kBatch; ++r) {
    xh.insert(xh.end(), x.begin() + r * dx, x.begin() + (r + 1) * dx);
    xh.insert(xh.end(), h.begin() + r * dh, h.begin() + (r + 1) * dh);
  }
  return xh;
}

struct Unrolled {
  Graph g;
  std::vector<Output> inputs;
  std::vector<Output> outputs;
  nn::RNNState state;
};

template <typename Cell>
void unroll(Unrolled& u, Cell& cell) {
  Scope root(u.g);
  for (int64_t t = 0; t < kSteps; ++t)
    u.inputs.push_back(placeholder(root.with_op_name("x" + std::to_string(t)), DType::kFloat64, Shape{-1, kDepth}));
  auto [outputs, state] = nn::static_rnn(root.with_name_scope("rnn"), cell, u.inputs);
  u.outputs = outputs;
  u.state = state;
}

FeedList input_feeds(const Unrolled& u) {
  FeedList feeds;
  for (int64_t t = 0; t < kSteps; ++t)
    feeds.emplace_back(u.inputs[t], random_tensor(Shape{kBatch, kDepth}, 10 + static_cast<unsigned>(t), -1, 1));
  return feeds;
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(StaticRnn, LstmMatchesTfEquations) {
  nn::BasicLSTMCell cell(kUnits, {.forget_bias = 1.0f, .seed = 3});
  Unrolled u;
  unroll(u, cell);
  ASSERT_EQ(cell.variables().size(), 2u) << "one kernel and one bias, shared by every step";
  EXPECT_EQ(cell.variables()[0].name(), "rnn/basic_lstm_cell/kernel");
  EXPECT_EQ(cell.variables()[0].shape(), (Shape{kDepth + kUnits, 4 * kUnits}));
  Scope root(u.g);
  // A bias that is not zero, so its use is checked too.
  Output set_bias =
      assign(root, cell.variables()[1].value(), constant(root, random_tensor(Shape{4 * kUnits}, 5, -0.5, 0.5)));
  Session sess(u.g);
  sess.run(global_variables_initializer(root));
  sess.run(set_bias);
  const FeedList feeds = input_feeds(u);
  std::vector<Output> fetches = u.outputs;
  fetches.push_back(u.state[0]);
  fetches.push_back(cell.variables()[0].value());
  fetches.push_back(cell.variables()[1].value());
  const auto got = sess.run(feeds, fetches);
  const auto w = values(got[kSteps + 1]);
  const auto b = values(got[kSteps + 2]);
  std::vector<double> c(kBatch * kUnits, 0.0), h(kBatch * kUnits, 0.0);
  for (int64_t t = 0; t < kSteps; ++t) {
    const auto gates = affine(join(values(feeds[t].second), kDepth, h, kUnits), kDepth + kUnits, w, b, 4 * kUnits);
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t k = 0; k < kUnits; ++k) {
        const double* row = &gates[r * 4 * kUnits];
        double& cc = c[r * kUnits + k];
        cc = cc * sigm(row[2 * kUnits + k] + 1.0) + sigm(row[k]) * std::tanh(row[kUnits + k]);
        h[r * kUnits + k] = std::tanh(cc) * sigm(row[3 * kUnits + k]);
      }
    const auto out = values(got[t]);
    for (size_t k = 0; k < h.size(); ++k) EXPECT_NEAR(out[k], h[k], 1e-12) << "step " << t << " element " << k;
  }
  const auto final_c = values(got[kSteps]);
  for (size_t k = 0; k < c.size(); ++k) EXPECT_NEAR(final_c[k], c[k], 1e-12);
}

TEST(StaticRnn, GruMatchesTfEquations) {
  nn::GRUCell cell(kUnits, 4);
  Unrolled u;
  unroll(u, cell);
  ASSERT_EQ(cell.variables().size(), 4u);
  EXPECT_EQ(cell.variables()[1].name(), "rnn/gru_cell/gates/bias");
  Scope root(u.g);
  Session sess(u.g);
  sess.run(global_variables_initializer(root));
  const FeedList feeds = input_feeds(u);
  std::vector<Output> fetches = u.outputs;
  for (const Variable& v : cell.variables()) fetches.push_back(v.value());
  const auto got = sess.run(feeds, fetches);
  const auto wg = values(got[kSteps]), bg = values(got[kSteps + 1]);
  const auto wc = values(got[kSteps + 2]), bc = values(got[kSteps + 3]);
  EXPECT_EQ(bg, std::vector<double>(2 * kUnits, 1.0)) << "TF initialises the gate bias to 1";
  std::vector<double> h(kBatch * kUnits, 0.0);
  for (int64_t t = 0; t < kSteps; ++t) {
    const auto x = values(feeds[t].second);
    auto gates = affine(join(x, kDepth, h, kUnits), kDepth + kUnits, wg, bg, 2 * kUnits);
    for (double& v : gates) v = sigm(v);
    std::vector<double> rh(h.size());
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t k = 0; k < kUnits; ++k) rh[r * kUnits + k] = gates[r * 2 * kUnits + k] * h[r * kUnits + k];
    const auto cand = affine(join(x, kDepth, rh, kUnits), kDepth + kUnits, wc, bc, kUnits);
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t k = 0; k < kUnits; ++k) {
        const double uu = gates[r * 2 * kUnits + kUnits + k];
        double& hh = h[r * kUnits + k];
        hh = uu * hh + (1 - uu) * std::tanh(cand[r * kUnits + k]);
      }
    const auto out = values(got[t]);
    for (size_t k = 0; k < h.size(); ++k) EXPECT_NEAR(out[k], h[k], 1e-12) << "step " << t << " element " << k;
  }
}

// A scalar that depends on every output and the final state, weighted so no symmetry hides a
// wrong gradient.
Output weighted_sum(const Scope& root, const Unrolled& u) {
  Output total;
  std::vector<Output> parts = u.outputs;
  parts.insert(parts.end(), u.state.begin(), u.state.end());
  unsigned seed = 100;
  for (const Output& p : parts) {
    Output term = reduce_sum(root, mul(root, p, constant(root, random_tensor(Shape{kBatch, kUnits}, seed++, -1, 1))));
    total = total ? add(root, total, term) : term;
  }
  return total;
}

template <typename Cell>
void check_gradients(Cell& cell) {
  Unrolled u;
  unroll(u, cell);
  Scope root(u.g);
  const Output y = weighted_sum(root, u);
  FeedList feeds = input_feeds(u);
  // Every variable, fed with values of its shape (the gradient flows through every step's use).
  unsigned seed = 50;
  for (const Variable& v : cell.variables()) feeds.emplace_back(v.value(), random_tensor(v.shape(), seed++, -0.8, 0.8));
  auto others = [&](Output x) {
    FeedList rest;
    for (const auto& f : feeds)
      if (!(f.first == x)) rest.push_back(f);
    return rest;
  };
  for (int64_t t = 0; t < kSteps; ++t)
    expect_gradient_matches(u.inputs[t], feeds[t].second, y, others(u.inputs[t]), {.expect_nonzero = true});
  for (const Variable& v : cell.variables()) {
    SCOPED_TRACE(v.name());
    const Tensor value = random_tensor(v.shape(), seed++, -0.8, 0.8);
    expect_gradient_matches(v.value(), value, y, others(v.value()), {.expect_nonzero = true});
  }
}

TEST(StaticRnn, LstmGradientsMatchNumericalOnes) {
  nn::BasicLSTMCell cell(kUnits, {.seed = 7});
  check_gradients(cell);
}

TEST(StaticRnn, GruGradientsMatchNumericalOnes) {
  nn::GRUCell cell(kUnits, 8);
  check_gradients(cell);
}

TEST(StaticRnn, GradientThroughTheInitialState) {
  nn::BasicLSTMCell cell(kUnits, {.seed = 9});
  Graph g;
  Scope root(g);
  std::vector<Output> inputs;
  for (int t = 0; t < 2; ++t) inputs.push_back(placeholder(root, DType::kFloat64, Shape{kBatch, kDepth}));
  Output c0 = placeholder(root, DType::kFloat64, Shape{kBatch, kUnits});
  Output h0 = placeholder(root, DType::kFloat64, Shape{kBatch, kUnits});
  auto [outputs, state] = nn::static_rnn(root, cell, inputs, {c0, h0});
  Output y =
      reduce_sum(root, mul(root, outputs.back(), constant(root, random_tensor(Shape{kBatch, kUnits}, 1, -1, 1))));
  Session sess(g);
  sess.run(global_variables_initializer(root));
  FeedList feeds = {{inputs[0], random_tensor(Shape{kBatch, kDepth}, 2)},
                    {inputs[1], random_tensor(Shape{kBatch, kDepth}, 3)},
                    {h0, random_tensor(Shape{kBatch, kUnits}, 4)}};
  // The variables are read from a session in the checker, so feed them too.
  for (const Variable& v : cell.variables()) feeds.emplace_back(v.value(), sess.run(v.value()));
  expect_gradient_matches(c0, random_tensor(Shape{kBatch, kUnits}, 5), y, feeds, {.expect_nonzero = true});
}

TEST(StaticRnn, BadInputsAreNamed) {
  Graph g;
  Scope root(g);
  nn::BasicLSTMCell cell(kUnits);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, kDepth});
  Output wrong = placeholder(root.with_op_name("wrong"), DType::kFloat32, Shape{-1, kDepth + 1});
  EXPECT_THROW(nn::static_rnn(root, cell, {}), InvalidArgumentError);
  nn::static_rnn(root, cell, {x, x});
  try {
    nn::static_rnn(root, cell, {wrong});
    FAIL() << "a cell built for depth 3 must reject depth 4";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong"), std::string::npos) << e.what();
  }
  Output ints = placeholder(root, DType::kInt32, Shape{-1, kDepth});
  EXPECT_THROW(nn::static_rnn(root, cell, {ints}), InvalidArgumentError);
  EXPECT_THROW(nn::BasicLSTMCell(0), InvalidArgumentError);
}

}  // namespace
}  // namespace stepscope
