#include "stepscope/hooks/step_timing_hook.h"

#include "stepscope/base/error.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"

namespace stepscope {

StepTimingHook::StepTimingHook(StepTimingOptions options) : options_(std::move(options)) {
  if (options_.every_n_steps < 1)
    throw InvalidArgumentError("StepTimingHook: every_n_steps must be at least 1, given: " +
                               std::to_string(options_.every_n_steps));
  try {
    writer_ = SummaryWriterCache::get(options_.output_dir);
  } catch (const Error& e) {
    options_.log.log_warning("StepTimingHook: no summary writer for '" + options_.output_dir + "': " + e.what());
  }
}

StepTimingHook::~StepTimingHook() = default;

void StepTimingHook::begin(Graph& graph) {
  global_step_read_ = get_global_step(graph) ? get_or_create_global_step_read(graph) : Output{};
  runs_ = 0;
}

std::optional<SessionRunArgs> StepTimingHook::before_run(SessionRunContext&) {
  SessionRunArgs args;
  args.options.emplace();
  args.options->collect_step_timing = true;
  if (global_step_read_) args.fetches = global_step_read_;
  return args;
}

void StepTimingHook::after_run(SessionRunContext&, const SessionRunValues& run_values) {
  ++runs_;
  const int64_t step =
      global_step_read_ && !run_values.results.empty() ? global_step_value(run_values.results.tensor()) + 1 : runs_;
  if (!writer_ || !run_values.run_metadata || step % options_.every_n_steps != 0) return;
  const StepTiming& t = run_values.run_metadata->step_timing;
  const std::string& p = options_.tag_prefix;
  auto ms = [](int64_t ns) { return static_cast<float>(static_cast<double>(ns) / 1e6); };
  try {
    writer_->add_scalars({{p + "wall_ms", ms(t.wall_ns)},
                          {p + "input_ms", ms(t.input_ns)},
                          {p + "ops_ms", ms(t.busy_ns)},
                          {p + "idle_ms", ms(t.idle_ns)},
                          {p + "hooks_ms", ms(run_values.hooks_ns)}},
                         step);
  } catch (const Error& e) {
    options_.log.log_warning(std::string("StepTimingHook: could not write the step's scalars: ") + e.what());
  }
}

void StepTimingHook::end(Session&) {
  if (!writer_) return;
  try {
    writer_->flush();
  } catch (const Error& e) {
    options_.log.log_warning(std::string("StepTimingHook: ") + e.what());
  }
}

}  // namespace stepscope
