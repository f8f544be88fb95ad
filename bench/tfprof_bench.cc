// tfprof's Profiler on traced training steps of the MLP 784-256-256-10 (batch 64, SGD, global
// step: 41 node executions a step), recorded once before the timings. steps:100 is the figure
// asked for; steps:400 (16k node executions) shows how it scales. Counters: "execs" = node
// executions in the profile.
//   BM_AddStep/steps:N                   add_step of N RunMetadata into a fresh Profiler
//   BM_ProfileOperations/steps:N/cold:1  op view text (time_and_memory, output none) over the N
//                                        steps, per-node statistics recomputed every call
//                                        (target ≤ 10 ms)
//   BM_ProfileOperations/.../cold:0      the same, statistics cached (a repeated query)
//   BM_ProfileNameScope, BM_ProfileGraph, BM_ProfileCode: the other views, likewise
//   BM_Save/steps:N                      save() after N steps (what ProfilerHook does per trace)
//   BM_Load/steps:N                      Profiler::load of that file
//   BM_Diff/steps:N/load:1               what `stepscope diff A B` does for two saved N-step
//                                        profiles (steps 0..N-1 and N..2N-1): load both,
//                                        diff_profiles, to_text (target ≤ 50 ms for N = 100)
//   BM_Diff/steps:N/load:0               diff_profiles + to_text of two profiles in memory
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <sstream>

#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/profile_diff.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

namespace stepscope {
namespace {

struct TracedMlp {
  Graph graph;
  std::vector<RunMetadata> steps;
  int64_t execs = 0;

  explicit TracedMlp(int num_steps) {
    Scope root(graph);
    Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{64, 784});
    Output y = placeholder(root.with_op_name("y"), DType::kInt64, Shape{64});
    Output h = nn::dense(root.with_name_scope("dense"), x, 256, nn::Activation::relu, {.seed = 1});
    h = nn::dense(root.with_name_scope("dense"), h, 256, nn::Activation::relu, {.seed = 2});
    Output logits = nn::dense(root.with_name_scope("dense"), h, 10, nn::Activation::none, {.seed = 3});
    Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, y, logits));
    Variable global_step = get_or_create_global_step(root);
    Node* train = GradientDescentOptimizer(0.1).minimize(root, loss, global_step);
    Node* init = global_variables_initializer(root);
    Session session(graph, {.inter_op_threads = 1});
    session.run(init);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    Tensor xs(DType::kFloat32, Shape{64, 784}), ys(DType::kInt64, Shape{64});
    for (float& v : xs.flat<float>()) v = normal(rng);
    for (int64_t& v : ys.flat<int64_t>()) v = static_cast<int64_t>(rng() % 10);
    RunOptions options;
    options.trace_level = TraceLevel::kFullTrace;
    steps.resize(num_steps);
    for (RunMetadata& md : steps) {
      session.run({{x, xs}, {y, ys}}, {loss}, {train}, options, &md);
      for (const auto& dev : md.step_stats.dev_stats()) execs += static_cast<int64_t>(dev.node_stats.size());
    }
  }
};

const TracedMlp& mlp() {
  static const TracedMlp* m = new TracedMlp(400);
  return *m;
}

std::ostream& quiet_log() {
  static std::ostringstream* log = new std::ostringstream;
  log->str("");
  return *log;
}

Profiler filled_profiler(int64_t steps) {
  Profiler p(mlp().graph);
  p.set_log(&quiet_log());
  for (int64_t i = 0; i < steps; ++i) p.add_step(i, mlp().steps[i]);
  return p;
}

double execs(int64_t steps) {
  return static_cast<double>(mlp().execs * steps / static_cast<int64_t>(mlp().steps.size()));
}

