// The critical path: hand-built steps with known paths (diamond, control edges, pruned nodes,
// several devices, one node, no graph), the shares, the text and JSON forms, and a real traced
// training step.
#include "stepscope/profiler/critical_path.h"

#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "stepscope/base/error.h"
#include "stepscope/graph/graph.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

constexpr const char* kCpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
constexpr const char* kCpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";
constexpr int64_t kBase = 1'000'000;

// One node's run, times relative to kBase.
NodeExecStats run_of(const Output& out, int64_t scheduled, int64_t start, int64_t end, uint32_t thread = 1) {
  const Node& n = *out.node;
  NodeExecStats ns;
  ns.node_name = StepStats::intern(n.name());
  ns.op_type = StepStats::intern(n.op_type());
  ns.timeline_label = StepStats::intern(n.timeline_label());
  ns.node_id = n.id();
  ns.scheduled_ns = kBase + scheduled;
  ns.all_start_ns = kBase + start;
  ns.op_end_rel_ns = ns.all_end_rel_ns = end - start;
  ns.thread_id = thread;
  return ns;
}
NodeExecStats run_of(Node* node, int64_t scheduled, int64_t start, int64_t end, uint32_t thread = 1) {
  return run_of(node->output(0), scheduled, start, end, thread);
}

StepStats step_of(std::vector<NodeExecStats> nodes, const char* device = kCpu0) {
  StepStats s;
  s.base_ns = kBase;
  s.dev_stats().push_back({StepStats::intern(device), std::move(nodes)});
  return s;
}

std::vector<std::string> names(const CriticalPath& p) {
  std::vector<std::string> out;
  for (const auto& op : p.ops) out.push_back(op.name);
  return out;
}

void expect_shares_sum_to_one(const CriticalPath& p) {
  double sum = 0;
  int64_t ns = 0;
  for (const auto& op : p.ops) {
    sum += op.share + op.wait_share;
    ns += op.duration_ns + op.wait_ns;
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_EQ(ns, p.wall_ns);
  EXPECT_EQ(p.path_busy_ns + p.path_wait_ns, p.wall_ns);
}

// src → {short, long} → sink: the long branch is the path.
struct Diamond {
  Graph g;
  Output src, shrt, lng, sink;
  Diamond() {
    Scope s(g);
    src = constant(s.with_op_name("src"), 1.0f);
    shrt = neg(s.with_op_name("short"), src);
    lng = square(s.with_op_name("long"), src);
    sink = add(s.with_op_name("sink"), shrt, lng);
  }
  StepStats step() const {
    return step_of({
        run_of(src, 0, 5, 10, 1),
        run_of(lng, 10, 12, 100, 1),
        run_of(shrt, 10, 15, 30, 2),
        run_of(sink, 100, 104, 120, 1),
    });
  }
};

TEST(CriticalPath, DiamondFollowsTheLongBranch) {
  Diamond d;
  CriticalPath p = critical_path(d.g, d.step());
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_EQ(p.step_start_ns, kBase);
  EXPECT_EQ(p.wall_ns, 120);
  EXPECT_EQ(p.num_ops, 4);
  EXPECT_EQ(p.busy_ns, 5 + 88 + 15 + 16);
  EXPECT_DOUBLE_EQ(p.parallelism, 124.0 / 120.0);
  ASSERT_EQ(p.ops.size(), 3u);
  EXPECT_EQ(p.ops[0].op_type, "Const");
  EXPECT_EQ(p.ops[0].via, CriticalPathEdge::kStart);
  EXPECT_EQ(p.ops[0].start_ns, 5);
  EXPECT_EQ(p.ops[0].wait_ns, 5);
  EXPECT_EQ(p.ops[1].op_type, "Square");
  EXPECT_EQ(p.ops[1].via, CriticalPathEdge::kData);
  EXPECT_EQ(p.ops[1].start_ns, 12);
  EXPECT_EQ(p.ops[1].duration_ns, 88);
  EXPECT_EQ(p.ops[1].wait_ns, 2);
  EXPECT_DOUBLE_EQ(p.ops[1].share, 88.0 / 120.0);
  EXPECT_EQ(p.ops[2].wait_ns, 4);
  EXPECT_EQ(p.ops[2].node_id, d.sink.node->id());
  EXPECT_EQ(p.ops[2].device, kCpu0);
  EXPECT_EQ(p.path_busy_ns, 5 + 88 + 16);
  EXPECT_EQ(p.path_wait_ns, 5 + 2 + 4);
  expect_shares_sum_to_one(p);

  ASSERT_EQ(p.threads.size(), 2u);
  EXPECT_EQ(p.threads[0].thread_id, 1u);
  EXPECT_EQ(p.threads[0].ops, 3);
  EXPECT_EQ(p.threads[0].busy_ns, 5 + 88 + 16);
  EXPECT_DOUBLE_EQ(p.threads[0].utilisation, 109.0 / 120.0);
  EXPECT_EQ(p.threads[1].thread_id, 2u);
  EXPECT_EQ(p.threads[1].ops, 1);
}

// The other way round, so the answer does not come from the order of inputs or records.
TEST(CriticalPath, DiamondWithTheOtherBranchLonger) {
  Diamond d;
  StepStats s = step_of({
      run_of(d.src, 0, 0, 10, 1),
      run_of(d.lng, 10, 11, 20, 1),
      run_of(d.shrt, 10, 12, 90, 2),
      run_of(d.sink, 90, 91, 95, 2),
  });
  CriticalPath p = critical_path(d.g, s);
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "short", "sink"}));
  expect_shares_sum_to_one(p);
}

