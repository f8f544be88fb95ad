// Recovery from preemption (AbortedError / UnavailableError), SingularMonitoredSession and
// run_step_fn, ported from TensorFlow's monitored_session_test.py onto a real training graph.
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/monitored_session_test_util.h"

namespace stepscope {
namespace {

using namespace monitored_session_testing;

// =================================================================================================
// Recovery
// =================================================================================================

void retry_test(std::function<void()> raise) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(4, std::move(raise));
  MonitoredSession sess(t.g, {&hook, &recorder});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  // At the 4th call the hook raises; the session is recreated from scratch (no checkpoint), so
  // the step is back to 0 and the retried do_step moves it to 1.
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_FALSE(sess.should_stop());
  EXPECT_TRUE(hook.raised);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  EXPECT_EQ(recorder.begin_calls, 1);
  EXPECT_EQ(recorder.after_create_session_calls, 2);  // again after recovery, begin is not
  sess.close();
  EXPECT_EQ(recorder.end_calls, 1);
}

TEST(MonitoredSession, RetryOnAbortedError) {
  retry_test([] { throw AbortedError("Abort"); });
}

TEST(MonitoredSession, RetryOnUnavailableError) {
  retry_test([] { throw UnavailableError("Unavailable"); });
}

TEST(MonitoredSession, RecoverAndRetryOnAbortedErrorFromTheLastCheckpoint) {
  TempDir dir;
  TrainingGraph t;
  Scaffold scaffold(t.g);
  RaiseOnceAtCountN abort_hook(4, [] { throw AbortedError("Abort"); });
  SaveEveryStepHook ckpt_hook(scaffold, dir.path());
  MonitoredSession sess(chief(t.g, {.scaffold = &scaffold, .checkpoint_dir = dir.path()}), {&abort_hook, &ckpt_hook});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  // The hook raises at the 4th call: the session is restored from the checkpoint at step 2 and
  // the retried run continues from there.
  EXPECT_EQ(i64(sess.run(t.do_step)), 3);
  EXPECT_TRUE(abort_hook.raised);
  EXPECT_FALSE(sess.should_stop());
  EXPECT_EQ(i64(sess.run(t.do_step)), 4);
  EXPECT_FALSE(sess.should_stop());
}

TEST(MonitoredSession, RecoveryRestoresFromACheckpointAcrossSessions) {
  TempDir dir;
  TrainingGraph t;
  Scaffold scaffold(t.g);
  {
    SaveEveryStepHook ckpt_hook(scaffold, dir.path());
    MonitoredSession sess(chief(t.g, {.scaffold = &scaffold, .checkpoint_dir = dir.path()}), {&ckpt_hook});
    EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
    EXPECT_EQ(i64(sess.run(t.do_step)), 1);
    EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  }
  {  // A restart finds the checkpoint and restores automatically.
    MonitoredSession sess(chief(t.g, {.scaffold = &scaffold, .checkpoint_dir = dir.path()}));
    EXPECT_EQ(i64(sess.run(t.gstep.value())), 2);
  }
  {  // Or from an explicit checkpoint file.
    std::optional<std::string> latest = latest_checkpoint(dir.path());
    ASSERT_TRUE(latest.has_value());
    MonitoredSession sess(chief(t.g, {.scaffold = &scaffold, .checkpoint_filename_with_path = *latest}));
    EXPECT_EQ(i64(sess.run(t.gstep.value())), 2);
  }
}

TEST(MonitoredSession, RetryInitializationOnAbortedError) {
  TrainingGraph t;
  bool init_raised = false;
  Scaffold scaffold(t.g, {.init_fn = [&](const Scaffold&, Session&) {
                      if (!init_raised) {
                        init_raised = true;
                        throw AbortedError("Abort");
                      }
                    }});
  MonitoredSession sess(chief(t.g, {.scaffold = &scaffold}));
  EXPECT_FALSE(sess.should_stop());
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_TRUE(init_raised);
}

TEST(MonitoredSession, RetryWhenAfterCreateSessionIsPreempted) {
  TrainingGraph t;
  RecordingHook recorder;
  recorder.begin_calls = 0;
  int attempts = 0;
  class FlakyCreateHook : public SessionRunHook {
   public:
    explicit FlakyCreateHook(int& attempts) : attempts_(attempts) {}
    void after_create_session(Session&, Coordinator&) override {
      if (++attempts_ == 1) throw UnavailableError("not yet");
    }

   private:
    int& attempts_;
  } flaky(attempts);
  MonitoredSession sess(t.g, {&flaky, &recorder});
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(recorder.after_create_session_calls, 1);  // the failed attempt stopped before it
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
}

TEST(MonitoredSession, ShouldStopRecoversFromAPreemptionReportedToTheCoordinator) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  Coordinator* first = hook.coord;
  first->stop_on_exception([] { throw AbortedError("worker lost"); });
  EXPECT_FALSE(sess.should_stop());  // a new session was made
  EXPECT_NE(hook.coord, nullptr);
  EXPECT_EQ(hook.after_create_session_calls, 2);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);  // fresh variables
}

