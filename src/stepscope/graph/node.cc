#include "stepscope/graph/node.h"

#include "stepscope/graph/graph.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/graph/op_def.h"

namespace stepscope {

DType Output::dtype() const { return node->output_dtype(index); }
const Shape& Output::shape() const { return node->output_shape(index); }
std::string Output::name() const { return node->name() + ":" + std::to_string(index); }
Graph* Output::graph() const { return node ? &node->graph() : nullptr; }

std::string_view Node::op_type() const { return op_->name; }

std::span<const uintptr_t> Node::call_stack() const {
  if (call_stack_ < 0) return {};
  return graph_->call_stacks().stack(call_stack_);
}

std::string Node::timeline_label() const {
  std::vector<NodeLabelInput> inputs;
  inputs.reserve(inputs_.size());
  for (const Output& in : inputs_) inputs.push_back({.node = in.node->name(), .output = in.index});
  return format_node_label(name_, op_->name, inputs);
}

}  // namespace stepscope
