// The Profiler on real traced training steps of a small MLP, and its saved profiles.
#include "stepscope/profiler/tfprof/profiler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/memory_kinds.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using V = std::vector<std::string>;

// An MLP 8-16-4 trained with SGD on a fixed batch of 32, traced.
struct Mlp {
  Graph graph;
  Output x, y, loss;
  Node* train = nullptr;
  int build_line = 0;  // the line that creates the hidden layer
  std::unique_ptr<Session> session;
  FeedList feeds;

  Mlp() {
    Scope root(graph);
    x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{32, 8});
    y = placeholder(root.with_op_name("y"), DType::kInt64, Shape{32});
    build_line = __LINE__ + 1;
    Output h = nn::dense(root.with_name_scope("hidden"), x, 16, nn::Activation::relu, {.seed = 1});
    Output logits = nn::dense(root.with_name_scope("logits"), h, 4, nn::Activation::none, {.seed = 2});
    loss = reduce_mean(root.with_name_scope("loss"),
                       sparse_softmax_cross_entropy_with_logits(root.with_name_scope("loss"), y, logits));
    train = GradientDescentOptimizer(0.1).minimize(root, loss);
    Node* init = global_variables_initializer(root);
    session = std::make_unique<Session>(graph, SessionOptions{.inter_op_threads = 2});
    session->run(init);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    Tensor xs(DType::kFloat32, Shape{32, 8}), ys(DType::kInt64, Shape{32});
    for (float& v : xs.flat<float>()) v = normal(rng);
    for (int64_t& v : ys.flat<int64_t>()) v = static_cast<int64_t>(rng() % 4);
    feeds = {{x, xs}, {y, ys}};
  }

  RunMetadata traced_step() {
    RunOptions options;
    options.trace_level = TraceLevel::kFullTrace;
    RunMetadata md;
    session->run(feeds, {loss}, {train}, options, &md);
    return md;
  }
};

ProfileOptions quiet(ProfileOptions o) {
  o.output = "none";
  return o;
}

class ProfilerTest : public ::testing::Test {
 protected:
  ProfilerTest() : profiler_(mlp_.graph) {
    profiler_.set_log(&log_);
    profiler_.set_stdout(&out_);
    for (int step = 1; step <= 3; ++step) profiler_.add_step(step * 10, mlp_.traced_step());
  }
  Mlp mlp_;
  Profiler profiler_;
  std::ostringstream log_, out_;
};

TEST_F(ProfilerTest, TrainableVariablesParameters) {
  GraphProfile p = profiler_.profile_name_scope(quiet(ProfileOptionBuilder::trainable_variables_parameter()));
  EXPECT_EQ(p.text(),
            "node name | # parameters\n"
            "_TFProfRoot (--/212 params)\n"
            "  hidden (--/144 params)\n"
            "    hidden/bias (16, 16/16 params)\n"
            "    hidden/kernel (8x16, 128/128 params)\n"
            "  logits (--/68 params)\n"
            "    logits/bias (4, 4/4 params)\n"
            "    logits/kernel (16x4, 64/64 params)\n");
  EXPECT_EQ(log_.str(), "");
}

