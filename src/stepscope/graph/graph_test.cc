#include "stepscope/graph/graph.h"

#include <gtest/gtest.h>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

TEST(Graph, NamesAreUniqueUnderNameScopes) {
  Graph g;
  Scope root(g);
  auto a = constant(root, 1.0f);
  auto b = constant(root, 2.0f);
  EXPECT_EQ(a.node->name(), "Const");
  EXPECT_EQ(b.node->name(), "Const_1");
  Scope hidden = root.with_name_scope("hidden");
  auto c = constant(hidden, 3.0f);
  EXPECT_EQ(c.node->name(), "hidden/Const");
  Scope hidden2 = root.with_name_scope("hidden");
  EXPECT_EQ(hidden2.name_prefix(), "hidden_1/");
  Scope nested = hidden.with_name_scope("dense");
  auto d = constant(nested.with_op_name("w"), 4.0f);
  EXPECT_EQ(d.node->name(), "hidden/dense/w");
  EXPECT_EQ(d.name(), "hidden/dense/w:0");
  EXPECT_EQ(g.find_node("hidden/dense/w"), d.node);
  EXPECT_EQ(g.output_by_name("hidden/dense/w:0"), d);
  EXPECT_EQ(g.output_by_name("hidden/dense/w"), d);
  EXPECT_THROW(g.output_by_name("nope"), NotFoundError);
  EXPECT_THROW(g.output_by_name("hidden/dense/w:3"), NotFoundError);
}

TEST(Graph, RecordsTheUsersSourceLocation) {
  Graph g;
  Scope root(g);
  const int line = __LINE__ + 1;
  auto a = constant(root, 1.0f);
  EXPECT_EQ(a.node->source_location().line, line);
  EXPECT_NE(a.node->source_location().file.find("graph_test.cc"), std::string::npos);
  EXPECT_NE(a.node->source_location().function.find("TestBody"), std::string::npos);
}

// Nodes made at one call site share one kept location, and nodes on one device one kept name:
// a graph holds each once, whichever order its nodes come in.
TEST(Graph, KeepsEachLocationAndDeviceOnce) {
  Graph g;
  Scope root(g);
  std::vector<Output> first, second;
  for (int i = 0; i < 3; ++i) {
    first.push_back(constant(root, 1.0f));
    second.push_back(constant(root.with_device("/cpu:1"), 2.0f));
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(&first[i].node->source_location(), &first[0].node->source_location());
    EXPECT_EQ(&second[i].node->source_location(), &second[0].node->source_location());
    EXPECT_EQ(&first[i].node->device(), &first[0].node->device());
    EXPECT_EQ(&second[i].node->device(), &second[0].node->device());
  }
  EXPECT_NE(first[0].node->source_location().line, second[0].node->source_location().line);
  EXPECT_EQ(first[0].node->device(), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(second[0].node->device(), "/job:localhost/replica:0/task:0/device:CPU:1");

  // A node with no location (as one read from a file) has an empty one.
  NodeSpec spec;
  spec.name = "read";
  spec.op = &op_def("NoOp");
  const Node* read = g.add_node(std::move(spec));
  EXPECT_TRUE(read->source_location().file.empty());
  EXPECT_EQ(read->source_location().line, 0);
}

TEST(Graph, FinalizedGraphRejectsNewNodes) {
  Graph g;
  Scope root(g);
  constant(root, 1.0f);
  g.finalize();
  EXPECT_TRUE(g.finalized());
  EXPECT_THROW(constant(root, 2.0f), FailedPreconditionError);
  g.unfinalize();
  EXPECT_NO_THROW(constant(root, 2.0f));
}

TEST(Graph, RejectsInputsFromAnotherGraphAndBadArity) {
  Graph g1, g2;
  Scope s1(g1), s2(g2);
  auto a = constant(s1, 1.0f);
  try {
    identity(s2, a);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "[Identity] Identity: input 0 (Const) is from another graph");
  }
  NodeSpec spec;
  spec.name = "bad";
  spec.op = &op_def("Identity");
  EXPECT_THROW(g1.add_node(spec), InvalidArgumentError);
}

TEST(Graph, DevicesAreCanonical) {
  EXPECT_EQ(canonical_device(""), "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(canonical_device("/cpu:1"), "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(canonical_device("/device:CPU:2"), "/job:localhost/replica:0/task:0/device:CPU:2");
  EXPECT_EQ(canonical_device("/job:localhost/replica:0/task:0/device:CPU:0"),
            "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_THROW(canonical_device("/gpu:0"), InvalidArgumentError);
  Graph g;
  auto a = constant(Scope(g).with_device("/cpu:3"), 1.0f);
  EXPECT_EQ(a.node->device(), "/job:localhost/replica:0/task:0/device:CPU:3");
}

TEST(Graph, ControlDependenciesAndCollections) {
  Graph g;
  Scope root(g);
  auto a = constant(root, 1.0f);
  Node* n = no_op(root.with_control_dependencies({a.node}));
  ASSERT_EQ(n->control_inputs().size(), 1u);
  EXPECT_EQ(n->control_inputs()[0], a.node);
  EXPECT_EQ(n->num_outputs(), 0);
  g.add_to_collection("trainable_variables", a.node);
  EXPECT_EQ(g.collection("trainable_variables").size(), 1u);
  EXPECT_TRUE(g.collection("nothing").empty());
}

TEST(Graph, TimelineLabelListsInputs) {
  Graph g;
  Scope root(g);
  auto a = constant(root.with_op_name("a"), 1.0f);
  auto b = identity(root.with_op_name("b"), a);
  EXPECT_EQ(b.node->timeline_label(), "b = Identity(a)");
  EXPECT_EQ(a.node->timeline_label(), "a = Const()");
}

TEST(OpRegistry, UnknownOpIsNotFoundAndDuplicatesAreRejected) {
  EXPECT_THROW(op_def("NoSuchOp"), NotFoundError);
  OpRegistry r;
  r.add({.name = "X", .doc = "test"});
  EXPECT_THROW(r.add({.name = "X", .doc = "test"}), InternalError);
  EXPECT_NE(op_registry().find("Placeholder"), nullptr);
}

}  // namespace
}  // namespace stepscope
