// The reference's CheckpointSaverHookTest and CheckpointSaverHookMultiStepTest
// (basic_session_run_hooks_test.py), with HookedSession where the reference uses _HookedSession
// and SingularMonitoredSession where it does; plus the checkpoint files, log lines, recovery,
// max_to_keep across runs and failures to write.
#include "stepscope/hooks/checkpoint_saver_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "stepscope/base/file_io.h"
#include "stepscope/hooks/basic_session_run_hooks_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/graph_def.h"
#include "stepscope/train/meta_graph.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::load_int_variable;
using testing::TempDir;

constexpr double kMockStartTime = 1484695987.209386;

class MockCheckpointSaverListener : public CheckpointSaverListener {
 public:
  void begin() override { ++begin_count; }
  void before_save(Session&, int64_t) override { ++before_save_count; }
  bool after_save(Session&, int64_t step) override {
    ++after_save_count;
    steps.push_back(step);
    return ask_for_stop;
  }
  void end(Session&, int64_t) override { ++end_count; }
  std::map<std::string, int> get_counts() const {
    return {{"begin", begin_count},
            {"before_save", before_save_count},
            {"after_save", after_save_count},
            {"end", end_count}};
  }

  int begin_count = 0, before_save_count = 0, after_save_count = 0, end_count = 0;
  bool ask_for_stop = false;
  std::vector<int64_t> steps;
};

std::map<std::string, int> counts(int begin, int before_save, int after_save, int end) {
  return {{"begin", begin}, {"before_save", before_save}, {"after_save", after_save}, {"end", end}};
}

// setUp of the reference: a graph with the global step and a train op that increments it.
class CheckpointSaverHookTest : public ::testing::Test {
 protected:
  explicit CheckpointSaverHookTest(int64_t steps_per_run = 1)
      : global_step(get_or_create_global_step(root)),
        train_op(testing::increment_global_step(graph, steps_per_run)->output(0)),
        init(global_variables_initializer(root)) {}
  // What a test's hooks left in the cached summary writer goes out while model_dir exists:
  // flushed after its removal, it would make the directory again.
  ~CheckpointSaverHookTest() override { SummaryWriterCache::clear(); }

  int64_t saved_step() const { return load_int_variable(model_dir.path(), "global_step"); }

  // The reference's SingularMonitoredSession(hooks=[hook], scaffold, checkpoint_dir) with `runs`
  // runs of the train op; returns the global step read on the raw session before closing.
  int64_t run_monitored(CheckpointSaverHook& hook, int runs, std::function<void(MonitoredSession&, int)> after = {},
                        Scaffold* with_scaffold = nullptr) {
    SingularMonitoredSession sess(graph,
                                  {.hooks = {&hook}, .scaffold = with_scaffold, .checkpoint_dir = model_dir.path()});
    for (int i = 0; i < runs; ++i) {
      sess.run(train_op);
      if (after) after(sess, i);
    }
    const int64_t step = global_step_value(sess.raw_session().run(global_step.value()));
    sess.close();
    return step;
  }

  // begin, scaffold.finalize() and the init op, as the reference's _HookedSession tests do.
  std::unique_ptr<Session> start(CheckpointSaverHook& hook) {
    hook.begin(graph);
    scaffold.finalize();
    auto sess = std::make_unique<Session>(graph);
    sess->run(scaffold.init_op());
    return sess;
  }

  TempDir model_dir;
  Graph graph;
  Scope root{graph};
  Variable global_step;
  Output train_op;
  Node* init;
  Scaffold scaffold{graph};
  Coordinator coord;
};

TEST_F(CheckpointSaverHookTest, SavesWhenSaverAndScaffoldBothMissing) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 1);
}

TEST_F(CheckpointSaverHookTest, RaiseWhenSaverAndScaffoldBothPresent) {
  Saver saver(graph);
  try {
    CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .saver = &saver, .scaffold = &scaffold});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "You cannot provide both saver and scaffold.");
  }
}

