// What a Profiler knows: the graph model its views need (TensorFlow's TFGraphNode: names, op
// types, inputs, source locations, parameters) and, per added step, each node's statistics
// (TensorFlow's ExecStep) and execution records. Flat arrays indexed by node; names interned
// once. This is also what a saved profile holds (profile_io.h).
//
// Statistics follow tfprof_node.cc: a node's time in a step is the sum over its runs of
// op_end_rel_micros (a run under 1 µs counts 1 µs), as cpu time on a "/cpu:N" or "/gpu:N"
// device (which also counts a run) and as accelerator time on a "stream:all" device; its memory
// comes from the records on its canonical device (the first "/cpu:N" or "/gpu:N" device it was
// seen on; records from another canonical device are dropped): requested = Σ total_bytes +
// temp + persistent, peak = Σ peak_bytes + temp + persistent, residual = Σ live_bytes +
// persistent, output = Σ over outputs of max(allocated, requested) bytes.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepscope/graph/node.h"
#include "stepscope/profiler/memory_kinds.h"
#include "stepscope/profiler/tfprof/node_name_index.h"
#include "stepscope/profiler/tfprof/step_timings.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

class Graph;
struct RunMetadata;
class StepStats;

namespace tfprof {

inline constexpr std::string_view kTFProfRoot = "_TFProfRoot";
inline constexpr std::string_view kTFScopeParent = "_kTFScopeParent";
inline constexpr std::string_view kTFGraphParent = "_TFGraphParent";
inline constexpr std::string_view kTrainableVarType = "_trainable_variables";
// train/variables.h's kTrainableVariables (the profiler layer sits below train: not included).
inline constexpr const char* kTrainableVariablesCollection = "trainable_variables";

// A node's op types (tfprof's: its op, its canonical device, "_trainable_variables"), sorted,
// each once. Views of names its ProfileModel keeps as long as it lives: no allocation a node.
class OpTypes {
 public:
  using value_type = std::string_view;
  const std::string_view* begin() const { return types_.data(); }
  const std::string_view* end() const { return types_.data() + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view operator[](size_t i) const { return types_[i]; }

 private:
  friend class ProfileModel;
  std::array<std::string_view, 3> types_{};
  uint8_t size_ = 0;
};

struct ModelInput {
  int32_t node = -1;  // the producer: index into ProfileModel::nodes
  int32_t slot = -1;  // the producer's output index; -1 for a control input
  // As the graph inferred it, then as the latest step that ran the node saw it (inline dims:
  // no allocation; tfprof_dims makes tfprof's vector of them).
  Shape shape = Shape::unknown_rank();
};

// The most frames a node's stack may have. A captured stack holds at most kMaxCallStackDepth
// (32) return addresses, each a few frames once its inlined calls are listed: a profile file's
// deeper stack is corrupt, and the code view, one level a frame, would be as deep.
inline constexpr size_t kMaxStackFrames = 4096;

struct ModelNode {
  std::string name;
  std::string op;
  int32_t site = -1;  // where the node was created: index into ProfileModel::sites; -1 unknown
  // The code view's frames of the node's creation, outermost first: indices into
  // ProfileModel::frames; empty when unknown (the code view then uses `site` alone).
  std::vector<int32_t> stack;
  // The captured stack not symbolised yet: index into ProfileModel's raw stacks; -1 for none.
  int32_t raw_stack = -1;
  int32_t graph_id = -1;  // the node's id in the Graph; -1 for a node known only from a step
  // Inputs: data inputs in order, then control inputs. A range of the model's one array of
  // them (ProfileModel::inputs_of): an array a node cost a new Profiler of 10^6 nodes ~0.1 µs a
  // node to allocate, and as much to free.
  uint32_t first_input = 0, num_inputs = 0;
  // Whether the inputs' shapes are known (from a graph); a node known only from a step's
  // records has its inputs from its label, and no shapes to show.
  bool input_shapes_known = false;
  bool trainable = false;        // in the trainable variables collection
  std::vector<int64_t> shape;    // a trainable variable's shape (scalar {1}); {} otherwise
  int64_t parameters = 0;        // its number of elements
  int64_t static_float_ops = 0;  // the FLOP rule on the graph's shapes (for nodes never run)
  std::string data_format;       // the "data_format" attribute, if any
  // A collective op (Allreduce, Broadcast, ...): the number of ranks of the job when the graph
  // was added (ops/collective_trace.h gives its MPI call and bytes moved from it); 0 for others.
  int32_t collective_ranks = 0;
  // From the steps:
  int32_t device = -1;    // canonical device: index into ProfileModel::devices
  int32_t steps_run = 0;  // number of steps with a record of the node
  OpTypes op_types;       // set by its ProfileModel (update_op_types)
};

// One node in one step (TensorFlow's ExecStep).
struct NodeStep {
  int32_t node = 0;
  int32_t run_count = 0;
  int64_t accelerator_micros = 0;
  int64_t cpu_micros = 0;
  int64_t requested_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t residual_bytes = 0;
  int64_t output_bytes = 0;
  int64_t float_ops = 0;
  int64_t all_start_micros = 0;   // earliest start (0: none)
  int64_t latest_end_micros = 0;  // latest start + op_end_rel (at least 1 µs)
};

// One NodeExecStats of a step, as the timelines need it.
struct ExecRecord {
  int32_t node = 0;
  int32_t device = 0;  // index into ProfileModel::devices (lowercased)
  uint32_t thread_id = 0;
  int64_t scheduled_ns = 0;
  int64_t all_start_ns = 0;
  int64_t op_start_rel_ns = 0;
  int64_t op_end_rel_ns = 0;
  int64_t all_end_rel_ns = 0;
};

struct StepData {
  int64_t base_ns = 0;
  int64_t base_wall_ns = 0;
  std::vector<NodeStep> nodes;  // sorted by node
  std::vector<ExecRecord> execs;
  // The step's peak memory by kind (memory_kinds.h), when it was added with its graph.
  std::optional<MemoryByKind> memory;
  // The input pipelines' stages timed in the step (RunMetadata::input_stages), by node, stage.
  std::vector<InputStage> input_stages;
};

// What a view reads of one node for the chosen step (or the average over steps).
struct NodeStats {
  int64_t run_count = 0;
  int64_t exec_micros = 0;
  int64_t accelerator_exec_micros = 0;
  int64_t cpu_exec_micros = 0;
  int64_t requested_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t residual_bytes = 0;
  int64_t output_bytes = 0;
  int64_t float_ops = 0;
};
// NodeStats' fields that are sums over runs, in the order saved profiles write them;
// exec_micros is not one: it is always accelerator_exec_micros + cpu_exec_micros.
inline constexpr int64_t NodeStats::*kSummedNodeStats[] = {
    &NodeStats::run_count,       &NodeStats::accelerator_exec_micros,
    &NodeStats::cpu_exec_micros, &NodeStats::requested_bytes,
    &NodeStats::peak_bytes,      &NodeStats::residual_bytes,
    &NodeStats::output_bytes,    &NodeStats::float_ops,
};

// "/job:.../device:CPU:0" lowercased ends in "/cpu:N", "/gpu:N", "/device:cpu:N" or
// "/device:gpu:N" (TensorFlow's IsCanonicalDevice / CountAsCPUTime).
bool is_canonical_device(std::string_view lowercase_device);
// Contains "stream:all" (CountAsAcceleratorTime).
bool counts_as_accelerator_time(std::string_view lowercase_device);
// Contains "gpu" (IsPlacedOnAccelerator).
bool is_placed_on_accelerator(std::string_view lowercase_device);
// tfprof's shape vector: scalar {1}, unknown rank {}, unknown dims -1. tfprof_dims_view is the
// same without a vector (a view of the shape's own dims, or of a static {1}).
std::vector<int64_t> tfprof_dims(const Shape& shape);
std::span<const int64_t> tfprof_dims_view(const Shape& shape);

// What the steps a ProfileModel no longer keeps contributed to one node: how many of them ran
// it, and the sums of their NodeSteps (all_start/latest_end aside).
struct DroppedTotals {
  int64_t steps = 0;
  NodeStats sums;
};

class ProfileModel {
 public:
  ProfileModel() = default;
  // Not copyable: its nodes' op types are views of names it keeps (a move keeps them in place).
  ProfileModel(const ProfileModel&) = delete;
  ProfileModel& operator=(const ProfileModel&) = delete;
  ProfileModel(ProfileModel&&) = default;
  ProfileModel& operator=(ProfileModel&&) = default;