// Without an exact scheduled time (a hand-written or foreign trace), the input that ended last
// before the op started is followed.
TEST(CriticalPath, WithoutScheduledTimesFollowsTheLatestInputBeforeTheStart) {
  Diamond d;
  StepStats s = d.step();
  for (auto& ns : s.dev_stats()[0].node_stats) ns.scheduled_ns = 0;
  CriticalPath p = critical_path(d.g, s);
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "long", "sink"}));
}

TEST(CriticalPath, FollowsAControlEdge) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a"), 1.0f);
  Output slow = square(s.with_op_name("slow"), a);
  Output b = neg(s.with_control_dependencies({slow.node}).with_op_name("b"), a);
  StepStats step = step_of({
      run_of(a, 0, 0, 10),
      run_of(slow, 10, 10, 50, 2),
      run_of(b, 50, 52, 60),
  });
  CriticalPath p = critical_path(g, step);
  EXPECT_EQ(names(p), (std::vector<std::string>{"a", "slow", "b"}));
  EXPECT_EQ(p.ops[2].via, CriticalPathEdge::kControl);
  EXPECT_EQ(p.ops[1].via, CriticalPathEdge::kData);
  expect_shares_sum_to_one(p);
  EXPECT_NE(p.to_text().find("(after a control input)"), std::string::npos);
  // Hooks, the fourth category, come from the step's timing: shown when known.
  EXPECT_EQ(p.to_text().find("Hooks"), std::string::npos);
  p.hooks_ns = 20;  // 20 ns of hooks around a 60 ns step: 25% of the two
  EXPECT_NE(
      p.to_text().find("\nHooks around the step (outside its trace): 0.020 us, 25.0% of the step and its hooks\n"),
      std::string::npos)
      << p.to_text();
}