TEST_F(ProfilerTest, StatisticsOfRealSteps) {
  EXPECT_EQ(profiler_.steps(), (std::vector<int64_t>{10, 20, 30}));
  auto o = quiet(ProfileOptionBuilder().select({"micros", "bytes", "float_ops", "occurrence", "device"}).build());
  GraphProfile scope = profiler_.profile_name_scope(o);
  const GraphNodeProto* matmul = nullptr;
  for (const auto& c : scope.root.children)
    if (c.name == "hidden")
      for (const auto& cc : c.children)
        if (cc.name == "hidden/MatMul") matmul = &cc;
  ASSERT_NE(matmul, nullptr) << scope.text();
  EXPECT_EQ(matmul->run_count, 1);
  EXPECT_EQ(matmul->float_ops, 2 * 32 * 8 * 16);
  EXPECT_GT(matmul->exec_micros, 0);
  EXPECT_EQ(matmul->exec_micros, matmul->cpu_exec_micros);
  EXPECT_EQ(matmul->accelerator_exec_micros, 0);
  // max(allocated, requested) as TensorFlow: the allocator's block (header, size class) counts.
  EXPECT_GE(matmul->output_bytes, 32 * 16 * 4);
  EXPECT_GE(matmul->requested_bytes, 32 * 16 * 4);
  EXPECT_EQ(std::vector<std::string>(matmul->devices.begin(), matmul->devices.end()),
            std::vector<std::string>{"/job:localhost/replica:0/task:0/device:cpu:0"});
  EXPECT_EQ(matmul->input_shapes.at(0), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(matmul->input_shapes.at(1), (std::vector<int64_t>{8, 16}));

  // Every node of the step ran once per step; the op view counts them.
  const tfprof::ProfileModel& model = profiler_.model();
  size_t ran = model.steps.at(10).nodes.size();
  EXPECT_GT(ran, 20u);
  MultiGraphProfile ops = profiler_.profile_operations(o);
  int64_t runs = 0;
  for (const MultiGraphNodeProto* n = &ops.root; !n->children.empty(); n = &n->children[0])
    for (const auto& g : n->children[0].graph_nodes) runs += g.run_count;
  EXPECT_EQ(static_cast<size_t>(runs), ran);
  EXPECT_EQ(ops.root.total_exec_micros, scope.root.total_exec_micros);
  EXPECT_EQ(ops.root.total_float_ops, scope.root.total_float_ops);
  EXPECT_NE(ops.text().find("\nMatMul "), std::string::npos) << ops.text();
}

const MultiGraphNodeProto* find_entry(const MultiGraphNodeProto& p, const std::string& name) {
  if (p.name == name) return &p;
  for (const auto& c : p.children)
    if (const MultiGraphNodeProto* found = find_entry(c, name)) return found;
  return nullptr;
}

TEST_F(ProfilerTest, CodeViewGroupsByTheUsersLines) {
  auto o = quiet(ProfileOptionBuilder().select({"float_ops"}).build());
  MultiGraphProfile code = profiler_.profile_code(o);
  // The frame of the user's line, wherever the call stack puts it, and its gradient's.
  const std::string line = "profiler_test.cc:" + std::to_string(mlp_.build_line) + ":Mlp";
  EXPECT_NE(code.text().find("  " + line + " ("), std::string::npos) << code.text();
  EXPECT_NE(code.text().find("  " + line + " (gradient) ("), std::string::npos) << code.text();
  const MultiGraphNodeProto* hidden = find_entry(code.root, line);
  ASSERT_NE(hidden, nullptr) << code.text();
  // MatMul, BiasAdd, Relu; with line tables also the kernel initializer's 256, which dense()
  // creates with its own call site (without them its frames are not told from the library's).
  EXPECT_GE(hidden->total_float_ops, 2 * 32 * 8 * 16 + 32 * 16 + 32 * 16) << code.text();
  EXPECT_LE(hidden->total_float_ops, 2 * 32 * 8 * 16 + 32 * 16 + 32 * 16 + 256) << code.text();
  ASSERT_NE(find_entry(code.root, line + " (gradient)"), nullptr) << code.text();
}

TEST_F(ProfilerTest, EveryViewPrintsItsReport) {
  profiler_.profile_name_scope(ProfileOptionBuilder::time_and_memory());
  profiler_.profile_graph(ProfileOptionBuilder::time_and_memory());
  profiler_.profile_operations(ProfileOptionBuilder::float_operation());
  profiler_.profile_code(ProfileOptionBuilder::time_and_memory());
  const std::string out = out_.str();
  size_t reports = 0;
  for (size_t at = 0; (at = out.find("==================Model Analysis Report", at)) != std::string::npos; ++at)
    ++reports;
  EXPECT_EQ(reports, 4u);
  EXPECT_NE(out.find("\nDoc:\nop: The nodes are operation kernel type"), std::string::npos);
  EXPECT_NE(out.find("Profile:\nnode name | # float_ops\nMatMul "), std::string::npos) << out;
}

std::vector<std::string> all_views(const Profiler& p) {
  std::vector<std::string> texts;
  for (const ProfileOptions& base :
       {ProfileOptionBuilder::time_and_memory(), ProfileOptionBuilder::trainable_variables_parameter(),
        ProfileOptionBuilder::float_operation(),
        ProfileOptionBuilder()
            .select({"bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros", "params", "float_ops", "device",
                     "op_types", "occurrence", "input_shapes"})
            .build()}) {
    for (int64_t step : {int64_t{-1}, int64_t{20}}) {
      ProfileOptions o = quiet(base);
      o.step = step;
      texts.push_back(p.profile_name_scope(o).text());
      texts.push_back(p.profile_name_scope(o).to_json());
      texts.push_back(p.profile_graph(o).text());
      texts.push_back(p.profile_operations(o).text());
      texts.push_back(p.profile_operations(o).to_json());
      texts.push_back(p.profile_code(o).text());
    }
  }
  texts.push_back(p.advise(AdvisorOptions::all(), false).text());
  return texts;
}

TEST_F(ProfilerTest, SaveAndLoadGiveTheSameViews) {
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile_roundtrip";
  profiler_.save(path);
  Profiler loaded = Profiler::load(path);
  loaded.set_log(&log_);
  EXPECT_EQ(loaded.steps(), profiler_.steps());
  const auto before = all_views(profiler_);
  const auto after = all_views(loaded);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], after[i]) << "view " << i;
  EXPECT_EQ(loaded.serialize_to_string(), profiler_.serialize_to_string());
  // The steps' executions survive too (timelines, critical path).
  const StepStats a = profiler_.step_stats(20), b = loaded.step_stats(20);
  ASSERT_EQ(a.dev_stats().size(), b.dev_stats().size());
  ASSERT_EQ(a.dev_stats()[0].node_stats.size(), b.dev_stats()[0].node_stats.size());
  for (size_t i = 0; i < a.dev_stats()[0].node_stats.size(); ++i) {
    const NodeExecStats &x = a.dev_stats()[0].node_stats[i], &y = b.dev_stats()[0].node_stats[i];
    EXPECT_EQ(x.node_name, y.node_name);
    EXPECT_EQ(x.timeline_label, y.timeline_label);
    EXPECT_EQ(x.all_start_ns, y.all_start_ns);
    EXPECT_EQ(x.op_end_rel_ns, y.op_end_rel_ns);
    EXPECT_EQ(x.scheduled_ns, y.scheduled_ns);
    EXPECT_EQ(x.thread_id, y.thread_id);
  }
  fs::remove(path);
}

