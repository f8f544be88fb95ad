#include "stepscope/hooks/monitored_session.h"

#include <algorithm>
#include <cstdio>

#include "stepscope/base/clock.h"

namespace stepscope {

namespace {

void log_info(const std::string& message) { std::fprintf(stderr, "stepscope: %s\n", message.c_str()); }

// Preemption errors: the session is lost but the job can go on with a new one.
bool is_preemption(const Error& e) { return e.code() == ErrorCode::kAborted || e.code() == ErrorCode::kUnavailable; }

bool is_preemption(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return is_preemption(e);
  } catch (...) {
    return false;
  }
}

// TF's _merge_run_options: the most demanding setting of the two wins.
void merge_run_options(RunOptions& options, const RunOptions& incoming) {
  options.trace_level = std::max(options.trace_level, incoming.trace_level);
  options.timeout_in_ms = std::max(options.timeout_in_ms, incoming.timeout_in_ms);
  options.inter_op_thread_pool = std::max(options.inter_op_thread_pool, incoming.inter_op_thread_pool);
  options.output_partition_graphs = options.output_partition_graphs || incoming.output_partition_graphs;
  auto& watches = options.debug_options.debug_tensor_watch_opts;
  const auto& more = incoming.debug_options.debug_tensor_watch_opts;
  watches.insert(watches.end(), more.begin(), more.end());
  options.debug_options.reset_disk_byte_usage =
      options.debug_options.reset_disk_byte_usage || incoming.debug_options.reset_disk_byte_usage;
  options.report_tensor_allocations_upon_oom =
      options.report_tensor_allocations_upon_oom || incoming.report_tensor_allocations_upon_oom;
  options.collect_step_timing = options.collect_step_timing || incoming.collect_step_timing;
}

bool feeds_contain(const FeedList& feeds, const Output& out) {
  return std::any_of(feeds.begin(), feeds.end(), [&](const auto& f) { return f.first == out; });
}

// FailedPreconditionError "<message> Conflict(s): [a:0, b:0]" when `incoming` feeds a tensor
// that `existing` already feeds.
void raise_if_feeds_intersect(const FeedList& existing, const FeedList& incoming, const char* message) {
  std::string conflicts;
  for (const auto& [out, value] : incoming)
    if (feeds_contain(existing, out)) conflicts += (conflicts.empty() ? "" : ", ") + out.name();
  if (!conflicts.empty()) throw FailedPreconditionError(std::string(message) + " Conflict(s): [" + conflicts + "]");
}

}  // namespace

// --- HookedSession -------------------------------------------------------------------------------

HookedSession::HookedSession(Session& session, std::vector<SessionRunHook*> hooks)
    : session_(&session), hooks_(std::move(hooks)) {
  for (size_t i = 0; i < hooks_.size(); ++i)
    if (!hooks_[i]) throw InvalidArgumentError("hook " + std::to_string(i) + " is null");
}