// Nodes of the graph that did not run (pruned, or fed placeholders) are not on the path: it
// starts at the first op whose inputs did not run.
TEST(CriticalPath, NodesNotInTheStepAreSkipped) {
  Graph g;
  Scope s(g);
  Output x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{});
  Output pruned = neg(s.with_op_name("pruned"), x);
  Output y = square(s.with_op_name("y"), x);
  Output z = mul(s.with_op_name("z"), y, 2.0);  // its constant ran too
  (void)pruned;
  Node* two = z.node->input(1).node;
  StepStats step = step_of({
      run_of(two, 0, 1, 2),
      run_of(y, 0, 2, 40),
      run_of(z, 40, 41, 50),
  });
  CriticalPath p = critical_path(g, step);
  EXPECT_EQ(names(p), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(p.ops[0].via, CriticalPathEdge::kStart);
  EXPECT_EQ(p.ops[0].wait_ns, 2);
  EXPECT_EQ(p.num_ops, 3);
  expect_shares_sum_to_one(p);
}

// Fed nodes are in the step (the executor records each one at the step's start, lasting
// nothing, with the fed tensors as outputs) but ran nothing: not on the path, not counted as
// ops, with the graph or without it. The path starts at the op that read the feed.
TEST(CriticalPath, FedNodesAreNotOps) {
  Graph g;
  Scope s(g);
  Output x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{});
  Output y = square(s.with_op_name("y"), x);
  Output z = neg(s.with_op_name("z"), y);
  NodeExecStats fed = run_of(x, 0, 0, 0, 7);  // on the caller's thread, which ran no op
  fed.timeline_label = StepStats::intern("x = Placeholder()");
  StepStats step = step_of({fed, run_of(y, 0, 3, 40), run_of(z, 40, 41, 50)});
  for (const CriticalPath& p : {critical_path(g, step), critical_path(step)}) {
    EXPECT_EQ(names(p), (std::vector<std::string>{"y", "z"})) << p.to_text();
    EXPECT_EQ(p.ops[0].via, CriticalPathEdge::kStart);
    EXPECT_EQ(p.ops[0].wait_ns, 3);
    EXPECT_EQ(p.num_ops, 2);
    EXPECT_EQ(p.wall_ns, 50);
    ASSERT_EQ(p.threads.size(), 1u);
    EXPECT_EQ(p.threads[0].thread_id, 1u);
    EXPECT_EQ(p.threads[0].ops, 2);
    expect_shares_sum_to_one(p);
  }
  // A step that only fed (its fetches were the feeds) ran no ops.
  EXPECT_TRUE(critical_path(g, step_of({fed})).empty());
  // An op that lasted nothing later in the step is an op.
  StepStats quick = step_of({fed, run_of(y, 0, 3, 3), run_of(z, 3, 4, 9)});
  EXPECT_EQ(names(critical_path(g, quick)), (std::vector<std::string>{"y", "z"}));
}

TEST(CriticalPath, AStepWithOneNode) {
  Graph g;
  Scope s(g);
  Output c = constant(s.with_op_name("c"), 1.0f);
  CriticalPath p = critical_path(g, step_of({run_of(c, 0, 3, 13)}));
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].name, "c");
  EXPECT_EQ(p.wall_ns, 13);
  EXPECT_EQ(p.ops[0].wait_ns, 3);
  EXPECT_DOUBLE_EQ(p.ops[0].share, 10.0 / 13.0);
  EXPECT_DOUBLE_EQ(p.parallelism, 10.0 / 13.0);
  expect_shares_sum_to_one(p);
}

TEST(CriticalPath, AnEmptyStep) {
  Graph g;
  CriticalPath p = critical_path(g, StepStats());
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.wall_ns, 0);
  EXPECT_EQ(p.to_text(), "Critical path: the step ran no ops.\n");
  auto j = nlohmann::json::parse(p.to_json());
  EXPECT_TRUE(j["path"].empty());
  EXPECT_TRUE(j["threads"].empty());
}

