// Timeline's inside, shared by timeline.cc (layout, dataflow, writing) and timeline_memory.cc
// (tensor lifetimes, allocator counters and maximums). Not part of the API.
#pragma once

#include <cstdint>
#include <functional>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/base/json_out.h"
#include "stepscope/graph/graph.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace timeline_internal {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// Name → index of a name in `names`, open addressing: 8 bytes a slot (the table of a
// 10,000-node step stays in L2), names compared only when their hashes' top bits match.
class NameIndex {
 public:
  void reset(std::span<const std::string_view> names) {
    size_t cap = 16;
    while (cap < 2 * names.size()) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    names_ = names;
    // A later name equal to an earlier one wins (as TensorFlow's dict does).
    for (size_t i = 0; i < names.size(); ++i) {
      const size_t h = hash(names[i]);
      for (size_t at = h & mask_;; at = (at + 1) & mask_) {
        Slot& slot = slots_[at];
        if (slot.value < 0 || (slot.tag == tag(h) && names_[slot.value] == names[i])) {
          slot = {tag(h), static_cast<int32_t>(i)};
          break;
        }
      }
    }
  }
  int32_t find(std::string_view key) const {
    const size_t h = hash(key);
    for (size_t at = h & mask_;; at = (at + 1) & mask_) {
      const Slot& slot = slots_[at];
      if (slot.value < 0) return -1;
      if (slot.tag == tag(h) && names_[slot.value] == key) return slot.value;
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t value = -1;
  };
  static size_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  static uint32_t tag(size_t h) { return static_cast<uint32_t>(h >> 32); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::span<const std::string_view> names_;
};

}  // namespace timeline_internal

struct Timeline::Impl {
  struct Step {
    const StepStats* stats;
    int64_t shift;               // trace-relative ns = the step's clock + shift
    int64_t start = 0, end = 0;  // trace-relative extent
    int64_t number = -1;
    int32_t lane = 0;  // of the step's slice in a window
    size_t node_begin = 0, node_end = 0;
  };
  struct Node {
    const NodeExecStats* ns;
    const stepscope::Node* graph_node;  // null without the graph or when it lacks the node
    std::string_view op;
    int64_t start, end;  // trace-relative ns
    int64_t flops = -1;
    uint32_t input_begin, num_inputs;
    uint32_t tensor_begin;  // its outputs' tensors: tensor_begin + output index
    int32_t device, lane, step;
  };
  struct Input {
    std::string_view name;
    int32_t tensor;  // the producer's tensor; -1 when unknown
  };
  struct Tensor {
    uint32_t node, index;
    int64_t create, destroy;  // trace-relative ns (N and D); destroy set by the memory analysis
    int64_t last_unref;       // TensorFlow's estimate of the end of its life (the dataflow's)
    bool recorded = false;    // lifetime from the allocator's records
    // The two analyses write fields of their own (they may run on two threads at once).
    int64_t end_of_life() const { return recorded ? destroy : last_unref; }
  };
  // One allocation (with its free, if the step saw it) of one allocator.
  struct Interval {
    int64_t alloc, free;  // trace-relative ns; free = kNever when still live at the step's end
    int64_t bytes;
    int32_t tensor = -1;
    uint32_t alloc_pos = 0, free_pos = std::numeric_limits<uint32_t>::max();
  };
  struct Point {
    int64_t time;
    int64_t delta;
    uint32_t interval;
  };
  // One allocator in one step: its records in time order, and the running total after each.
  struct Series {
    std::string_view allocator;
    int32_t step;
    std::vector<Point> points;
    std::vector<int64_t> totals;
    size_t max_pos = 0;
    int64_t max_bytes = -1;
  };

  const Graph* graph = nullptr;
  bool window = false;
  std::vector<Step> steps;
  std::vector<std::string_view> devices;
  std::vector<int32_t> num_lanes;  // per device
  std::vector<char> gpu_tracer;    // per device: is_gpu_tracer_device
  std::vector<Node> nodes;
  std::vector<std::string_view> names;  // of the nodes (what inputs are looked up in)
  std::vector<Input> inputs;
  std::deque<std::string> input_names;  // "node:k" of the graph's inputs (Input::name views them)
  std::vector<Tensor> tensors;
  std::vector<Interval> intervals;
  std::vector<Series> series;
  int64_t base_wall_ns = 0;  // wall clock of trace time 0 (0: unknown)
  int32_t num_step_lanes = 0;
  mutable std::once_flag dataflow_done, memory_done, flops_done;

  void build(std::span<const StepStats* const> window_steps, std::span<const int64_t> numbers);
  // lane_lists: each device's lanes (the end of each lane's last node), kept across the steps
  // of a window so that later steps reuse the lanes.
  void analyze_step(size_t k, std::vector<std::vector<int64_t>>& lane_lists);
  void resolve_dataflow(size_t k, timeline_internal::NameIndex& index);
  void analyze_memory(size_t k);
  template <typename SeriesOf>
  void memory_from_outputs(size_t k, SeriesOf& series_of);
  // The dataflow (inputs resolved, tensors' last uses) and memory analyses, done when first
  // needed. The memory analysis needs the dataflow only for a step without allocation records.
  void need_dataflow() const;
  void need_memory() const;
  void need_flops() const;  // the graph nodes' FLOPs on the shapes each step saw
  void write(json_out::Sink& s, const ChromeTraceOptions& options) const;
  void write_snapshot(json_out::Sink& s, const Tensor& t) const;
  void write_tensor_name(json_out::Sink& s, const Tensor& t) const {
    s.str_body(nodes[t.node].ns->node_name);
    if (t.index) {
      s.ch(':');
      s.u64(t.index);
    }
  }
  std::string tensor_name(const Tensor& t) const {
    std::string name(nodes[t.node].ns->node_name);
    if (t.index) name += ":" + std::to_string(t.index);
    return name;
  }
  int pid_compute(int32_t device) const { return 2 * device + 1; }
  int pid_tensors(int32_t device) const { return 2 * device + 2; }
  int pid_steps() const { return 2 * static_cast<int>(devices.size()) + 1; }
  std::map<std::string, AllocationMaximum> maximums() const;
};

}  // namespace stepscope