FetchResult HookedSession::run(const Fetch& fetches, const FeedList& feeds, RunOptions* options,
                               RunMetadata* run_metadata) {
  if (should_stop_) throw FailedPreconditionError("Run called even after should_stop requested.");
  SessionRunContext context(SessionRunArgs{fetches, feeds, std::nullopt}, session_);
  RunOptions own_options;
  RunOptions& merged = options ? *options : own_options;

  std::vector<std::optional<Fetch>>& hook_fetches = hook_fetches_;
  hook_fetches.assign(hooks_.size(), std::nullopt);
  FeedList hook_feeds;
  const int64_t before_run_start = now_ns();
  for (size_t i = 0; i < hooks_.size(); ++i) {
    std::optional<SessionRunArgs> request = hooks_[i]->before_run(context);
    if (!request) continue;
    if (!request->fetches.empty()) hook_fetches[i] = std::move(request->fetches);
    if (!request->feed_dict.empty()) {
      raise_if_feeds_intersect(hook_feeds, request->feed_dict, "Same tensor is fed by two hooks.");
      hook_feeds.insert(hook_feeds.end(), request->feed_dict.begin(), request->feed_dict.end());
    }
    if (request->options) merge_run_options(merged, *request->options);
  }
  const FeedList* feed_list = &feeds;
  FeedList all_feeds;
  if (!hook_feeds.empty()) {
    if (feeds.empty()) {
      feed_list = &hook_feeds;
    } else {
      raise_if_feeds_intersect(feeds, hook_feeds, "Same tensor is fed by a SessionRunHook and user.");
      all_feeds = hook_feeds;
      all_feeds.insert(all_feeds.end(), feeds.begin(), feeds.end());
      feed_list = &all_feeds;
    }
  }

  // One Session::run for the caller's and every hook's fetches: flatten them all, remembering
  // where each part's tensors start.
  std::vector<Output>& outputs = outputs_;
  std::vector<Node*>& targets = targets_;
  outputs.clear();
  targets.clear();
  fetches.flatten(outputs, targets);
  const size_t caller_outputs = outputs.size();
  std::vector<size_t>& hook_begin = hook_begin_;  // hook i's tensors: [hook_begin[i], hook_begin[i + 1])
  hook_begin.assign(hooks_.size() + 1, 0);
  for (size_t i = 0; i < hooks_.size(); ++i) {
    hook_begin[i] = outputs.size();
    if (hook_fetches[i]) hook_fetches[i]->flatten(outputs, targets);
  }
  hook_begin[hooks_.size()] = outputs.size();
  RunMetadata* metadata = run_metadata;
  if (!metadata) {
    metadata = &own_metadata_;
    // As fresh, but for the statistics' arrays, which a traced run refills.
    if (merged.trace_level == TraceLevel::kNoTrace) metadata->step_stats = {};
    metadata->step_timing = {};
    metadata->partition_graphs.clear();
    metadata->input_stages.clear();
  }
  // The hooks' own time, when a hook asked for step timing (a clock reading costs ~25 ns).
  const bool timing = merged.collect_step_timing;
  SessionRunValues run_values{.results = {},
                              .options = merged,
                              .run_metadata = metadata,
                              .hooks_ns = timing ? now_ns() - before_run_start + last_after_run_ns_ : 0};
  std::vector<Tensor> values;
  try {
    values = session_->run(*feed_list, outputs, targets, merged, metadata);
    const std::span<const Tensor> all(values);
    const int64_t after_run_start = timing ? now_ns() : 0;
    last_after_run_ns_ = 0;  // a run that raises in an after_run has none to count
    for (size_t i = 0; i < hooks_.size(); ++i) {
      run_values.results =
          hook_fetches[i]
              ? FetchResult::unflatten(*hook_fetches[i], all.subspan(hook_begin[i], hook_begin[i + 1] - hook_begin[i]))
              : FetchResult();
      hooks_[i]->after_run(context, run_values);
    }
    if (timing) last_after_run_ns_ = now_ns() - after_run_start;
  } catch (const OutOfRangeError&) {
    throw;  // the input ran out: the loop's normal end
  } catch (const StopIteration&) {
    throw;
  } catch (const std::exception& error) {
    run_values.results = FetchResult();
    for (SessionRunHook* hook : hooks_) {
      try {
        hook->on_run_error(context, run_values, error);
      } catch (...) {
        // The run's error is the one to report.
      }
    }
    throw;
  }
  const std::span<const Tensor> all(values);
  should_stop_ = should_stop_ || context.stop_requested();
  return FetchResult::unflatten(fetches, all.first(caller_outputs));
}

// --- CoordinatedSession --------------------------------------------------------------------------

namespace internal {

// A hooked session with its coordinator (TF's _CoordinatedSession).
class CoordinatedSession {
 public:
  CoordinatedSession(std::unique_ptr<Session> session, std::unique_ptr<Coordinator> coord,
                     const std::vector<SessionRunHook*>& hooks, double stop_grace_period_secs)
      : session_(std::move(session)),
        coord_(std::move(coord)),
        hooked_(*session_, hooks),
        stop_grace_period_secs_(stop_grace_period_secs) {}

  Session& raw() const { return *session_; }
  HookedSession& hooked() { return hooked_; }

  // Runs f(). A non-preemption error may be the consequence of a preemption a thread reported
  // to the coordinator: that root cause is raised instead.
  template <class F>
  decltype(auto) guarded(F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      if (is_preemption(e)) throw;
      raise_recorded_preemption_or_rethrow();
    } catch (...) {
      raise_recorded_preemption_or_rethrow();
    }
  }

