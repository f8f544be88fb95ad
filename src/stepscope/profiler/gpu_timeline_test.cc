// A step with GPU lanes, made without a GPU: a CPU step traced for real, with the GPU devices
// add_gpu_activity makes from recorded kernels and copies correlated to its ops. Timelines draw
// them as processes of their own with TensorFlow's names, op_time moves the ops to their
// kernels, tfprof counts stream:all as accelerator time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/gpu_activity.h"
#include "stepscope/profiler/op_time.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/profiler/timeline_test_util.h"

namespace stepscope {
namespace {

using stepscope::testing::validated;
using ::testing::Contains;

constexpr int64_t kUs = 1000;

struct GpuStep {
  Graph g;
  Output x, mm, act;
  RunMetadata md;
  const NodeExecStats* cpu_mm = nullptr;
  const NodeExecStats* cpu_act = nullptr;
  int64_t kernel_start = 0, kernel_end = 0;  // the MatMul's kernels, on the step's clock

  GpuStep() {
    Scope root(g);
    x = constant(root.with_op_name("x"), std::vector<float>(32, 0.5f), Shape{4, 8});
    Output w = constant(root.with_op_name("w"), std::vector<float>(24, 0.25f), Shape{8, 3});
    mm = matmul(root.with_op_name("mm"), x, w);
    act = relu(root.with_op_name("act"), mm);
    Session session(g, {.inter_op_threads = 1});
    md = testing::traced_run(session, {act});
    StepStats& st = md.step_stats;
    for (const NodeExecStats& ns : st.dev_stats().at(0).node_stats) {
      if (ns.node_name == "mm") cpu_mm = &ns;
      if (ns.node_name == "act") cpu_act = &ns;
    }
    // What CUPTI would report: the MatMul's two kernels on stream 7 (the GEMM and a small
    // epilogue), the Relu's on stream 7 after them, the input's copy before, one kernel of no
    // known op; the GPU's clock is 1 s behind the step's.
    const int64_t offset = 1'000'000'000;
    const int64_t t = cpu_mm->all_start_ns - offset;
    GpuCorrelationMap launches;
    launches.add(1, "x", "Const", x.node->id(), cpu_mm->all_start_ns - 500, cpu_mm->thread_id);
    launches.add(2, "mm", "MatMul", mm.node->id(), cpu_mm->all_start_ns, cpu_mm->thread_id);
    launches.add(3, "mm", "MatMul", mm.node->id(), cpu_mm->all_start_ns + 10, cpu_mm->thread_id);
    launches.add(4, "act", "Relu", act.node->id(), cpu_act->all_start_ns, cpu_act->thread_id);
    std::vector<GpuActivity> records(5);
    records[0] = {.kind = GpuActivityKind::kMemcpy,
                  .start_ns = t - 3 * kUs,
                  .end_ns = t - kUs,
                  .stream_id = 7,
                  .correlation_id = 1,
                  .name = "",
                  .bytes = 128,
                  .copy_kind = GpuCopyKind::kHtoD,
                  .async = true};
    records[1] = {.kind = GpuActivityKind::kKernel,
                  .start_ns = t + 2 * kUs,
                  .end_ns = t + 40 * kUs,
                  .stream_id = 7,
                  .correlation_id = 2,
                  .name = "volta_sgemm_32x32_nn"};
    records[2] = {.kind = GpuActivityKind::kKernel,
                  .start_ns = t + 41 * kUs,
                  .end_ns = t + 45 * kUs,
                  .stream_id = 7,
                  .correlation_id = 3,
                  .name = "splitKreduce_kernel"};
    records[3] = {.kind = GpuActivityKind::kKernel,
                  .start_ns = t + 46 * kUs,
                  .end_ns = t + 50 * kUs,
                  .stream_id = 7,
                  .correlation_id = 4,
                  .name = "relu_kernel"};
    records[4] = {.kind = GpuActivityKind::kKernel,
                  .start_ns = t + 51 * kUs,
                  .end_ns = t + 52 * kUs,
                  .stream_id = 9,
                  .correlation_id = 99,
                  .name = "cudnn_orphan"};
    kernel_start = t + 2 * kUs + offset;
    kernel_end = t + 45 * kUs + offset;
    add_gpu_activity(st, records, launches, offset);
    // The CPU nodes' pointers stay valid: add_gpu_activity appends devices, dev_stats may move.
    for (const NodeExecStats& ns : st.dev_stats().at(0).node_stats) {
      if (ns.node_name == "mm") cpu_mm = &ns;
      if (ns.node_name == "act") cpu_act = &ns;
    }
  }
};

std::map<std::string, int> pids_by_process_name(const nlohmann::json& trace) {
  std::map<std::string, int> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") out[e["args"]["name"]] = e["pid"];
  return out;
}

std::vector<nlohmann::json> ops_on(const nlohmann::json& trace, int pid) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid) out.push_back(e);
  return out;
}

