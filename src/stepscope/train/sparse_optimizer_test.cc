// Optimizers with embedding tables: a table used only through gather/embedding_lookup gets an
// IndexedSlices gradient, applied by the optimizer's SparseApply* op; only the looked-up rows of
// the table and of its slots change, duplicate ids add up, and the touched rows get what the
// dense optimizer gives them for the same (densified) gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/optimizer.h"

namespace stepscope {
namespace {

constexpr int64_t kRows = 6, kDim = 2;

std::vector<double> initial_table() {
  std::vector<double> v(kRows * kDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i) - 0.4;
  return v;
}

// Two lookups into one shared table (ESMM's shared embeddings): ids {4, 1, 4} and {1, 0};
// loss = sum(lookup_a * wa) + sum(lookup_b * wb). Rows 2, 3 and 5 are never looked up.
// The dense twin: loss = sum(table * W) with W the same gradient, densified.
const std::vector<double> kWa{0.5, -1.0, 0.25, 2.0, -0.75, 0.125};
const std::vector<double> kWb{1.5, 0.5, -0.25, -2.0};
const std::vector<double> kDenseW{-0.25, -2.0, 0.25 + 1.5, 2.0 + 0.5, 0, 0, 0, 0, 0.5 - 0.75, -1.0 + 0.125, 0, 0};
bool touched(int64_t row) { return row == 0 || row == 1 || row == 4; }

struct Model {
  Graph g;
  Scope root{g};
  Variable table = make_variable(root, "table", constant(root, initial_table(), Shape{kRows, kDim}));
  Output loss;
  Node* train = nullptr;