  std::vector<ModelNode> nodes;
  std::vector<std::string> devices;        // lowercased device names seen in steps (TensorFlow's keys)
  std::vector<std::string> device_labels;  // the same as the steps spelled them (for timelines)
  SourceLocationTable frames;              // the frames of the nodes' stacks, each once
  SourceLocationTable sites;               // the nodes' creation sites, each once
  std::map<int64_t, StepData> steps;
  // At most this many steps are kept (0: all). When add_step goes past it, the lowest step is
  // dropped and folded into `dropped`, so the memory stays bounded over any run length while
  // the averages (stats(-1)) still cover every step ever added. A step added again after it
  // was dropped counts as another step.
  size_t max_steps = 0;
  std::vector<DroppedTotals> dropped;    // indexed by node; empty until a step is dropped
  StepTimings step_timings;              // every run's timing (Profiler::add_step_timing), traced or not
  bool miss_accelerator_stream = false;  // a step had GPU scheduling but no stream:all stats
  std::string stepscope_version;         // of the program that saved the profile ("" before 0.1)
  // Bumped when nodes are added (the views' structures are rebuilt) / when steps change.
  uint64_t structure_version = 0;
  uint64_t steps_version = 0;

  // Adds the graph's nodes not known yet (the graph may have grown since the last call).
  void sync_graph(const Graph& graph);
  // TensorFlow's AddRunMeta: `graph` (may be null for a loaded profile) gives float ops and
  // the shapes the step saw. Diagnostics (TensorFlow's stderr lines) go to `log`.
  void add_step(int64_t step, const RunMetadata& metadata, const Graph* graph, std::ostream& log);

