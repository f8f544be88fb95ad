// What a node cost in one traced step, computed after the step from the graph and its
// StepStats: the shapes each node's inputs and outputs actually had (a batch dimension left
// unknown in the graph is known in the step), and the float ops of the node's FLOP rule on them.
// The timeline's args and tfprof's float_ops both use it, so they always agree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stepscope/core/shape.h"

namespace stepscope {

class Graph;
class Node;
class StepStats;
struct NodeExecStats;
struct Output;

// The graph's node a step's record is of: the one of its node_id when the names agree (a step
// of this graph), else the one of its name; null for none.
const Node* recorded_node(const Graph& graph, const NodeExecStats& record);

class RunShapes {
 public:
  // Shapes the step recorded for each node's outputs (a fed node's are the fed tensors'); where
  // it recorded none (a node that did not run), the graph's inferred shapes. It points at those
  // shapes: valid while the graph and the step are.
  RunShapes(const Graph& graph, const StepStats& step);
  // The same from each node's record, found by the caller: by graph id (graph.num_nodes()
  // entries, null: none), and the further records of nodes recorded more than once, in the
  // step's order (what the constructor above finds: records whose node_id is a node of `graph`
  // of the record's node_name).
  RunShapes(const Graph& graph, std::span<const NodeExecStats* const> recorded,
            std::span<const NodeExecStats* const> again);

  std::vector<Shape> outputs(const Node& node) const;
  // The same into `out` (cleared first), for a caller that reuses it.
  void outputs(const Node& node, std::vector<Shape>& out) const;
  // The shapes of the node's data inputs, in input order: each producer's output shape.
  std::vector<Shape> inputs(const Node& node) const;
  // The same into `out` (cleared first), for a caller that reuses it.
  void inputs(const Node& node, std::vector<Shape>& out) const;
  // The shape of one output (a node's input), without a copy.
  const Shape& output(const Output& output) const;
  // Whether the step recorded the node's outputs (it ran in the step, or was fed).
  bool ran(const Node& node) const;

 private:
  void fill(const Graph& graph, std::span<const NodeExecStats* const> recorded,
            std::span<const NodeExecStats* const> again);

  // Every node's output shapes in one array (node id's from first_[id] to first_[id + 1]): one
  // allocation for the graph, not one a node. Each points at the record's shape or the graph's
  // (8 bytes, where a copy is 72: a million-node step's would be 72 MB to write).
  std::vector<const Shape*> outputs_;
  std::vector<uint32_t> first_;
  std::vector<bool> ran_;
};

// The node's op FLOP rule on the run's shapes; 0 for ops without one and for shapes still
// unknown.
int64_t node_float_ops(const Node& node, const RunShapes& shapes);
// The same on the graph's inferred shapes.
int64_t node_float_ops(const Node& node);

}  // namespace stepscope
