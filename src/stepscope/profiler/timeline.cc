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
#include "stepscope/ops/collective_trace.h"
#include "stepscope/profiler/gpu_activity.h"
#include "stepscope/profiler/internal/timeline_impl.h"
#include "stepscope/profiler/node_cost.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace {

using timeline_internal::kNever;
using timeline_internal::NameIndex;

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
    for (const auto& dev : st->dev_stats()) {
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
  for (const auto& dev : st.dev_stats()) num_step_nodes += dev.node_stats.size();

  int64_t step_end = st.base_ns + step.shift;
  for (const auto& dev : st.dev_stats()) {
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
      const stepscope::Node* graph_node = graph ? recorded_node(*graph, ns) : nullptr;
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
      n.graph_node = graph_node;
      n.num_inputs = static_cast<uint32_t>(inputs.size() - n.input_begin);
      n.tensor_begin = static_cast<uint32_t>(tensors.size());
      for (uint32_t i = 0; i < ns.output.size(); ++i)
        tensors.push_back({static_cast<uint32_t>(nodes.size()), i, n.start, n.end, n.end});
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
}

// Logically const: results computed once, on first use (what the constructor leaves out, so a
// trace of ops alone does not pay for them, nor a Timeline asked only for its memory for FLOPs).
void Timeline::Impl::need_flops() const {
  std::call_once(flops_done, [this] {
    if (!graph) return;
    auto* self = const_cast<Impl*>(this);
    for (const Step& step : steps) {
      if (step.node_begin == step.node_end) continue;
      const RunShapes shapes(*graph, *step.stats);
      for (size_t i = step.node_begin; i < step.node_end; ++i)
        if (const stepscope::Node* graph_node = nodes[i].graph_node)
          self->nodes[i].flops = node_float_ops(*graph_node, shapes);
    }
  });
}

void Timeline::Impl::need_dataflow() const {
  std::call_once(dataflow_done, [this] {
    auto* self = const_cast<Impl*>(this);
    NameIndex index;
    for (size_t k = 0; k < steps.size(); ++k) self->resolve_dataflow(k, index);
  });
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
  need_flops();
  if (options.show_dataflow || options.show_memory) need_dataflow();  // tensors' last uses
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
  std::vector<int64_t> output_bytes;  // one node's, per output (for a collective's args)
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
    output_bytes.clear();
    for (size_t o = 0; o < ns.output.size(); ++o) {
      const TensorDescription& td = ns.output[o].tensor_description;
      s.lit(",\"output");
      s.u64(o);
      s.lit("\":\"");
      s.raw(dtype_name(td.dtype));
      append_dims(s, td.shape);
      s.ch('"');
      bytes += td.allocation_description.requested_bytes;
      output_bytes.push_back(td.allocation_description.requested_bytes);
    }
    if (!ns.output.empty()) {
      s.lit(",\"output_bytes\":");
      s.i64(bytes);
    }
    if (n.flops >= 0) {
      s.lit(",\"flops\":");
      s.i64(n.flops);
    }
    // Collectives: the MPI call, the ranks and the bytes this rank sent (ops/collective_trace.h).
    if (n.graph_node) {
      if (const auto c = collective_trace_args(*n.graph_node, output_bytes)) {
        s.lit(",\"algorithm\":");
        s.str(c->algorithm);
        s.lit(",\"ranks\":");
        s.i64(c->ranks);
        s.lit(",\"bytes_moved\":");
        s.i64(c->bytes_moved);
        // Which inputs of an Allreduce went through the fusion buffer, which had a call each.
        if (!c->fused_inputs.empty() || !c->direct_inputs.empty()) {
          const auto list = [&](const std::vector<int>& v) {
            for (size_t k = 0; k < v.size(); ++k) {
              if (k) s.ch(',');
              s.i64(v[k]);
            }
            s.ch(']');
          };
          s.lit(",\"fused_inputs\":[");
          list(c->fused_inputs);
          s.lit(",\"direct_inputs\":[");
          list(c->direct_inputs);
        }
      }
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
      tail(pid_tensors(p.device), p.lane, std::clamp(p.end - 1, t.create, std::max(t.create, t.end_of_life())));
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
      tail(pid_tensors(nodes[t.node].device), 0, std::max(t.create, t.end_of_life()));
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
  if (!options.metadata_json.empty()) {
    s.lit(",\"metadata\":");
    s.raw(options.metadata_json);
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
  impl_->need_flops();  // the graph's first: these are for the nodes it does not give
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
    write_chrome_trace(compact, {.show_dataflow = options.show_dataflow,
                                 .show_memory = options.show_memory,
                                 .metadata_json = options.metadata_json});
    json_out::append_pretty(out, compact);
    return;
  }
  // About 250 bytes per op (more with flows and tensors): one growth at most, usually.
  out.reserve(out.size() + 1024 + impl_->nodes.size() * (options.show_memory ? 900 : 400));
  json_out::Sink sink(out);
  impl_->write(sink, options);
}

void Timeline::write_chrome_trace(const std::function<void(std::string_view)>& write,
                                  const ChromeTraceOptions& options) const {
  if (options.pretty) {
    std::string text;
    write_chrome_trace(text, options);
    write(text);
    return;
  }
  json_out::Sink sink(write);
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
