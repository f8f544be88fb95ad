// The graph view (tfprof_graph.cc): a node's children are its inputs, each node is shown once,
// an unaccounted node passes its accounted inputs up.
#include <gtest/gtest.h>

#include <sstream>

#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::tf_test_model;

ProfileOptions graph_options(std::vector<std::string> account, std::vector<std::string> select) {
  ProfileOptions o = ProfileOptionBuilder().with_empty_output().build();
  o.account_type_regexes = std::move(account);
  o.select = std::move(select);
  return o;
}

class GraphViewTest : public ::testing::Test {
 protected:
  GraphViewTest() : model_(tf_test_model()), profiler_(model_->graph) {
    profiler_.set_log(&log_);
    profiler_.add_step(0, model_->run_metadata);
  }
  std::unique_ptr<tfprof::testing::TfTestModel> model_;
  Profiler profiler_;
  std::ostringstream log_;
};

TEST_F(GraphViewTest, InputsAreChildren) {
  auto o = graph_options({".*"}, {"cpu_micros"});
  o.max_depth = 4;
  EXPECT_EQ(profiler_.profile_graph(o).text(),
            "node name | cpu execution time\n"
            "_TFProfRoot (--/4.50ms)\n"
            "  Conv2D_1 (419us/4.50ms)\n"
            "    Conv2D (4.07ms/4.07ms)\n"
            "      DW/read (0us/2us)\n"
            "      zeros (2us/2us)\n"
            "    DW2/read (0us/11us)\n"
            "      DW2 (11us/11us)\n"
            "  DW/Assign (0us/0us)\n"
            "    DW/Initializer/random_normal (0us/0us)\n"
            "      DW/Initializer/random_normal/mean (0us/0us)\n"
            "      DW/Initializer/random_normal/mul (0us/0us)\n"
            "  DW2/Assign (0us/0us)\n"
            "    DW2/Initializer/random_normal (0us/0us)\n"
            "      DW2/Initializer/random_normal/mean (0us/0us)\n"
            "      DW2/Initializer/random_normal/mul (0us/0us)\n"
            "  ScalarW/Assign (0us/0us)\n"
            "    ScalarW (0us/0us)\n"
            "    ScalarW/Initializer/random_normal (0us/0us)\n"
            "      ScalarW/Initializer/random_normal/mean (0us/0us)\n"
            "      ScalarW/Initializer/random_normal/mul (0us/0us)\n"
            "  ScalarW/read (0us/0us)\n"
            "  init (0us/0us)\n");
}

TEST_F(GraphViewTest, UnaccountedNodesPassTheirInputsUp) {
  auto o = graph_options({"VariableV2"}, {"params", "op_types"});
  GraphProfile p = profiler_.profile_graph(o);
  EXPECT_EQ(p.text(),
            "node name | # parameters | op types\n"
            "_TFProfRoot (--/451 params, _TFGraphParent)\n"
            "  DW (3x3x3x6, 162/162 params, /job:localhost/replica:0/task:0/device:cpu:0|VariableV2|"
            "_trainable_variables)\n"
            "  DW2 (2x2x6x12, 288/288 params, /job:localhost/replica:0/task:0/device:cpu:0|VariableV2|"
            "_trainable_variables)\n"
            "  ScalarW (1, 1/1 params, VariableV2|_trainable_variables)\n");
  ASSERT_EQ(p.root.children.size(), 3u);
  EXPECT_EQ(p.root.total_definition_count, 3);
}

TEST_F(GraphViewTest, StartAndTrim) {
  auto o = graph_options({".*"}, {"micros"});
  o.start_name_regexes = {"Conv2D"};
  o.trim_name_regexes = {".*read"};
  EXPECT_EQ(profiler_.profile_graph(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/4.91ms, --/404us, --/4.50ms)\n"
            "  Conv2D (4.29ms/4.30ms, 226us/226us, 4.07ms/4.07ms)\n"
            "    DW/read (0us/2us, 0us/0us, 0us/2us)\n"
            "    zeros (2us/2us, 0us/0us, 2us/2us)\n");
}

TEST_F(GraphViewTest, InputShapesAndOccurrence) {
  auto o = graph_options({"Conv2D"}, {"occurrence", "input_shapes", "float_ops"});
  EXPECT_EQ(profiler_.profile_graph(o).text(),
            "node name | # float_ops | op count (run|defined) | input shapes\n"
            "_TFProfRoot (--/10.44k flops, --/2|--/2, )\n"
            "  Conv2D_1 (4.61k/10.44k flops, 1/2|1/2, 0:2x3x3x6|1:2x2x6x12)\n"
            "    Conv2D (5.83k/5.83k flops, 1/1|1/1, 0:2x6x6x3|1:3x3x3x6)\n");
}

}  // namespace
}  // namespace stepscope