void expect_gpu_lanes(const std::string& chrome_trace) {
  const nlohmann::json trace = validated(chrome_trace);
  const auto pids = pids_by_process_name(trace);
  ASSERT_TRUE(pids.count("/job:localhost/replica:0/task:0/device:CPU:0 Compute"));
  ASSERT_TRUE(pids.count("/device:GPU:0/stream:all Compute"));
  ASSERT_TRUE(pids.count("/device:GPU:0/stream:7 Compute"));
  ASSERT_TRUE(pids.count("/device:GPU:0/stream:9 Compute"));
  ASSERT_TRUE(pids.count("/device:GPU:0/memcpy Compute"));
  // Kernels: named by their op's type, args.name the op's name (TensorFlow's "<name>:<op>" split).
  const auto all = ops_on(trace, pids.at("/device:GPU:0/stream:all Compute"));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]["name"], "MatMul");
  EXPECT_EQ(all[0]["args"]["name"], "mm");
  EXPECT_EQ(all[0]["args"]["op"], "MatMul");
  EXPECT_EQ(all[1]["name"], "MatMul");
  EXPECT_EQ(all[2]["name"], "Relu");
  EXPECT_EQ(all[2]["args"]["name"], "act");
  EXPECT_EQ(all[3]["args"]["name"], "cudnn_orphan");
  EXPECT_FALSE(all[0]["args"].contains("input0"));  // kernels have no dataflow inputs
  const auto copies = ops_on(trace, pids.at("/device:GPU:0/memcpy Compute"));
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]["name"], "MEMCPYHtoD");
  EXPECT_EQ(copies[0]["args"]["name"], "x");
  EXPECT_DOUBLE_EQ(copies[0]["dur"].get<double>(), 2.0);
  // The ops are still drawn on the CPU as they ran there.
  std::vector<std::string> cpu_ops;
  for (const auto& e : ops_on(trace, pids.at("/job:localhost/replica:0/task:0/device:CPU:0 Compute")))
    cpu_ops.push_back(e["args"]["name"]);
  EXPECT_THAT(cpu_ops, Contains("mm"));
}

TEST(GpuTimeline, GpuDevicesAreProcessesOfTheirOwnWithTensorFlowsNames) {
  GpuStep s;
  expect_gpu_lanes(Timeline(s.md.step_stats, &s.g).generate_chrome_trace_format(true, true));
  // Read back from a file: no graph, the same names.
  expect_gpu_lanes(Timeline(s.md.step_stats).generate_chrome_trace_format(true, false));
}

// Saved in TensorFlow's wire format and read back (another machine, later): the same lanes.
TEST(GpuTimeline, GpuDevicesSurviveARunMetadataFile) {
  GpuStep s;
  const RunMetadata back = parse_run_metadata(serialize_run_metadata(s.md));
  ASSERT_EQ(back.step_stats.dev_stats().size(), s.md.step_stats.dev_stats().size());
  for (size_t d = 0; d < back.step_stats.dev_stats().size(); ++d) {
    const DeviceStepStats &a = s.md.step_stats.dev_stats()[d], &b = back.step_stats.dev_stats()[d];
    EXPECT_EQ(a.device, b.device);
    ASSERT_EQ(a.node_stats.size(), b.node_stats.size());
    for (size_t i = 0; i < a.node_stats.size(); ++i) {
      EXPECT_EQ(a.node_stats[i].node_name, b.node_stats[i].node_name);
      EXPECT_EQ(a.node_stats[i].timeline_label, b.node_stats[i].timeline_label);
      EXPECT_EQ(a.node_stats[i].all_start_ns, b.node_stats[i].all_start_ns);
    }
  }
  expect_gpu_lanes(Timeline(back.step_stats).generate_chrome_trace_format(true, false));
}

