#include "stepscope/profiler/node_cost.h"

#include <gtest/gtest.h>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

RunMetadata traced_run(Session& session, const std::vector<Output>& fetches, const FeedList& feeds = {}) {
  RunOptions options;
  options.trace_level = TraceLevel::kFullTrace;
  RunMetadata metadata;
  session.run(feeds, fetches, {}, options, &metadata);
  return metadata;
}

TEST(NodeCost, FloatOpsUseTheShapesTheStepHad) {
  Graph graph;
  Scope root(graph);
  // The row count is unknown in the graph (a reshape of a computed shape) and 4 in the step.
  Output a = constant(root, std::vector<float>(12, 1.0f), Shape{12});
  Output rows = reshape(root, a, constant(root, std::vector<int32_t>{4, 3}, Shape{2}));
  Output product = matmul(root, rows, constant(root, std::vector<float>(6, 1.0f), Shape{3, 2}));
  Output unused = matmul(root, product, constant(root, std::vector<float>(4, 1.0f), Shape{2, 2}));
  Session session(graph);
  const RunMetadata metadata = traced_run(session, {product});
  const RunShapes shapes(graph, metadata.step_stats);

  EXPECT_TRUE(shapes.ran(*product.node));
  EXPECT_EQ(shapes.outputs(*product.node)[0], (Shape{4, 2}));
  EXPECT_EQ(shapes.inputs(*product.node)[0], (Shape{4, 3}));
  EXPECT_EQ(node_float_ops(*product.node, shapes), 2 * 4 * 2 * 3);

  EXPECT_FALSE(shapes.ran(*unused.node));
  EXPECT_EQ(shapes.outputs(*unused.node)[0], unused.shape());
  EXPECT_EQ(node_float_ops(*rows.node, shapes), 0);  // Reshape moves data, computes nothing
}

// A placeholder whose batch dimension is unknown in the graph has it in the step: the step
// records the fed tensor as the placeholder's output.
TEST(NodeCost, FedPlaceholdersHaveTheShapesTheyWereFed) {
  Graph graph;
  Scope root(graph);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  Output product = matmul(root, x, constant(root, std::vector<float>(6, 1.0f), Shape{3, 2}));
  Session session(graph);
  const RunMetadata metadata = traced_run(session, {product}, {{x, Tensor(DType::kFloat32, Shape{5, 3})}});
  const RunShapes shapes(graph, metadata.step_stats);

  EXPECT_TRUE(shapes.ran(*x.node));
  EXPECT_EQ(shapes.outputs(*x.node)[0], (Shape{5, 3}));
  EXPECT_EQ(shapes.inputs(*product.node), (std::vector<Shape>{Shape{5, 3}, Shape{3, 2}}));
  EXPECT_EQ(shapes.outputs(*product.node)[0], (Shape{5, 2}));
  EXPECT_EQ(node_float_ops(*product.node, shapes), 2 * 5 * 3 * 2);

  // Untraced, nothing is known beyond the graph.
  const RunShapes static_shapes(graph, StepStats{});
  EXPECT_EQ(static_shapes.inputs(*product.node)[0], (Shape{-1, 3}));
  EXPECT_EQ(node_float_ops(*product.node, static_shapes), 0);
  EXPECT_EQ(node_float_ops(*product.node), 0);  // the graph's shapes alone
}

TEST(NodeCost, FloatOpsOnTheGraphsShapesAloneAgreeWithAStepThatRecordedNothing) {
  Graph graph;
  Scope root(graph);
  Output a = constant(root, std::vector<float>(12, 1.0f), Shape{4, 3});
  Output product = matmul(root, a, constant(root, std::vector<float>(6, 1.0f), Shape{3, 2}));
  const RunShapes static_shapes(graph, StepStats{});
  EXPECT_EQ(node_float_ops(*product.node), 2 * 4 * 3 * 2);
  EXPECT_EQ(node_float_ops(*product.node), node_float_ops(*product.node, static_shapes));
  EXPECT_EQ(node_float_ops(*a.node), 0);  // no FLOP rule
}

// A node recorded twice in a step (two devices' records of it, or a step put together from
// several): each output has the shape of the last record that has it.
TEST(NodeCost, ALaterRecordOfANodeOverridesTheShapesItRecords) {
  Graph graph;
  Scope root(graph);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  Output product = matmul(root, x, constant(root, std::vector<float>(6, 1.0f), Shape{3, 2}));
  auto output = [](int slot, Shape shape) {
    NodeOutput out;
    out.slot = slot;
    out.tensor_description.shape = std::move(shape);
    return out;
  };
  const std::vector<NodeOutput> first{output(0, Shape{5, 3})}, second{output(0, Shape{7, 3})}, none;
  StepStats step;
  step.dev_stats().resize(2);
  NodeExecStats stats;
  stats.node_id = x.node->id();
  stats.node_name = x.node->name();
  stats.output = first;
  step.dev_stats()[0].node_stats.push_back(stats);
  stats.output = none;  // records no shape: the one before stays
  step.dev_stats()[0].node_stats.push_back(stats);
  const RunShapes once(graph, step);
  EXPECT_EQ(once.outputs(*x.node)[0], (Shape{5, 3}));
  stats.output = second;
  step.dev_stats()[1].node_stats.push_back(stats);
  const RunShapes twice(graph, step);
  EXPECT_TRUE(twice.ran(*x.node));
  EXPECT_EQ(twice.outputs(*x.node)[0], (Shape{7, 3}));
  EXPECT_EQ(twice.output(product.node->inputs()[0]), (Shape{7, 3}));
  EXPECT_EQ(twice.inputs(*product.node), (std::vector<Shape>{Shape{7, 3}, Shape{3, 2}}));
  // A record of another graph's node (the name differs) is not this node's.
  stats.node_name = "not_x";
  stats.output = first;
  step.dev_stats()[1].node_stats.push_back(stats);
  EXPECT_EQ(RunShapes(graph, step).outputs(*x.node)[0], (Shape{7, 3}));
}

TEST(NodeCost, UnknownShapesCountNoFloatOps) {
  Graph graph;
  Scope root(graph);
  Output x = placeholder(root, DType::kFloat32, Shape{-1, 3});
  Output product = matmul(root, x, constant(root, std::vector<float>(6, 1.0f), Shape{3, 2}));
  const RunShapes shapes(graph, StepStats{});
  EXPECT_FALSE(shapes.ran(*product.node));
  EXPECT_EQ(node_float_ops(*product.node, shapes), 0);
}

}  // namespace
}  // namespace stepscope
