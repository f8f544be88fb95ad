// Scaffold defaults and finalization; ChiefSessionCreator's initialize-or-restore and ready check
// (TensorFlow's Scaffold and SessionManager.prepare_session); WorkerSessionCreator.
#include "stepscope/hooks/scaffold.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/ops/summary_ops.h"
#include "stepscope/train/variables.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::TempDir;

template <typename F>
void expect_error(F&& f, ErrorCode code, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

float f32(const Tensor& t) { return t.flat<float>()[0]; }

TEST(Scaffold, FinalizeFillsInDefaultsAndFinalizesTheGraph) {
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  Scaffold scaffold(g);
  EXPECT_EQ(scaffold.init_op(), nullptr);
  EXPECT_EQ(scaffold.saver(), nullptr);
  make_variable(s, "b", constant(s, 2.0f));  // made after the Scaffold, before finalize
  scaffold.finalize();
  EXPECT_TRUE(scaffold.finalized());
  EXPECT_TRUE(g.finalized());
  ASSERT_NE(scaffold.init_op(), nullptr);
  EXPECT_EQ(scaffold.init_op()->name(), "init");
  EXPECT_THAT(g.collection(kInitOpCollection), ElementsAre(scaffold.init_op()));
  ASSERT_NE(scaffold.saver(), nullptr);
  EXPECT_EQ(scaffold.saver()->var_list().size(), 2u);
  EXPECT_EQ(scaffold.local_init_op(), nullptr);
  EXPECT_FALSE(scaffold.summary_op());

  // The init op covers both variables.
  Session sess(g);
  sess.run(scaffold.init_op());
  EXPECT_EQ(f32(sess.run(g.output_by_name("b"))), 2.0f);
}

TEST(Scaffold, FinalizeTwiceAddsNothing) {
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  Scaffold scaffold(g);
  scaffold.finalize();
  Node* init = scaffold.init_op();
  Saver* saver = scaffold.saver();
  const int nodes = g.num_nodes();
  g.unfinalize();  // as after a MonitoredSession closed
  scaffold.finalize();
  EXPECT_TRUE(g.finalized());
  EXPECT_EQ(g.num_nodes(), nodes);
  EXPECT_EQ(scaffold.init_op(), init);
  EXPECT_EQ(scaffold.saver(), saver);
}

TEST(Scaffold, TakesOpsFromTheGraphCollections) {
  Graph g;
  Scope s(g);
  Node* my_init = no_op(s.with_op_name("my_init"));
  Node* my_local_init = no_op(s.with_op_name("my_local_init"));
  Output my_summary = constant(s.with_op_name("my_summary"), 1.0f);
  g.add_to_collection(kInitOpCollection, my_init);
  g.add_to_collection(kLocalInitOpCollection, my_local_init);
  g.add_to_collection(kSummaryOpCollection, my_summary.node);
  Scaffold scaffold(g);
  scaffold.finalize();
  EXPECT_EQ(scaffold.init_op(), my_init);
  EXPECT_EQ(scaffold.local_init_op(), my_local_init);
  EXPECT_EQ(scaffold.summary_op(), my_summary);
}

TEST(Scaffold, DefaultSummaryOpMergesTheGraphsSummaries) {
  Graph g;
  Scope s(g);
  scalar(s, "a", constant(s, 1.0f));
  scalar(s, "b", constant(s, 2.0f));
  Scaffold scaffold(g);
  scaffold.finalize();
  ASSERT_TRUE(scaffold.summary_op());
  EXPECT_EQ(scaffold.summary_op().node->op_type(), "MergeSummary");
  EXPECT_THAT(g.collection(kSummaryOpCollection), ElementsAre(scaffold.summary_op().node));
  Session sess(g);
  std::optional<Summary> merged = Summary::parse(sess.run(scaffold.summary_op()).data<std::string>()[0]);
  ASSERT_TRUE(merged.has_value());
  ASSERT_EQ(merged->value.size(), 2u);
  EXPECT_EQ(merged->value[0].tag, "a");
  EXPECT_EQ(merged->value[1].tag, "b");
}

TEST(Scaffold, NoSummariesNoSummaryOp) {
  Graph g;
  Scaffold scaffold(g);
  scaffold.finalize();
  EXPECT_FALSE(scaffold.summary_op());
  EXPECT_TRUE(g.collection(kSummaryOpCollection).empty());
}

TEST(Scaffold, MoreThanOneItemInACollectionIsAnError) {
  Graph g;
  Scope s(g);
  g.add_to_collection(kInitOpCollection, no_op(s));
  g.add_to_collection(kInitOpCollection, no_op(s));
  Scaffold scaffold(g);
  expect_error([&] { scaffold.finalize(); }, ErrorCode::kFailedPrecondition,
               "More than one item in the collection \"init_op\". Please indicate which one to use by passing it to "
               "the Scaffold constructor as: Scaffold(graph, {.init_op = item to use})");
  EXPECT_FALSE(g.finalized());
}

TEST(Scaffold, KeepsWhatTheUserGave) {
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  Node* my_init = no_op(s.with_op_name("my_init"));
  Saver my_saver(g);
  Output my_summary = constant(s.with_op_name("my_summary"), 1.0f);
  Scaffold scaffold(g, {.init_op = my_init, .summary_op = my_summary, .saver = &my_saver});
  scaffold.finalize();
  EXPECT_EQ(scaffold.init_op(), my_init);
  EXPECT_EQ(scaffold.saver(), &my_saver);
  EXPECT_EQ(scaffold.summary_op(), my_summary);
  EXPECT_TRUE(g.collection(kInitOpCollection).empty());
}

TEST(Scaffold, DefaultsCannotBeAddedToAGraphFinalizedTooEarly) {
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  g.finalize();
  Scaffold scaffold(g);
  EXPECT_THROW(scaffold.finalize(), FailedPreconditionError);
}

// --- ChiefSessionCreator -------------------------------------------------------------------------

TEST(ChiefSessionCreator, InitializesThenCallsInitFnThenLocalInitOp) {
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  Variable local = make_variable(s, "local", constant(s, 5.0f), /*trainable=*/false);
  Output bump_local = assign_add(s, local.value(), constant(s, 1.0f));
  std::vector<std::string> order;
  Scaffold scaffold(g, {.init_fn =
                            [&](const Scaffold& sc, Session& sess) {
                              order.push_back("init_fn a=" + std::to_string(int(f32(sess.run(a.value())))));
                              EXPECT_EQ(&sc, &scaffold);
                            },
                        .local_init_op = bump_local.node});
  ChiefSessionCreator creator(g, {.scaffold = &scaffold});
  EXPECT_EQ(&creator.scaffold(), &scaffold);
  std::unique_ptr<Session> sess = creator.create_session();
  EXPECT_THAT(order, ElementsAre("init_fn a=1"));
  EXPECT_EQ(f32(sess->run(a.value())), 1.0f);
  EXPECT_EQ(f32(sess->run(local.value())), 6.0f);  // init, then local_init_op
  EXPECT_TRUE(g.finalized());
}

TEST(ChiefSessionCreator, InitFeedDictIsFedToTheInitOp) {
  Graph g;
  Scope s(g);
  Output start = placeholder(s.with_op_name("start"), DType::kFloat32, Shape{});
  Variable a = make_variable(s, "a", start);
  Scaffold scaffold(g, {.init_feed_dict = {{start, Tensor::scalar<float>(4.5f)}}});
  std::unique_ptr<Session> sess = ChiefSessionCreator(g, {.scaffold = &scaffold}).create_session();
  EXPECT_EQ(f32(sess->run(a.value())), 4.5f);
}

TEST(ChiefSessionCreator, RestoresFromTheCheckpointDirInsteadOfInitializing) {
  TempDir dir;
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  Output set_a = assign(s, a.value(), constant(s, 7.0f));
  Scaffold scaffold(g);
  {
    std::unique_ptr<Session> sess = ChiefSessionCreator(g, {.scaffold = &scaffold}).create_session();
    sess->run(set_a);
    scaffold.saver()->save(*sess, dir.path() + "/model.ckpt", 1);
    scaffold.saver()->save(*sess, dir.path() + "/model.ckpt", 2);
  }
  bool init_fn_called = false;
  Scaffold again(g, {.init_fn = [&](const Scaffold&, Session&) { init_fn_called = true; }});
  g.unfinalize();
  std::unique_ptr<Session> sess =
      ChiefSessionCreator(g, {.scaffold = &again, .checkpoint_dir = dir.path()}).create_session();
  EXPECT_EQ(f32(sess->run(a.value())), 7.0f);
  EXPECT_FALSE(init_fn_called);
  // The checkpoints already in the directory count towards the saver's max_to_keep.
  EXPECT_EQ(again.saver()->last_checkpoints().size(), 2u);
}

// Issue 12 (9): a damaged newest checkpoint is an error, unless the user asks to fall back to
// the newest intact one.
TEST(ChiefSessionCreator, FallsBackToAnOlderCheckpointOnlyWhenAsked) {
  TempDir dir;
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  Output set_7 = assign(s, a.value(), constant(s, 7.0f));
  Output set_9 = assign(s, a.value(), constant(s, 9.0f));
  Scaffold scaffold(g);
  {
    std::unique_ptr<Session> sess = ChiefSessionCreator(g, {.scaffold = &scaffold}).create_session();
    sess->run(set_7);
    scaffold.saver()->save(*sess, dir.path() + "/model.ckpt", 1);
    sess->run(set_9);
    scaffold.saver()->save(*sess, dir.path() + "/model.ckpt", 2);
  }
  const std::string newest = dir.path() + "/model.ckpt-2.safetensors";
  std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-1, std::ios::end);
  f.put('\x55');  // a byte of a's data
  f.close();
  g.unfinalize();
  Scaffold strict(g);
  EXPECT_THROW(ChiefSessionCreator(g, {.scaffold = &strict, .checkpoint_dir = dir.path()}).create_session(),
               DataLossError);
  g.unfinalize();
  Scaffold lenient(g);
  std::unique_ptr<Session> sess =
      ChiefSessionCreator(g, {.scaffold = &lenient, .checkpoint_dir = dir.path(), .fall_back_to_older_checkpoint = true})
          .create_session();
  EXPECT_EQ(f32(sess->run(a.value())), 7.0f);
}

