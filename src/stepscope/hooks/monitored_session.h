// MonitoredSession: a Session that runs hooks around every run(), initializes or restores the
// model when it is created, recovers from preemption, and closes cleanly (TensorFlow's
// tf.train.MonitoredSession family).
//
//   Variable step = get_or_create_global_step(root);
//   Node* train = ...;
//   StopAtStepHook stop({.last_step = 1000});
//   MonitoredSession sess(std::make_unique<ChiefSessionCreator>(g, ChiefSessionCreatorOptions{
//                             .checkpoint_dir = "runs/x"}), {&stop});
//   while (!sess.should_stop()) sess.run(train);
//   sess.close();    // hooks' end(); also done by the destructor when close() was not called
//
// A MonitoredSession is used from one thread (hooks may start threads through the Coordinator).
// Hooks are passed as non-owning SessionRunHook pointers (the whole hooks family uses this
// style); they must outlive the session. Hooks a session makes itself (MonitoredTrainingSession's
// defaults) are owned by it.
//
// Lifecycle (see session_run_hook.h): the constructor calls every hook's begin(graph) in order, then
// creates the session (the creator finalizes the graph and initializes or restores variables),
// then calls after_create_session(session, coord) on every hook. run() calls before_run /
// after_run around one Session::run. close() calls end(session) on every hook, then closes the
// session and un-finalizes the graph unless it was finalized before the MonitoredSession was made.
//
// C++ loop semantics (there is no Python `with` block): when a run raises OutOfRangeError (the
// input ran out) or StopIteration, run() swallows it, skips after_run, marks the session stopped
// (should_stop() becomes true) and returns an empty result; close() then still calls end(). Any
// other error propagates from run(), and end() is never called for that session: close() (or the
// destructor) just closes it. The destructor also skips end() while another exception unwinds
// the stack.
//
// Recovery (MonitoredSession, not SingularMonitoredSession): when a run, a hook, or the creation
// of a session raises AbortedError or UnavailableError, the session is closed, a new one is
// created (restoring the latest checkpoint if the creator has a checkpoint_dir), every hook's
// after_create_session is called again (begin is not), and the same call is retried.
#pragma once

#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "stepscope/hooks/coordinator.h"
#include "stepscope/hooks/fetch.h"
#include "stepscope/hooks/scaffold.h"
#include "stepscope/hooks/session_run_hook.h"

namespace stepscope {

// Raised by StepContext::request_stop() to leave a step function; MonitoredSession::run_step_fn
// catches it and stops the session. Deliberately not a stepscope::Error, so it is never mistaken
// for an OutOfRangeError.
class StopIteration : public std::exception {
 public:
  explicit StopIteration(std::string message = "") : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// Runs a raw Session with hooks, without any lifecycle: no begin/after_create_session/end, no
// recovery (TensorFlow's _HookedSession; MonitoredSession is built on it, and hook tests use it
// directly). One run():
//   1. FailedPreconditionError "Run called even after should_stop requested." once a hook asked
//      to stop;
//   2. one SessionRunContext (original_args = the caller's fetches and feeds) for all hooks;
//   3. every hook's before_run, in order: its fetches are run beside the caller's, its feeds are
//      merged (FailedPreconditionError "Same tensor is fed by two hooks. Conflict(s): [x:0]"), its
//      options merged into the caller's RunOptions *in place* (largest trace level, timeout and
//      inter-op pool; output_partition_graphs and report_tensor_allocations_upon_oom OR-ed; debug
//      watches appended) — a fresh RunOptions when the caller passed none;
//   4. hook feeds vs the caller's: FailedPreconditionError "Same tensor is fed by a SessionRunHook
//      and user. Conflict(s): [...]" (the caller's FeedList is never modified);
//   5. one Session::run with the caller's RunMetadata, or the session's own, emptied for this call
//      (what it holds changes with the next run: hooks copy what they keep);
//   6. every hook's after_run, in order, with its own results (empty if it fetched nothing), the
//      merged options and the same RunMetadata;
//   7. a stop requested by any hook makes should_stop() true.
// If a before_run throws, nothing runs and no after_run is called.
class HookedSession {
 public:
  HookedSession(Session& session, std::vector<SessionRunHook*> hooks);

  FetchResult run(const Fetch& fetches, const FeedList& feeds = {}, RunOptions* options = nullptr,
                  RunMetadata* run_metadata = nullptr);
  bool should_stop() const { return should_stop_; }
  Session& session() const { return *session_; }
  const std::vector<SessionRunHook*>& hooks() const { return hooks_; }

 private:
  Session* session_;
  std::vector<SessionRunHook*> hooks_;
  // Scratch of run(), kept between calls so that a step with quiet hooks does not allocate them.
  std::vector<std::optional<Fetch>> hook_fetches_;
  std::vector<Output> outputs_;
  std::vector<Node*> targets_;
  std::vector<size_t> hook_begin_;
  // The runs' RunMetadata when the caller gives none. Kept, so that a traced run (every run, with
  // a FlightRecorderHook) writes its statistics into the previous one's arrays: fresh ones cost a
  // first touch of their memory, ~0.5-3 us an op.
  RunMetadata own_metadata_;
  bool should_stop_ = false;
  int64_t last_after_run_ns_ = 0;  // the hooks' after_run of the previous run (SessionRunValues::hooks_ns)
};

namespace internal {
class CoordinatedSession;
}  // namespace internal

// What a step function gets from MonitoredSession::run_step_fn.
class StepContext {
 public:
  // The raw session: runs without hooks.
  Session& session() const { return *session_; }
  // A run with hooks, as MonitoredSession::run, except that AbortedError / UnavailableError
  // propagate to run_step_fn (which re-runs the whole step function on a new session).
  FetchResult run_with_hooks(const Fetch& fetches, const FeedList& feeds = {}, RunOptions* options = nullptr,
                             RunMetadata* run_metadata = nullptr);
  Tensor run_with_hooks(Output fetch, const FeedList& feeds = {}, RunOptions* options = nullptr,
                        RunMetadata* run_metadata = nullptr);
  void run_with_hooks(Node* op, const FeedList& feeds = {}, RunOptions* options = nullptr,
                      RunMetadata* run_metadata = nullptr);
  // Leaves the step function by throwing StopIteration("step_fn has requested the iterations to
  // stop."); run_step_fn then stops the session. Hooks are not run for the rest of the step.
  [[noreturn]] void request_stop();

