// diff_profiles: hand-made steps with known times and bytes (op types, scopes, nodes, ratios),
// what appeared and disappeared, two different graphs, steps of one profile, averages, RunMetadata
// without a graph, the critical paths, and the text and JSON forms.
#include "stepscope/profiler/tfprof/profile_diff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "stepscope/base/error.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::add_exec;
using tfprof::testing::add_node;
using tfprof::testing::kCpu;

const DiffRow& row(const std::vector<DiffRow>& rows, const std::string& name) {
  for (const DiffRow& r : rows)
    if (r.name == name) return r;
  static DiffRow none;
  ADD_FAILURE() << "no row " << name;
  return none;
}

std::vector<std::string> names(const std::vector<DiffRow>& rows) {
  std::vector<std::string> out;
  for (const DiffRow& r : rows) out.push_back(r.name);
  return out;
}

// A: a/x (Const) 10us -> a/mm (MatMul) 100us, 1000 B -> b/add (Add) 20us: a 130us step.
// B: a/x 10us -> a/mm 150us, 3000 B -> b/new (Relu) 30us: a 190us step; B's graph has no b/add.
struct TwoGraphs {
  Graph ga, gb;
  std::unique_ptr<Profiler> a, b;
  TwoGraphs() {
    Node* x = add_node(ga, "a/x", "Const");
    Node* mm = add_node(ga, "a/mm", "MatMul", {x});
    Node* add = add_node(ga, "b/add", "Add", {mm});
    RunMetadata ma;
    add_exec(ma, *x, kCpu, {.start_us = 1000, .duration_us = 10});
    add_exec(ma, *mm, kCpu, {.start_us = 1010, .duration_us = 100, .requested_bytes = 1000});
    add_exec(ma, *add, kCpu, {.start_us = 1110, .duration_us = 20});
    a = std::make_unique<Profiler>(ga);
    a->add_step(1, ma);

    Node* x2 = add_node(gb, "a/x", "Const");
    Node* mm2 = add_node(gb, "a/mm", "MatMul", {x2});
    Node* fresh = add_node(gb, "b/new", "Relu", {mm2});
    RunMetadata mb;
    add_exec(mb, *x2, kCpu, {.start_us = 5000, .duration_us = 10});
    add_exec(mb, *mm2, kCpu, {.start_us = 5010, .duration_us = 150, .requested_bytes = 3000});
    add_exec(mb, *fresh, kCpu, {.start_us = 5160, .duration_us = 30});
    b = std::make_unique<Profiler>(gb);
    b->add_step(7, mb);
  }
};

