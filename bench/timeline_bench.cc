// Timelines: from a traced step's StepStats to the Chrome trace JSON string (Timeline built and
// written: what the ProfilerHook pays after each traced step), per event, and the file sizes.
//   BM_TimelineMlp/dataflow:{0,1}/memory:{0,1}        one training step of the MLP 784-256-256-10,
//                                                      batch 64 (as train_bench.cc), 2 threads
//   BM_TimelineSynthetic10k/dataflow:{0,1}/memory:{0,1} 10,000 nodes on 4 threads, 2 inputs each,
//                                                      every output allocated and freed
//   BM_TimelineSynthetic10kGzip                        the same with dataflow and memory, then gzip
// Counters: ns_per_event (time / events written), events, bytes_per_event of the .json and of the
// .json.gz (one gzip member, as write_file_atomically writes it), and the sizes in KiB.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>

#include "stepscope/graph/node_label.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/base/file_io.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

const RunMetadata& mlp_step() {
  static const RunMetadata md = [] {
    Graph g;
    Scope root(g);
    Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 784});
    Output y = placeholder(root.with_op_name("y"), DType::kInt64, Shape{-1});
    Output h = nn::dense(root.with_name_scope("dense"), x, 256, nn::Activation::relu, {.seed = 1});
    h = nn::dense(root.with_name_scope("dense"), h, 256, nn::Activation::relu, {.seed = 2});
    Output logits = nn::dense(root.with_name_scope("dense"), h, 10, nn::Activation::none, {.seed = 3});
    Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, y, logits));
    Node* train = GradientDescentOptimizer(0.1).minimize(root, loss);
    Node* init = global_variables_initializer(root);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal;
    Tensor xs(DType::kFloat32, Shape{64, 784}), ys(DType::kInt64, Shape{64});
    for (float& v : xs.flat<float>()) v = normal(rng);
    for (int64_t& v : ys.flat<int64_t>()) v = static_cast<int64_t>(rng() % 10);
    Session session(g, {.inter_op_threads = 2});
    session.run(init);
    RunOptions options;
    options.trace_level = TraceLevel::kFullTrace;
    RunMetadata out;
    for (int i = 0; i < 5; ++i) session.run({{x, xs}, {y, ys}}, {}, {train}, options, &out);
    return out;
  }();
  return md;
}

// 10,000 nodes, 4 at a time (4 threads, a round every 1.6 µs), each reading the node before it
// on its thread and one of two rounds before; each output (64x256 float) allocated at its
// node's start and freed when its last reader ends.
StepStats synthetic_step(int n) {
  StepStats st;
  st.base_ns = 1'000'000;
  st.base_wall_ns = 1'700'000'000'000'000'000;
  st.dev_stats().push_back({StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:0"), {}});
  auto& nodes = st.dev_stats()[0].node_stats;
  nodes.reserve(n);
  std::vector<std::string> names(n);
  for (int i = 0; i < n; ++i) names[i] = "model/layer_" + std::to_string(i / 100) + "/op_" + std::to_string(i);
  constexpr int64_t kDur = 1'500;
  auto start = [](int i) { return 1'000'000 + int64_t{i / 4} * 1'600 + (i % 4) * 37; };
  const char* ops[] = {"MatMul", "BiasAdd", "Relu", "Add"};
  NodeOutput out;
  out.tensor_description.shape = Shape{64, 256};
  out.tensor_description.allocation_description = {
      .requested_bytes = 65536, .allocated_bytes = 65600, .allocator_name = "cpu", .allocation_id = 0};
  st.reserve(n, n, 2 * n);
  for (int i = 0; i < n; ++i) {
    NodeExecStats ns;
    ns.node_name = StepStats::intern(names[i]);
    ns.op_type = ops[i % 4];
    std::vector<NodeLabelInput> inputs;
    if (i >= 4) inputs.push_back({.node = names[i - 4]});
    if (i >= 9) inputs.push_back({.node = names[i - 9]});
    ns.timeline_label = StepStats::intern(format_node_label(names[i], ops[i % 4], inputs));
    ns.node_id = i;
    ns.scheduled_ns = start(i) - 100;
    ns.all_start_ns = start(i);
    ns.op_end_rel_ns = ns.all_end_rel_ns = kDur;
    ns.thread_id = static_cast<uint32_t>(100 + i % 4);
    out.tensor_description.allocation_description.allocation_id = i + 1;
    ns.output = st.store_outputs(std::span(&out, 1));
    const int last_reader = i + 9 < n ? i + 9 : i + 4 < n ? i + 4 : i;
    std::vector<AllocationRecord> recs{{start(i), 65536}};
    if (last_reader > i) recs.push_back({start(last_reader) + kDur, -65536});
    const AllocatorMemoryUsed m{.allocator_name = "cpu",
                                .total_bytes = 65536,
                                .peak_bytes = 65536,
                                .live_bytes = last_reader > i ? 0 : 65536,
                                .allocation_records = st.store_records(recs),
                                .allocator_bytes_in_use = 65536 * 8};
    ns.memory = st.store_memory(std::span(&m, 1));
    nodes.push_back(ns);
  }
  return st;
}

void report(benchmark::State& state, const StepStats& st, const ChromeTraceOptions& options) {
  std::string json;
  Timeline(st).write_chrome_trace(json, options);
  const double events = static_cast<double>(nlohmann::json::parse(json)["traceEvents"].size());
  std::string gz;
  gzip_append(gz, json);
  state.counters["events"] = events;
  state.counters["ns_per_event"] =
      benchmark::Counter(events * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["json_bytes_per_event"] = static_cast<double>(json.size()) / events;
  state.counters["gz_bytes_per_event"] = static_cast<double>(gz.size()) / events;
  state.counters["json_KiB"] = static_cast<double>(json.size()) / 1024;
  state.counters["gz_KiB"] = static_cast<double>(gz.size()) / 1024;
}

void run(benchmark::State& state, const StepStats& st) {
  const ChromeTraceOptions options{.show_dataflow = state.range(0) != 0, .show_memory = state.range(1) != 0};
  std::string json;
  for (auto _ : state) {
    json.clear();
    Timeline timeline(st);
    timeline.write_chrome_trace(json, options);
    benchmark::DoNotOptimize(json.data());
  }
  report(state, st, options);
}

void BM_TimelineMlp(benchmark::State& state) { run(state, mlp_step().step_stats); }
BENCHMARK(BM_TimelineMlp)
    ->ArgNames({"dataflow", "memory"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_TimelineSynthetic10k(benchmark::State& state) {
  static const StepStats st = synthetic_step(10'000);
  run(state, st);
}
BENCHMARK(BM_TimelineSynthetic10k)
    ->ArgNames({"dataflow", "memory"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

void BM_TimelineSynthetic10kGzip(benchmark::State& state) {
  static const StepStats st = synthetic_step(10'000);
  const ChromeTraceOptions options{.show_dataflow = true, .show_memory = true};
  std::string json, gz;
  for (auto _ : state) {
    json.clear();
    gz.clear();
    Timeline(st).write_chrome_trace(json, options);
    gzip_append(gz, json);
    benchmark::DoNotOptimize(gz.data());
  }
  report(state, st, options);
  // To look at it (Perfetto, chrome://tracing): STEPSCOPE_DUMP_TRACE=/tmp/t.json timeline_bench
  if (const char* path = std::getenv("STEPSCOPE_DUMP_TRACE")) write_file_atomically(path, json);
}
BENCHMARK(BM_TimelineSynthetic10kGzip)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stepscope

BENCHMARK_MAIN();
