// DistributedOptimizer, broadcast_global_variables and its hook, on however many ranks run this
// program (see collective_ops_test.cc): training on N ranks, each on its shard of the data with
// 1/N of the batch, ends with the variables one process gets on the whole batch.
#include "stepscope/dist/distributed_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "stepscope/dist/broadcast_variables.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/broadcast_global_variables_hook.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/toy_classification.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"

namespace stepscope {
namespace {

constexpr int64_t kRows = 48, kGlobalBatch = 12, kEpochs = 3;

// A small classification problem, the same on every rank (a fixed generator, not a seed).
Dataset rows() {
  std::vector<float> x;
  std::vector<int32_t> y;
  testing::toy_classification(kRows, 5, x, y);
  return Dataset::from_tensor_slices({Tensor::from_vector(x, Shape{kRows, 5}), Tensor::from_vector(y, Shape{kRows})});
}

enum class Mode { kOneProcess, kDistributed, kDistributedWithHook };

// Trains the MLP and returns its trainable variables' final values. Distributed: each rank reads
// its shard in batches of kGlobalBatch / size() (element i of the data on rank i % size, so the
// ranks' k-th batches together are the one-process k-th batch), starts from rank-dependent
// weights (seed 1 + 100 rank) and gets rank 0's by broadcast_global_variables.
std::vector<Tensor> train_mlp(Mode mode, int64_t fusion_threshold_bytes = int64_t{64} << 20) {
  const bool distributed = mode != Mode::kOneProcess;
  const int n = distributed ? dist::size() : 1, r = distributed ? dist::rank() : 0;
  Graph g;
  Scope root(g);
  Dataset data = distributed ? rows().shard(n, r) : rows();
  auto next = data.batch(kGlobalBatch / n).repeat(kEpochs).make_iterator(root).get_next();
  const uint64_t seed = 1 + 100 * static_cast<uint64_t>(r);
  Output hidden = nn::dense(root.with_name_scope("hidden"), next[0], 8, nn::Activation::relu, {.seed = seed});
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 3, nn::Activation::none, {.seed = seed + 1});
  Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, next[1], logits));
  Variable step = get_or_create_global_step(root);
  MomentumOptimizer momentum(0.2, 0.5);
  Node* train = distributed ? DistributedOptimizer(momentum, {.fusion_threshold_bytes = fusion_threshold_bytes})
                                  .minimize(root, loss, step)
                            : momentum.minimize(root, loss, step);
  std::vector<Variable> vars = trainable_variables(g);
  std::vector<Output> fetches(vars.begin(), vars.end());
  if (mode == Mode::kDistributedWithHook) {
    // The variables as the session ends (end() sees the raw session; run() is stopped by then).
    struct Capture : SessionRunHook {
      std::vector<Output> fetches;
      std::vector<Tensor> values;
      void end(Session& session) override { values = session.run({}, fetches); }
    } capture;
    capture.fetches = fetches;
    capture.fetches.push_back(step.value());
    BroadcastGlobalVariablesHook bcast(0);
    // Every rank names a checkpoint_dir; is_chief defaults to rank 0, the only one that saves.
    testing::TempDir dir;
    EXPECT_EQ(MonitoredTrainingSessionOptions{}.is_chief, r == 0);
    MonitoredSession sess = MonitoredTrainingSession(
        g, {.checkpoint_dir = dir.path(), .hooks = {&bcast, &capture}, .log_step_count_steps = 0});
    EXPECT_NE(bcast.broadcast_op(), nullptr);
    while (!sess.should_stop()) sess.run(train);
    sess.close();
    EXPECT_EQ(std::filesystem::exists(std::filesystem::path(dir.path()) / "checkpoint"), r == 0) << dir.path();
    EXPECT_EQ(capture.values.back().scalar_value<int64_t>(), kEpochs * kRows / kGlobalBatch);
    capture.values.pop_back();
    return capture.values;
  }
  Node* init = global_variables_initializer(root);
  Node* bcast = distributed ? broadcast_global_variables(root, 0) : nullptr;
  Session sess(g);
  sess.run(init);
  if (bcast) sess.run(bcast);
  int64_t steps = 0;
  try {
    for (;; ++steps) sess.run(train);
  } catch (const OutOfRangeError&) {
  }
  EXPECT_EQ(steps, kEpochs * kRows / kGlobalBatch);
  return sess.run({}, fetches);
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t v = 0; v < got.size(); ++v) {
    ASSERT_EQ(got[v].shape(), want[v].shape());
    auto a = got[v].flat<float>();
    auto b = want[v].flat<float>();
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << "variable " << v << " element " << i;
  }
}

