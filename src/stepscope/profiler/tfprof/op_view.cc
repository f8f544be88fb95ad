// The op view (tfprof_op.cc): one row per op type, sorted, with cumulative totals from the
// bottom of the sorted list up.
#include <cstdio>
#include <map>
#include <tuple>

#include "stepscope/profiler/tfprof/internal/show.h"
#include "stepscope/profiler/tfprof/internal/views.h"

namespace stepscope::tfprof {
namespace {

std::string right(const std::string& s, int width) {
  return s.size() >= static_cast<size_t>(width) ? s : std::string(width - s.size(), ' ') + s;
}

// "<value> (<cumulative %>, <self %>)" right-aligned in 30 columns.
std::string percent_field(const std::string& value, double accu_pct, double pct) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s (%.2f%%, %.2f%%)", value.c_str(), accu_pct, pct);
  return right(buf, 30);
}

// Time and parameter/flop columns: percentages when the row's total is positive.
std::string total_percent(const std::string& value, int64_t self, int64_t total, int64_t root_total) {
  double accu = 0, pct = 0;
  if (total > 0) {
    accu = 100.0 * total / root_total;
    pct = 100.0 * self / root_total;
  }
  return percent_field(value, accu, pct);
}

// Memory columns: percentages when the row's own bytes are positive (TensorFlow's test differs).
std::string memory_percent(int64_t total, int64_t root_total, int64_t self) {
  double accu = 0, pct = 0;
  if (self > 0) {
    accu = 100.0 * total / root_total;
    pct = 100.0 * self / root_total;
  }
  return percent_field(format_memory(self), accu, pct);
}

// Rows of "input_type: 0:2x3,\t1:3x4\t(run*R|defined*D)\texec_time: T" grouped by signature,
// most runs first.
std::string format_input_shapes(const MultiGraphNodeProto& p) {
  std::map<std::string, std::tuple<int64_t, int64_t, int64_t>> by_signature;  // defined, runs, micros
  for (const GraphNodeProto& g : p.graph_nodes) {
    std::vector<std::string> inputs;
    for (const auto& [index, dims] : g.input_shapes)
      inputs.push_back(std::to_string(index) + ":" + (dims.empty() ? std::string("unknown") : format_dims(dims)));
    auto& [defined, runs, micros] = by_signature["input_type: " + join(inputs, ",\t")];
    defined += 1;
    runs += g.run_count;
    micros += g.exec_micros;
  }
  if (by_signature.empty()) return "";
  std::vector<std::pair<std::string, std::tuple<int64_t, int64_t, int64_t>>> rows(by_signature.begin(),
                                                                                  by_signature.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return std::get<1>(a.second) > std::get<1>(b.second); });
  std::vector<std::string> lines;
  for (const auto& [signature, t] : rows)
    lines.push_back(signature + "\t(run*" + std::to_string(std::get<1>(t)) + "|defined*" +
                    std::to_string(std::get<0>(t)) + ")\texec_time: " + format_time(std::get<2>(t)));
  return join(lines, "\n");
}

std::string format_row(const MultiGraphNodeProto& n, const MultiExtra& extra, const MultiGraphNodeProto& root,
                       const ViewOptions& o) {
  std::vector<std::string> attrs;
  if (o.has(Field::kBytes))
    attrs.push_back(memory_percent(n.total_requested_bytes, root.total_requested_bytes, n.requested_bytes));
  if (o.has(Field::kPeakBytes))
    attrs.push_back(memory_percent(n.total_peak_bytes, root.total_peak_bytes, n.peak_bytes));
  if (o.has(Field::kResidualBytes))
    attrs.push_back(memory_percent(n.total_residual_bytes, root.total_residual_bytes, n.residual_bytes));
  if (o.has(Field::kOutputBytes))
    attrs.push_back(memory_percent(n.total_output_bytes, root.total_output_bytes, n.output_bytes));
  const bool micros = o.has(Field::kMicros);
  if (micros)
    attrs.push_back(
        total_percent(format_time(n.exec_micros), n.exec_micros, n.total_exec_micros, root.total_exec_micros));
  if (micros || o.has(Field::kAcceleratorMicros))
    attrs.push_back(total_percent(format_time(n.accelerator_exec_micros), n.accelerator_exec_micros,
                                  n.total_accelerator_exec_micros, root.total_accelerator_exec_micros));
  if (micros || o.has(Field::kCpuMicros))
    attrs.push_back(total_percent(format_time(n.cpu_exec_micros), n.cpu_exec_micros, n.total_cpu_exec_micros,
                                  root.total_cpu_exec_micros));
  if (o.has(Field::kParams))
    attrs.push_back(total_percent(format_number(n.parameters) + " params", n.parameters, n.total_parameters,
                                  root.total_parameters));
  if (o.has(Field::kFloatOps))
    attrs.push_back(
        total_percent(format_number(n.float_ops) + " float_ops", n.float_ops, n.total_float_ops, root.total_float_ops));
  if (o.has(Field::kDevice))
    attrs.push_back(join(std::vector<std::string>(extra.devices.begin(), extra.devices.end()), "|"));
  if (o.has(Field::kOpTypes))
    attrs.push_back(join(std::vector<std::string>(extra.op_types.begin(), extra.op_types.end()), "|"));
  if (o.has(Field::kOccurrence)) {
    int64_t runs = 0;
    for (const GraphNodeProto& g : n.graph_nodes) runs += g.run_count;
    attrs.push_back(right(std::to_string(runs) + "|" + std::to_string(n.graph_nodes.size()), 10));
  }
  std::string name = n.name;
  if (name.size() < 25) name.append(25 - name.size(), ' ');
  std::string row = name + join(attrs, ", ") + "\n";
  // A collective op type: its MPI call, the ranks and the bytes this rank sent.
  if (!extra.collective.empty()) row += "  " + extra.collective + "\n";
  if (o.has(Field::kInputShapes)) {
    const std::string shapes = format_input_shapes(n);
    if (!shapes.empty()) row += "\n" + shapes + "\n\n";
  }
  return row;
}

}  // namespace