// The path crosses devices; each device's threads are counted apart.
TEST(CriticalPath, SeveralDevices) {
  Diamond d;
  StepStats s;
  s.base_ns = kBase;
  s.dev_stats().push_back({StepStats::intern(kCpu0), {run_of(d.src, 0, 0, 10, 1), run_of(d.shrt, 10, 11, 20, 1)}});
  s.dev_stats().push_back({StepStats::intern(kCpu1), {run_of(d.lng, 10, 12, 80, 1), run_of(d.sink, 80, 81, 90, 1)}});
  CriticalPath p = critical_path(d.g, s);
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_EQ(p.ops[0].device, kCpu0);
  EXPECT_EQ(p.ops[1].device, kCpu1);
  ASSERT_EQ(p.threads.size(), 2u);  // thread 1 of each device
  EXPECT_EQ(p.threads[0].device, kCpu0);
  EXPECT_EQ(p.threads[0].busy_ns, 19);
  EXPECT_EQ(p.threads[1].device, kCpu1);
  EXPECT_EQ(p.threads[1].busy_ns, 77);
  expect_shares_sum_to_one(p);
  EXPECT_NE(p.to_text().find("CPU:1 thread 1"), std::string::npos);
}

// Clocks of two devices disagreeing (an input "ending" after its consumer started) give no
// negative wait, and the walk still ends.
TEST(CriticalPath, SkewedClocksGiveNoNegativeWait) {
  Diamond d;
  StepStats s = step_of({
      run_of(d.src, 0, 0, 10), run_of(d.lng, 10, 11, 60), run_of(d.shrt, 10, 11, 20),
      run_of(d.sink, 60, 55, 70),  // started "before" long ended
  });
  CriticalPath p = critical_path(d.g, s);
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "short", "sink"}));  // the input that ended before it
  for (const auto& op : p.ops) EXPECT_GE(op.wait_ns, 0);
}

