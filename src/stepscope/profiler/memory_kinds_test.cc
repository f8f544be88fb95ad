#include "stepscope/profiler/memory_kinds.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "stepscope/base/error.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

// A dense layer 8 -> 16 -> 4 trained with Adam, traced: every kind of memory is there.
struct AdamMlp {
  Graph graph;
  Node* train = nullptr;
  Output x, y;
  AdamMlp() {
    Scope root(graph);
    get_or_create_global_step(root);
    x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
    y = placeholder(root.with_op_name("y"), DType::kInt32, Shape{-1});
    Output h = nn::dense(root.with_name_scope("hidden"), x, 16, nn::Activation::relu, {.seed = 1});
    Output logits = nn::dense(root.with_name_scope("logits"), h, 4, nn::Activation::none, {.seed = 2});
    Output loss = reduce_mean(root.with_name_scope("loss"), sparse_softmax_cross_entropy_with_logits(root, y, logits));
    train = AdamOptimizer(0.01).minimize(root, loss, get_global_step(graph));
  }
  // One traced training step on a batch of `rows` (a session made, and initialized, at the first).
  RunMetadata traced_step(int64_t rows) {
    if (!session) {
      session = std::make_unique<Session>(graph);
      session->run(global_variables_initializer(Scope(graph)));
    }
    Tensor xs(DType::kFloat32, Shape{rows, 8});
    for (float& v : xs.flat<float>()) v = 0.5f;
    Tensor ys(DType::kInt32, Shape{rows});
    for (int32_t& v : ys.flat<int32_t>()) v = 1;
    RunOptions traced;
    traced.trace_level = TraceLevel::kFullTrace;
    RunMetadata metadata;
    session->run({{x, xs}, {y, ys}}, {}, {train}, traced, &metadata);
    return metadata;
  }
  std::unique_ptr<Session> session;
};

TEST(MemoryKinds, TheGraphSaysWhichNodeHoldsWhat) {
  AdamMlp m;
  auto kind = [&](const char* name) { return memory_kind(m.graph, *m.graph.find_node(name)); };
  EXPECT_EQ(kind("hidden/kernel"), MemoryKind::kParameters);
  EXPECT_EQ(kind("hidden/kernel/Adam"), MemoryKind::kOptimizerSlots);
  EXPECT_EQ(kind("hidden/kernel/Adam_1"), MemoryKind::kOptimizerSlots);
  EXPECT_EQ(kind("global_step"), MemoryKind::kOther);
  EXPECT_EQ(kind("hidden/MatMul"), MemoryKind::kActivations);
  EXPECT_EQ(kind("gradients/hidden/MatMul_grad/MatMul"), MemoryKind::kGradients);
  EXPECT_STREQ(memory_kind_name(MemoryKind::kOptimizerSlots), "optimizer_slots");
}

TEST(MemoryKinds, AStepsPeakSplitsExactlyIntoTheKinds) {
  AdamMlp m;
  const RunMetadata metadata = m.traced_step(32);

  const MemoryByKind memory = memory_by_kind(m.graph, metadata.step_stats);
  // Parameters: (8*16 + 16 + 16*4 + 4) floats; Adam keeps two slots of each.
  const int64_t params = (8 * 16 + 16 + 16 * 4 + 4) * 4;
  EXPECT_EQ(memory.of(MemoryKind::kParameters), params);
  EXPECT_EQ(memory.of(MemoryKind::kOptimizerSlots), 2 * params);
  EXPECT_GT(memory.of(MemoryKind::kActivations) + memory.of(MemoryKind::kGradients), 0);
  EXPECT_GT(memory.transient_peak_bytes, 0);
  EXPECT_GE(memory.peak_time_ns, 0);
  int64_t sum = 0;
  for (int64_t b : memory.bytes) sum += b;
  EXPECT_EQ(sum, memory.peak_bytes);
  EXPECT_EQ(memory.peak_bytes, memory.persistent_bytes + memory.transient_peak_bytes);
  const auto json = nlohmann::json::parse(memory.to_json());
  EXPECT_EQ(json["parameters"], params);
  EXPECT_EQ(json["optimizer_slots"], 2 * params);
  EXPECT_EQ(memory.to_text().rfind("Peak memory ", 0), 0u);
  EXPECT_NE(memory.to_text().find("optimizer slots 1.66 KB"), std::string::npos) << memory.to_text();
}