OpGroups build_op_groups(const ProfileModel& model) {
  std::map<std::string_view, std::vector<int32_t>> groups;
  for (int32_t i : model.order_by_name()) groups[model.nodes[i].op].push_back(i);  // each group in name order
  OpGroups out;
  for (auto& [op, nodes] : groups) {
    out.op_types.emplace_back(op);
    out.nodes.push_back(std::move(nodes));
  }
  return out;
}

MultiViewResult show_op(const OpGroups& groups, const ProfileModel& model, const std::vector<NodeStats>& stats,
                        const ViewOptions& o) {
  MultiViewResult result;
  const size_t n = groups.op_types.size();
  MultiGraphNodeProto root;
  root.name = std::string(kTFProfRoot);
  if (n == 0) {
    result.text = ViewText(format_row(root, {}, root, o));
    result.root = std::move(root);
    return result;
  }

  size_t all_nodes = 0;
  for (const std::vector<int32_t>& nodes : groups.nodes) all_nodes += nodes.size();
  BulkArena arena = arena_for_protos(all_nodes);
  const BulkArena::Use use(arena);
  std::vector<MultiGraphNodeProto> protos(n + 1);
  std::vector<MultiExtra> extras(n);
  std::vector<char> account(n);
  std::vector<int32_t> order(n);
  for (size_t g = 0; g < n; ++g) {
    account[g] =
        snapshot_multi_node(protos[g], extras[g], groups.op_types[g], groups.nodes[g], model, stats, o.account);
    reset_totals(protos[g]);
    add_self_to_totals(protos[g]);
    order[g] = static_cast<int32_t>(g);
  }
  sort_by_order(order, protos, o.order_by);

  // Cumulative totals: each accounted row adds the row after it.
  std::vector<int32_t> accounted;
  int32_t pre = -1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!account[*it]) continue;
    if (pre >= 0) aggregate_totals(protos[*it], protos[pre]);
    accounted.push_back(*it);
    pre = *it;
  }
  std::reverse(accounted.begin(), accounted.end());
  if (pre >= 0) aggregate_totals(root, protos[pre]);

  // The start row (start_name_regexes; none given: the first), then rows until a trimmed one or
  // past max_depth (the first row is depth 0).
  size_t start = 0;
  if (!o.start.empty() && !o.start.is_all()) {
    while (start < accounted.size() && !o.start.matches(protos[accounted[start]].name)) ++start;
  }
  std::vector<int32_t> shown;
  for (size_t i = start, depth = 0; i < accounted.size(); ++i, ++depth) {
    const MultiGraphNodeProto& p = protos[accounted[i]];
    if ((!o.trim.empty() && o.trim.matches(p.name)) || static_cast<int64_t>(depth) > o.max_depth) break;
    const bool show = passes_floors(p, o, static_cast<int>(depth)) &&
                      o.min_occurrence <= static_cast<int64_t>(p.graph_nodes.size()) && passes_names(p.name, o);
    if (show) shown.push_back(accounted[i]);
  }

  if (o.account_displayed_op_only) {
    pre = -1;
    for (auto it = shown.rbegin(); it != shown.rend(); ++it) {
      reset_totals(protos[*it]);
      add_self_to_totals(protos[*it]);
      if (pre >= 0) aggregate_totals(protos[*it], protos[pre]);
      pre = *it;
    }
    reset_totals(root);
    if (pre >= 0) aggregate_totals(root, protos[pre]);
  }

  std::string& text = result.text.lines();
  text = multi_legend(o);
  for (int32_t g : shown) {
    text += format_row(protos[g], extras[g], root, o);
    for (int32_t node : groups.nodes[g]) result.displayed.push_back(node);
  }
  // The rows as a chain: each the single child of the one before.
  for (auto it = shown.rbegin(); it != shown.rend(); ++it) {
    MultiGraphNodeProto& p = protos[*it];
    p.children.clear();
    if (it != shown.rbegin()) p.children.push_back(std::move(protos[*(it - 1)]));
  }
  if (!shown.empty()) root.children.push_back(std::move(protos[shown.front()]));
  result.root = std::move(root);
  return result;
}

}  // namespace stepscope::tfprof