// A RunMetadata read back without its graph: the data edges come from the timeline labels.
TEST(CriticalPath, WithoutTheGraphUsesTheTimelineLabels) {
  Diamond d;
  StepStats s = d.step();
  for (auto& ns : s.dev_stats()[0].node_stats) ns.node_id = -1;
  EXPECT_EQ(s.dev_stats()[0].node_stats[3].timeline_label, "sink = Add(short, long)");
  CriticalPath p = critical_path(s);
  EXPECT_EQ(names(p), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_EQ(p.ops[1].via, CriticalPathEdge::kData);
  EXPECT_EQ(p.ops[1].node_id, -1);
  // And with the graph, a node whose id is wrong is found by its name.
  for (auto& ns : s.dev_stats()[0].node_stats) ns.node_id = 0;
  EXPECT_EQ(names(critical_path(d.g, s)), (std::vector<std::string>{"src", "long", "sink"}));
}

// With the graph, edges come from it even when labels are missing or wrong; without it (a
// file), the labels are all there is.
TEST(CriticalPath, WithTheGraphEdgesComeFromTheGraphNotTheLabels) {
  Diamond d;
  StepStats s = d.step();
  // No scheduled times: each op's predecessor is its latest input to end before it started.
  for (auto& ns : s.dev_stats()[0].node_stats) ns.scheduled_ns = 0;
  auto& sink = s.dev_stats()[0].node_stats[3];
  sink.timeline_label = StepStats::intern("sink = Add(short)");
  EXPECT_EQ(names(critical_path(d.g, s)), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_EQ(names(critical_path(s)), (std::vector<std::string>{"src", "short", "sink"}));
  for (auto& ns : s.dev_stats()[0].node_stats) ns.timeline_label = {};
  EXPECT_EQ(names(critical_path(d.g, s)), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_EQ(names(critical_path(s)), (std::vector<std::string>{"sink"}));
}

TEST(CriticalPath, TextForm) {
  Diamond d;
  const std::string text = critical_path(d.g, d.step()).to_text();
  EXPECT_EQ(text,
            "Critical path: 3 of 4 ops, wall time 0.120 us (ops 90.8%, waiting 9.2%)\n"
            "Busy time of all ops: 0.124 us on 2 threads, parallelism 1.03\n"
            "    start us      wait us  duration us   share  op type  name\n"
            "       0.005        0.005        0.005    4.2%  Const    src\n"
            "       0.012        0.002        0.088   73.3%  Square   long\n"
            "       0.104        0.004        0.016   13.3%  Add      sink\n"
            "Threads:\n"
            "  CPU:0 thread 1: 0.109 us busy, 3 ops, 90.8% utilised\n"
            "  CPU:0 thread 2: 0.015 us busy, 1 ops, 12.5% utilised\n");
}

// A long path shows its largest rows and folds the rest, in path order.
TEST(CriticalPath, TextFormFoldsALongPath) {
  Graph g;
  Scope s(g);
  std::vector<NodeExecStats> runs;
  Output y = constant(s.with_op_name("c"), 1.0f);
  runs.push_back(run_of(y, 0, 0, 1000));
  int64_t t = 1000;
  for (int i = 0; i < 40; ++i) {
    y = neg(s, y);
    const int64_t d = i == 20 ? 500'000 : 1000;
    runs.push_back(run_of(y, t, t, t + d));
    t += d;
  }
  CriticalPath p = critical_path(g, step_of(std::move(runs)));
  ASSERT_EQ(p.ops.size(), 41u);
  expect_shares_sum_to_one(p);
  const std::string text = p.to_text({.max_rows = 2, .show_threads = false});
  EXPECT_NE(text.find("500.000   92.6%  Neg      Neg_20\n"), std::string::npos) << text;
  EXPECT_NE(text.find("... 20 more ops\n"), std::string::npos) << text;
  EXPECT_NE(text.find("... 19 more ops\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Threads:"), std::string::npos);
  EXPECT_NE(text.find("wall time 540.000 us"), std::string::npos) << text;
}

TEST(CriticalPath, JsonForm) {
  Diamond d;
  auto j = nlohmann::json::parse(critical_path(d.g, d.step()).to_json());
  EXPECT_EQ(j["wall_ns"], 120);
  EXPECT_EQ(j["busy_ns"], 124);
  EXPECT_EQ(j["num_ops"], 4);
  EXPECT_EQ(j["path_busy_ns"], 109);
  EXPECT_EQ(j["path_wait_ns"], 11);
  EXPECT_NEAR(j["parallelism"].get<double>(), 124.0 / 120.0, 1e-6);
  ASSERT_EQ(j["path"].size(), 3u);
  EXPECT_EQ(j["path"][1]["name"], "long");
  EXPECT_EQ(j["path"][1]["op_type"], "Square");
  EXPECT_EQ(j["path"][1]["device"], kCpu0);
  EXPECT_EQ(j["path"][1]["node_id"], d.lng.node->id());
  EXPECT_EQ(j["path"][1]["start_ns"], 12);
  EXPECT_EQ(j["path"][1]["duration_ns"], 88);
  EXPECT_EQ(j["path"][1]["wait_ns"], 2);
  EXPECT_EQ(j["path"][1]["via"], "data");
  EXPECT_EQ(j["path"][0]["via"], "start");
  EXPECT_NEAR(j["path"][1]["share"].get<double>(), 88.0 / 120.0, 1e-6);
  ASSERT_EQ(j["threads"].size(), 2u);
  EXPECT_EQ(j["threads"][0]["ops"], 3);
  EXPECT_EQ(j["threads"][0]["busy_ns"], 109);
}

TEST(CriticalPath, JsonEscapesNames) {
  Graph g;
  Scope s(g);
  Output c = constant(s.with_op_name("we\"ird\\name"), 1.0f);
  auto j = nlohmann::json::parse(critical_path(g, step_of({run_of(c, 0, 0, 1)})).to_json());
  EXPECT_EQ(j["path"][0]["name"], "we\"ird\\name");
}

// A real traced training step of a small MLP: the path runs from an op with no traced input
// (a variable, a constant, the input) to the op that ended last, along real edges, in time order.
TEST(CriticalPath, RealTracedTrainingStep) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 16});
  Output labels = placeholder(root.with_op_name("labels"), DType::kInt32, Shape{-1});
  Output hidden = nn::dense(root.with_name_scope("hidden"), x, 32, nn::Activation::relu);
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 4);
  Output loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, labels, logits));
  Variable step = get_or_create_global_step(root);
  Node* train = GradientDescentOptimizer(0.1).minimize(root, loss, step);
  Node* init = global_variables_initializer(root);

  Session sess(g, {.inter_op_threads = 2});
  sess.run(init);
  Tensor xs(DType::kFloat32, Shape{8, 16});
  for (auto& v : xs.flat<float>()) v = 0.5f;
  Tensor ys(DType::kInt32, Shape{8});
  for (auto& v : ys.flat<int32_t>()) v = 1;
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  sess.run({{x, xs}, {labels, ys}}, {loss}, {train});  // warm: the plan, the BLAS library
  RunMetadata md;
  sess.run({{x, xs}, {labels, ys}}, {loss}, {train}, opts, &md);

  CriticalPath p = critical_path(g, md.step_stats);
  // How long the path is depends on the schedule: usually the forward and backward chain, but a
  // root that a busy machine ran last (the global step's increment constant) can be all that
  // stood between the step's start and its last op.
  ASSERT_GE(p.ops.size(), 2u) << p.to_text();
  expect_shares_sum_to_one(p);
  EXPECT_GT(p.parallelism, 0);
  EXPECT_GT(p.num_ops, static_cast<int>(p.ops.size()));
  // The step records the two fed placeholders too: they are not ops, on the path or counted.
  EXPECT_EQ(p.num_ops, static_cast<int>(md.step_stats.dev_stats()[0].node_stats.size()) - 2);
  for (const CriticalPath& path : {p, critical_path(md.step_stats)})
    for (const auto& op : path.ops) EXPECT_NE(op.op_type, "Placeholder") << path.to_text();

  // The last op of the path is the op that ended last.
  int64_t last_end = 0;
  std::string last_name;
  std::set<std::string> ran;
  for (const auto& ns : md.step_stats.dev_stats()[0].node_stats) {
    if (ns.node_name == "x" || ns.node_name == "labels") continue;  // fed: in the step, not run
    ran.insert(std::string(ns.node_name));
    if (ns.all_start_ns + ns.all_end_rel_ns >= last_end) {
      last_end = ns.all_start_ns + ns.all_end_rel_ns;
      last_name = ns.node_name;
    }
  }
  EXPECT_EQ(p.ops.back().name, last_name);
  EXPECT_EQ(p.ops.back().start_ns + p.ops.back().duration_ns, p.wall_ns);

  // The first op has no input that ran: a variable, a constant, or a consumer of the fed input.
  const Node* first = g.find_node(p.ops.front().name);
  ASSERT_NE(first, nullptr);
  for (const Output& in : first->inputs()) EXPECT_FALSE(ran.count(in.node->name())) << in.node->name();
  for (const Node* in : first->control_inputs()) EXPECT_FALSE(ran.count(in->name())) << in->name();

  // Each op is an input (data or control) of the next, and started after it ended.
  for (size_t i = 1; i < p.ops.size(); ++i) {
    const Node* prev = g.find_node(p.ops[i - 1].name);
    const Node* cur = g.find_node(p.ops[i].name);
    ASSERT_TRUE(prev && cur);
    bool edge = false;
    for (const Output& in : cur->inputs()) edge |= in.node == prev;
    for (const Node* in : cur->control_inputs()) edge |= in == prev;
    EXPECT_TRUE(edge) << prev->name() << " -> " << cur->name();
    EXPECT_GE(p.ops[i].start_ns, p.ops[i - 1].start_ns + p.ops[i - 1].duration_ns);
    EXPECT_NE(p.ops[i].via, CriticalPathEdge::kStart);
  }
  // The step's threads: at most the session's two, each busy part of the time.
  ASSERT_GE(p.threads.size(), 1u);
  EXPECT_LE(p.threads.size(), 2u);
  for (const auto& t : p.threads) {
    EXPECT_GT(t.utilisation, 0);
    EXPECT_LE(t.utilisation, 1.0 + 1e-9);
  }
  EXPECT_FALSE(nlohmann::json::parse(p.to_json(), nullptr, false).is_discarded());  // valid JSON
  if (::testing::Test::HasFailure()) std::cerr << p.to_text();
}

