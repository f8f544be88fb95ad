#include "stepscope/hooks/estimator.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stepscope/base/error.h"
#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/scaffold.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

constexpr const char* kEvalMetricsFile = "eval_metrics.txt";
constexpr const char* kLossKey = "loss";
constexpr const char* kGlobalStepKey = "global_step";

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// "%g"-like text for messages ("0.5", "600").
std::string short_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

double scalar_as_double(const Tensor& t, const std::string& what) {
  if (!t.initialized() || t.num_elements() != 1)
    throw InvalidArgumentError(what + " must be a scalar, got shape " + t.shape().to_string());
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.scalar_value<float>();
    case DType::kFloat64:
      return t.scalar_value<double>();
    case DType::kInt32:
      return t.scalar_value<int32_t>();
    case DType::kInt64:
      return static_cast<double>(t.scalar_value<int64_t>());
    case DType::kBool:
      return t.scalar_value<bool>() ? 1.0 : 0.0;
    default:
      throw InvalidArgumentError(what + " must be numeric");
  }
}

void check_hooks(const std::vector<SessionRunHook*>& hooks, const std::string& what) {
  for (size_t i = 0; i < hooks.size(); ++i)
    if (hooks[i] == nullptr) throw InvalidArgumentError(what + "[" + std::to_string(i) + "] is null.");
}

// Stops evaluation after `num_evals` batches (TF's _StopAfterNEvalsHook; counted locally
// instead of in an eval_step variable, since each evaluation has its own session).
class StopAfterNEvalsHook : public SessionRunHook {
 public:
  explicit StopAfterNEvalsHook(int64_t num_evals) : num_evals_(num_evals) {}
  void after_run(SessionRunContext& run_context, const SessionRunValues&) override {
    if (++evals_completed_ >= num_evals_) run_context.request_stop();
  }

 private:
  int64_t num_evals_;
  int64_t evals_completed_ = 0;
};

// Checks what a model_fn returned for `mode` (TF's EstimatorSpec validation).
void validate_spec(const EstimatorSpec& spec, ModeKeys mode, const Graph& graph) {
  if (mode != ModeKeys::PREDICT && !spec.loss) throw InvalidArgumentError("Missing loss.");
  if (mode == ModeKeys::TRAIN && spec.train_op == nullptr) throw InvalidArgumentError("Missing train_op.");
  auto check_graph = [&](const Output& o, const std::string& what) {
    if (o && o.graph() != &graph)
      throw InvalidArgumentError(what + " must be from the default graph (the one model_fn was given).");
  };
  check_graph(spec.loss, "loss");
  if (spec.train_op != nullptr && &spec.train_op->graph() != &graph)
    throw InvalidArgumentError("train_op must be from the default graph (the one model_fn was given).");
  if (spec.loss && spec.loss.shape().fully_defined() && spec.loss.shape().num_elements() != 1)
    throw InvalidArgumentError("Loss must be scalar, given: " + spec.loss.shape().to_string());
  if (mode == ModeKeys::EVAL) {
    for (const auto& [name, metric] : spec.eval_metric_ops) {
      if (name == kLossKey || name == kGlobalStepKey)
        throw InvalidArgumentError("Metric with name \"" + name +
                                   "\" is not allowed, because Estimator already defines a default metric with the "
                                   "same name.");
      if (name.empty() || name.find_first_of(" \t\n=") != std::string::npos)
        throw InvalidArgumentError("Metric name \"" + name + "\" must be non-empty, without spaces or '='.");
      if (!metric.value) throw InvalidArgumentError("eval_metric_ops[\"" + name + "\"] is a null tensor.");
      check_graph(metric.value, "eval_metric_ops[\"" + name + "\"]");
      check_graph(metric.update_op, "eval_metric_ops[\"" + name + "\"].update_op");
    }
  }
}

