// HookedSession dispatch (HookedSessionTest), RunOptions merging, and the MonitoredSession
// lifecycle and exception semantics, ported from TensorFlow's monitored_session_test.py onto a
// real training graph. Recovery, SingularMonitoredSession and run_step_fn are in
// monitored_session_recovery_test.cc.
#include "stepscope/hooks/monitored_session.h"

#include <atomic>
#include <thread>

#include "stepscope/hooks/monitored_session_test_util.h"

namespace stepscope {
namespace {

using namespace monitored_session_testing;
using ::testing::ElementsAre;

// =================================================================================================
// HookedSession (HookedSessionTest)
// =================================================================================================

TEST(HookedSession, RunPassesAllArguments) {
  Graph g;
  Scope s(g);
  Output x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{1});
  Output y = identity(s.with_op_name("y"), x);
  Session sess(g);
  HookedSession mon_sess(sess, {});
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  options.output_partition_graphs = true;
  RunMetadata metadata;
  FetchResult out = mon_sess.run(y, {{x, Tensor::from_vector<float>({7})}}, &options, &metadata);
  EXPECT_EQ(f32(out.tensor()), 7.0f);
  // Without hooks the options reach the session unchanged, and the caller's metadata is filled.
  EXPECT_EQ(options.trace_level, TraceLevel::kFullTrace);
  EXPECT_TRUE(options.debug_options.debug_tensor_watch_opts.empty());
  EXPECT_FALSE(metadata.step_stats.dev_stats().empty());
  EXPECT_FALSE(metadata.partition_graphs.empty());
}

TEST(HookedSession, CallsHooksBeginEnd) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Session sess(g);
  RecordingHook hook1, hook2;
  HookedSession mon_sess(sess, {&hook1, &hook2});
  mon_sess.run(a);
  for (RecordingHook* h : {&hook1, &hook2}) {
    EXPECT_TRUE(h->last_results.empty());
    EXPECT_EQ(h->last_options.trace_level, TraceLevel::kNoTrace);
    EXPECT_EQ(h->last_options.timeout_in_ms, 0);
    EXPECT_TRUE(h->last_options.debug_options.debug_tensor_watch_opts.empty());
    ASSERT_NE(h->last_run_metadata_address, nullptr);
    EXPECT_TRUE(h->last_run_metadata.step_stats.dev_stats().empty());
    EXPECT_TRUE(h->last_run_metadata.partition_graphs.empty());
    ASSERT_TRUE(h->last_original_args.fetches.is_output());
    EXPECT_EQ(h->last_original_args.fetches.output(), a);
    EXPECT_TRUE(h->last_original_args.feed_dict.empty());
    EXPECT_FALSE(h->last_original_args.options.has_value());
    EXPECT_EQ(h->last_session, &sess);
    EXPECT_EQ(h->begin_calls, 0);
    EXPECT_EQ(h->after_create_session_calls, 0);
    EXPECT_EQ(h->before_run_calls, 1);
    EXPECT_EQ(h->after_run_calls, 1);
    EXPECT_EQ(h->end_calls, 0);
  }
  // One RunMetadata per call, shared by the hooks.
  EXPECT_EQ(hook1.last_run_metadata_address, hook2.last_run_metadata_address);
}

TEST(HookedSession, ShouldStop) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Session sess(g);
  RecordingHook hook1, hook2;
  HookedSession mon_sess(sess, {&hook1, &hook2});
  mon_sess.run(a);
  EXPECT_FALSE(mon_sess.should_stop());
  hook1.request_stop_in_after_run = true;
  mon_sess.run(a);
  EXPECT_TRUE(mon_sess.should_stop());
  expect_error([&] { mon_sess.run(a); }, ErrorCode::kFailedPrecondition,
               "Run called even after should_stop requested.");
  EXPECT_EQ(hook2.before_run_calls, 2);
}

