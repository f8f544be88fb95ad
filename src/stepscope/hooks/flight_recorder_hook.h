// FlightRecorderHook: traces every step into a bounded ring of the last K steps and writes them
// as one timeline when something worth seeing happens — the step a user needs is the slow one,
// the one that failed, the one they are looking at now, not one every N steps:
//
//   FlightRecorderHook recorder({.output_dir = "runs/x", .slow_factor = 3});
//   // runs/x/flight-1234-slow.json: steps 1225..1234 on one time axis, written because step
//   // 1234 took 3.4x the median of the steps before it; its "metadata" says so.
//
// When it writes (each dump says why in the log line and in the file's top-level "metadata"
// object, {"stepscope_flight_recorder": {"reason", "detail", "steps", ...}}, which Perfetto and
// catapult show as the trace's metadata):
//  - slow: a step took longer than slow_step_secs, or slow_factor times the running median of the
//    last median_window steps (once min_steps_for_median have run, and when it took at least
//    min_slow_step_secs);
//  - error: a run raised (a kernel's error, CheckNumerics, NanTensorHook's "NaN loss during
//    training.", any other hook's): SessionRunHook::on_run_error, before the error propagates;
//    the failing step's partial trace is included (the executor finishes a trace before it
//    rethrows). The end of the input (OutOfRangeError) is not an error;
//  - signal: SIGUSR1 (with dump_on_sigusr1: the hook installs a handler that only sets a flag,
//    and restores the previous one when destroyed);
//  - file: a file named trigger_file_name appears in output_dir (looked for at most every
//    trigger_poll_secs; it is deleted once the dump is written).
// At most max_dumps_per_hour dumps in any hour: a run that is always slow does not fill the disk
// (the dumps it skips are counted and the next written one says how many).
//
// The ring holds at most max_steps steps and max_bytes of step statistics (the oldest steps are
// dropped first; the newest is always kept); its slots are reused, so after the first K steps a
// step costs a copy into memory that is already there. Files are written atomically, named
// flight-<step>-<reason>.json[.gz]; a write that fails is a warning, training goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"

namespace stepscope {

struct FlightRecorderOptions {
  std::string output_dir = {};          // empty: the current directory
  size_t max_steps = 10;                // >= 1: steps in the ring (and in each dump)
  size_t max_bytes = size_t{64} << 20;  // of step statistics held; the newest step is always kept
  // Slow steps: either threshold (0 turns it off).
  double slow_step_secs = 0;
  double slow_factor = 3.0;          // times the running median
  size_t median_window = 100;        // steps the median is taken over
  size_t min_steps_for_median = 20;  // no "slow" verdict by factor before this many steps
  // Nor for a step shorter than this: sub-millisecond steps jitter by several times their length
  // (a summary or checkpoint run, a page fault) and that is no news.
  double min_slow_step_secs = 0.005;
  bool dump_on_error = true;
  bool dump_on_sigusr1 = true;
  std::string trigger_file_name = "DUMP_FLIGHT_RECORDER";  // empty: no trigger file
  double trigger_poll_secs = 1.0;
  int max_dumps_per_hour = 6;  // >= 1
  bool show_memory = false;
  bool show_dataflow = true;
  bool gzip = false;
  // Null: a step's time is the executor's (RunMetadata::step_timing: the hooks' own work, such as
  // ProfilerHook writing its files, is not the step's), the rate limit on the steady clock.
  // Given (tests): that clock, from before_run to after_run, for both.
  const Clock* clock = nullptr;
  // info: "FlightRecorder: <why>: wrote <path> (steps a..b)"; warning: a write that failed.
  HookLog log = {};
};

class FlightRecorderHook : public SessionRunHook {
 public:
  // InvalidArgumentError naming the option for max_steps 0, a negative or NaN threshold,
  // max_dumps_per_hour < 1.
  explicit FlightRecorderHook(FlightRecorderOptions options);
  ~FlightRecorderHook() override;
  FlightRecorderHook(const FlightRecorderHook&) = delete;
  FlightRecorderHook& operator=(const FlightRecorderHook&) = delete;

  void begin(Graph& graph) override;
  // Every step is traced: the session makes what a first traced step writes ahead.
  void after_create_session(Session& session, Coordinator& coord) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void on_run_error(SessionRunContext& run_context, const SessionRunValues& run_values,
                    const std::exception& error) override;

  // Writes the ring now (as SIGUSR1 would), with `reason`; the path written, or nothing when the
  // ring is empty, the rate limit refused or the write failed.
  std::optional<std::filesystem::path> dump(const std::string& reason, const std::string& detail = "");

  // The steps the ring holds, oldest first, and the bytes of statistics they take (what
  // max_bytes caps: each step as it was recorded).
  std::vector<int64_t> recorded_steps() const;
  size_t recorded_bytes() const { return bytes_; }
  // The memory the ring's slots and its spare ones take: their arrays' room. About
  // recorded_bytes() between dumps, a dump's reading of the steps included (it frees the node
  // entries it made of them).
  size_t held_memory_bytes() const;
  // Dumps refused by the rate limit so far.
  int64_t skipped_dumps() const { return skipped_dumps_; }

 private:
  struct Slot {
    int64_t step = 0;
    double secs = 0;  // the run's wall time
    RunMetadata run_metadata;
    size_t bytes = 0;
  };
  void record(const RunMetadata* metadata, int64_t step, double secs);
  std::optional<std::string> slow_verdict(double secs);
  bool poll_trigger_file();

  FlightRecorderOptions options_;
  const Clock* clock_;
  const Graph* graph_ = nullptr;
  Output global_step_read_;  // null without a global step: steps are numbered by run
  std::deque<Slot> ring_;
  std::vector<Slot> spare_;  // slots dropped from the ring, reused (their buffers stay allocated)
  size_t bytes_ = 0;
  int64_t runs_ = 0;  // runs seen since begin: the step number of the next one
  double run_start_ = 0;
  bool recorded_current_ = false;
  std::deque<double> recent_secs_;  // the last median_window step times
  std::vector<double> median_scratch_;
  std::deque<double> dump_times_;  // within the last hour
  int64_t skipped_dumps_ = 0;
  double next_trigger_poll_ = 0;
  bool signal_installed_ = false;
};

}  // namespace stepscope
