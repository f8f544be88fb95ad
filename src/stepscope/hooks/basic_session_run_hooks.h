// The standard hooks of TensorFlow 1.x (basic_session_run_hooks.py), with the reference's
// arguments, validation messages and timing rules:
//
//   StopAtStepHook        asks to stop once the global step reaches a step
//   LoggingTensorHook     logs tensor values every N local steps / N seconds / at the end
//   NanTensorHook         fails (or stops) when the loss becomes NaN
//   GlobalStepWaiterHook  holds a worker back until the global step reaches a value
//   FinalOpsHook          evaluates tensors when the session ends
//   FeedFnHook            feeds the result of a function into every run
//
// CheckpointSaverHook is in checkpoint_saver_hook.h. Python's ValueError is InvalidArgumentError
// here and RuntimeError is FailedPreconditionError, with the reference's texts. Hooks that need
// the global step look up (or create) `global_step/read` in begin(graph) and fetch it beside the
// train op: it yields the value before that run's increment when the increment depends on the
// read (as TensorFlow's _increment_global_step makes it), and may race with the increment
// otherwise; so, as in TensorFlow, hooks that act on a step read the real value again on the raw
// session after the run before acting. A hook whose plain begin() was called (no
// graph) finds the read tensor when the session is created instead, which needs the tensor to
// exist already if the graph is finalized by then.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"

namespace stepscope {

// ---------------------------------------------------------------------------------------------

struct StopAtStepOptions {
  // Steps to run from session creation (the global step then plus num_steps) ...
  std::optional<int64_t> num_steps = std::nullopt;
  // ... or the global step at which to stop. Exactly one must be given.
  std::optional<int64_t> last_step = std::nullopt;
};

// Requests stop once the global step reaches the last step. After a run whose pre-increment step
// suggests the end, the real step is read again, so runs that do not increment it never stop
// the loop early. InvalidArgumentError: "One of num_steps or last_step must be specified." /
// "Only one of num_steps or last_step can be specified."; begin(graph) without a global step:
// FailedPreconditionError "Global step should be created to use StopAtStepHook.".
class StopAtStepHook : public SessionRunHook {
 public:
  explicit StopAtStepHook(StopAtStepOptions options);
  using SessionRunHook::begin;
  void begin() override;
  void begin(Graph& graph) override;
  // With num_steps, fixes the last step at the current global step plus num_steps (only the
  // first time: a recovered session keeps the same last step).
  void after_create_session(Session& session, Coordinator& coord) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

  std::optional<int64_t> last_step() const { return last_step_; }

 private:
  std::optional<int64_t> num_steps_;
  std::optional<int64_t> last_step_;
  Output global_step_read_;
};

// ---------------------------------------------------------------------------------------------

// The tensors LoggingTensorHook prints. Either a list — tensors or tensor names, each tagged
// with its name ("foo:0" or the name as given) and printed in the given order — or a map
// tag -> tensor (or tensor name), printed in tag order:
//   .tensors = {loss, accuracy}                 "loss/Mean:0 = 0.25, acc:0 = 0.5"
//   .tensors = {{"loss", loss}, {"acc", acc}}   "acc = 0.5, loss = 0.25"
//   .tensors = {"loss/Mean:0", "acc"}           names, resolved in begin(graph)
// A name without ":<i>" means output 0 and must not name an op with several outputs.
class TensorsToLog {
 public:
  struct Entry {
    std::string tag = {};
    Output tensor = {};     // null until a name is resolved
    std::string name = {};  // the name to resolve; empty when a tensor was given
  };

  // A tensor's name in a braced list: {"loss:0", "acc"}. (A distinct type, so that a pair of
  // string literals such as {{"tag", "name"}} cannot be taken for a string built from two
  // pointers; write std::map<std::string, std::string>{{"tag", "name"}} for tagged names.)
  struct Name {
    Name(const char* n) : name(n) {}             // NOLINT
    Name(std::string n) : name(std::move(n)) {}  // NOLINT
    std::string name;
  };

  TensorsToLog() = default;
  TensorsToLog(std::initializer_list<Output> list);                               // NOLINT
  TensorsToLog(std::vector<Output> list);                                         // NOLINT
  TensorsToLog(std::initializer_list<Name> names);                                // NOLINT
  TensorsToLog(std::vector<std::string> names);                                   // NOLINT
  TensorsToLog(std::initializer_list<std::pair<const std::string, Output>> map);  // NOLINT
  TensorsToLog(std::map<std::string, Output> map);                                // NOLINT
  TensorsToLog(std::map<std::string, std::string> map_of_names);                  // NOLINT

