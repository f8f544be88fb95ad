// End to end: a real model learns the shipped digits data through the whole stack (CSV dataset,
// layers, autodiff, optimizer, executor), and a checkpoint restores exactly what was trained.
#include <gtest/gtest.h>

#include <filesystem>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

const std::string kDigits = std::string(STEPSCOPE_SOURCE_DIR) + "/data/digits.csv.gz";

struct DigitsMlp {
  Graph g;
  Scope root{g};
  Dataset rows = Dataset::csv(kDigits)
                     .map([](std::vector<Tensor> row) {
                       for (float& v : row[0].flat<float>()) v /= 16.0f;
                       return row;
                     })
                     .shuffle(1797, 7, false);
  std::pair<Dataset, Dataset> parts = split_dataset(rows, {.left_size = 1500});
  NextElement next = parts.first.shuffle(1500, 1).batch(64).repeat(20).make_iterator(root).get_next();
  Output x = next[0], labels = next[1];
  Output logits = nn::dense(root.with_name_scope("logits"),
                            nn::dense(root.with_name_scope("hidden"), x, 64, nn::Activation::relu, {.seed = 1}), 10,
                            nn::Activation::none, {.seed = 2});
  Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, labels, logits));
  Variable step = get_or_create_global_step(root);
  Node* train = GradientDescentOptimizer(0.5).minimize(root, loss, step);
  Output accuracy = reduce_mean(root, cast(root, equal(root, argmax(root, logits, 1, DType::kInt32), labels),
                                           DType::kFloat32));
  Node* init = global_variables_initializer(root);

  FeedList test_feeds() {
    Graph tg;
    auto n = parts.second.batch(1000).make_iterator(Scope(tg)).get_next();
    auto t = Session(tg).run({}, {n[0], n[1]});
    return {{x, t[0]}, {labels, t[1]}};
  }
};

TEST(Training, MlpLearnsDigitsAndTheInputEndsTheLoop) {
  DigitsMlp m;
  Session sess(m.g);
  sess.run(m.init);
  const FeedList test = m.test_feeds();
  const float before = sess.run(test, {m.accuracy})[0].scalar_value<float>();
  float first_loss = -1, last_loss = 0;
  int steps = 0;
  try {
    for (;; ++steps) {
      last_loss = sess.run({}, {m.loss}, {m.train})[0].scalar_value<float>();
      if (first_loss < 0) first_loss = last_loss;
    }
  } catch (const OutOfRangeError& e) {
    EXPECT_NE(std::string(e.what()).find("End of sequence"), std::string::npos);
  }
  EXPECT_EQ(steps, 20 * 24);  // 1500 rows in batches of 64 (the last one partial), 20 epochs
  EXPECT_EQ(sess.run(m.step.value()).scalar_value<int64_t>(), steps);
  EXPECT_LT(last_loss, first_loss / 10);
  const float after = sess.run(test, {m.accuracy})[0].scalar_value<float>();
  EXPECT_LT(before, 0.3f);
  EXPECT_GT(after, 0.93f);
}

TEST(Training, CheckpointRestoresTheTrainedModelInAFreshSession) {
  DigitsMlp m;
  const testing::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  Saver saver(m.g);
  const FeedList test = m.test_feeds();
  float trained;
  {
    Session sess(m.g);
    sess.run(m.init);
    for (int i = 0; i < 200; ++i) sess.run(m.train);
    trained = sess.run(test, {m.accuracy})[0].scalar_value<float>();
    saver.save(sess, (dir / "model.ckpt").string(), 200);
  }
  ASSERT_EQ(latest_checkpoint(dir.string()), (dir / "model.ckpt-200").string());
  Session fresh(m.g);
  saver.restore(fresh, *latest_checkpoint(dir.string()));
  EXPECT_EQ(fresh.run(test, {m.accuracy})[0].scalar_value<float>(), trained);
  EXPECT_EQ(fresh.run(m.step.value()).scalar_value<int64_t>(), 200);
}

TEST(Training, SameSeedsTrainTheSameModel) {
  auto train_once = [] {
    DigitsMlp m;
    Session sess(m.g, {.inter_op_threads = 2});
    sess.run(m.init);
    for (int i = 0; i < 50; ++i) sess.run(m.train);
    return sess.run(m.test_feeds(), {m.loss})[0].scalar_value<float>();
  };
  EXPECT_EQ(train_once(), train_once());
}

}  // namespace
}  // namespace stepscope

namespace stepscope {
namespace {

TEST(Dense, NamesItsVariablesAndInitializersUnderItsScope) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root, DType::kFloat32, Shape{-1, 3});
  nn::dense(root.with_name_scope("hidden"), x, 4);
  nn::dense(root.with_name_scope("hidden"), x, 4);  // a second layer: "hidden_1"
  for (const char* name : {"hidden/kernel", "hidden/bias", "hidden/kernel/Initializer/random_uniform",
                           "hidden/bias/Initializer/zeros", "hidden/MatMul", "hidden_1/kernel",
                           "hidden_1/kernel/Initializer/random_uniform", "hidden_1/bias/Initializer/zeros"})
    EXPECT_NE(g.find_node(name), nullptr) << name;
  EXPECT_EQ(g.find_node("kernel/Initializer/random_uniform"), nullptr);
}

}  // namespace
}  // namespace stepscope
