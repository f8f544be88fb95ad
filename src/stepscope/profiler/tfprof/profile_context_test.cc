// ProfileContext (TensorFlow's profile_context_test.py, ported) and model_analyzer's profile()
// and advise() free functions.
#include "stepscope/profiler/tfprof/profile_context.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stepscope/base/error.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/model_analyzer.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

// A small model trained on a fixed batch: loss and a train op.
struct Model {
  Graph graph;
  Output x, loss;
  Node* train = nullptr;
  std::unique_ptr<Session> session;
  FeedList feeds;

  Model() {
    Scope root(graph);
    x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{4, 3});
    Output h = nn::dense(root.with_name_scope("dense"), x, 5, nn::Activation::relu, {.seed = 1});
    loss = reduce_mean(root.with_name_scope("loss"), square(root, h));
    train = GradientDescentOptimizer(0.1).minimize(root, loss);
    session = std::make_unique<Session>(graph, SessionOptions{.inter_op_threads = 1});
    session->run(global_variables_initializer(root));
    Tensor xs(DType::kFloat32, Shape{4, 3});
    for (float& v : xs.flat<float>()) v = 0.5f;
    feeds = {{x, xs}};
  }
  void step() { session->run(feeds, {loss}, {train}); }
};

TEST(ProfileContext, Basics) {  // testBasics: trace 1 and 3, profile at 3, dump at 3
  testing::TempDir dir;
  Model m;  // its initialization ran before the context: not a step of it
  const std::string report = dir / "op_report.txt";
  {
    ProfileContext ctx(dir.path(), {.trace_steps = std::vector<int64_t>{1, 3}, .dump_steps = std::vector<int64_t>{3}});
    ctx.add_auto_profiling(
        "op", ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory(0, 0)).with_file_output(report).build(), {3});
    EXPECT_EQ(ctx.profiler(), nullptr);
    EXPECT_FALSE(m.session->expects_traced_steps());
    for (int i = 0; i < 5; ++i) m.step();
    EXPECT_TRUE(m.session->expects_traced_steps());  // it told the session it traces
    EXPECT_EQ(ctx.step(), 5);
    ASSERT_NE(ctx.profiler(), nullptr);
    EXPECT_EQ(ctx.profiler()->steps(), (std::vector<int64_t>{1, 3}));
  }
  // The dump at step 3 holds steps 1 and 3; the op view ran at step 3 into its file.
  ASSERT_TRUE(fs::exists(dir / "profile_3"));
  EXPECT_FALSE(fs::exists(dir / "profile_100"));
  Profiler loaded = Profiler::load(dir / "profile_3");
  EXPECT_EQ(loaded.steps(), (std::vector<int64_t>{1, 3}));
  ASSERT_TRUE(fs::exists(report));
  std::ifstream in(report);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("MatMul"), std::string::npos) << text.str();
  // Out of the context, runs are not steps of anything.
  m.step();
  EXPECT_EQ(current_run_interceptor(), nullptr);
}

TEST(ProfileContext, ExplicitTraceOfTheNextStep) {
  testing::TempDir dir;
  Model m;
  ProfileContext ctx(dir.path(), {.trace_steps = std::vector<int64_t>{}, .dump_steps = std::vector<int64_t>{}});
  m.step();
  EXPECT_EQ(ctx.profiler(), nullptr);  // nothing traced yet
  ctx.trace_next_step();
  // The caller's RunMetadata receives the trace.
  RunMetadata md;
  m.session->run(m.feeds, {m.loss}, {m.train}, {}, &md);
  EXPECT_FALSE(md.step_stats.empty());
  m.step();
  ASSERT_NE(ctx.profiler(), nullptr);
  EXPECT_EQ(ctx.profiler()->steps(), (std::vector<int64_t>{1}));
  std::ostringstream out;
  ctx.profiler()->set_stdout(&out);
  const auto ops = ctx.profiler()->profile_operations(ProfileOptionBuilder::time_and_memory(0, 0));
  EXPECT_FALSE(ops.root.children.empty());
  ctx.dump_next_step();
  m.step();
  EXPECT_TRUE(fs::exists(dir / "profile_3"));
  EXPECT_EQ(Profiler::load(dir / "profile_3").steps(), (std::vector<int64_t>{1, 3}));  // dumping traces too
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"profile_3"}));
}