void append_eval_record(const std::string& eval_dir, const std::map<std::string, double>& metrics) {
  std::filesystem::create_directories(eval_dir);
  const std::string path = (std::filesystem::path(eval_dir) / kEvalMetricsFile).string();
  std::ofstream out(path, std::ios::app);
  if (!out) throw PermissionDeniedError("Cannot write evaluation results to " + path);
  out << kGlobalStepKey << "=" << static_cast<int64_t>(metrics.at(kGlobalStepKey));
  for (const auto& [name, value] : metrics)
    if (name != kGlobalStepKey) out << " " << name << "=" << fmt_double(value);
  out << "\n";
  if (!out.flush()) throw PermissionDeniedError("Cannot write evaluation results to " + path);
}

}  // namespace

std::pair<Output, Output> Input::resolve(const Scope& scope) const {
  std::vector<Output> outputs = outputs_;
  if (dataset_) outputs = dataset_->make_iterator(scope).get_next().outputs();
  if (outputs.empty() || outputs.size() > 2)
    throw InvalidArgumentError("input_fn must give features or (features, labels), got " +
                               std::to_string(outputs.size()) + " tensors.");
  for (const Output& o : outputs)
    if (!o || o.graph() != &scope.graph())
      throw InvalidArgumentError("input_fn must build its tensors in the graph it is given.");
  return {outputs[0], outputs.size() > 1 ? outputs[1] : Output{}};
}

// ---------------------------------------------------------------------------------------------