TEST(GpuTimeline, OpTimeMovesOpsToTheirKernels) {
  GpuStep s;
  const int64_t cpu_start = s.cpu_mm->all_start_ns, cpu_end = cpu_start + s.cpu_mm->all_end_rel_ns;
  auto mm_of = [](const StepStats& st) {
    for (const NodeExecStats& ns : st.dev_stats().at(0).node_stats)
      if (ns.node_name == "mm") return ns;
    ADD_FAILURE() << "no mm";
    return NodeExecStats{};
  };
  const NodeExecStats schedule = mm_of(apply_op_time(s.md.step_stats, OpTime::kSchedule));
  EXPECT_EQ(schedule.all_start_ns, cpu_start);
  EXPECT_EQ(schedule.all_start_ns + schedule.all_end_rel_ns, cpu_end);
  const NodeExecStats all = mm_of(apply_op_time(s.md.step_stats, OpTime::kAll));
  EXPECT_EQ(all.all_start_ns, cpu_start);
  EXPECT_EQ(all.all_start_ns + all.all_end_rel_ns, std::max(cpu_end, s.kernel_end));
  const NodeExecStats gpu = mm_of(apply_op_time(s.md.step_stats, OpTime::kGpu));
  EXPECT_EQ(gpu.all_start_ns, s.kernel_start);
  EXPECT_EQ(gpu.all_start_ns + gpu.all_end_rel_ns, std::max(cpu_end, s.kernel_end));
  EXPECT_EQ(mm_of(s.md.step_stats).all_start_ns, cpu_start);  // the step itself is unchanged
  // An op with no kernels keeps its times.
  const StepStats moved = apply_op_time(s.md.step_stats, OpTime::kGpu);
  for (const NodeExecStats& ns : moved.dev_stats().at(0).node_stats)
    if (ns.node_name == "w")
      for (const NodeExecStats& old : s.md.step_stats.dev_stats().at(0).node_stats)
        if (old.node_name == "w") {
          EXPECT_EQ(ns.all_start_ns, old.all_start_ns);
        }
  validated(Timeline(moved, &s.g).generate_chrome_trace_format());
}

TEST(GpuTimeline, TfprofCountsStreamAllAsAcceleratorTime) {
  GpuStep s;
  Profiler profiler(s.g);
  std::ostringstream log, out;
  profiler.set_log(&log);
  profiler.set_stdout(&out);
  profiler.add_step(1, s.md);
  ProfileOptions o = ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory(0, 0))
                         .select({"micros", "accelerator_micros", "cpu_micros"})
                         .with_empty_output()
                         .build();
  const GraphProfile graph = profiler.profile_graph(o);
  std::map<std::string, const GraphNodeProto*> by_name;
  std::vector<const GraphNodeProto*> stack = {&graph.root};
  while (!stack.empty()) {
    const GraphNodeProto* n = stack.back();
    stack.pop_back();
    by_name[n->name] = n;
    for (const auto& c : n->children) stack.push_back(&c);
  }
  ASSERT_TRUE(by_name.count("mm")) << graph.text();
  EXPECT_EQ(by_name["mm"]->accelerator_exec_micros, 42);  // 38 + 4 us of kernels
  EXPECT_EQ(by_name["mm"]->cpu_exec_micros, s.cpu_mm->op_end_rel_micros() > 0 ? s.cpu_mm->op_end_rel_micros() : 1);
  EXPECT_EQ(by_name["mm"]->exec_micros, by_name["mm"]->accelerator_exec_micros + by_name["mm"]->cpu_exec_micros);
  ASSERT_TRUE(by_name.count("act"));
  EXPECT_EQ(by_name["act"]->accelerator_exec_micros, 4);
  ASSERT_TRUE(by_name.count("w"));
  EXPECT_EQ(by_name["w"]->accelerator_exec_micros, 0);
  // The op view sums them per op type.
  const MultiGraphProfile ops = profiler.profile_operations(o);
  int64_t matmul_accelerator = -1;
  std::vector<const MultiGraphNodeProto*> chain = {&ops.root};
  while (!chain.empty()) {
    const MultiGraphNodeProto* n = chain.back();
    chain.pop_back();
    if (n->name == "MatMul") matmul_accelerator = n->accelerator_exec_micros;
    for (const auto& c : n->children) chain.push_back(&c);
  }
  EXPECT_EQ(matmul_accelerator, 42);
}

