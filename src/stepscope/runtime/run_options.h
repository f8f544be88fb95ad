// RunOptions and RunMetadata of Session::run, with TensorFlow's fields (config.proto).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/runtime/step_stats.h"

namespace stepscope {

enum class TraceLevel : int { kNoTrace = 0, kSoftwareTrace = 1, kHardwareTrace = 2, kFullTrace = 3 };

// tfdbg's options. Kept so that hooks can ask for them and MonitoredSession merges them as
// TensorFlow does; Session::run refuses watches (tfdbg is not part of stepscope).
struct DebugOptions {
  std::vector<std::string> debug_tensor_watch_opts;
  bool reset_disk_byte_usage = false;  // resets tfdbg's dump-size counter: nothing to reset without watches
};

struct RunOptions {
  TraceLevel trace_level = TraceLevel::kNoTrace;
  int64_t timeout_in_ms = 0;  // 0: no deadline; otherwise DeadlineExceededError when exceeded
  // The inter-op pool to run in; a session has one, number 0 (any other is an InvalidArgumentError).
  int32_t inter_op_thread_pool = 0;
  bool output_partition_graphs = false;  // fills RunMetadata::partition_graphs
  DebugOptions debug_options;
  // An out-of-memory error then tells the allocator's figures (otherwise a hint to set this).
  bool report_tensor_allocations_upon_oom = false;
  // Beyond TensorFlow: fill RunMetadata::step_timing (done for traced runs anyway). Off, a run
  // pays nothing for it.
  bool collect_step_timing = false;
};

// The pruned graph a run executed (when output_partition_graphs is asked for), one per device
// with nodes that ran; when every fetch was fed and nothing ran, the fed nodes on their devices
// (TensorFlow's graph of _Arg and _Retval nodes). Names are interned (see StepStats::intern), so
// they outlive the graph.
struct PartitionGraph {
  std::string_view device;
  std::vector<std::string_view> node_names;
};

// Where a step's time went, measured on a run given a RunMetadata that asks for it
// (RunOptions::collect_step_timing) or is traced, for the price of two clock readings per batch
// of nodes a thread takes and two around each input-pipeline op (not per op): cheap enough for
// every step (StepTimingHook asks on every one).
struct StepTiming {
  int64_t wall_ns = 0;   // the executor's part of Session::run, start to finish
  int64_t busy_ns = 0;   // summed over the threads: time running nodes (kernels and the bookkeeping between them)
  int64_t input_ns = 0;  // of which in input-pipeline ops (IteratorGetNext...: waiting for the next batch)
  int64_t idle_ns = 0;   // time no thread ran a node while the step was unfinished (dispatch, wake-ups)
};

// Beyond TensorFlow's RunMetadata: in a traced run, the time of each stage of an input pipeline
// (Dataset's csv, shuffle, batch, map, ...) inside each IteratorGetNext that ran, as tf.data's
// "Iterator::Batch::Shuffle::..." names them; self_ns excludes the stages it pulled from.
struct InputStage {
  std::string node;   // the IteratorGetNext node
  std::string stage;  // "Iterator::repeat::batch::shuffle::csv": the pipeline's outermost first
  int64_t self_ns = 0;
  int64_t calls = 0;
  bool operator==(const InputStage&) const = default;
};

// Adds `stage` to the list: to its entry of the same node and stage when there is one (times and
// calls add up), else as a new entry at the end.
inline void add_input_stage(std::vector<InputStage>& stages, const InputStage& stage) {
  for (InputStage& s : stages) {
    if (s.node == stage.node && s.stage == stage.stage) {
      s.self_ns += stage.self_ns;
      s.calls += stage.calls;
      return;
    }
  }
  stages.push_back(stage);
}

struct RunMetadata {
  StepStats step_stats;  // filled when trace_level > NO_TRACE
  StepTiming step_timing;
  std::vector<PartitionGraph> partition_graphs;
  std::vector<InputStage> input_stages;  // traced runs: by node, then stage
  void clear() {
    step_stats = {};
    step_timing = {};
    partition_graphs.clear();
    input_stages.clear();
  }
};

}  // namespace stepscope
