#include "stepscope/runtime/session.h"

#include <string>
#include <string_view>

#include "stepscope/core/allocator.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/runtime/executor.h"
#include "stepscope/runtime/run_interceptor.h"

namespace stepscope {

Session::Session(Graph& graph, SessionOptions options)
    : graph_(graph),
      options_(options),
      resources_(std::make_unique<ResourceStore>()),
      devices_(std::make_unique<DeviceSet>()),
      executor_(std::make_unique<Executor>(graph, *resources_, *devices_, options.inter_op_threads,
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

// A tfdbg watch, "<node>:<output>:<debug op>". With no debug URL in DebugOptions there is nowhere
// to publish the watched tensor (as in TensorFlow without debug_urls): only the watch is checked.
void check_debug_watch(const Graph& graph, const std::string& watch) {
  auto fail = [&](const std::string& why) {
    throw InvalidArgumentError(
        "RunOptions.debug_options.debug_tensor_watch_opts: '" + watch + "' " + why +
        "; write \"<node name>:<output index>:<debug op>\", e.g. \"dense/MatMul:0:DebugIdentity\"");
  };
  const size_t op_colon = watch.rfind(':');
  const size_t slot_colon =
      op_colon == std::string::npos || op_colon == 0 ? std::string::npos : watch.rfind(':', op_colon - 1);
  if (slot_colon == std::string::npos || slot_colon == 0) fail("is not a watch");
  const std::string node_name = watch.substr(0, slot_colon),
                    slot = watch.substr(slot_colon + 1, op_colon - slot_colon - 1),
                    debug_op = watch.substr(op_colon + 1);
  if (debug_op != "DebugIdentity" && debug_op != "DebugNanCount" && debug_op != "DebugNumericSummary")
    fail("names the debug op '" + debug_op + "', not one of DebugIdentity, DebugNanCount, DebugNumericSummary");
  const Node* node = graph.find_node(node_name);
  if (!node) fail("names no node of the graph ('" + node_name + "')");
  if (slot.empty() || slot.size() > 9 || slot.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(slot) >= node->num_outputs())
    fail("has output '" + slot + "', but " + node_name + " has " + std::to_string(node->num_outputs()) + " output(s)");
}

// What follows an out-of-memory error, as TensorFlow: the allocator's figures when the run asked
// for them (report_tensor_allocations_upon_oom), a hint how to ask otherwise.
[[gnu::cold]] std::string out_of_memory_report(bool report_allocations) {
  if (!report_allocations)
    return "\nHint: If you want to see a list of allocated tensors when OOM happens, add "
           "report_tensor_allocations_upon_oom to RunOptions for current allocation info.";
  const Allocator& allocator = *cpu_allocator();
  const AllocatorStats stats = allocator.stats();
  return "\nCurrent usage from device: CPU, allocator: " + allocator.name() + "\n  " +
         std::to_string(stats.bytes_in_use) + " bytes in use by tensors (peak " +
         std::to_string(stats.peak_bytes_in_use) + "), largest allocation " + std::to_string(stats.largest_alloc_size) +
         " bytes, " + std::to_string(stats.bytes_cached) + " bytes cached for reuse";
}

}  // namespace

std::vector<Tensor> Session::run(const FeedList& feeds, const std::vector<Output>& fetches,
                                 const std::vector<Node*>& targets, const RunOptions& options,
                                 RunMetadata* run_metadata) {
  RunInterceptor* interceptor = current_run_interceptor();
  if (!interceptor) [[likely]]
    return run_without_interceptor(feeds, fetches, targets, options, run_metadata);
  const RunCall call{*this, fetches, targets};
  int64_t ticket = 0;
  if (!interceptor->before_run(call, ticket)) {
    std::vector<Tensor> results = run_without_interceptor(feeds, fetches, targets, options, run_metadata);
    interceptor->after_run(call, ticket, nullptr);
    return results;
  }
  RunOptions traced = options;
  traced.trace_level = TraceLevel::kFullTrace;
  RunMetadata own;
  RunMetadata* metadata = run_metadata ? run_metadata : &own;
  std::vector<Tensor> results = run_without_interceptor(feeds, fetches, targets, traced, metadata);
  interceptor->after_run(call, ticket, metadata);
  return results;
}

std::vector<Tensor> Session::run_without_interceptor(const FeedList& feeds, const std::vector<Output>& fetches,
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
  if (options.inter_op_thread_pool != 0)
    throw InvalidArgumentError("Invalid inter_op_thread_pool: " + std::to_string(options.inter_op_thread_pool) +
                               " (a session has one inter-op pool, number 0, of SessionOptions::inter_op_threads "
                               "threads; the caller's thread always works in it)");
  for (const std::string& watch : options.debug_options.debug_tensor_watch_opts) check_debug_watch(graph_, watch);
  try {
    return executor_->run(feeds, fetches, targets, options, run_metadata);
  } catch (const ResourceExhaustedError& e) {
    if (std::string_view(e.what()).find("OOM when allocating") == std::string_view::npos) throw;
    throw ResourceExhaustedError(std::string(e.what()) +
                                 out_of_memory_report(options.report_tensor_allocations_upon_oom));
  }
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

void Session::expect_traced_steps() { executor_->expect_traced_steps(); }
bool Session::expects_traced_steps() const { return executor_->expects_traced_steps(); }

void Session::close() {
  closed_ = true;
  resources_->clear();
}

}  // namespace stepscope
