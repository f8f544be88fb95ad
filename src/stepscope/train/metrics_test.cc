// Streaming metrics against the values TF 1.x's own metrics tests assert (tf.metrics.auc's ROC
// and PR special cases, weighted cases), accumulation over several update runs, the reset a
// local_variables_initializer gives, and the errors for mismatched shapes.
#include "stepscope/train/metrics.h"

#include <gtest/gtest.h>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

float scalar(Session& sess, Output x, const FeedList& feeds = {}) { return sess.run(x, feeds).scalar_value<float>(); }

Output row(const Scope& s, std::vector<float> v) {
  const auto n = static_cast<int64_t>(v.size());
  return constant(s, v, Shape{1, n});
}
Output int_row(const Scope& s, std::vector<int32_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return constant(s, v, Shape{1, n});
}

TEST(Metrics, AucRocMatchesTf) {
  Graph g;
  Scope root(g);
  // tf.metrics.auc: all correct is 1; [1,0,1,0] against [0,1,1,0] weighted 1..4 is 0.7.
  auto all = metrics::auc(root, int_row(root, {0, 1, 1, 0}), row(root, {0, 1, 1, 0}), {}, {}, "all");
  auto weighted = metrics::auc(root, int_row(root, {0, 1, 1, 0}), row(root, {1, 0, 1, 0}),
                               constant(root, std::vector<float>{1, 2, 3, 4}, Shape{1, 4}), {}, "weighted");
  auto ranked = metrics::auc(root, int_row(root, {0, 0, 1, 1}), row(root, {0.1f, 0.4f, 0.35f, 0.8f}), {}, {}, "ranked");
  Session sess(g);
  sess.run(local_variables_initializer(root));
  EXPECT_NEAR(scalar(sess, all.update_op), 1.0, 1e-5);
  EXPECT_NEAR(scalar(sess, all.value), 1.0, 1e-5);
  EXPECT_NEAR(scalar(sess, weighted.update_op), 0.7, 1e-5);
  EXPECT_NEAR(scalar(sess, ranked.update_op), 0.75, 1e-5);
  EXPECT_NEAR(scalar(sess, ranked.value), 0.75, 1e-5);
}

TEST(Metrics, AucPrMatchesTf) {
  Graph g;
  Scope root(g);
  metrics::AucOptions pr{.curve = "PR"};
  auto a = metrics::auc(root, int_row(root, {0, 0, 1, 1}), row(root, {0.1f, 0.4f, 0.35f, 0.8f}), {}, pr, "a");
  auto b = metrics::auc(root, int_row(root, {0, 0, 1, 0, 1, 0, 1}),
                        row(root, {0.1f, 0.4f, 0.35f, 0.8f, 0.1f, 0.135f, 0.81f}), {}, pr, "b");
  auto c = metrics::auc(root, int_row(root, {0, 0, 0, 0, 1, 1, 1}),
                        row(root, {0.0f, 0.1f, 0.2f, 0.33f, 0.3f, 0.4f, 0.5f}), {}, pr, "c");
  Session sess(g);
  sess.run(local_variables_initializer(root));
  // The values TF's metrics_test asserts (to 1e-3) for these three cases.
  EXPECT_NEAR(scalar(sess, a.update_op), 0.79166, 1e-3);
  EXPECT_NEAR(scalar(sess, b.update_op), 0.610317, 1e-3);
  EXPECT_NEAR(scalar(sess, c.update_op), 0.90277, 1e-3);
}

TEST(Metrics, AucAccumulatesOverBatchesAndResets) {
  Graph g;
  Scope root(g);
  auto labels = placeholder(root, DType::kInt32, Shape{-1});
  auto preds = placeholder(root, DType::kFloat32, Shape{-1});
  auto m = metrics::auc(root, labels, preds);
  Session sess(g);
  Node* init = local_variables_initializer(root);
  sess.run(init);
  // The four examples of the 0.75 case, two batches: the value is over both.
  sess.run(m.update_op,
           {{labels, Tensor::from_vector<int32_t>({0, 0})}, {preds, Tensor::from_vector<float>({0.1f, 0.4f})}});
  sess.run(m.update_op,
           {{labels, Tensor::from_vector<int32_t>({1, 1})}, {preds, Tensor::from_vector<float>({0.35f, 0.8f})}});
  EXPECT_NEAR(scalar(sess, m.value), 0.75, 1e-5);
  EXPECT_NEAR(scalar(sess, m.value), 0.75, 1e-5) << "reading the value changes nothing";
  sess.run(init);
  sess.run(m.update_op,
           {{labels, Tensor::from_vector<int32_t>({0, 1})}, {preds, Tensor::from_vector<float>({0.9f, 0.2f})}});
  EXPECT_NEAR(scalar(sess, m.value), 0.0, 1e-5) << "after the reset only the new batch counts";
}