// What-if: the recorded schedule replayed with one op (or op type) faster.
TEST(WhatIf, UnchangedItGivesTheRecordedStepBack) {
  Diamond d;
  const WhatIf w = what_if(&d.g, d.step(), "long", 1.0);
  EXPECT_EQ(w.matched_ops, 1);
  EXPECT_EQ(w.after.wall_ns, w.before.wall_ns);
  EXPECT_EQ(names(w.after), names(w.before));
  EXPECT_EQ(w.after.busy_ns, w.before.busy_ns);
}

TEST(WhatIf, AFasterOpShortensTheStepAndThePathMayMove) {
  Diamond d;
  // long: 88 ns -> 22; it still ends after short (34 > 30): same path, sink starts 4 ns after it.
  WhatIf w = what_if(&d.g, d.step(), "long", 4.0);
  EXPECT_EQ(w.before.wall_ns, 120);
  EXPECT_EQ(w.after.wall_ns, 54);
  EXPECT_EQ(names(w.after), (std::vector<std::string>{"src", "long", "sink"}));
  EXPECT_NE(w.to_text().find("What if long (1 op) ran 4.00x faster: wall 0.120 us -> 0.054 us (-55.0%)\n"
                             "The critical path stays on the same ops.\n"),
            std::string::npos)
      << w.to_text();
  // 10x: long ends at 21, before short (30): the path moves to the short branch.
  w = what_if(&d.g, d.step(), "Square", 10.0);  // by op type
  EXPECT_EQ(w.after.wall_ns, 50);
  EXPECT_EQ(names(w.after), (std::vector<std::string>{"src", "short", "sink"}));
  EXPECT_NE(w.to_text().find("The critical path moves"), std::string::npos);
  const auto json = nlohmann::json::parse(w.to_json());
  EXPECT_EQ(json["new_wall_ns"], 50);
  EXPECT_EQ(json["path_moved"], true);
  EXPECT_EQ(json["after"]["path"].size(), 3u);
  // Without the graph (edges from the labels) the same.
  StepStats s = d.step();
  EXPECT_EQ(what_if(nullptr, s, "long", 10.0).after.wall_ns, critical_path(s).wall_ns - 70);
}