TEST(DistributedOptimizer, TrainsLikeOneProcessOnTheGlobalBatch) {
  const std::vector<Tensor> one = train_mlp(Mode::kOneProcess);
  // Learned something (not equal to the start because nothing moved).
  expect_close(train_mlp(Mode::kDistributed), one);
  // Every gradient in its own allreduce: the same result.
  expect_close(train_mlp(Mode::kDistributed, 0), one);
}

TEST(DistributedOptimizer, BroadcastHookInMonitoredTrainingSessionTrainsTheSame) {
  expect_close(train_mlp(Mode::kDistributedWithHook), train_mlp(Mode::kOneProcess));
}

TEST(DistributedOptimizer, FusesGradientsUpToTheThresholdInBackwardOrder) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root, DType::kFloat32, Shape{2, 10});
  Output h = x;
  for (int layer = 0; layer < 3; ++layer)  // kernels of 400 bytes, biases of 40
    h = nn::dense(root.with_name_scope("dense"), h, 10, nn::Activation::none, {.seed = 1});
  Output loss = reduce_sum(root, h);
  GradientDescentOptimizer sgd(0.1);
  auto group_sizes = [&](int64_t threshold) {
    DistributedOptimizer opt(sgd, {.fusion_threshold_bytes = threshold});
    opt.compute_gradients(root, loss);
    std::vector<int> sizes;
    const std::vector<Node*>& nodes = opt.collective_nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(nodes[i]->op().name, "Allreduce");
      sizes.push_back(nodes[i]->num_inputs());
      // Chained: each after the one before, so every rank runs them in one order.
      if (i > 0) {
        EXPECT_EQ(nodes[i]->control_inputs(), std::vector<Node*>{nodes[i - 1]});
      }
    }
    return sizes;
  };
  EXPECT_EQ(group_sizes(int64_t{64} << 20), std::vector<int>{6});
  EXPECT_EQ(group_sizes(0), (std::vector<int>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(group_sizes(880), (std::vector<int>{4, 2}));  // 40 + 400 + 40 + 400, then 40 + 400
  // The first group holds the last layer's gradients (computed first in the backward pass).
  DistributedOptimizer opt(sgd, {.fusion_threshold_bytes = 440});
  auto grads = opt.compute_gradients(root, loss);
  const Node* first = opt.collective_nodes().front();
  EXPECT_EQ(grads.back().grad.node, first);  // the averaged gradient is the fused op's output 0
  EXPECT_EQ(grads.back().grad.index, 0);
  EXPECT_EQ(first->num_inputs(), 2);
  EXPECT_EQ(grads.back().var.name(), "dense_2/bias");
}

// The overlap: the first fused Allreduce waits for its own gradients only, not for the rest of
// the backward pass (the first layer's gradients are not among its ancestors), so the executor
// runs it while the earlier layers' gradients are computed.
TEST(DistributedOptimizer, TheFirstGroupDoesNotWaitForTheRestOfTheBackwardPass) {
  Graph g;
  Scope root(g);
  Output h = placeholder(root, DType::kFloat32, Shape{2, 10});
  for (int layer = 0; layer < 3; ++layer)
    h = nn::dense(root.with_name_scope("dense"), h, 10, nn::Activation::relu, {.seed = 1});
  GradientDescentOptimizer sgd(0.1);
  DistributedOptimizer opt(sgd, {.fusion_threshold_bytes = 440});  // one layer's kernel and bias
  opt.compute_gradients(root, reduce_sum(root, h));
  const std::vector<Node*>& groups = opt.collective_nodes();
  ASSERT_EQ(groups.size(), 3u);
  std::set<const Node*> ancestors;
  std::vector<const Node*> stack = {groups.front()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Output& in : n->inputs())
      if (ancestors.insert(in.node).second) stack.push_back(in.node);
    for (const Node* c : n->control_inputs())
      if (ancestors.insert(c).second) stack.push_back(c);
  }
  // The last group holds the first layer's gradients: none of them is needed by the first group.
  for (const Output& first_layer_grad : groups.back()->inputs())
    EXPECT_EQ(ancestors.count(first_layer_grad.node), 0u) << first_layer_grad.node->name();
  // While the first group's own gradients are.
  for (const Output& own : groups.front()->inputs()) EXPECT_EQ(ancestors.count(own.node), 1u);
}

