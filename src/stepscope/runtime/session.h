// Session: runs a graph. run() prunes the graph to what the fetches and targets need, caches
// the execution plan per (feeds, fetches, targets) signature, and executes independent nodes in
// parallel. It is safe to call run() from several threads at once.
//
// Errors (all thrown from run(), the session stays usable): a placeholder in the pruned graph
// that is not fed, a feed whose dtype or shape does not match, an unknown fetch, a fetch or
// feed from another graph, and any kernel failure on a worker thread (e.g. CheckNumerics) —
// each names the node and op.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/resource_store.h"
#include "stepscope/runtime/device_set.h"
#include "stepscope/runtime/executor.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

struct SessionOptions {
  // Threads that execute ops, counting the caller of run(): 0 = one per core; 1 = everything
  // runs on the calling thread.
  int inter_op_threads = 0;
  // Threads one large kernel may split its work over, counting the thread that runs it:
  // 0 = inter_op_threads (one pool shared by both); 1 = kernels never split. A value other than
  // inter_op_threads gets a pool of its own. Results are the same bitwise for any value.
  int intra_op_threads = 0;
};

class Session {
 public:
  explicit Session(Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the graph; returns one tensor per fetch, in order. `targets` are run for their effect.
  // A RunInterceptor installed (run_interceptor.h, e.g. a ProfileContext) may trace the run.
  std::vector<Tensor> run(const FeedList& feeds, const std::vector<Output>& fetches,
                          const std::vector<Node*>& targets = {}, const RunOptions& options = {},
                          RunMetadata* run_metadata = nullptr);
  std::vector<Tensor> run(const std::vector<Output>& fetches) { return run({}, fetches); }
  Tensor run(Output fetch, const FeedList& feeds = {}) { return run(feeds, {fetch}).front(); }
  void run(Node* target, const FeedList& feeds = {}) { run(feeds, {}, {target}); }
  // Fetches by name ("layer1/MatMul:0" or "layer1/MatMul"); NotFoundError for unknown names.
  std::vector<Tensor> run_by_name(const FeedList& feeds, const std::vector<std::string>& fetch_names,
                                  const std::vector<std::string>& target_names = {});

  Graph& graph() const { return graph_; }
  ResourceStore& resources() { return *resources_; }
  // The devices nodes are placed on (the host's CPU; see device_set.h).
  DeviceSet& device_set() { return *devices_; }
  const SessionOptions& options() const { return options_; }
  // Says that steps will be traced (ProfilerHook and FlightRecorderHook say it when the session
  // is made, a ProfileContext at each run it sees): each plan built from then on has what its first traced step writes
  // made ahead (its names and a step's worth of trace arrays, ~540 bytes a node), on a core the session's threads leave
  // idle or else while the plan is built. A plan's first traced step otherwise writes that memory new, which costs more
  // than tracing itself (BENCHMARKS.md, issue 16). Untold, a plan of up to 16,384 nodes is made ready all the same
  // where a core is left idle (~570 bytes a node, never on the caller's time); a bigger one only when told. A traced
  // step that comes before that is made (FlightRecorderHook traces a plan's first run, ProfilerHook its second) stops
  // it and makes its own.
  void expect_traced_steps();
  bool expects_traced_steps() const;
  // Releases the session's state; further run() calls raise CancelledError.
  void close();
  bool closed() const { return closed_; }

 private:
  std::vector<Tensor> run_without_interceptor(const FeedList& feeds, const std::vector<Output>& fetches,
                                              const std::vector<Node*>& targets, const RunOptions& options,
                                              RunMetadata* run_metadata);
  Graph& graph_;
  SessionOptions options_;
  std::unique_ptr<ResourceStore> resources_;
  std::unique_ptr<DeviceSet> devices_;
  std::unique_ptr<Executor> executor_;
  bool closed_ = false;
};

}  // namespace stepscope