  FetchResult run(const Fetch& fetches, const FeedList& feeds, RunOptions* options, RunMetadata* run_metadata) {
    return guarded([&] { return hooked_.run(fetches, feeds, options, run_metadata); });
  }

  // Rethrows an error recorded in the coordinator, else whether it was asked to stop.
  bool check_stop() {
    coord_->raise_requested_exception();
    return coord_->should_stop();
  }
  bool should_stop() { return check_stop() || hooked_.should_stop(); }

  // Stops and joins the coordinator (rethrowing what a thread reported to it); the raw session
  // is closed either way.
  void close() {
    coord_->request_stop();
    try {
      coord_->join(stop_grace_period_secs_, /*ignore_live_threads=*/true);
    } catch (...) {
      session_->close();
      throw;
    }
    session_->close();
  }

 private:
  [[noreturn]] void raise_recorded_preemption_or_rethrow() {
    std::exception_ptr original = std::current_exception();
    std::exception_ptr recorded;
    try {
      coord_->raise_requested_exception();
    } catch (...) {
      recorded = std::current_exception();
    }
    if (recorded && is_preemption(recorded)) std::rethrow_exception(recorded);
    std::rethrow_exception(original);
  }

  // Destroyed in reverse: the coordinator joins its threads before the session goes.
  std::unique_ptr<Session> session_;
  std::unique_ptr<Coordinator> coord_;
  HookedSession hooked_;
  double stop_grace_period_secs_;
};

}  // namespace internal

// --- StepContext ---------------------------------------------------------------------------------

FetchResult StepContext::run_with_hooks(const Fetch& fetches, const FeedList& feeds, RunOptions* options,
                                        RunMetadata* run_metadata) {
  return coordinated_->run(fetches, feeds, options, run_metadata);
}

Tensor StepContext::run_with_hooks(Output fetch, const FeedList& feeds, RunOptions* options,
                                   RunMetadata* run_metadata) {
  return run_with_hooks(Fetch(fetch), feeds, options, run_metadata).tensor();
}

void StepContext::run_with_hooks(Node* op, const FeedList& feeds, RunOptions* options, RunMetadata* run_metadata) {
  run_with_hooks(Fetch(op), feeds, options, run_metadata);
}

void StepContext::request_stop() { throw StopIteration("step_fn has requested the iterations to stop."); }

// --- MonitoredSession ----------------------------------------------------------------------------

struct MonitoredSession::Impl {
  Graph* graph = nullptr;
  std::unique_ptr<SessionCreator> creator;
  std::vector<std::unique_ptr<SessionRunHook>> owned_hooks;
  std::vector<SessionRunHook*> hooks;
  double stop_grace_period_secs = 120;
  bool should_recover = true;
  bool graph_was_finalized = false;
  std::unique_ptr<internal::CoordinatedSession> sess;  // null once closed (or while recovering)
  bool closed = false;
  bool stopped = false;  // the input ran out or the step function asked to stop
  bool failed = false;   // an error escaped run(): end() is not called for this session
  int uncaught_exceptions = std::uncaught_exceptions();

  // TF's _CoordinatedSessionCreator.create_session, retried on preemption when recovering.
  std::unique_ptr<internal::CoordinatedSession> create_session() {
    while (true) {
      try {
        std::unique_ptr<Session> raw = creator->create_session();
        // The coordinator keeps every error, the end of input included.
        auto coord = std::make_unique<Coordinator>(std::vector<ErrorCode>{});
        for (SessionRunHook* h : hooks) h->after_create_session(*raw, *coord);
        return std::make_unique<internal::CoordinatedSession>(std::move(raw), std::move(coord), hooks,
                                                              stop_grace_period_secs);
      } catch (const Error& e) {
        if (!should_recover || !is_preemption(e)) throw;
        log_info(std::string("An error was raised while a session was being created; retrying. Error: ") + e.what());
      }
    }
  }

