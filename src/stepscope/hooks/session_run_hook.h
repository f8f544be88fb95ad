// The SessionRunHook contract of TensorFlow 1.x, in C++ terms.
//
// A hook extends the calls a MonitoredSession makes: it can add fetches, feeds and run options
// to every run(), look at their results, and ask the loop to stop. Lifecycle:
//
//   hook.begin(graph)                 graph still mutable: add ops here
//   create session (init / restore from a checkpoint)
//   hook.after_create_session(session, coord)
//                                     graph finalized; may run ops; called again after each
//                                     recovery from AbortedError/UnavailableError (begin is not)
//   loop:
//     args = hook.before_run(run_context)     may return SessionRunArgs to merge into the run
//     session.run(merged fetches, feeds, options)
//     hook.after_run(run_context, run_values)  results in the shape of the hook's own fetches
//   hook.end(session)                 last chance to run ops
//   (a run that raised: hook.on_run_error(run_context, run_values, error) on every hook, then
//   the error propagates)
//
// Exceptions: if run() raises OutOfRangeError (the input ran out) or the loop is left through
// StopIteration (StepContext::request_stop), after_run is skipped but end() is still called.
// Any other error skips both after_run and end() and propagates. Hooks are called in the order
// they were given; several hooks may add fetches (each sees only its own results), feeds (a
// tensor fed twice is an error) and options (merged: the largest trace level wins).
#pragma once

#include <optional>

#include "stepscope/hooks/fetch.h"
#include "stepscope/runtime/session.h"

namespace stepscope {

class Coordinator;

struct SessionRunArgs {
  // Defaults let `SessionRunArgs{.fetches = x}` leave the rest out without -Wextra warnings.
  Fetch fetches = {};
  FeedList feed_dict = {};
  std::optional<RunOptions> options = std::nullopt;
};

class SessionRunContext {
 public:
  SessionRunContext(SessionRunArgs original_args, Session* session)
      : original_args_(std::move(original_args)), session_(session) {}
  // The fetches and feeds of the user's run() call.
  const SessionRunArgs& original_args() const { return original_args_; }
  // The raw session under the monitored one: running it does not call hooks.
  Session& session() const { return *session_; }
  // Asks the MonitoredSession to stop after this step (should_stop() becomes true).
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  SessionRunArgs original_args_;
  Session* session_;
  bool stop_requested_ = false;
};

struct SessionRunValues {
  FetchResult results;     // in the shape of this hook's SessionRunArgs.fetches (empty if none)
  RunOptions options;      // the merged options the run used
  RunMetadata* run_metadata = nullptr;  // shared by every hook of the run
  // When a hook asked for step timing (RunOptions::collect_step_timing, then also in
  // run_metadata->step_timing): the time all the hooks took, their before_run for this run and
  // their after_run for the previous one (this run's are still going on). 0 otherwise.
  int64_t hooks_ns = 0;
};

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  virtual void begin() {}
  // begin() with the graph the session will run (TensorFlow's default graph at that point):
  // MonitoredSession calls this one. Hooks that add ops or look up the global step override it;
  // the default forwards to begin().
  virtual void begin(Graph& graph) { begin(); }
  virtual void after_create_session(Session& session, Coordinator& coord) {}
  virtual std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) { return std::nullopt; }
  virtual void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {}
  virtual void end(Session& session) {}
  // Beyond TensorFlow: the run raised (Session::run, or a hook's after_run such as
  // NanTensorHook's "NaN loss during training."), and the error is about to propagate. Called
  // on every hook, in order, with the run's values so far: run_metadata holds what the step
  // traced before it failed (results are empty). Not called for the normal ends of a loop
  // (OutOfRangeError, StopIteration). An exception thrown here is dropped: the run's error is
  // what propagates.
  virtual void on_run_error(SessionRunContext& run_context, const SessionRunValues& run_values,
                            const std::exception& error) {}
};

}  // namespace stepscope