  // In print order.
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

struct LoggingTensorOptions {
  TensorsToLog tensors = {};
  // Log every N local iterations (runs of this hook, not the global step) ...
  std::optional<int64_t> every_n_iter = std::nullopt;
  // ... or every N seconds; exactly one of the two unless only at_end is wanted.
  std::optional<double> every_n_secs = std::nullopt;
  // Also evaluate and log the tensors in end() (they must not consume input).
  bool at_end = false;
  // Replaces the default "tag = value, ..." line; gets the values by tag.
  std::function<std::string(const std::map<std::string, Tensor>&)> formatter = {};
  const Clock* clock = nullptr;  // for every_n_secs; null = the steady clock
  HookLog log = {};              // lines go to log.info
};

// Logs "tag = value" for each tensor, joined by ", ", followed by " (%.3f sec)" — the time since
// the previous log — except on the first. Values print like numpy's str (see numpy_str).
// InvalidArgumentError: "either at_end and/or exactly one of every_n_iter and every_n_secs must
// be provided." / "invalid every_n_iter=<n>.". begin(graph) resolves names (NotFoundError for
// unknown ones; InvalidArgumentError "Name <n> is ambiguous, as this `Operation` has multiple
// outputs (at least 2)." and for a tensor of another graph) and restarts the count.
class LoggingTensorHook : public SessionRunHook {
 public:
  explicit LoggingTensorHook(LoggingTensorOptions options);
  using SessionRunHook::begin;
  void begin() override;
  void begin(Graph& graph) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

 private:
  void reset();
  void resolve(Graph& graph, bool check_graph);
  Fetch fetches() const;
  void log_tensors(const FetchResult& values);

  LoggingTensorOptions options_;
  std::unique_ptr<HookTimer> timer_;
  std::vector<TensorsToLog::Entry> entries_;
  bool resolved_ = false;
  bool should_trigger_ = false;
  int64_t iter_count_ = 0;
};

// ---------------------------------------------------------------------------------------------

// What NanTensorHook raises: a FailedPreconditionError (Python's RuntimeError) whose text is
// "NaN loss during training.".
class NanLossDuringTrainingError : public FailedPreconditionError {
 public:
  NanLossDuringTrainingError() : FailedPreconditionError("NaN loss during training.") {}
};

struct NanTensorOptions {
  Output loss_tensor = {};
  // Raise NanLossDuringTrainingError; otherwise log a warning and request stop.
  bool fail_on_nan_loss = true;
  HookLog log = {};  // "Model diverged with loss = NaN." goes to log.error or log.warning
};

// Fetches the loss with every run; a NaN in it (any element, for a non-scalar loss) means the
// model diverged.
class NanTensorHook : public SessionRunHook {
 public:
  explicit NanTensorHook(NanTensorOptions options);
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;

 private:
  NanTensorOptions options_;
};

// ---------------------------------------------------------------------------------------------

struct GlobalStepWaiterOptions {
  int64_t wait_until_step = 0;
  // How to wait between polls of the global step (seconds); null = really sleep.
  std::function<void(double)> sleep = {};
  HookLog log = {};
};

// Holds the first run back until the global step reaches wait_until_step (polling it every 0.5 s
// on the raw session), to start workers gradually. begin(graph) without a global step:
// FailedPreconditionError "Global step should be created to use _GlobalStepWaiterHook." (the
// reference's text).
class GlobalStepWaiterHook : public SessionRunHook {
 public:
  explicit GlobalStepWaiterHook(GlobalStepWaiterOptions options);
  using SessionRunHook::begin;
  void begin() override;
  void begin(Graph& graph) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;

 private:
  GlobalStepWaiterOptions options_;
  Output global_step_read_;
  bool worker_is_started_ = false;
};

// ---------------------------------------------------------------------------------------------

struct FinalOpsOptions {
  Fetch final_ops = {};  // a tensor, a list or a map of them (ops run for their effect)
  FeedList final_ops_feed_dict = {};
  HookLog log = {};
};

// Evaluates final_ops in end(). An OutOfRangeError or StopIteration there (the final ops read
// input again, which they should not) is logged with an explanation and raised again.
class FinalOpsHook : public SessionRunHook {
 public:
  explicit FinalOpsHook(FinalOpsOptions options);
  void end(Session& session) override;
  // The values in the shape of final_ops; nullopt before end() (or without final_ops).
  const std::optional<FetchResult>& final_ops_values() const { return final_ops_values_; }

 private:
  void warn_final_ops_read_input() const;
  FinalOpsOptions options_;
  std::optional<FetchResult> final_ops_values_;
};

// ---------------------------------------------------------------------------------------------

// Feeds feed_fn()'s result into every run (feed_fn is called once per run).
class FeedFnHook : public SessionRunHook {
 public:
  explicit FeedFnHook(std::function<FeedList()> feed_fn);
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;

 private:
  std::function<FeedList()> feed_fn_;
};

// ---------------------------------------------------------------------------------------------
// Shared by the standard hooks.

// `global_step/read` of `graph` (created if the graph is not finalized); FailedPreconditionError
// "Global step should be created to use <hook_name>." when the graph has no global step.
Output global_step_read_for(Graph& graph, const std::string& hook_name);
// Session::run of a nested fetch structure, the result in the same shape.
FetchResult run_fetch(Session& session, const Fetch& fetches, const FeedList& feeds = {},
                      const RunOptions& options = {}, RunMetadata* run_metadata = nullptr);

}  // namespace stepscope