TEST_F(CheckpointSaverHookTest, RaiseInBothSecsAndSteps) {
  try {
    CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_secs = 10, .save_steps = 20});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "Can not provide both every_secs and every_steps.");
  }
}

TEST_F(CheckpointSaverHookTest, RaiseInNoneSecsAndSteps) {
  try {
    CheckpointSaverHook hook({.checkpoint_dir = model_dir.path()});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "Either every_secs or every_steps should be provided.");
  }
}

TEST_F(CheckpointSaverHookTest, RequiresAGlobalStep) {
  Graph g;
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
  try {
    hook.begin(g);
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_STREQ(e.what(), "Global step should be created to use CheckpointSaverHook.");
  }
}

TEST_F(CheckpointSaverHookTest, SaveSecsSavesInFirstStep) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_secs = 2, .scaffold = &scaffold});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 1);
}

TEST_F(CheckpointSaverHookTest, SaveSecsCallsListenersAtBeginAndEnd) {
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook(
      {.checkpoint_dir = model_dir.path(), .save_secs = 2, .scaffold = &scaffold, .listeners = {&listener}});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);  // hook runs here
  mon_sess.run(train_op);  // hook won't run here, so it does at end
  hook.end(*sess);         // hook runs here
  EXPECT_EQ(listener.get_counts(), counts(1, 2, 2, 1));
}

// A save when the session is created (step 0), one per run (save_steps=1), none at the end
// (already saved at step 2).
TEST_F(CheckpointSaverHookTest, ListenerWithMonitoredSession) {
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook(
      {.checkpoint_dir = model_dir.path(), .save_steps = 1, .scaffold = &scaffold, .listeners = {&listener}});
  EXPECT_EQ(run_monitored(hook, 2, {}, &scaffold), 2);
  EXPECT_EQ(listener.get_counts(), counts(1, 3, 3, 1));
  EXPECT_THAT(listener.steps, ElementsAre(0, 1, 2));
}

TEST_F(CheckpointSaverHookTest, ListenerStopsTrainingInAfterSave) {
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook(
      {.checkpoint_dir = model_dir.path(), .save_steps = 1, .scaffold = &scaffold, .listeners = {&listener}});
  run_monitored(
      hook, 3,
      [&](MonitoredSession& sess, int i) {
        if (i < 2)
          EXPECT_FALSE(sess.should_stop());
        else
          EXPECT_TRUE(sess.should_stop());
        if (i == 1) listener.ask_for_stop = true;
      },
      &scaffold);
}

// The saved step is restored by a new SingularMonitoredSession on a new graph.
int64_t restored_step(const std::string& dir) {
  Graph g;
  Scope root(g);
  Variable step = get_or_create_global_step(root);
  SingularMonitoredSession sess(g, {.checkpoint_dir = dir});
  return global_step_value(sess.run(step.value()));
}

TEST_F(CheckpointSaverHookTest, ListenerWithDefaultSaver) {
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1, .listeners = {&listener}});
  EXPECT_EQ(run_monitored(hook, 2), 2);
  EXPECT_EQ(listener.get_counts(), counts(1, 3, 3, 1));
  EXPECT_EQ(restored_step(model_dir.path()), 2);
}

TEST_F(CheckpointSaverHookTest, TwoListenersWithDefaultSaver) {
  MockCheckpointSaverListener listener1, listener2;
  CheckpointSaverHook hook(
      {.checkpoint_dir = model_dir.path(), .save_steps = 1, .listeners = {&listener1, &listener2}});
  EXPECT_EQ(run_monitored(hook, 2), 2);
  EXPECT_EQ(listener1.get_counts(), counts(1, 3, 3, 1));
  EXPECT_EQ(listener1.get_counts(), listener2.get_counts());
  EXPECT_EQ(restored_step(model_dir.path()), 2);
}

