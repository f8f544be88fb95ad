// What the four views share (tfprof_show.{h,cc}, tfprof_show_multi.cc, tfprof_node_show.cc):
// resetting and aggregating totals, the display filter, the sort, and the field formatting.
// Internal to the tfprof views.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "stepscope/base/bulk_arena.h"
#include "stepscope/profiler/tfprof/format.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/protos.h"
#include "stepscope/profiler/tfprof/view_options.h"

namespace stepscope::tfprof {

// The arena for a view that makes `protos` GraphNodeProtos (bulk_arena.h), for their arrays (the
// tree views' children, the op and code views' graph_nodes) and their input shapes: from
// 500,000 protos (~220 MB) up, where malloc's memory is new each query anyway (past its trim
// and mmap thresholds), and the arena's block, kept as the spare, is reused by the next big
// view. None below that: the scope view of 10^5 and 2*10^5 nodes was slower from an arena than
// from malloc's partly warm heap (BENCHMARKS.md, issue 16, thirty-first session): an arena of
// no room, whose uses take from malloc. Each thread that makes the protos opens a
// BulkArena::Use on it.
BulkArena arena_for_protos(size_t protos);

// ShowNode::ReInit: a graph node's own statistics (zeros for a synthetic node: index < 0).
void init_graph_node(GraphNodeProto& proto, std::string_view name, int32_t index, const ProfileModel& model,
                     const std::vector<NodeStats>& stats);
// Its two halves: the numbers (what accounting, the floors and the sort read), and the name,
// devices and shapes (what only a displayed node needs: the tree views fill them in last, in the
// result's own proto, so a node costs its allocations once).
void init_graph_node_stats(GraphNodeStats& numbers, int32_t index, const ProfileModel& model,
                           const std::vector<NodeStats>& stats);
void init_graph_node_details(GraphNodeProto& proto, std::string_view name, int32_t index, const ProfileModel& model);
// A leaf's numbers as accounting leaves them (init_graph_node_stats, then add_self_to_totals onto
// zero totals): the tree views make them when asked, up to four times a leaf, so every field is
// initialised once here, inline (no zeroing first).
inline GraphNodeStats leaf_numbers(int32_t index, const ProfileModel& model, const std::vector<NodeStats>& stats) {
  static_assert(sizeof(GraphNodeStats) == 21 * sizeof(int64_t), "a new field of GraphNodeStats: set it here");
  static constexpr NodeStats kNone{};
  const NodeStats& s = index >= 0 ? stats[index] : kNone;
  const int64_t parameters = index >= 0 ? model.nodes[index].parameters : 0;
  return {.run_count = s.run_count,
          .exec_micros = s.exec_micros,
          .accelerator_exec_micros = s.accelerator_exec_micros,
          .cpu_exec_micros = s.cpu_exec_micros,
          .requested_bytes = s.requested_bytes,
          .peak_bytes = s.peak_bytes,
          .residual_bytes = s.residual_bytes,
          .output_bytes = s.output_bytes,
          .parameters = parameters,
          .float_ops = s.float_ops,
          .total_definition_count = 1,
          .total_run_count = s.run_count,
          .total_exec_micros = s.exec_micros,
          .total_accelerator_exec_micros = s.accelerator_exec_micros,
          .total_cpu_exec_micros = s.cpu_exec_micros,
          .total_requested_bytes = s.requested_bytes,
          .total_peak_bytes = s.peak_bytes,
          .total_residual_bytes = s.residual_bytes,
          .total_output_bytes = s.output_bytes,
          .total_parameters = parameters,
          .total_float_ops = s.float_ops};
}

// (A MultiGraphNodeProto's children are cleared too.)
void reset_totals(GraphNodeStats& p);
void reset_totals(MultiGraphNodeProto& p);
void add_self_to_totals(GraphNodeStats& p);
void add_self_to_totals(MultiGraphNodeProto& p);
void aggregate_totals(GraphNodeStats& into, const GraphNodeStats& from);
void aggregate_totals(MultiGraphNodeProto& into, const MultiGraphNodeProto& from);

// The min_* floors and max_depth (not the name regexes). Scope/graph views compare the totals,
// except parameters, float ops and occurrence (the node's own); op/code views compare the
// totals of parameters and float ops too and leave min_occurrence to the op view.
bool passes_floors(const GraphNodeStats& p, const ViewOptions& o, int depth);
bool passes_floors(const MultiGraphNodeProto& p, const ViewOptions& o, int depth);
// show_name_regexes must match, hide_name_regexes must not.
bool passes_names(std::string_view name, const ViewOptions& o);

// TFShow::SortNodes / TFMultiShow::SortNodes: the root first, then by order_by (name ascending;
// numbers descending by their total; occurrence descending by the number of graph nodes in the
// op/code views, by name in the scope/graph views), stably.
template <typename Proto>
constexpr bool order_is_by_name(OrderBy order) {
  return order == OrderBy::kName || (order == OrderBy::kOccurrence && !std::is_same_v<Proto, MultiGraphNodeProto>);
}
// The number a proto sorts by when its order is not by name.
template <typename Proto>
int64_t order_total(const Proto& p, OrderBy order) {
  switch (order) {
    case OrderBy::kBytes:
      return p.total_requested_bytes;
    case OrderBy::kPeakBytes:
      return p.total_peak_bytes;
    case OrderBy::kResidualBytes:
      return p.total_residual_bytes;
    case OrderBy::kOutputBytes:
      return p.total_output_bytes;
    case OrderBy::kMicros:
      return p.total_exec_micros;
    case OrderBy::kAcceleratorMicros:
      return p.total_accelerator_exec_micros;
    case OrderBy::kCpuMicros:
      return p.total_cpu_exec_micros;
    case OrderBy::kParams:
      return p.total_parameters;
    case OrderBy::kFloatOps:
      return p.total_float_ops;
    case OrderBy::kOccurrence:
      if constexpr (std::is_same_v<Proto, MultiGraphNodeProto>) return static_cast<int64_t>(p.graph_nodes.size());
      return 0;
    default:
      return 0;
  }
}
// Whether an item of name `name_a` and total `total_a` goes before one of `name_b` and `total_b`.
inline bool sorts_before(std::string_view name_a, int64_t total_a, std::string_view name_b, int64_t total_b,
                         bool by_name) {
  if (name_a == kTFProfRoot) return name_b != kTFProfRoot;
  if (name_b == kTFProfRoot) return false;
  if (by_name) return name_a < name_b;
  return total_a > total_b;
}
// `name_of(i)` is item i's name (by default its proto's).
template <typename Proto, typename NameOf>
void sort_by_order(std::vector<int32_t>& items, const std::vector<Proto>& protos, OrderBy order,
                   const NameOf& name_of) {
  if (items.size() < 2) return;  // std::stable_sort allocates a buffer even for one item
  const bool by_name = order_is_by_name<Proto>(order);
  std::stable_sort(items.begin(), items.end(), [&](int32_t a, int32_t b) {
    return sorts_before(name_of(a), by_name ? 0 : order_total(protos[a], order), name_of(b),
                        by_name ? 0 : order_total(protos[b], order), by_name);
  });
}

template <typename Proto>
void sort_by_order(std::vector<int32_t>& items, const std::vector<Proto>& protos, OrderBy order) {
  sort_by_order(items, protos, order, [&](int32_t i) -> std::string_view { return protos[i].name; });
}

// "<self>/<total>" or "--/<total>" for an unaccounted node.
std::string self_total(bool account, const std::string& self, const std::string& total);

// A scope/graph node line without indentation (TFShow::FormatNode), appended to `out`:
// "name (f1, f2, ...)". `node` is null for a synthetic node, whose op type is `synthetic_op_type`.
void append_graph_node(std::string& out, const GraphNodeProto& p, bool account, const ModelNode* node,
                       std::string_view synthetic_op_type, const ViewOptions& o);
// The legend of scope/graph views (TFShow::FormatLegend).
std::string graph_legend(const ViewOptions& o);
// The legend of op/code views (TFMultiShow::FormatLegend).
std::string multi_legend(const ViewOptions& o);

std::string join(const std::vector<std::string>& items, std::string_view sep);

// What a multi node (an op type, a source line) holds besides its proto.
struct MultiExtra {
  std::vector<std::string_view> op_types;  // sorted, unique
  std::vector<std::string_view> devices;   // sorted, unique
  // Collective ops among the nodes (ModelNode::collective_ranks): "collective: <MPI call>,
  // ranks: N, bytes_moved: <what this rank sent>" (ops/collective_trace.h); empty when none.
  std::string collective;
};
// ShowMultiNode::ReInit (TFMultiGraphNode::SnapshotNodes): the node's own statistics are the
// sums over its graph nodes whose op types match account_type_regexes; graph_nodes gets each
// of them. Returns whether the node is accounted: some graph node matched (or it has none and
// the regexes are exactly {".*"}).
bool snapshot_multi_node(MultiGraphNodeProto& p, MultiExtra& extra, std::string_view name,
                         const std::vector<int32_t>& nodes, const ProfileModel& model,
                         const std::vector<NodeStats>& stats, const NameMatcher& account);

}  // namespace stepscope::tfprof
