// StepTimingHook: every step's time, cheaply, as TensorBoard scalars — "step time over the run"
// and "input-bound or compute-bound" in one look, for every step, not only traced ones:
//
//   StepTimingHook timing({.output_dir = "runs/x"});
//   // runs/x/events.out.tfevents.*: step_time/wall_ms, step_time/input_ms, step_time/ops_ms,
//   // step_time/idle_ms, step_time/hooks_ms at every step (`stepscope serve` charts them)
//
// What each is (RunMetadata::step_timing: the hook asks the executor for it on every run, which
// costs a few clock readings a step, ~0.2-0.5 µs):
//  - wall_ms: the step itself, Session::run's executor start to finish (the hooks' own work,
//    such as ProfilerHook writing its files, is in hooks_ms, not here);
//  - input_ms: in the input pipeline's ops (IteratorGetNext: waiting for the next batch);
//  - ops_ms: the executor's threads running nodes, summed over the threads (above wall_ms when
//    ops ran in parallel);
//  - idle_ms: no thread running a node while the step was unfinished (dispatch, wake-ups);
//  - hooks_ms: the hooks' own time (their before_run for this step, after_run for the previous).
// Steps are numbered by the global step when the graph has one (the value after the run's
// increment, as the other hooks name files), else by run. every_n_steps > 1 writes every n-th.
// The summary writer is the shared one of output_dir (SummaryWriterCache); a directory where no
// event file can be made is a warning, and training goes on without the scalars.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"

namespace stepscope {

class SummaryWriter;

struct StepTimingOptions {
  std::string output_dir = {};
  int64_t every_n_steps = 1;  // >= 1
  std::string tag_prefix = "step_time/";
  HookLog log = {};
};

class StepTimingHook : public SessionRunHook {
 public:
  // InvalidArgumentError for every_n_steps < 1.
  explicit StepTimingHook(StepTimingOptions options);
  ~StepTimingHook() override;

  void begin(Graph& graph) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

 private:
  StepTimingOptions options_;
  std::shared_ptr<SummaryWriter> writer_;
  Output global_step_read_;
  int64_t runs_ = 0;
};

}  // namespace stepscope