TEST(ChiefSessionCreator, InitializesWhenTheCheckpointDirHasNoCheckpoint) {
  TempDir dir;
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  std::unique_ptr<Session> sess = ChiefSessionCreator(g, {.checkpoint_dir = dir.path()}).create_session();
  EXPECT_EQ(f32(sess->run(a.value())), 1.0f);
}

TEST(ChiefSessionCreator, RestoresFromAnExplicitCheckpoint) {
  TempDir dir;
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  Output set_a = assign(s, a.value(), constant(s, 3.0f));
  Scaffold scaffold(g);
  std::string path;
  {
    std::unique_ptr<Session> sess = ChiefSessionCreator(g, {.scaffold = &scaffold}).create_session();
    sess->run(set_a);
    path = scaffold.saver()->save(*sess, dir.path() + "/model.ckpt", 5);
  }
  std::unique_ptr<Session> sess =
      ChiefSessionCreator(g, {.scaffold = &scaffold, .checkpoint_filename_with_path = path}).create_session();
  EXPECT_EQ(f32(sess->run(a.value())), 3.0f);
}

TEST(ChiefSessionCreator, AListedCheckpointWhoseFileIsGoneIsAnError) {
  TempDir dir;
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  update_checkpoint_state(dir.path(), {.model_checkpoint_path = dir.path() + "/model.ckpt-9",
                                       .all_model_checkpoint_paths = {dir.path() + "/model.ckpt-9"}});
  ChiefSessionCreator creator(g, {.checkpoint_dir = dir.path()});
  EXPECT_THROW(creator.create_session(), NotFoundError);
}

