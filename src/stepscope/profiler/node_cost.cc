#include "stepscope/profiler/node_cost.h"

#include <algorithm>

#include "stepscope/graph/graph.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

RunShapes::RunShapes(const Graph& graph, const StepStats& step) : ran_(graph.num_nodes(), false) {
  first_.reserve(graph.num_nodes() + 1);
  for (int id = 0; id < graph.num_nodes(); ++id) {
    first_.push_back(static_cast<uint32_t>(outputs_.size()));
    const Node& node = *graph.node(id);
    for (int i = 0; i < node.num_outputs(); ++i) outputs_.push_back(node.output_shape(i));
  }
  first_.push_back(static_cast<uint32_t>(outputs_.size()));
  for (const DeviceStepStats& device : step.dev_stats) {
    for (const NodeExecStats& stats : device.node_stats) {
      if (stats.node_id < 0 || stats.node_id >= graph.num_nodes()) continue;
      const Node& node = *graph.node(stats.node_id);
      if (node.name() != stats.node_name) continue;  // a step of another graph
      ran_[stats.node_id] = true;
      for (const NodeOutput& output : stats.output) {
        if (output.slot >= 0 && output.slot < node.num_outputs())
          outputs_[first_[stats.node_id] + output.slot] = output.tensor_description.shape;
      }
    }
  }
}

std::span<const Shape> RunShapes::outputs(const Node& node) const {
  return std::span<const Shape>(outputs_).subspan(first_[node.id()], first_[node.id() + 1] - first_[node.id()]);
}

std::vector<Shape> RunShapes::inputs(const Node& node) const {
  std::vector<Shape> shapes;
  inputs(node, shapes);
  return shapes;
}

void RunShapes::inputs(const Node& node, std::vector<Shape>& out) const {
  out.clear();
  out.reserve(node.num_inputs());
  for (const Output& input : node.inputs()) out.push_back(outputs_[first_[input.node->id()] + input.index]);
}

bool RunShapes::ran(const Node& node) const { return ran_[node.id()]; }

int64_t node_float_ops(const Node& node, const RunShapes& shapes) {
  if (!node.op().flops) return 0;
  thread_local std::vector<Shape> inputs;  // reused: a graph's worth of calls allocates once
  shapes.inputs(node, inputs);
  const CostContext context{node, inputs, shapes.outputs(node)};
  return std::max<int64_t>(0, node.op().flops(context));
}

}  // namespace stepscope
