// Timeline: TensorFlow's timeline tests ([TL-T], reference §5.3) ported, then the layout in
// detail (pids, names, args, lanes, flows, memory) and what makes it clean for Perfetto.
#include "stepscope/profiler/timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/timeline_test_util.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

using nlohmann::json;
using testing::events;
using testing::ns_of;
using testing::traced_run;
using testing::validated;

constexpr const char* kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";

struct FlagCase {
  bool show_dataflow, show_memory;
};
constexpr FlagCase kFlagCases[] = {{true, false}, {false, false}, {true, true}, {false, true}};

std::vector<std::string> devices_of(const StepStats& st) {
  std::vector<std::string> out;
  for (const auto& d : st.dev_stats()) out.emplace_back(d.device);
  return out;
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A node of a hand-built StepStats (strings interned, so they outlive the test's temporaries).
NodeExecStats node_stats(std::string_view name, std::string_view label, int64_t start_ns, int64_t dur_ns) {
  NodeExecStats ns;
  ns.node_name = StepStats::intern(name);
  ns.timeline_label = StepStats::intern(label);
  ns.all_start_ns = start_ns;
  ns.op_end_rel_ns = dur_ns;
  ns.all_end_rel_ns = dur_ns;
  return ns;
}

// ---- [TL-T] ----

TEST(Timeline, SimpleTimeline) {
  Graph g;
  Scope s(g);
  auto c = constant(s.with_device("/cpu:0"), 1.0f);
  Session sess(g);
  RunMetadata md = traced_run(sess, {c});
  ASSERT_FALSE(md.step_stats.empty());
  Timeline tl(md.step_stats);
  validated(tl.generate_chrome_trace_format());
}

TEST(Timeline, TimelineCpu) {
  Graph g;
  Scope s(g);
  auto cpu = s.with_device("/cpu:0");
  auto a = constant(cpu, 1.0f);
  auto b = constant(cpu, 2.0f);
  auto c = add(cpu, a, b);
  auto d = mul(cpu, c, a);
  Session sess(g);
  RunMetadata md = traced_run(sess, {d});
  EXPECT_TRUE(contains(devices_of(md.step_stats), kCpu0));
  Timeline tl(md.step_stats);
  for (const auto& f : kFlagCases) validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
}

TEST(Timeline, TimelineWithRPCs) {
  // A RecvTensor as a distributed run records it: the label is not "name = Op(inputs)".
  StepStats st;
  st.dev_stats().push_back({StepStats::intern("/job:worker/replica:0/task:0/cpu:0"), {}});
  st.dev_stats()[0].node_stats.push_back(node_stats(
      "RecvTensor",
      "[1024B] edge_160_conv2/biases/read from /job:ps/replica:0/task:0/cpu:0 to /job:worker/replica:0/task:0/cpu:0",
      1'000'000, 2'000));
  st.dev_stats()[0].node_stats[0].thread_id = 1;
  Timeline tl(st);
  json j = validated(tl.generate_chrome_trace_format());
  auto xs = events(j, "X");
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0]["name"], "RecvTensor");
  EXPECT_EQ(xs[0]["args"]["op"], "RecvTensor");
  EXPECT_FALSE(xs[0]["args"].contains("input0"));
  for (const auto& f : kFlagCases) validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
}

// Variables num1 (cpu:0) and num2 (cpu:1), their sum on cpu:2. Reading a variable forwards its
// buffer (allocated when it was initialised, not in this step), so the step's allocations are
// the sum's: the maximum holds `result`, not num1/num2 as TensorFlow's estimate would say.
TEST(Timeline, AnalysisAndAllocations) {
  Graph g;
  Scope s(g);
  Variable num1 = make_variable(s.with_device("/cpu:0"), "num1", constant(s, std::vector<float>{1, 2}, Shape{2}));
  Variable num2 = make_variable(s.with_device("/cpu:1"), "num2", constant(s, std::vector<float>{3, 4}, Shape{2}));
  auto result = add(s.with_device("/cpu:2").with_op_name("result"), num1, num2);
  Session sess(g);
  sess.run(global_variables_initializer(s));
  RunMetadata md = traced_run(sess, {result});
  Timeline tl(md.step_stats);
  StepStatsAnalysis analysis = tl.analyze_step_stats();
  validated(analysis.chrome_trace);
  ASSERT_TRUE(analysis.allocator_maximums.contains("cpu"));
  const AllocationMaximum& m = analysis.allocator_maximums.at("cpu");
  EXPECT_GE(m.num_bytes, 8);
  EXPECT_GT(m.timestamp_ns, 0);
  EXPECT_TRUE(std::find(m.tensors.begin(), m.tensors.end(), "result") != m.tensors.end());
  EXPECT_TRUE(std::find(m.tensors.begin(), m.tensors.end(), "num1") == m.tensors.end());
  // Without show_memory, no maximums (as TensorFlow).
  EXPECT_TRUE(tl.analyze_step_stats(true, false).allocator_maximums.empty());
}

TEST(Timeline, ManyCPUs) {
  Graph g;
  Scope s(g);
  Variable num1 = make_variable(s.with_device("/cpu:0"), "num1", constant(s, 1.0f));
  Variable num2 = make_variable(s.with_device("/cpu:1"), "num2", constant(s, 2.0f));
  auto result = add(s.with_device("/cpu:2").with_op_name("result"), num1, num2);
  Session sess(g);
  sess.run(global_variables_initializer(s));
  RunMetadata md = traced_run(sess, {result});
  auto devices = devices_of(md.step_stats);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(contains(devices, "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i)));
  Timeline tl(md.step_stats);
  for (const auto& f : kFlagCases) {
    json j = validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
    // Device k: pids 2k+1 and 2k+2, in StepStats order.
    std::map<int, std::string> names;
    for (const auto& e : events(j, "M"))
      if (e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    EXPECT_EQ(names.at(0), "Allocators");
    for (size_t k = 0; k < devices.size(); ++k) {
      EXPECT_EQ(names.at(2 * k + 1), devices[k] + " Compute");
      EXPECT_EQ(names.at(2 * k + 2), devices[k] + " Tensors");
    }
  }
}

TEST(Timeline, EmptyStepsAndWindows) {
  StepStats empty;
  for (const auto& f : kFlagCases)
    validated(Timeline(empty).generate_chrome_trace_format(f.show_dataflow, f.show_memory));
  EXPECT_TRUE(Timeline(empty).analyze_step_stats().allocator_maximums.empty());
  validated(Timeline(std::span<const StepStats* const>{}).generate_chrome_trace_format(true, true));
  const StepStats* two[] = {&empty, &empty};
  json j = validated(Timeline(two).generate_chrome_trace_format(true, true));
  EXPECT_EQ(events(j, "X").size(), 2u);  // the two step slices
}

// ---- Layout ----

// A step by hand: x (lane 0) feeds a and b that overlap, so b opens lane 1; c on lane 0 reads
// both (a flow from b's lane). Times in ns, chosen to test the strict rule at ns precision:
// c starts exactly when a ends (not strictly after): it cannot reuse a's lane.
StepStats hand_built_step() {
  StepStats st;
  st.base_ns = 1'000'000;
  st.base_wall_ns = 1'700'000'000'000'000'000;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  auto& n = st.dev_stats()[0].node_stats;
  n.push_back(node_stats("x", "x = Placeholder()", 1'000'100, 400));  // [100, 500)
  n.push_back(node_stats("a", "a = Add(x, x)", 1'000'600, 1'000));    // [600, 1600)
  n.push_back(node_stats("b", "b = Mul(x, x)", 1'000'700, 500));      // [700, 1200): overlaps a
  n.push_back(node_stats("c", "c = AddN(a, b)", 1'001'600, 300));     // [1600, 1900): a ends at 1600
  n.push_back(node_stats("d", "d = Identity(c)", 1'001'901, 99));     // [1901, 2000)
  // Each allocates its 8-byte output when it starts; it is freed when its last reader ends.
  const int64_t freed[] = {1'001'200, 1'001'900, 1'001'900, 1'002'000, -1};
  uint32_t tid = 7;
  NodeOutput out;
  out.tensor_description.shape = Shape{2};
  out.tensor_description.allocation_description.requested_bytes = 8;
  out.tensor_description.allocation_description.allocator_name = "cpu";
  for (size_t i = 0; i < n.size(); ++i) {
    NodeExecStats& ns = n[i];
    ns.thread_id = tid++;
    out.tensor_description.allocation_description.allocation_id = static_cast<int64_t>(i + 1);
    ns.output = st.store_outputs(std::span(&out, 1));
    std::vector<AllocationRecord> records{{ns.all_start_ns, 8}};
    if (freed[i] > 0) records.push_back({freed[i], -8});
    const AllocatorMemoryUsed m{.allocator_name = "cpu",
                                .total_bytes = 8,
                                .peak_bytes = 8,
                                .live_bytes = freed[i] > 0 ? 0 : 8,
                                .allocation_records = st.store_records(records),
                                .allocator_bytes_in_use = 8};
    ns.memory = st.store_memory(std::span(&m, 1));
  }
  return st;
}

TEST(Timeline, ExactLayoutOfOps) {
  StepStats st = hand_built_step();
  Timeline tl(st);
  const std::string text = tl.generate_chrome_trace_format();
  json j = validated(text);
  // Metadata first.
  bool seen_other = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "M")
      seen_other = true;
    else
      EXPECT_FALSE(seen_other) << "metadata after other events: " << e.dump();
  }
  auto xs = events(j, "X");
  ASSERT_EQ(xs.size(), 5u);
  std::map<std::string, json> by_node;
  for (const auto& e : xs) by_node[e["args"]["name"]] = e;
  const json& a = by_node.at("a");
  EXPECT_EQ(a["cat"], "Op");
  EXPECT_EQ(a["name"], "Add");  // named by op type
  EXPECT_EQ(a["pid"], 1);
  EXPECT_EQ(a["args"]["op"], "Add");
  EXPECT_EQ(a["args"]["input0"], "x");
  EXPECT_EQ(a["args"]["input1"], "x");
  EXPECT_FALSE(a["args"].contains("input2"));
  EXPECT_EQ(a["args"]["thread_id"], 8);
  EXPECT_EQ(ns_of(a["ts"]), 600);  // relative to base_ns
  EXPECT_EQ(ns_of(a["dur"]), 1000);
  EXPECT_EQ(by_node.at("x")["args"].contains("input0"), false);
  // Lanes: x 0, a 0, b 1 (overlaps a), c 1 (a ended at 1600, not before), d 0.
  EXPECT_EQ(by_node.at("x")["tid"], 0);
  EXPECT_EQ(a["tid"], 0);
  EXPECT_EQ(by_node.at("b")["tid"], 1);
  EXPECT_EQ(by_node.at("c")["tid"], 1);
  EXPECT_EQ(by_node.at("d")["tid"], 0);
  // TensorFlow's field order.
  EXPECT_NE(text.find("{\"ph\":\"X\",\"cat\":\"Op\",\"name\":\"Add\",\"pid\":1,\"tid\":0,\"ts\":0.600,\"dur\":1.000,"
                      "\"args\":{\"name\":\"a\",\"op\":\"Add\",\"input0\":\"x\",\"input1\":\"x\""),
            std::string::npos);
  // Process and thread names, sort indices.
  std::set<std::tuple<std::string, int, int>> meta;
  for (const auto& e : events(j, "M"))
    meta.insert({e["name"].get<std::string>() + "=" + e["args"].begin().value().dump(), e["pid"].get<int>(),
                 e.contains("tid") ? e["tid"].get<int>() : -1});
  EXPECT_TRUE(meta.contains({"process_name=\"Allocators\"", 0, -1}));
  EXPECT_TRUE(meta.contains({std::string("process_name=\"") + kCpu0 + " Compute\"", 1, -1}));
  EXPECT_TRUE(meta.contains({std::string("process_name=\"") + kCpu0 + " Tensors\"", 2, -1}));
  EXPECT_TRUE(meta.contains({"process_sort_index=1", 1, -1}));
  EXPECT_TRUE(meta.contains({"thread_name=\"lane 0\"", 1, 0}));
  EXPECT_TRUE(meta.contains({"thread_name=\"lane 1\"", 1, 1}));
  EXPECT_TRUE(meta.contains({"thread_sort_index=1", 1, 1}));
  EXPECT_EQ(j["baseTimeNanoseconds"], st.base_wall_ns);
  EXPECT_EQ(j["displayTimeUnit"], "ns");  // else chrome://tracing nests sub-µs ops on whole µs
}

// Two devices: both Compute processes sort above both Tensors processes (a row per tensor would
// otherwise push the second device's ops out of sight).
TEST(Timeline, ComputeProcessesSortBeforeTensors) {
  StepStats st;
  for (const char* device :
       {"/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"}) {
    st.dev_stats().push_back({StepStats::intern(device), {}});
    st.dev_stats().back().node_stats.push_back(
        node_stats(std::string("n") + std::string(device).back(), "n = Op()", 100, 10));
  }
  const json j = validated(Timeline(st).generate_chrome_trace_format(true, true));
  std::map<std::string, int> order;  // process name -> sort index
  std::map<int, std::string> names;
  for (const auto& e : events(j, "M"))
    if (e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  for (const auto& e : events(j, "M"))
    if (e["name"] == "process_sort_index") order[names.at(e["pid"].get<int>())] = e["args"]["sort_index"];
  const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0",
                    cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";
  EXPECT_LT(order.at("Allocators"), order.at(cpu0 + " Compute"));
  EXPECT_LT(order.at(cpu0 + " Compute"), order.at(cpu1 + " Compute"));
  EXPECT_LT(order.at(cpu1 + " Compute"), order.at(cpu0 + " Tensors"));
  EXPECT_LT(order.at(cpu0 + " Tensors"), order.at(cpu1 + " Tensors"));
}

TEST(Timeline, DoesNotModifyTheStepStats) {
  StepStats st = hand_built_step();
  Timeline tl(st);
  tl.generate_chrome_trace_format(true, true);
  uint32_t tid = 7;
  for (const auto& ns : st.dev_stats()[0].node_stats) EXPECT_EQ(ns.thread_id, tid++);
}

TEST(Timeline, LanesNeverOverlapAtNanosecondPrecision) {
  // 200 nodes of random-ish overlapping extents, some sharing start or end to the ns.
  StepStats st;
  st.base_ns = 1;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  uint64_t r = 12345;
  for (int i = 0; i < 200; ++i) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t start = 1 + static_cast<int64_t>((r >> 33) % 5000);
    const int64_t dur = static_cast<int64_t>((r >> 20) % 300);
    st.dev_stats()[0].node_stats.push_back(
        node_stats("n" + std::to_string(i), "n" + std::to_string(i) + " = Op()", start, dur));
  }
  Timeline tl(st);
  json j = validated(tl.generate_chrome_trace_format());
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> lanes;
  for (const auto& e : events(j, "X")) lanes[e["tid"]].push_back({ns_of(e["ts"]), ns_of(e["ts"]) + ns_of(e["dur"])});
  EXPECT_GT(lanes.size(), 1u);
  for (auto& [tid, v] : lanes) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(v[i - 1].second, v[i].first) << "tid " << tid;
  }
}

TEST(Timeline, FlowsGoAcrossLanesOnlyAndBind) {
  StepStats st = hand_built_step();
  Timeline tl(st);
  json j = validated(tl.generate_chrome_trace_format(true, false));
  auto ss = events(j, "s");
  auto fs = events(j, "f");
  EXPECT_TRUE(events(j, "t").empty());
  // x → b twice (lane 0 → 1), a → c (0 → 1), c → d (1 → 0); x → a and b → c stay on a lane.
  ASSERT_EQ(ss.size(), 4u);
  ASSERT_EQ(fs.size(), 4u);
  std::map<int64_t, json> starts;
  for (const auto& e : ss) starts[e["id"]] = e;
  std::set<std::string> edges;
  for (const auto& f : fs) {
    EXPECT_EQ(f["cat"], "DataFlow");
    EXPECT_EQ(f["bp"], "e");
    const json& s = starts.at(f["id"]);
    EXPECT_EQ(s["name"], f["name"]);
    EXPECT_FALSE(s.contains("bp"));
    EXPECT_TRUE(s["pid"] != f["pid"] || s["tid"] != f["tid"]);
    edges.insert(s["name"].get<std::string>() + "@" + std::to_string(ns_of(s["ts"])) + "->" +
                 std::to_string(ns_of(f["ts"])));
  }
  // s 1 ns before the producer's end, f at the consumer's start.
  EXPECT_EQ(edges, (std::set<std::string>{"x@499->700", "a@1599->1600", "c@1899->1901"}));
  EXPECT_TRUE(events(validated(tl.generate_chrome_trace_format(false, false)), "s").empty());
}

TEST(Timeline, UnknownInputsAreSkippedAndPartitionSuffixesStripped) {
  // r runs on another device, so each input it finds is a flow.
  StepStats st;
  st.base_ns = 1;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  st.dev_stats().push_back({StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:1"), {}});
  st.dev_stats()[0].node_stats.push_back(node_stats("p", "p = Const()", 10, 100));
  st.dev_stats()[0].node_stats.push_back(node_stats("q", "q = Const()", 20, 100));
  st.dev_stats()[1].node_stats.push_back(node_stats("r", "r = Add(p/_3, gone, q:0)", 200, 100));
  NodeOutput out;
  out.tensor_description.allocation_description.requested_bytes = 4;
  for (auto& dev : st.dev_stats())
    for (auto& ns : dev.node_stats) ns.output = st.store_outputs(std::span(&out, 1));
  Timeline tl(st);
  json j = validated(tl.generate_chrome_trace_format());
  std::set<std::string> flows;
  for (const auto& e : events(j, "s")) flows.insert(e["name"]);
  EXPECT_EQ(flows, (std::set<std::string>{"p/_3", "q:0"}));
}

TEST(Timeline, NoFlowBackInTime) {
  // The consumer on the other device starts before its producer ends (another clock): an
  // arrow back in time is left out; the later consumer gets its arrow.
  StepStats st;
  st.base_ns = 1;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  st.dev_stats().push_back({StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:1"), {}});
  st.dev_stats()[0].node_stats.push_back(node_stats("p", "p = Const()", 100, 1000));
  st.dev_stats()[1].node_stats.push_back(node_stats("early", "early = Neg(p)", 500, 100));
  st.dev_stats()[1].node_stats.push_back(node_stats("late", "late = Neg(p)", 1200, 100));
  NodeOutput out;
  st.dev_stats()[0].node_stats[0].output = st.store_outputs(std::span(&out, 1));
  json j = validated(Timeline(st).generate_chrome_trace_format());
  auto fs = events(j, "f");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(ns_of(fs[0]["ts"]), 1199);
}

TEST(Timeline, RealTrainingStepValidatesWithEveryFlag) {
  const RunMetadata md = testing::traced_training_step();
  Timeline tl(md.step_stats);
  for (const auto& f : kFlagCases) {
    json j = validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
    EXPECT_EQ(events(j, "X").size(), md.step_stats.dev_stats()[0].node_stats.size());
    EXPECT_EQ(events(j, "C").empty(), !f.show_memory);
  }
  std::string pretty;
  tl.write_chrome_trace(pretty, {.show_dataflow = true, .show_memory = true, .pretty = true});
  validated(pretty);
}

// A real step of 4,000 tiny ops on two devices: sub-µs slices and thousands of arrows between
// devices. Clean for the validator, and (through STEPSCOPE_TRACE_CORPUS) for chrome://tracing's
// importer in the browser test, where without "displayTimeUnit":"ns" hundreds of arrows were lost.
TEST(Timeline, FourThousandTinyOpsOnTwoDevices) {
  Graph g;
  Scope s(g);
  Output x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{16});
  Output chain[2] = {x, x};
  for (int i = 0; i < 2000; ++i) {
    const Output a = add(s.with_device("/cpu:0"), chain[0], chain[1]);
    const Output b = add(s.with_device("/cpu:1"), chain[1], chain[0]);
    chain[0] = a;
    chain[1] = b;
  }
  Session sess(g, {.inter_op_threads = 2});
  const RunMetadata md = traced_run(sess, {chain[0], chain[1]}, {{x, Tensor(DType::kFloat32, Shape{16})}});
  ASSERT_EQ(md.step_stats.dev_stats().size(), 2u);
  const json j = validated(Timeline(md.step_stats, &g).generate_chrome_trace_format(true, true));
  EXPECT_EQ(events(j, "X").size(), 4001u);  // the fed x too
  EXPECT_GT(events(j, "s").size(), 2000u);
  EXPECT_EQ(events(j, "s").size(), events(j, "f").size());

  // Streamed (as a flight recorder's dump goes to its file), in pieces of the writer's buffer:
  // the same text, compact or pretty.
  const Timeline tl(md.step_stats, &g);
  for (bool pretty : {false, true}) {
    const ChromeTraceOptions options{.show_dataflow = true, .show_memory = true, .pretty = pretty};
    std::string whole, streamed;
    size_t pieces = 0;
    tl.write_chrome_trace(whole, options);
    const std::function<void(std::string_view)> write = [&](std::string_view piece) {
      streamed += piece;
      ++pieces;
    };
    tl.write_chrome_trace(write, options);
    EXPECT_EQ(streamed, whole);
    if (!pretty) {
      EXPECT_GT(pieces, 10u);  // a trace of megabytes: many pieces, none held whole
    }
  }
}

// Thousands of nodes on 4 threads (as the benchmark's step): still clean.
TEST(Timeline, ManyConcurrentNodesValidate) {
  StepStats st;
  st.base_ns = 1'000'000;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  const int n = 2000;
  auto start = [](int i) { return 1'000'000 + int64_t{i / 4} * 1'600 + (i % 4) * 37; };
  for (int i = 0; i < n; ++i) {
    const std::string name = "op" + std::to_string(i);
    std::string label = name + " = Op(";
    if (i >= 4) label += "op" + std::to_string(i - 4);
    if (i >= 9) label += ", op" + std::to_string(i - 9);
    st.dev_stats()[0].node_stats.push_back(node_stats(name, label + ")", start(i), 1'500));
    NodeOutput out;
    out.tensor_description.allocation_description = {
        .requested_bytes = 1024, .allocator_name = "cpu", .allocation_id = i + 1};
    auto& ns = st.dev_stats()[0].node_stats.back();
    ns.output = st.store_outputs(std::span(&out, 1));
    std::vector<AllocationRecord> recs{{start(i), 1024}};
    if (i + 9 < n) recs.push_back({start(i + 9) + 1'500, -1024});
    const AllocatorMemoryUsed m{.allocator_name = "cpu", .allocation_records = st.store_records(recs)};
    ns.memory = st.store_memory(std::span(&m, 1));
  }
  Timeline tl(st);
  for (const auto& f : kFlagCases) validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
  json j = validated(tl.generate_chrome_trace_format(true, true));
  EXPECT_GT(events(j, "f").size(), 1000u);
  // The maximum, from the records by hand: a node's buffer lives from its start to the end of
  // the node that reads it last (i + 9).
  int64_t most = 0;
  for (int i = 0; i < n; ++i) {
    int64_t live = 0;
    for (int j = 0; j <= i; ++j) live += j + 9 >= n || start(j + 9) + 1'500 > start(i) ? 1024 : 0;
    most = std::max(most, live);
  }
  EXPECT_EQ(tl.allocator_maximums().at("cpu").num_bytes, most);
  EXPECT_GT(most, 10 * 1024);
}

TEST(Timeline, OddNamesAreEscaped) {
  const std::string odd = std::string("we\"ird\\name\n\t\x01 \xce\xbb ") + "\xff" + "end";
  StepStats st;
  st.base_ns = 1;
  st.dev_stats().push_back({StepStats::intern(kCpu0 + std::string("\"x")), {}});
  st.dev_stats()[0].node_stats.push_back(node_stats(odd, odd + " = Op\"(in\\put)", 10, 100));
  Timeline tl(st);
  for (const auto& f : kFlagCases) {
    const std::string text = tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory);
    for (char c : text) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "raw control character";
    json j = validated(text);
    auto xs = events(j, "X");
    ASSERT_EQ(xs.size(), 1u);
    // Valid UTF-8 (λ) kept, the invalid byte replaced by U+FFFD.
    EXPECT_EQ(xs[0]["args"]["name"], std::string("we\"ird\\name\n\t\x01 \xce\xbb ") + "\xef\xbf\xbd" + "end");
    EXPECT_EQ(xs[0]["name"], "Op\"");
    EXPECT_EQ(xs[0]["args"]["input0"], "in\\put");
  }
}

TEST(Timeline, PrettyIsTensorFlowsLayoutAndParsesTheSame) {
  StepStats st = hand_built_step();
  Timeline tl(st);
  std::string pretty, compact;
  tl.write_chrome_trace(pretty, {.show_dataflow = true, .show_memory = true, .pretty = true});
  tl.write_chrome_trace(compact, {.show_dataflow = true, .show_memory = true});
  EXPECT_EQ(validated(pretty), validated(compact));
  EXPECT_EQ(pretty.rfind("{\n    \"traceEvents\": [\n        {\n            \"name\": \"process_name\",\n", 0), 0u);
  EXPECT_EQ(compact.rfind("{\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,", 0), 0u);
  EXPECT_EQ(pretty.find(" \n"), std::string::npos);  // no trailing spaces (separators "," and ": ")
  EXPECT_EQ(compact.find('\n'), std::string::npos);
}

TEST(Timeline, TimesAreMicrosecondsWithThreeDecimalsFromTheBase) {
  StepStats st = hand_built_step();
  Timeline tl(st);
  const std::string text = tl.generate_chrome_trace_format(true, true);
  std::regex field("\"(ts|dur)\":([-0-9.e+]+)");
  int count = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), field); it != std::sregex_iterator(); ++it, ++count)
    EXPECT_TRUE(std::regex_match((*it)[2].str(), std::regex("[0-9]+\\.[0-9]{3}"))) << (*it)[0];
  EXPECT_GT(count, 10);
}

// ---- Memory ----

TEST(Timeline, TensorLifetimesAndCountersComeFromTheAllocatorsRecords) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{16});
  auto a = add(s.with_op_name("a"), x, x);
  auto b = mul(s.with_op_name("b"), a, x);
  auto c = sub(s.with_op_name("c"), b, a);
  Session sess(g, {.inter_op_threads = 1});
  RunMetadata md = traced_run(sess, {c}, {{x, Tensor(DType::kFloat32, Shape{16})}});
  const StepStats& st = md.step_stats;
  Timeline tl(st);
  json j = validated(tl.generate_chrome_trace_format(true, true));

  // The records, in trace time, per node.
  std::map<std::string, std::vector<AllocationRecord>> records;
  std::vector<AllocationRecord> all;
  for (const auto& ns : st.dev_stats().at(0).node_stats)
    for (const auto& m : ns.memory)
      for (const auto& r : m.allocation_records) {
        ASSERT_EQ(m.allocator_name, "cpu");
        records[std::string(ns.node_name)].push_back({r.alloc_ns - st.base_ns, r.alloc_bytes});
        all.push_back({r.alloc_ns - st.base_ns, r.alloc_bytes});
      }
  // a and b are freed after their last reader; c is fetched (live at the end).
  ASSERT_EQ(records.at("a").size(), 2u);
  ASSERT_EQ(records.at("c").size(), 1u);
  std::map<std::string, int64_t> created, destroyed;
  std::map<int64_t, std::string> names;
  for (const auto& e : events(j, "N")) {
    created[e["name"]] = ns_of(e["ts"]);
    names[e["id"]] = e["name"];
    EXPECT_EQ(e["cat"], "Tensor");
    EXPECT_EQ(e["pid"], 2);
  }
  for (const auto& e : events(j, "D")) {
    destroyed[names.at(e["id"])] = ns_of(e["ts"]);
    EXPECT_EQ(e["tid"], 0);
  }
  for (const char* t : {"a", "b"}) {
    EXPECT_EQ(created.at(t), records.at(t)[0].alloc_ns) << t;
    EXPECT_EQ(destroyed.at(t), records.at(t)[1].alloc_ns) << t;
  }
  EXPECT_EQ(created.at("c"), records.at("c")[0].alloc_ns);
  auto os = events(j, "O");
  ASSERT_FALSE(os.empty());
  const std::string snapshot = os[0]["args"]["snapshot"]["tensor_description"];
  EXPECT_NE(snapshot.find("dtype: DT_FLOAT\nshape {\n  dim {\n    size: 16\n  }\n}\nallocation_description {\n"
                          "  requested_bytes: 64\n"),
            std::string::npos)
      << snapshot;
  EXPECT_NE(snapshot.find("  allocator_name: cpu\n"), std::string::npos);

  // The counter: 0 at the start, then the running total after each record.
  std::stable_sort(all.begin(), all.end(), [](auto& p, auto& q) { return p.alloc_ns < q.alloc_ns; });
  auto cs = events(j, "C");
  ASSERT_EQ(cs.size(), all.size() + 1);
  EXPECT_EQ(cs[0]["args"]["bytes in use"], 0);
  int64_t total = 0, max_total = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    total += all[i].alloc_bytes;
    max_total = std::max(max_total, total);
    EXPECT_EQ(cs[i + 1]["name"], "cpu memory");
    EXPECT_EQ(cs[i + 1]["cat"], "Memory");
    EXPECT_EQ(cs[i + 1]["pid"], 0);
    EXPECT_EQ(ns_of(cs[i + 1]["ts"]), all[i].alloc_ns);
    EXPECT_EQ(cs[i + 1]["args"]["bytes in use"], total);
  }
  const auto maxima = tl.allocator_maximums();
  ASSERT_TRUE(maxima.contains("cpu"));
  EXPECT_EQ(maxima.at("cpu").num_bytes, max_total);
  EXPECT_GE(maxima.at("cpu").timestamp_ns, st.base_ns);
}

TEST(Timeline, MaximumIsFirstReachedAndListsLiveTensors) {
  // p allocates 100 (freed at 500), q 100 (freed at 700), r 100 at 600: 200 at 200 and again
  // at 600; the first wins, with p and q live.
  StepStats st;
  st.base_ns = 1;
  st.dev_stats().push_back({StepStats::intern(kCpu0), {}});
  auto& n = st.dev_stats()[0].node_stats;
  auto add_node = [&](std::string name, int64_t start, std::vector<AllocationRecord> recs) {
    n.push_back(node_stats(name, name + " = Op()", start, 10));
    NodeOutput out;
    out.tensor_description.allocation_description.requested_bytes = 100;
    out.tensor_description.allocation_description.allocator_name = StepStats::intern("pool");
    n.back().output = st.store_outputs(std::span(&out, 1));
    AllocatorMemoryUsed m;
    m.allocator_name = StepStats::intern("pool");
    m.allocation_records = st.store_records(recs);
    n.back().memory = st.store_memory(std::span(&m, 1));
  };
  add_node("p", 100, {{100, 100}, {500, -100}});
  add_node("q", 200, {{200, 100}, {700, -100}});
  add_node("r", 600, {{600, 100}});
  Timeline tl(st);
  validated(tl.generate_chrome_trace_format(true, true));
  const auto m = tl.analyze_step_stats().allocator_maximums.at("pool");
  EXPECT_EQ(m.num_bytes, 200);
  EXPECT_EQ(m.timestamp_ns, 200);
  EXPECT_EQ(m.tensors, (std::vector<std::string>{"p", "q"}));
}

// ---- Windows ----

TEST(Timeline, TwoStepWindowSharesTracksAndMarksSteps) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  auto y = mul(s.with_op_name("y"), add(s.with_op_name("a"), x, x), x);
  Session sess(g);
  const FeedList feeds{{x, Tensor(DType::kFloat32, Shape{4})}};
  RunMetadata m1 = traced_run(sess, {y}, feeds);
  RunMetadata m2 = traced_run(sess, {y}, feeds);
  const StepStats* window[] = {&m1.step_stats, &m2.step_stats};
  const int64_t numbers[] = {41, 42};
  Timeline tl(window, &g, numbers);
  for (const auto& f : kFlagCases) {
    json j = validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
    std::map<int, std::string> processes;
    for (const auto& e : events(j, "M"))
      if (e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    EXPECT_EQ(processes.size(), 4u);  // Allocators, Compute, Tensors, Steps
    EXPECT_EQ(processes.at(3), "Steps");
    std::vector<json> steps, ops;
    for (const auto& e : events(j, "X")) (e["pid"] == 3 ? steps : ops).push_back(e);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0]["name"], "step 41");
    EXPECT_EQ(steps[1]["name"], "step 42");
    EXPECT_EQ(ns_of(steps[0]["ts"]), 0);
    EXPECT_LE(ns_of(steps[0]["ts"]) + ns_of(steps[0]["dur"]), ns_of(steps[1]["ts"]));
    ASSERT_EQ(ops.size(), 2 * m1.step_stats.dev_stats()[0].node_stats.size());
    for (const auto& op : ops) {
      EXPECT_EQ(op["pid"], 1);  // the same device track for both steps
      const json& st = op["args"]["step"] == 41 ? steps[0] : steps[1];
      EXPECT_GE(ns_of(op["ts"]), ns_of(st["ts"]));
      EXPECT_LE(ns_of(op["ts"]) + ns_of(op["dur"]), ns_of(st["ts"]) + ns_of(st["dur"]));
    }
  }
}

// ---- With the graph: FLOPs ----

TEST(Timeline, FlopsInArgsWhenTheGraphIsGiven) {
  Graph g;
  Scope s(g);
  // The batch dimension is unknown in the graph: the step's record of the feed says 4.
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto w = constant(s, Tensor(DType::kFloat32, Shape{3, 5}));
  auto mm = matmul(s.with_op_name("mm"), x, w);
  Session sess(g);
  RunMetadata md = traced_run(sess, {mm}, {{x, Tensor(DType::kFloat32, Shape{4, 3})}});
  json with = validated(Timeline(md.step_stats, &g).generate_chrome_trace_format());
  json without = validated(Timeline(md.step_stats).generate_chrome_trace_format());
  for (const auto& e : events(with, "X"))
    if (e["args"]["name"] == "mm") {
      EXPECT_EQ(e["args"]["flops"], 2 * 4 * 3 * 5);
      EXPECT_EQ(e["args"]["output0"], "float32[4,5]");
      EXPECT_EQ(e["args"]["output_bytes"], 4 * 5 * 4);
    }
  for (const auto& e : events(without, "X")) EXPECT_FALSE(e["args"].contains("flops"));
}

// With the graph, a node's op and inputs come from the graph, whatever its label says; without
// it (a file), from the label.
TEST(Timeline, WithTheGraphOpsAndInputsComeFromTheGraphNotTheLabels) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2, 3});
  auto w = constant(s.with_op_name("w"), Tensor(DType::kFloat32, Shape{3, 5}));
  auto mm = matmul(s.with_op_name("mm"), x, w);
  Session sess(g);
  const RunMetadata md = traced_run(sess, {mm}, {{x, Tensor(DType::kFloat32, Shape{2, 3})}});
  auto args_of_mm = [](const json& trace) {
    for (const auto& e : events(trace, "X"))
      if (e["args"]["name"] == "mm") return e;
    ADD_FAILURE() << "no slice of mm";
    return json();
  };
  // The labels as the executor wrote them: both ways agree.
  json from_labels = args_of_mm(validated(Timeline(md.step_stats).generate_chrome_trace_format()));
  EXPECT_EQ(from_labels["name"], "MatMul");
  EXPECT_EQ(from_labels["args"]["input0"], "x");
  EXPECT_EQ(from_labels["args"]["input1"], "w");
  for (std::string_view label : {"", "mm = Bogus(nothing, ^x)"}) {
    StepStats st = md.step_stats;
    for (auto& dev : st.dev_stats())
      for (auto& ns : dev.node_stats) ns.timeline_label = StepStats::intern(label);
    json with = args_of_mm(validated(Timeline(st, &g).generate_chrome_trace_format()));
    EXPECT_EQ(with["name"], "MatMul") << label;
    EXPECT_EQ(with["args"]["input0"], "x") << label;
    EXPECT_EQ(with["args"]["input1"], "w") << label;
    EXPECT_FALSE(with["args"].contains("input2")) << label;
    json without = args_of_mm(validated(Timeline(st).generate_chrome_trace_format()));
    if (label.empty()) {
      EXPECT_EQ(without["name"], "MatMul");  // the recorded op_type
      EXPECT_FALSE(without["args"].contains("input0"));
    } else {
      EXPECT_EQ(without["name"], "Bogus");
      EXPECT_EQ(without["args"]["input0"], "nothing");
      EXPECT_EQ(without["args"]["input1"], "^x");
    }
  }
}