// The breakdown from Timeline's allocator maximums, as memory_by_kind worked it out before it
// paired the records itself: the reference it must match.
MemoryByKind by_timeline(const Graph& graph, const StepStats& step) {
  MemoryByKind expected = memory_by_kind(graph, StepStats());  // the variables
  for (const auto& [allocator, maximum] : Timeline(step, &graph).allocator_maximums()) {
    expected.transient_peak_bytes += maximum.num_bytes;
    if (expected.peak_time_ns < 0 || maximum.timestamp_ns < expected.peak_time_ns)
      expected.peak_time_ns = maximum.timestamp_ns;
    int64_t attributed = maximum.untracked_bytes;
    expected.bytes[static_cast<size_t>(MemoryKind::kOther)] += maximum.untracked_bytes;
    for (const auto& [tensor, bytes] : maximum.tensor_bytes) {
      const Node* node = graph.find_node(tensor.substr(0, tensor.rfind(':')));
      expected.bytes[static_cast<size_t>(node ? memory_kind(graph, *node) : MemoryKind::kOther)] += bytes;
      attributed += bytes;
    }
    if (maximum.num_bytes > attributed)
      expected.bytes[static_cast<size_t>(MemoryKind::kOther)] += maximum.num_bytes - attributed;
  }
  expected.peak_bytes = expected.persistent_bytes + expected.transient_peak_bytes;
  return expected;
}

void expect_same(const MemoryByKind& got, const MemoryByKind& want, const std::string& what) {
  EXPECT_EQ(got.to_json(), want.to_json()) << what;
  EXPECT_EQ(got.peak_time_ns, want.peak_time_ns) << what;
}

// memory_by_kind pairs the allocation records itself (without a Timeline): the same peaks,
// times and kinds as the Timeline's memory counters, on real steps of one and two threads, batch
// sizes that change which buffer is biggest, and a hand-made step with what files can hold: two
// allocators, a free of a buffer from before the step, frees and allocations at one instant on
// two nodes, a node the graph does not have, an output in no buffer of its size.
TEST(MemoryKinds, TheStepsPeakIsTheTimelinesMemoryPeak) {
  AdamMlp m;
  for (const int64_t rows : {1, 7, 32}) {
    const RunMetadata metadata = m.traced_step(rows);
    expect_same(memory_by_kind(m.graph, metadata.step_stats), by_timeline(m.graph, metadata.step_stats),
                "rows " + std::to_string(rows));
  }
  AdamMlp two;
  two.session = std::make_unique<Session>(two.graph, SessionOptions{.inter_op_threads = 2});
  two.session->run(global_variables_initializer(Scope(two.graph)));
  for (int run = 0; run < 3; ++run) {
    const RunMetadata metadata = two.traced_step(16);
    expect_same(memory_by_kind(two.graph, metadata.step_stats), by_timeline(two.graph, metadata.step_stats),
                "two threads, run " + std::to_string(run));
  }

  StepStats step;
  step.base_ns = 1000;
  step.dev_stats().emplace_back().device = StepStats::intern("/cpu:0");
  const auto node = [&](const char* name, int64_t start, std::vector<AllocationRecord> cpu,
                        std::vector<AllocationRecord> gpu, std::vector<std::pair<const char*, int64_t>> outputs) {
    NodeExecStats ns;
    ns.node_name = StepStats::intern(name);
    ns.node_id = -1;
    ns.all_start_ns = start;
    ns.all_end_rel_ns = 5;
    std::vector<AllocatorMemoryUsed> memory;
    for (auto [allocator, records] : {std::pair{"cpu", &cpu}, std::pair{"gpu", &gpu}}) {
      if (records->empty()) continue;
      AllocatorMemoryUsed used;
      used.allocator_name = StepStats::intern(allocator);
      // store_memory stores the records: a view into the step's own array would dangle when it grows.
      used.allocation_records = *records;
      memory.push_back(used);
    }
    ns.memory = step.store_memory(memory);
    std::vector<NodeOutput> outs;
    for (auto [allocator, bytes] : outputs) {
      NodeOutput& o = outs.emplace_back();
      o.slot = static_cast<int32_t>(outs.size() - 1);
      o.tensor_description.allocation_description.allocator_name = StepStats::intern(allocator);
      o.tensor_description.allocation_description.requested_bytes = bytes;
    }
    ns.output = step.store_outputs(outs);
    step.dev_stats().back().node_stats.push_back(ns);
  };
  node("hidden/MatMul", 1000, {{1000, 64}, {1000, 16}, {1003, -16}}, {{1000, 256}}, {{"cpu", 64}, {"gpu", 256}});
  node("gradients/hidden/MatMul_grad/MatMul", 1010, {{1010, 32}, {1010, -64}, {1010, -999}}, {}, {{"cpu", 32}});
  node("not_in_the_graph", 1010, {{1010, 64}}, {{1010, -256}, {1012, 128}}, {{"cpu", 64}, {"cpu", 8}});
  node("hidden/kernel/Adam", 1020, {{1020, 48}, {1021, 48}}, {}, {{"cpu", 48}});
  const MemoryByKind got = memory_by_kind(m.graph, step);
  expect_same(got, by_timeline(m.graph, step), "the hand-made step");
  EXPECT_GT(got.of(MemoryKind::kGradients), 0);
  EXPECT_GT(got.of(MemoryKind::kActivations), 0);

  // The same peak reached twice: the first counts (its time, and the buffer live then).
  step = StepStats();
  step.base_ns = 2000;
  step.dev_stats().emplace_back().device = StepStats::intern("/cpu:0");
  node("hidden/MatMul", 2000, {{2000, 64}, {2003, -64}}, {}, {{"cpu", 64}});
  node("gradients/hidden/MatMul_grad/MatMul", 2010, {{2010, 64}}, {}, {{"cpu", 64}});
  const MemoryByKind twice = memory_by_kind(m.graph, step);
  expect_same(twice, by_timeline(m.graph, step), "a peak reached twice");
  EXPECT_EQ(twice.peak_time_ns, 2000);
  EXPECT_EQ(twice.transient_peak_bytes, 64);
  EXPECT_EQ(twice.of(MemoryKind::kActivations), 64);
  EXPECT_EQ(twice.of(MemoryKind::kGradients), 0);

  // Records far out of time order (a node recorded after 40 others but started before them):
  // the points are sorted in full, not only nudged.
  step = StepStats();
  step.base_ns = 3000;
  step.dev_stats().emplace_back().device = StepStats::intern("/cpu:0");
  for (int i = 0; i < 40; ++i)
    node(i % 2 ? "hidden/MatMul" : "gradients/hidden/MatMul_grad/MatMul", 3001 + i, {{3001 + i, 8}, {3002 + i, -8}}, {},
         {{"cpu", 8}});
  node("hidden/BiasAdd", 2990, {{2990, 64}, {3020, -64}}, {}, {{"cpu", 64}});
  const MemoryByKind late = memory_by_kind(m.graph, step);
  expect_same(late, by_timeline(m.graph, step), "records far out of order");
  EXPECT_EQ(late.transient_peak_bytes, 72);
}

