#include "stepscope/runtime/session.h"

#include "stepscope/graph/kernel_context.h"
#include "stepscope/runtime/executor.h"

namespace stepscope {

Session::Session(Graph& graph, SessionOptions options)
    : graph_(graph),
      options_(options),
      resources_(std::make_unique<ResourceStore>()),
      executor_(std::make_unique<Executor>(graph, *resources_, options.inter_op_threads,
                                           options.intra_op_threads)) {}

Session::~Session() = default;

namespace {

// `what` is "feed" or "fetch". Checked before anything reads the output's dtype or shape or the
// executor lays out its slots: an index past the node's outputs would index past their tables.
void check_output(const Graph& graph, const Output& out, const char* what) {
  if (!out.node) throw InvalidArgumentError(std::string(what) + " refers to a null output");
  if (&out.node->graph() != &graph)
    throw InvalidArgumentError(node_error_message(
        *out.node, std::string("cannot ") + what + " " + out.name() + ": the tensor is from another graph"));
  if (out.index < 0 || out.index >= out.node->num_outputs())
    throw InvalidArgumentError(node_error_message(
        *out.node, std::string("cannot ") + what + " " + out.name() + ": output index " +
                       std::to_string(out.index) + " is out of range, the node has " +
                       std::to_string(out.node->num_outputs()) + " output(s); use an index in [0, " +
                       std::to_string(out.node->num_outputs()) + ")"));
}

void check_feed(const Graph& graph, const Output& out, const Tensor& value) {
  check_output(graph, out, "feed");
  if (!value.initialized())
    throw InvalidArgumentError(node_error_message(*out.node, "fed value for " + out.name() + " is uninitialized"));
  if (value.dtype() != out.dtype() || !value.shape().compatible_with(out.shape()))
    throw InvalidArgumentError(node_error_message(
        *out.node, "cannot feed value of dtype " + std::string(dtype_name(value.dtype())) + " and shape " +
                       value.shape().to_string() + " for tensor '" + out.name() + "', which has dtype " +
                       std::string(dtype_name(out.dtype())) + " and shape " + out.shape().to_string()));
}

}  // namespace

std::vector<Tensor> Session::run(const FeedList& feeds, const std::vector<Output>& fetches,
                                 const std::vector<Node*>& targets, const RunOptions& options,
                                 RunMetadata* run_metadata) {
  if (closed_) throw CancelledError("Attempted to use a closed Session.");
  for (size_t i = 0; i < feeds.size(); ++i) {
    check_feed(graph_, feeds[i].first, feeds[i].second);
    for (size_t j = 0; j < i; ++j)
      if (feeds[j].first == feeds[i].first)
        throw InvalidArgumentError("tensor '" + feeds[i].first.name() + "' is fed twice");
  }
  for (const Output& f : fetches) check_output(graph_, f, "fetch");
  for (const Node* t : targets) {
    if (!t) throw InvalidArgumentError("target is null");
    if (&t->graph() != &graph_)
      throw InvalidArgumentError(
          node_error_message(*t, "cannot run target " + t->name() + ": the operation is from another graph"));
  }
  return executor_->run(feeds, fetches, targets, options, run_metadata);
}

std::vector<Tensor> Session::run_by_name(const FeedList& feeds, const std::vector<std::string>& fetch_names,
                                         const std::vector<std::string>& target_names) {
  std::vector<Output> fetches;
  for (const auto& name : fetch_names) fetches.push_back(graph_.output_by_name(name));
  std::vector<Node*> targets;
  for (const auto& name : target_names) {
    Node* n = graph_.find_node(name);
    if (!n) throw NotFoundError("no operation named '" + name + "' in the graph");
    targets.push_back(n);
  }
  return run(feeds, fetches, targets);
}

void Session::close() {
  closed_ = true;
  resources_->clear();
}

}  // namespace stepscope
