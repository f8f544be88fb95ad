#include "stepscope/profiler/timeline.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <string_view>

#include "stepscope/base/json_out.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/profiler/gpu_activity.h"
#include "stepscope/profiler/node_cost.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

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

void append_dims(json_out::Sink& s, const Shape& shape) {
  if (!shape.known_rank()) {
    s.lit("<unknown>");
    return;
  }
  s.ch('[');
  const auto dims = shape.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s.ch(',');
    if (dims[i] < 0) {
      s.ch('?');
    } else {
      s.i64(dims[i]);
    }
  }
  s.ch(']');
}

}  // namespace

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
    int64_t create, destroy;  // trace-relative ns (N and D)
    int64_t last_unref;       // TensorFlow's estimate of the end of its life
    bool recorded = false;    // lifetime from the allocator's records
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
  mutable std::once_flag dataflow_done, memory_done;

  void build(std::span<const StepStats* const> window_steps, std::span<const int64_t> numbers);
  // The graph's node that `ns` recorded: by id when the names agree, else by name; null if none.
  const stepscope::Node* node_of(const NodeExecStats& ns) const {
    if (ns.node_id >= 0 && ns.node_id < graph->num_nodes()) {
      const stepscope::Node* candidate = graph->node(ns.node_id);
      if (candidate->name() == ns.node_name) return candidate;
    }
    return ns.node_name.empty() ? nullptr : graph->find_node(ns.node_name);
  }
  // lane_lists: each device's lanes (the end of each lane's last node), kept across the steps
  // of a window so that later steps reuse the lanes.
  void analyze_step(size_t k, std::vector<std::vector<int64_t>>& lane_lists);
  void resolve_dataflow(size_t k, NameIndex& index);
  void analyze_memory(size_t k);
  template <typename SeriesOf>
  void memory_from_outputs(size_t k, SeriesOf& series_of);
  // The dataflow (inputs resolved) and memory analyses, done when a trace first needs them.
  void need_dataflow() const;
  void need_memory() const;
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

