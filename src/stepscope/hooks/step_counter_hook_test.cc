// Ports StepCounterHookTest of basic_session_run_hooks_test.py (reference §2.4, §6.2); the
// summaries are read back from real event files instead of a FakeSummaryWriter.
#include "stepscope/hooks/step_counter_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "stepscope/testing/error_text.h"
#include "stepscope/hooks/hook_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::read_dir_events;
using testing::summaries_by_step;
using testing::TempDir;

constexpr double kMockStartTime = 1484695987.209386;

std::vector<int64_t> keys(const std::map<int64_t, std::map<std::string, float>>& m) {
  std::vector<int64_t> out;
  for (const auto& [k, v] : m) out.push_back(k);
  return out;
}

// A graph with a global step and a train op that adds `increment` to it after the hooks' read
// (as the reference's tests do), an init op, and a writer in a temp dir.
struct Fixture {
  explicit Fixture(int64_t increment = 1) {
    get_or_create_global_step(root);
    train_op = testing::increment_global_step(g, increment);
    init = global_variables_initializer(root);
  }
  std::map<int64_t, std::map<std::string, float>> summaries() {
    writer->flush();
    return summaries_by_step(read_dir_events(dir.path()));
  }

  Graph g;
  Scope root{g};
  Node* train_op = nullptr;
  Node* init = nullptr;
  TempDir dir;
  std::shared_ptr<SummaryWriter> writer = std::make_shared<SummaryWriter>(dir.path());
  FakeClock clock{kMockStartTime};
  std::vector<std::string> infos, warnings;
  HookLog log{.info = [this](const std::string& s) { infos.push_back(s); },
              .warning = [this](const std::string& s) { warnings.push_back(s); }};
};

using testing::error_text;

TEST(StepCounterHook, EveryNSecsAloneNeedsEveryNStepsSwitchedOff) {
  // The default every_n_steps=100 makes every_n_secs alone "both" (the reference's quirk).
  EXPECT_EQ(error_text<InvalidArgumentError>([] { StepCounterHook h({.every_n_secs = 0.1}); }),
            "exactly one of every_n_steps and every_n_secs should be provided.");
  EXPECT_EQ(error_text<InvalidArgumentError>([] { StepCounterHook h({.every_n_steps = std::nullopt}); }),
            "exactly one of every_n_steps and every_n_secs should be provided.");
  StepCounterHook by_secs({.every_n_steps = std::nullopt, .every_n_secs = 0.1});
  StepCounterHook by_default;  // every 100 steps
}

TEST(StepCounterHook, NeedsAGlobalStep) {
  Graph g;
  StepCounterHook hook;
  EXPECT_EQ(error_text<FailedPreconditionError>([&] { hook.begin(g); }),
            "Global step should be created to use StepCounterHook.");
}

TEST(StepCounterHook, EveryNSteps) {
  Fixture f;
  StepCounterHook hook({.every_n_steps = 10, .summary_writer = f.writer, .clock = &f.clock, .log = f.log});
  hook.begin(f.g);
  EXPECT_EQ(hook.summary_tag(), "global_step/sec");
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 30; ++i) {
    f.clock.advance(0.01);
    mon.run(f.train_op);
  }
  hook.end(sess);
  EXPECT_TRUE(f.warnings.empty()) << f.warnings.front();
  auto summaries = f.summaries();
  EXPECT_THAT(keys(summaries), ElementsAre(11, 21));
  for (int64_t step : {11, 21}) {
    ASSERT_EQ(summaries[step].size(), 1u);
    // 10 steps in 0.1 s.
    EXPECT_NEAR(summaries[step].at("global_step/sec"), 100.0, 1e-3);
  }
  EXPECT_THAT(f.infos, ElementsAre("global_step/sec: 100", "global_step/sec: 100"));
}

TEST(StepCounterHook, EveryNSecs) {
  Fixture f;
  StepCounterHook hook({.every_n_steps = std::nullopt,
                        .every_n_secs = 0.1,
                        .summary_writer = f.writer,
                        .clock = &f.clock,
                        .log = f.log});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  mon.run(f.train_op);
  f.clock.advance(0.2);
  mon.run(f.train_op);
  f.clock.advance(0.2);
  mon.run(f.train_op);
  hook.end(sess);
  auto summaries = f.summaries();
  EXPECT_THAT(keys(summaries), ElementsAre(2, 3));
  for (const auto& [step, values] : summaries) EXPECT_NEAR(values.at("global_step/sec"), 5.0, 1e-4);  // 1 step / 0.2 s
}

