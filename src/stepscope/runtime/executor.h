// The dataflow executor behind Session::run.
//
// A plan is computed once per (feeds, fetches, targets) signature: the pruned nodes in
// topological order as a flat table (kernel, input slots, successors, initial pending count,
// whether it is worth a thread hop). A step then only copies counters: an atomic pending count
// per node, an atomic reference count per output slot (so intermediate tensors are freed as
// soon as their last consumer is done), in arrays the plan keeps from one step to the next.
// The thread that finishes a node runs one ready successor inline and hands the other expensive
// ones to the pool; cheap ones stay inline.
//
// Tracing (trace_level > NO_TRACE) takes two clock readings per node (around its kernel), writes
// them and the output descriptions into a slot preallocated for the node, and installs an
// AllocationRecorder whose per-thread logs take the allocation events without a lock. After the
// step, StepStats is assembled from those slots and logs with interned names (made once per
// plan): no map, no string built, no allocation per node. With NO_TRACE the only cost is one
// predictable branch per node.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "stepscope/base/thread_beside.h"
#include "stepscope/base/thread_pool.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/resource_store.h"
#include "stepscope/runtime/device_set.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

using FeedList = std::vector<std::pair<Output, Tensor>>;

class Executor {
 public:
  // `devices`: where nodes are placed (resolved once per plan), owned by the caller.
  // `threads`: threads that run ops, counting the caller (1 = no pool; 0 = one per core).
  // `intra_op_threads`: threads one kernel may split over, counting its own (0 = `threads`,
  // sharing the op pool; any other value gets a pool of its own).
  Executor(Graph& graph, ResourceStore& resources, DeviceSet& devices, int threads, int intra_op_threads = 0);
  // With a DeviceSet of its own (the host CPU).
  Executor(Graph& graph, ResourceStore& resources, int threads, int intra_op_threads = 0);
  ~Executor();

  // Feeds, fetches and targets must already be validated to belong to the graph.
  std::vector<Tensor> run(const FeedList& feeds, const std::vector<Output>& fetches, const std::vector<Node*>& targets,
                          const RunOptions& options, RunMetadata* metadata);

  int num_cached_plans() const;

  // Steps will be traced (Session::expect_traced_steps): each plan built from now on has what
  // its first traced step writes made ahead, on a core the executor leaves idle or else when it
  // is built. (A plan of up to 16,384 nodes has it made on an idle core all the same.)
  void expect_traced_steps() { expect_traced_steps_.store(true, std::memory_order_relaxed); }
  bool expects_traced_steps() const { return expect_traced_steps_.load(std::memory_order_relaxed); }

  struct Plan;
  struct RunState;

 private:
  Executor(Graph& graph, ResourceStore& resources, DeviceSet* devices, std::unique_ptr<DeviceSet> own_devices,
           int threads, int intra_op_threads);
  std::shared_ptr<const Plan> plan_for(const FeedList& feeds, const std::vector<Output>& fetches,
                                       const std::vector<Node*>& targets);
  std::shared_ptr<Plan> build_plan(const FeedList& feeds, const std::vector<Output>& fetches,
                                   const std::vector<Node*>& targets) const;
  // What a plan's first traced step writes, made ahead where told or the plan is small (see there).
  void prepare_traced_steps(Plan& plan) const;
  void make_spare_beside(StepStats::ArraySizes sizes, size_t items);
  // The cores a step uses: the caller's and the pools' threads.
  int cores_used() const;
  void process(RunState* state, int first) const;
  // `scheduled`: when the node became ready, traced (-1: already in its record).
  void run_node(RunState* state, int index, RecordingScope* recording, uint32_t thread_id, int64_t scheduled) const;
  static void process_task(void* state, int64_t index);
  [[gnu::cold]] void start_device_tracers() const;
  [[gnu::cold]] void stop_device_tracers() const;
  [[gnu::cold]] void collect_device_tracers(StepStats& stats) const;

  Graph& graph_;
  ResourceStore& resources_;
  std::unique_ptr<DeviceSet> own_devices_;  // only without a DeviceSet given
  DeviceSet& devices_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ThreadPool> own_intra_op_pool_;  // only when intra_op_threads != threads
  ThreadPool* intra_op_pool_ = nullptr;            // pool_, own_intra_op_pool_ or none
  mutable std::mutex cache_mutex_;
  struct KeyHash {
    size_t operator()(const std::vector<int64_t>& key) const;
  };
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Plan>, KeyHash> cache_;
  std::atomic<int64_t> next_step_id_{1};
  std::atomic<bool> expect_traced_steps_{false};
  uint16_t cpu_allocator_index_;  // StepStats::allocator_index
  // The spare StepStats arrays an idle core makes for the next of the steps traced into a new
  // RunMetadata each, kept (StepStats::prepare_spare): one thread, making one for the latest
  // such step's sizes while one is wanted, until the next traced step starts (spare_stopped_).
  std::atomic<bool> spare_stopped_{false};
  std::mutex spare_mutex_;
  StepStats::ArraySizes spare_sizes_;
  bool spare_wanted_ = false, making_spares_ = false;
  ThreadBeside making_spare_;  // last: the others outlive its thread
};

}  // namespace stepscope
