// ProfilerHook: traces a training step every N steps or N seconds and writes its timeline
// (TensorFlow 1.x's tf.train.ProfilerHook), plus what TensorFlow leaves out: the step's
// RunMetadata, a tfprof profile of every traced step, gzip, a cap on the files kept, and
// windows of consecutive steps in one trace.
//
//   ProfilerHook profiler({.save_steps = 100, .output_dir = "runs/x", .show_memory = true});
//   // runs/x/timeline-101.json (Perfetto, chrome://tracing), runs/x/run_metadata-101.pb,
//   // runs/x/profile (Profiler::load), and a TaggedRunMetadata "step_101" in the event file.
//
// The reference's behaviour, exactly (tf-behaviour.md §2.1):
//  - the constructor first gets the cached summary writer of output_dir (SummaryWriterCache: an
//    event file is created there at once), then validates: exactly one of save_steps /
//    save_secs, with SecondOrStepTimer's InvalidArgumentErrors (which, beyond the reference, also
//    refuse save_steps <= 0 and a negative or NaN save_secs);
//  - begin(graph): FailedPreconditionError "Global step should be created to use ProfilerHook."
//    without a global step; the timer is NOT reset (a hook re-used by another session keeps it);
//  - every run fetches the global step's read (the value before the run's increment); the first
//    run after begin is never traced, and primes the timer with that value;
//  - a later run asks for FULL_TRACE only when the timer fires for the step it predicts (the
//    previous post-run step + 1); after such a run the real global step is read again on the
//    raw session, the timer updated with it, and the files named after it: with save_steps = 2
//    and a global step starting at 0, runs 2 and 4 write timeline-2.json and timeline-4.json;
//  - the log line "Saving timeline for <step> into '<path>'." (options.log.info), and
//    summary_writer.add_run_metadata(run_metadata, "step_<step>").
//
// Beyond the reference (options, defaults keep the reference's files):
//  - run_metadata-<step>.pb beside each timeline (TensorFlow's RunMetadata wire format) and a
//    tfprof Profiler fed every traced step, saved to <output_dir>/profile after each trace
//    (Profiler::load reads it). The profile is of one graph: a hook re-used with another graph
//    (e.g. a second Estimator::train) starts a new one. It keeps the newest profile_max_steps
//    steps whole and folds older ones into per-node totals: a run traced every step for days
//    holds (and rewrites) a bounded profile;
//  - gzip: timeline-<step>.json.gz (one gzip member);
//  - max_files_to_keep: only the newest N traces' files are kept (the oldest timeline and its
//    run_metadata are deleted); 0 keeps all. Only files this hook wrote are deleted;
//  - window_steps = K: when the timer fires, that run and the K-1 runs after it are all traced
//    (FULL_TRACE) into one timeline named after the last of them (run_metadata-<step>.pb and
//    "step_<step>" for each); a window cut short by the end of the session is written by end();
//  - files are written atomically (a temporary beside them, renamed): never half-written;
//  - a failure to write (unwritable directory, full disk) is a warning naming the path on
//    options.log.warning; after_run does not throw, so training and the other hooks go on.
//    An output_dir where no event file can be created is a warning from the constructor too.
//  - with record_step_timing, every run's step timing goes in the profile
//    (Profiler::step_timings), saved with each trace and at end();
//  - when the timer does not fire, before_run and after_run allocate nothing (the profile's
//    ring of step timings grows to its capacity, then is reused).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/train/summary_writer.h"

namespace stepscope {

struct ProfilerHookOptions {
  // Exactly one of the two.
  std::optional<int64_t> save_steps = std::nullopt;
  std::optional<double> save_secs = std::nullopt;
  // Where the files go; empty: the current directory.
  std::string output_dir = {};
  bool show_dataflow = true;
  bool show_memory = false;
  // TensorFlow pretty-prints its timelines; compact ones are smaller and faster to write.
  bool pretty = false;
  bool gzip = false;              // timeline-<step>.json.gz
  int max_files_to_keep = 0;      // >= 0; 0: keep all
  int window_steps = 1;           // >= 1: consecutive steps per timeline
  bool save_run_metadata = true;  // run_metadata-<step>.pb
  bool save_profile = true;       // <output_dir>/profile
  // Traced steps the profile keeps whole (ProfilerOptions::max_steps; 0: all). Older ones live
  // on in its per-node averages, so memory and the profile file stay bounded on long runs.
  size_t profile_max_steps = 100;
  // Every run's step timing (wall, input, ops, idle, hooks; StepTimingHook's figures) in the
  // profile too, traced or not: `stepscope prof timing`. Opt-in: it costs ~0.7 µs a run on a
  // trivial step (hooks_bench), the executor's timing and the hooks' clock readings.
  bool record_step_timing = false;
  const Clock* clock = nullptr;  // for save_secs; null: the steady clock
  // info: "Saving timeline for <step> into '<path>'."; warning: a file that could not be written.
  HookLog log = {};
};

class ProfilerHook : public SessionRunHook {
 public:
  // InvalidArgumentError: the timer's "Either every_secs or every_steps should be provided." /
  // "Can not provide both every_secs and every_steps.", "save_steps must be at least 1, given:
  // <n>", "save_secs must be a finite number of seconds >= 0, given: <x>" (the reference takes
  // any number), "window_steps must be at least 1, given: <n>", "max_files_to_keep must be >= 0,
  // given: <n>".
  explicit ProfilerHook(ProfilerHookOptions options);
  ~ProfilerHook() override;

  void begin(Graph& graph) override;
  // Without a graph the global step's read tensor is looked up in after_create_session.
  void begin() override;
  // Also tells the session that steps will be traced (Session::expect_traced_steps).
  void after_create_session(Session& session, Coordinator& coord) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  // Writes a window cut short by the end of the session.
  void end(Session& session) override;

  // The timeline path for a (post-run) global step.
  std::filesystem::path timeline_path(int64_t step) const;
  std::filesystem::path run_metadata_path(int64_t step) const;
  std::filesystem::path profile_path() const;
  // The tfprof profile of the steps traced so far (null before begin, or without save_profile).
  const Profiler* profiler() const { return profiler_.get(); }

 private:
  struct TracedStep {
    int64_t step;
    RunMetadata run_metadata;
  };
  void resolve(Graph& graph);
  void write_window();
  void forget_oldest_files();

  ProfilerHookOptions options_;
  std::shared_ptr<SummaryWriter> writer_;
  SecondOrStepTimer timer_;
  Output global_step_read_;
  Graph* graph_ = nullptr;  // for the timelines' float ops
  std::unique_ptr<Profiler> profiler_;
  uint64_t profiler_graph_id_ = 0;
  std::optional<int64_t> next_step_;
  bool request_trace_ = false;
  bool timings_unsaved_ = false;    // step timings added since the profile was last saved
  std::vector<TracedStep> window_;  // the traced runs of the current window
  // The files of each trace written, oldest first; only with max_files_to_keep (a list of
  // every file ever written would grow with the run).
  std::deque<std::vector<std::filesystem::path>> kept_;
};

}  // namespace stepscope