Estimator::Estimator(ModelFn model_fn, EstimatorConfig config)
    : model_fn_(std::move(model_fn)), config_(std::move(config)) {
  if (!model_fn_) throw InvalidArgumentError("model_fn must be provided to Estimator.");
  if (config_.save_checkpoints_steps && config_.save_checkpoints_secs)
    throw InvalidArgumentError("`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
  if (config_.save_checkpoints_steps && *config_.save_checkpoints_steps <= 0)
    throw InvalidArgumentError("save_checkpoints_steps must be > 0, given: " +
                               std::to_string(*config_.save_checkpoints_steps));
  if (config_.save_checkpoints_secs && *config_.save_checkpoints_secs < 0)
    throw InvalidArgumentError("save_checkpoints_secs must be >= 0, given: " +
                               short_double(*config_.save_checkpoints_secs));
  if (!config_.save_checkpoints_steps && !config_.save_checkpoints_secs) config_.save_checkpoints_secs = 600;
  if (config_.log_step_count_steps && *config_.log_step_count_steps <= 0)
    throw InvalidArgumentError("log_step_count_steps must be > 0, given: " +
                               std::to_string(*config_.log_step_count_steps));
  if (config_.keep_checkpoint_max < 0)
    throw InvalidArgumentError("keep_checkpoint_max must be >= 0, given: " +
                               std::to_string(config_.keep_checkpoint_max));
  if (config_.model_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "stepscope-estimator-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw InternalError("Cannot create a temporary model directory.");
    config_.model_dir = tmpl;
    config_.log.log_warning("Using temporary folder as model directory: " + tmpl);
  }
}

std::string Estimator::eval_dir(const std::string& name) const {
  return (std::filesystem::path(config_.model_dir) / (name.empty() ? "eval" : "eval_" + name)).string();
}

std::optional<std::string> Estimator::latest_checkpoint() const {
  return stepscope::latest_checkpoint(config_.model_dir);
}

int64_t Estimator::global_step_from_checkpoint() const {
  const auto latest = latest_checkpoint();
  if (!latest) return 0;
  const SafetensorsFile file = load_checkpoint(*latest);
  const Tensor* step = file.find(kGlobalStepKey);
  return step == nullptr ? 0 : global_step_value(*step);
}

Estimator& Estimator::train(const InputFn& input_fn, TrainOptions options) {
  if (!input_fn) throw InvalidArgumentError("input_fn must be provided.");
  if (options.steps && options.max_steps) throw InvalidArgumentError("Can not provide both steps and max_steps.");
  if (options.steps && *options.steps <= 0)
    throw InvalidArgumentError("Must specify steps > 0, given: " + std::to_string(*options.steps));
  if (options.max_steps && *options.max_steps <= 0)
    throw InvalidArgumentError("Must specify max_steps > 0, given: " + std::to_string(*options.max_steps));
  check_hooks(options.hooks, "hooks");
  for (size_t i = 0; i < options.saving_listeners.size(); ++i)
    if (options.saving_listeners[i] == nullptr)
      throw InvalidArgumentError("saving_listeners[" + std::to_string(i) + "] is null.");
  const bool checkpointing = config_.save_checkpoints_steps || config_.save_checkpoints_secs.value_or(0) > 0;
  if (!options.saving_listeners.empty() && !checkpointing)
    throw InvalidArgumentError(
        "There should be a CheckpointSaverHook to use saving_listeners. Please set one of the "
        "RunConfig.save_checkpoints_steps or RunConfig.save_checkpoints_secs.");
  if (options.max_steps && *options.max_steps <= global_step_from_checkpoint()) {
    config_.log.log_info("Skipping training since max_steps has already saved.");
    return *this;
  }

  Graph graph;
  Scope root(graph);
  Variable global_step = get_or_create_global_step(root);
  get_or_create_global_step_read(graph);
  auto [features, labels] = input_fn(root).resolve(root);
  const EstimatorSpec spec = model_fn_(features, labels, ModeKeys::TRAIN, root);
  validate_spec(spec, ModeKeys::TRAIN, graph);

  Saver saver(graph, {.max_to_keep = config_.keep_checkpoint_max});
  Scaffold scaffold(graph, {.saver = &saver});
  std::vector<std::unique_ptr<SessionRunHook>> owned;
  std::vector<SessionRunHook*> hooks;
  if (checkpointing) {
    owned.push_back(std::make_unique<CheckpointSaverHook>(CheckpointSaverOptions{
        .checkpoint_dir = config_.model_dir,
        .save_secs = config_.save_checkpoints_steps ? std::nullopt : config_.save_checkpoints_secs,
        .save_steps = config_.save_checkpoints_steps,
        .saver = &saver,
        .listeners = options.saving_listeners,
        .clock = config_.clock,
        .log = config_.log}));
    hooks.push_back(owned.back().get());
  }
  hooks.insert(hooks.end(), options.hooks.begin(), options.hooks.end());
  if (options.steps || options.max_steps) {
    owned.push_back(std::make_unique<StopAtStepHook>(
        StopAtStepOptions{.num_steps = options.steps, .last_step = options.max_steps}));
    hooks.push_back(owned.back().get());
  }
  owned.push_back(std::make_unique<NanTensorHook>(NanTensorOptions{.loss_tensor = spec.loss, .log = config_.log}));
  hooks.push_back(owned.back().get());
  if (config_.log_step_count_steps) {
    owned.push_back(std::make_unique<LoggingTensorHook>(LoggingTensorOptions{
        .tensors = std::map<std::string, Output>{{"loss", spec.loss}, {"step", global_step.value()}},
        .every_n_iter = config_.log_step_count_steps,
        .clock = config_.clock,
        .log = config_.log}));
    hooks.push_back(owned.back().get());
  }

  MonitoredSession session(std::make_unique<ChiefSessionCreator>(
                               graph, ChiefSessionCreatorOptions{.scaffold = &scaffold,
                                                                 .checkpoint_dir = config_.model_dir,
                                                                 .session_options = config_.session_options}),
                           hooks);
  bool any_step_done = false;
  double loss = NAN;
  const Fetch fetches = Fetch::list({spec.train_op, spec.loss});
  while (!session.should_stop()) {
    const FetchResult result = session.run(fetches);
    if (result.empty()) continue;  // the input ended
    loss = scalar_as_double(result[1].tensor(), "loss");
    any_step_done = true;
  }
  session.close();
  if (!any_step_done)
    config_.log.log_warning("Training with estimator made no steps. Perhaps input is empty or misspecified.");
  else
    config_.log.log_info("Loss for final step: " + short_double(loss) + ".");
  return *this;
}

std::map<std::string, double> Estimator::evaluate(const InputFn& input_fn, EvaluateOptions options) {
  if (!input_fn) throw InvalidArgumentError("input_fn must be provided.");
  if (options.steps && *options.steps <= 0)
    throw InvalidArgumentError("Must specify steps > 0, given: " + std::to_string(*options.steps));
  check_hooks(options.hooks, "hooks");
  std::string checkpoint_path = options.checkpoint_path;
  if (checkpoint_path.empty()) {
    checkpoint_path = latest_checkpoint().value_or("");
    if (checkpoint_path.empty())
      config_.log.log_info("Could not find trained model in model_dir: " + config_.model_dir +
                           ", running initialization to evaluate.");
  }

  Graph graph;
  Scope root(graph);
  Variable global_step = get_or_create_global_step(root);
  auto [features, labels] = input_fn(root).resolve(root);
  const EstimatorSpec spec = model_fn_(features, labels, ModeKeys::EVAL, root);
  validate_spec(spec, ModeKeys::EVAL, graph);

  // Every metric streams: a per-batch tensor (and the loss) is averaged by a metrics::mean.
  Scope metric_scope = root.with_name_scope("metrics");
  std::vector<std::string> names = {kLossKey};
  std::vector<metrics::Metric> streams = {metrics::mean(metric_scope, spec.loss, {}, kLossKey)};
  // A per-batch value that does not read the input (a constant, the global step) would still be
  // counted in the run where the input ends, if its update ran before the end was seen (the
  // executor runs what does not depend on the failed op): every value waits for the batch.
  Node* batch = labels ? labels.node : features.node;
  const Scope after_batch = batch ? metric_scope.with_control_dependencies({batch}) : metric_scope;
  for (const auto& [name, metric] : spec.eval_metric_ops) {
    names.push_back(name);
    streams.push_back(metric.update_op ? metrics::Metric{metric.value, metric.update_op}
                                       : metrics::mean(metric_scope, identity(after_batch, metric.value), {}, name));
  }
  std::vector<Fetch> updates;
  std::vector<Output> values;
  for (const metrics::Metric& m : streams) {
    updates.push_back(m.update_op);
    values.push_back(m.value);
  }
  std::vector<SessionRunHook*> hooks = options.hooks;
  std::optional<StopAfterNEvalsHook> stop_after;
  if (options.steps) hooks.push_back(&stop_after.emplace(*options.steps));

  // The Scaffold's local_init_op zeroes the metrics' counts when the session starts.
  SingularMonitoredSession session(
      graph,
      {.hooks = hooks, .session_options = config_.session_options, .checkpoint_filename_with_path = checkpoint_path});
  int64_t batches = 0;
  const Fetch update_fetches = Fetch::list(updates);
  while (!session.should_stop()) {
    const FetchResult result = session.run(update_fetches);
    if (result.empty()) continue;  // the input ended
    ++batches;
  }
  const std::vector<Tensor> final_values = session.raw_session().run(values);
  const int64_t step = global_step_value(session.raw_session().run(global_step.value()));
  session.close();

  std::map<std::string, double> metrics;
  // A metric of nothing is 0 (div_no_nan), as in TF.
  for (size_t i = 0; i < names.size(); ++i) metrics[names[i]] = scalar_as_double(final_values[i], names[i]);
  metrics[kGlobalStepKey] = static_cast<double>(step);
  if (batches == 0) config_.log.log_warning("Evaluation ran no steps. Perhaps the input is empty.");
  std::string line = "Saving dict for global step " + std::to_string(step) + ":";
  const char* sep = " ";
  for (const auto& [name, value] : metrics) {
    line += sep + name + " = " + short_double(value);
    sep = ", ";
  }
  config_.log.log_info(line);
  append_eval_record(eval_dir(options.name), metrics);
  // As TF's _write_dict_to_summary: every metric but the step, as scalars at the step, for
  // TensorBoard (the early-stopping hooks read the text record instead).
  auto writer = SummaryWriterCache::get(eval_dir(options.name));
  for (const auto& [name, value] : metrics)
    if (name != kGlobalStepKey) writer->add_scalar(name, static_cast<float>(value), step);
  writer->flush();
  return metrics;
}

// ---------------------------------------------------------------------------------------------

namespace {

// Evaluates after the checkpoint saves of a train_and_evaluate run (TF's
// _NewCheckpointListenerForEvaluate with its _Evaluator).
class EvalListener : public CheckpointSaverListener {
 public:
  EvalListener(Estimator& estimator, const EvalSpec& spec) : estimator_(estimator), spec_(spec) {}

  void begin() override {
    timer_.emplace(spec_.throttle_secs, std::nullopt, spec_.clock, "throttle_secs");
    is_first_run_ = true;
  }
  bool after_save(Session&, int64_t global_step_value) override {
    if (is_first_run_) {  // the save at session creation: nothing new trained yet
      is_first_run_ = false;
      return false;
    }
    if (timer_->should_trigger_for_step(global_step_value))
      evaluate(global_step_value);
    else
      estimator_.config().log.log_info("Skip the current checkpoint eval due to throttle secs (" +
                                       short_double(spec_.throttle_secs) + " secs).");
    return false;
  }
  void end(Session&, int64_t global_step_value) override {
    if (global_step_value != timer_->last_triggered_step()) evaluate(global_step_value);
  }
  const std::optional<std::map<std::string, double>>& eval_result() const { return eval_result_; }

 private:
  void evaluate(int64_t global_step_value) {
    timer_->update_last_triggered_step(global_step_value);
    const auto latest = estimator_.latest_checkpoint();
    const char* status = nullptr;
    if (!latest) {
      status = "missing checkpoint";
    } else if (latest == previous_checkpoint_) {
      status = "no new checkpoint";
    }
    if (status != nullptr)
      throw FailedPreconditionError(std::string("There was no new checkpoint after the training. Eval status: ") +
                                    status);
    eval_result_ = estimator_.evaluate(
        spec_.input_fn, {.steps = spec_.steps, .hooks = spec_.hooks, .checkpoint_path = *latest, .name = spec_.name});
    previous_checkpoint_ = latest;
  }

  Estimator& estimator_;
  const EvalSpec& spec_;
  std::optional<SecondOrStepTimer> timer_;
  bool is_first_run_ = true;
  std::optional<std::string> previous_checkpoint_;
  std::optional<std::map<std::string, double>> eval_result_;
};

}  // namespace

std::optional<std::map<std::string, double>> train_and_evaluate(Estimator& estimator, const TrainSpec& train_spec,
                                                                const EvalSpec& eval_spec) {
  if (!train_spec.input_fn) throw InvalidArgumentError("TrainSpec.input_fn must be provided.");
  if (train_spec.max_steps && *train_spec.max_steps <= 0)
    throw InvalidArgumentError("Must specify max_steps > 0, given: " + std::to_string(*train_spec.max_steps));
  if (!eval_spec.input_fn) throw InvalidArgumentError("EvalSpec.input_fn must be provided.");
  if (eval_spec.steps && *eval_spec.steps <= 0)
    throw InvalidArgumentError("Must specify steps > 0, given: " + std::to_string(*eval_spec.steps));
  if (!(eval_spec.start_delay_secs >= 0))
    throw InvalidArgumentError("Must specify start_delay_secs >= 0, given: " +
                               short_double(eval_spec.start_delay_secs));
  if (!(eval_spec.throttle_secs >= 0))
    throw InvalidArgumentError("Must specify throttle_secs >= 0, given: " + short_double(eval_spec.throttle_secs));
  check_hooks(train_spec.hooks, "TrainSpec.hooks");
  check_hooks(eval_spec.hooks, "EvalSpec.hooks");
  const EstimatorConfig& config = estimator.config();
  if (!config.save_checkpoints_steps && config.save_checkpoints_secs.value_or(0) <= 0)
    throw InvalidArgumentError(
        "train_and_evaluate evaluates after checkpoint saves: set save_checkpoints_steps or save_checkpoints_secs.");
  config.log.log_info("Start train and evaluate loop. The evaluate will happen after every checkpoint.");

  EvalListener listener(estimator, eval_spec);
  estimator.train(train_spec.input_fn,
                  {.hooks = train_spec.hooks, .max_steps = train_spec.max_steps, .saving_listeners = {&listener}});
  return listener.eval_result();
}

// ---------------------------------------------------------------------------------------------

std::map<int64_t, std::map<std::string, double>> read_eval_metrics(const std::string& eval_dir) {
  std::map<int64_t, std::map<std::string, double>> results;
  const std::string path = (std::filesystem::path(eval_dir) / kEvalMetricsFile).string();
  std::ifstream in(path);
  if (!in) return results;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    auto bad = [&] { return DataLossError(path + ":" + std::to_string(line_no) + ": malformed evaluation record"); };
    std::istringstream fields(line);
    std::string field;
    std::optional<int64_t> step;
    std::map<std::string, double> metrics;
    while (fields >> field) {
      const size_t eq = field.find('=');
      if (eq == std::string::npos || eq == 0) throw bad();
      const std::string name = field.substr(0, eq), value = field.substr(eq + 1);
      size_t used = 0;
      try {
        if (name == kGlobalStepKey) {
          step = std::stoll(value, &used);
        } else {
          metrics[name] = std::stod(value, &used);
        }
      } catch (const std::exception&) {
        throw bad();
      }
      if (used != value.size()) throw bad();
    }
    if (!step) throw bad();
    auto& entry = results[*step];
    for (auto& [name, value] : metrics) entry[name] = value;
  }
  return results;
}