TEST(HookedSession, FetchesHookRequests) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Output another = constant(s.with_op_name("another_tensor"), Tensor::from_vector<int32_t>({5}));
  Output third = constant(s.with_op_name("third_tensor"), Tensor::from_vector<int32_t>({10}));
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.fetches = Fetch::list({another})};
  hook2.request = SessionRunArgs{.fetches = Fetch::map({{"third", third}, {"again", a}})};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  FetchResult out = mon_sess.run(a);
  EXPECT_EQ(out.tensor().flat<int32_t>()[0], 0);
  ASSERT_TRUE(hook1.last_results.is_list());
  EXPECT_EQ(hook1.last_results[0].tensor().flat<int32_t>()[0], 5);
  ASSERT_TRUE(hook2.last_results.is_map());
  EXPECT_EQ(hook2.last_results["third"].tensor().flat<int32_t>()[0], 10);
  EXPECT_EQ(hook2.last_results["again"].tensor().flat<int32_t>()[0], 0);  // also fetched by the caller
}

TEST(HookedSession, HookFetchesRunOpsAndTheCallersStructureIsKept) {
  TrainingGraph t;
  Session sess(t.g);
  sess.run(global_variables_initializer(t.root));
  RecordingHook hook;
  hook.request = SessionRunArgs{.fetches = Fetch::list({Fetch(t.do_step.node), t.gstep.value()})};
  HookedSession mon_sess(sess, {&hook});
  FetchResult out = mon_sess.run(Fetch::map({{"step", t.gstep.value()}, {"ops", Fetch::list({})}}));
  ASSERT_TRUE(out.is_map());
  EXPECT_EQ(out["ops"].size(), 0u);
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 1);               // the hook's op ran
  EXPECT_FALSE(hook.last_results[0].tensor().initialized());  // an op yields an empty tensor
}

TEST(HookedSession, OnlyHooksHaveFeeds) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Output b = constant(s.with_op_name("b_tensor"), Tensor::from_vector<int32_t>({0}));
  Output sum = add(s, a, b);
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({5})}}};
  hook2.request = SessionRunArgs{.feed_dict = {{b, Tensor::from_vector<int32_t>({10})}}};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  EXPECT_EQ(mon_sess.run(sum).tensor().flat<int32_t>()[0], 15);
}

TEST(HookedSession, BothHooksAndUserHaveFeeds) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Output b = constant(s.with_op_name("b_tensor"), Tensor::from_vector<int32_t>({0}));
  Output c = constant(s.with_op_name("c_tensor"), Tensor::from_vector<int32_t>({0}));
  Output sum = add(s, add(s, a, b), c);
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({5})}}};
  hook2.request = SessionRunArgs{.feed_dict = {{b, Tensor::from_vector<int32_t>({10})}}};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  const FeedList feed_dict{{c, Tensor::from_vector<int32_t>({20})}};
  EXPECT_EQ(mon_sess.run(sum, feed_dict).tensor().flat<int32_t>()[0], 35);
  EXPECT_EQ(feed_dict.size(), 1u);  // the user's feeds are not changed
  // original_args shows the user's feeds only.
  EXPECT_EQ(hook1.last_original_args.feed_dict.size(), 1u);
}

TEST(HookedSession, HooksFeedConflicts) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Output b = constant(s.with_op_name("b_tensor"), Tensor::from_vector<int32_t>({0}));
  Output sum = add(s, a, b);
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({5})}}};
  hook2.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({10})}}};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  expect_error([&] { mon_sess.run(sum); }, ErrorCode::kFailedPrecondition,
               "Same tensor is fed by two hooks. Conflict(s): [a_tensor:0]");
  EXPECT_EQ(hook1.after_run_calls, 0);  // nothing ran
}

TEST(HookedSession, HooksAndUserFeedConflicts) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Output b = constant(s.with_op_name("b_tensor"), Tensor::from_vector<int32_t>({0}));
  Output sum = add(s, a, b);
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({5})}}};
  hook2.request = SessionRunArgs{.feed_dict = {{b, Tensor::from_vector<int32_t>({10})}}};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  expect_error(
      [&] {
        mon_sess.run(sum, {{b, Tensor::from_vector<int32_t>({10})}});
      },
      ErrorCode::kFailedPrecondition, "Same tensor is fed by a SessionRunHook and user. Conflict(s): [b_tensor:0]");
  expect_error(
      [&] {
        mon_sess.run(sum, {{a, Tensor::from_vector<int32_t>({1})}, {b, Tensor::from_vector<int32_t>({1})}});
      },
      ErrorCode::kFailedPrecondition,
      "Same tensor is fed by a SessionRunHook and user. Conflict(s): [a_tensor:0, b_tensor:0]");
}

