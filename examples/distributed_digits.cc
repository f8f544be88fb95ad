// Data-parallel training (Horovod's model) of an MLP on the shipped digits data: every rank reads
// its shard of the data in batches of 64 / size (a global batch of 64), gradients are averaged
// across the ranks by DistributedOptimizer, and every rank starts from rank 0's variables. Run it
// as one process, or as several:
//
//   distributed_digits [--data data/digits.csv.gz] [--epochs 20] [--trace_dir DIR]
//   mpirun -np 2 distributed_digits --data data/digits.csv.gz --trace_dir runs/digits
//
// Rank 0 prints the test accuracy; every rank checks that its model is rank 0's (the same test
// accuracy), so the ranks stayed in step. With --trace_dir, every rank's ProfilerHook traces
// the same steps (every 100) into DIR/rank<r>: `stepscope merge` makes one timeline of them, and
// `stepscope serve DIR/..` shows the job with its ranks merged and who waited for whom.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "stepscope/dist/distributed_optimizer.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/broadcast_global_variables_hook.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"

using namespace stepscope;

// Runs `at_end` on the session as it ends (TF's way to read a trained model once the input ran
// out: the session still holds the variables, the MonitoredSession no longer runs steps).
class EndHook : public SessionRunHook {
 public:
  explicit EndHook(std::function<void(Session&)> at_end) : at_end_(std::move(at_end)) {}
  void end(Session& session) override { at_end_(session); }

 private:
  std::function<void(Session&)> at_end_;
};

int main(int argc, char** argv) {
  std::string data = "data/digits.csv.gz";
  std::string trace_dir;
  int epochs = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--data")
      data = argv[i + 1];
    else if (flag == "--epochs")
      epochs = std::stoi(argv[i + 1]);
    else if (flag == "--trace_dir")
      trace_dir = argv[i + 1];
  }
  try {
    dist::init();
    const int rank = dist::rank(), size = dist::size();
    // Every rank must run as many steps as the others (a rank that stops early leaves the others
    // waiting in their allreduce): equal shards, equal batches.
    if (64 % size != 0 || 1500 % size != 0)
      throw InvalidArgumentError(
          "the 1500 training rows and the global batch of 64 must split evenly over the ranks, "
          "not over " +
          std::to_string(size));
    Graph g;
    Scope root(g);
    auto scale = [](std::vector<Tensor> row) {
      for (float& v : row[0].flat<float>()) v /= 16.0f;
      return row;
    };
    auto rows = Dataset::csv(data).map(scale).shuffle(1797, 7, /*reshuffle_each_iteration=*/false);
    auto [train_rows, test_rows] = split_dataset(rows, {.left_size = 1500});
    // Shard before batching: rank r reads rows r, r + size, ... so the ranks' k-th batches make
    // up the one-process k-th batch.
    auto [x, labels] = train_rows.shard(size, rank).batch(64 / size).repeat(epochs).make_iterator(root).get_next();
    // Different initial weights per rank on purpose: broadcast_global_variables makes them rank 0's.
    const uint64_t seed = 1 + 10 * static_cast<uint64_t>(rank);
    Output hidden = nn::dense(root.with_name_scope("hidden"), x, 64, nn::Activation::relu, {.seed = seed});
    Output logits = nn::dense(root.with_name_scope("logits"), hidden, 10, nn::Activation::none, {.seed = seed + 1});
    Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, labels, logits));
    Variable step = get_or_create_global_step(root);
    GradientDescentOptimizer sgd(0.5);
    Node* train = DistributedOptimizer(sgd).minimize(root, loss, step);
    Output accuracy =
        reduce_mean(root, cast(root, equal(root, argmax(root, logits, 1, DType::kInt32), labels), DType::kFloat32));
    Output rank0_accuracy = broadcast(root, accuracy, 0);
    Graph test_graph;
    auto next = test_rows.batch(1 << 20).make_iterator(Scope(test_graph)).get_next();
    auto test = Session(test_graph).run({}, {next[0], next[1]});

    // Every rank starts from rank 0's variables (the hook broadcasts them once the session is
    // made); every rank traces the same global steps into a directory of its own.
    BroadcastGlobalVariablesHook sync(0);
    std::vector<Tensor> acc;
    EndHook evaluate([&](Session& session) {
      acc = session.run({{x, test[0]}, {labels, test[1]}}, {accuracy, rank0_accuracy});
    });
    std::vector<SessionRunHook*> hooks = {&sync, &evaluate};
    std::optional<ProfilerHook> profiler;
    if (!trace_dir.empty()) {
      profiler.emplace(ProfilerHookOptions{
          .save_steps = 100, .output_dir = trace_dir + "/rank" + std::to_string(rank), .save_run_metadata = false});
      hooks.push_back(&*profiler);
    }
    MonitoredSession session = MonitoredTrainingSession(g, {.hooks = hooks, .log_step_count_steps = 0});
    int64_t steps = 0;
    while (!session.should_stop() && !session.run(Fetch::list({train})).empty()) ++steps;
    session.close();  // the hooks' end(): `evaluate` reads the test accuracy of the trained model
    const float mine = acc[0].scalar_value<float>(), rank0 = acc[1].scalar_value<float>();
    if (rank == 0)
      std::printf("MLP on %s, %d rank(s) (%s): %lld steps of a global batch of 64, test accuracy %.2f%%\n",
                  data.c_str(), size, dist::describe().c_str(), static_cast<long long>(steps), 100 * mine);
    if (mine != rank0) {
      std::fprintf(stderr, "distributed_digits: rank %d's model differs from rank 0's (accuracy %.4f vs %.4f)\n", rank,
                   mine, rank0);
      return 1;
    }
    dist::shutdown();
    return mine > 0.9 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed_digits (rank %d): %s\n", dist::rank(), e.what());
    return 2;
  }
}