namespace {

// TF's _StopOnPredicateHook (for the chief).
class StopOnPredicateHook : public SessionRunHook {
 public:
  StopOnPredicateHook(std::function<bool()> should_stop_fn, std::optional<double> run_every_secs,
                      std::optional<int64_t> run_every_steps, const Clock* clock, HookLog log)
      : should_stop_fn_(std::move(should_stop_fn)),
        timer_(run_every_secs, run_every_steps, clock),
        log_(std::move(log)) {}

  using SessionRunHook::begin;
  void begin(Graph& graph) override {
    global_step_read_ = global_step_read_for(graph, "early stopping");
    timer_.reset();
  }
  std::optional<SessionRunArgs> before_run(SessionRunContext&) override {
    if (!global_step_read_)
      throw FailedPreconditionError("The early stopping hook was not given a graph (call begin(graph)).");
    return SessionRunArgs{.fetches = global_step_read_};
  }
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override {
    const int64_t global_step = global_step_value(run_values.results.tensor());
    if (!timer_.should_trigger_for_step(global_step)) return;
    timer_.update_last_triggered_step(global_step);
    if (should_stop_fn_()) {
      log_.log_info("Requesting early stopping at global step " + std::to_string(global_step));
      run_context.request_stop();
    }
  }

 private:
  std::function<bool()> should_stop_fn_;
  SecondOrStepTimer timer_;
  HookLog log_;
  Output global_step_read_;
};

void check_metric_args(const std::string& metric_name, const EarlyStoppingOptions& options) {
  if (metric_name.empty()) throw InvalidArgumentError("metric_name must not be empty.");
  if (options.min_steps < 0)
    throw InvalidArgumentError("min_steps must be >= 0, given: " + std::to_string(options.min_steps));
}

double metric_at(const std::map<std::string, double>& metrics, const std::string& metric_name, int64_t step,
                 const std::string& eval_dir) {
  auto it = metrics.find(metric_name);
  if (it != metrics.end()) return it->second;
  std::string have;
  for (const auto& [name, value] : metrics) have += (have.empty() ? "" : ", ") + name;
  throw InvalidArgumentError("Metric \"" + metric_name + "\" is not in the evaluation at global step " +
                             std::to_string(step) + " in " + eval_dir + " (it has: " + have + ").");
}

std::unique_ptr<SessionRunHook> no_improvement_hook(const Estimator& estimator, const std::string& metric_name,
                                                    int64_t max_steps_without_improvement, bool higher_is_better,
                                                    EarlyStoppingOptions options) {
  check_metric_args(metric_name, options);
  const char* direction = higher_is_better ? "increase" : "decrease";
  if (max_steps_without_improvement < 0)
    throw InvalidArgumentError(std::string("max_steps_without_") + direction +
                               " must be >= 0, given: " + std::to_string(max_steps_without_improvement));
  const std::string eval_dir = options.eval_dir.empty() ? estimator.eval_dir() : options.eval_dir;
  HookLog log = options.log;
  auto fn = [=] {
    std::optional<double> best_val;
    int64_t best_val_step = 0;
    for (const auto& [step, metrics] : read_eval_metrics(eval_dir)) {
      if (step < options.min_steps) continue;
      const double val = metric_at(metrics, metric_name, step, eval_dir);
      if (!best_val || (higher_is_better ? val > *best_val : val < *best_val)) {
        best_val = val;
        best_val_step = step;
      }
      if (step - best_val_step >= max_steps_without_improvement) {
        log.log_info("No " + std::string(direction) + " in metric \"" + metric_name + "\" for " +
                     std::to_string(step - best_val_step) + " steps, which is greater than or equal to max steps (" +
                     std::to_string(max_steps_without_improvement) + ") configured for early stopping.");
        return true;
      }
    }
    return false;
  };
  return make_early_stopping_hook(estimator, fn, options.run_every_secs, options.run_every_steps, options.clock,
                                  options.log);
}

std::unique_ptr<SessionRunHook> threshold_hook(const Estimator& estimator, const std::string& metric_name,
                                               double threshold, bool is_lhs_higher, EarlyStoppingOptions options) {
  check_metric_args(metric_name, options);
  const std::string eval_dir = options.eval_dir.empty() ? estimator.eval_dir() : options.eval_dir;
  HookLog log = options.log;
  auto fn = [=] {
    for (const auto& [step, metrics] : read_eval_metrics(eval_dir)) {
      if (step < options.min_steps) continue;
      const double val = metric_at(metrics, metric_name, step, eval_dir);
      if (is_lhs_higher ? val > threshold : val < threshold) {
        log.log_info("At step " + std::to_string(step) + ", metric \"" + metric_name + "\" has value " +
                     short_double(val) + " which is " + (is_lhs_higher ? "higher" : "lower") + " than the threshold (" +
                     short_double(threshold) + "), so stopping early.");
        return true;
      }
    }
    return false;
  };
  return make_early_stopping_hook(estimator, fn, options.run_every_secs, options.run_every_steps, options.clock,
                                  options.log);
}

}  // namespace