TEST(HookedSession, HookToHookConflictIsCheckedBeforeHookToUser) {
  Graph g;
  Scope s(g);
  Output a = constant(s.with_op_name("a_tensor"), Tensor::from_vector<int32_t>({0}));
  Session sess(g);
  RecordingHook hook1, hook2;
  hook1.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({5})}}};
  hook2.request = SessionRunArgs{.feed_dict = {{a, Tensor::from_vector<int32_t>({6})}}};
  HookedSession mon_sess(sess, {&hook1, &hook2});
  expect_error(
      [&] {
        mon_sess.run(a, {{a, Tensor::from_vector<int32_t>({1})}});
      },
      ErrorCode::kFailedPrecondition, "Same tensor is fed by two hooks. Conflict(s): [a_tensor:0]");
}

TEST(HookedSession, ABeforeRunErrorRunsNothing) {
  TrainingGraph t;
  Session sess(t.g);
  sess.run(global_variables_initializer(t.root));
  RecordingHook first, second;
  second.on_before_run = [](SessionRunContext&) { throw InternalError("hook failed"); };
  HookedSession mon_sess(sess, {&first, &second});
  EXPECT_THROW(mon_sess.run(t.do_step), InternalError);
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(first.after_run_calls, 0);
}

// Merges RunOptions as the hook asks (RunOptionsMetadataHook in the reference).
class RunOptionsMetadataHook : public SessionRunHook {
 public:
  RunOptionsMetadataHook(TraceLevel trace_level, int64_t timeout_in_ms, bool output_partition_graphs,
                         std::string debug_tensor_watch, bool report_tensor_allocations_upon_oom)
      : options_{.trace_level = trace_level,
                 .timeout_in_ms = timeout_in_ms,
                 .output_partition_graphs = output_partition_graphs,
                 .debug_options = {.debug_tensor_watch_opts = {std::move(debug_tensor_watch)}},
                 .report_tensor_allocations_upon_oom = report_tensor_allocations_upon_oom} {}
  std::optional<SessionRunArgs> before_run(SessionRunContext&) override { return SessionRunArgs{.options = options_}; }
  void after_run(SessionRunContext&, const SessionRunValues& values) override {
    run_options_list.push_back(values.options);
    run_metadata_addresses.push_back(values.run_metadata);
    run_metadata_list.push_back(*values.run_metadata);  // the object may not outlive the call
  }
  std::vector<RunOptions> run_options_list;
  std::vector<const RunMetadata*> run_metadata_addresses;
  std::vector<RunMetadata> run_metadata_list;

 private:
  RunOptions options_;
};

void expect_options(const RunOptions& o, TraceLevel trace_level, int64_t timeout_in_ms, bool partition_graphs,
                    std::vector<std::string> watches, bool report_oom) {
  EXPECT_EQ(o.trace_level, trace_level);
  EXPECT_EQ(o.timeout_in_ms, timeout_in_ms);
  EXPECT_EQ(o.output_partition_graphs, partition_graphs);
  EXPECT_EQ(o.debug_options.debug_tensor_watch_opts, watches);
  EXPECT_EQ(o.report_tensor_allocations_upon_oom, report_oom);
}

TEST(MonitoredSession, MergeRunOptionsFromHooks) {
  Graph g;
  Scope s(g);
  Output my_const = constant(s.with_op_name("my_const"), 42);
  constant(s.with_op_name("my_const_2"), 24);
  RunOptionsMetadataHook hook_a(TraceLevel::kHardwareTrace, 30000, false, "my_const:0:DebugIdentity", false);
  RunOptionsMetadataHook hook_b(TraceLevel::kFullTrace, 60000, true, "my_const_2:0:DebugIdentity", true);
  MonitoredSession sess(g, {&hook_a, &hook_b});
  EXPECT_EQ(sess.run(my_const).scalar_value<int32_t>(), 42);
  ASSERT_EQ(hook_b.run_options_list.size(), 1u);
  expect_options(hook_b.run_options_list[0], TraceLevel::kFullTrace, 60000, true,
                 {"my_const:0:DebugIdentity", "my_const_2:0:DebugIdentity"}, true);
  ASSERT_EQ(hook_b.run_metadata_list.size(), 1u);
  EXPECT_EQ(hook_a.run_metadata_addresses[0], hook_b.run_metadata_addresses[0]);
  EXPECT_GT(hook_b.run_metadata_list[0].partition_graphs.size(), 0u);
  EXPECT_FALSE(hook_b.run_metadata_list[0].step_stats.dev_stats().empty());  // traced
}