// Issue 12: every step was kept (and written) forever: ~19 KB more per trace, a profile file
// that grew with the run. Past max_steps the oldest steps become per-node totals: the views of
// the averages are exactly those of a profiler that kept everything, memory stays flat.
TEST_F(ProfilerTest, KeepsAtMostMaxStepsAndTheAveragesOfAll) {
  Profiler all(mlp_.graph, {.max_steps = 0});
  Profiler bounded(mlp_.graph, {.max_steps = 3});
  all.set_log(&log_);
  bounded.set_log(&log_);
  size_t size_after_5 = 0;
  for (int64_t step = 10; step <= 20; ++step) {
    const RunMetadata md = mlp_.traced_step();
    all.add_step(step, md);
    bounded.add_step(step, md);
    if (step == 14) size_after_5 = bounded.serialize_to_string().size();
  }
  EXPECT_EQ(all.steps().size(), 11u);
  EXPECT_EQ(bounded.steps(), (std::vector<int64_t>{18, 19, 20}));
  EXPECT_EQ(bounded.model().steps.size(), 3u);
  const auto expected = all_views(all);  // the average over steps 10..20 and step 20 alone
  const auto got = all_views(bounded);
  ASSERT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(expected[i], got[i]) << "view " << i;
  // The file holds three steps and the totals: about the size it had after five steps, not 11.
  const std::string bytes = bounded.serialize_to_string();
  EXPECT_LT(bytes.size(), size_after_5 + size_after_5 / 10);
  EXPECT_LT(bytes.size(), all.serialize_to_string().size());
  // And it loads with the same averages (the totals are saved).
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile_bounded";
  bounded.save(path);
  Profiler loaded = Profiler::load(path);
  loaded.set_log(&log_);
  EXPECT_EQ(loaded.steps(), bounded.steps());
  const auto reloaded = all_views(loaded);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(expected[i], reloaded[i]) << "view " << i;
  EXPECT_EQ(loaded.serialize_to_string(), bytes);
  fs::remove(path);
  // Memory: many more steps, still three kept.
  for (int64_t step = 21; step <= 60; ++step) bounded.add_step(step, mlp_.traced_step());
  EXPECT_EQ(bounded.model().steps.size(), 3u);
  EXPECT_LT(bounded.serialize_to_string().size(), size_after_5 + size_after_5 / 10);
}