// The whole way, as a GPU tracer would run it: a DeviceTracer on the session, started and stopped
// around a FULL_TRACE step, turns "recorded" activity into the step's GPU devices (the records
// here: one kernel per op the step ran, launched when the op started, on the GPU's clock).
struct ReplayGpuTracer final : DeviceTracer {
  const Graph* graph;
  explicit ReplayGpuTracer(const Graph* g) : graph(g) {}
  int64_t gpu_offset = 5'000'000'000;  // the GPU's clock runs 5 s ahead of the step's
  void start() override {}
  void stop() override {}
  void collect(StepStats& step) override {
    GpuCorrelationMap launches;
    std::vector<GpuActivity> records;
    uint32_t correlation = 0;
    for (const NodeExecStats& ns : step.dev_stats().at(0).node_stats) {
      if (ns.node_name != "mm" && ns.node_name != "act") continue;
      launches.add(++correlation, ns.node_name, ns.op_type, ns.node_id, ns.all_start_ns, ns.thread_id);
      records.push_back({.kind = GpuActivityKind::kKernel,
                         .start_ns = ns.all_start_ns + gpu_offset + kUs,
                         .end_ns = ns.all_start_ns + gpu_offset + 3 * kUs,
                         .stream_id = 1,
                         .correlation_id = correlation,
                         .name = std::string(ns.op_type) + "_kernel"});
    }
    add_gpu_activity(step, records, launches, -gpu_offset);
  }
};

TEST(GpuTimeline, ADeviceTracerAddsTheGpuDevicesToATracedStep) {
  Graph g;
  Scope root(g);
  Output x = constant(root.with_op_name("x"), std::vector<float>(32, 0.5f), Shape{4, 8});
  Output w = constant(root.with_op_name("w"), std::vector<float>(24, 0.25f), Shape{8, 3});
  Output act = relu(root.with_op_name("act"), matmul(root.with_op_name("mm"), x, w));
  Session session(g, {.inter_op_threads = 1});
  session.device_set().add_tracer(std::make_unique<ReplayGpuTracer>(&g));
  const RunMetadata md = testing::traced_run(session, {act});
  std::vector<std::string> devices;
  for (const auto& d : md.step_stats.dev_stats()) devices.emplace_back(d.device);
  EXPECT_THAT(devices, ::testing::ElementsAre("/job:localhost/replica:0/task:0/device:CPU:0",
                                              "/device:GPU:0/stream:all", "/device:GPU:0/stream:1"));
  const NodeExecStats& kernel = md.step_stats.dev_stats()[1].node_stats.at(0);
  EXPECT_EQ(kernel.node_name, "mm:MatMul");
  for (const NodeExecStats& ns : md.step_stats.dev_stats()[0].node_stats)
    if (ns.node_name == "mm") {
      EXPECT_EQ(kernel.all_start_ns, ns.all_start_ns + kUs);
    }
  const nlohmann::json trace = validated(Timeline(md.step_stats, &g).generate_chrome_trace_format(true, true));
  const auto pids = pids_by_process_name(trace);
  ASSERT_TRUE(pids.count("/device:GPU:0/stream:1 Compute"));
  const auto kernels = ops_on(trace, pids.at("/device:GPU:0/stream:1 Compute"));
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0]["name"], "MatMul");
  EXPECT_EQ(kernels[1]["name"], "Relu");
}