void Timeline::Impl::build(std::span<const StepStats* const> window_steps, std::span<const int64_t> numbers) {
  // Each step's origin on its own clock: its base, or its first node when it has none (a
  // StepStats built by hand); then every step placed on step 0's clock. Steps of one process
  // share the monotonic clock; others (read from files) are placed by their wall clocks.
  struct Origin {
    int64_t mono, wall;
  };
  std::vector<Origin> origins;
  size_t num_nodes = 0;
  for (const StepStats* st : window_steps) {
    int64_t origin = st->base_ns != 0 ? st->base_ns : kNever;
    for (const auto& dev : st->dev_stats) {
      num_nodes += dev.node_stats.size();
      for (const auto& ns : dev.node_stats) origin = std::min(origin, ns.all_start_ns);
    }
    if (origin == kNever) origin = st->base_ns;
    origins.push_back({origin, st->base_wall_ns != 0 ? st->base_wall_ns + (origin - st->base_ns) : 0});
  }
  int64_t min_shifted = kNever;
  for (size_t k = 0; k < window_steps.size(); ++k) {
    int64_t shift = -origins[0].mono;
    if (k > 0 && origins[0].wall != 0 && origins[k].wall != 0) {
      const int64_t skew = (origins[k].wall - origins[k].mono) - (origins[0].wall - origins[0].mono);
      if (std::llabs(skew) > 1'000'000'000) shift = (origins[k].wall - origins[0].wall) - origins[k].mono;
    }
    steps.push_back({window_steps[k], shift});
    steps.back().number = k < numbers.size() ? numbers[k] : -1;
    min_shifted = std::min(min_shifted, origins[k].mono + shift);
  }
  if (!steps.empty()) {
    for (Step& st : steps) st.shift -= min_shifted;  // time 0 is the earliest step's origin
    if (origins[0].wall != 0) base_wall_ns = origins[0].wall + min_shifted;
  }

  nodes.reserve(num_nodes);
  names.reserve(num_nodes);
  inputs.reserve(num_nodes * 2);
  tensors.reserve(num_nodes + num_nodes / 2);
  std::vector<std::vector<int64_t>> lane_lists;
  for (size_t k = 0; k < steps.size(); ++k) analyze_step(k, lane_lists);
  // The steps' own slices, on lanes of their own should two overlap (concurrent runs).
  std::vector<int64_t> lanes;
  for (Step& st : steps) {
    size_t lane = 0;
    while (lane < lanes.size() && !(lanes[lane] < st.start)) ++lane;
    if (lane == lanes.size()) lanes.push_back(st.end);
    lanes[lane] = st.end;
    st.lane = static_cast<int32_t>(lane);
  }
  num_step_lanes = static_cast<int32_t>(lanes.size());
}

void Timeline::Impl::analyze_step(size_t k, std::vector<std::vector<int64_t>>& lane_lists) {
  Step& step = steps[k];
  const StepStats& st = *step.stats;
  step.node_begin = nodes.size();
  size_t num_step_nodes = 0;
  for (const auto& dev : st.dev_stats) num_step_nodes += dev.node_stats.size();
  std::unique_ptr<RunShapes> shapes;
  if (graph && num_step_nodes) shapes = std::make_unique<RunShapes>(*graph, st);

  int64_t step_end = st.base_ns + step.shift;
  for (const auto& dev : st.dev_stats) {
    auto it = std::find(devices.begin(), devices.end(), dev.device);
    const int32_t device = static_cast<int32_t>(it - devices.begin());
    if (it == devices.end()) {
      devices.push_back(dev.device);
      num_lanes.push_back(0);
      gpu_tracer.push_back(is_gpu_tracer_device(dev.device));
      lane_lists.emplace_back();
    }
    std::vector<int64_t>& lanes = lane_lists[device];
    const bool gpu_tracer = this->gpu_tracer[device];
    for (const NodeExecStats& ns : dev.node_stats) {
      Node n{};
      n.ns = &ns;
      n.start = ns.all_start_ns + step.shift;
      n.end = n.start + std::max<int64_t>(0, ns.all_end_rel_ns);
      n.device = device;
      n.step = static_cast<int32_t>(k);
      step_end = std::max(step_end, n.end);
      // The first lane whose last node ended strictly before this one starts (TensorFlow's
      // rule, in ns).
      size_t lane = 0;
      while (lane < lanes.size() && !(lanes[lane] < n.start)) ++lane;
      if (lane == lanes.size()) lanes.push_back(n.end);
      lanes[lane] = n.end;
      n.lane = static_cast<int32_t>(lane);
      num_lanes[device] = std::max<int32_t>(num_lanes[device], static_cast<int32_t>(lanes.size()));

      // With the graph, the node's op and data inputs come from it (the label is only text);
      // without it (a file), from the label.
      const stepscope::Node* graph_node = graph ? node_of(ns) : nullptr;
      const ParsedNodeLabel label = graph_node ? ParsedNodeLabel{} : parse_node_label(ns.timeline_label);
      std::string_view op = graph_node           ? graph_node->op_type()
                            : label.valid        ? label.op
                            : ns.op_type.empty() ? std::string_view("unknown")
                                                 : ns.op_type;
      // A kernel or copy: the op from its "<name>:<op>" annotation (TensorFlow's timeline).
      if (gpu_tracer && !graph_node && !gpu_op_of(ns.timeline_label, ns.node_name).op.empty())
        op = gpu_op_of(ns.timeline_label, ns.node_name).op;
      n.input_begin = static_cast<uint32_t>(inputs.size());
      if (ns.node_name == "RecvTensor") {
        op = "RecvTensor";
      } else if (graph_node && !gpu_tracer) {
        for (const Output& in : graph_node->inputs())
          inputs.push_back(
              {in.index == 0 ? std::string_view(in.node->name()) : input_names.emplace_back(in.name()), -1});
      } else if (label.valid && !gpu_tracer) {
        std::string_view rest = label.inputs;
        for (ParsedNodeLabelInput in; next_node_label_input(rest, in);) inputs.push_back({in.text, -1});
      }
      n.op = op;
      n.num_inputs = static_cast<uint32_t>(inputs.size() - n.input_begin);
      n.tensor_begin = static_cast<uint32_t>(tensors.size());
      for (uint32_t i = 0; i < ns.output.size(); ++i)
        tensors.push_back({static_cast<uint32_t>(nodes.size()), i, n.start, n.end, n.end});
      if (shapes && graph_node) n.flops = node_float_ops(*graph_node, *shapes);
      nodes.push_back(n);
      names.push_back(ns.node_name);
    }
  }
  step.node_end = nodes.size();
  step.start = st.base_ns != 0 || num_step_nodes == 0 ? st.base_ns + step.shift : kNever;
  for (size_t i = step.node_begin; i < step.node_end; ++i) step.start = std::min(step.start, nodes[i].start);
  step.end = std::max(step_end, step.start);
}

// Each input → the producer's tensor ("name" is output 0, "name:i" output i; an unknown name
// loses what follows its last "/_", as partitioning's Send/Recv names do), and TensorFlow's
// estimate of each tensor's last use.
void Timeline::Impl::resolve_dataflow(size_t k, NameIndex& index) {
  const Step& step = steps[k];
  index.reset(std::span(names).subspan(step.node_begin, step.node_end - step.node_begin));
  auto tensor_of = [&](std::string_view name) -> int32_t {
    int32_t p = index.find(name);
    if (p >= 0) p += static_cast<int32_t>(step.node_begin);
    uint32_t slot = 0;
    if (p < 0) {
      const size_t colon = name.rfind(':');
      if (colon == std::string_view::npos || colon + 1 == name.size()) return -1;
      for (size_t c = colon + 1; c < name.size(); ++c) {
        if (name[c] < '0' || name[c] > '9') return -1;
        slot = slot * 10 + static_cast<uint32_t>(name[c] - '0');
        if (slot > 1'000'000) return -1;
      }
      p = index.find(name.substr(0, colon));
      if (p < 0) return -1;
      p += static_cast<int32_t>(step.node_begin);
    }
    if (slot >= nodes[p].ns->output.size()) return -1;
    return static_cast<int32_t>(nodes[p].tensor_begin + slot);
  };
  for (size_t i = step.node_begin; i < step.node_end; ++i) {
    const Node& n = nodes[i];
    for (uint32_t j = n.input_begin; j < n.input_begin + n.num_inputs; ++j) {
      Input& in = inputs[j];
      int32_t t = tensor_of(in.name);
      if (t < 0) {
        const size_t cut = in.name.rfind("/_");
        if (cut != std::string_view::npos) t = tensor_of(in.name.substr(0, cut));
      }
      in.tensor = t;
      // TensorFlow's unref at the consumer's end - 1 (here 1 ns, not 1 µs).
      if (t >= 0) tensors[t].last_unref = std::max(tensors[t].last_unref, std::max(n.start, n.end - 1));
    }
  }
  for (size_t i = step.node_begin; i < step.node_end; ++i) {
    const Node& n = nodes[i];
    for (size_t t = n.tensor_begin; t < n.tensor_begin + n.ns->output.size(); ++t)
      tensors[t].destroy = tensors[t].last_unref;
  }
}

// The step's allocation records, per allocator, paired into buffers (an allocation with its
// free); each output tensor takes the buffer it was allocated in, so its object lives exactly
// as long as its memory did.
void Timeline::Impl::analyze_memory(size_t k) {
  Step& step = steps[k];
  const size_t first_series = series.size();
  auto series_of = [&](std::string_view allocator) -> Series& {
    for (size_t i = first_series; i < series.size(); ++i)
      if (series[i].allocator == allocator) return series[i];
    series.push_back({allocator, static_cast<int32_t>(k), {}, {}});
    return series.back();
  };
  std::vector<uint32_t> open;  // intervals of the current node and allocator not yet freed
  struct Alias {
    std::string_view allocator;
    int64_t id;
    int32_t tensor;
    bool operator<(const Alias& o) const { return id != o.id ? id < o.id : allocator < o.allocator; }
  };
  std::vector<Alias> aliases;
  bool has_records = false;
  for (size_t i = step.node_begin; i < step.node_end && !has_records; ++i)
    for (const AllocatorMemoryUsed& m : nodes[i].ns->memory) has_records |= !m.allocation_records.empty();
  if (!has_records) memory_from_outputs(k, series_of);
  for (size_t i = step.node_begin; i < step.node_end && has_records; ++i) {
    const Node& n = nodes[i];
    const NodeExecStats& ns = *n.ns;
    for (const AllocatorMemoryUsed& m : ns.memory) {
      if (m.allocation_records.empty()) continue;
      Series& s = series_of(m.allocator_name);
      const uint32_t first_interval = static_cast<uint32_t>(intervals.size());
      open.clear();
      for (const AllocationRecord& r : m.allocation_records) {
        const int64_t t = r.alloc_ns + step.shift;
        if (r.alloc_bytes >= 0) {
          open.push_back(static_cast<uint32_t>(intervals.size()));
          s.points.push_back({t, r.alloc_bytes, static_cast<uint32_t>(intervals.size())});
          intervals.push_back({t, kNever, r.alloc_bytes});
          continue;
        }
        // A free: of the latest open buffer of that size (buffers of one size allocated at
        // the same moment are interchangeable).
        auto it = std::find_if(open.rbegin(), open.rend(),
                               [&](uint32_t iv) { return intervals[iv].bytes == -r.alloc_bytes; });
        if (it == open.rend()) continue;  // a free without its allocation: not this step's buffer
        intervals[*it].free = t;
        s.points.push_back({t, r.alloc_bytes, *it});
        open.erase(std::next(it).base());
      }
      // Outputs allocated here take the buffer of their size that lived longest.
      for (uint32_t o = 0; o < ns.output.size(); ++o) {
        const AllocationDescription& ad = ns.output[o].tensor_description.allocation_description;
        if (ad.allocator_name != m.allocator_name) continue;
        int32_t best = -1;
        for (uint32_t iv = first_interval; iv < intervals.size(); ++iv) {
          const Interval& v = intervals[iv];
          if (v.tensor >= 0 || v.bytes != ad.requested_bytes) continue;
          if (best < 0 || v.free > intervals[best].free) best = static_cast<int32_t>(iv);
        }
        if (best < 0) continue;
        const int32_t t = static_cast<int32_t>(n.tensor_begin + o);
        Interval& v = intervals[best];
        v.tensor = t;
        Tensor& tensor = tensors[t];
        tensor.recorded = true;
        tensor.create = v.alloc;
        tensor.destroy = v.free == kNever ? step.end : v.free;
        if (ad.allocation_id != 0) aliases.push_back({ad.allocator_name, ad.allocation_id, t});
      }
    }
  }
  // Outputs that forward a buffer allocated in the step (Identity, Reshape, ...) live as long
  // as that buffer.
  std::sort(aliases.begin(), aliases.end());
  if (!aliases.empty()) {
    for (size_t i = step.node_begin; i < step.node_end; ++i) {
      const Node& n = nodes[i];
      for (uint32_t o = 0; o < n.ns->output.size(); ++o) {
        Tensor& tensor = tensors[n.tensor_begin + o];
        if (tensor.recorded) continue;
        const AllocationDescription& ad = n.ns->output[o].tensor_description.allocation_description;
        const Alias key{ad.allocator_name, ad.allocation_id, -1};
        auto it = std::lower_bound(aliases.begin(), aliases.end(), key);
        if (it == aliases.end() || key < *it || ad.allocation_id == 0) continue;
        const Tensor& owner = tensors[it->tensor];
        tensor.recorded = true;
        tensor.create = std::max(n.start, owner.create);
        tensor.destroy = std::max(tensor.create, owner.destroy);
      }
    }
  }
  // Running totals, in time order (a node's records are in order already; a stable sort keeps
  // each allocation before its free at equal times). The maximum: first reached wins.
  for (size_t i = first_series; i < series.size(); ++i) {
    Series& s = series[i];
    std::stable_sort(s.points.begin(), s.points.end(), [](const Point& a, const Point& b) { return a.time < b.time; });
    s.totals.resize(s.points.size());
    int64_t total = 0;
    for (size_t p = 0; p < s.points.size(); ++p) {
      const Point& pt = s.points[p];
      // Saturating: the byte counts of a hostile file must not overflow (real ones are far below).
      if (__builtin_add_overflow(total, pt.delta, &total))
        total = pt.delta > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
      s.totals[p] = total;
      if (pt.delta >= 0) {
        intervals[pt.interval].alloc_pos = static_cast<uint32_t>(p);
      } else {
        intervals[pt.interval].free_pos = static_cast<uint32_t>(p);
      }
      if (total > s.max_bytes) {
        s.max_bytes = total;
        s.max_pos = p;
      }
    }
  }
}

// TensorFlow's rules for a step without allocation records (what most RunMetadata files real
// TensorFlow writes hold): each output is a buffer of its requested_bytes in its allocator,
// allocated when its producer starts and freed at its last use (the tensor's last_unref); at
// equal times frees come first, then smaller allocations, then by tensor name (TF's tuple sort).
template <typename SeriesOf>
void Timeline::Impl::memory_from_outputs(size_t k, SeriesOf& series_of) {
  const Step& step = steps[k];
  const size_t first_series = series.size();
  for (size_t i = step.node_begin; i < step.node_end; ++i) {
    const Node& n = nodes[i];
    for (uint32_t o = 0; o < n.ns->output.size(); ++o) {
      const AllocationDescription& ad = n.ns->output[o].tensor_description.allocation_description;
      if (ad.allocator_name.empty()) continue;  // no description: no memory to draw
      Series& sr = series_of(ad.allocator_name);
      const int32_t t = static_cast<int32_t>(n.tensor_begin + o);
      const Tensor& tensor = tensors[t];
      const auto iv = static_cast<uint32_t>(intervals.size());
      const int64_t free = std::max(tensor.create, tensor.last_unref);
      intervals.push_back({tensor.create, free, ad.requested_bytes, t});
      sr.points.push_back({tensor.create, ad.requested_bytes, iv});
      sr.points.push_back({free, -ad.requested_bytes, iv});
    }
  }
  for (size_t i = first_series; i < series.size(); ++i) {
    std::vector<Point>& points = series[i].points;
    std::sort(points.begin(), points.end(), [&](const Point& a, const Point& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.delta != b.delta) return a.delta < b.delta;
      return tensor_name(tensors[intervals[a.interval].tensor]) < tensor_name(tensors[intervals[b.interval].tensor]);
    });
  }
}