TEST(ChiefSessionCreator, CannotProvideBothCheckpointDirAndFile) {
  Graph g;
  expect_error([&] { ChiefSessionCreator(g, {.checkpoint_dir = "a", .checkpoint_filename_with_path = "b/model"}); },
               ErrorCode::kInvalidArgument, "Can not provide both checkpoint_dir and checkpoint_filename_with_path.");
}

TEST(ChiefSessionCreator, ScaffoldOfAnotherGraphIsRejected) {
  Graph g, other;
  Scaffold scaffold(other);
  EXPECT_THROW(ChiefSessionCreator(g, {.scaffold = &scaffold}), InvalidArgumentError);
}

TEST(ChiefSessionCreator, ModelNotReadyNamesTheUninitializedVariables) {
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  make_variable(s, "b", constant(s, 2.0f));
  make_variable(s, "c", constant(s, 3.0f));
  Node* partial = variables_initializer(s, {a});  // named "init"
  Scaffold scaffold(g, {.init_op = partial});
  ChiefSessionCreator creator(g, {.scaffold = &scaffold});
  expect_error([&] { creator.create_session(); }, ErrorCode::kFailedPrecondition,
               "Init operations did not make model ready.  Init op: init, init fn: None, local_init_op: "
               "None, error: Variables not initialized: b, c");
}