void BM_AddStep(benchmark::State& state) {
  const int64_t steps = state.range(0);
  mlp();  // recorded before the timing
  for (auto _ : state) benchmark::DoNotOptimize(filled_profiler(steps));
  state.counters["execs"] = execs(steps);
  state.counters["per_step"] = benchmark::Counter(static_cast<double>(state.iterations() * steps),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddStep)->ArgName("steps")->Arg(100)->Arg(400)->Unit(benchmark::kMillisecond);

// The part of add_step that works out a step's peak memory by kind (memory_kinds.h), alone.
void BM_MemoryByKind(benchmark::State& state) {
  const TracedMlp& m = mlp();
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(memory_by_kind(m.graph, m.steps[i++ % m.steps.size()].step_stats));
  state.counters["per_exec_ns"] = benchmark::Counter(static_cast<double>(state.iterations()) * m.execs / m.steps.size(),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MemoryByKind)->Unit(benchmark::kMicrosecond);

// Runs a view; with cold, alternates step -1 and step 50 so the per-node statistics are
// recomputed on every call (the Profiler caches those of the last step queried).
template <typename View>
void run_view(benchmark::State& state, View view) {
  Profiler p = filled_profiler(state.range(0));
  const bool cold = state.range(1) != 0;
  ProfileOptions options = ProfileOptionBuilder::time_and_memory();
  options.output = "none";
  size_t bytes = 0;
  int64_t i = 0;
  for (auto _ : state) {
    options.step = cold && (i++ & 1) ? 50 : -1;
    auto result = view(p, options);
    bytes = result.text().size();
    benchmark::DoNotOptimize(result);
  }
  state.counters["execs"] = execs(state.range(0));
  state.counters["text_bytes"] = static_cast<double>(bytes);
}

void BM_ProfileOperations(benchmark::State& state) {
  run_view(state, [](const Profiler& p, const ProfileOptions& o) { return p.profile_operations(o); });
}
BENCHMARK(BM_ProfileOperations)
    ->ArgNames({"steps", "cold"})
    ->Args({100, 1})
    ->Args({100, 0})
    ->Args({400, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_ProfileNameScope(benchmark::State& state) {
  run_view(state, [](const Profiler& p, const ProfileOptions& o) { return p.profile_name_scope(o); });
}
BENCHMARK(BM_ProfileNameScope)
    ->ArgNames({"steps", "cold"})
    ->Args({100, 1})
    ->Args({100, 0})
    ->Args({400, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_ProfileGraph(benchmark::State& state) {
  run_view(state, [](const Profiler& p, const ProfileOptions& o) { return p.profile_graph(o); });
}
BENCHMARK(BM_ProfileGraph)->ArgNames({"steps", "cold"})->Args({100, 1})->Unit(benchmark::kMicrosecond);

void BM_ProfileCode(benchmark::State& state) {
  run_view(state, [](const Profiler& p, const ProfileOptions& o) { return p.profile_code(o); });
}
BENCHMARK(BM_ProfileCode)->ArgNames({"steps", "cold"})->Args({100, 1})->Unit(benchmark::kMicrosecond);

std::filesystem::path bench_file() { return std::filesystem::temp_directory_path() / "tfprof_bench_profile"; }

void BM_Save(benchmark::State& state) {
  Profiler p = filled_profiler(state.range(0));
  for (auto _ : state) p.save(bench_file());
  state.counters["file_bytes"] = static_cast<double>(std::filesystem::file_size(bench_file()));
}
BENCHMARK(BM_Save)->ArgName("steps")->Arg(100)->Arg(400)->Unit(benchmark::kMicrosecond);

void BM_Load(benchmark::State& state) {
  filled_profiler(state.range(0)).save(bench_file());
  for (auto _ : state) benchmark::DoNotOptimize(Profiler::load(bench_file()));
}
BENCHMARK(BM_Load)->ArgName("steps")->Arg(100)->Unit(benchmark::kMicrosecond);

void BM_Diff(benchmark::State& state) {
  const int64_t steps = state.range(0);
  Profiler a = filled_profiler(steps);
  Profiler b(mlp().graph);
  b.set_log(&quiet_log());
  for (int64_t i = steps; i < 2 * steps; ++i) b.add_step(i, mlp().steps[i % static_cast<int64_t>(mlp().steps.size())]);
  const auto dir = std::filesystem::temp_directory_path();
  a.save(dir / "tfprof_bench_diff_a");
  b.save(dir / "tfprof_bench_diff_b");
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text;
    if (state.range(1)) {
      const Profiler la = Profiler::load(dir / "tfprof_bench_diff_a");
      const Profiler lb = Profiler::load(dir / "tfprof_bench_diff_b");
      text = diff_profiles(la, lb).to_text();
    } else {
      text = diff_profiles(a, b).to_text();
    }
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["text_bytes"] = static_cast<double>(bytes);
  state.counters["file_bytes"] = static_cast<double>(std::filesystem::file_size(dir / "tfprof_bench_diff_a"));
}
BENCHMARK(BM_Diff)->ArgNames({"steps", "load"})->Args({100, 1})->Args({100, 0})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stepscope

BENCHMARK_MAIN();