std::unique_ptr<SessionRunHook> make_early_stopping_hook(const Estimator&, std::function<bool()> should_stop_fn,
                                                         std::optional<double> run_every_secs,
                                                         std::optional<int64_t> run_every_steps, const Clock* clock,
                                                         HookLog log) {
  if (run_every_secs && run_every_steps)
    throw InvalidArgumentError("Only one of `run_every_secs` and `run_every_steps` can be set.");
  if (!should_stop_fn) throw InvalidArgumentError("`should_stop_fn` must be callable.");
  return std::make_unique<StopOnPredicateHook>(std::move(should_stop_fn), run_every_secs, run_every_steps, clock,
                                               std::move(log));
}

std::unique_ptr<SessionRunHook> stop_if_no_increase_hook(const Estimator& estimator, const std::string& metric_name,
                                                         int64_t max_steps_without_increase,
                                                         EarlyStoppingOptions options) {
  return no_improvement_hook(estimator, metric_name, max_steps_without_increase, true, std::move(options));
}

std::unique_ptr<SessionRunHook> stop_if_no_decrease_hook(const Estimator& estimator, const std::string& metric_name,
                                                         int64_t max_steps_without_decrease,
                                                         EarlyStoppingOptions options) {
  return no_improvement_hook(estimator, metric_name, max_steps_without_decrease, false, std::move(options));
}

std::unique_ptr<SessionRunHook> stop_if_higher_hook(const Estimator& estimator, const std::string& metric_name,
                                                    double threshold, EarlyStoppingOptions options) {
  return threshold_hook(estimator, metric_name, threshold, true, std::move(options));
}

std::unique_ptr<SessionRunHook> stop_if_lower_hook(const Estimator& estimator, const std::string& metric_name,
                                                   double threshold, EarlyStoppingOptions options) {
  return threshold_hook(estimator, metric_name, threshold, false, std::move(options));
}

}  // namespace stepscope
