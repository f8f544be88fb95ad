// MonitoredTrainingSession, ported from TensorFlow's MonitoredTrainingSessionTest: checkpoints
// saved and restored, the USE_DEFAULT / off / explicit intervals, the chief's default hooks and
// their order, the non-chief, summaries in the summary directory, and recovery from a checkpoint
// with the real CheckpointSaverHook.
#include "stepscope/hooks/monitored_training_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "stepscope/hooks/checkpoint_saver_hook.h"
#include "stepscope/hooks/step_counter_hook.h"
#include "stepscope/hooks/summary_saver_hook.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/ops/summary_ops.h"
#include "stepscope/train/event_file.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

using testing::TempDir;

int64_t i64(const Tensor& t) { return t.scalar_value<int64_t>(); }

struct TrainingGraph {
  Graph g;
  Scope root{g};
  Variable gstep = get_or_create_global_step(root);
  Output do_step = assign_add(root.with_op_name("do_step"), gstep.value(), constant(root, int64_t{1}));
};

class CountingHook : public SessionRunHook {
 public:
  using SessionRunHook::begin;
  void begin(Graph&) override { ++begin_calls; }
  void after_create_session(Session&, Coordinator&) override { ++after_create_session_calls; }
  void end(Session&) override { ++end_calls; }
  int begin_calls = 0, after_create_session_calls = 0, end_calls = 0;
};

class RaiseOnceAtCountN : public SessionRunHook {
 public:
  RaiseOnceAtCountN(int n, std::function<void()> raise) : n_(n), raise_(std::move(raise)) {}
  std::optional<SessionRunArgs> before_run(SessionRunContext&) override {
    if (--n_ == 0 && !raised) {
      raised = true;
      raise_();
    }
    return std::nullopt;
  }
  bool raised = false;

 private:
  int n_;
  std::function<void()> raise_;
};

// The global steps of the checkpoints the directory's index lists, oldest first.
std::vector<int64_t> checkpoint_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::optional<CheckpointState> state = get_checkpoint_state(dir);
  if (!state) return steps;
  for (const std::string& p : state->all_model_checkpoint_paths)
    steps.push_back(std::stoll(p.substr(p.rfind('-') + 1)));
  return steps;
}

std::vector<Event> dir_events(const std::string& dir) {
  SummaryWriterCache::clear();  // flushes and closes the hooks' writers
  std::vector<Event> all;
  for (const std::string& f : list_event_files(dir))
    for (Event& e : read_events(f)) all.push_back(std::move(e));
  return all;
}

TEST(MonitoredTrainingSession, SavingRestoringCheckpoint) {
  TempDir dir;
  TrainingGraph t;
  {
    MonitoredSession sess = MonitoredTrainingSession(t.g, {.is_chief = true, .checkpoint_dir = dir.path()});
    EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
    EXPECT_EQ(i64(sess.run(t.do_step)), 1);
    EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  }
  // A restart finds the checkpoint and restores automatically.
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.is_chief = true, .checkpoint_dir = dir.path()});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 2);
}

TEST(MonitoredTrainingSession, SaveCheckpointSteps) {
  TempDir dir;
  TrainingGraph t;
  {
    MonitoredSession sess = MonitoredTrainingSession(
        t.g, {.checkpoint_dir = dir.path(), .save_checkpoint_steps = 100, .log_step_count_steps = 10});
    for (int i = 0; i < 150; ++i) sess.run(t.do_step);
    // Saved when the session was created and at step 100; the 600 s default is off.
    EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0, 100));
  }
  EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0, 100, 150));  // and at the end
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path()});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 150);
}

// The CheckpointSaverHook writes the graph files unless save_graph_def is false.
TEST(MonitoredTrainingSession, SaveGraphDef) {
  for (bool save_graph_def : {true, false}) {
    TempDir dir;
    TrainingGraph t;
    {
      MonitoredSession sess = MonitoredTrainingSession(
          t.g, {.checkpoint_dir = dir.path(), .save_checkpoint_steps = 100, .save_graph_def = save_graph_def});
      sess.run(t.do_step);
    }
    EXPECT_EQ(std::filesystem::exists(dir / "graph.pbtxt"), save_graph_def);
    EXPECT_EQ(std::filesystem::exists(dir / "model.ckpt-0.meta"), save_graph_def);
    EXPECT_EQ(std::filesystem::exists(dir / "model.ckpt-1.meta"), save_graph_def);
    EXPECT_TRUE(std::filesystem::exists(dir / "model.ckpt-1.safetensors"));
  }
}