// A step's chunk is encoded when a save first needs it and kept for later saves: a step added
// to again after a save is encoded anew, so the file holds what the model holds.
TEST_F(ProfilerTest, ASaveAfterAStepGrewHoldsTheWholeStep) {
  const RunMetadata first = mlp_.traced_step(), second = mlp_.traced_step();
  Profiler saved_between(mlp_.graph), saved_once(mlp_.graph);
  saved_between.set_log(&log_);
  saved_once.set_log(&log_);
  saved_between.add_step(5, first);
  const std::string before = saved_between.serialize_to_string();
  saved_between.add_step(5, second);  // several RunMetadata of one step add up
  saved_once.add_step(5, first);
  saved_once.add_step(5, second);
  const std::string after = saved_between.serialize_to_string();
  EXPECT_NE(after, before);
  EXPECT_EQ(after, saved_once.serialize_to_string());
}

TEST_F(ProfilerTest, StepStatsOfAStepAsTheExecutorRecordedIt) {
  RunMetadata md = mlp_.traced_step();
  Profiler p(mlp_.graph);
  p.add_step(0, md);
  const StepStats s = p.step_stats(0);
  ASSERT_EQ(s.dev_stats().size(), 1u);
  EXPECT_EQ(s.dev_stats()[0].device, md.step_stats.dev_stats()[0].device);
  ASSERT_EQ(s.dev_stats()[0].node_stats.size(), md.step_stats.dev_stats()[0].node_stats.size());
  for (size_t i = 0; i < s.dev_stats()[0].node_stats.size(); ++i) {
    const NodeExecStats &x = s.dev_stats()[0].node_stats[i], &y = md.step_stats.dev_stats()[0].node_stats[i];
    EXPECT_EQ(x.node_name, y.node_name);
    EXPECT_EQ(x.op_type, y.op_type);
    EXPECT_EQ(x.node_id, y.node_id);
    EXPECT_EQ(x.timeline_label, y.timeline_label);
    EXPECT_EQ(x.all_start_ns, y.all_start_ns);
    EXPECT_EQ(x.all_end_rel_ns, y.all_end_rel_ns);
  }
  EXPECT_TRUE(p.step_stats(1).empty());
}

TEST_F(ProfilerTest, ALoadedProfileTakesMoreStepsOfTheSameGraph) {
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile_more";
  profiler_.save(path);
  Profiler loaded = Profiler::load(path);
  RunMetadata md = mlp_.traced_step();
  loaded.add_step(40, md);
  profiler_.add_step(40, md);
  EXPECT_EQ(loaded.steps(), profiler_.steps());
  auto o = quiet(ProfileOptionBuilder().select({"micros", "float_ops", "occurrence"}).with_step(40).build());
  EXPECT_EQ(loaded.profile_name_scope(o).text(), profiler_.profile_name_scope(o).text());
  fs::remove(path);
}

// A profile made from a RunMetadata alone (no graph: inputs from the records' labels, no
// shapes) saves and loads like any other, and shows no input shapes.
TEST_F(ProfilerTest, AProfileFromRunMetadataAloneSavesAndLoads) {
  const Profiler from_records = Profiler::from_run_metadata(mlp_.traced_step(), 7);
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile_from_records";
  from_records.save(path);
  const Profiler loaded = Profiler::load(path);
  EXPECT_EQ(loaded.serialize_to_string(), from_records.serialize_to_string());
  const auto& model = loaded.model();
  const auto matmul =
      std::find_if(model.nodes.begin(), model.nodes.end(), [](const tfprof::ModelNode& n) { return n.op == "MatMul"; });
  ASSERT_NE(matmul, model.nodes.end());
  EXPECT_EQ(matmul->num_inputs, 2u);  // from its label
  auto o = quiet(ProfileOptionBuilder().select({"input_shapes"}).build());
  o.step = 7;
  for (const Profiler* p : {&from_records, &loaded})
    EXPECT_EQ(p->profile_operations(o).to_json().find("\"input_shapes\":{\"0\""), std::string::npos);
  // A profile with its graph shows them (the check above can fail).
  o.step = -1;
  EXPECT_NE(profiler_.profile_operations(o).to_json().find("\"input_shapes\":{\"0\""), std::string::npos);
  fs::remove(path);
}