TEST(MonitoredSession, PreemptionRecordedInTheCoordinatorIsTheRootCauseOfARunError) {
  TrainingGraph t;
  RecordingHook recorder;
  int calls = 0;
  recorder.on_before_run = [&](SessionRunContext&) {
    if (++calls == 2) {
      recorder.coord->stop_on_exception([] { throw AbortedError("ps lost"); });
      throw InternalError("connection reset");  // a symptom of the preemption
    }
  };
  MonitoredSession sess(t.g, {&recorder});
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);  // recovered and retried on a fresh session
  EXPECT_EQ(recorder.after_create_session_calls, 2);
}

TEST(SingularMonitoredSession, DoesNotRecoverFromAbortedError) {
  TrainingGraph t;
  RecordingHook recorder;
  RaiseOnceAtCountN hook(4, [] { throw AbortedError("Abort"); });
  SingularMonitoredSession sess(t.g, {.hooks = {&hook, &recorder}});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_FALSE(sess.should_stop());
  expect_error([&] { sess.run(t.do_step); }, ErrorCode::kAborted, "Abort");
  EXPECT_TRUE(hook.raised);
  sess.close();
  EXPECT_EQ(recorder.end_calls, 0);
  EXPECT_EQ(recorder.after_create_session_calls, 1);
}

// =================================================================================================
// SingularMonitoredSession
// =================================================================================================

TEST(SingularMonitoredSession, HandlesInitialization) {
  TrainingGraph t;
  SingularMonitoredSession sess(t.g);
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 1);
}

TEST(SingularMonitoredSession, RawSessionRunsWithoutHooks) {
  TrainingGraph t;
  RecordingHook hook;
  SingularMonitoredSession sess(t.g, {.hooks = {&hook}});
  EXPECT_EQ(i64(sess.raw_session().run(t.do_step)), 1);
  EXPECT_EQ(hook.before_run_calls, 0);
  EXPECT_EQ(i64(sess.run(t.do_step)), 2);
  EXPECT_EQ(hook.before_run_calls, 1);
  sess.close();
  EXPECT_THROW(sess.raw_session(), FailedPreconditionError);
}

TEST(SingularMonitoredSession, RestoresFromCheckpointDir) {
  TempDir dir;
  TrainingGraph t;
  Scaffold scaffold(t.g);
  {
    SaveEveryStepHook ckpt_hook(scaffold, dir.path());
    SingularMonitoredSession sess(t.g, {.hooks = {&ckpt_hook}, .scaffold = &scaffold});
    sess.run(t.do_step);
    sess.run(t.do_step);
    sess.run(t.do_step);
  }
  SingularMonitoredSession sess(t.g, {.scaffold = &scaffold, .checkpoint_dir = dir.path()});
  EXPECT_EQ(i64(sess.run(t.gstep.value())), 3);
}

// =================================================================================================
// run_step_fn
// =================================================================================================

TEST(RunStepFn, Example) {
  Graph g;
  Scope s(g);
  Output c = placeholder(s.with_op_name("c"), DType::kFloat32);
  Output v = identity(s, c);
  MonitoredSession sess(g);
  // As TF's session.run_step_fn(step_fn): the step function's value comes back.
  const std::optional<float> value = sess.run_step_fn([&](StepContext& ctx) {
    return f32(ctx.run_with_hooks(v, {{c, Tensor::scalar<float>(3.2f)}}));
  });
  ASSERT_TRUE(value.has_value());
  EXPECT_NEAR(*value, 3.2f, 1e-6);
}

TEST(RunStepFn, StepFunctionStops) {
  Graph g;
  MonitoredSession sess(g);
  sess.run_step_fn([](StepContext& ctx) { ctx.request_stop(); });
  EXPECT_TRUE(sess.should_stop());
}

TEST(RunStepFn, AStoppedStepFunctionReturnsNoValue) {  // TF's None
  Graph g;
  MonitoredSession sess(g);
  const std::optional<int> value = sess.run_step_fn([](StepContext& ctx) -> int {
    ctx.request_stop();
    return 1;
  });
  EXPECT_FALSE(value.has_value());
  EXPECT_TRUE(sess.should_stop());
}

