// Memory views of RunMetadata written the way TensorFlow writes it: no allocation records, each
// node's outputs with an allocation description, allocator totals and memory stats. The
// timeline then derives tensor lifetimes, counters and maximums from the outputs, as TensorFlow's
// timeline.py does (reference §5.2, steps 4 and 6).
#include <gtest/gtest.h>

#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/profiler/timeline_test_util.h"

namespace stepscope {
namespace {

using nlohmann::json;
using testing::tf_run_metadata;
using testing::TfNode;

// x (400 B) -> y = MatMul(x, x) (800 B) -> z = Relu(y) (800 B) -> w = Sum(z) (4 B). TensorFlow's
// lifetimes: from the producer's start to the last consumer's end - 1 µs (or the producer's end).
const std::vector<TfNode> kNodes = {{"x", "VariableV2", {}, 100, 10, 400},
                                    {"y", "MatMul", {"x", "x"}, 120, 50, 800},
                                    {"z", "Relu", {"y"}, 200, 20, 800},
                                    {"w", "Sum", {"z"}, 300, 5, 4}};

TEST(TimelineMemory, TensorFlowsRunMetadataGetsCountersFromItsOutputs) {
  const RunMetadata md = parse_run_metadata(tf_run_metadata(kNodes));
  ASSERT_EQ(md.step_stats.dev_stats().size(), 1u);
  for (const auto& ns : md.step_stats.dev_stats()[0].node_stats) {
    ASSERT_EQ(ns.memory.size(), 1u);
    EXPECT_TRUE(ns.memory[0].allocation_records.empty());  // as TensorFlow writes it
  }
  Timeline tl(md.step_stats);
  const json trace = testing::validated(tl.generate_chrome_trace_format(true, true));

  // The running total of allocator "cpu": +x@100, +y@120, -x@169, +z@200, -y@219, +w@300,
  // -z@304, -w@305 µs.
  std::vector<int64_t> totals;
  std::vector<int64_t> times;
  for (const json& c : testing::events(trace, "C")) {
    if (c["name"] != "cpu memory") continue;
    totals.push_back(c["args"]["bytes in use"].get<int64_t>());
    times.push_back(testing::ns_of(c["ts"]) / 1000);
  }
  ASSERT_EQ(totals, (std::vector<int64_t>{0, 400, 1200, 800, 1600, 800, 804, 4, 0}));
  const std::vector<int64_t> offsets{100, 100, 120, 169, 200, 219, 300, 304, 305};
  for (size_t i = 1; i < times.size(); ++i) EXPECT_EQ(times[i] - times[1], offsets[i] - offsets[1]) << i;

  // Each tensor an object created at its producer's start and deleted at its last use.
  std::map<std::string, std::pair<int64_t, int64_t>> life;
  for (const json& e : testing::events(trace, "N")) life[e["name"]].first = testing::ns_of(e["ts"]) / 1000;
  for (const json& e : testing::events(trace, "D")) life[e["name"]].second = testing::ns_of(e["ts"]) / 1000;
  ASSERT_EQ(life.size(), 4u);
  EXPECT_EQ(life["y"].second - life["y"].first, 219 - 120);
  EXPECT_EQ(life["x"].second - life["x"].first, 169 - 100);
  EXPECT_EQ(life["w"].second - life["w"].first, 305 - 300);
  EXPECT_EQ(testing::events(trace, "O").size(), 4u);

  // The maximum: 1600 B when z was allocated, with y and z live (first reached wins).
  const StepStatsAnalysis analysis = tl.analyze_step_stats();
  ASSERT_TRUE(analysis.allocator_maximums.contains("cpu"));
  const AllocationMaximum& m = analysis.allocator_maximums.at("cpu");
  EXPECT_EQ(m.num_bytes, 1600);
  EXPECT_EQ(m.tensors, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(m.timestamp_ns - md.step_stats.dev_stats()[0].node_stats[0].all_start_ns, 100'000);
}

// At equal times frees come first (TensorFlow's tuple sort), so back-to-back tensors of one size
// do not count twice.
TEST(TimelineMemory, FreesBeforeAllocationsAtTheSameTime) {
  // a (no consumer) is freed when it ends, at 200 µs, the moment c is allocated.
  const std::vector<TfNode> nodes = {
      {"a", "Const", {}, 100, 100, 1000}, {"b", "Const", {}, 150, 10, 8}, {"c", "Const", {}, 200, 10, 1000}};
  const RunMetadata md = parse_run_metadata(tf_run_metadata(nodes));
  const auto max = Timeline(md.step_stats).analyze_step_stats().allocator_maximums.at("cpu");
  EXPECT_EQ(max.num_bytes, 1008);  // a + b; at 200 µs a is freed before c is counted: never 2000
  EXPECT_EQ(max.tensors, (std::vector<std::string>{"a", "b"}));
}

// A step with allocation records keeps using them: its counters do not change when the outputs'
// descriptions are taken away.
TEST(TimelineMemory, RecordsWinOverOutputs) {
  const RunMetadata md = testing::traced_training_step();
  auto cpu_counters = [](const StepStats& st) {
    const json trace = testing::validated(Timeline(st).generate_chrome_trace_format(true, true));
    std::vector<int64_t> totals;
    for (const json& c : testing::events(trace, "C"))
      if (c["name"] == "cpu memory") totals.push_back(c["args"]["bytes in use"].get<int64_t>());
    return totals;
  };
  StepStats without_outputs = md.step_stats;
  for (auto& dev : without_outputs.dev_stats())
    for (auto& ns : dev.node_stats) ns.output = {};
  const std::vector<int64_t> from_records = cpu_counters(md.step_stats);
  EXPECT_GT(from_records.size(), 4u);
  EXPECT_EQ(cpu_counters(without_outputs), from_records);
}

}  // namespace
}  // namespace stepscope
