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
