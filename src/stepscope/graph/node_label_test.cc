#include "stepscope/graph/node_label.h"

#include <gtest/gtest.h>

#include <vector>

#include "stepscope/graph/graph.h"
#include "stepscope/graph/scope.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"

namespace stepscope {
namespace {

std::vector<ParsedNodeLabelInput> inputs_of(const ParsedNodeLabel& label) {
  std::vector<ParsedNodeLabelInput> out;
  std::string_view rest = label.inputs;
  for (ParsedNodeLabelInput in; next_node_label_input(rest, in);) out.push_back(in);
  return out;
}

TEST(NodeLabel, FormatsDataOutputsAndControlInputsAsTensorFlowDoes) {
  const std::vector<NodeLabelInput> inputs{{.node = "a"}, {.node = "b", .output = 1}, {.node = "c", .control = true}};
  EXPECT_EQ(format_node_label("layer/MatMul", "MatMul", inputs), "layer/MatMul = MatMul(a, b:1, ^c)");
  EXPECT_EQ(format_node_label("x", "Placeholder", {}), "x = Placeholder()");
}

TEST(NodeLabel, ParsesWhatFormatWrites) {
  const std::vector<NodeLabelInput> inputs{{.node = "a"}, {.node = "b", .output = 12}, {.node = "c", .control = true}};
  const std::string text = format_node_label("scope/add", "AddV2", inputs);
  const ParsedNodeLabel label = parse_node_label(text);
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.name, "scope/add");
  EXPECT_EQ(label.op, "AddV2");
  const auto parsed = inputs_of(label);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0].node, "a");
  EXPECT_EQ(parsed[0].output, 0);
  EXPECT_FALSE(parsed[0].control);
  EXPECT_EQ(parsed[1].node, "b");
  EXPECT_EQ(parsed[1].output, 12);
  EXPECT_EQ(parsed[1].text, "b:12");
  EXPECT_EQ(parsed[2].node, "c");
  EXPECT_TRUE(parsed[2].control);
}

TEST(NodeLabel, NoInputs) {
  const ParsedNodeLabel label = parse_node_label("x = Placeholder()");
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.name, "x");
  EXPECT_EQ(label.op, "Placeholder");
  EXPECT_TRUE(inputs_of(label).empty());
}

TEST(NodeLabel, NamesContainingTheSeparatorOrParentheses) {
  ParsedNodeLabel label = parse_node_label("a = b = Add(x, y)");
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.name, "a = b");
  EXPECT_EQ(label.op, "Add");

  label = parse_node_label("f(x) = Neg(g(y))");
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.name, "f(x)");
  EXPECT_EQ(label.op, "Neg");
  EXPECT_EQ(label.inputs, "g(y)");

  // An input whose name holds " = Op(" does not move the split (TensorFlow's greedy regex would).
  label = parse_node_label("n = Identity(m = Op(z))");
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.name, "n");
  EXPECT_EQ(label.op, "Identity");
  EXPECT_EQ(label.inputs, "m = Op(z)");
}

TEST(NodeLabel, OpsWithNamespaces) {
  const ParsedNodeLabel label = parse_node_label("n = Addons>GeluGrad(a, b)");
  ASSERT_TRUE(label.valid);
  EXPECT_EQ(label.op, "Addons>GeluGrad");
  EXPECT_EQ(inputs_of(label).size(), 2u);
}

TEST(NodeLabel, InputsWithOddSpacingAndColons) {
  const ParsedNodeLabel label = parse_node_label("n = Op( a ,b:1,, ^ c , d:x, e:)");
  ASSERT_TRUE(label.valid);
  const auto parsed = inputs_of(label);
  ASSERT_EQ(parsed.size(), 5u);
  EXPECT_EQ(parsed[0].node, "a");
  EXPECT_EQ(parsed[1].node, "b");
  EXPECT_EQ(parsed[1].output, 1);
  EXPECT_EQ(parsed[2].node, "c");
  EXPECT_TRUE(parsed[2].control);
  // Not an output index: the whole text names a node.
  EXPECT_EQ(parsed[3].node, "d:x");
  EXPECT_EQ(parsed[3].output, 0);
  EXPECT_EQ(parsed[4].node, "e:");
}

TEST(NodeLabel, MalformedLabelsAreNotValid) {
  for (std::string_view text :
       {"", "n", "n = ", "n = Op", "n = Op(", "n=Op(a)", " = (a)", "n = (a)", "n = A B(c)", "n = Op)("}) {
    const ParsedNodeLabel label = parse_node_label(text);
    EXPECT_FALSE(label.valid) << text;
    EXPECT_TRUE(label.name.empty() && label.op.empty() && label.inputs.empty()) << text;
  }
}

TEST(NodeLabel, NodeTimelineLabelIsTheFormattedLabel) {
  Graph g;
  Scope root(g);
  auto a = constant(root, 1.0f);
  auto b = constant(root, 2.0f);
  auto c = add(root.with_op_name("sum"), a, b);
  EXPECT_EQ(c.node->timeline_label(), "sum = " + std::string(c.node->op_type()) + "(Const, Const_1)");
}

}  // namespace
}  // namespace stepscope