TEST(ChiefSessionCreator, ACustomReadyCheck) {
  Graph g;
  Scope s(g);
  make_variable(s, "a", constant(s, 1.0f));
  Node* nothing = no_op(s.with_op_name("nothing"));
  Scaffold lenient(g, {.init_op = nothing, .ready_check = [](Session&) { return std::vector<std::string>{}; }});
  EXPECT_NO_THROW(ChiefSessionCreator(g, {.scaffold = &lenient}).create_session());
  g.unfinalize();
  Scaffold strict(g, {.ready_check = [](Session&) { return std::vector<std::string>{"the data", "the weights"}; }});
  expect_error([&] { ChiefSessionCreator(g, {.scaffold = &strict}).create_session(); }, ErrorCode::kFailedPrecondition,
               "Init operations did not make model ready.  Init op: init, init fn: None, local_init_op: None, "
               "error: Variables not initialized: the data, the weights");
}

TEST(ChiefSessionCreator, SessionOptionsReachTheSession) {
  Graph g;
  ChiefSessionCreator creator(g, {.session_options = {.inter_op_threads = 1}});
  EXPECT_EQ(creator.create_session()->options().inter_op_threads, 1);
}

// --- WorkerSessionCreator ------------------------------------------------------------------------

TEST(WorkerSessionCreator, RunsOnlyTheLocalInitOp) {
  Graph g;
  Scope s(g);
  Variable a = make_variable(s, "a", constant(s, 1.0f));
  Variable local = make_variable(s, "local", constant(s, 5.0f), /*trainable=*/false);
  Scaffold scaffold(g, {.local_init_op = local.initializer});
  WorkerSessionCreator creator(g, {.scaffold = &scaffold});
  std::unique_ptr<Session> sess = creator.create_session();
  EXPECT_TRUE(g.finalized());
  EXPECT_EQ(f32(sess->run(local.value())), 5.0f);
  try {
    sess->run(a.value());
    FAIL() << "the worker initialized a variable it should not have";
  } catch (const FailedPreconditionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Attempting to use uninitialized value a"));
  }
}

}  // namespace
}  // namespace stepscope