TEST_F(CheckpointSaverHookTest, SaveSecsSavesPeriodically) {
  FakeClock clock(kMockStartTime);
  CheckpointSaverHook hook(
      {.checkpoint_dir = model_dir.path(), .save_secs = 2, .scaffold = &scaffold, .clock = &clock});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});

  clock.set(kMockStartTime);
  mon_sess.run(train_op);  // Saved.
  clock.set(kMockStartTime + 0.5);
  mon_sess.run(train_op);  // Not saved.
  EXPECT_EQ(saved_step(), 1);

  // Simulate 2.5 seconds of sleep.
  clock.set(kMockStartTime + 2.5);
  mon_sess.run(train_op);  // Saved.
  clock.set(kMockStartTime + 2.6);
  mon_sess.run(train_op);  // Not saved.
  clock.set(kMockStartTime + 2.7);
  mon_sess.run(train_op);  // Not saved.
  EXPECT_EQ(saved_step(), 3);

  // Simulate 7.5 more seconds of sleep (10 seconds from start).
  clock.set(kMockStartTime + 10);
  mon_sess.run(train_op);  // Saved.
  EXPECT_EQ(saved_step(), 6);
}

TEST_F(CheckpointSaverHookTest, SaveSecsCallsListenersPeriodically) {
  FakeClock clock(kMockStartTime);
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(),
                            .save_secs = 2,
                            .scaffold = &scaffold,
                            .listeners = {&listener},
                            .clock = &clock});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  const double times[] = {0.5, 0.5, 3.0, 3.5, 4.0, 6.5, 7.0};  // saves at the 1st, 3rd and 6th run
  for (double t : times) {
    clock.set(kMockStartTime + t);
    mon_sess.run(train_op);
  }
  clock.set(kMockStartTime + 7.5);
  hook.end(*sess);  // step 7 was not saved: saved here
  EXPECT_EQ(listener.get_counts(), counts(1, 4, 4, 1));
  EXPECT_THAT(listener.steps, ElementsAre(1, 3, 6, 7));
}

TEST_F(CheckpointSaverHookTest, SaveStepsSavesInFirstStep) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 2, .scaffold = &scaffold});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 1);
}

TEST_F(CheckpointSaverHookTest, SaveStepsSavesPeriodically) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 2, .scaffold = &scaffold});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 1);  // Not saved
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 3);  // saved
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 3);  // Not saved
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 5);  // saved
  // model.ckpt-1, -3 and -5 on disk, listed in the index.
  auto state = get_checkpoint_state(model_dir.path());
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->model_checkpoint_path, model_dir.path() + "/model.ckpt-5");
  EXPECT_THAT(state->all_model_checkpoint_paths,
              ElementsAre(model_dir.path() + "/model.ckpt-1", model_dir.path() + "/model.ckpt-3",
                          model_dir.path() + "/model.ckpt-5"));
  EXPECT_TRUE(fs::exists(model_dir.path() + "/model.ckpt-3.safetensors"));
}

TEST_F(CheckpointSaverHookTest, SaveSavesAtEnd) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_secs = 2, .scaffold = &scaffold});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  mon_sess.run(train_op);
  hook.end(*sess);
  EXPECT_EQ(saved_step(), 2);
}

TEST_F(CheckpointSaverHookTest, SaveCheckpointBeforeFirstTrainStep) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 2, .scaffold = &scaffold});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  hook.after_create_session(*sess, coord);
  EXPECT_EQ(saved_step(), 0);  // saved at step 0
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 0);  // not after one training step
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 2);  // after save_steps
}

TEST_F(CheckpointSaverHookTest, ScaffoldWithoutSaverYet) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1, .scaffold = &scaffold});
  hook.begin(graph);
  Session sess(graph);
  sess.run(init);
  try {
    hook.after_create_session(sess, coord);
    FAIL() << "no error";
  } catch (const FailedPreconditionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the scaffold has no saver yet"));
  }
}