TEST(MonitoredSession, MergeCallerAndHookRunOptions) {
  Graph g;
  Scope s(g);
  Output my_const = constant(s.with_op_name("my_const"), 42);
  constant(s.with_op_name("my_const_2"), 24);
  RunOptionsMetadataHook hook(TraceLevel::kHardwareTrace, 60000, false, "my_const_2:0:DebugIdentity", false);
  MonitoredSession sess(g, {&hook});
  RunOptions caller_options{.trace_level = TraceLevel::kFullTrace,
                            .timeout_in_ms = 30000,
                            .output_partition_graphs = true,
                            .debug_options = {.debug_tensor_watch_opts = {"my_const:0:DebugIdentity"}},
                            .report_tensor_allocations_upon_oom = true};
  RunMetadata caller_metadata;
  EXPECT_EQ(sess.run(my_const, {}, &caller_options, &caller_metadata).scalar_value<int32_t>(), 42);
  ASSERT_EQ(hook.run_options_list.size(), 1u);
  expect_options(hook.run_options_list[0], TraceLevel::kFullTrace, 60000, true,
                 {"my_const:0:DebugIdentity", "my_const_2:0:DebugIdentity"}, true);
  // The caller's options were merged in place; the caller's metadata went to the hook.
  expect_options(caller_options, TraceLevel::kFullTrace, 60000, true,
                 {"my_const:0:DebugIdentity", "my_const_2:0:DebugIdentity"}, true);
  ASSERT_EQ(hook.run_metadata_list.size(), 1u);
  EXPECT_EQ(hook.run_metadata_addresses[0], &caller_metadata);
  EXPECT_GT(caller_metadata.partition_graphs.size(), 0u);
}

TEST(MonitoredSession, AFreshRunMetadataPerCallWhenTheCallerGivesNone) {
  Graph g;
  Scope s(g);
  Output c = constant(s, 1);
  // Marks the metadata it is given and notes whether it was marked already.
  RecordingHook marker;
  std::vector<bool> saw_marker;
  marker.on_after_run = [&](SessionRunContext&, const SessionRunValues& v) {
    bool marked = false;
    for (const auto& pg : v.run_metadata->partition_graphs) marked = marked || pg.device == "marker";
    saw_marker.push_back(marked);
    v.run_metadata->partition_graphs.push_back({.device = "marker", .node_names = {}});
  };
  MonitoredSession sess(g, {&marker});
  sess.run(c);
  sess.run(c);
  EXPECT_EQ(saw_marker, (std::vector<bool>{false, false}));  // a new RunMetadata each call
  RunMetadata mine;
  sess.run(c, {}, nullptr, &mine);
  sess.run(c, {}, nullptr, &mine);
  EXPECT_EQ(saw_marker, (std::vector<bool>{false, false, false, true}));  // the caller's, both times
}

// The session's own RunMetadata is reused (its statistics' arrays), but each call sees it as
// fresh: an untraced run after a traced one shows no statistics, timing nor input stages.
TEST(MonitoredSession, AnUntracedRunAfterATracedOneSeesNoStatistics) {
  Graph g;
  Scope s(g);
  Output c = constant(s, 1);
  RecordingHook hook;
  MonitoredSession sess(g, {&hook});
  auto run_traced = [&](bool traced) {
    RunOptions options;
    options.trace_level = traced ? TraceLevel::kFullTrace : TraceLevel::kNoTrace;
    hook.request = SessionRunArgs{.options = options};
    sess.run(c);
  };
  run_traced(true);
  ASSERT_FALSE(hook.last_run_metadata.step_stats.dev_stats().empty());
  EXPECT_GT(hook.last_run_metadata.step_timing.wall_ns, 0);
  run_traced(false);
  EXPECT_TRUE(hook.last_run_metadata.step_stats.dev_stats().empty());
  EXPECT_EQ(hook.last_run_metadata.step_timing.wall_ns, 0);
  EXPECT_TRUE(hook.last_run_metadata.input_stages.empty());
  run_traced(true);
  run_traced(true);  // into the arrays of the run before
  ASSERT_EQ(hook.last_run_metadata.step_stats.dev_stats().size(), 1u);
  EXPECT_EQ(hook.last_run_metadata.step_stats.dev_stats()[0].node_stats.size(), 1u);
  EXPECT_EQ(hook.last_run_metadata.step_stats.dev_stats()[0].node_stats[0].node_name, c.node->name());
}