 private:
  friend class MonitoredSession;
  StepContext(Session* session, internal::CoordinatedSession* coordinated)
      : session_(session), coordinated_(coordinated) {}
  Session* session_;
  internal::CoordinatedSession* coordinated_;
};

struct MonitoredTrainingSessionOptions;
class MonitoredSession;
MonitoredSession MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options);

class MonitoredSession {
 public:
  // `session_creator` makes (and remakes, on recovery) the raw session.
  MonitoredSession(std::unique_ptr<SessionCreator> session_creator, std::vector<SessionRunHook*> hooks = {},
                   double stop_grace_period_secs = 120);
  // With a default ChiefSessionCreator(graph): initializes the variables, no checkpoints.
  explicit MonitoredSession(Graph& graph, std::vector<SessionRunHook*> hooks = {}, double stop_grace_period_secs = 120);
  MonitoredSession(MonitoredSession&&) noexcept;
  MonitoredSession& operator=(MonitoredSession&&) noexcept;
  // Closes the session when close() was not called (errors are logged, not thrown).
  virtual ~MonitoredSession();

  // Runs `fetches` (any nested structure) with the hooks; returns the values in the same shape,
  // or an empty FetchResult when the input ran out (see the header comment). FailedPrecondition
  // "Run called even after should_stop requested." once stopped.
  FetchResult run(const Fetch& fetches, const FeedList& feeds = {}, RunOptions* options = nullptr,
                  RunMetadata* run_metadata = nullptr);
  // One tensor (an empty Tensor when the input ran out).
  Tensor run(Output fetch, const FeedList& feeds = {}, RunOptions* options = nullptr,
             RunMetadata* run_metadata = nullptr);
  // One op, run for its effect (a train op).
  void run(Node* op, const FeedList& feeds = {}, RunOptions* options = nullptr, RunMetadata* run_metadata = nullptr);

  // Calls step_fn(ctx) with a StepContext and returns what it returns, as TensorFlow does: for a
  // step function returning R, a std::optional<R> that is empty when OutOfRangeError or
  // StopIteration (ctx.request_stop()) stopped the session (TF's None); for void, nothing. With
  // recovery, AbortedError / UnavailableError from anywhere in the step function (a hook
  // included) re-run the whole step function on a new session.
  template <class F>
  requires std::invocable<F&, StepContext&>
  auto run_step_fn(F&& step_fn) {
    using R = std::invoke_result_t<F&, StepContext&>;
    if constexpr (std::is_void_v<R>) {
      run_step_fn_erased(step_fn);
    } else {
      std::optional<std::remove_cvref_t<R>> result;
      run_step_fn_erased([&](StepContext& context) { result.emplace(step_fn(context)); });
      return result;
    }
  }

  // True once a hook requested a stop, the input ran out, the coordinator was asked to stop, or
  // the session is closed. With recovery it never throws (an error recorded in the coordinator
  // makes it true); SingularMonitoredSession rethrows such an error.
  bool should_stop();

  // Calls every hook's end(session) (unless a run failed, see above), then closes the session
  // (joining the coordinator, which rethrows an error a thread reported to it) and un-finalizes
  // the graph if it was not finalized before. A second close() is FailedPreconditionError
  // "Session is already closed.".
  void close();
  bool closed() const;

  Graph& graph() const;
  // The hooks, in the order they are called (a MonitoredTrainingSession's defaults included).
  const std::vector<SessionRunHook*>& hooks() const;

 protected:
  MonitoredSession(std::unique_ptr<SessionCreator> session_creator, std::vector<SessionRunHook*> hooks,
                   double stop_grace_period_secs, bool should_recover,
                   std::vector<std::unique_ptr<SessionRunHook>> owned_hooks);
  // The raw session, null when there is none (closed, or between a failure and recovery).
  Session* raw_session_or_null() const;

 private:
  void run_step_fn_erased(const std::function<void(StepContext&)>& step_fn);
  friend MonitoredSession MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options);
  struct Impl;
  Impl& impl() const;
  void close_quietly() noexcept;
  std::unique_ptr<Impl> impl_;
};

struct SingularMonitoredSessionOptions {
  std::vector<SessionRunHook*> hooks = {};
  Scaffold* scaffold = nullptr;
  SessionOptions session_options = {};
  std::string checkpoint_dir = {};  // restore from the latest checkpoint there, if any
  double stop_grace_period_secs = 120;
  std::string checkpoint_filename_with_path = {};  // or from exactly this one
};

// A MonitoredSession without recovery (errors propagate), always with a ChiefSessionCreator, and
// with access to the raw session.
class SingularMonitoredSession : public MonitoredSession {
 public:
  explicit SingularMonitoredSession(Graph& graph, SingularMonitoredSessionOptions options = {});
  // The raw Session (runs without hooks); FailedPreconditionError once closed.
  Session& raw_session() const;
};

}  // namespace stepscope
