// Seed 003's story (TensorFlow's session_run_hook.py): the ExampleHook of the hook contract, run
// under MonitoredTrainingSession, printing its lifecycle in the documented order:
//
//   call hooks.begin(); create the session; call hooks.after_create_session()
//   while not stop is requested: hooks.before_run(); run; hooks.after_run()
//   hooks.end(); close the session
//
// and the two ways a loop ends otherwise: the input raising OutOfRangeError (after_run is not
// called for that run, end() still is) and any other error (neither after_run nor end).
//
//   hook_lifecycle [--data data/digits.csv.gz]
#include <cstdio>
#include <string>

#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

using namespace stepscope;

namespace {

// Watches the loss and asks the loop to stop once it is below `stop_below`.
class ExampleHook : public SessionRunHook {
 public:
  ExampleHook(Output loss, float stop_below) : loss_(loss), stop_below_(stop_below) {}

  void begin(Graph& graph) override {
    // You can add ops to the graph here.
    std::printf("Starting the session.\n");
    your_tensor_ = identity(Scope(graph).with_op_name("example_hook/loss"), loss_);
  }
  void after_create_session(Session& session, Coordinator& coord) override {
    // When this is called, the graph is finalized and ops can no longer be added to the graph.
    std::printf("Session created.\n");
    try {
      identity(Scope(*your_tensor_.graph()), loss_);
    } catch (const Error& e) {
      std::printf("  (adding an op now fails: %s)\n", e.what());
    }
  }
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override {
    std::printf("Before calling session.run().\n");
    return SessionRunArgs{.fetches = your_tensor_};
  }
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override {
    const float value = run_values.results.tensor().scalar_value<float>();
    std::printf("Done running one step. The value of my tensor: %.4f\n", value);
    if (value < stop_below_) {
      std::printf("  loss below %.2f: requesting stop\n", stop_below_);
      run_context.request_stop();
    }
  }
  void end(Session& session) override { std::printf("Done with the session.\n"); }

 private:
  Output loss_;
  float stop_below_;
  Output your_tensor_;
};

struct Model {
  Graph graph;
  Output x, labels, loss;
  Node* train = nullptr;
};

// A softmax regression on the digits, fed by `batches` batches of 64 rows.
void build(Model& m, const std::string& data, int64_t batches) {
  Scope root(m.graph);
  auto scale = [](std::vector<Tensor> row) {
    for (float& v : row[0].flat<float>()) v /= 16.0f;
    return row;
  };
  auto next = Dataset::csv(data).map(scale).batch(64).take(batches).make_iterator(root).get_next();
  m.x = next[0];
  m.labels = next[1];
  Output logits = nn::dense(root.with_name_scope("logits"), m.x, 10);
  m.loss = reduce_mean(root.with_name_scope("loss"), sparse_softmax_cross_entropy_with_logits(root, m.labels, logits));
  m.train = GradientDescentOptimizer(0.5).minimize(root, m.loss, get_or_create_global_step(root));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string data = argc > 2 && std::string(argv[1]) == "--data" ? argv[2] : "data/digits.csv.gz";
  try {
    std::printf("== 1. the hook requests stop\n");
    {
      Model m;
      build(m, data, 1000);
      ExampleHook hook(m.loss, 1.5f);
      MonitoredSession sess = MonitoredTrainingSession(m.graph, {.hooks = {&hook}});
      while (!sess.should_stop()) sess.run(m.train);
      sess.close();
    }

    std::printf("\n== 2. the input runs out (OutOfRangeError): no after_run for that run, end() is called\n");
    {
      Model m;
      build(m, data, 2);
      ExampleHook hook(m.loss, 0.0f);
      MonitoredSession sess = MonitoredTrainingSession(m.graph, {.hooks = {&hook}});
      while (!sess.should_stop()) sess.run(m.train);
      std::printf("the loop ended cleanly\n");
      sess.close();
    }

    std::printf("\n== 3. any other error: neither after_run nor end() is called, the error propagates\n");
    {
      Model m;
      build(m, data, 1000);
      ExampleHook hook(m.loss, 0.0f);
      MonitoredSession sess = MonitoredTrainingSession(m.graph, {.hooks = {&hook}});
      try {
        Tensor wrong(DType::kFloat32, Shape{64, 3});  // the model takes 64 pixels per row
        sess.run(m.train, {{m.x, wrong}});
      } catch (const InvalidArgumentError& e) {
        std::printf("error: %s\n", e.what());
      }
      sess.close();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hook_lifecycle: %s\n", e.what());
    return 2;
  }
  return 0;
}