TEST(MonitoredTrainingSession, SaveCheckpointSecs) {
  TempDir dir;
  TrainingGraph t;
  FakeClock clock;
  MonitoredSession sess =
      MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path(), .save_checkpoint_secs = 10, .clock = &clock});
  sess.run(t.do_step);
  sess.run(t.do_step);
  EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0));
  clock.advance(10);
  sess.run(t.do_step);
  EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0, 3));
}

TEST(MonitoredTrainingSession, DefaultCheckpointIntervalIs600Secs) {
  TempDir dir;
  TrainingGraph t;
  FakeClock clock;
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path(), .clock = &clock});
  for (int i = 0; i < 5; ++i) sess.run(t.do_step);
  clock.advance(599);
  sess.run(t.do_step);
  EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0));
  clock.advance(1);
  sess.run(t.do_step);
  EXPECT_THAT(checkpoint_steps(dir.path()), ElementsAre(0, 7));
}

TEST(MonitoredTrainingSession, CustomSavingWithCheckpointsOff) {
  TempDir dir;
  TrainingGraph t;
  CountingHook fake_hook;
  {
    MonitoredSession sess = MonitoredTrainingSession(
        t.g, {.checkpoint_dir = dir.path(), .chief_only_hooks = {&fake_hook}, .save_checkpoint_secs = 0});
    EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
    EXPECT_EQ(i64(sess.run(t.do_step)), 1);
    EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  }
  EXPECT_EQ(fake_hook.begin_calls, 1);
  // A restart finds no checkpoint: none was saved.
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path()});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
}

TEST(MonitoredTrainingSession, ChiefHookOrder) {
  TempDir dir;
  TrainingGraph t;
  CountingHook chief_only, user;
  MonitoredSession sess = MonitoredTrainingSession(
      t.g, {.checkpoint_dir = dir.path(), .hooks = {&user}, .chief_only_hooks = {&chief_only}});
  const auto& hooks = sess.hooks();
  ASSERT_EQ(hooks.size(), 5u);
  EXPECT_EQ(hooks[0], &chief_only);
  EXPECT_NE(dynamic_cast<StepCounterHook*>(hooks[1]), nullptr);
  EXPECT_NE(dynamic_cast<SummarySaverHook*>(hooks[2]), nullptr);
  EXPECT_NE(dynamic_cast<CheckpointSaverHook*>(hooks[3]), nullptr);
  EXPECT_EQ(hooks[4], &user);
}

TEST(MonitoredTrainingSession, DefaultHooksCanBeSwitchedOff) {
  TempDir dir;
  TrainingGraph t;
  CountingHook user;
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path(),
                                                         .hooks = {&user},
                                                         .save_checkpoint_secs = 0,
                                                         .save_summaries_steps = 0,
                                                         .log_step_count_steps = 0});
  EXPECT_THAT(sess.hooks(), ElementsAre(&user));
}

TEST(MonitoredTrainingSession, OnlySummariesWithoutACheckpointDir) {
  TempDir dir;
  TrainingGraph t;
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.summary_dir = dir.path()});
  ASSERT_EQ(sess.hooks().size(), 2u);
  EXPECT_NE(dynamic_cast<StepCounterHook*>(sess.hooks()[0]), nullptr);
  EXPECT_NE(dynamic_cast<SummarySaverHook*>(sess.hooks()[1]), nullptr);
}

TEST(MonitoredTrainingSession, NoDirectoriesNoDefaultHooks) {
  TrainingGraph t;
  CountingHook user;
  MonitoredSession sess = MonitoredTrainingSession(t.g, {.hooks = {&user}});
  EXPECT_THAT(sess.hooks(), ElementsAre(&user));
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
}

TEST(MonitoredTrainingSession, NonChiefGetsOnlyTheUserHooks) {
  TempDir dir;
  TrainingGraph t;
  CountingHook chief_only, user;
  MonitoredSession sess = MonitoredTrainingSession(
      t.g, {.is_chief = false, .checkpoint_dir = dir.path(), .hooks = {&user}, .chief_only_hooks = {&chief_only}});
  EXPECT_THAT(sess.hooks(), ElementsAre(&user));
  EXPECT_EQ(chief_only.begin_calls, 0);
  EXPECT_EQ(user.begin_calls, 1);
  // The worker neither initializes nor restores the variables.
  EXPECT_THROW(sess.run(t.gstep.value()), FailedPreconditionError);
  EXPECT_THAT(checkpoint_steps(dir.path()), IsEmpty());
}