// Recovery calls after_create_session again (not begin), so the hook saves again at the step the
// new session restored; training then goes on from the last checkpoint.
TEST_F(CheckpointSaverHookTest, RecoveryResumesFromTheLastCheckpoint) {
  struct AbortOnce : SessionRunHook {
    int calls = 0;
    std::optional<SessionRunArgs> before_run(SessionRunContext&) override {
      if (++calls == 4) throw AbortedError("preempted");
      return std::nullopt;
    }
  } abort_once;
  MockCheckpointSaverListener listener;
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1, .listeners = {&listener}});
  MonitoredSession sess(
      std::make_unique<ChiefSessionCreator>(graph, ChiefSessionCreatorOptions{.checkpoint_dir = model_dir.path()}),
      {&hook, &abort_once});
  std::vector<int64_t> steps;
  for (int i = 0; i < 5; ++i) steps.push_back(global_step_value(sess.run(train_op)));
  sess.close();
  EXPECT_THAT(steps, ElementsAre(1, 2, 3, 4, 5));
  // 0 (creation), 1, 2, 3, 3 again (re-creation after the abort), 4, 5.
  EXPECT_THAT(listener.steps, ElementsAre(0, 1, 2, 3, 3, 4, 5));
  EXPECT_EQ(listener.begin_count, 1);
  EXPECT_EQ(listener.end_count, 1);
}

// The event file of checkpoint_dir gets the graph when the session is created and a SessionLog
// CHECKPOINT at every saved step, as TensorFlow's hook writes them (test_summary_writer_defs).
TEST_F(CheckpointSaverHookTest, WritesTheGraphAndCheckpointEventsToTheEventFile) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 2});
  run_monitored(hook, 3);  // saves at 0, 2 and (in end) 3
  const std::string save_path = model_dir.path() + "/model.ckpt";
  EXPECT_EQ(hook.save_path(), save_path);
  std::vector<int64_t> checkpoint_steps;
  int graphs = 0;
  for (const Event& e : testing::read_dir_events(model_dir.path())) {
    if (e.graph_def) ++graphs;
    if (e.session_log && e.session_log->status == SessionLog::kCheckpoint) {
      EXPECT_EQ(e.session_log->checkpoint_path, save_path);
      checkpoint_steps.push_back(e.step);
    }
  }
  EXPECT_EQ(graphs, 1);
  EXPECT_THAT(checkpoint_steps, ElementsAre(0, 2, 3));
}

TEST_F(CheckpointSaverHookTest, LogLines) {
  std::vector<std::string> lines;
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(),
                            .save_steps = 10,
                            .checkpoint_basename = "m",
                            .log = {.info = [&](const std::string& s) { lines.push_back(s); }}});
  run_monitored(hook, 0);
  const std::string path = model_dir.path() + "/m";
  EXPECT_THAT(lines,
              ElementsAre("Create CheckpointSaverHook.", "Calling checkpoint listeners before saving checkpoint 0...",
                          "Saving checkpoints for 0 into " + path + ".",
                          "Calling checkpoint listeners after saving checkpoint 0..."));
  EXPECT_TRUE(fs::exists(path + "-0.safetensors"));
}

TEST_F(CheckpointSaverHookTest, CreatesTheCheckpointDirectory) {
  const std::string dir = model_dir.path() + "/a/b";
  CheckpointSaverHook hook({.checkpoint_dir = dir, .save_steps = 1});
  hook.begin(graph);
  EXPECT_TRUE(fs::is_directory(dir));
}

