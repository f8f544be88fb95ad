// An Estimator in the style of TensorFlow 1.x's tf.estimator: a model function, a model
// directory, and train / evaluate / train_and_evaluate loops built on MonitoredSession and the
// standard hooks; plus the early-stopping hooks of tf.estimator.experimental.
//
//   Estimator est(model_fn, {.model_dir = "runs/mlp", .save_checkpoints_steps = 100});
//   est.train(train_input_fn, {.max_steps = 1000});      // resumes from runs/mlp's checkpoint
//   auto metrics = est.evaluate(eval_input_fn);          // {"accuracy", "loss", "global_step"}
//
//   auto stop = stop_if_no_increase_hook(est, "accuracy", 500, {.run_every_secs = std::nullopt,
//                                                               .run_every_steps = 100});
//   train_and_evaluate(est, {.input_fn = train_input_fn, .max_steps = 5000, .hooks = {stop.get()}},
//                      {.input_fn = eval_input_fn, .steps = 10, .throttle_secs = 30});
//
// Every train() and evaluate() builds a fresh Graph: the global step, then the input_fn's
// pipeline, then model_fn(features, labels, mode, scope). State lives only in model_dir's
// checkpoints, so a new Estimator on the same directory continues where the last one stopped.
//
// Differences from TensorFlow, on purpose:
//   - eval_metric_ops take, besides TF's (value, update_op) pairs (train/metrics.h), a plain
//     tensor computing a metric over ONE batch: evaluate() averages it over the batches
//     (metrics::mean of it), each batch weighing the same. "loss" is averaged that way, as TF does.
//   - Evaluation results are recorded, besides being returned, as one line per evaluation in
//     `<eval_dir>/eval_metrics.txt` ("global_step=<n> <name>=<value> ..."), which the
//     early-stopping hooks read (TF writes them to the eval directory's event files and reads
//     those). read_eval_metrics() parses it. They also go, as scalar summaries at the global
//     step, to an event file in the eval directory (for TensorBoard).
//   - No distribution: the session is always a chief's; the early-stopping hooks do not create
//     TF's "signal_early_stopping" variable (there are no workers to signal).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/hooks/checkpoint_saver_hook.h"
#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/metrics.h"

namespace stepscope {

// tf.estimator.ModeKeys (PREDICT is accepted by EstimatorSpec but no loop here uses it).
enum class ModeKeys { TRAIN, EVAL, PREDICT };

// One eval metric: a streaming (value, update_op) pair, as tf.metrics returns (evaluate() runs
// update_op on every batch and reports value at the end), or a tensor computing the metric on one
// batch (update_op null; evaluate() reports its mean over the batches).
struct EvalMetricOp {
  EvalMetricOp() = default;
  EvalMetricOp(metrics::Metric metric) : value(metric.value), update_op(metric.update_op) {}  // NOLINT
  EvalMetricOp(Output per_batch) : value(per_batch) {}                                        // NOLINT
  Output value = {};
  Output update_op = {};
};

// What a model_fn returns.
struct EstimatorSpec {
  ModeKeys mode = ModeKeys::TRAIN;
  Output loss = {};          // a scalar; required for TRAIN and EVAL
  Node* train_op = nullptr;  // required for TRAIN; must increment the global step
  // Name -> metric (see EvalMetricOp); each value a scalar. The names "loss" and "global_step"
  // are reserved.
  std::map<std::string, EvalMetricOp> eval_metric_ops = {};
  std::map<std::string, Output> predictions = {};  // optional, unused by train / evaluate
};

// What an input_fn returns: a Dataset (the Estimator makes its iterator), or the get_next()
// outputs of a pipeline the input_fn placed in the graph itself. Element component 0 is the
// features, component 1 (if any) the labels.
class Input {
 public:
  Input(const Dataset& dataset) : dataset_(dataset) {}                  // NOLINT
  Input(const NextElement& next) : outputs_(next.outputs()) {}          // NOLINT
  Input(std::vector<Output> outputs) : outputs_(std::move(outputs)) {}  // NOLINT
  Input(Output features, Output labels = {}) : outputs_({features}) {   // NOLINT
    if (labels.node != nullptr) outputs_.push_back(labels);
  }
  // The (features, labels) outputs in `scope`'s graph; labels is null when there are none.
  std::pair<Output, Output> resolve(const Scope& scope) const;