TEST(MonitoredTrainingSession, BothSummaryIntervalsIsAnError) {
  TempDir dir;
  TrainingGraph t;
  EXPECT_THROW(MonitoredTrainingSession(
                   t.g, {.checkpoint_dir = dir.path(), .save_summaries_steps = 10, .save_summaries_secs = 5.0}),
               InvalidArgumentError);
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredTrainingSession, StepRateInTheSummaryDirAndCheckpointsLoggedInTheCheckpointDir) {
  TempDir ckpt, logs;
  TrainingGraph t;
  {
    MonitoredSession sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = ckpt.path(),
                                                           .save_checkpoint_steps = 10,
                                                           .log_step_count_steps = 10,
                                                           .summary_dir = logs.path()});
    for (int i = 0; i < 25; ++i) sess.run(t.do_step);
  }
  std::set<int64_t> rate_steps;
  for (const Event& e : dir_events(logs.path()))
    if (e.scalars().count("global_step/sec")) rate_steps.insert(e.step);
  // The first trigger only starts the clock; then one rate every 10 steps (at the step read
  // after the run that triggered).
  EXPECT_EQ(rate_steps.size(), 2u);
  std::vector<int64_t> logged;
  for (const Event& e : dir_events(ckpt.path()))
    if (e.session_log && e.session_log->status == SessionLog::kCheckpoint) logged.push_back(e.step);
  EXPECT_THAT(logged, ElementsAre(0, 10, 20, 25));
}

TEST(MonitoredTrainingSession, SummariesOfTheGraphAreSavedEveryNSteps) {
  TempDir logs;
  TrainingGraph t;
  scalar(t.root, "gstep", t.gstep.value());
  {
    MonitoredSession sess = MonitoredTrainingSession(t.g, {.save_summaries_steps = 10, .summary_dir = logs.path()});
    for (int i = 0; i < 25; ++i) sess.run(t.do_step);
  }
  std::vector<int64_t> steps;
  for (const Event& e : dir_events(logs.path()))
    if (e.scalars().count("gstep")) steps.push_back(e.step);
  EXPECT_THAT(steps, ElementsAre(1, 11, 21));
}

TEST(MonitoredTrainingSession, RecoverAndRetryOnAbortedErrorWithCheckpointSaverHook) {
  TempDir dir;
  TrainingGraph t;
  Scaffold scaffold(t.g);
  RaiseOnceAtCountN abort_hook(4, [] { throw AbortedError("Abort"); });
  CheckpointSaverHook ckpt_hook({.checkpoint_dir = dir.path(), .save_steps = 1, .scaffold = &scaffold});
  MonitoredSession sess(std::make_unique<ChiefSessionCreator>(
                            t.g, ChiefSessionCreatorOptions{.scaffold = &scaffold, .checkpoint_dir = dir.path()}),
                        {&abort_hook, &ckpt_hook});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  // At the 4th call the hook raises: the session is restored from the checkpoint at step 2.
  EXPECT_EQ(i64(sess.run(t.do_step)), 3);
  EXPECT_TRUE(abort_hook.raised);
  EXPECT_FALSE(sess.should_stop());
  EXPECT_EQ(i64(sess.run(t.do_step)), 4);
  EXPECT_FALSE(sess.should_stop());
}

TEST(MonitoredTrainingSession, TheDesignSketchLoop) {
  TempDir dir;
  TrainingGraph t;
  class StopAt : public SessionRunHook {
   public:
    void after_run(SessionRunContext& c, const SessionRunValues&) override {
      if (++runs == 20) c.request_stop();
    }
    int runs = 0;
  } stop;
  auto sess = MonitoredTrainingSession(t.g, {.checkpoint_dir = dir.path(), .hooks = {&stop}});
  while (!sess.should_stop()) sess.run(t.do_step.node);
  sess.close();
  EXPECT_EQ(latest_checkpoint(dir.path()), dir / "model.ckpt-20");
}

}  // namespace
}  // namespace stepscope