// Logically const: results computed once, on first use (what the constructor leaves out, so a
// trace of ops alone does not pay for them).
void Timeline::Impl::need_dataflow() const {
  std::call_once(dataflow_done, [this] {
    auto* self = const_cast<Impl*>(this);
    NameIndex index;
    for (size_t k = 0; k < steps.size(); ++k) self->resolve_dataflow(k, index);
  });
}

void Timeline::Impl::need_memory() const {
  need_dataflow();
  std::call_once(memory_done, [this] {
    auto* self = const_cast<Impl*>(this);
    for (size_t k = 0; k < steps.size(); ++k) self->analyze_memory(k);
  });
}

std::map<std::string, AllocationMaximum> Timeline::Impl::maximums() const {
  need_memory();
  std::map<std::string, AllocationMaximum> result;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    auto [it, inserted] = result.try_emplace(std::string(s.allocator));
    AllocationMaximum& m = it->second;
    if (!inserted && s.max_bytes <= m.num_bytes) continue;
    const Step& step = steps[s.step];
    m.timestamp_ns = s.points[s.max_pos].time - step.shift;
    m.num_bytes = s.max_bytes;
    m.tensors.clear();
    for (const Point& p : s.points) {
      if (p.delta < 0) continue;
      const Interval& v = intervals[p.interval];
      if (v.tensor < 0 || v.alloc_pos > s.max_pos || v.free_pos <= s.max_pos) continue;
      m.tensors.push_back(tensor_name(tensors[v.tensor]));
    }
    std::sort(m.tensors.begin(), m.tensors.end());
    m.tensors.erase(std::unique(m.tensors.begin(), m.tensors.end()), m.tensors.end());
  }
  return result;
}