namespace stepscope {
namespace {

// float_ops: a node's FLOP rule times its runs in the step; a node that never ran in any step
// keeps its static count (TensorFlow's TFGraphNode::float_ops).
TEST(GraphView, FloatOpsOfNodesThatRanAndNodesThatNeverRan) {
  Graph g;
  Node* a = tfprof::testing::add_node(g, "a", "MatMul", {}, Shape{2, 2}, 100);
  tfprof::testing::add_node(g, "b", "MatMul", {a}, Shape{2, 2}, 40);
  Node* c = tfprof::testing::add_node(g, "c", "MatMul", {}, Shape{2, 2}, 7);
  RunMetadata md;
  tfprof::testing::add_exec(md, *a, tfprof::testing::kCpu, {.start_us = 5, .duration_us = 1});
  tfprof::testing::add_exec(md, *c, tfprof::testing::kCpu, {.start_us = 9, .duration_us = 1});
  Profiler p(g);
  auto o = graph_options({".*"}, {"float_ops"});
  EXPECT_EQ(p.profile_graph(o).text(),
            "node name | # float_ops\n_TFProfRoot (--/147 flops)\n  b (40/140 flops)\n    a (100/100 flops)\n"
            "  c (7/7 flops)\n");
  p.add_step(0, md);
  p.add_step(1, md);
  EXPECT_EQ(p.profile_graph(o).text(),
            "node name | # float_ops\n_TFProfRoot (--/147 flops)\n  b (40/140 flops)\n    a (100/100 flops)\n"
            "  c (7/7 flops)\n");
  // Step 2: a did not run (0 float ops there), b never ran (its static count everywhere).
  RunMetadata only_c;
  tfprof::testing::add_exec(only_c, *c, tfprof::testing::kCpu, {.start_us = 9, .duration_us = 1});
  p.add_step(2, only_c);
  o.step = 2;
  EXPECT_EQ(p.profile_graph(o).text(),
            "node name | # float_ops\n_TFProfRoot (--/47 flops)\n  b (40/40 flops)\n    a (0/0 flops)\n"
            "  c (7/7 flops)\n");
}

// A chain of 200,000 ops (an unrolled loop), n_0 first, each of 16 flops.
constexpr int kChain = 200000;
void add_chain(Graph& g) {
  Node* last = tfprof::testing::add_node(g, "n_0", "Add", {}, Shape{16}, 16);
  for (int i = 1; i < kChain; ++i)
    last = tfprof::testing::add_node(g, "n_" + std::to_string(i), "Add", {last}, Shape{16}, 16);
}

// A node's children are its inputs, so the view is as deep as the graph: the chain overflowed
// the stack while the view was accounted recursively, and while it was shown whole.
TEST(GraphView, ChainDeeperThanTheStack) {
  Graph g;
  add_chain(g);
  Profiler p(g);
  auto o = graph_options({".*"}, {"float_ops"});
  o.max_depth = 3;
  EXPECT_EQ(p.profile_graph(o).text(),
            "node name | # float_ops\n_TFProfRoot (--/3.20m flops)\n  n_199999 (16/3.20m flops)\n"
            "    n_199998 (16/3.20m flops)\n");
  o.start_name_regexes = {"n_100$"};  // found 199,899 nodes down
  EXPECT_EQ(p.profile_graph(o).text(),
            "node name | # float_ops\n_TFProfRoot (--/3.20m flops)\n  n_100 (16/1.62k flops)\n"
            "    n_99 (16/1.60k flops)\n");
  o.account_type_regexes = {"Nothing"};  // every node passes its (no) accounted inputs up
  EXPECT_EQ(p.profile_graph(o).text(), "node name | # float_ops\n_TFProfRoot (--/0 flops)\n");

  // The whole chain shown (a max_depth past its depth): what shows, the protos and their
  // freeing are as deep as the graph too, and overflowed the stack in turn.
  o = graph_options({".*"}, {"float_ops"});
  o.max_depth = 1000000;
  o.output = "none";
  const GraphProfile whole = p.profile_graph(o);
  const GraphNodeProto* node = &whole.root;
  int depth = 0;
  while (!node->children.empty()) {
    ASSERT_EQ(node->children.size(), 1u);
    node = &node->children[0];
    ++depth;
  }
  EXPECT_EQ(depth, kChain);
  EXPECT_EQ(node->name, "n_0");
  EXPECT_EQ(whole.root.children[0].total_float_ops, 16 * kChain);
}

}  // namespace
}  // namespace stepscope
