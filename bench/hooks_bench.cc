// What the hook machinery adds to a step (see BENCHMARKS.md). The step is trivial (the global
// step's AssignAdd) so that the difference is the machinery itself:
//   BM_RawSession/fetch_step:0  Session::run of the train op;
//   BM_RawSession/fetch_step:1  the same, also fetching the global step's read (what the hooks
//                               below ask for: the part of their cost that is the graph's);
//   BM_MonitoredSession/hooks:0 MonitoredSession::run with no hooks;
//   BM_MonitoredSession/hooks:6 with six standard hooks installed, none of which fires during
//                               the measurement (their intervals are out of reach): StopAtStep,
//                               StepCounter, LoggingTensor, CheckpointSaver, SummarySaver,
//                               GlobalStepWaiter. Four of them fetch the global step every run,
//                               as TensorFlow's do.
//   BM_MonitoredSession/hooks:7 the same six and a ProfilerHook whose timer does not fire either
//                               (what leaving the profiler on costs between traced steps).
// Target (issue 4): under 2 µs added per step with six hooks that do not fire.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/checkpoint_saver_hook.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/hooks/step_counter_hook.h"
#include "stepscope/hooks/summary_saver_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

constexpr int64_t kNever = int64_t{1} << 60;

struct TrivialModel {
  Graph graph;
  Node* train = nullptr;
  Output loss;
  TrivialModel() {
    Scope root(graph);
    Variable step = get_or_create_global_step(root);
    train = assign_add(root, step, constant(root, int64_t{1})).node;
    loss = constant(root.with_op_name("loss"), 1.0f);
    scalar(root, "loss", loss);
  }
};

void BM_RawSession(benchmark::State& state) {
  TrivialModel model;
  Session session(model.graph, {.inter_op_threads = 1});
  session.run(global_variables_initializer(Scope(model.graph)));
  std::vector<Output> fetches;
  if (state.range(0) == 1) fetches.push_back(get_or_create_global_step_read(model.graph));
  session.run({}, fetches, {model.train});
  for (auto _ : state) benchmark::DoNotOptimize(session.run({}, fetches, {model.train}));
}
BENCHMARK(BM_RawSession)->ArgName("fetch_step")->Arg(0)->Arg(1)->UseRealTime();

void BM_MonitoredSession(benchmark::State& state) {
  TrivialModel model;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "stepscope_hooks_bench";
  std::filesystem::remove_all(dir);
  StopAtStepHook stop({.last_step = kNever});
  StepCounterHook counter({.every_n_steps = kNever});
  LoggingTensorHook logging({.tensors = {model.loss}, .every_n_iter = kNever});
  CheckpointSaverHook saver({.checkpoint_dir = dir.string(), .save_steps = kNever, .log = {.info = [](auto&) {}}});
  SummarySaverHook summaries(
      {.save_steps = kNever, .output_dir = dir.string(), .summary_op = {merge_all_summaries(model.graph)}});
  GlobalStepWaiterHook waiter({.wait_until_step = 0});
  ProfilerHook profiler({.save_steps = kNever, .output_dir = dir.string()});
  std::vector<SessionRunHook*> hooks;
  if (state.range(0) >= 6) hooks = {&stop, &counter, &logging, &saver, &summaries, &waiter};
  if (state.range(0) == 7) hooks.push_back(&profiler);
  {
    MonitoredSession sess(model.graph, hooks);
    for (int i = 0; i < 10; ++i) sess.run(model.train);  // the first runs fire (priming), and plans are built
    for (auto _ : state) sess.run(model.train);
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_MonitoredSession)->ArgName("hooks")->Arg(0)->Arg(6)->Arg(7)->UseRealTime();

}  // namespace
}  // namespace stepscope

BENCHMARK_MAIN();
