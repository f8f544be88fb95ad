// A node of the dataflow graph and the handle to one of its outputs.
#pragma once

#include <cstdint>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/core/dtype.h"
#include "stepscope/core/shape.h"
#include "stepscope/graph/attr.h"
#include "stepscope/graph/source_location.h"

namespace stepscope {

class Graph;
class Node;
struct OpDef;

// Output `index` of `node`; the value passed along a data edge. Null when node is null
// (e.g. "no gradient flows here").
struct Output {
  Node* node = nullptr;
  int index = 0;

  explicit operator bool() const { return node != nullptr; }
  DType dtype() const;
  const Shape& shape() const;  // as inferred when the node was added
  std::string name() const;    // "scope/op:0"
  Graph* graph() const;
  friend bool operator==(const Output& a, const Output& b) { return a.node == b.node && a.index == b.index; }
};

// A node's location where none is known (a node read from a file).
inline const SourceLocation kUnknownSourceLocation{};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return name_; }
  const OpDef& op() const { return *op_; }
  std::string_view op_type() const;
  const AttrMap& attrs() const { return attrs_; }
  const std::vector<Output>& inputs() const { return inputs_; }
  const Output& input(int i) const { return inputs_[i]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const std::vector<Node*>& control_inputs() const { return control_inputs_; }
  int num_outputs() const { return static_cast<int>(output_dtypes_.size()); }
  DType output_dtype(int i) const { return output_dtypes_[i]; }
  const Shape& output_shape(int i) const { return output_shapes_[i]; }
  Output output(int i = 0) const { return {const_cast<Node*>(this), i}; }
  // Canonical device name, e.g. "/job:localhost/replica:0/task:0/device:CPU:0".
  const std::string& device() const { return *device_; }
  // Nodes made at one call site share the object (the graph keeps each location once).
  const SourceLocation& source_location() const { return *location_; }
  // Return addresses of the calls that added the node, innermost first (graph/call_stack.h);
  // empty when the graph does not capture stacks. Valid until the graph's next add_node.
  std::span<const uintptr_t> call_stack() const;
  // The stack's id in graph().call_stacks(); -1 when none was captured.
  int32_t call_stack_id() const { return call_stack_; }
  Graph& graph() const { return *graph_; }
  // "name = Op(in0, in1)" — the label TensorFlow's timelines parse.
  std::string timeline_label() const;

 private:
  friend class Graph;
  int id_ = -1;
  std::string name_;
  const OpDef* op_ = nullptr;
  AttrMap attrs_;
  std::vector<Output> inputs_;
  std::vector<Node*> control_inputs_;
  std::vector<DType> output_dtypes_;
  std::vector<Shape> output_shapes_;
  // The graph's copies: its nodes share a few devices and locations (each a string or two a node
  // cost a million-node graph ~2 allocations a node, and 100+ bytes).
  const std::string* device_ = nullptr;
  const SourceLocation* location_ = &kUnknownSourceLocation;
  int32_t call_stack_ = -1;
  Graph* graph_ = nullptr;
};

}  // namespace stepscope