void Timeline::Impl::write_snapshot(json_out::Sink& s, const Tensor& t) const {
  // TensorFlow's str(TensorDescription) with the double quotes removed.
  const TensorDescription& td = nodes[t.node].ns->output[t.index].tensor_description;
  const AllocationDescription& ad = td.allocation_description;
  s.lit("{\"tensor_description\":\"dtype: ");
  s.str_body(tf_datatype_name(td.dtype));
  s.lit("\\nshape {\\n");
  if (!td.shape.known_rank()) s.lit("  unknown_rank: true\\n");
  for (int64_t d : td.shape.dims()) {
    s.lit("  dim {\\n    size: ");
    s.i64(d);
    s.lit("\\n  }\\n");
  }
  s.lit("}\\nallocation_description {\\n");
  auto field = [&](std::string_view name, int64_t v) {
    if (!v) return;
    s.lit("  ");
    s.raw(name);
    s.lit(": ");
    s.i64(v);
    s.lit("\\n");
  };
  field("requested_bytes", ad.requested_bytes);
  field("allocated_bytes", ad.allocated_bytes);
  if (!ad.allocator_name.empty()) {
    s.lit("  allocator_name: ");
    std::string name(ad.allocator_name);  // quotes are removed, as TensorFlow does
    std::erase(name, '"');
    s.str_body(name);
    s.lit("\\n");
  }
  field("allocation_id", ad.allocation_id);
  if (ad.has_single_reference) s.lit("  has_single_reference: true\\n");
  if (ad.ptr) {
    s.lit("  ptr: ");
    s.u64(ad.ptr);
    s.lit("\\n");
  }
  s.lit("}\\n\"}");
}