// =================================================================================================
// MonitoredSession lifecycle
// =================================================================================================

TEST(MonitoredSession, Defaults) {
  Graph g;
  Scope s(g);
  Variable a_var = make_variable(s, "a_var", constant(s, 0));
  MonitoredSession sess(g);
  EXPECT_EQ(sess.run(a_var.value()).scalar_value<int32_t>(), 0);
  EXPECT_FALSE(sess.should_stop());
}

TEST(MonitoredSession, ExactCallOrderOfHooksAcrossASession) {
  TrainingGraph t;
  std::vector<std::string> log;
  RecordingHook a("a", &log), b("b", &log);
  {
    MonitoredSession sess(t.g, {&a, &b});
    EXPECT_EQ(i64(sess.run(t.do_step)), 1);
    EXPECT_EQ(i64(sess.run(t.do_step)), 2);
    sess.close();
  }
  EXPECT_EQ(a.begin_graph, &t.g);
  EXPECT_THAT(log, ElementsAre("a.begin", "b.begin", "a.after_create_session", "b.after_create_session", "a.before_run",
                               "b.before_run", "a.after_run", "b.after_run", "a.before_run", "b.before_run",
                               "a.after_run", "b.after_run", "a.end", "b.end"));
}

TEST(MonitoredSession, HooksSeeTheRawSessionAndTheCoordinator) {
  TrainingGraph t;
  Session* created = nullptr;
  Coordinator* coord = nullptr;
  RecordingHook hook;
  hook.on_end = [&](Session& s) { created = &s; };
  SingularMonitoredSession sess(t.g, {.hooks = {&hook}});
  coord = hook.coord;
  ASSERT_NE(coord, nullptr);
  EXPECT_FALSE(coord->should_stop());
  sess.run(t.do_step);
  EXPECT_EQ(hook.last_session, &sess.raw_session());
  sess.close();
  EXPECT_NE(created, nullptr);
}

TEST(MonitoredSession, DestructorCallsEndWhenCloseWasNotCalled) {
  TrainingGraph t;
  RecordingHook hook;
  {
    MonitoredSession sess(t.g, {&hook});
    sess.run(t.do_step);
  }
  EXPECT_EQ(hook.end_calls, 1);
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, StopCleanlyWhenNoExceptionInBody) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  sess.run(t.do_step);
  sess.run(t.do_step);
  sess.close();
  EXPECT_TRUE(sess.should_stop());
  EXPECT_TRUE(sess.closed());
  EXPECT_EQ(hook.end_calls, 1);
}

TEST(MonitoredSession, LoopUntilAHookRequestsAStop) {
  TrainingGraph t;
  RecordingHook hook;
  hook.on_after_run = [&](SessionRunContext& c, const SessionRunValues&) {
    if (i64(c.session().run(t.gstep.value())) >= 5) c.request_stop();
  };
  MonitoredSession sess(t.g, {&hook});
  int steps = 0;
  while (!sess.should_stop()) {
    sess.run(t.do_step);
    ++steps;
  }
  EXPECT_EQ(steps, 5);
  expect_error([&] { sess.run(t.do_step); }, ErrorCode::kFailedPrecondition,
               "Run called even after should_stop requested.");
}

TEST(MonitoredSession, CloseTwiceRaises) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  sess.close();
  expect_error([&] { sess.close(); }, ErrorCode::kFailedPrecondition, "Session is already closed.");
  EXPECT_EQ(hook.end_calls, 1);  // not again
  EXPECT_THROW(sess.run(t.do_step), FailedPreconditionError);
}