  Model(Optimizer& opt, bool sparse) {
    if (sparse) {
      Output a = embedding_lookup(root, table, constant(root, std::vector<int32_t>{4, 1, 4}, Shape{3}));
      Output b = embedding_lookup(root, table, constant(root, std::vector<int64_t>{1, 0}, Shape{2}));
      loss = add(root, reduce_sum(root, mul(root, a, constant(root, kWa, Shape{3, kDim}))),
                 reduce_sum(root, mul(root, b, constant(root, kWb, Shape{2, kDim}))));
    } else {
      loss = reduce_sum(root, mul(root, table.value(), constant(root, kDenseW, Shape{kRows, kDim})));
    }
    train = opt.minimize(root, loss);
  }
  std::vector<double> value(Session& sess, const std::string& name) {
    Node* n = g.find_node(name);
    EXPECT_NE(n, nullptr) << name;
    return n ? sess.run(n->output(0)).to_vector<double>() : std::vector<double>{};
  }
};

struct OptimizerCase {
  const char* name;
  std::function<std::unique_ptr<Optimizer>()> make;
  const char* sparse_op;
  std::vector<std::string> slots;
};

const std::vector<OptimizerCase>& optimizer_cases() {
  static const std::vector<OptimizerCase> all = {
      {"GradientDescent",
       [] { return std::make_unique<GradientDescentOptimizer>(0.1); },
       "SparseApplyGradientDescent",
       {}},
      {"Momentum",
       [] { return std::make_unique<MomentumOptimizer>(0.1, 0.9); },
       "SparseApplyMomentum",
       {"table/Momentum"}},
      {"Adagrad", [] { return std::make_unique<AdagradOptimizer>(0.1); }, "SparseApplyAdagrad", {"table/Adagrad"}},
      {"RMSProp",
       [] { return std::make_unique<RMSPropOptimizer>(0.01); },
       "SparseApplyRMSProp",
       {"table/RMSProp", "table/RMSProp_1"}},
      {"RMSProp centered with momentum",
       [] { return std::make_unique<RMSPropOptimizer>(0.01, RMSPropOptions{.momentum = 0.5, .centered = true}); },
       "SparseApplyCenteredRMSProp",
       {"table/RMSProp", "table/RMSProp_1", "table/RMSProp_2"}},
      {"Adam", [] { return std::make_unique<AdamOptimizer>(0.01); }, "SparseApplyAdam", {"table/Adam", "table/Adam_1"}},
      {"LazyAdam",
       [] { return std::make_unique<LazyAdamOptimizer>(0.01); },
       "SparseApplyAdam",
       {"table/LazyAdam", "table/LazyAdam_1"}},
  };
  return all;
}

int count_ops(const Graph& g, std::string_view type) {
  int n = 0;
  for (int id = 0; id < g.num_nodes(); ++id) n += g.node(id)->op_type() == type;
  return n;
}

TEST(SparseOptimizers, UpdateOnlyLookedUpRowsOfTableAndSlotsAndMatchTheDenseOptimizerThere) {
  for (const OptimizerCase& k : optimizer_cases()) {
    SCOPED_TRACE(k.name);
    auto sparse_opt = k.make();
    auto dense_opt = k.make();
    Model sparse(*sparse_opt, true), dense(*dense_opt, false);
    EXPECT_EQ(count_ops(sparse.g, k.sparse_op), 1);
    EXPECT_EQ(count_ops(sparse.g, "UnsortedSegmentSum"), 0) << "the gradient was densified";
    Session ss(sparse.g), ds(dense.g);
    ss.run(global_variables_initializer(sparse.root));
    ds.run(global_variables_initializer(dense.root));
    std::vector<std::string> names{"table"};
    names.insert(names.end(), k.slots.begin(), k.slots.end());
    std::vector<std::vector<double>> before;
    for (const std::string& n : names) before.push_back(sparse.value(ss, n));
    for (int step = 0; step < 3; ++step) {
      ss.run(sparse.train);
      ds.run(dense.train);
    }
    for (size_t v = 0; v < names.size(); ++v) {
      SCOPED_TRACE(names[v]);
      std::vector<double> s = sparse.value(ss, names[v]), d = dense.value(ds, names[v]);
      ASSERT_EQ(s.size(), static_cast<size_t>(kRows * kDim));
      for (int64_t r = 0; r < kRows; ++r) {
        if (!touched(r)) {
          EXPECT_EQ(std::memcmp(&s[r * kDim], &before[v][r * kDim], kDim * sizeof(double)), 0)
              << "untouched row " << r << " changed";
          continue;
        }
        for (int64_t j = 0; j < kDim; ++j) EXPECT_NEAR(s[r * kDim + j], d[r * kDim + j], 1e-15) << "row " << r;
        if (v == 0) {
          EXPECT_NE(s[r * kDim], before[v][r * kDim]) << "row " << r << " did not move";
        }
      }
    }
  }
}

TEST(SparseOptimizers, GradientDescentStepIsTheSumOfDuplicateRows) {
  GradientDescentOptimizer opt(0.5);
  Model m(opt, true);
  Session sess(m.g);
  sess.run(global_variables_initializer(m.root));
  sess.run(m.train);
  std::vector<double> t = m.value(sess, "table"), t0 = initial_table();
  // Row 4 is looked up twice by a (weights rows 0 and 2), row 1 once by a and once by b.
  EXPECT_DOUBLE_EQ(t[4 * kDim], t0[4 * kDim] - 0.5 * (0.5 - 0.75));
  EXPECT_DOUBLE_EQ(t[1 * kDim + 1], t0[1 * kDim + 1] - 0.5 * (2.0 + 0.5));
}

TEST(SparseOptimizers, ComputeGradientsGivesSlicesForLookupsAndDenseForTheRest) {
  Graph g;
  Scope root(g);
  Variable table = make_variable(root, "table", constant(root, initial_table(), Shape{kRows, kDim}));
  Variable w = make_variable(root, "w", constant(root, std::vector<double>{1, 2}, Shape{kDim}));
  Output e = embedding_lookup(root, table, constant(root, std::vector<int32_t>{2, 2}, Shape{2}));
  Output loss = reduce_sum(root, mul(root, e, w.value()));
  AdagradOptimizer opt(0.1, 0.5);
  std::vector<GradAndVar> gv = opt.compute_gradients(root, loss);
  ASSERT_EQ(gv.size(), 2u);
  EXPECT_FALSE(gv[0].grad);
  ASSERT_TRUE(gv[0].slices);
  EXPECT_TRUE(gv[0].has_gradient());
  EXPECT_TRUE(gv[1].grad);
  EXPECT_FALSE(gv[1].slices);
  Node* train = opt.apply_gradients(root, gv);
  Session sess(g);
  sess.run(global_variables_initializer(root));
  sess.run(train);
  // Row 2: g = 2 * w = {2, 4}; accum = 0.5 + g^2; table -= 0.1 g / sqrt(accum)
  std::vector<double> t = sess.run(table.value()).to_vector<double>(), t0 = initial_table();
  EXPECT_DOUBLE_EQ(t[4], t0[4] - 0.1 * 2 / std::sqrt(0.5 + 4));
  EXPECT_DOUBLE_EQ(t[5], t0[5] - 0.1 * 4 / std::sqrt(0.5 + 16));
  EXPECT_DOUBLE_EQ(sess.run(g.find_node("table/Adagrad")->output(0)).to_vector<double>()[4], 4.5);
  EXPECT_DOUBLE_EQ(sess.run(g.find_node("table/Adagrad")->output(0)).to_vector<double>()[0], 0.5);
}

// A training step updates the table in place: Gather is done with the table by the time the
// update runs, and the gradient's dense_shape is a Const, so nothing else holds the buffer and
// no step copies the whole table.
TEST(SparseOptimizers, TheTableAndItsSlotsAreUpdatedInPlace) {
  for (const OptimizerCase& k : optimizer_cases()) {
    SCOPED_TRACE(k.name);
    auto opt = k.make();
    Model m(*opt, true);
    Session sess(m.g);
    sess.run(global_variables_initializer(m.root));
    std::vector<std::string> names{"table"};
    names.insert(names.end(), k.slots.begin(), k.slots.end());
    auto ids = [&] {
      std::vector<int64_t> out;
      for (const std::string& n : names) out.push_back(sess.run(m.g.find_node(n)->output(0)).buffer()->allocation_id());
      return out;
    };
    sess.run(m.train);  // the first update may copy: the initializer's Const may still share the buffer
    std::vector<int64_t> before = ids();
    sess.run(m.train);
    sess.run(m.train);
    EXPECT_EQ(ids(), before);
  }
}

// An ESMM-like model: one embedding table shared by two towers (CTR and CVR), trained with each
// optimizer; the loss goes down and the rows never looked up stay as initialised.
TEST(SparseOptimizers, SharedEmbeddingTableTrainsWithEveryOptimizer) {
  const std::vector<std::function<std::unique_ptr<Optimizer>()>> makers = {
      [] { return std::make_unique<AdamOptimizer>(0.05); },
      [] { return std::make_unique<LazyAdamOptimizer>(0.05); },
      [] { return std::make_unique<AdagradOptimizer>(0.3); },
      [] { return std::make_unique<RMSPropOptimizer>(0.01); },
      [] { return std::make_unique<MomentumOptimizer>(0.05, 0.9); },
  };
  for (size_t which = 0; which < makers.size(); ++which) {
    SCOPED_TRACE("optimizer " + std::to_string(which));
    Graph g;
    Scope root(g);
    std::vector<float> init(8 * 4);
    for (size_t i = 0; i < init.size(); ++i) init[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    Variable table = make_variable(root, "embedding", constant(root, init, Shape{8, 4}));
    Variable ctr_w =
        make_variable(root, "ctr/w", constant(root, std::vector<float>{0.1f, -0.2f, 0.3f, 0.1f}, Shape{4, 1}));
    Variable cvr_w =
        make_variable(root, "cvr/w", constant(root, std::vector<float>{-0.1f, 0.2f, 0.1f, 0.2f}, Shape{4, 1}));
    Output ids = constant(root, std::vector<int32_t>{0, 3, 5, 3, 6, 0}, Shape{6});  // rows 1, 2, 4, 7 unused
    Output e = embedding_lookup(root, table, ids);
    Output ctr_target = constant(root, std::vector<float>{1, 0, 1, 0, 1, 1}, Shape{6, 1});
    Output cvr_target = constant(root, std::vector<float>{0, 1, 1, 0, 0, 1}, Shape{6, 1});
    Output loss = add(root, reduce_mean(root, square(root, sub(root, matmul(root, e, ctr_w.value()), ctr_target))),
                      reduce_mean(root, square(root, sub(root, matmul(root, e, cvr_w.value()), cvr_target))));
    Variable step = get_or_create_global_step(root);
    auto opt = makers[which]();
    Node* train = opt->minimize(root, loss, step);
    Session sess(g);
    sess.run(global_variables_initializer(root));
    const float first = sess.run(loss).scalar_value<float>();
    for (int i = 0; i < 100; ++i) sess.run(train);
    EXPECT_LT(sess.run(loss).scalar_value<float>(), 0.5f * first);
    EXPECT_EQ(sess.run(step.value()).scalar_value<int64_t>(), 100);
    std::vector<float> t = sess.run(table.value()).to_vector<float>();
    for (int64_t row : {1, 2, 4, 7})
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(t[row * 4 + j], init[row * 4 + j]) << "row " << row;
  }
}

// The dense rules through the optimizers, against TF1's update written out.
TEST(AdagradOptimizer, FirstStepsByHand) {
  Graph g;
  Scope root(g);
  Variable w = make_variable(root, "w", constant(root, std::vector<double>{1.0}, Shape{1}));
  Output loss = reduce_sum(root, square(root, w.value()));  // g = 2w
  Node* train = AdagradOptimizer(0.1).minimize(root, loss);
  Session sess(g);
  sess.run(global_variables_initializer(root));
  sess.run(train);
  const double w1 = 1.0 - 0.1 * 2.0 / std::sqrt(0.1 + 4.0);
  EXPECT_DOUBLE_EQ(sess.run(w.value()).to_vector<double>()[0], w1);
  sess.run(train);
  const double w2 = w1 - 0.1 * 2 * w1 / std::sqrt(0.1 + 4.0 + 4 * w1 * w1);
  EXPECT_DOUBLE_EQ(sess.run(w.value()).to_vector<double>()[0], w2);
}

TEST(RMSPropOptimizer, FirstStepsByHandWithTF1Defaults) {
  Graph g;
  Scope root(g);
  Variable w = make_variable(root, "w", constant(root, std::vector<double>{1.0}, Shape{1}));
  Output loss = reduce_sum(root, square(root, w.value()));  // g = 2w
  Node* train = RMSPropOptimizer(0.01).minimize(root, loss);
  Session sess(g);
  sess.run(global_variables_initializer(root));
  EXPECT_DOUBLE_EQ(sess.run(g.find_node("w/RMSProp")->output(0)).to_vector<double>()[0], 1.0);  // rms starts at 1
  sess.run(train);
  // ms = 0.9 * 1 + 0.1 * 4 = 1.3; mom = 0.01 * 2 / sqrt(1.3 + 1e-10); w = 1 - mom
  const double ms = 1.3, w1 = 1.0 - 0.01 * 2.0 / std::sqrt(ms + 1e-10);
  EXPECT_DOUBLE_EQ(sess.run(w.value()).to_vector<double>()[0], w1);
  sess.run(train);
  const double ms2 = 0.9 * ms + 0.1 * 4 * w1 * w1;
  EXPECT_DOUBLE_EQ(sess.run(w.value()).to_vector<double>()[0], w1 - 0.01 * 2 * w1 / std::sqrt(ms2 + 1e-10));
}

}  // namespace
}  // namespace stepscope