void Timeline::Impl::write(json_out::Sink& s, const ChromeTraceOptions& options) const {
  if (options.show_dataflow) need_dataflow();
  if (options.show_memory) need_memory();
  bool first = true;
  auto sep = [&] {
    if (!first) s.ch(',');
    first = false;
  };
  // Fields in TensorFlow's order: ph, cat, name (written by the caller between head and
  // tail), pid, tid, ts, then the phase's own.
  auto head = [&](char ph, std::string_view cat) {
    sep();
    s.lit("{\"ph\":\"");
    s.ch(ph);
    s.lit("\",\"cat\":\"");
    s.raw(cat);
    s.lit("\",\"name\":");
  };
  auto tail = [&](int pid, int tid, int64_t ts) {
    s.lit(",\"pid\":");
    s.i64(pid);
    s.lit(",\"tid\":");
    s.i64(tid);
    s.lit(",\"ts\":");
    s.micros(ts);
  };
  auto meta = [&](std::string_view name, int pid, int tid, std::string_view key, std::string_view text, int64_t num) {
    sep();
    s.lit("{\"name\":\"");
    s.raw(name);
    s.lit("\",\"ph\":\"M\",\"pid\":");
    s.i64(pid);
    if (tid >= 0) {
      s.lit(",\"tid\":");
      s.i64(tid);
    }
    s.lit(",\"args\":{\"");
    s.raw(key);
    s.lit("\":");
    if (key == "name") {
      s.str(text);
    } else {
      s.i64(num);
    }
    s.lit("}}");
  };
  auto lane_name = [&](int pid, int tid) {
    sep();
    s.lit("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
    s.i64(pid);
    s.lit(",\"tid\":");
    s.i64(tid);
    s.lit(",\"args\":{\"name\":\"lane ");
    s.i64(tid);
    s.lit("\"}}");
  };

  s.lit("{\"traceEvents\":[");
  // Metadata.
  meta("process_name", 0, -1, "name", "Allocators", 0);
  meta("process_sort_index", 0, -1, "sort_index", {}, 0);
  // Memory tracks are named only where there is memory to draw (a step with no memory records
  // and no output descriptions, e.g. a saved profile's, has none).
  std::vector<char> device_has_tensors(devices.size(), 0);
  bool has_counters = false;
  if (options.show_memory) {
    for (const Tensor& t : tensors) device_has_tensors[nodes[t.node].device] = 1;
    for (const Series& sr : series) has_counters |= !sr.points.empty();
  }
  if (has_counters) {
    meta("thread_name", 0, 0, "name", "memory", 0);
    meta("thread_sort_index", 0, 0, "sort_index", {}, 0);
  }
  std::string process;
  for (size_t d = 0; d < devices.size(); ++d) {
    const int device = static_cast<int>(d);
    process.assign(devices[d]).append(" Compute");
    meta("process_name", pid_compute(device), -1, "name", process, 0);
    // Every device's Compute first, then the Tensors processes (a row per tensor), so the
    // tensors of one device never push the next device's ops out of sight.
    meta("process_sort_index", pid_compute(device), -1, "sort_index", {}, 1 + device);
    process.assign(devices[d]).append(" Tensors");
    meta("process_name", pid_tensors(device), -1, "name", process, 0);
    meta("process_sort_index", pid_tensors(device), -1, "sort_index", {},
         1 + static_cast<int>(devices.size()) + device);
    for (int lane = 0; lane < num_lanes[d]; ++lane) {
      lane_name(pid_compute(device), lane);
      meta("thread_sort_index", pid_compute(device), lane, "sort_index", {}, lane);
    }
    if (device_has_tensors[d]) {
      for (int lane = 0; lane < std::max(1, num_lanes[d]); ++lane) {
        lane_name(pid_tensors(device), lane);
        meta("thread_sort_index", pid_tensors(device), lane, "sort_index", {}, lane);
      }
    }
  }
  if (window) {
    meta("process_name", pid_steps(), -1, "name", "Steps", 0);
    meta("process_sort_index", pid_steps(), -1, "sort_index", {}, -1);
    for (int lane = 0; lane < num_step_lanes; ++lane) {
      meta("thread_name", pid_steps(), lane, "name", "steps", 0);
      meta("thread_sort_index", pid_steps(), lane, "sort_index", {}, lane);
    }
  }

  // Steps (a window): one slice each.
  if (window) {
    for (const Step& st : steps) {
      head('X', "Step");
      if (st.number >= 0) {
        s.lit("\"step ");
        s.i64(st.number);
        s.ch('"');
      } else {
        s.lit("\"step\"");
      }
      tail(pid_steps(), st.lane, st.start);
      s.lit(",\"dur\":");
      s.micros(st.end - st.start);
      s.lit(",\"args\":{");
      if (st.number >= 0) {
        s.lit("\"step\":");
        s.i64(st.number);
        s.ch(',');
      }
      s.lit("\"nodes\":");
      s.u64(st.node_end - st.node_begin);
      s.lit("}}");
    }
  }

  // Ops.
  for (const Node& n : nodes) {
    const NodeExecStats& ns = *n.ns;
    head('X', "Op");
    s.str(n.op);
    tail(pid_compute(n.device), n.lane, n.start);
    s.lit(",\"dur\":");
    s.micros(n.end - n.start);
    s.lit(",\"args\":{\"name\":");
    s.str(gpu_tracer[n.device] ? gpu_op_of(ns.timeline_label, ns.node_name).name : ns.node_name);
    s.lit(",\"op\":");
    s.str(n.op);
    for (uint32_t j = 0; j < n.num_inputs; ++j) {
      s.lit(",\"input");
      s.u64(j);
      s.lit("\":");
      s.str(inputs[n.input_begin + j].name);
    }
    int64_t bytes = 0;
    for (size_t o = 0; o < ns.output.size(); ++o) {
      const TensorDescription& td = ns.output[o].tensor_description;
      s.lit(",\"output");
      s.u64(o);
      s.lit("\":\"");
      s.raw(dtype_name(td.dtype));
      append_dims(s, td.shape);
      s.ch('"');
      bytes += td.allocation_description.requested_bytes;
    }
    if (!ns.output.empty()) {
      s.lit(",\"output_bytes\":");
      s.i64(bytes);
    }
    if (n.flops >= 0) {
      s.lit(",\"flops\":");
      s.i64(n.flops);
    }
    s.lit(",\"thread_id\":");
    s.u64(ns.thread_id);
    if (window && steps[n.step].number >= 0) {
      s.lit(",\"step\":");
      s.i64(steps[n.step].number);
    }
    s.lit("}}");
  }

  // Dataflow: producer → consumer across (pid, tid). Written after every slice, so that a
  // viewer reading events of equal time in file order has the slices open already.
  if (options.show_dataflow) {
    uint64_t flow_id = 0;
    for (const Node& n : nodes) {
      for (uint32_t j = 0; j < n.num_inputs; ++j) {
        const Input& in = inputs[n.input_begin + j];
        if (in.tensor < 0) continue;
        const Node& p = nodes[tensors[in.tensor].node];
        if (p.device == n.device && p.lane == n.lane) continue;
        // A consumer that starts before its producer ends (clocks of different devices, a
        // StepStats built by hand) would get an arrow back in time, which viewers reject.
        const int64_t from = std::max(p.start, p.end - 1);
        if (n.start < from) continue;
        head('s', "DataFlow");
        s.str(in.name);
        tail(pid_compute(p.device), p.lane, from);
        s.lit(",\"id\":");
        s.u64(flow_id);
        s.ch('}');
        head('f', "DataFlow");
        s.str(in.name);
        tail(pid_compute(n.device), n.lane, n.start);
        s.lit(",\"id\":");
        s.u64(flow_id);
        s.lit(",\"bp\":\"e\"}");
        ++flow_id;
      }
    }
  }

  if (options.show_memory) {
    // Tensors as objects: created when allocated (or when produced, for a buffer from before
    // the step), a snapshot of the description, destroyed when freed (or last used).
    for (size_t id = 0; id < tensors.size(); ++id) {
      const Tensor& t = tensors[id];
      const Node& p = nodes[t.node];
      head('N', "Tensor");
      s.ch('"');
      write_tensor_name(s, t);
      s.ch('"');
      tail(pid_tensors(p.device), p.lane, t.create);
      s.lit(",\"id\":");
      s.u64(id);
      s.ch('}');
      head('O', "Tensor");
      s.ch('"');
      write_tensor_name(s, t);
      s.ch('"');
      tail(pid_tensors(p.device), p.lane, std::clamp(p.end - 1, t.create, std::max(t.create, t.destroy)));
      s.lit(",\"id\":");
      s.u64(id);
      s.lit(",\"args\":{\"snapshot\":");
      write_snapshot(s, t);
      s.lit("}}");
    }
    for (size_t id = 0; id < tensors.size(); ++id) {
      const Tensor& t = tensors[id];
      head('D', "Tensor");
      s.ch('"');
      write_tensor_name(s, t);
      s.ch('"');
      tail(pid_tensors(nodes[t.node].device), 0, std::max(t.create, t.destroy));
      s.lit(",\"id\":");
      s.u64(id);
      s.ch('}');
    }
    // Bytes in use per allocator: what the step allocated and has not freed, from 0 at the
    // step's start.
    for (const Series& sr : series) {
      if (sr.points.empty()) continue;
      // Named with what it counts: "<allocator> memory", series "bytes in use" (Perfetto
      // shows "cpu memory bytes in use"; TensorFlow named both by the bare allocator).
      auto counter = [&](int64_t ts, int64_t value) {
        head('C', "Memory");
        s.ch('"');
        s.str_body(sr.allocator);
        s.lit(" memory\"");
        tail(0, 0, ts);
        s.lit(",\"args\":{\"bytes in use\":");
        s.i64(value);
        s.lit("}}");
      };
      counter(std::min(steps[sr.step].start, sr.points.empty() ? kNever : sr.points.front().time), 0);
      for (size_t p = 0; p < sr.points.size(); ++p) counter(sr.points[p].time, sr.totals[p]);
    }
  }
  // catapult builds its slice tree on whole microseconds unless told "ns" (sub-µs ops would
  // nest under neighbours and lose their flows); Perfetto ignores the field.
  s.lit("],\"displayTimeUnit\":\"ns\"");
  if (base_wall_ns != 0) {
    s.lit(",\"baseTimeNanoseconds\":");
    s.i64(base_wall_ns);
  }
  s.ch('}');
}

Timeline::Timeline(const StepStats& step, const Graph* graph) : impl_(std::make_unique<Impl>()) {
  impl_->graph = graph;
  const StepStats* one[] = {&step};
  impl_->build(one, {});
}

Timeline::Timeline(std::span<const StepStats* const> window, const Graph* graph, std::span<const int64_t> step_numbers)
    : impl_(std::make_unique<Impl>()) {
  impl_->graph = graph;
  impl_->window = true;
  impl_->build(window, step_numbers);
}

void Timeline::set_float_ops(const std::function<int64_t(const NodeExecStats&)>& float_ops) {
  for (Impl::Node& n : impl_->nodes)
    if (n.flops < 0) n.flops = float_ops(*n.ns);
}

Timeline::~Timeline() = default;
Timeline::Timeline(Timeline&&) noexcept = default;
Timeline& Timeline::operator=(Timeline&&) noexcept = default;

std::string Timeline::generate_chrome_trace_format(bool show_dataflow, bool show_memory) const {
  std::string out;
  write_chrome_trace(out, {.show_dataflow = show_dataflow, .show_memory = show_memory});
  return out;
}

void Timeline::write_chrome_trace(std::string& out, const ChromeTraceOptions& options) const {
  if (options.pretty) {
    std::string compact;
    write_chrome_trace(compact, {.show_dataflow = options.show_dataflow, .show_memory = options.show_memory});
    json_out::append_pretty(out, compact);
    return;
  }
  // About 250 bytes per op (more with flows and tensors): one growth at most, usually.
  out.reserve(out.size() + 1024 + impl_->nodes.size() * (options.show_memory ? 900 : 400));
  json_out::Sink sink(out);
  impl_->write(sink, options);
}

StepStatsAnalysis Timeline::analyze_step_stats(bool show_dataflow, bool show_memory) const {
  StepStatsAnalysis analysis;
  write_chrome_trace(analysis.chrome_trace, {.show_dataflow = show_dataflow, .show_memory = show_memory});
  if (show_memory) analysis.allocator_maximums = impl_->maximums();
  return analysis;
}

std::map<std::string, AllocationMaximum> Timeline::allocator_maximums() const { return impl_->maximums(); }

}  // namespace stepscope