TEST(MemoryKinds, AStepWithoutMemoryRecordsHasOnlyTheVariables) {
  AdamMlp m;
  const MemoryByKind memory = memory_by_kind(m.graph, StepStats());
  EXPECT_EQ(memory.transient_peak_bytes, 0);
  EXPECT_EQ(memory.peak_time_ns, -1);
  EXPECT_EQ(memory.peak_bytes, memory.persistent_bytes);
  EXPECT_EQ(memory.of(MemoryKind::kGradients), 0);
}

// The profile works the breakdown out when a step is added (it has the graph then) and keeps it
// in its file ('B' chunks), so a loaded profile, which has no graph, still has it.
TEST(MemoryKinds, AProfileKeepsEachStepsBreakdown) {
  AdamMlp m;
  Profiler profiler(m.graph);
  for (int step = 1; step <= 2; ++step) profiler.add_step(step, m.traced_step(4));
  ASSERT_TRUE(profiler.memory_by_kind(2).has_value());
  EXPECT_FALSE(profiler.memory_by_kind(3).has_value());
  const int64_t params = (8 * 16 + 16 + 16 * 4 + 4) * 4;
  EXPECT_EQ(profiler.memory_by_kind(2)->of(MemoryKind::kParameters), params);

  testing::TempDir dir;
  const std::string path = dir.file("profile");
  profiler.save(path);
  const Profiler loaded = Profiler::load(path);
  for (int64_t step : {1, 2}) {
    ASSERT_TRUE(loaded.memory_by_kind(step).has_value()) << step;
    EXPECT_EQ(loaded.memory_by_kind(step)->to_json(), profiler.memory_by_kind(step)->to_json());
  }
  // A 'B' chunk for a step the file does not have is corruption, named. Walk the chunks (tag,
  // u32 size, payload, u32 CRC) to the first 'B', point it at step 7 (zigzag 14) and fix its CRC.
  std::string bytes = profiler.serialize_to_string();
  size_t at = 12;  // magic and version
  auto u32 = [&](size_t i) {
    uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[i + k]);
    return v;
  };
  while (at < bytes.size() && bytes[at] != 'B') at += 1 + 4 + u32(at + 1) + 4;
  ASSERT_LT(at, bytes.size());
  const uint32_t size = u32(at + 1);
  bytes[at + 5] = 14;
  const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + at + 5), size));
  for (int k = 0; k < 4; ++k) bytes[at + 5 + size + k] = static_cast<char>((crc >> (8 * k)) & 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  try {
    Profiler::load(path);
    FAIL() << "loaded a corrupt profile";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find("memory chunk of step 7 without its step chunk"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepscope
