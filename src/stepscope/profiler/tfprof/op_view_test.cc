// The op view: TensorFlow's DumpOpMode expectation on the same model, its layout (names in 25
// columns, fields right-aligned in 30), cumulative percentages, the chain of rows, options.
#include <gtest/gtest.h>

#include <sstream>

#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::tf_test_model;

std::string pad(int n) { return std::string(n, ' '); }

std::string without_spaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

ProfileOptions op_options(std::string order_by, std::vector<std::string> select) {
  ProfileOptions o;
  o.max_depth = 5;
  o.order_by = std::move(order_by);
  o.account_type_regexes = {".*"};
  o.start_name_regexes = {".*"};
  o.trim_name_regexes = {""};
  o.show_name_regexes = {".*"};
  o.hide_name_regexes = {""};
  o.select = std::move(select);
  o.output = "none";
  return o;
}

class OpViewTest : public ::testing::Test {
 protected:
  OpViewTest() : model_(tf_test_model()), profiler_(model_->graph) {
    profiler_.set_log(&log_);
    profiler_.set_stdout(&out_);
    profiler_.add_step(0, model_->run_metadata);
  }
  std::unique_ptr<tfprof::testing::TfTestModel> model_;
  Profiler profiler_;
  std::ostringstream log_, out_;
};

TEST_F(OpViewTest, DumpOpMode) {
  auto o = op_options("params", {"params", "bytes", "micros", "float_ops", "occurrence", "input_shapes"});
  o.min_occurrence = 1;
  const std::string text = profiler_.profile_operations(o).text();
  EXPECT_EQ(without_spaces(text),
            "nodename|requestedbytes|totalexecutiontime|acceleratorexecutiontime|"
            "cpuexecutiontime|#parameters|#float_ops|opoccurrence(run|defined)|"
            "inputshapes\nVariableV20B(0.00%,0.00%),13us(100.00%,0.27%),0us(100.00%,"
            "0.00%),13us(100.00%,0.29%),451params(100.00%,100.00%),0float_ops(100.00%"
            ",0.00%),2|3\n\ninput_type:\t(run*2|defined*3)\texec_time:13us\n\nAdd0B("
            "0.00%,0.00%),0us(99.73%,0.00%),0us(100.00%,0.00%),0us(99.71%,0.00%),"
            "0params(0.00%,0.00%),0float_ops(100.00%,0.00%),0|3\n\ninput_type:0:1,"
            "\t1:1\t(run*0|defined*1)\texec_time:0us\ninput_type:0:2x2x6x12,\t1:1\t("
            "run*0|defined*1)\texec_time:0us\ninput_type:0:3x3x3x6,\t1:1\t(run*0|"
            "defined*1)\texec_time:0us\n\nAssign0B(0.00%,0.00%),0us(99.73%,0.00%),"
            "0us(100.00%,0.00%),0us(99.71%,0.00%),0params(0.00%,0.00%),0float_ops("
            "100.00%,0.00%),0|3\n\ninput_type:0:1,\t1:1\t(run*0|defined*1)\texec_"
            "time:0us\ninput_type:0:2x2x6x12,\t1:2x2x6x12\t(run*0|defined*1)\texec_"
            "time:0us\ninput_type:0:3x3x3x6,\t1:3x3x3x6\t(run*0|defined*1)\texec_"
            "time:0us\n\nConst0B(0.00%,0.00%),2us(99.73%,0.04%),0us(100.00%,0.00%),"
            "2us(99.71%,0.04%),0params(0.00%,0.00%),0float_ops(100.00%,0.00%),1|"
            "10\n\ninput_type:\t(run*1|defined*10)\texec_time:2us\n\nConv2D14.59KB("
            "100.00%,100.00%),4.89ms(99.69%,99.69%),404us(100.00%,100.00%),4.49ms(99."
            "67%,99.67%),0params(0.00%,0.00%),10.44kfloat_ops(100.00%,100.00%),2|"
            "2\n\ninput_type:0:2x3x3x6,\t1:2x2x6x12\t(run*1|defined*1)\texec_time:"
            "597us\ninput_type:0:2x6x6x3,\t1:3x3x3x6\t(run*1|defined*1)\texec_time:4."
            "29ms\n\nIdentity0B(0.00%,0.00%),0us(0.00%,0.00%),0us(0.00%,0.00%),0us(0."
            "00%,0.00%),0params(0.00%,0.00%),0float_ops(0.00%,0.00%),0|3\n\ninput_"
            "type:0:1\t(run*0|defined*1)\texec_time:0us\ninput_type:0:2x2x6x12\t(run*"
            "0|defined*1)\texec_time:0us\ninput_type:0:3x3x3x6\t(run*0|defined*1)"
            "\texec_time:0us\n\n");
}

// Names left-aligned in 25 columns, fields right-aligned in 30 (occurrence in 10).
TEST_F(OpViewTest, Layout) {
  auto o = op_options("micros", {"micros", "occurrence"});
  o.max_depth = 2;
  EXPECT_EQ(profiler_.profile_operations(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time | op occurrence "
            "(run|defined)\n" +
                ("Conv2D" + pad(19)) + pad(6) + "4.89ms (100.00%, 99.69%), " + pad(6) + "404us (100.00%, 100.00%), " +
                pad(6) + "4.49ms (100.00%, 99.67%), " + pad(7) + "2|2\n" + ("VariableV2" + pad(15)) + pad(11) +
                "13us (0.31%, 0.27%), " + pad(12) + "0us (0.00%, 0.00%), " + pad(11) + "13us (0.33%, 0.29%), " +
                pad(7) + "2|3\n" + ("Const" + pad(20)) + pad(12) + "2us (0.04%, 0.04%), " + pad(12) +
                "0us (0.00%, 0.00%), " + pad(12) + "2us (0.04%, 0.04%), " + pad(6) + "1|10\n");
}

TEST_F(OpViewTest, RowsFormAChain) {
  auto o = op_options("micros", {"micros"});
  o.max_depth = 2;
  MultiGraphProfile p = profiler_.profile_operations(o);
  EXPECT_EQ(p.root.name, "_TFProfRoot");
  EXPECT_EQ(p.root.total_exec_micros, 4905);
  ASSERT_EQ(p.root.children.size(), 1u);
  const MultiGraphNodeProto& conv = p.root.children[0];
  EXPECT_EQ(conv.name, "Conv2D");
  EXPECT_EQ(conv.exec_micros, 4890);
  EXPECT_EQ(conv.total_exec_micros, 4905);
  EXPECT_EQ(conv.float_ops, 10440);
  ASSERT_EQ(conv.graph_nodes.size(), 2u);
  EXPECT_EQ(conv.graph_nodes[0].name, "Conv2D");
  EXPECT_EQ(conv.graph_nodes[0].accelerator_exec_micros, 226);
  EXPECT_EQ(conv.graph_nodes[1].name, "Conv2D_1");
  ASSERT_EQ(conv.children.size(), 1u);
  EXPECT_EQ(conv.children[0].name, "VariableV2");
  ASSERT_EQ(conv.children[0].children.size(), 1u);
  EXPECT_EQ(conv.children[0].children[0].name, "Const");
  EXPECT_TRUE(conv.children[0].children[0].children.empty());
  EXPECT_NE(p.to_json().find("\"graph_nodes\":[{\"name\":\"Conv2D\""), std::string::npos);
}

TEST_F(OpViewTest, Options) {
  auto rows = [&](const ProfileOptions& o) {
    std::vector<std::string> out;
    MultiGraphProfile p = profiler_.profile_operations(o);
    for (const MultiGraphNodeProto* n = &p.root; !n->children.empty(); n = &n->children[0])
      out.push_back(n->children[0].name);
    return out;
  };
  using V = std::vector<std::string>;
  auto o = op_options("micros", {"micros"});
  o.max_depth = 100;
  EXPECT_EQ(rows(o),
            (V{"Conv2D", "VariableV2", "Const", "Add", "Assign", "Identity", "Mul", "NoOp", "RandomStandardNormal"}));
  // max_depth counts rows from 0.
  o.max_depth = 0;
  EXPECT_EQ(rows(o), (V{"Conv2D"}));
  // min_occurrence: the number of graph nodes of the type.
  o = op_options("name", {"micros"});
  o.max_depth = 100;
  o.min_occurrence = 4;
  EXPECT_EQ(rows(o), (V{"Const"}));
  // start and trim pick a slice of the sorted list.
  o = op_options("name", {"micros"});
  o.max_depth = 100;
  o.start_name_regexes = {"Conv2D"};
  o.trim_name_regexes = {"Mul"};
  EXPECT_EQ(rows(o), (V{"Conv2D", "Identity"}));
  // Accounted types: op types and devices.
  o = op_options("name", {"micros"});
  o.account_type_regexes = {".*gpu.*", "Const"};
  EXPECT_EQ(rows(o), (V{"Const", "Conv2D"}));
  o.order_by = "occurrence";
  EXPECT_EQ(rows(o), (V{"Const", "Conv2D"}));
  o.account_type_regexes = {".*"};
  o.max_depth = 2;
  EXPECT_EQ(rows(o), (V{"Const", "Add", "Assign"}));
  // min_micros compares the cumulative total: by name every row up to VariableV2 has 13us or more.
  o = op_options("name", {"micros"});
  o.min_micros = 3;
  o.max_depth = 100;
  EXPECT_EQ(rows(o),
            (V{"Add", "Assign", "Const", "Conv2D", "Identity", "Mul", "NoOp", "RandomStandardNormal", "VariableV2"}));
  o.order_by = "micros";
  EXPECT_EQ(rows(o), (V{"Conv2D", "VariableV2"}));
  // show and hide.
  o = op_options("name", {"micros"});
  o.show_name_regexes = {"A.*", "I.*"};
  o.hide_name_regexes = {"Assign"};
  EXPECT_EQ(rows(o), (V{"Add", "Identity"}));
}

TEST_F(OpViewTest, AccountDisplayedOpOnlyRecomputesTheCumulativeTotals) {
  auto o = op_options("micros", {"micros"});
  o.min_micros = 3;
  o.account_displayed_op_only = true;
  EXPECT_EQ(profiler_.profile_operations(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n" +
                ("Conv2D" + pad(19)) + pad(6) + "4.89ms (100.00%, 99.73%), " + pad(6) + "404us (100.00%, 100.00%), " +
                pad(6) + "4.49ms (100.00%, 99.71%)\n" + ("VariableV2" + pad(15)) + pad(11) + "13us (0.27%, 0.27%), " +
                pad(12) + "0us (0.00%, 0.00%), " + pad(11) + "13us (0.29%, 0.29%)\n");
}

TEST_F(OpViewTest, TimelineIsNotSupported) {
  auto o = op_options("micros", {"micros"});
  o.output = "timeline:outfile=/nonexistent/x";
  profiler_.profile_operations(o);
  EXPECT_EQ(log_.str(), "op view doesn't support timeline yet. Consider graph/scope/code view.\n");
}

// A profile with 200,000 op types: its op view is a chain of rows that deep. Freeing, copying
// and writing it as JSON recursed once per row and overflowed the stack.
TEST(OpView, MoreOpTypesThanTheStackIsDeep) {
  constexpr int kTypes = 200000;
  Graph g;
  RunMetadata md;
  for (int i = 0; i < kTypes; ++i) {
    const Node* n = tfprof::testing::add_node(g, "n" + std::to_string(i), "Op" + std::to_string(i));
    tfprof::testing::add_exec(md, *n, tfprof::testing::kCpu, {.start_us = 1000 + i, .duration_us = 1 + i});
  }
  Profiler profiler(g);
  profiler.add_step(1, md);
  auto o = op_options("micros", {"micros"});
  o.max_depth = 1000000;
  const MultiGraphProfile view = profiler.profile_operations(o);
  const MultiGraphProfile copy = view;
  int rows = 0;
  const MultiGraphNodeProto* row = &copy.root;
  for (; !row->children.empty(); ++rows) row = &row->children[0];
  EXPECT_EQ(rows, kTypes);
  EXPECT_EQ(row->name, "Op0");  // the slowest first
  EXPECT_EQ(copy.root.children[0].name, "Op199999");
  const std::string json = view.to_json();
  EXPECT_NE(json.find("\"name\":\"Op0\""), std::string::npos);
  EXPECT_EQ(json.substr(json.size() - 4), "]}]}");
}

TEST(OpView, EmptyGraph) {
  Graph g;
  Profiler profiler(g);
  auto o = op_options("name", {"micros"});
  // No op type: tfprof prints the root's row alone, without a legend.
  EXPECT_EQ(profiler.profile_operations(o).text(), "_TFProfRoot" + pad(14) + pad(12) + "0us (0.00%, 0.00%), " +
                                                       pad(12) + "0us (0.00%, 0.00%), " + pad(12) +
                                                       "0us (0.00%, 0.00%)\n");
}

}  // namespace
}  // namespace stepscope