// Fed nodes are in a traced step: slices of no length at the step's start with the fed shapes,
// one lane each (a lane's last slice must end strictly before the next starts, TensorFlow's
// rule); the ops keep their lanes, an arrow from a feed on another lane binds, the trace is clean.
TEST(Timeline, FedNodesAreSlicesOfNoLengthAtTheStepsStart) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto y = placeholder(s.with_op_name("y"), DType::kFloat32, Shape{-1, 2});
  auto mm = matmul(s.with_op_name("mm"), x, constant(s, Tensor(DType::kFloat32, Shape{3, 2})));
  auto sum = add(s.with_op_name("sum"), mm, y);
  Session sess(g, {.inter_op_threads = 1});
  RunMetadata md =
      traced_run(sess, {sum}, {{x, Tensor(DType::kFloat32, Shape{4, 3})}, {y, Tensor(DType::kFloat32, Shape{4, 2})}});
  for (const Graph* graph : {static_cast<const Graph*>(&g), static_cast<const Graph*>(nullptr)}) {
    Timeline tl(md.step_stats, graph);
    for (const auto& f : kFlagCases) validated(tl.generate_chrome_trace_format(f.show_dataflow, f.show_memory));
    json j = validated(tl.generate_chrome_trace_format(true, true));
    std::map<std::string, json> ops;
    for (const auto& e : events(j, "X")) ops[e["args"]["name"]] = e;
    ASSERT_EQ(ops.size(), 5u) << j.dump();  // x, y, the constant, mm, sum
    for (const char* fed : {"x", "y"}) {
      const json& e = ops.at(fed);
      EXPECT_EQ(e["name"], "Placeholder");
      EXPECT_EQ(ns_of(e["ts"]), 0);  // the trace starts with the step
      EXPECT_EQ(ns_of(e["dur"]), 0);
      EXPECT_FALSE(e["args"].contains("input0"));
    }
    EXPECT_EQ(ops.at("x")["args"]["output0"], "float32[4,3]");
    EXPECT_EQ(ops.at("x")["args"]["output_bytes"], 48);
    EXPECT_EQ(ops.at("y")["args"]["output0"], "float32[4,2]");
    EXPECT_NE(ops.at("x")["tid"], ops.at("y")["tid"]);
    // One thread ran the ops, one after another: all on the first lane.
    EXPECT_EQ(ops.at("mm")["tid"], 0);
    EXPECT_EQ(ops.at("sum")["tid"], 0);
    if (graph) {
      EXPECT_EQ(ops.at("mm")["args"]["flops"], 2 * 4 * 3 * 2);
    }
    // y → sum crosses lanes: the arrow leaves y's slice at its only instant.
    bool from_y = false;
    for (const auto& e : events(j, "s"))
      if (e["name"] == "y") {
        from_y = true;
        EXPECT_EQ(e["tid"], ops.at("y")["tid"]);
        EXPECT_EQ(ns_of(e["ts"]), 0);
      }
    EXPECT_TRUE(from_y);
    // The fed tensors' objects live from the step's start to their last use.
    bool x_object = false;
    for (const auto& e : events(j, "N")) x_object |= e["name"] == "x";
    EXPECT_TRUE(x_object);
  }
}

}  // namespace
}  // namespace stepscope