TEST(Metrics, AucRejectsPredictionsOutsideTheUnitInterval) {
  Graph g;
  Scope root(g);
  auto m = metrics::auc(root, int_row(root, {0, 1}), row(root, {0.5f, 1.5f}));
  Session sess(g);
  sess.run(local_variables_initializer(root));
  try {
    sess.run(m.update_op);
    FAIL() << "a prediction of 1.5 must be rejected";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("1.5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(metrics::auc(root, int_row(root, {0}), row(root, {0.5f}), {}, {.curve = "XY"}, "bad"),
               InvalidArgumentError);
}

TEST(Metrics, AccuracyAndMean) {
  Graph g;
  Scope root(g);
  auto labels = placeholder(root, DType::kInt64, Shape{-1});
  auto preds = placeholder(root, DType::kInt64, Shape{-1});
  auto acc = metrics::accuracy(root, labels, preds);
  auto values = placeholder(root, DType::kFloat32, Shape{-1});
  auto weights = placeholder(root, DType::kFloat32, Shape{-1});
  auto plain = metrics::mean(root, values);
  auto weighted = metrics::mean(root, values, weights, "weighted_mean");
  Session sess(g);
  sess.run(local_variables_initializer(root));
  EXPECT_EQ(scalar(sess, acc.value), 0.0f) << "no batch yet: 0, not NaN";
  sess.run(acc.update_op,
           {{labels, Tensor::from_vector<int64_t>({1, 2, 3, 4})}, {preds, Tensor::from_vector<int64_t>({1, 2, 0, 0})}});
  sess.run(acc.update_op,
           {{labels, Tensor::from_vector<int64_t>({5, 6})}, {preds, Tensor::from_vector<int64_t>({5, 6})}});
  EXPECT_NEAR(scalar(sess, acc.value), 4.0 / 6.0, 1e-6);
  FeedList f1 = {{values, Tensor::from_vector<float>({1, 2, 3})}, {weights, Tensor::from_vector<float>({1, 0, 1})}};
  FeedList f2 = {{values, Tensor::from_vector<float>({10})}, {weights, Tensor::from_vector<float>({2})}};
  sess.run(f1, {plain.update_op, weighted.update_op});
  sess.run(f2, {plain.update_op, weighted.update_op});
  EXPECT_NEAR(scalar(sess, plain.value), 16.0 / 4.0, 1e-6);
  EXPECT_NEAR(scalar(sess, weighted.value), (1 + 3 + 20) / 4.0, 1e-6);
}

TEST(Metrics, PrecisionAndRecall) {
  Graph g;
  Scope root(g);
  // TF's metrics_test: predictions [1,0,1,0] against labels [0,1,1,0] -> 0.5 and 0.5.
  auto p = metrics::precision(root, int_row(root, {0, 1, 1, 0}), int_row(root, {1, 0, 1, 0}));
  auto r = metrics::recall(root, int_row(root, {0, 1, 1, 0}), int_row(root, {1, 0, 1, 0}));
  // Three predicted positive, two of them right; four positives, two found.
  auto p2 = metrics::precision(root, int_row(root, {1, 1, 0, 1, 1}), int_row(root, {1, 1, 1, 0, 0}), {}, "p2");
  auto r2 = metrics::recall(root, int_row(root, {1, 1, 0, 1, 1}), int_row(root, {1, 1, 1, 0, 0}), {}, "r2");
  auto none = metrics::precision(root, int_row(root, {1, 1}), int_row(root, {0, 0}), {}, "none");
  Session sess(g);
  sess.run(local_variables_initializer(root));
  EXPECT_NEAR(scalar(sess, p.update_op), 0.5, 1e-6);
  EXPECT_NEAR(scalar(sess, r.update_op), 0.5, 1e-6);
  EXPECT_NEAR(scalar(sess, p2.update_op), 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(scalar(sess, r2.update_op), 0.5, 1e-6);
  EXPECT_EQ(scalar(sess, none.update_op), 0.0f) << "nothing predicted positive: 0";
}

TEST(Metrics, MismatchedShapesNameBothShapes) {
  Graph g;
  Scope root(g);
  // Known when the graph is built.
  try {
    metrics::accuracy(root, int_row(root, {1, 2, 3}), int_row(root, {1, 2}));
    FAIL() << "shapes [1,3] and [1,2] must be rejected";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[1,2]"), std::string::npos) << what;
    EXPECT_NE(what.find("[1,3]"), std::string::npos) << what;
  }
  // Known only when the update op runs.
  auto labels = placeholder(root, DType::kInt32, Shape{-1});
  auto preds = placeholder(root, DType::kFloat32, Shape{-1});
  auto m = metrics::auc(root, labels, preds);
  Session sess(g);
  sess.run(local_variables_initializer(root));
  try {
    sess.run(m.update_op,
             {{labels, Tensor::from_vector<int32_t>({0, 1, 1})}, {preds, Tensor::from_vector<float>({0.5f, 0.5f})}});
    FAIL() << "shapes [3] and [2] must be rejected";
  } catch (const InvalidArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[3]"), std::string::npos) << what;
    EXPECT_NE(what.find("[2]"), std::string::npos) << what;
  }
  // The session goes on.
  sess.run(m.update_op,
           {{labels, Tensor::from_vector<int32_t>({0, 1})}, {preds, Tensor::from_vector<float>({0.2f, 0.7f})}});
  EXPECT_NEAR(scalar(sess, m.value), 1.0, 1e-5);
}

TEST(Metrics, CountsAreLocalVariables) {
  Graph g;
  Scope root(g);
  make_variable(root, "w", constant(root, 1.0f));
  metrics::auc(root, int_row(root, {0, 1}), row(root, {0.2f, 0.7f}));
  metrics::mean(root, row(root, {1, 2}));
  EXPECT_EQ(global_variables(g).size(), 1u) << "metric counts are not global: never checkpointed";
  std::vector<std::string> names;
  for (const Variable& v : local_variables(g)) names.push_back(v.name());
  EXPECT_EQ(names, (std::vector<std::string>{"auc/true_positives", "auc/false_negatives", "auc/true_negatives",
                                             "auc/false_positives", "mean/total", "mean/count"}));
}

}  // namespace
}  // namespace stepscope