// Checkpoints of an earlier run in the directory count towards max_to_keep (5): a second run
// restores step 6, saves it again and then 7, and the oldest files go.
TEST_F(CheckpointSaverHookTest, RestartsRespectMaxToKeep) {
  {
    CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
    EXPECT_EQ(run_monitored(hook, 6), 6);  // saves 0..6, keeps 2..6
  }
  Graph g2;
  Scope root2(g2);
  get_or_create_global_step(root2);
  Output train2 = testing::increment_global_step(g2, 1)->output(0);
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
  {
    SingularMonitoredSession sess(g2, {.hooks = {&hook}, .checkpoint_dir = model_dir.path()});
    EXPECT_EQ(global_step_value(sess.run(train2)), 7);
  }
  auto state = get_checkpoint_state(model_dir.path());
  ASSERT_TRUE(state.has_value());
  std::vector<std::string> expected;
  for (int s : {3, 4, 5, 6, 7}) expected.push_back(model_dir.path() + "/model.ckpt-" + std::to_string(s));
  EXPECT_EQ(state->all_model_checkpoint_paths, expected);
  EXPECT_FALSE(fs::exists(model_dir.path() + "/model.ckpt-2.safetensors"));
  EXPECT_TRUE(fs::exists(model_dir.path() + "/model.ckpt-3.safetensors"));
}

// begin(graph) starts over with the new graph's variables (its own saver is made again).
TEST_F(CheckpointSaverHookTest, HookIsReusableWithAnotherGraph) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
  EXPECT_EQ(run_monitored(hook, 2), 2);
  Graph g2;
  Scope root2(g2);
  get_or_create_global_step(root2);
  make_variable(root2, "w", constant(root2, 1.5f));
  Output train2 = testing::increment_global_step(g2, 1)->output(0);
  {
    SingularMonitoredSession sess(g2, {.hooks = {&hook}});  // not restored: g2 has a new variable
    EXPECT_EQ(global_step_value(sess.run(train2)), 1);
  }
  SafetensorsFile latest = load_checkpoint(*latest_checkpoint(model_dir.path()));
  ASSERT_NE(latest.find("w"), nullptr);
  EXPECT_EQ(latest.find("w")->scalar_value<float>(), 1.5f);
  EXPECT_EQ(saved_step(), 1);
}

TEST_F(CheckpointSaverHookTest, UnusableDirectoryIsAClearError) {
  const std::string file = model_dir.path() + "/not_a_dir";
  std::ofstream(file) << "x";
  CheckpointSaverHook hook({.checkpoint_dir = file + "/ckpt", .save_steps = 1});
  try {
    hook.begin(graph);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create checkpoint directory '" + file + "/ckpt'"));
  }
}

TEST_F(CheckpointSaverHookTest, FailedSaveNamesTheCheckpoint) {
  const std::string dir = model_dir.path() + "/ckpt";
  // Without graph.pbtxt, which would be written (and fail) first: see the test below.
  CheckpointSaverHook hook({.checkpoint_dir = dir, .save_steps = 1, .save_graph_def = false});
  hook.begin(graph);
  Session sess(graph);
  sess.run(init);
  // The directory disappears and a file takes its place before the first save.
  fs::remove_all(dir);
  std::ofstream(dir) << "x";
  try {
    hook.after_create_session(sess, coord);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CheckpointSaverHook: cannot save the checkpoint for step 0 into '" + dir +
                                    "/model.ckpt-0.safetensors'"));
  }
}

TEST_F(CheckpointSaverHookTest, FailedGraphWriteNamesTheFile) {
  const std::string dir = model_dir.path() + "/ckpt";
  CheckpointSaverHook hook({.checkpoint_dir = dir, .save_steps = 1});
  hook.begin(graph);
  Session sess(graph);
  sess.run(init);
  fs::remove_all(dir);
  std::ofstream(dir) << "x";
  try {
    hook.after_create_session(sess, coord);
    FAIL() << "no error";
  } catch (const FailedPreconditionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CheckpointSaverHook: cannot write the graph into '" + dir + "/graph.pbtxt'"));
  }
}