 private:
  std::optional<Dataset> dataset_;
  std::vector<Output> outputs_;
};

// Builds the input pipeline in the given scope's graph (called once per train / evaluate).
using InputFn = std::function<Input(const Scope& scope)>;
// Builds the model on the input; `scope` is the graph's root scope.
using ModelFn = std::function<EstimatorSpec(Output features, Output labels, ModeKeys mode, const Scope& scope)>;

// tf.estimator.RunConfig, the parts that matter without distribution.
struct EstimatorConfig {
  // Where checkpoints (and eval/) go. Empty: a new temporary directory (logged, as in TF).
  std::string model_dir = {};
  // At most one of the two. Neither: every 600 seconds (TF's default). Checkpoints are also
  // written when a session starts and when training ends. save_checkpoints_secs = 0 (and no
  // steps) turns checkpointing off; train_and_evaluate needs it on.
  std::optional<int64_t> save_checkpoints_steps = std::nullopt;
  std::optional<double> save_checkpoints_secs = std::nullopt;
  // Kept for TF's shape: training summaries (StepCounterHook / SummarySaverHook) are not wired
  // in yet; evaluation results are written as summaries.
  std::optional<int64_t> save_summary_steps = 100;
  int keep_checkpoint_max = 5;
  // Log "loss = ..., step = ..." every this many steps (LoggingTensorHook); nullopt: never.
  std::optional<int64_t> log_step_count_steps = 100;
  SessionOptions session_options = {};
  // Time for save_checkpoints_secs (null = the steady clock); messages go to `log`.
  const Clock* clock = nullptr;
  HookLog log = {};
};

struct TrainOptions {
  std::vector<SessionRunHook*> hooks = {};  // not owned; run after the Estimator's own hooks
  // At most one: steps to run from the current global step, or the global step to stop at.
  // Neither: until the input ends or a hook asks to stop.
  std::optional<int64_t> steps = std::nullopt;
  std::optional<int64_t> max_steps = std::nullopt;
  // Added to the checkpoint saver (which must exist: see EstimatorConfig).
  std::vector<CheckpointSaverListener*> saving_listeners = {};
};

struct EvaluateOptions {
  // Batches to evaluate; nullopt: until the input ends (it must end).
  std::optional<int64_t> steps = std::nullopt;
  std::vector<SessionRunHook*> hooks = {};  // not owned
  // The checkpoint to evaluate; empty: the latest in model_dir (none: freshly initialized
  // variables, as TF 1.15 does, with a log line).
  std::string checkpoint_path = {};
  // Results go to model_dir/eval_<name> (model_dir/eval when empty).
  std::string name = {};
};

class Estimator {
 public:
  // InvalidArgumentError for a null model_fn, both checkpoint schedules, or a bad value.
  explicit Estimator(ModelFn model_fn, EstimatorConfig config = {});

  // Trains until max_steps / steps, the end of the input, or a hook's request to stop. With
  // max_steps at or below the latest checkpoint's global step, logs "Skipping training since
  // max_steps has already saved." and does nothing. The session restores the latest checkpoint
  // in model_dir (else initializes), and saves checkpoints per the config. Hook order (as TF):
  // CheckpointSaverHook, then the user's hooks, StopAtStepHook, NanTensorHook, LoggingTensorHook.
  // InvalidArgumentError: "Can not provide both steps and max_steps.", "Must specify steps > 0,
  // given: <n>", "Must specify max_steps > 0, given: <n>", "There should be a CheckpointSaverHook
  // to use saving_listeners. ...", "Missing train_op." / "Missing loss." from a bad model_fn.
  Estimator& train(const InputFn& input_fn, TrainOptions options = {});

  // Evaluates the model: returns every eval metric's mean over the batches, "loss" and
  // "global_step" (of the checkpoint), and records them (see the header comment).
  // InvalidArgumentError "Must specify steps > 0, given: <n>"; "Missing loss."; 'Metric with name
  // "loss" is not allowed, because Estimator already defines a default metric with the same
  // name.' (and for "global_step").
  std::map<std::string, double> evaluate(const InputFn& input_fn, EvaluateOptions options = {});

  const std::string& model_dir() const { return config_.model_dir; }
  const EstimatorConfig& config() const { return config_; }
  // model_dir/eval or model_dir/eval_<name>.
  std::string eval_dir(const std::string& name = "") const;
  // The newest checkpoint's prefix in model_dir, if any.
  std::optional<std::string> latest_checkpoint() const;
  // The global step saved in the latest checkpoint (0 without one).
  int64_t global_step_from_checkpoint() const;

