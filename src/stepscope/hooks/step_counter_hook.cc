#include "stepscope/hooks/step_counter_hook.h"

#include <cstdio>

#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

StepCounterHookOptions validated(StepCounterHookOptions options) {
  if (options.every_n_steps.has_value() == options.every_n_secs.has_value())
    throw InvalidArgumentError("exactly one of every_n_steps and every_n_secs should be provided.");
  return options;
}

}  // namespace

StepCounterHook::StepCounterHook(StepCounterHookOptions options)
    : options_(validated(std::move(options))),
      timer_(options_.every_n_secs, options_.every_n_steps, options_.clock, "every_n_secs", "every_n_steps"),
      writer_(options_.summary_writer) {}

void StepCounterHook::begin() {
  if (!writer_ && !options_.output_dir.empty()) writer_ = SummaryWriterCache::get(options_.output_dir);
  global_step_read_ = Output{};
}

void StepCounterHook::begin(Graph& graph) {
  begin();
  resolve(graph);
}

void StepCounterHook::after_create_session(Session& session, Coordinator&) {
  if (!global_step_read_) resolve(session.graph());
}

void StepCounterHook::resolve(Graph& graph) {
  Variable step = get_global_step(graph);
  if (!step) throw FailedPreconditionError("Global step should be created to use StepCounterHook.");
  global_step_read_ = get_or_create_global_step_read(graph);
  summary_tag_ = step.name() + "/sec";
}

std::optional<SessionRunArgs> StepCounterHook::before_run(SessionRunContext&) {
  SessionRunArgs args;
  args.fetches = global_step_read_;
  return args;
}

void StepCounterHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  const int64_t stale_global_step = global_step_value(run_values.results.tensor());
  if (timer_.should_trigger_for_step(stale_global_step + options_.steps_per_run)) {
    // The real value after the train op.
    const int64_t global_step = global_step_value(run_context.session().run(global_step_read_));
    if (timer_.should_trigger_for_step(global_step)) {
      if (auto elapsed = timer_.update_last_triggered_step(global_step)) {
        const auto [elapsed_time, elapsed_steps] = *elapsed;
        const double steps_per_sec = static_cast<double>(elapsed_steps) / elapsed_time;
        if (writer_) writer_->add_scalar(summary_tag_, static_cast<float>(steps_per_sec), global_step);
        char value[32];
        std::snprintf(value, sizeof(value), "%g", steps_per_sec);
        options_.log.log_info(summary_tag_ + ": " + value);
      }
    }
  }
  // The stale step is compared with the previous run's rather than with the timer's last step,
  // which may have been recorded from a re-read value.
  if (last_global_step_ && stale_global_step == *last_global_step_ && not_increased_warnings_ < 5) {
    // Some optimizers (e.g. synchronous replicas on workers) do not increase it on every run by
    // design, hence only the first few times.
    ++not_increased_warnings_;
    options_.log.log_warning(
        "It seems that global step (get_global_step) has not been increased. Current value (could be "
        "stable): " +
        std::to_string(stale_global_step) + " vs previous value: " + std::to_string(*last_global_step_) +
        ". You could increase the global step by passing get_global_step() to "
        "Optimizer::apply_gradients or Optimizer::minimize.");
  }
  last_global_step_ = stale_global_step;
}

}  // namespace stepscope
