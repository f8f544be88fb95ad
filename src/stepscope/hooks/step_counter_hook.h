// StepCounterHook: measures global steps per second and writes it as a summary (tag
// "<global step name>/sec", e.g. "global_step/sec") and a log line, every N steps or N seconds
// (TensorFlow 1.x's tf.train.StepCounterHook).
//
//   StepCounterHook counter({.every_n_steps = 100, .output_dir = "runs/x"});
//   StepCounterHook timed({.every_n_steps = std::nullopt, .every_n_secs = 30.0, .output_dir = "runs/x"});
//
// As in TensorFlow, every_n_steps defaults to 100, so asking for every_n_secs alone requires
// switching every_n_steps off with std::nullopt (Python's every_n_steps=None); otherwise the
// constructor throws InvalidArgumentError "exactly one of every_n_steps and every_n_secs should be
// provided.".
//
// Each run fetches the global step beside the train op (so it sees the value before the run's
// increment, the "stale" step). When the timer would fire for stale + steps_per_run, the hook
// reads the real step on the raw session and, if the timer fires for it, writes
// elapsed steps / elapsed seconds at that step (not on the first trigger, which only starts the
// clock). When the stale step equals the previous run's, it warns — the first 5 times for each
// hook — that the global step has not been increased.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"
#include "stepscope/train/summary_writer.h"

namespace stepscope {

struct StepCounterHookOptions {
  std::optional<int64_t> every_n_steps = 100;  // std::nullopt to use every_n_secs
  std::optional<double> every_n_secs = std::nullopt;
  // Used when no summary_writer is given: the cached writer of this directory (empty: no
  // summaries, only log lines).
  std::string output_dir = {};
  std::shared_ptr<SummaryWriter> summary_writer = nullptr;
  // Global steps one run() advances (TensorFlow's _set_steps_per_run, for loops that run several
  // steps per call).
  int64_t steps_per_run = 1;
  const Clock* clock = nullptr;  // null: the steady clock
  // info: "global_step/sec: 42.5"; warning: "It seems that global step ... has not been increased ...".
  HookLog log = {};
};

class StepCounterHook : public SessionRunHook {
 public:
  explicit StepCounterHook(StepCounterHookOptions options = {});

  // Gets the writer (from the cache if only output_dir was given) and the global step's read
  // tensor; FailedPreconditionError "Global step should be created to use StepCounterHook." when
  // the graph has none. The tag is the global step variable's name + "/sec".
  void begin(Graph& graph) override;
  // Without a graph the read tensor is looked up in after_create_session.
  void begin() override;
  void after_create_session(Session& session, Coordinator& coord) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

  void set_steps_per_run(int64_t steps_per_run) { options_.steps_per_run = steps_per_run; }
  const std::string& summary_tag() const { return summary_tag_; }

 private:
  void resolve(Graph& graph);

  StepCounterHookOptions options_;
  SecondOrStepTimer timer_;
  std::shared_ptr<SummaryWriter> writer_;
  Output global_step_read_;
  std::string summary_tag_;
  std::optional<int64_t> last_global_step_;
  int not_increased_warnings_ = 0;
};

}  // namespace stepscope