// As TensorFlow's hook with save_graph_def=True: graph.pbtxt when the session is created, a
// MetaGraphDef beside each checkpoint kept (the saver's max_to_keep, 5, deletes the others with
// their checkpoints), and the GraphDef and MetaGraphDef in the event file.
TEST_F(CheckpointSaverHookTest, WritesGraphPbtxtAndAMetaGraphPerCheckpoint) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1});
  EXPECT_EQ(run_monitored(hook, 7), 7);  // saves 0..7, keeps 3..7
  const std::string text = read_file(model_dir.path() + "/graph.pbtxt");
  EXPECT_EQ(text, graph_def_text(graph));
  for (const auto& node : graph.nodes()) EXPECT_THAT(text, HasSubstr("\n  name: \"" + node->name() + "\"\n"));
  EXPECT_TRUE(text.ends_with("versions {\n  producer: " + std::to_string(kGraphDefProducer) + "\n}\n"));
  const std::string meta = meta_graph_def_binary(graph);
  for (int s = 0; s <= 7; ++s) {
    const std::string file = model_dir.path() + "/model.ckpt-" + std::to_string(s) + ".meta";
    EXPECT_EQ(fs::exists(file), s >= 3) << file;
    if (s >= 3) {
      EXPECT_EQ(read_file(file), meta) << file;
    }
  }
  int graphs = 0, meta_graphs = 0;
  for (const Event& e : testing::read_dir_events(model_dir.path())) {
    if (e.graph_def) ++graphs;
    if (e.meta_graph_def) {
      ++meta_graphs;
      EXPECT_EQ(*e.meta_graph_def, meta);
    }
  }
  EXPECT_EQ(graphs, 1);
  EXPECT_EQ(meta_graphs, 1);
}

TEST_F(CheckpointSaverHookTest, WithoutSaveGraphDefNoGraphIsWritten) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 1, .save_graph_def = false});
  run_monitored(hook, 2);
  EXPECT_TRUE(fs::exists(model_dir.path() + "/model.ckpt-2.safetensors"));
  for (const std::string& name : model_dir.entries()) {
    EXPECT_NE(name, "graph.pbtxt");
    EXPECT_FALSE(name.ends_with(".meta")) << name;
  }
  for (const Event& e : testing::read_dir_events(model_dir.path())) {
    EXPECT_FALSE(e.graph_def);
    EXPECT_FALSE(e.meta_graph_def);
  }
}

class CheckpointSaverHookMultiStepTest : public CheckpointSaverHookTest {
 protected:
  static constexpr int64_t kStepsPerRun = 5;
  CheckpointSaverHookMultiStepTest() : CheckpointSaverHookTest(kStepsPerRun) {}
};

TEST_F(CheckpointSaverHookMultiStepTest, SaveStepsSavesInFirstStep) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(),
                            .save_steps = 2 * kStepsPerRun,
                            .scaffold = &scaffold,
                            .steps_per_run = kStepsPerRun});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  EXPECT_EQ(saved_step(), 5);
}

TEST_F(CheckpointSaverHookMultiStepTest, SaveStepsSavesPeriodically) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(), .save_steps = 2 * kStepsPerRun, .scaffold = &scaffold});
  hook.set_steps_per_run(kStepsPerRun);  // TensorFlow's _set_steps_per_run
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  const int64_t expected[] = {5, 5, 15, 15, 25};  // saved at 5, 15 and 25
  for (int64_t e : expected) {
    mon_sess.run(train_op);
    EXPECT_EQ(saved_step(), e);
  }
}

TEST_F(CheckpointSaverHookMultiStepTest, SaveStepsSavesAtEnd) {
  CheckpointSaverHook hook({.checkpoint_dir = model_dir.path(),
                            .save_steps = 2 * kStepsPerRun,
                            .scaffold = &scaffold,
                            .steps_per_run = kStepsPerRun});
  auto sess = start(hook);
  HookedSession mon_sess(*sess, {&hook});
  mon_sess.run(train_op);
  mon_sess.run(train_op);
  hook.end(*sess);
  EXPECT_EQ(saved_step(), 10);
}

}  // namespace
}  // namespace stepscope
