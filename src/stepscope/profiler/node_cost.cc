#include "stepscope/profiler/node_cost.h"

#include <algorithm>

#include "stepscope/base/huge_pages.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

const Node* recorded_node(const Graph& graph, const NodeExecStats& record) {
  if (record.node_id >= 0 && record.node_id < graph.num_nodes()) {
    const Node* candidate = graph.node(record.node_id);
    if (candidate->name() == record.node_name) return candidate;
  }
  return record.node_name.empty() ? nullptr : graph.find_node(record.node_name);
}

namespace {

// Each node's record in the step, found first, so that every output shape is copied once: the
// recorded one where there is one, else the graph's.
struct Records {
  std::vector<const NodeExecStats*> recorded;
  std::vector<const NodeExecStats*> again;  // records of nodes recorded more than once (rare)
};

Records find_records(const Graph& graph, const StepStats& step) {
  const int n = graph.num_nodes();
  Records r{std::vector<const NodeExecStats*>(n, nullptr), {}};
  for (const DeviceStepStats& device : step.dev_stats()) {
    for (const NodeExecStats& stats : device.node_stats) {
      if (stats.node_id < 0 || stats.node_id >= n) continue;
      if (graph.node(stats.node_id)->name() != stats.node_name) continue;  // a step of another graph
      (r.recorded[stats.node_id] ? r.again.emplace_back() : r.recorded[stats.node_id]) = &stats;
    }
  }
  return r;
}

}  // namespace

RunShapes::RunShapes(const Graph& graph, const StepStats& step) {
  const Records r = find_records(graph, step);
  fill(graph, r.recorded, r.again);
}

RunShapes::RunShapes(const Graph& graph, std::span<const NodeExecStats* const> recorded,
                     std::span<const NodeExecStats* const> again) {
  fill(graph, recorded, again);
}

void RunShapes::fill(const Graph& graph, std::span<const NodeExecStats* const> recorded,
                     std::span<const NodeExecStats* const> again) {
  ran_.assign(graph.num_nodes(), false);
  const int n = graph.num_nodes();
  for (int id = 0; id < n; ++id) ran_[id] = recorded[id] != nullptr;
  reserve_huge_unless_reclaimed(first_, static_cast<size_t>(n) + 1);
  reserve_huge_unless_reclaimed(outputs_, static_cast<size_t>(n));  // most nodes have one output
  for (int id = 0; id < n; ++id) {
    first_.push_back(static_cast<uint32_t>(outputs_.size()));
    const Node& node = *graph.node(id);
    const NodeExecStats* stats = recorded[id];
    for (int i = 0; i < node.num_outputs(); ++i) {
      const Shape* shape = &node.output_shape(i);
      if (stats)
        for (const NodeOutput& output : stats->output)
          if (output.slot == i) shape = &output.tensor_description.shape;
      outputs_.push_back(shape);
    }
  }
  first_.push_back(static_cast<uint32_t>(outputs_.size()));
  // A later record of a node overrides the earlier ones' shapes, slot by slot.
  for (const NodeExecStats* stats : again) {
    const Node& node = *graph.node(stats->node_id);
    for (const NodeOutput& output : stats->output)
      if (output.slot >= 0 && output.slot < node.num_outputs())
        outputs_[first_[stats->node_id] + output.slot] = &output.tensor_description.shape;
  }
}

std::vector<Shape> RunShapes::outputs(const Node& node) const {
  std::vector<Shape> shapes;
  outputs(node, shapes);
  return shapes;
}

void RunShapes::outputs(const Node& node, std::vector<Shape>& out) const {
  out.clear();
  for (uint32_t i = first_[node.id()]; i < first_[node.id() + 1]; ++i) out.push_back(*outputs_[i]);
}

std::vector<Shape> RunShapes::inputs(const Node& node) const {
  std::vector<Shape> shapes;
  inputs(node, shapes);
  return shapes;
}

void RunShapes::inputs(const Node& node, std::vector<Shape>& out) const {
  out.clear();
  out.reserve(node.num_inputs());
  for (const Output& input : node.inputs()) out.push_back(output(input));
}

const Shape& RunShapes::output(const Output& output) const {
  return *outputs_[first_[output.node->id()] + output.index];
}

bool RunShapes::ran(const Node& node) const { return ran_[node.id()]; }

namespace {
int64_t float_ops(const Node& node, std::span<const Shape> inputs, std::span<const Shape> outputs) {
  const CostContext context{node, inputs, outputs};
  return std::max<int64_t>(0, node.op().flops(context));
}
}  // namespace

int64_t node_float_ops(const Node& node, const RunShapes& shapes) {
  if (!node.op().flops) return 0;
  thread_local std::vector<Shape> inputs, outputs;  // reused: a graph's worth of calls allocates once
  shapes.inputs(node, inputs);
  shapes.outputs(node, outputs);
  return float_ops(node, inputs, outputs);
}

int64_t node_float_ops(const Node& node) {
  if (!node.op().flops) return 0;
  thread_local std::vector<Shape> inputs, outputs;
  inputs.clear();
  for (const Output& input : node.inputs()) inputs.push_back(input.node->output_shape(input.index));
  outputs.clear();
  for (int i = 0; i < node.num_outputs(); ++i) outputs.push_back(node.output_shape(i));
  return float_ops(node, inputs, outputs);
}

}  // namespace stepscope