TEST_F(ProfilerTest, CorruptFilesAreDataLoss) {
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile_corrupt";
  const std::string good = profiler_.serialize_to_string();
  auto expect_data_loss = [&](const std::string& bytes, const std::string& what) {
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      Profiler::load(path);
      ADD_FAILURE() << "no error for " << what;
    } catch (const DataLossError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("corrupt profile file '" + path.string() + "': ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_data_loss("", "bad magic");
  expect_data_loss(std::string("SSTFPROF\x02\0\0\0", 12), "unsupported format version 2");
  expect_data_loss(good.substr(0, good.size() / 2), "truncated");
  expect_data_loss(good.substr(0, good.size() - 10), "no end chunk");  // the end chunk is 10 bytes
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x40;
  expect_data_loss(flipped, "checksum mismatch");
  expect_data_loss(good + "x", "data after the end chunk");
  try {
    Profiler::load(path.string() + ".missing");
    ADD_FAILURE();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ".missing"), std::string::npos);
  }
  fs::remove(path);
}

TEST_F(ProfilerTest, SaveIsAtomic) {
  const fs::path dir = fs::path(::testing::TempDir()) / "tfprof_atomic";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path path = dir / "profile";
  profiler_.save(path);
  profiler_.add_step(50, mlp_.traced_step());
  profiler_.save(path);  // replaces the file
  EXPECT_EQ(Profiler::load(path).steps(), (std::vector<int64_t>{10, 20, 30, 50}));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);  // no temporary left behind
  try {
    profiler_.save(dir / "no_such_dir" / "profile");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "no_such_dir" / "profile").string()), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_F(ProfilerTest, TimelineOutput) {
  const fs::path dir = fs::path(::testing::TempDir()) / "tfprof_timeline";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string base = (dir / "t.json").string();
  // A step: one file, "<outfile>_<step>", with the nodes the view displays.
  auto o =
      ProfileOptionBuilder().with_timeline_output(base).with_step(20).with_node_names({.show = V{"hidden/.*"}}).build();
  profiler_.profile_name_scope(o);
  EXPECT_EQ(out_.str(),
            "\n******************************************************\n"
            "Timeline file is written to " +
                base +
                "_20.\n"
                "Open a Chrome browser, enter URL chrome://tracing and load the timeline file."
                "\n******************************************************\n");
  const std::string trace = read_file(base + "_20");
  EXPECT_TRUE(validate_chrome_trace(trace).empty()) << trace;
  EXPECT_NE(trace.find("\"hidden/MatMul\""), std::string::npos);
  EXPECT_EQ(trace.find("\"logits/MatMul\""), std::string::npos);
  // Step -1: one file per step (the graph view, as TensorFlow; here every view).
  o = ProfileOptionBuilder().with_timeline_output(base).build();
  profiler_.profile_graph(o);
  profiler_.profile_code(o);
  for (int step : {10, 20, 30}) {
    const std::string t = read_file(base + "_" + std::to_string(step));
    EXPECT_TRUE(validate_chrome_trace(t).empty()) << t;
    EXPECT_NE(t.find("\"logits/MatMul\""), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_F(ProfilerTest, GzippedProfiles) {
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_profile.gz";
  profiler_.save(path);
  EXPECT_LT(fs::file_size(path), profiler_.serialize_to_string().size());
  EXPECT_EQ(Profiler::load(path).serialize_to_string(), profiler_.serialize_to_string());
  fs::remove(path);
}

TEST_F(ProfilerTest, OtherOutputs) {
  // dump_to_file (deprecated) writes the file output.
  const fs::path path = fs::path(::testing::TempDir()) / "tfprof_dump";
  ProfileOptions o = ProfileOptionBuilder().select({"params"}).build();
  o.dump_to_file = path.string();
  const std::string text = profiler_.profile_operations(o).text();
  EXPECT_EQ(read_file(path).substr(read_file(path).find("Profile:\n") + 9), text);
  EXPECT_EQ(out_.str(), "");
  fs::remove(path);
  // pprof (pprof_output_test.cc checks the files): not the graph view, one select value.
  const fs::path pprof = fs::path(::testing::TempDir()) / "tfprof_pprof.pb.gz";
  o = ProfileOptionBuilder().with_pprof_output(pprof.string()).build();
  EXPECT_TRUE(profiler_.profile_graph(o).root.children.empty());
  EXPECT_FALSE(fs::exists(pprof));
  o.select = {"micros", "bytes"};
  EXPECT_TRUE(profiler_.profile_code(o).root.children.empty());
  o.select = {"occurrence"};
  EXPECT_TRUE(profiler_.profile_name_scope(o).root.children.empty());
  EXPECT_EQ(log_.str(),
            "pprof output supports the code, scope and op views (the graph view is not a tree).\n"
            "Can only select 1 attribute for pprof output.\n"
            "pprof doesn't support -select=occurrence\n");
  EXPECT_FALSE(fs::exists(pprof));
  o.select = {"micros"};
  EXPECT_FALSE(profiler_.profile_code(o).root.children.empty());
  EXPECT_TRUE(is_gzip(read_file(pprof, kDefaultMaxDecompressedBytes, Gunzip::kNever)));
  EXPECT_EQ(out_.str(), "\nRun pprof -png --nodecount=100 --sample_index=1 <" + pprof.string() + ">\n");
  fs::remove(pprof);
}

// A batch dimension left unknown in the graph ([-1, 8]) is known in the step: the step records
// the fed tensor as the placeholder's output, so input_shapes and float_ops use the fed shape.
TEST(Profiler, FedShapesGiveInputShapesAndFloatOps) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
  Output w = constant(root.with_op_name("w"), Tensor(DType::kFloat32, Shape{8, 16}));
  Output mm = matmul(root.with_op_name("mm"), x, w);
  Session session(g);
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  session.run({{x, Tensor(DType::kFloat32, Shape{32, 8})}}, {mm}, {}, options, &md);
  Profiler p(g);
  p.add_step(1, md);
  auto o = quiet(ProfileOptionBuilder().select({"float_ops", "input_shapes", "output_bytes"}).build());
  GraphProfile scope = p.profile_name_scope(o);
  const GraphNodeProto *matmul = nullptr, *fed = nullptr;
  for (const auto& c : scope.root.children) {
    if (c.name == "mm") matmul = &c;
    if (c.name == "x") fed = &c;
  }
  ASSERT_NE(matmul, nullptr) << scope.text();
  EXPECT_EQ(matmul->input_shapes.at(0), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(matmul->input_shapes.at(1), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(matmul->float_ops, 2 * 32 * 8 * 16);
  ASSERT_NE(fed, nullptr) << scope.text();
  EXPECT_GE(fed->output_bytes, 32 * 8 * 4);
  EXPECT_NE(scope.text().find("0:32x8|1:8x16"), std::string::npos) << scope.text();
}

// A big step's nodes' float ops and input shapes are worked out on two threads (each half of
// them on one): every node of a chain over a fed [-1, 8] tensor has the fed shape's, first half
// and second alike.
TEST(Profiler, ABigStepsFloatOpsAndInputShapesAreEveryNodes) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
  Output y = x;
  const Scope links = root.with_name_scope("chain");
  constexpr int kLinks = 20000;
  for (int i = 0; i < kLinks; ++i) y = add(links, y, x);
  Session session(g, {.inter_op_threads = 1});
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  session.run({{x, Tensor(DType::kFloat32, Shape{3, 8})}}, {y}, {}, traced, &md);
  Profiler p(g);
  p.add_step(1, md);
  auto o = quiet(ProfileOptionBuilder().select({"float_ops", "input_shapes"}).with_max_depth(3).build());
  GraphProfile scope = p.profile_name_scope(o);
  const GraphNodeProto* chain = nullptr;
  for (const auto& c : scope.root.children)
    if (c.name == "chain") chain = &c;
  ASSERT_NE(chain, nullptr) << scope.text().substr(0, 2000);
  ASSERT_EQ(chain->children.size(), static_cast<size_t>(kLinks));
  size_t wrong = 0;
  for (const GraphNodeProto& link : chain->children) {
    const bool right = link.float_ops == 3 * 8 && link.input_shapes.size() == 2 &&
                       link.input_shapes.at(0) == std::vector<int64_t>{3, 8} &&
                       link.input_shapes.at(1) == std::vector<int64_t>{3, 8};
    if (!right && wrong++ < 3) ADD_FAILURE() << link.name << ": " << link.float_ops << " float ops";
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(chain->total_float_ops, int64_t{3} * 8 * kLinks);
}

// The scope and graph views name their entries by views into the model's node names. When the
// graph grows between steps, the model's nodes move (short names with them): the views must
// be made again, and show the old nodes and the new ones by their names.
TEST(Profiler, ViewsOfAGraphThatGrewBetweenSteps) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{4});
  Output one = constant(root.with_op_name("one"), Tensor::from_vector<float>({1, 1, 1, 1}));
  auto grow = [&](const std::string& scope_name, Output from, int n) {
    const Scope scope = root.with_name_scope(scope_name);
    for (int i = 0; i < n; ++i) from = add(scope, from, one);
    return from;
  };
  Output a = grow("a", x, 3);
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  const FeedList feeds{{x, Tensor::from_vector<float>({0, 0, 0, 0})}};
  Profiler p(g);
  std::ostringstream log;
  p.set_log(&log);
  {
    Session session(g);
    RunMetadata md;
    session.run(feeds, {a}, {}, traced, &md);
    p.add_step(1, md);
  }
  const auto o = quiet(ProfileOptionBuilder().build());         // every node shown, by name
  EXPECT_EQ(p.profile_name_scope(o).root.children.size(), 3u);  // a, one, x
  Output b = grow("b", a, 300);                                 // enough nodes that the model's array grows
  {
    Session session(g);
    RunMetadata md;
    session.run(feeds, {b}, {}, traced, &md);
    p.add_step(2, md);
  }
  const GraphProfile scope = p.profile_name_scope(o);
  std::vector<std::string> top;
  for (const GraphNodeProto& c : scope.root.children) top.push_back(c.name);
  EXPECT_EQ(top, (V{"a", "b", "one", "x"})) << scope.text();
  ASSERT_EQ(scope.root.children[1].children.size(), 300u) << scope.text();
  EXPECT_EQ(scope.root.children[1].children[0].name, "b/Add") << scope.text();
  ASSERT_EQ(scope.root.children[0].children.size(), 3u) << scope.text();
  EXPECT_EQ(scope.root.children[0].children[2].name, "a/Add_2") << scope.text();
  // The graph view from b's last node down its inputs (100 levels: tfprof's default max_depth).
  const GraphProfile graph = p.profile_graph(o);
  EXPECT_NE(graph.text().find("\n  b/Add_299 ("), std::string::npos) << graph.text().substr(0, 2000);
  EXPECT_NE(graph.text().find(std::string(2 * 50, ' ') + "b/Add_250 ("), std::string::npos)
      << graph.text().substr(0, 2000);
}

TEST(Profiler, RunMetadataWithoutStepStatsIsIgnored) {
  Graph g;
  Profiler p(g);
  std::ostringstream log;
  p.set_log(&log);
  p.add_step(4, RunMetadata());
  EXPECT_TRUE(p.steps().empty());
  EXPECT_EQ(log.str(), "Invalid RunMetadata for step 4\n");
}

// A view of 20,000 lines or more makes the later part of its top level on a second thread:
// its text, protos and timeline come out whole and in display order all the same.
TEST(Profiler, ABigViewMadeOnTwoThreadsKeepsItsOrder) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{2});
  Output one = constant(root.with_op_name("one"), Tensor::from_vector<float>({1, 1}));
  Output y = x;
  for (const char* name : {"a", "b", "c", "d"}) {
    const Scope scope = root.with_name_scope(name);
    for (int i = 0; i < 6000; ++i) y = add(scope, y, one);
  }
  Session session(g, {.inter_op_threads = 1});
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  session.run({{x, Tensor::from_vector<float>({0, 0})}}, {y}, {}, traced, &md);
  Profiler p(g);
  std::ostringstream log, out;
  p.set_log(&log);
  p.set_stdout(&out);
  p.add_step(1, md);

  const GraphProfile view = p.profile_name_scope(quiet(ProfileOptionBuilder().build()));
  std::vector<std::string> top;
  for (const GraphNodeProto& c : view.root.children) top.push_back(c.name);
  EXPECT_EQ(top, (V{"a", "b", "c", "d", "one", "x"}));
  // Every line, after the legend's, is the next node of a walk of the protos, indented by its depth.
  std::vector<std::string> walked;
  std::function<void(const GraphNodeProto&, int)> walk = [&](const GraphNodeProto& node, int depth) {
    walked.push_back(std::string(2 * static_cast<size_t>(depth), ' ') + node.name + " (");
    for (const GraphNodeProto& c : node.children) walk(c, depth + 1);
  };
  walk(view.root, 0);
  ASSERT_EQ(walked.size(), 1u + 4u + 24000u + 2u);
  std::istringstream text(view.text());
  std::string line;
  std::getline(text, line);  // the legend
  size_t lines = 0, wrong = 0;
  while (std::getline(text, line)) {
    if (lines >= walked.size() || line.compare(0, walked[lines].size(), walked[lines]) != 0) {
      if (wrong++ == 0) ADD_FAILURE() << "line " << lines << ": " << line;
    }
    ++lines;
  }
  EXPECT_EQ(lines, walked.size());
  EXPECT_EQ(wrong, 0u);

  // The timeline of what the view displays: nodes from both threads' parts.
  const fs::path dir = fs::path(::testing::TempDir()) / "tfprof_big_view";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string base = (dir / "t.json").string();
  p.profile_name_scope(ProfileOptionBuilder().with_timeline_output(base).with_step(1).build());
  const std::string trace = read_file(base + "_1");
  EXPECT_TRUE(validate_chrome_trace(trace).empty());
  for (const char* name : {"\"a/Add\"", "\"b/Add_5999\"", "\"c/Add\"", "\"d/Add_5999\""})
    EXPECT_NE(trace.find(name), std::string::npos) << name;

  // Printed, the view writes its indentation as it goes; with no output it defers it to the
  // first text() (view_text.h). Both come out the same, on two threads as on one.
  const std::string file = (dir / "scope.txt").string();
  p.profile_name_scope(ProfileOptionBuilder().with_file_output(file).build());
  const std::string printed = read_file(file);
  const std::string prefix = "Profile:\n";
  ASSERT_NE(printed.find(prefix), std::string::npos);
  EXPECT_TRUE(printed.substr(printed.find(prefix) + prefix.size()) == view.text());
  fs::remove_all(dir);
}