TEST(MonitoredSession, GraphFinalizedDuringRunUnfinalizedAfterClose) {
  TrainingGraph t;
  bool finalized_in_begin = true;
  class BeginProbe : public SessionRunHook {
   public:
    explicit BeginProbe(bool& out) : out_(out) {}
    using SessionRunHook::begin;
    void begin(Graph& graph) override { out_ = graph.finalized(); }

   private:
    bool& out_;
  } probe(finalized_in_begin);
  MonitoredSession sess(t.g, {&probe});
  EXPECT_FALSE(finalized_in_begin);  // hooks may still add ops in begin()
  EXPECT_TRUE(t.g.finalized());
  sess.close();
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, KeepFinalizedGraphAsFinalized) {
  TrainingGraph t;
  Scaffold scaffold(t.g);
  scaffold.finalize();  // defaults filled in before the graph is finalized
  EXPECT_TRUE(t.g.finalized());
  MonitoredSession sess(chief(t.g, {.scaffold = &scaffold}));
  EXPECT_TRUE(t.g.finalized());
  sess.close();
  EXPECT_TRUE(t.g.finalized());
}

TEST(MonitoredSession, HooksMayAddOpsInBegin) {
  TrainingGraph t;
  class AddsOps : public SessionRunHook {
   public:
    using SessionRunHook::begin;
    void begin(Graph& graph) override {
      Scope s(graph);
      counter = make_variable(s, "hook_counter", constant(s, int64_t{10}));
      bump = assign_add(s, counter.value(), constant(s, int64_t{1}));
    }
    std::optional<SessionRunArgs> before_run(SessionRunContext&) override { return SessionRunArgs{.fetches = bump}; }
    void after_run(SessionRunContext&, const SessionRunValues& v) override { last = i64(v.results.tensor()); }
    Variable counter;
    Output bump;
    int64_t last = -1;
  } hook;
  MonitoredSession sess(t.g, {&hook});
  sess.run(t.do_step);
  sess.run(t.do_step);
  // The default init op was made after begin(), so it initialized the hook's variable too.
  EXPECT_EQ(hook.last, 12);
}

TEST(MonitoredSession, ConstructionFailureLeavesTheGraphUnfinalized) {
  TrainingGraph t;
  Scaffold scaffold(t.g, {.init_fn = [](const Scaffold&, Session&) { throw InternalError("init failed"); }});
  EXPECT_THROW(MonitoredSession(chief(t.g, {.scaffold = &scaffold})), InternalError);
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, MovedSessionKeepsWorking) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession a(t.g, {&hook});
  a.run(t.do_step);
  MonitoredSession b = std::move(a);
  EXPECT_EQ(i64(b.run(t.do_step)), 2);
  b.close();
  EXPECT_EQ(hook.end_calls, 1);
}

// =================================================================================================
// Exceptions
// =================================================================================================

TEST(MonitoredSession, ExitCleanlyOnOutOfRangeException) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(2, [] { throw OutOfRangeError("EOI"); });
  MonitoredSession sess(t.g, {&hook, &recorder});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_FALSE(sess.should_stop());
  // The hook raises OutOfRange: the run ends the loop instead of raising.
  Tensor out = sess.run(t.do_step);
  EXPECT_FALSE(out.initialized());
  EXPECT_TRUE(sess.should_stop());
  EXPECT_EQ(recorder.after_run_calls, 1);  // not for the interrupted run
  sess.close();
  EXPECT_EQ(recorder.end_calls, 1);  // end() is still called
}

TEST(MonitoredSession, ExitCleanlyOnStopIterationException) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(2, [] { throw StopIteration(); });
  MonitoredSession sess(t.g, {&hook, &recorder});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_FALSE(sess.should_stop());
  EXPECT_TRUE(sess.run(Fetch(t.do_step)).empty());
  EXPECT_TRUE(sess.should_stop());
  sess.close();
  EXPECT_EQ(recorder.end_calls, 1);
  EXPECT_EQ(recorder.after_run_calls, 1);
}

TEST(MonitoredSession, InputPipelineRunningOutEndsTheLoop) {
  // A "pipeline" that raises OutOfRange from the graph itself after 3 elements.
  Graph g;
  Scope s(g);
  Variable gstep = get_or_create_global_step(s);
  Output do_step = assign_add(s, gstep.value(), constant(s, int64_t{1}));
  RecordingHook recorder;
  recorder.on_before_run = [&](SessionRunContext& c) {
    if (i64(c.session().run(gstep.value())) == 3) throw OutOfRangeError("End of sequence");
  };
  MonitoredSession sess(g, {&recorder});
  int steps = 0;
  while (!sess.should_stop()) {
    sess.run(do_step);
    ++steps;
  }
  EXPECT_EQ(steps, 4);  // three real steps and the one that ran out
  EXPECT_EQ(recorder.after_run_calls, 3);
  sess.close();
  EXPECT_EQ(recorder.end_calls, 1);
}