  // Closes the current session. With recovery a preemption error while closing is only logged
  // (the session is gone either way).
  void close_session() {
    if (!sess) return;
    std::unique_ptr<internal::CoordinatedSession> s = std::move(sess);
    try {
      s->close();
    } catch (const Error& e) {
      if (!should_recover || !is_preemption(e)) throw;
      log_info(std::string("An error occurred when attempting to close the session: ") + e.what());
    }
  }

  // Runs f(session); with recovery, a preemption error closes the session, creates a new one and
  // calls f again (TF's _RecoverableSession.run / run_step_fn).
  template <class F>
  decltype(auto) with_recovery(F&& f) {
    if (!should_recover) return f(*sess);
    while (true) {
      try {
        if (!sess) sess = create_session();
        return f(*sess);
      } catch (const Error& e) {
        if (!is_preemption(e)) throw;
        log_info(std::string("An error was raised, possibly a preemption; the session will be closed and a "
                             "new one created. Error: ") +
                 e.what());
        close_session();
      }
    }
  }

  void close(bool call_end) {
    std::exception_ptr error;
    if (!closed && call_end && sess) {
      try {
        for (SessionRunHook* h : hooks) h->end(sess->raw());
      } catch (...) {
        error = std::current_exception();
      }
    }
    // As in TF's try/finally, an error while closing replaces one from end().
    try {
      if (closed) throw FailedPreconditionError("Session is already closed.");
      close_session();
    } catch (...) {
      error = std::current_exception();
    }
    if (!closed) {
      sess.reset();
      closed = true;
      if (!graph_was_finalized) graph->unfinalize();
    }
    if (error) std::rethrow_exception(error);
  }

  void check_open() const {
    if (closed) throw FailedPreconditionError("Attempted to use a closed MonitoredSession.");
    if (stopped) throw FailedPreconditionError("Run called even after should_stop requested.");
  }
};

MonitoredSession::MonitoredSession(std::unique_ptr<SessionCreator> session_creator, std::vector<SessionRunHook*> hooks,
                                   double stop_grace_period_secs)
    : MonitoredSession(std::move(session_creator), std::move(hooks), stop_grace_period_secs,
                       /*should_recover=*/true, {}) {}

MonitoredSession::MonitoredSession(Graph& graph, std::vector<SessionRunHook*> hooks, double stop_grace_period_secs)
    : MonitoredSession(std::make_unique<ChiefSessionCreator>(graph), std::move(hooks), stop_grace_period_secs) {}

MonitoredSession::MonitoredSession(std::unique_ptr<SessionCreator> session_creator, std::vector<SessionRunHook*> hooks,
                                   double stop_grace_period_secs, bool should_recover,
                                   std::vector<std::unique_ptr<SessionRunHook>> owned_hooks)
    : impl_(std::make_unique<Impl>()) {
  if (!session_creator) throw InvalidArgumentError("MonitoredSession: the session creator is null");
  for (size_t i = 0; i < hooks.size(); ++i)
    if (!hooks[i]) throw InvalidArgumentError("MonitoredSession: hook " + std::to_string(i) + " is null");
  Impl& m = *impl_;
  m.graph = &session_creator->graph();
  m.creator = std::move(session_creator);
  m.owned_hooks = std::move(owned_hooks);
  m.hooks = std::move(hooks);
  m.stop_grace_period_secs = stop_grace_period_secs;
  m.should_recover = should_recover;
  m.graph_was_finalized = m.graph->finalized();
  try {
    for (SessionRunHook* h : m.hooks) h->begin(*m.graph);
    m.sess = m.create_session();
  } catch (...) {
    // Leave the graph as we found it, so that the caller can fix it and try again.
    if (!m.graph_was_finalized) m.graph->unfinalize();
    throw;
  }
}

MonitoredSession::MonitoredSession(MonitoredSession&&) noexcept = default;