TEST(StepCounterHook, TagIsTheGlobalStepsName) {
  Graph g;
  Scope root(g);
  // An int32 global step of another name, as get_variable('foo', initializer=0) under 'bar'.
  Variable foo = make_variable(root.with_name_scope("bar"), "foo", constant(root, int32_t{0}), /*trainable=*/false);
  g.add_to_collection(kGlobalStepCollection, foo.node);
  Node* train_op = testing::increment_global_step(g, 1);
  Node* init = global_variables_initializer(root);
  TempDir dir;
  auto writer = std::make_shared<SummaryWriter>(dir.path());
  FakeClock clock(kMockStartTime);
  StepCounterHook hook({.every_n_steps = 1, .every_n_secs = std::nullopt, .summary_writer = writer, .clock = &clock});
  hook.begin(g);
  Session sess(g);
  sess.run(init);
  HookedSession mon(sess, {&hook});
  mon.run(train_op);
  clock.advance(0.5);
  mon.run(train_op);
  hook.end(sess);
  writer->flush();
  auto summaries = summaries_by_step(read_dir_events(dir.path()));
  EXPECT_THAT(keys(summaries), ElementsAre(2));
  EXPECT_THAT(summaries[2], ElementsAre(std::pair<const std::string, float>("bar/foo/sec", 2.0f)));
}

TEST(StepCounterHook, WarnsTheFirstFiveTimesTheGlobalStepDoesNotIncrease) {
  Fixture f(/*increment=*/0);
  StepCounterHook hook({.every_n_steps = 1, .every_n_secs = std::nullopt, .clock = &f.clock, .log = f.log});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  mon.run(f.train_op);  // records the global step
  EXPECT_TRUE(f.warnings.empty());
  for (int i = 0; i < 30; ++i) mon.run(f.train_op);
  hook.end(sess);
  ASSERT_EQ(f.warnings.size(), 5u);
  EXPECT_TRUE(std::regex_search(f.warnings.back(), std::regex("global step.*has not been increased")));
  EXPECT_THAT(f.warnings.back(), HasSubstr("Current value (could be stable): 0 vs previous value: 0."));
}

TEST(StepCounterHook, WithoutAWriterOnlyLogs) {
  Fixture f;
  StepCounterHook hook({.every_n_steps = 2, .clock = &f.clock, .log = f.log});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 5; ++i) {
    f.clock.advance(0.25);
    mon.run(f.train_op);
  }
  EXPECT_THAT(f.infos, ElementsAre("global_step/sec: 4", "global_step/sec: 4"));
  EXPECT_THAT(keys(f.summaries()), ElementsAre());
}

TEST(StepCounterHook, OutputDirUsesTheCachedWriter) {
  Fixture f;
  const std::string dir = f.dir / "counter";
  StepCounterHook hook({.every_n_steps = 1, .output_dir = dir, .clock = &f.clock, .log = f.log});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 3; ++i) {
    f.clock.advance(1.0);
    mon.run(f.train_op);
  }
  SummaryWriterCache::get(dir)->flush();
  auto summaries = summaries_by_step(read_dir_events(dir));
  EXPECT_THAT(keys(summaries), ElementsAre(2, 3));
  SummaryWriterCache::clear();
}

TEST(StepCounterHook, APlainBeginFindsTheGlobalStepWhenTheSessionIsCreated) {
  Fixture f;
  StepCounterHook hook({.every_n_steps = 1, .summary_writer = f.writer, .clock = &f.clock, .log = f.log});
  hook.begin();
  Session sess(f.g);
  sess.run(f.init);
  Coordinator coord;
  hook.after_create_session(sess, coord);
  EXPECT_EQ(hook.summary_tag(), "global_step/sec");
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 3; ++i) {
    f.clock.advance(0.5);
    mon.run(f.train_op);
  }
  EXPECT_THAT(keys(f.summaries()), ElementsAre(2, 3));
  // A graph without a global step fails there instead.
  Graph empty;
  Session other(empty);
  StepCounterHook lost;
  lost.begin();
  EXPECT_EQ(error_text<FailedPreconditionError>([&] { lost.after_create_session(other, coord); }),
            "Global step should be created to use StepCounterHook.");
}

class StepsPerRun : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, std::vector<int64_t>>> {};

TEST_P(StepsPerRun, LogsAtTheReferencesSteps) {
  const auto& [every_n_steps, steps_per_run, expected] = GetParam();
  Fixture f(steps_per_run);
  StepCounterHook hook({.every_n_steps = every_n_steps,
                        .summary_writer = f.writer,
                        .steps_per_run = steps_per_run,
                        .clock = &f.clock,
                        .log = f.log});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 5; ++i) {
    f.clock.advance(0.01);
    mon.run(f.train_op);
  }
  hook.end(sess);
  auto summaries = f.summaries();
  EXPECT_EQ(keys(summaries), expected);
  for (const auto& [step, values] : summaries) {
    ASSERT_EQ(values.count("global_step/sec"), 1u);
    EXPECT_GT(values.at("global_step/sec"), 0);
  }
  EXPECT_TRUE(f.warnings.empty());
}

INSTANTIATE_TEST_SUITE_P(Reference, StepsPerRun,
                         ::testing::Values(std::make_tuple(10, 5, std::vector<int64_t>{15, 25}),
                                           std::make_tuple(5, 5, std::vector<int64_t>{10, 15, 20, 25}),
                                           std::make_tuple(5, 10, std::vector<int64_t>{20, 30, 40, 50})));

}  // namespace
}  // namespace stepscope