 private:
  ModelFn model_fn_;
  EstimatorConfig config_;
};

// tf.estimator.TrainSpec / EvalSpec.
struct TrainSpec {
  InputFn input_fn = {};
  std::optional<int64_t> max_steps = std::nullopt;  // > 0; nullopt: until the input ends
  std::vector<SessionRunHook*> hooks = {};
};

struct EvalSpec {
  InputFn input_fn = {};
  std::optional<int64_t> steps = 100;  // batches per evaluation; nullopt: the whole input
  std::string name = {};
  std::vector<SessionRunHook*> hooks = {};
  // Only used by distributed evaluators in TF; kept for its shape and validated (>= 0).
  double start_delay_secs = 120;
  // Minimum seconds between two evaluations (>= 0; 0: after every checkpoint).
  double throttle_secs = 600;
  const Clock* clock = nullptr;  // measures throttle_secs; null = the steady clock
};

// TF's local train_and_evaluate: one train(max_steps) run whose checkpoint saver has a listener
// that evaluates after each save (skipping the save made when the session starts, before any
// training), when at least throttle_secs have passed since the previous evaluation (the first
// one always runs); and once more at the end of training unless the final step was just
// evaluated. So the checkpoint frequency (EstimatorConfig) sets when evaluations can happen, and
// throttle_secs thins them. Training stops at max_steps, at the end of the train input, or when
// a train hook (e.g. an early-stopping hook) asks. Returns the last evaluation's metrics
// (nullopt when training was skipped because max_steps was already reached).
// InvalidArgumentError: a missing input_fn, "Must specify max_steps > 0, given: <n>", "Must
// specify steps > 0, given: <n>", "Must specify start_delay_secs >= 0, given: <x>", "Must specify
// throttle_secs >= 0, given: <x>", and checkpointing turned off.
std::optional<std::map<std::string, double>> train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                                                const EvalSpec& eval_spec);

// ---------------------------------------------------------------------------------------------
// Early stopping (tf.estimator.experimental).

// Every evaluation recorded in eval_dir, by global step (a later record of the same step
// updates it). Empty when there is none. DataLossError naming the file for a malformed line.
std::map<int64_t, std::map<std::string, double>> read_eval_metrics(const std::string& eval_dir);

struct EarlyStoppingOptions {
  std::string eval_dir = {};  // empty: estimator.eval_dir()
  // Evaluations before this global step are ignored.
  int64_t min_steps = 0;
  // How often the condition is checked: exactly one (TF's defaults: every 60 seconds; to check
  // every N steps set run_every_secs = std::nullopt as well).
  std::optional<double> run_every_secs = 60;
  std::optional<int64_t> run_every_steps = std::nullopt;
  const Clock* clock = nullptr;
  HookLog log = {};
};

// A hook that calls should_stop_fn (on the global step fetched beside the train op, i.e. before
// that step's increment) whenever its timer fires, and requests stop when it returns true.
// InvalidArgumentError "Only one of `run_every_secs` and `run_every_steps` can be set." and the
// timer's errors; a null function: "`should_stop_fn` must be callable.".
std::unique_ptr<SessionRunHook> make_early_stopping_hook(const Estimator& estimator,
                                                         std::function<bool()> should_stop_fn,
                                                         std::optional<double> run_every_secs = 60,
                                                         std::optional<int64_t> run_every_steps = std::nullopt,
                                                         const Clock* clock = nullptr, HookLog log = {});

// Stops when, scanning the recorded evaluations in step order (from min_steps on), some
// evaluation comes max_steps_without_increase or more global steps after the best value so far
// (the first of equal values counts: a flat metric does not count as an increase). The metric
// missing from an evaluation is InvalidArgumentError naming it; max_steps_without_increase < 0
// and an empty metric_name are InvalidArgumentError.
std::unique_ptr<SessionRunHook> stop_if_no_increase_hook(const Estimator& estimator, const std::string& metric_name,
                                                         int64_t max_steps_without_increase,
                                                         EarlyStoppingOptions options = {});
std::unique_ptr<SessionRunHook> stop_if_no_decrease_hook(const Estimator& estimator, const std::string& metric_name,
                                                         int64_t max_steps_without_decrease,
                                                         EarlyStoppingOptions options = {});
// Stops as soon as a recorded evaluation (from min_steps on) has the metric strictly above /
// below the threshold.
std::unique_ptr<SessionRunHook> stop_if_higher_hook(const Estimator& estimator, const std::string& metric_name,
                                                    double threshold, EarlyStoppingOptions options = {});
std::unique_ptr<SessionRunHook> stop_if_lower_hook(const Estimator& estimator, const std::string& metric_name,
                                                   double threshold, EarlyStoppingOptions options = {});

}  // namespace stepscope
