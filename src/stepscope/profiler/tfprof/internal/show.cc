#include "stepscope/profiler/tfprof/internal/show.h"

#include <algorithm>

#include "stepscope/base/huge_pages.h"
#include "stepscope/ops/collective_trace.h"

namespace stepscope::tfprof {

constexpr size_t kProtosWorthAnArena = 500000;
// A proto's room: itself in its array, that array's header (a leaf's own array is none), and
// its input shapes (two inputs of rank 4 take 112 bytes; more come from malloc).
constexpr size_t kArenaBytesPerProto = sizeof(GraphNodeProto) + BulkArena::kHeader + 128;

BulkArena arena_for_protos(size_t protos) {
  return BulkArena(protos >= kProtosWorthAnArena ? protos * kArenaBytesPerProto : 0);
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

void init_graph_node(GraphNodeProto& p, std::string_view name, int32_t index, const ProfileModel& model,
                     const std::vector<NodeStats>& stats) {
  p.children.clear();
  init_graph_node_stats(p, index, model, stats);
  init_graph_node_details(p, name, index, model);
}

void init_graph_node_stats(GraphNodeStats& p, int32_t index, const ProfileModel& model,
                           const std::vector<NodeStats>& stats) {
  if (index < 0) {
    p.run_count = 0;
    for (const auto& s : kNodeStatistics<GraphNodeStats>) p.*s.self = 0;
    return;
  }
  const NodeStats& s = stats[index];
  p.run_count = s.run_count;
  p.exec_micros = s.exec_micros;
  p.accelerator_exec_micros = s.accelerator_exec_micros;
  p.cpu_exec_micros = s.cpu_exec_micros;
  p.requested_bytes = s.requested_bytes;
  p.peak_bytes = s.peak_bytes;
  p.residual_bytes = s.residual_bytes;
  p.output_bytes = s.output_bytes;
  p.float_ops = s.float_ops;
  p.parameters = model.nodes[index].parameters;
}

void init_graph_node_details(GraphNodeProto& p, std::string_view name, int32_t index, const ProfileModel& model) {
  p.name.assign(name);
  p.devices = {};
  p.shapes.clear();
  p.input_shapes.clear();
  if (index < 0) return;
  const ModelNode& node = model.nodes[index];
  if (node.device >= 0) {
    // The process's list of that device, looked up once a run of nodes on one device (a view
    // makes a million protos, on two threads: no lock a node).
    thread_local std::string last_device;
    thread_local std::span<const std::string> last_list;
    const std::string& device = model.devices[node.device];
    if (last_list.empty() || device != last_device) {
      last_list = device_list(device);
      last_device = device;
    }
    p.devices = last_list;
  }
  if (!node.shape.empty()) p.shapes.push_back(node.shape);
  if (node.input_shapes_known) {
    size_t all_dims = 0;
    const auto inputs = model.inputs_of(node);
    for (const ModelInput& in : inputs) all_dims += tfprof_dims_view(in.shape).size();
    p.input_shapes.reserve(inputs.size(), all_dims);
    for (size_t i = 0; i < inputs.size(); ++i)
      p.input_shapes.add(static_cast<int32_t>(i), tfprof_dims_view(inputs[i].shape));
  }
}

void reset_totals(GraphNodeStats& p) {
  p.total_definition_count = p.total_run_count = 0;
  for (const auto& s : kNodeStatistics<GraphNodeStats>) p.*s.total = 0;
}

void reset_totals(MultiGraphNodeProto& p) {
  for (const auto& s : kNodeStatistics<MultiGraphNodeProto>) p.*s.total = 0;
  p.children.clear();
}

void add_self_to_totals(GraphNodeStats& p) {
  p.total_definition_count += 1;
  p.total_run_count += p.run_count;
  for (const auto& s : kNodeStatistics<GraphNodeStats>) p.*s.total += p.*s.self;
}

void add_self_to_totals(MultiGraphNodeProto& p) {
  for (const auto& s : kNodeStatistics<MultiGraphNodeProto>) p.*s.total += p.*s.self;
}

void aggregate_totals(GraphNodeStats& into, const GraphNodeStats& from) {
  into.total_run_count += from.total_run_count;
  into.total_definition_count += from.total_definition_count;
  for (const auto& s : kNodeStatistics<GraphNodeStats>) into.*s.total += from.*s.total;
}

void aggregate_totals(MultiGraphNodeProto& into, const MultiGraphNodeProto& from) {
  for (const auto& s : kNodeStatistics<MultiGraphNodeProto>) into.*s.total += from.*s.total;
}

bool passes_floors(const GraphNodeStats& p, const ViewOptions& o, int depth) {
  return !(p.total_requested_bytes < o.min_bytes || p.total_peak_bytes < o.min_peak_bytes ||
           p.total_residual_bytes < o.min_residual_bytes || p.total_output_bytes < o.min_output_bytes ||
           p.total_exec_micros < o.min_micros || p.total_accelerator_exec_micros < o.min_accelerator_micros ||
           p.total_cpu_exec_micros < o.min_cpu_micros || p.parameters < o.min_params || p.float_ops < o.min_float_ops ||
           p.run_count < o.min_occurrence || depth > o.max_depth);
}

bool passes_floors(const MultiGraphNodeProto& p, const ViewOptions& o, int depth) {
  return !(p.total_requested_bytes < o.min_bytes || p.total_peak_bytes < o.min_peak_bytes ||
           p.total_residual_bytes < o.min_residual_bytes || p.total_output_bytes < o.min_output_bytes ||
           p.total_exec_micros < o.min_micros || p.total_accelerator_exec_micros < o.min_accelerator_micros ||
           p.total_cpu_exec_micros < o.min_cpu_micros || p.total_parameters < o.min_params ||
           p.total_float_ops < o.min_float_ops || depth > o.max_depth);
}

bool passes_names(std::string_view name, const ViewOptions& o) {
  if (!o.show.matches(name)) return false;
  return o.hide.empty() || !o.hide.matches(name);
}

std::string self_total(bool account, const std::string& self, const std::string& total) {
  return (account ? self : std::string("--")) + "/" + total;
}

void append_graph_node(std::string& out, const GraphNodeProto& p, bool account, const ModelNode* node,
                       std::string_view synthetic_op_type, const ViewOptions& o) {
  out += p.name;
  // The numbers go through a buffer here, appended to `out` before each part of no bounded
  // length (a shape, devices, op types): a deep view writes a line a node, and a string append
  // a piece (thirty-odd a line) took half of the line's time. Ten fields at most, each two
  // numbers and a suffix: well within the buffer.
  char buf[1024];
  char* at = buf;
  const auto put = [&](std::string_view s) { at = std::copy(s.begin(), s.end(), at); };  // s may be {}
  const auto flush = [&] {
    out.append(buf, at);
    at = buf;
  };
  put(" (");
  bool first = true;
  const auto field = [&] {
    if (!first) put(", ");
    first = false;
  };
  // "<self>/<total><suffix>", "--" for the self of an unaccounted node.
  const auto self_total = [&](char* (*write)(char*, int64_t), int64_t self, int64_t total,
                              std::string_view suffix = {}) {
    if (account)
      at = write(at, self);
    else
      put("--");
    put("/");
    at = write(at, total);
    put(suffix);
  };
  if (o.has(Field::kParams)) {
    if (node && !node->shape.empty()) {
      field();
      flush();
      append_dims(out, node->shape);
    }
    field();
    self_total(write_number, p.parameters, p.total_parameters, " params");
  }
  if (o.has(Field::kFloatOps)) {
    field();
    self_total(write_number, p.float_ops, p.total_float_ops, " flops");
  }
  const std::pair<Field, std::pair<int64_t, int64_t>> memories[] = {
      {Field::kBytes, {p.requested_bytes, p.total_requested_bytes}},
      {Field::kPeakBytes, {p.peak_bytes, p.total_peak_bytes}},
      {Field::kResidualBytes, {p.residual_bytes, p.total_residual_bytes}},
      {Field::kOutputBytes, {p.output_bytes, p.total_output_bytes}},
  };
  for (const auto& [f, values] : memories)
    if (o.has(f)) {
      field();
      self_total(write_memory, values.first, values.second);
    }
  const bool micros = o.has(Field::kMicros);
  if (micros) {
    field();
    self_total(write_time, p.exec_micros, p.total_exec_micros);
  }
  if (micros || o.has(Field::kAcceleratorMicros)) {
    field();
    self_total(write_time, p.accelerator_exec_micros, p.total_accelerator_exec_micros);
  }
  if (micros || o.has(Field::kCpuMicros)) {
    field();
    self_total(write_time, p.cpu_exec_micros, p.total_cpu_exec_micros);
  }
  if (o.has(Field::kDevice) && !p.devices.empty()) {
    field();
    flush();
    for (size_t i = 0; i < p.devices.size(); ++i) (out += i ? "|" : "") += p.devices[i];
  }
  if (o.has(Field::kOpTypes)) {
    field();
    flush();
    if (node) {
      for (size_t i = 0; i < node->op_types.size(); ++i) (out += i ? "|" : "") += node->op_types[i];
    } else {
      out += synthetic_op_type;
    }
  }
  if (o.has(Field::kOccurrence)) {
    field();
    self_total(write_number, p.run_count, p.total_run_count);
    put(account ? "|1/" : "|--/");
    at = write_number(at, p.total_definition_count);
  }
  if (o.has(Field::kInputShapes)) {
    field();
    flush();
    bool first_shape = true;
    for (const auto& [index, dims] : p.input_shapes) {
      if (!first_shape) out += '|';
      first_shape = false;
      out += std::to_string(index);
      out += ':';
      if (dims.empty())
        out += "unknown";
      else
        append_dims(out, dims);
    }
  }
  put(")");
  flush();
}

std::string graph_legend(const ViewOptions& o) {
  std::vector<std::string> legends;
  if (o.has(Field::kParams)) legends.emplace_back("# parameters");
  if (o.has(Field::kFloatOps)) legends.emplace_back("# float_ops");
  if (o.has(Field::kBytes)) legends.emplace_back("requested bytes");
  if (o.has(Field::kPeakBytes)) legends.emplace_back("peak bytes");
  if (o.has(Field::kResidualBytes)) legends.emplace_back("residual bytes");
  if (o.has(Field::kOutputBytes)) legends.emplace_back("output bytes");
  const bool micros = o.has(Field::kMicros);
  if (micros) legends.emplace_back("total execution time");
  if (micros || o.has(Field::kAcceleratorMicros)) legends.emplace_back("accelerator execution time");
  if (micros || o.has(Field::kCpuMicros)) legends.emplace_back("cpu execution time");
  if (o.has(Field::kDevice)) legends.emplace_back("assigned devices");
  if (o.has(Field::kOpTypes)) legends.emplace_back("op types");
  if (o.has(Field::kOccurrence)) legends.emplace_back("op count (run|defined)");
  if (o.has(Field::kInputShapes)) legends.emplace_back("input shapes");
  return "node name | " + join(legends, " | ") + "\n";
}

std::string multi_legend(const ViewOptions& o) {
  std::vector<std::string> legends;
  if (o.has(Field::kBytes)) legends.emplace_back("requested bytes");
  if (o.has(Field::kPeakBytes)) legends.emplace_back("peak bytes");
  if (o.has(Field::kResidualBytes)) legends.emplace_back("residual bytes");
  if (o.has(Field::kOutputBytes)) legends.emplace_back("output bytes");
  const bool micros = o.has(Field::kMicros);
  if (micros) legends.emplace_back("total execution time");
  if (micros || o.has(Field::kAcceleratorMicros)) legends.emplace_back("accelerator execution time");
  if (micros || o.has(Field::kCpuMicros)) legends.emplace_back("cpu execution time");
  if (o.has(Field::kParams)) legends.emplace_back("# parameters");
  if (o.has(Field::kFloatOps)) legends.emplace_back("# float_ops");
  if (o.has(Field::kDevice)) legends.emplace_back("assigned devices");
  if (o.has(Field::kOpTypes)) legends.emplace_back("op types");
  if (o.has(Field::kOccurrence)) legends.emplace_back("op occurrence (run|defined)");
  if (o.has(Field::kInputShapes)) legends.emplace_back("input shapes");
  return "node name | " + join(legends, " | ") + "\n";
}

}  // namespace stepscope::tfprof

namespace stepscope::tfprof {

bool snapshot_multi_node(MultiGraphNodeProto& p, MultiExtra& extra, std::string_view name,
                         const std::vector<int32_t>& nodes, const ProfileModel& model,
                         const std::vector<NodeStats>& stats, const NameMatcher& account) {
  p.name.assign(name);
  for (const auto& s : kNodeStatistics<MultiGraphNodeProto>) p.*s.self = 0;
  p.graph_nodes.clear();
  // In huge pages: an op type of 10^6 nodes is ~300 MB of protos, new memory each query unless
  // the view's arena reuses its spare (arena_for_protos): 72,000 page faults in 4 KiB pages,
  // ~150 in 2 MiB ones (see huge_pages.h).
  reserve_huge(p.graph_nodes, nodes.size());
  extra.op_types.clear();
  extra.devices.clear();
  extra.collective.clear();
  std::string_view collective_call;
  int64_t collective_ranks = 0, bytes_moved = 0;
  bool matched = false;
  for (int32_t index : nodes) {
    const ModelNode& node = model.nodes[index];
    if (!account.is_all()) {
      bool any = false;
      for (std::string_view type : node.op_types)
        if (account.matches(type)) {
          any = true;
          break;
        }
      if (!any) continue;
    }
    matched = true;
    const NodeStats& s = stats[index];
    p.exec_micros += s.exec_micros;
    p.accelerator_exec_micros += s.accelerator_exec_micros;
    p.cpu_exec_micros += s.cpu_exec_micros;
    p.requested_bytes += s.requested_bytes;
    p.peak_bytes += s.peak_bytes;
    p.residual_bytes += s.residual_bytes;
    p.output_bytes += s.output_bytes;
    p.float_ops += s.float_ops;
    p.parameters += node.parameters;
    // Few distinct values among many nodes: each added once (sorted below).
    const auto add_once = [](std::vector<std::string_view>& set, std::string_view value) {
      if (std::find(set.begin(), set.end(), value) == set.end()) set.push_back(value);
    };
    for (std::string_view type : node.op_types) add_once(extra.op_types, type);
    if (node.device >= 0) add_once(extra.devices, model.devices[node.device]);
    GraphNodeProto& g = p.graph_nodes.emplace_back();
    init_graph_node(g, node.name, index, model, stats);
    add_self_to_totals(g);
    if (node.collective_ranks > 0) {
      // Per output sizes are not kept: the call without an Allreduce's fused/direct split.
      int data_inputs = 0;
      for (const ModelInput& in : model.inputs_of(node)) data_inputs += in.slot >= 0 ? 1 : 0;
      const int64_t output_bytes[] = {s.output_bytes};
      if (const auto c = collective_trace_args(node.op, data_inputs, node.collective_ranks, output_bytes)) {
        if (collective_call.empty()) {
          collective_call = c->algorithm;
          collective_ranks = c->ranks;
        }
        bytes_moved += c->bytes_moved;
      }
    }
  }
  if (!collective_call.empty())
    extra.collective = "collective: " + std::string(collective_call) + ", ranks: " + std::to_string(collective_ranks) +
                       ", bytes_moved: " + format_memory(bytes_moved);
  auto sort_unique = [](std::vector<std::string_view>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  sort_unique(extra.op_types);
  sort_unique(extra.devices);
  return matched || (nodes.empty() && account.is_all());
}

}  // namespace stepscope::tfprof