  // Every node's statistics for `step` (>= 0) or their average over the steps (-1; per node,
  // over the steps it ran in, in integers as TensorFlow). A node never run has its static float
  // ops.
  std::vector<NodeStats> stats(int64_t step) const;

  int32_t find(std::string_view name) const;  // -1 when absent
  // The nodes' indices in name order (the views list nodes so).
  std::vector<int32_t> order_by_name() const;
  int32_t add_node(ModelNode node);  // appends and indexes it; returns its index
  int32_t intern_device(std::string_view device);
  bool has_code_traces() const;
  int32_t intern_frame(const SourceLocation& frame) { return frames.intern(frame); }
  // The site's index in `sites`; -1 for an unknown one (no file, line or function).
  int32_t intern_site(const SourceLocation& site);
  // The node's creation site (empty when unknown).
  const SourceLocation& site_of(const ModelNode& node) const;
  // Symbolises the captured stacks of the nodes synced since the last call (profiler/symbolizer.h)
  // into their `stack`s; bumps structure_version when a stack changed. Done when a code view or
  // a saved profile needs the stacks, not when the graph is synced.
  void symbolize_stacks();
  // Folds the lowest steps into `dropped` until at most max_steps remain.
  void drop_old_steps();
  // Rebuilds what is derived from the steps (steps_run, op types) after loading.
  void recompute_derived();
  // Sets the node's op types from its op, device and trainable flag.
  void update_op_types(ModelNode& node);
  // The node's inputs (see ModelNode::first_input).
  std::span<const ModelInput> inputs_of(const ModelNode& node) const {
    return {inputs_.data() + node.first_input, node.num_inputs};
  }
  std::span<ModelInput> inputs_of(const ModelNode& node) {
    return {inputs_.data() + node.first_input, node.num_inputs};
  }
  // Gives `node` (of this model, or one about to be added to it) these inputs, in place of its own.
  void set_inputs(ModelNode& node, std::span<const ModelInput> inputs);

 private:
  std::string_view name_of(int32_t index) const { return nodes[index].name; }
  // Indexes nodes.back(), just added (by_name: in by_name_ too).
  int32_t index_last_node(bool by_name = true);
  NodeNameIndex by_name_;
  std::vector<int32_t> by_graph_id_;  // graph node id -> node index
  std::vector<ModelInput> inputs_;    // every node's inputs, a range each
  size_t replaced_inputs_ = 0;        // in inputs_, no node's since sync_graph gave it others
  void drop_replaced_inputs();        // where they are most of inputs_
  uint64_t synced_graph_ = 0;         // Graph::id() of the graph synced last
  // Captured stacks (return addresses) of the synced graphs' nodes, each once, and whether each
  // was symbolised (into symbolized_[i]); raw_of_graph_stack_: the synced graph's stack ids.
  std::vector<std::vector<uintptr_t>> raw_stacks_;
  std::vector<SourceLocation> raw_sites_;  // the site of the first node with each raw stack
  std::vector<char> raw_symbolized_;
  std::vector<std::vector<int32_t>> symbolized_;
  std::unordered_map<int32_t, int32_t> raw_of_graph_stack_;
  bool stacks_pending_ = false;
  // The names op types view (ops and devices), each once; a deque keeps them in place.
  std::string_view intern_type_name(std::string_view name);
  std::deque<std::string> type_names_;
  std::unordered_map<std::string_view, int32_t> type_name_index_;
  std::string_view last_type_name_;                  // interned last: nodes made in a loop share their op
  std::vector<std::string_view> device_type_names_;  // devices[i]'s interned name, once looked up
};

}  // namespace tfprof
}  // namespace stepscope