TEST(MonitoredSession, RegularExceptionPassesThroughRunAndSkipsEnd) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(4, [] { throw FailedPreconditionError("regular exception"); });
  MonitoredSession sess(t.g, {&hook, &recorder});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  expect_error([&] { sess.run(t.do_step); }, ErrorCode::kFailedPrecondition, "regular exception");
  EXPECT_TRUE(hook.raised);
  sess.close();
  EXPECT_TRUE(sess.should_stop());
  EXPECT_EQ(recorder.end_calls, 0);
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, RegularExceptionSkipsEndInTheDestructorToo) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(1, [] { throw InternalError("boom"); });
  try {
    MonitoredSession sess(t.g, {&hook, &recorder});
    sess.run(t.do_step);
    FAIL();
  } catch (const InternalError&) {
  }
  EXPECT_EQ(recorder.end_calls, 0);
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, UnwindingThroughTheDestructorSkipsEnd) {
  TrainingGraph t;
  RecordingHook recorder;
  try {
    MonitoredSession sess(t.g, {&recorder});
    sess.run(t.do_step);
    throw std::runtime_error("user code failed between runs");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(recorder.end_calls, 0);
}

TEST(MonitoredSession, ExceptionInEndPropagatesFromCloseAndTheSessionIsClosed) {
  TrainingGraph t;
  RecordingHook hook;
  hook.on_end = [](Session&) { throw InternalError("end failed"); };
  MonitoredSession sess(t.g, {&hook});
  EXPECT_THROW(sess.close(), InternalError);
  EXPECT_TRUE(sess.closed());
  EXPECT_FALSE(t.g.finalized());
}

TEST(MonitoredSession, RegularExceptionReportedToCoordPassesThroughRunAndIsRaisedAtClose) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  // A thread reports an error to the coordinator.
  std::thread([&] {
    try {
      throw FailedPreconditionError("a thread wants to stop");
    } catch (...) {
      hook.coord->request_stop(std::current_exception());
    }
  }).join();
  // run() keeps working: the coordinator is consulted only when a run fails.
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_TRUE(sess.should_stop());  // the recorded error makes it true, it does not throw
  expect_error([&] { sess.close(); }, ErrorCode::kFailedPrecondition, "a thread wants to stop");
  EXPECT_TRUE(sess.closed());
  EXPECT_EQ(hook.end_calls, 1);
}

TEST(SingularMonitoredSession, ShouldStopRethrowsAnErrorReportedToTheCoordinator) {
  TrainingGraph t;
  RecordingHook hook;
  SingularMonitoredSession sess(t.g, {.hooks = {&hook}});
  hook.coord->stop_on_exception([] { throw FailedPreconditionError("a thread wants to stop"); });
  expect_error([&] { sess.should_stop(); }, ErrorCode::kFailedPrecondition, "a thread wants to stop");
}

TEST(MonitoredSession, StopRequestedThroughTheCoordinator) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  EXPECT_FALSE(sess.should_stop());
  hook.coord->request_stop();
  EXPECT_TRUE(sess.should_stop());
  sess.close();
  EXPECT_EQ(hook.end_calls, 1);
}

TEST(MonitoredSession, CoordinatorThreadsAreJoinedAtClose) {
  TrainingGraph t;
  std::atomic<int> loops{0};
  class StartsThread : public SessionRunHook {
   public:
    explicit StartsThread(std::atomic<int>& loops) : loops_(loops) {}
    void after_create_session(Session&, Coordinator& coord) override {
      coord.start_thread("looper", [this](Coordinator& c) {
        while (!c.wait_for_stop(0.001)) ++loops_;
      });
    }

   private:
    std::atomic<int>& loops_;
  } hook(loops);
  MonitoredSession sess(t.g, {&hook});
  sess.run(t.do_step);
  sess.close();  // requests the stop and joins the thread
  const int after_close = loops.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loops.load(), after_close);
}

}  // namespace
}  // namespace stepscope
