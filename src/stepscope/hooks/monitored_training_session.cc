#include "stepscope/hooks/monitored_training_session.h"

#include "stepscope/hooks/checkpoint_saver_hook.h"
#include "stepscope/hooks/step_counter_hook.h"
#include "stepscope/hooks/summary_saver_hook.h"

namespace stepscope {

namespace {

// nullopt (USE_DEFAULT) resolution of a (steps, secs) pair: both unset -> the given default,
// one set -> the other off.
template <typename Steps, typename Secs>
void resolve_defaults(std::optional<Steps>& steps, std::optional<Secs>& secs, std::optional<Steps> default_steps,
                      std::optional<Secs> default_secs) {
  if (!steps && !secs) {
    steps = default_steps;
    secs = default_secs;
  }
  // Off (TF's None) is <= 0 here; the hooks' timers take it as "not given".
  if (steps && *steps <= 0) steps.reset();
  if (secs && *secs <= 0) secs.reset();
}

}  // namespace

MonitoredSession MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options) {
  MonitoredTrainingSessionOptions& o = options;
  resolve_defaults<int64_t, double>(o.save_summaries_steps, o.save_summaries_secs, int64_t{100}, std::nullopt);
  resolve_defaults<int64_t, double>(o.save_checkpoint_steps, o.save_checkpoint_secs, std::nullopt, 600.0);

  if (!o.is_chief) {
    std::unique_ptr<SessionCreator> creator;
    if (dist::size() > 1) {
      // Another process: nobody else initializes this one's variables (see the header).
      creator = std::make_unique<ChiefSessionCreator>(
          graph, ChiefSessionCreatorOptions{.scaffold = o.scaffold, .session_options = o.session_options});
    } else {
      creator = std::make_unique<WorkerSessionCreator>(
          graph, WorkerSessionCreatorOptions{.scaffold = o.scaffold, .session_options = o.session_options});
    }
    return MonitoredSession(std::move(creator), std::move(o.hooks), o.stop_grace_period_secs,
                            /*should_recover=*/true, {});
  }

  auto creator = std::make_unique<ChiefSessionCreator>(
      graph, ChiefSessionCreatorOptions{
                 .scaffold = o.scaffold,
                 .checkpoint_dir = o.checkpoint_dir,
                 .session_options = o.session_options,
                 .fall_back_to_older_checkpoint = o.fall_back_to_older_checkpoint});
  Scaffold* scaffold = &creator->scaffold();

  std::vector<SessionRunHook*> all_hooks = o.chief_only_hooks;
  std::vector<std::unique_ptr<SessionRunHook>> owned;
  auto own = [&](std::unique_ptr<SessionRunHook> hook) {
    all_hooks.push_back(hook.get());
    owned.push_back(std::move(hook));
  };
  const std::string summary_dir = o.summary_dir.empty() ? o.checkpoint_dir : o.summary_dir;
  if (!summary_dir.empty()) {
    if (o.log_step_count_steps > 0) {
      StepCounterHookOptions counter;
      counter.every_n_steps = o.log_step_count_steps;
      counter.output_dir = summary_dir;
      counter.clock = o.clock;
      own(std::make_unique<StepCounterHook>(std::move(counter)));
    }
    if (o.save_summaries_steps || o.save_summaries_secs) {
      SummarySaverHookOptions summaries;
      summaries.save_steps = o.save_summaries_steps;
      summaries.save_secs = o.save_summaries_secs;
      summaries.output_dir = summary_dir;
      summaries.scaffold = scaffold;
      summaries.clock = o.clock;
      own(std::make_unique<SummarySaverHook>(std::move(summaries)));
    }
  }
  if (!o.checkpoint_dir.empty() && (o.save_checkpoint_steps || o.save_checkpoint_secs)) {
    CheckpointSaverOptions checkpoints;
    checkpoints.checkpoint_dir = o.checkpoint_dir;
    checkpoints.save_secs = o.save_checkpoint_secs;
    checkpoints.save_steps = o.save_checkpoint_steps;
    checkpoints.save_graph_def = o.save_graph_def;
    // Saves with the scaffold's saver, the one that restores. The hook also records each save
    // (SessionLog CHECKPOINT) in checkpoint_dir's event file.
    checkpoints.scaffold = scaffold;
    checkpoints.clock = o.clock;
    own(std::make_unique<CheckpointSaverHook>(std::move(checkpoints)));
  }
  all_hooks.insert(all_hooks.end(), o.hooks.begin(), o.hooks.end());
  return MonitoredSession(std::move(creator), std::move(all_hooks), o.stop_grace_period_secs,
                          /*should_recover=*/true, std::move(owned));
}

}  // namespace stepscope