TEST(RunStepFn, RequestStopInALoop) {
  Graph g;
  MonitoredSession sess(g);
  int iterations = 0;
  while (!sess.should_stop()) {
    sess.run_step_fn([](StepContext& ctx) { ctx.request_stop(); });
    ++iterations;
  }
  EXPECT_EQ(iterations, 1);
  EXPECT_THROW(sess.run_step_fn([](StepContext&) {}), FailedPreconditionError);
}

TEST(RunStepFn, RequestStopThrowsStopIterationWithTheReferenceText) {
  Graph g;
  MonitoredSession sess(g);
  std::string message;
  sess.run_step_fn([&](StepContext& ctx) {
    try {
      ctx.request_stop();
    } catch (const StopIteration& e) {
      message = e.what();
    }
  });
  EXPECT_EQ(message, "step_fn has requested the iterations to stop.");
  EXPECT_FALSE(sess.should_stop());  // caught inside the step function: nothing stopped
}

TEST(RunStepFn, WithHooks) {
  Graph g;
  Scope s(g);
  Variable var = make_variable(s, "var", constant(s, 0.0f));
  Output stage_0 = assign_add(s, var.value(), constant(s, 0.3f));
  Output stage_1_0 = assign_add(s, var.value(), constant(s, 0.7f));
  Output stage_1_1 = assign_add(s.with_control_dependencies({stage_1_0.node}), var.value(), constant(s, 0.5f));
  Output stage_2 = assign_add(s, var.value(), constant(s, 1.1f));
  RecordingHook hook;
  hook.request = SessionRunArgs{.fetches = stage_1_0};
  float in_after_run = 0, stage_2_value = 0;
  hook.on_after_run = [&](SessionRunContext& c, const SessionRunValues&) {
    in_after_run = f32(c.session().run(var.value()));
    stage_2_value = f32(c.session().run(stage_2));
  };
  MonitoredSession sess(g, {&hook});
  float stage_0_value = 0, result = 0;
  sess.run_step_fn([&](StepContext& ctx) {
    stage_0_value = f32(ctx.session().run(stage_0));
    result = f32(ctx.run_with_hooks(stage_1_1));
  });
  EXPECT_NEAR(stage_0_value, 0.3f, 1e-5);
  EXPECT_NEAR(in_after_run, 0.3f + 0.5f + 0.7f, 1e-5);
  EXPECT_NEAR(stage_2_value, 0.3f + 0.5f + 0.7f + 1.1f, 1e-5);
  EXPECT_NEAR(result, 1.5f, 1e-5);
}

TEST(RunStepFn, SameHooksBehaviourWithoutRecovery) {
  Graph g;
  Scope s(g);
  Variable var = make_variable(s, "var", constant(s, 0.0f));
  Output stage_0 = assign_add(s, var.value(), constant(s, 0.3f));
  Output stage_1 = assign_add(s, var.value(), constant(s, 0.7f));
  RecordingHook hook;
  hook.request = SessionRunArgs{.fetches = var.value()};
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  float result = 0;
  sess.run_step_fn([&](StepContext& ctx) {
    ctx.session().run(stage_0);
    result = f32(ctx.run_with_hooks(stage_1));
  });
  EXPECT_NEAR(result, 1.0f, 1e-5);
  EXPECT_EQ(hook.after_run_calls, 1);
}

TEST(RunStepFn, WithHooksAndRequestStop) {
  Graph g;
  RecordingHook hook;
  MonitoredSession sess(g, {&hook});
  sess.run_step_fn([](StepContext& ctx) { ctx.request_stop(); });
  EXPECT_TRUE(sess.should_stop());
  // request_stop() interrupts the step before any hook ran.
  EXPECT_EQ(hook.before_run_calls, 0);
  EXPECT_EQ(hook.after_run_calls, 0);
  sess.close();
  EXPECT_EQ(hook.end_calls, 1);
}

TEST(RunStepFn, RecoversFromAnExceptionInStepFn) {
  Graph g;
  Scope s(g);
  Output c = placeholder(s.with_op_name("c"), DType::kFloat32);
  Output v = identity(s, c);
  bool run_already = false;
  MonitoredSession sess(g);
  const std::optional<float> value = sess.run_step_fn([&](StepContext& ctx) {
    if (!run_already) {
      run_already = true;
      throw AbortedError("Abort");
    }
    return f32(ctx.run_with_hooks(v, {{c, Tensor::scalar<float>(3.2f)}}));
  });
  ASSERT_TRUE(value.has_value());  // the value of the re-run
  EXPECT_NEAR(*value, 3.2f, 1e-6);
  EXPECT_TRUE(run_already);
}