// Embedding gradients stay sparse: every rank's rows (allgathered), their values divided by
// size(), go to the optimizer's sparse update; the result is one process's on the whole batch.
TEST(DistributedOptimizer, SparseGradientsAreAllgatheredAndTrainLikeOneProcess) {
  auto train = [](bool distributed, bool sparse_as_dense) {
    const int n = distributed ? dist::size() : 1, r = distributed ? dist::rank() : 0;
    Graph g;
    Scope root(g);
    std::vector<int32_t> ids;
    std::vector<float> targets;
    for (int i = 0; i < 24; ++i) {
      ids.push_back((i * 7) % 6);
      targets.push_back(static_cast<float>(i % 5) - 2.0f);
    }
    Dataset data = Dataset::from_tensor_slices({Tensor::from_vector(ids), Tensor::from_vector(targets)});
    if (distributed) data = data.shard(n, r);
    auto next = data.batch(12 / n).repeat(2).make_iterator(root).get_next();
    Variable table = make_variable(
        root, "table",
        constant(root, std::vector<float>{0.1f, -0.2f, 0.3f, 0.0f, 0.5f, -0.4f, 0.2f, 0.1f, -0.3f, 0.4f, 0.0f, 0.6f},
                 Shape{6, 2}));
    Output e = reduce_sum(root, embedding_lookup(root, table, next[0]), {1});
    Output loss = reduce_mean(root, square(root, sub(root, e, next[1])));
    GradientDescentOptimizer sgd(0.1);
    Node* step;
    if (distributed) {
      DistributedOptimizer opt(sgd, {.sparse_as_dense = sparse_as_dense});
      step = opt.minimize(root, loss);
      EXPECT_EQ(opt.collective_nodes().front()->op().name, sparse_as_dense ? "Allreduce" : "Allgather");
    } else {
      step = sgd.minimize(root, loss);
    }
    Session sess(g);
    sess.run(global_variables_initializer(root));
    try {
      for (;;) sess.run(step);
    } catch (const OutOfRangeError&) {
    }
    return sess.run({}, {table.value()});
  };
  const std::vector<Tensor> one = train(false, false);
  expect_close(train(true, false), one);
  expect_close(train(true, true), one);
}

TEST(BroadcastGlobalVariables, SetsEveryGlobalVariableToTheRootsValue) {
  const int r = dist::rank(), root_rank = dist::size() - 1;
  Graph g;
  Scope root(g);
  Variable w = make_variable(root, "w", constant(root, std::vector<float>{1.0f * r, 2.0f * r}, Shape{2}));
  Variable counter = make_variable(root, "counter", constant(root, int64_t{10} * r), false);
  Node* bcast = broadcast_global_variables(root, root_rank);
  EXPECT_EQ(bcast->name(), "broadcast_global_variables");
  Session sess(g);
  sess.run(global_variables_initializer(root));
  sess.run(bcast);
  auto out = sess.run({}, {w.value(), counter.value()});
  EXPECT_EQ(out[0].flat<float>()[1], 2.0f * root_rank);
  EXPECT_EQ(out[1].scalar_value<int64_t>(), 10 * root_rank);
}

}  // namespace
}  // namespace stepscope
