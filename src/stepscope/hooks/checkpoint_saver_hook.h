// CheckpointSaverHook: saves a checkpoint when the session is created, every N steps or N
// seconds, and at the end — TensorFlow 1.x's tf.train.CheckpointSaverHook, with its listeners.
//
//   CheckpointSaverHook saver({.checkpoint_dir = "runs/x", .save_steps = 1000});
//
// writes runs/x/model.ckpt-<step>.safetensors and the `checkpoint` index (train/checkpoint.h),
// keeping the Saver's max_to_keep newest files, including those of earlier runs in the directory;
// and, as TensorFlow's hook with save_graph_def=True, runs/x/graph.pbtxt (the GraphDef in text
// format, train/graph_def.h) and runs/x/model.ckpt-<step>.meta beside each checkpoint (the
// MetaGraphDef, train/meta_graph.h; deleted with its checkpoint).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "stepscope/hooks/hook_logging.h"
#include "stepscope/hooks/scaffold.h"
#include "stepscope/hooks/session_run_hook.h"
#include "stepscope/hooks/timer.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/summary_writer.h"

namespace stepscope {

// The text GraphDef a CheckpointSaverHook writes into checkpoint_dir.
inline constexpr const char* kGraphFileName = "graph.pbtxt";

// Called around the saves of a CheckpointSaverHook (only when the hook saves).
class CheckpointSaverListener {
 public:
  virtual ~CheckpointSaverListener() = default;
  // From the hook's begin(): the graph may still change.
  virtual void begin() {}
  virtual void before_save(Session& session, int64_t global_step_value) {}
  // Returning true asks the training loop to stop (should_stop() becomes true after this run).
  virtual bool after_save(Session& session, int64_t global_step_value) { return false; }
  // From the hook's end(), after its last save.
  virtual void end(Session& session, int64_t global_step_value) {}
};

struct CheckpointSaverOptions {
  std::string checkpoint_dir = {};  // created in begin() if missing
  // Exactly one of the two.
  std::optional<double> save_secs = std::nullopt;
  std::optional<int64_t> save_steps = std::nullopt;
  // The saver to use (not owned), or the Scaffold whose saver to use (not both). With neither,
  // the hook makes its own when it first saves: a Saver of every global variable of the
  // session's graph, max_to_keep 5, like the default one TensorFlow's Scaffold would have put in
  // the SAVERS collection.
  Saver* saver = nullptr;
  Scaffold* scaffold = nullptr;
  std::string checkpoint_basename = "model.ckpt";
  // TensorFlow's save_graph_def: write graph.pbtxt, the graph and the MetaGraphDef to the event
  // file when the session is created, and `<checkpoint>.meta` beside each checkpoint.
  bool save_graph_def = true;
  std::vector<CheckpointSaverListener*> listeners = {};  // not owned
  // Global steps one run advances (TensorFlow's private _set_steps_per_run), so that a hook on a
  // multi-step train op still sees when a save is due.
  int64_t steps_per_run = 1;
  const Clock* clock = nullptr;  // for save_secs; null = the steady clock
  HookLog log = {};
};

// Saves at session creation (the state at the current step), then whenever the timer fires after
// a run (judged on the step the run reached, read again on the raw session), and in end() unless
// the last save was at that step. Like TensorFlow's, the hook also writes to the event file of
// checkpoint_dir (SummaryWriterCache): the graph (a GraphDef event, then a MetaGraphDef event)
// when the session is created, unless save_graph_def is false, and a SessionLog CHECKPOINT
// (checkpoint_path = save_path()) at each saved step; end() flushes it. With save_graph_def, when
// the session is created the hook first writes `<checkpoint_dir>/graph.pbtxt` (replaced
// atomically), then saves; each save writes `<save_path>-<step>.meta` after the checkpoint.
//
// Validation: InvalidArgumentError "You cannot provide both saver and scaffold.", then the
// timer's ("Either every_secs or every_steps should be provided." / "Can not provide both
// every_secs and every_steps."); begin(graph) without a global step: FailedPreconditionError
// "Global step should be created to use CheckpointSaverHook.". A save that fails (unwritable
// directory, full disk) raises the file system's error type with a message naming the checkpoint
// path and step; so does a graph.pbtxt or `.meta` that cannot be written, naming that file.
class CheckpointSaverHook : public SessionRunHook {
 public:
  explicit CheckpointSaverHook(CheckpointSaverOptions options);
  ~CheckpointSaverHook() override;

  using SessionRunHook::begin;
  void begin() override;
  void begin(Graph& graph) override;
  void after_create_session(Session& session, Coordinator& coord) override;
  std::optional<SessionRunArgs> before_run(SessionRunContext& run_context) override;
  void after_run(SessionRunContext& run_context, const SessionRunValues& run_values) override;
  void end(Session& session) override;

  // `<checkpoint_dir>/<checkpoint_basename>`; files are `<save_path>-<step>.safetensors`.
  const std::string& save_path() const { return save_path_; }
  void set_steps_per_run(int64_t steps_per_run) { options_.steps_per_run = steps_per_run; }

 private:
  void start(Graph* graph);
  Output global_step_read(Session& session);
  Saver& saver(Session& session);
  // Returns whether a listener asked to stop.
  bool save(Session& session, int64_t step);
  // The serialized MetaGraphDef of the session's graph, made again when the graph changed.
  const std::string& meta_graph(const Graph& graph);

  CheckpointSaverOptions options_;
  std::string save_path_;
  SecondOrStepTimer timer_;
  Output global_step_read_;
  std::shared_ptr<SummaryWriter> summary_writer_;
  std::unique_ptr<Saver> owned_saver_;
  Saver* saver_ = nullptr;  // resolved on first use
  std::string meta_graph_;
  // The graph id, node count and collection sizes meta_graph_ was made for.
  std::tuple<uint64_t, int, size_t> meta_graph_of_{0, -1, 0};
};

}  // namespace stepscope