// The whole step function is re-run on the new session: its side effects on the old session are
// lost with it (the reference reuses one session across recoveries; here each recovery makes a
// fresh one, so the new session saw exactly one increment).
TEST(RunStepFn, RecoversFromAnExceptionInStepFnAfterHooks) {
  Graph g;
  Scope s(g);
  Output c = placeholder(s.with_op_name("c"), DType::kFloat32);
  Output v = identity(s, c);
  Variable graph_state = make_variable(s, "graph_state", constant(s, 0.0f));
  Output graph_side_effect = assign_add(s, graph_state.value(), constant(s, 0.31f));
  bool run_already = false;
  int side_effect_counter = 0;
  RecordingHook hook;
  MonitoredSession sess(g, {&hook});
  float value = 0;
  sess.run_step_fn([&](StepContext& ctx) {
    ++side_effect_counter;
    ctx.session().run(graph_side_effect);
    value = f32(ctx.run_with_hooks(v, {{c, Tensor::scalar<float>(3.2f)}}));
    if (!run_already) {
      run_already = true;
      throw AbortedError("Abort");
    }
  });
  EXPECT_NEAR(value, 3.2f, 1e-6);
  EXPECT_EQ(side_effect_counter, 2);
  EXPECT_NEAR(f32(sess.run(graph_state.value())), 0.31f, 1e-6);
  EXPECT_EQ(hook.after_create_session_calls, 2);
  EXPECT_EQ(hook.after_run_calls, 3);  // twice in the step function runs, once for the read
}

TEST(RunStepFn, DoesNotRecoverWhenNotAskedTo) {
  Graph g;
  Scope s(g);
  Output c = placeholder(s.with_op_name("c"), DType::kFloat32);
  Output v = identity(s, c);
  bool run_already = false;
  SingularMonitoredSession sess(g);
  expect_error(
      [&] {
        sess.run_step_fn([&](StepContext& ctx) {
          if (!run_already) {
            run_already = true;
            throw AbortedError("Abort");
          }
          ctx.run_with_hooks(v, {{c, Tensor::scalar<float>(3.2f)}});
        });
      },
      ErrorCode::kAborted, "Abort");
  EXPECT_TRUE(run_already);
}

TEST(RunStepFn, ExceptionFromBeforeRunReRunsTheStep) {
  Graph g;
  Scope s(g);
  Output c = placeholder(s.with_op_name("c"), DType::kFloat32);
  Output v = identity(s, c);
  Output vv = constant(s, 3.2f);
  Variable graph_state = make_variable(s, "graph_state", constant(s, 0.0f));
  Output graph_side_effect = assign_add(s, graph_state.value(), constant(s, 0.31f));
  bool run_already = false;
  int side_effect_counter = 0;
  RecordingHook hook;
  hook.request = SessionRunArgs{.fetches = vv};
  hook.on_before_run = [&](SessionRunContext&) {
    if (!run_already) {
      run_already = true;
      throw AbortedError("Abort");
    }
  };
  float hook_saw = 0;
  hook.on_after_run = [&](SessionRunContext&, const SessionRunValues& values) {
    hook_saw = f32(values.results.tensor());
  };
  MonitoredSession sess(g, {&hook});
  float value = 0;
  sess.run_step_fn([&](StepContext& ctx) {
    ++side_effect_counter;
    ctx.session().run(graph_side_effect);
    value = f32(ctx.run_with_hooks(v, {{c, Tensor::scalar<float>(1.3f)}}));
  });
  EXPECT_NEAR(value, 1.3f, 1e-6);
  EXPECT_NEAR(hook_saw, 3.2f, 1e-6);
  EXPECT_EQ(side_effect_counter, 2);
  EXPECT_NEAR(f32(sess.run(graph_state.value())), 0.31f, 1e-6);
}

TEST(RunStepFn, OutOfRangeInStepFnStopsTheSession) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  sess.run_step_fn([&](StepContext& ctx) {
    ctx.run_with_hooks(t.do_step);
    throw OutOfRangeError("End of sequence");
  });
  EXPECT_TRUE(sess.should_stop());
  sess.close();
  EXPECT_EQ(hook.end_calls, 1);
}

TEST(RunStepFn, OtherErrorsPropagateAndSkipEnd) {
  TrainingGraph t;
  RecordingHook hook;
  MonitoredSession sess(t.g, {&hook});
  EXPECT_THROW(sess.run_step_fn([](StepContext&) { throw InvalidArgumentError("bad step"); }), InvalidArgumentError);
  sess.close();
  EXPECT_EQ(hook.end_calls, 0);
}

}  // namespace
}  // namespace stepscope
