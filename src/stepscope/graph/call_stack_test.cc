// The call stacks of nodes' creation: captured per node, interned per graph, and off on request.
#include "stepscope/graph/call_stack.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "stepscope/graph/graph.h"
#include "stepscope/graph/scope.h"
#include "stepscope/ops/array_ops.h"

namespace stepscope {
namespace {

TEST(CallStackTable, InternsEqualStacksOnce) {
  CallStackTable table;
  const uintptr_t a[] = {1, 2, 3}, b[] = {1, 2}, c[] = {1, 2, 3};
  EXPECT_EQ(table.intern(a), 0);
  EXPECT_EQ(table.intern(b), 1);
  EXPECT_EQ(table.intern(c), 0);
  EXPECT_EQ(table.intern({}), 2);
  EXPECT_EQ(table.size(), 3);
  ASSERT_EQ(table.stack(0).size(), 3u);
  EXPECT_EQ(table.stack(0)[2], 3u);
  EXPECT_EQ(table.stack(1).size(), 2u);
  EXPECT_TRUE(table.stack(2).empty());
}

TEST(CallStack, CapturesTheCallersFrames) {
  uintptr_t pcs[kMaxCallStackDepth];
  const int depth = capture_call_stack(pcs, kMaxCallStackDepth);
  EXPECT_GE(depth, 2);  // this test's body and gtest's frames at least
  EXPECT_LE(depth, kMaxCallStackDepth);
  EXPECT_EQ(capture_call_stack(pcs, 1), 1);
}

TEST(CallStack, GraphRecordsOnePerCallPath) {
  Graph g;
  Scope root(g);
  std::vector<Output> made;
  volatile int n = 3;  // not a constant: an unrolled loop would be three call sites
  for (int i = 0; i < n; ++i) made.push_back(constant(root, 1.0f));  // one call site: one stack
  Output other = constant(root, 2.0f);
  ASSERT_FALSE(made[0].node->call_stack().empty());
  EXPECT_EQ(made[0].node->call_stack_id(), made[2].node->call_stack_id());
  EXPECT_NE(made[0].node->call_stack_id(), other.node->call_stack_id());
  EXPECT_EQ(g.call_stacks().size(), 2);
  // Off: nothing captured, nothing stored.
  Graph off;
  off.set_capture_call_stacks(false);
  Output x = constant(Scope(off), 1.0f);
  EXPECT_TRUE(x.node->call_stack().empty());
  EXPECT_EQ(x.node->call_stack_id(), -1);
  EXPECT_EQ(off.call_stacks().size(), 0);
  // Nodes without a call site (not built by a user's call) get no stack.
  NodeSpec spec;
  spec.name = "bare";
  spec.op = &made[0].node->op();
  spec.attrs = made[0].node->attrs();
  EXPECT_EQ(g.add_node(std::move(spec))->call_stack_id(), -1);
}

// Run again by the test graph.capture_stacks_off_by_environment with STEPSCOPE_CAPTURE_STACKS=0.
TEST(CallStack, DefaultFollowsTheEnvironment) {
  const char* v = std::getenv("STEPSCOPE_CAPTURE_STACKS");
  const bool off = v && std::string_view(v) == "0";
  EXPECT_EQ(capture_call_stacks_by_default(), !off);
  Graph g;
  EXPECT_EQ(g.capture_call_stacks(), !off);
  EXPECT_EQ(constant(Scope(g), 1.0f).node->call_stack().empty(), off);
  std::printf("capture %s\n", off ? "off" : "on");
}

}  // namespace
}  // namespace stepscope