// Past 10,000 records the Profiler works a step's memory by kind out on another thread while its
// model takes the step in: what it keeps is what memory_by_kind gives alone.
TEST(Profiler, ABigStepsMemoryByKindIsTheOneWorkedOutAlone) {
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{2, 8});
  Output h = nn::dense(root.with_name_scope("hidden"), x, 4, nn::Activation::relu, {.seed = 1});
  Output loss = reduce_mean(root.with_name_scope("loss"), square(root.with_name_scope("loss"), h));
  Node* train = GradientDescentOptimizer(0.1).minimize(root, loss);
  Output chain = h;
  const Scope links = root.with_name_scope("chain");
  for (int i = 0; i < 10000; ++i) chain = add(links, chain, h);
  Session session(g);
  session.run(global_variables_initializer(root));
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  session.run({{x, Tensor(DType::kFloat32, Shape{2, 8})}}, {loss, chain}, {train}, traced, &md);
  size_t records = 0;
  for (const DeviceStepStats& d : md.step_stats.dev_stats()) records += d.node_stats.size();
  ASSERT_GE(records, 10000u);

  Profiler p(g);
  p.add_step(1, md);
  const MemoryByKind alone = memory_by_kind(g, md.step_stats);
  ASSERT_TRUE(p.memory_by_kind(1).has_value());
  EXPECT_EQ(p.memory_by_kind(1)->to_json(), alone.to_json());
  EXPECT_GT(alone.of(MemoryKind::kParameters), 0);
  EXPECT_GT(alone.of(MemoryKind::kActivations), 0);
  // The model took the step in beside it.
  EXPECT_NE(p.profile_operations(quiet(ProfileOptionBuilder().build())).text().find("Add "), std::string::npos);
}

}  // namespace
}  // namespace stepscope