TEST(ProfileContext, AutoTracingAfterWarmUpAndNewFetches) {
  testing::TempDir dir;
  Model m;
  ProfileContext ctx(dir.path());
  for (int i = 0; i <= ProfileContext::kWarmupSteps; ++i) m.step();  // steps 0..10: warm-up
  EXPECT_EQ(ctx.profiler(), nullptr);
  m.step();  // step 11: fetches never traced
  ASSERT_NE(ctx.profiler(), nullptr);
  EXPECT_EQ(ctx.profiler()->steps(), (std::vector<int64_t>{11}));
  m.session->run(m.feeds, {m.loss});  // step 12: other fetches
  const auto steps = ctx.profiler()->steps();
  EXPECT_EQ(steps.back(), 12);
  // Then only random steps while coverage is low, and at most 100 traces whatever happens.
  for (int i = 0; i < 300; ++i) m.step();
  EXPECT_LE(ctx.profiler()->steps().size() + 0u, static_cast<size_t>(ProfileContext::kMaxTracedSteps));
  EXPECT_TRUE(fs::exists(dir / "profile_100"));  // the default dump step
}

TEST(ProfileContext, Errors) {
  testing::TempDir dir;
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([] { ProfileContext ctx(""); }),
            "Must have a directory for profile.");
  std::vector<int64_t> many(101);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { ProfileContext ctx(dir.path(), {.trace_steps = many}); }),
            "Only support tracing up to 100 steps.");
  {
    ProfileContext ctx(dir.path());
    EXPECT_EQ(testing::error_text<InternalError>([&] { ProfileContext second(dir.path()); }),
              "Already in context or context not cleaned.");
    EXPECT_THROW(ctx.add_auto_profiling("python", ProfileOptionBuilder().build(), {1}), InvalidArgumentError);
    // A disabled context installs nothing and does nothing.
    ProfileContext disabled(dir.path(), {.enabled = false});
    disabled.trace_next_step();
    EXPECT_EQ(disabled.profiler(), nullptr);
  }
  ProfileContext again(dir.path());  // the first one uninstalled itself
  EXPECT_EQ(current_run_interceptor() != nullptr, true);
}

TEST(ProfileContext, AnUnwritableDumpIsAnErrorNamingTheFile) {
  testing::TempDir dir;
  const fs::path file = fs::path(dir.path()) / "a_file";
  std::ofstream(file) << "x";
  Model m;
  ProfileContext ctx((file / "profiles").string(), {.trace_steps = std::vector<int64_t>{}});
  ctx.dump_next_step();
  try {
    m.step();
    ADD_FAILURE() << "the dump should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("profile_0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ctx.step(), 1);
  m.step();  // the context goes on
  EXPECT_EQ(ctx.step(), 2);
}

TEST(ModelAnalyzer, ProfileAndAdvise) {
  Model m;
  std::ostringstream sink;
  // Default: the trainable variables' parameters by name scope (kernel 3x5 + bias 5 = 20).
  auto params =
      profile(m.graph, nullptr, "scope",
              ProfileOptionBuilder(ProfileOptionBuilder::trainable_variables_parameter()).with_empty_output().build());
  ASSERT_TRUE(std::holds_alternative<GraphProfile>(params));
  EXPECT_EQ(std::get<GraphProfile>(params).root.total_parameters, 20);

  RunMetadata md;
  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  m.session->run(m.feeds, {m.loss}, {m.train}, traced, &md);
  auto ops = profile(m.graph, &md, "op", ProfileOptionBuilder::time_and_memory(0, 0));
  ASSERT_TRUE(std::holds_alternative<MultiGraphProfile>(ops));
  EXPECT_FALSE(std::get<MultiGraphProfile>(ops).root.children.empty());
  EXPECT_FALSE(text_of(ops).empty());
  EXPECT_TRUE(std::holds_alternative<MultiGraphProfile>(
      profile(m.graph, &md, "code", ProfileOptionBuilder().with_empty_output().build())));
  EXPECT_TRUE(std::holds_alternative<GraphProfile>(
      profile(m.graph, &md, "graph", ProfileOptionBuilder().with_empty_output().build())));
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { profile(m.graph, &md, "python"); }), "unknown cmd: python");

  const AdviceProto advice = advise(m.graph, &md);
  EXPECT_FALSE(advice.checkers.empty());
}

}  // namespace
}  // namespace stepscope
