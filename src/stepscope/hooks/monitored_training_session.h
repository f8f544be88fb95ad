// MonitoredTrainingSession: a MonitoredSession set up for training (TensorFlow's
// tf.train.MonitoredTrainingSession). The chief initializes or restores the model from
// checkpoint_dir and gets the standard hooks: a step counter, a summary saver and a checkpoint
// saver, writing into checkpoint_dir (summaries into summary_dir when given).
//
//   StopAtStepHook stop({.last_step = 2000});
//   auto sess = MonitoredTrainingSession(g, {.checkpoint_dir = "runs/digits", .hooks = {&stop}});
//   while (!sess.should_stop()) sess.run(train);
//
// Hooks, in the order they are called on the chief: chief_only_hooks; then, when summary_dir or
// checkpoint_dir is set, StepCounterHook(every_n_steps = log_step_count_steps) when that is > 0
// and SummarySaverHook(scaffold, steps/secs) when either is > 0; then, when checkpoint_dir is
// set, CheckpointSaverHook(checkpoint_dir, steps/secs, scaffold) when either is > 0; then
// `hooks`. The default hooks are owned by the returned session; the others
// are not (they must outlive it). A non-chief gets a WorkerSessionCreator, `hooks` only (no
// defaults, chief_only_hooks ignored).
//
// Data-parallel jobs (stepscope/dist): is_chief defaults to rank 0 (dist::rank() == 0, so true in
// one process), as Horovod users passed checkpoint_dir on rank 0 only: checkpoints, summaries and
// the step counter on the chief only. A non-chief of a job of several processes initializes its
// own variables (its session shares none with the chief's, unlike TensorFlow's workers); a
// BroadcastGlobalVariablesHook then gives every rank the chief's values, restored ones included.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/dist/mpi.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/timer.h"

namespace stepscope {

// The save_* fields express TensorFlow's three states: std::nullopt is USE_DEFAULT, a value <= 0
// is off (TensorFlow's None), a positive value is an explicit interval. Defaults, as in the
// reference: checkpoints every 600 s when neither save_checkpoint_* is given; summaries every
// 100 steps when neither save_summaries_* is given; when only one of a pair is given, the other
// is off. E.g. {.save_checkpoint_steps = 1000} saves every 1000 steps and never on time;
// {.save_checkpoint_secs = 0} saves no checkpoints at all.
struct MonitoredTrainingSessionOptions {
  bool is_chief = dist::rank() == 0;  // rank 0 of a data-parallel job; true in one process
  std::string checkpoint_dir = {};  // restore from / save to; empty: no checkpoints
  // Restore the newest intact checkpoint when the newest one is corrupt, reporting each file
  // skipped (ChiefSessionCreatorOptions::fall_back_to_older_checkpoint); off: the error is thrown.
  bool fall_back_to_older_checkpoint = false;
  Scaffold* scaffold = nullptr;     // null: a default Scaffold owned by the session
  std::vector<SessionRunHook*> hooks = {};
  std::vector<SessionRunHook*> chief_only_hooks = {};
  std::optional<double> save_checkpoint_secs = std::nullopt;
  std::optional<int64_t> save_checkpoint_steps = std::nullopt;
  std::optional<int64_t> save_summaries_steps = std::nullopt;
  std::optional<double> save_summaries_secs = std::nullopt;
  int64_t log_step_count_steps = 100;  // <= 0: no StepCounterHook
  std::string summary_dir = {};        // empty: checkpoint_dir
  // TensorFlow's save_graph_def: the CheckpointSaverHook writes graph.pbtxt, a `.meta` beside each
  // checkpoint and the graph events (CheckpointSaverOptions::save_graph_def).
  bool save_graph_def = true;
  double stop_grace_period_secs = 120;
  SessionOptions session_options = {};
  const Clock* clock = nullptr;  // for the default hooks' time-based triggers; null = steady clock
};

// Builds the session (running every hook's begin(graph), creating the session, and calling
// after_create_session) and returns it. Errors from the default hooks' validation (e.g. both
// save_summaries_steps and save_summaries_secs positive) are thrown from here.
MonitoredSession MonitoredTrainingSession(Graph& graph, MonitoredTrainingSessionOptions options = {});

}  // namespace stepscope