MonitoredSession& MonitoredSession::operator=(MonitoredSession&& other) noexcept {
  if (this != &other) {
    close_quietly();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

MonitoredSession::~MonitoredSession() { close_quietly(); }

void MonitoredSession::close_quietly() noexcept {
  if (!impl_ || impl_->closed) return;
  const bool call_end = !impl_->failed && std::uncaught_exceptions() <= impl_->uncaught_exceptions;
  try {
    impl_->close(call_end);
  } catch (const std::exception& e) {
    log_info(std::string("MonitoredSession: error while closing (call close() to see it): ") + e.what());
  } catch (...) {
    log_info("MonitoredSession: unknown error while closing");
  }
}

MonitoredSession::Impl& MonitoredSession::impl() const {
  if (!impl_) throw FailedPreconditionError("MonitoredSession: use of a moved-from session");
  return *impl_;
}

FetchResult MonitoredSession::run(const Fetch& fetches, const FeedList& feeds, RunOptions* options,
                                  RunMetadata* run_metadata) {
  Impl& m = impl();
  m.check_open();
  try {
    return m.with_recovery(
        [&](internal::CoordinatedSession& s) { return s.run(fetches, feeds, options, run_metadata); });
  } catch (const OutOfRangeError&) {
    m.stopped = true;
  } catch (const StopIteration&) {
    m.stopped = true;
  } catch (...) {
    m.failed = true;
    throw;
  }
  return FetchResult();
}

Tensor MonitoredSession::run(Output fetch, const FeedList& feeds, RunOptions* options, RunMetadata* run_metadata) {
  FetchResult r = run(Fetch(fetch), feeds, options, run_metadata);
  return r.empty() ? Tensor() : r.tensor();
}

void MonitoredSession::run(Node* op, const FeedList& feeds, RunOptions* options, RunMetadata* run_metadata) {
  run(Fetch(op), feeds, options, run_metadata);
}

void MonitoredSession::run_step_fn_erased(const std::function<void(StepContext&)>& step_fn) {
  Impl& m = impl();
  m.check_open();
  try {
    m.with_recovery([&](internal::CoordinatedSession& s) {
      s.guarded([&] {
        StepContext context(&s.raw(), &s);
        step_fn(context);
      });
    });
  } catch (const OutOfRangeError&) {
    m.stopped = true;
  } catch (const StopIteration&) {
    m.stopped = true;
  } catch (...) {
    m.failed = true;
    throw;
  }
}

bool MonitoredSession::should_stop() {
  Impl& m = impl();
  if (m.closed || m.stopped || !m.sess) return true;
  if (!m.should_recover) {
    try {
      return m.sess->should_stop();
    } catch (...) {
      m.failed = true;
      throw;
    }
  }
  // TF's _RecoverableSession._check_stop: never throws; a preemption recorded in the coordinator
  // means "go on with a new session".
  try {
    if (m.sess->check_stop()) return true;
  } catch (const Error& e) {
    if (!is_preemption(e)) return true;
    log_info(std::string("An error was raised while considering whether the session is complete; the "
                         "session will be closed and a new one created. Error: ") +
             e.what());
    m.close_session();
    m.sess = m.create_session();
    return false;
  } catch (...) {
    return true;
  }
  return m.sess->hooked().should_stop();
}

void MonitoredSession::close() { impl().close(/*call_end=*/!impl().failed); }

bool MonitoredSession::closed() const { return impl().closed; }

Graph& MonitoredSession::graph() const { return *impl().graph; }

const std::vector<SessionRunHook*>& MonitoredSession::hooks() const { return impl().hooks; }

Session* MonitoredSession::raw_session_or_null() const { return impl().sess ? &impl().sess->raw() : nullptr; }

// --- SingularMonitoredSession --------------------------------------------------------------------

SingularMonitoredSession::SingularMonitoredSession(Graph& graph, SingularMonitoredSessionOptions options)
    : MonitoredSession(
          std::make_unique<ChiefSessionCreator>(
              graph, ChiefSessionCreatorOptions{.scaffold = options.scaffold,
                                                .checkpoint_dir = options.checkpoint_dir,
                                                .checkpoint_filename_with_path = options.checkpoint_filename_with_path,
                                                .session_options = options.session_options}),
          std::move(options.hooks), options.stop_grace_period_secs, /*should_recover=*/false, {}) {}

Session& SingularMonitoredSession::raw_session() const {
  Session* s = raw_session_or_null();
  if (!s) throw FailedPreconditionError("raw_session(): the SingularMonitoredSession is closed");
  return *s;
}

}  // namespace stepscope