TEST(ProfileDiff, KnownDifferencesByOpTypeScopeAndNode) {
  TwoGraphs t;
  const ProfileDiff d = diff_profiles(*t.a, *t.b);
  EXPECT_DOUBLE_EQ(d.a.step_micros, 130);
  EXPECT_DOUBLE_EQ(d.b.step_micros, 190);
  EXPECT_DOUBLE_EQ(d.step_ratio(), 190.0 / 130.0);
  EXPECT_DOUBLE_EQ(d.a.op_micros, 130);
  EXPECT_EQ(d.a.steps, std::vector<int64_t>{1});
  EXPECT_EQ(d.b.steps, std::vector<int64_t>{7});

  // By |B-A| time: MatMul +50, Relu +30 (appeared), Add -20 (disappeared), Const 0.
  EXPECT_EQ(names(d.op_types), (std::vector<std::string>{"MatMul", "Relu", "Add", "Const"}));
  const DiffRow& mm = row(d.op_types, "MatMul");
  EXPECT_DOUBLE_EQ(mm.micros_a, 100);
  EXPECT_DOUBLE_EQ(mm.micros_b, 150);
  EXPECT_DOUBLE_EQ(mm.delta_micros(), 50);
  EXPECT_DOUBLE_EQ(mm.ratio_micros(), 1.5);
  EXPECT_DOUBLE_EQ(mm.bytes_a, 1000);
  EXPECT_DOUBLE_EQ(mm.bytes_b, 3000);
  EXPECT_DOUBLE_EQ(mm.ratio_bytes(), 3);
  EXPECT_FALSE(mm.appeared() || mm.disappeared());
  EXPECT_TRUE(row(d.op_types, "Relu").appeared());
  EXPECT_TRUE(std::isinf(row(d.op_types, "Relu").ratio_micros()));
  EXPECT_TRUE(row(d.op_types, "Add").disappeared());
  EXPECT_DOUBLE_EQ(row(d.op_types, "Add").ratio_micros(), 0);
  EXPECT_DOUBLE_EQ(row(d.op_types, "Const").ratio_micros(), 1);

  // Scopes: "a" holds x and mm (110 -> 160), "b" add then new (20 -> 30).
  EXPECT_EQ(names(d.scopes), (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(row(d.scopes, "a").micros_a, 110);
  EXPECT_DOUBLE_EQ(row(d.scopes, "a").micros_b, 160);
  EXPECT_DOUBLE_EQ(row(d.scopes, "b").delta_micros(), 10);
  EXPECT_EQ(row(d.scopes, "a").nodes_a, 2);

  // Nodes: by name across the two graphs.
  EXPECT_EQ(names(d.nodes), (std::vector<std::string>{"a/mm", "b/new", "b/add", "a/x"}));
  EXPECT_TRUE(row(d.nodes, "b/new").appeared());
  EXPECT_TRUE(row(d.nodes, "b/add").disappeared());
  EXPECT_EQ(d.only_in_a, std::vector<std::string>{"b/add"});
  EXPECT_EQ(d.only_in_b, std::vector<std::string>{"b/new"});
  EXPECT_FALSE(d.slower_than(50));
  EXPECT_TRUE(d.slower_than(40));
}

TEST(ProfileDiff, CriticalPathsOfBothSides) {
  TwoGraphs t;
  const ProfileDiff d = diff_profiles(*t.a, *t.b);
  ASSERT_EQ(d.a.critical_path.ops.size(), 3u);
  EXPECT_EQ(d.a.critical_path.ops.back().name, "b/add");
  ASSERT_EQ(d.b.critical_path.ops.size(), 3u);
  EXPECT_EQ(d.b.critical_path.ops.back().name, "b/new");
  EXPECT_EQ(d.a.critical_path_step, 1);
  EXPECT_EQ(d.b.critical_path_step, 7);
  const std::string text = d.to_text();
  EXPECT_NE(text.find("Critical paths (A: step 1, 130us, 3 ops; B: step 7, 190us, 3 ops)"), std::string::npos) << text;
  EXPECT_NE(text.find("Add b/add 20us"), std::string::npos) << text;
  EXPECT_NE(text.find("Relu b/new 30us"), std::string::npos) << text;
}

TEST(ProfileDiff, TextAndJson) {
  TwoGraphs t;
  const ProfileDiff d = diff_profiles(*t.a, *t.b, {.label_a = "before", .label_b = "after"});
  const std::string text = d.to_text();
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "step time: A 130us (its one step, 1), B 190us (its one step, 7), B/A 1.462x (+46.2%)");
  EXPECT_NE(text.find("A: before\nB: after\n"), std::string::npos);
  EXPECT_NE(text.find("(appeared)"), std::string::npos);
  EXPECT_NE(text.find("(disappeared)"), std::string::npos);
  EXPECT_NE(text.find("Nodes known to A only: 1: b/add"), std::string::npos) << text;
  EXPECT_NE(text.find("Nodes known to B only: 1: b/new"), std::string::npos) << text;
  EXPECT_NE(text.find("Appeared (ran in B, not in A): 1: b/new"), std::string::npos) << text;

  const auto j = nlohmann::json::parse(d.to_json());
  EXPECT_EQ(j["a"]["label"], "before");
  EXPECT_EQ(j["a"]["step"], -1);
  EXPECT_DOUBLE_EQ(j["b"]["step_micros"].get<double>(), 190);
  EXPECT_NEAR(j["step_ratio"].get<double>(), 190.0 / 130.0, 1e-5);
  EXPECT_EQ(j["op_types"][0]["name"], "MatMul");
  EXPECT_EQ(j["op_types"][0]["delta_micros"], 50);
  EXPECT_DOUBLE_EQ(j["op_types"][0]["ratio_micros"].get<double>(), 1.5);
  EXPECT_EQ(j["op_types"][1]["status"], "appeared");
  EXPECT_TRUE(j["op_types"][1]["ratio_micros"].is_null());
  EXPECT_EQ(j["op_types"][2]["status"], "disappeared");
  EXPECT_EQ(j["only_in_a"], nlohmann::json::array({"b/add"}));
  EXPECT_EQ(j["b"]["critical_path"]["path"].size(), 3u);
}

TEST(ProfileDiff, StepsOfOneProfileAndTheAverage) {
  Graph g;
  Node* x = add_node(g, "s/x", "Const");
  Node* mm = add_node(g, "s/mm", "MatMul", {x});
  Node* save = add_node(g, "save", "SaveV2");
  Profiler p(g);
  for (int step : {1, 2}) {
    RunMetadata md;
    add_exec(md, *x, kCpu, {.start_us = 1000, .duration_us = 10});
    add_exec(md, *mm, kCpu, {.start_us = 1010, .duration_us = step == 1 ? 100 : 300});
    if (step == 2) add_exec(md, *save, kCpu, {.start_us = 1310, .duration_us = 40});
    p.add_step(step, md);
  }
  // Step 1: 110us; step 2: 350us (the save ran).
  ProfileDiff d = diff_profiles(p, p, {.step_a = 1, .step_b = 2});
  EXPECT_DOUBLE_EQ(d.a.step_micros, 110);
  EXPECT_DOUBLE_EQ(d.b.step_micros, 350);
  EXPECT_TRUE(row(d.nodes, "save").appeared());
  EXPECT_TRUE(d.only_in_a.empty() && d.only_in_b.empty());
  EXPECT_DOUBLE_EQ(row(d.scopes, "s").ratio_micros(), 310.0 / 110.0);

  // The average: per step over both (the save counts 40 / 2).
  d = diff_profiles(p, p, {.step_a = 1});
  EXPECT_EQ(d.b.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(d.b.step_micros, 230);
  EXPECT_DOUBLE_EQ(row(d.nodes, "save").micros_b, 20);
  EXPECT_DOUBLE_EQ(row(d.nodes, "s/mm").micros_b, 200);
  EXPECT_DOUBLE_EQ(d.b.op_micros, 230);
  EXPECT_NE(d.to_text().find("B 230us (average of 2 steps, 1..2)"), std::string::npos) << d.to_text();

  try {
    diff_profiles(p, p, {.step_a = 5, .label_a = "runs/x/profile"});
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_STREQ(e.what(), "runs/x/profile: no step 5 (steps: 1 2)");
  }
}

TEST(ProfileDiff, RunMetadataWithoutTheGraph) {
  Graph g;
  Node* x = add_node(g, "a/x", "Const");
  Node* mm = add_node(g, "a/mm", "MatMul", {x});
  RunMetadata md;
  add_exec(md, *x, kCpu, {.start_us = 1000, .duration_us = 10});
  add_exec(md, *mm, kCpu, {.start_us = 1010, .duration_us = 100, .requested_bytes = 64});
  Profiler with_graph(g);
  with_graph.add_step(3, md);
  const Profiler without = Profiler::from_run_metadata(md, 3);
  EXPECT_EQ(without.steps(), std::vector<int64_t>{3});
  const ProfileDiff d = diff_profiles(with_graph, without);
  EXPECT_DOUBLE_EQ(d.step_ratio(), 1);
  // Op types and inputs come from the records' labels: the same op types, the same path.
  EXPECT_EQ(names(d.op_types), (std::vector<std::string>{"Const", "MatMul"}));
  EXPECT_DOUBLE_EQ(row(d.op_types, "MatMul").micros_b, 100);
  EXPECT_DOUBLE_EQ(row(d.op_types, "MatMul").bytes_b, 64);
  ASSERT_EQ(d.b.critical_path.ops.size(), 2u);
  EXPECT_EQ(d.b.critical_path.ops[0].name, "a/x");
  EXPECT_TRUE(d.only_in_a.empty() && d.only_in_b.empty());
}

TEST(ProfileDiff, AProfileWithoutStepsIsAnError) {
  Graph g;
  add_node(g, "x", "Const");
  Profiler p(g);
  EXPECT_THROW(diff_profiles(p, p, {.label_a = "empty"}), NotFoundError);
}

}  // namespace
}  // namespace stepscope