TEST(WhatIf, BadTargetsAndSpeedupsAreNamed) {
  Diamond d;
  try {
    what_if(&d.g, d.step(), "MatMul", 2.0);
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_STREQ(e.what(), "what-if: no op named or of type 'MatMul' ran in the step");
  }
  EXPECT_THROW(what_if(&d.g, d.step(), "long", 0.0), InvalidArgumentError);
  EXPECT_THROW(what_if(&d.g, d.step(), "long", std::nan("")), InvalidArgumentError);
}

TEST(CriticalPath, InputOpsAreTheirOwnCategory) {
  Graph g;
  Scope s(g);
  Output x = constant(s.with_op_name("x"), 1.0f);
  Output y = neg(s.with_op_name("y"), x);
  StepStats step = step_of({run_of(x, 0, 0, 30), run_of(y, 30, 30, 100)});
  step.dev_stats()[0].node_stats[0].op_type = StepStats::intern("IteratorGetNext");
  const CriticalPath p = critical_path(step);
  EXPECT_EQ(p.path_input_ns, 30);
  EXPECT_EQ(
      p.to_text().rfind("Critical path: 2 of 2 ops, wall time 0.100 us (compute 70.0%, input 30.0%, waiting 0.0%)", 0),
      0u)
      << p.to_text();
  EXPECT_TRUE(is_input_op_type("IteratorGetNext"));
  EXPECT_FALSE(is_input_op_type("MatMul"));
}

}  // namespace
}  // namespace stepscope
