#include "stepscope/hooks/scaffold.h"

#include <mutex>

#include "stepscope/ops/summary_ops.h"
#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

// The single node of `collection`, null when it is empty (TF's Scaffold.get_or_default lookup).
Node* single_node_of(const Graph& graph, const char* collection, const char* arg_name) {
  const auto& nodes = graph.collection(collection);
  if (nodes.empty()) return nullptr;
  if (nodes.size() > 1)
    throw FailedPreconditionError(std::string("More than one item in the collection \"") + collection +
                                  "\". Please indicate which one to use by passing it to the Scaffold "
                                  "constructor as: Scaffold(graph, {." +
                                  arg_name + " = item to use})");
  return nodes.front();
}

std::string name_or_none(const Node* node) { return node ? node->name() : "None"; }

std::vector<std::string> uninitialized_global_variables(Session& session) {
  std::vector<std::string> names;
  for (Node* var : session.graph().collection(kGlobalVariables)) {
    auto& slot = session.resources().variable(*var);
    std::lock_guard<std::mutex> lock(slot.mutex);
    if (!slot.value.initialized()) names.push_back(var->name());
  }
  return names;
}

void check_ready(const Scaffold& scaffold, Session& session) {
  std::vector<std::string> not_ready = scaffold.not_ready(session);
  if (not_ready.empty()) return;
  std::string names;
  for (const auto& n : not_ready) names += (names.empty() ? "" : ", ") + n;
  throw FailedPreconditionError(
      "Init operations did not make model ready.  Init op: " + name_or_none(scaffold.init_op()) +
      ", init fn: " + (scaffold.init_fn() ? "<function>" : "None") +
      ", local_init_op: " + name_or_none(scaffold.local_init_op()) + ", error: Variables not initialized: " + names);
}

}  // namespace

Scaffold::Scaffold(Graph& graph, ScaffoldOptions options) : graph_(&graph), options_(std::move(options)) {
  if (options_.init_op && &options_.init_op->graph() != graph_)
    throw InvalidArgumentError("Scaffold: init_op " + options_.init_op->name() + " is from another graph");
}

Scaffold::~Scaffold() = default;

Output Scaffold::default_summary_op(Graph& graph) { return merge_all_summaries(graph); }

void Scaffold::finalize() {
  if (!finalized_) {
    Graph& g = *graph_;
    if (!options_.init_op) {
      options_.init_op = single_node_of(g, kInitOpCollection, "init_op");
      if (!options_.init_op) {
        options_.init_op = global_variables_initializer(Scope(g));
        g.add_to_collection(kInitOpCollection, options_.init_op);
      }
    }
    if (!options_.local_init_op) {
      options_.local_init_op = single_node_of(g, kLocalInitOpCollection, "local_init_op");
      if (!options_.local_init_op && !local_variables(g).empty()) {
        options_.local_init_op = local_variables_initializer(Scope(g));
        g.add_to_collection(kLocalInitOpCollection, options_.local_init_op);
      }
    }
    if (!options_.summary_op) {
      if (Node* n = single_node_of(g, kSummaryOpCollection, "summary_op")) {
        options_.summary_op = n->output(0);
      } else if ((options_.summary_op = default_summary_op(g))) {
        g.add_to_collection(kSummaryOpCollection, options_.summary_op.node);
      }
    }
    if (!options_.saver) {
      default_saver_ = std::make_unique<Saver>(g, SaverOptions{.allow_empty = true});
      options_.saver = default_saver_.get();
    }
    finalized_ = true;
  }
  graph_->finalize();
}

std::vector<std::string> Scaffold::not_ready(Session& session) const {
  return options_.ready_check ? options_.ready_check(session) : uninitialized_global_variables(session);
}

// --- ChiefSessionCreator -------------------------------------------------------------------------

ChiefSessionCreator::ChiefSessionCreator(Graph& graph, ChiefSessionCreatorOptions options)
    : graph_(&graph), options_(std::move(options)) {
  if (!options_.checkpoint_dir.empty() && !options_.checkpoint_filename_with_path.empty())
    throw InvalidArgumentError("Can not provide both checkpoint_dir and checkpoint_filename_with_path.");
  if (options_.scaffold && &options_.scaffold->graph() != graph_)
    throw InvalidArgumentError("ChiefSessionCreator: the scaffold belongs to another graph");
  if (!options_.scaffold) owned_scaffold_ = std::make_unique<Scaffold>(graph);
  scaffold_ = options_.scaffold ? options_.scaffold : owned_scaffold_.get();
}

std::unique_ptr<Session> ChiefSessionCreator::create_session() {
  Scaffold& s = *scaffold_;
  s.finalize();
  auto session = std::make_unique<Session>(*graph_, options_.session_options);
  // SessionManager.prepare_session: restore when there is a checkpoint, else initialize.
  bool restored = false;
  if (Saver* saver = s.saver()) {
    if (!options_.checkpoint_filename_with_path.empty()) {
      saver->restore(*session, options_.checkpoint_filename_with_path);
      restored = true;
    } else if (!options_.checkpoint_dir.empty()) {
      restored = saver
                     ->restore_latest(*session, options_.checkpoint_dir,
                                      {.fall_back_to_older = options_.fall_back_to_older_checkpoint})
                     .has_value();
    }
  }
  if (!restored) {
    if (s.init_op()) session->run(s.init_op(), s.init_feed_dict());
    if (s.init_fn()) s.init_fn()(s, *session);
  }
  if (s.local_init_op()) session->run(s.local_init_op());
  check_ready(s, *session);
  return session;
}

// --- WorkerSessionCreator ------------------------------------------------------------------------

WorkerSessionCreator::WorkerSessionCreator(Graph& graph, WorkerSessionCreatorOptions options)
    : graph_(&graph), options_(std::move(options)) {
  if (options_.scaffold && &options_.scaffold->graph() != graph_)
    throw InvalidArgumentError("WorkerSessionCreator: the scaffold belongs to another graph");
  if (!options_.scaffold) owned_scaffold_ = std::make_unique<Scaffold>(graph);
  scaffold_ = options_.scaffold ? options_.scaffold : owned_scaffold_.get();
}

std::unique_ptr<Session> WorkerSessionCreator::create_session() {
  scaffold_->finalize();
  auto session = std::make_unique<Session>(*graph_, options_.session_options);
  if (scaffold_->local_init_op()) session->run(scaffold_->local_init_op());
  return session;
}

}  // namespace stepscope