// The critical path goes through the GPU: a kernel waits for the op that launched it and for the
// work before it on its stream; stream:all and memcpy (repeats) are not counted twice.
TEST(GpuTimeline, CriticalPathAcrossCpuAndGpu) {
  StepStats st;
  st.base_ns = 1'000'000;
  const int64_t t0 = st.base_ns;
  auto op = [&](std::string_view name, std::string_view type, std::string_view label, int64_t start, int64_t end) {
    NodeExecStats ns;
    ns.node_name = StepStats::intern(name);
    ns.op_type = StepStats::intern(type);
    ns.timeline_label = StepStats::intern(label);
    ns.scheduled_ns = t0;
    ns.all_start_ns = t0 + start;
    ns.op_end_rel_ns = ns.all_end_rel_ns = end - start;
    ns.thread_id = 1;
    return ns;
  };
  st.dev_stats().push_back(
      {StepStats::intern("/job:localhost/replica:0/task:0/device:CPU:0"),
       {op("mm", "MatMul", "mm = MatMul()", 0, 10 * kUs), op("act", "Relu", "act = Relu(mm)", 11 * kUs, 15 * kUs)}});
  st.dev_stats()[0].node_stats[1].scheduled_ns = t0 + 10 * kUs;
  GpuCorrelationMap launches;
  launches.add(1, "mm", "MatMul", -1, t0 + 5 * kUs);
  launches.add(2, "mm", "MatMul", -1, t0 + 6 * kUs);
  launches.add(3, "act", "Relu", -1, t0 + 12 * kUs);
  launches.add(4, "x", "Const", -1, t0);
  std::vector<GpuActivity> records = {
      {.kind = GpuActivityKind::kMemcpy,
       .start_ns = 1 * kUs,
       .end_ns = 3 * kUs,
       .stream_id = 7,
       .correlation_id = 4,
       .name = "",
       .bytes = 64,
       .copy_kind = GpuCopyKind::kHtoD},
      {.kind = GpuActivityKind::kKernel,
       .start_ns = 12 * kUs,
       .end_ns = 50 * kUs,
       .stream_id = 7,
       .correlation_id = 1,
       .name = "sgemm"},
      {.kind = GpuActivityKind::kKernel,
       .start_ns = 51 * kUs,
       .end_ns = 55 * kUs,
       .stream_id = 7,
       .correlation_id = 2,
       .name = "splitK"},
      {.kind = GpuActivityKind::kKernel,
       .start_ns = 56 * kUs,
       .end_ns = 60 * kUs,
       .stream_id = 7,
       .correlation_id = 3,
       .name = "relu"},
  };
  add_gpu_activity(st, records, launches, t0);
  const CriticalPath path = critical_path(st);
  ASSERT_EQ(path.ops.size(), 4u) << path.to_text();
  EXPECT_EQ(path.ops[0].name, "mm");
  EXPECT_EQ(path.ops[0].via, CriticalPathEdge::kStart);
  EXPECT_EQ(path.ops[1].name, "mm:MatMul");
  EXPECT_EQ(path.ops[1].device, "/device:GPU:0/stream:7");
  EXPECT_EQ(path.ops[1].via, CriticalPathEdge::kLaunch);
  EXPECT_EQ(path.ops[1].wait_ns, 2 * kUs);
  EXPECT_EQ(path.ops[2].via, CriticalPathEdge::kStream);
  EXPECT_EQ(path.ops[3].name, "act:Relu");
  EXPECT_EQ(path.ops[3].via, CriticalPathEdge::kStream);
  EXPECT_EQ(path.wall_ns, 60 * kUs);
  // CPU ops (10 + 4 us) and the stream's copy and kernels (2 + 38 + 4 + 4 us), each once.
  EXPECT_EQ(path.num_ops, 6);
  EXPECT_EQ(path.busy_ns, 62 * kUs);
  EXPECT_NE(path.to_json().find("\"via\":\"launch\""), std::string::npos);
}

}  // namespace
}  // namespace stepscope
