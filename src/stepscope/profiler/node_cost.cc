#include "stepscope/profiler/node_cost.h"

#include <algorithm>

#include "stepscope/graph/graph.h"
#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

RunShapes::RunShapes(const Graph& graph, const StepStats& step)
    : outputs_(graph.num_nodes()), ran_(graph.num_nodes(), false) {
  for (const auto& node : graph.nodes()) {
    for (int i = 0; i < node->num_outputs(); ++i) outputs_[node->id()].push_back(node->output_shape(i));
  }
  for (const DeviceStepStats& device : step.dev_stats) {
    for (const NodeExecStats& stats : device.node_stats) {
      if (stats.node_id < 0 || stats.node_id >= graph.num_nodes()) continue;
      const Node& node = *graph.node(stats.node_id);
      if (node.name() != stats.node_name) continue;  // a step of another graph
      ran_[stats.node_id] = true;
      std::vector<Shape>& shapes = outputs_[stats.node_id];
      for (const NodeOutput& output : stats.output) {
        if (output.slot >= 0 && output.slot < node.num_outputs()) shapes[output.slot] = output.tensor_description.shape;
      }
    }
  }
}

std::span<const Shape> RunShapes::outputs(const Node& node) const { return outputs_[node.id()]; }

std::vector<Shape> RunShapes::inputs(const Node& node) const {
  std::vector<Shape> shapes;
  shapes.reserve(node.num_inputs());
  for (const Output& input : node.inputs()) {
    shapes.push_back(outputs_[input.node->id()][input.index]);
  }
  return shapes;
}

bool RunShapes::ran(const Node& node) const { return ran_[node.id()]; }

int64_t node_float_ops(const Node& node, const RunShapes& shapes) {
  if (!node.op().flops) return 0;
  const std::vector<Shape> inputs = shapes.inputs(node);
  const CostContext context{node, inputs, shapes.outputs(node)};
  return std::max<int64_t>(0, node.op().flops(context));
}

}  // namespace stepscope
