#include "stepscope/hooks/basic_session_run_hooks.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include "stepscope/hooks/monitored_session.h"
#include "stepscope/train/variables.h"

namespace stepscope {

// ---------------------------------------------------------------------------------------------
// Shared helpers

Output global_step_read_for(Graph& graph, const std::string& hook_name) {
  if (!get_global_step(graph)) throw FailedPreconditionError("Global step should be created to use " + hook_name + ".");
  if (graph.finalized() && graph.collection(kGlobalStepReadCollection).empty())
    throw FailedPreconditionError(
        hook_name +
        ": the graph is finalized and has no global_step/read tensor; call begin(graph) before the graph is finalized");
  return get_or_create_global_step_read(graph);
}

FetchResult run_fetch(Session& session, const Fetch& fetches, const FeedList& feeds, const RunOptions& options,
                      RunMetadata* run_metadata) {
  std::vector<Output> outputs;
  std::vector<Node*> ops;
  fetches.flatten(outputs, ops);
  std::vector<Tensor> values = session.run(feeds, outputs, ops, options, run_metadata);
  return FetchResult::unflatten(fetches, values);
}

namespace {

std::string format_secs(double secs) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", secs);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// StopAtStepHook

StopAtStepHook::StopAtStepHook(StopAtStepOptions options)
    : num_steps_(options.num_steps), last_step_(options.last_step) {
  if (!num_steps_ && !last_step_) throw InvalidArgumentError("One of num_steps or last_step must be specified.");
  if (num_steps_ && last_step_) throw InvalidArgumentError("Only one of num_steps or last_step can be specified.");
}

void StopAtStepHook::begin() { global_step_read_ = Output{}; }

void StopAtStepHook::begin(Graph& graph) { global_step_read_ = global_step_read_for(graph, "StopAtStepHook"); }

void StopAtStepHook::after_create_session(Session& session, Coordinator&) {
  if (!global_step_read_) global_step_read_ = global_step_read_for(session.graph(), "StopAtStepHook");
  if (!last_step_) last_step_ = global_step_value(session.run(global_step_read_)) + *num_steps_;
}

std::optional<SessionRunArgs> StopAtStepHook::before_run(SessionRunContext& run_context) {
  if (!global_step_read_) global_step_read_ = global_step_read_for(run_context.session().graph(), "StopAtStepHook");
  return SessionRunArgs{.fetches = global_step_read_};
}

void StopAtStepHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  if (!last_step_) return;  // num_steps without a session creation: nothing to count from yet
  const int64_t global_step = global_step_value(run_values.results.tensor()) + 1;
  if (global_step >= *last_step_) {
    // The read tensor holds the step before this run; the train op may not have incremented it,
    // so check the real value before stopping.
    const int64_t step = global_step_value(run_context.session().run(global_step_read_));
    if (step >= *last_step_) run_context.request_stop();
  }
}

// ---------------------------------------------------------------------------------------------
// LoggingTensorHook

TensorsToLog::TensorsToLog(std::initializer_list<Output> list) : TensorsToLog(std::vector<Output>(list)) {}

TensorsToLog::TensorsToLog(std::vector<Output> list) {
  for (const Output& t : list) {
    if (!t) throw InvalidArgumentError("LoggingTensorHook: tensors holds a null tensor");
    entries_.push_back({t.name(), t, ""});
  }
}

TensorsToLog::TensorsToLog(std::initializer_list<Name> names) {
  for (const Name& n : names) entries_.push_back({n.name, Output{}, n.name});
}

TensorsToLog::TensorsToLog(std::vector<std::string> names) {
  for (const std::string& n : names) entries_.push_back({n, Output{}, n});
}

TensorsToLog::TensorsToLog(std::initializer_list<std::pair<const std::string, Output>> map)
    : TensorsToLog(std::map<std::string, Output>(map)) {}

TensorsToLog::TensorsToLog(std::map<std::string, Output> map) {
  for (const auto& [tag, t] : map) {
    if (!t) throw InvalidArgumentError("LoggingTensorHook: tensor '" + tag + "' is null");
    entries_.push_back({tag, t, ""});
  }
}

TensorsToLog::TensorsToLog(std::map<std::string, std::string> map_of_names) {
  for (const auto& [tag, n] : map_of_names) entries_.push_back({tag, Output{}, n});
}

LoggingTensorHook::LoggingTensorHook(LoggingTensorOptions options) : options_(std::move(options)) {
  const bool only_log_at_end = options_.at_end && !options_.every_n_iter && !options_.every_n_secs;
  if (!only_log_at_end && options_.every_n_iter.has_value() == options_.every_n_secs.has_value())
    throw InvalidArgumentError("either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.");
  if (options_.every_n_iter && *options_.every_n_iter <= 0)
    throw InvalidArgumentError("invalid every_n_iter=" + std::to_string(*options_.every_n_iter) + ".");
  if (only_log_at_end)
    timer_ = std::make_unique<NeverTriggerTimer>();
  else
    timer_ = std::make_unique<SecondOrStepTimer>(options_.every_n_secs, options_.every_n_iter, options_.clock,
                                                 "every_n_secs", "every_n_iter");
  entries_ = options_.tensors.entries();
}

void LoggingTensorHook::reset() {
  timer_->reset();
  iter_count_ = 0;
  should_trigger_ = false;
}

void LoggingTensorHook::begin() {
  reset();
  resolved_ = false;
}

void LoggingTensorHook::begin(Graph& graph) {
  reset();
  resolve(graph, /*check_graph=*/true);
}

// TensorFlow's _as_graph_element: names become tensors of `graph`; tensors must belong to it.
void LoggingTensorHook::resolve(Graph& graph, bool check_graph) {
  entries_ = options_.tensors.entries();
  for (auto& e : entries_) {
    if (e.name.empty()) {
      if (check_graph && e.tensor.graph() != &graph)
        throw InvalidArgumentError("Passed " + e.tensor.name() +
                                   " should have graph attribute that is equal to current graph.");
      continue;
    }
    if (e.name.find(':') != std::string::npos) {
      e.tensor = graph.output_by_name(e.name);
    } else {
      e.tensor = graph.output_by_name(e.name + ":0");
      if (e.tensor.node->num_outputs() > 1)
        throw InvalidArgumentError("Name " + e.name +
                                   " is ambiguous, as this `Operation` has multiple outputs (at least 2).");
    }
  }
  resolved_ = true;
}

Fetch LoggingTensorHook::fetches() const {
  Fetch::Map map;
  for (const auto& e : entries_) map.emplace(e.tag, Fetch(e.tensor));
  return Fetch(std::move(map));
}

std::optional<SessionRunArgs> LoggingTensorHook::before_run(SessionRunContext& run_context) {
  should_trigger_ = timer_->should_trigger_for_step(iter_count_);
  if (!should_trigger_) return std::nullopt;
  if (!resolved_) resolve(run_context.session().graph(), /*check_graph=*/false);
  return SessionRunArgs{.fetches = fetches()};
}

void LoggingTensorHook::log_tensors(const FetchResult& values) {
  const auto elapsed = timer_->update_last_triggered_step(iter_count_);
  if (options_.formatter) {
    std::map<std::string, Tensor> by_tag;
    for (const auto& e : entries_) by_tag.emplace(e.tag, values[e.tag].tensor());
    options_.log.log_info(options_.formatter(by_tag));
    return;
  }
  std::string line;
  for (const auto& e : entries_) {
    if (!line.empty()) line += ", ";
    line += e.tag + " = " + numpy_str(values[e.tag].tensor());
  }
  if (elapsed) line += " (" + format_secs(elapsed->first) + " sec)";
  options_.log.log_info(line);
}

void LoggingTensorHook::after_run(SessionRunContext&, const SessionRunValues& run_values) {
  if (should_trigger_) log_tensors(run_values.results);
  ++iter_count_;
}

void LoggingTensorHook::end(Session& session) {
  if (!options_.at_end) return;
  if (!resolved_) resolve(session.graph(), /*check_graph=*/false);
  log_tensors(run_fetch(session, fetches()));
}

// ---------------------------------------------------------------------------------------------
// NanTensorHook

NanTensorHook::NanTensorHook(NanTensorOptions options) : options_(std::move(options)) {
  if (!options_.loss_tensor) throw InvalidArgumentError("NanTensorHook: loss_tensor is null");
}

std::optional<SessionRunArgs> NanTensorHook::before_run(SessionRunContext&) {
  return SessionRunArgs{.fetches = options_.loss_tensor};
}

namespace {
bool has_nan(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    for (float v : t.flat<float>())
      if (std::isnan(v)) return true;
  } else if (t.dtype() == DType::kFloat64) {
    for (double v : t.flat<double>())
      if (std::isnan(v)) return true;
  }
  return false;
}
}  // namespace

void NanTensorHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  if (!has_nan(run_values.results.tensor())) return;
  const std::string failure_message = "Model diverged with loss = NaN.";
  if (options_.fail_on_nan_loss) {
    options_.log.log_error(failure_message);
    throw NanLossDuringTrainingError();
  }
  options_.log.log_warning(failure_message);
  // No error: stop the loop cleanly instead.
  run_context.request_stop();
}

// ---------------------------------------------------------------------------------------------
// GlobalStepWaiterHook

GlobalStepWaiterHook::GlobalStepWaiterHook(GlobalStepWaiterOptions options) : options_(std::move(options)) {}

void GlobalStepWaiterHook::begin() {
  worker_is_started_ = false;
  global_step_read_ = Output{};
}

void GlobalStepWaiterHook::begin(Graph& graph) {
  worker_is_started_ = false;
  global_step_read_ = global_step_read_for(graph, "_GlobalStepWaiterHook");
}

std::optional<SessionRunArgs> GlobalStepWaiterHook::before_run(SessionRunContext& run_context) {
  if (worker_is_started_) return std::nullopt;
  if (options_.wait_until_step <= 0) {
    worker_is_started_ = true;
    return std::nullopt;
  }
  Session& session = run_context.session();
  if (!global_step_read_) global_step_read_ = global_step_read_for(session.graph(), "_GlobalStepWaiterHook");
  options_.log.log_info("Waiting for global step " + std::to_string(options_.wait_until_step) +
                        " before starting training.");
  int64_t last_logged_step = 0;
  while (true) {
    const int64_t current_step = global_step_value(session.run(global_step_read_));
    if (current_step >= options_.wait_until_step) {
      worker_is_started_ = true;
      return std::nullopt;
    }
    if (current_step - last_logged_step > 1000) {
      options_.log.log_info("Waiting for global step " + std::to_string(options_.wait_until_step) +
                            " before starting training. Current step is " + std::to_string(current_step) + ".");
      last_logged_step = current_step;
    }
    if (options_.sleep)
      options_.sleep(0.5);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// ---------------------------------------------------------------------------------------------
// FinalOpsHook

FinalOpsHook::FinalOpsHook(FinalOpsOptions options) : options_(std::move(options)) {}

void FinalOpsHook::end(Session& session) {
  if (options_.final_ops.empty()) return;
  try {
    final_ops_values_ = run_fetch(session, options_.final_ops, options_.final_ops_feed_dict);
  } catch (const OutOfRangeError&) {
    warn_final_ops_read_input();
    throw;
  } catch (const StopIteration&) {
    warn_final_ops_read_input();
    throw;
  }
}

void FinalOpsHook::warn_final_ops_read_input() const {
  options_.log.log_warning(
      "An OutOfRangeError or StopIteration exception is raised by the code in FinalOpsHook. This typically "
      "means the Ops running by the FinalOpsHook have a dependency back to some input source, which should not "
      "happen. For example, for metrics in tf.estimator.Estimator, all metrics functions return two Ops: "
      "`value_op` and  `update_op`. Estimator.evaluate calls the `update_op` for each batch of the data in "
      "input source and, once it is exhausted, it call the `value_op` to get the metric values. The `value_op` "
      "here should have dependency back to variables reading only, rather than reading another batch from "
      "input. Otherwise, the `value_op`, executed by `FinalOpsHook`, triggers another data reading, which ends "
      "OutOfRangeError/StopIteration. Please fix that.");
}

// ---------------------------------------------------------------------------------------------
// FeedFnHook

FeedFnHook::FeedFnHook(std::function<FeedList()> feed_fn) : feed_fn_(std::move(feed_fn)) {
  if (!feed_fn_) throw InvalidArgumentError("FeedFnHook: feed_fn is empty");
}

std::optional<SessionRunArgs> FeedFnHook::before_run(SessionRunContext&) {
  return SessionRunArgs{.fetches = Fetch(), .feed_dict = feed_fn_()};
}

}  // namespace stepscope
