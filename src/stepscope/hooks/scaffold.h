// Scaffold and session creators: what a MonitoredSession needs to build, initialize or restore
// a session (TensorFlow's tf.train.Scaffold, ChiefSessionCreator, WorkerSessionCreator).
//
// A Scaffold gathers the ops that set a model up. Whatever the user leaves out is filled in by
// finalize(), which runs when the first session is created, after every hook's begin() (so
// variables that hooks add are covered), and then finalizes the graph:
//   init_op     the single node of the "init_op" collection, else global_variables_initializer()
//               (added to that collection)
//   ready_check after init or restore, every global variable must be initialized
//   local_init_op the single node of the "local_init_op" collection, else, when the graph has
//               local variables (a metric's counts), local_variables_initializer() (added to
//               that collection), else none
//   summary_op  the single node of the "summary_op" collection, else the merge of the
//               "summaries" collection when it is not empty (added to "summary_op"), else none
//   saver       a Saver over every global variable (allow_empty), owned by the Scaffold
//
// Hooks and session creators refer to a Scaffold by pointer; it must outlive them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stepscope/runtime/session.h"
#include "stepscope/train/checkpoint.h"

namespace stepscope {

class Scaffold;

inline constexpr const char* kInitOpCollection = "init_op";
inline constexpr const char* kLocalInitOpCollection = "local_init_op";
inline constexpr const char* kSummaryOpCollection = "summary_op";

struct ScaffoldOptions {
  Node* init_op = nullptr;       // run when the session is not restored from a checkpoint
  FeedList init_feed_dict = {};  // fed to init_op
  // Called after init_op when the session is not restored (e.g. to load pretrained weights).
  std::function<void(const Scaffold&, Session&)> init_fn = {};
  // Names what is not ready once the session is initialized or restored (empty = ready).
  // Null: the global variables that are not initialized. Return {} to skip the check.
  std::function<std::vector<std::string>(Session&)> ready_check = {};
  Node* local_init_op = nullptr;  // run on every new session, restored or not
  Output summary_op = {};         // what SummarySaverHook evaluates
  Saver* saver = nullptr;         // not owned; what restores and CheckpointSaverHook saves
};

class Scaffold {
 public:
  explicit Scaffold(Graph& graph, ScaffoldOptions options = {});
  Scaffold(const Scaffold&) = delete;
  Scaffold& operator=(const Scaffold&) = delete;
  ~Scaffold();

  // Fills in the defaults (once) and finalizes the graph (every time). Errors:
  // FailedPreconditionError 'More than one item in the collection "<key>". ...' when a
  // collection it reads holds several nodes; adding a default to an already finalized graph
  // fails as Graph::add_node does.
  void finalize();
  bool finalized() const { return finalized_; }

  Graph& graph() const { return *graph_; }
  // Null until finalize() unless given.
  Node* init_op() const { return options_.init_op; }
  const FeedList& init_feed_dict() const { return options_.init_feed_dict; }
  const std::function<void(const Scaffold&, Session&)>& init_fn() const { return options_.init_fn; }
  Node* local_init_op() const { return options_.local_init_op; }
  Output summary_op() const { return options_.summary_op; }
  Saver* saver() const { return options_.saver; }
  // The names of what is not ready in `session` (see ScaffoldOptions::ready_check).
  std::vector<std::string> not_ready(Session& session) const;

  // The merge of every summary in the graph's "summaries" collection (merge_all_summaries);
  // a null Output when there are none.
  static Output default_summary_op(Graph& graph);

 private:
  Graph* graph_;
  ScaffoldOptions options_;
  std::unique_ptr<Saver> default_saver_;
  bool finalized_ = false;
};

// Makes the raw Session a MonitoredSession wraps; called again on every recovery.
class SessionCreator {
 public:
  virtual ~SessionCreator() = default;
  virtual std::unique_ptr<Session> create_session() = 0;
  // The graph the sessions run (MonitoredSession finalizes it while the session is open).
  virtual Graph& graph() const = 0;
};

struct ChiefSessionCreatorOptions {
  Scaffold* scaffold = nullptr;  // null: a default Scaffold owned by the creator
  // Restore from the newest checkpoint listed in `<checkpoint_dir>/checkpoint`, if there is one.
  std::string checkpoint_dir = {};
  // Or restore from exactly this checkpoint (not both).
  std::string checkpoint_filename_with_path = {};
  SessionOptions session_options = {};
  // With checkpoint_dir: when the newest checkpoint is corrupt (DataLossError), restore the
  // newest older one the index lists instead, writing "WARNING: skipping checkpoint '<file>':
  // <why>" to stderr for each one skipped (Saver::RestoreOptions). Off: the error is thrown.
  bool fall_back_to_older_checkpoint = false;
};

// The chief initializes the model: create_session() finalizes the scaffold, creates a Session,
// restores it from a checkpoint when there is one (and adopts the checkpoints listed beside it
// into the saver's max_to_keep bookkeeping), else runs init_op and init_fn; then runs
// local_init_op and checks that the model is ready (FailedPreconditionError "Init operations
// did not make model ready.  Init op: <name>, init fn: <set|None>, local_init_op: <name|None>,
// error: Variables not initialized: <names>" otherwise). A checkpoint listed in the index whose
// file is gone is an error (NotFoundError from Saver::restore), as in TensorFlow.
class ChiefSessionCreator : public SessionCreator {
 public:
  // InvalidArgumentError "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
  // or when the scaffold belongs to another graph.
  explicit ChiefSessionCreator(Graph& graph, ChiefSessionCreatorOptions options = {});
  std::unique_ptr<Session> create_session() override;
  Graph& graph() const override { return *graph_; }
  Scaffold& scaffold() const { return *scaffold_; }

 private:
  Graph* graph_;
  ChiefSessionCreatorOptions options_;
  std::unique_ptr<Scaffold> owned_scaffold_;
  Scaffold* scaffold_;
};

struct WorkerSessionCreatorOptions {
  Scaffold* scaffold = nullptr;  // null: a default Scaffold owned by the creator
  SessionOptions session_options = {};
};

// A non-chief's session: finalizes the scaffold, creates a Session and runs local_init_op only.
// In TensorFlow a worker waits until the chief has initialized the variables it shares with it;
// stepscope sessions never share variables, so there is nothing to wait for, and a worker's
// variables stay uninitialized unless the worker's own ops or hooks set them.
class WorkerSessionCreator : public SessionCreator {
 public:
  explicit WorkerSessionCreator(Graph& graph, WorkerSessionCreatorOptions options = {});
  std::unique_ptr<Session> create_session() override;
  Graph& graph() const override { return *graph_; }
  Scaffold& scaffold() const { return *scaffold_; }

 private:
  Graph* graph_;
  WorkerSessionCreatorOptions options_;
  std::unique_ptr<Scaffold> owned_scaffold_;
  Scaffold* scaffold_;
};

}  // namespace stepscope
