// The code view (tfprof_code.cc): nodes grouped by the source line that created them, gradient
// nodes under their forward node's line with " (gradient)".
#include <gtest/gtest.h>

#include <sstream>

#include "stepscope/profiler/tfprof/internal/profile_io.h"
#include "stepscope/profiler/tfprof/internal/views.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::add_exec;
using tfprof::testing::add_node;
using tfprof::testing::kCpu;

TEST(CodeTraceName, FunctionNamesFromCompilerSignatures) {
  using tfprof::code_trace_name;
  EXPECT_EQ(code_trace_name({"/src/examples/demo.cc", 58, "int {anonymous}::run(const Args&)"}), "demo.cc:58:run");
  EXPECT_EQ(code_trace_name({"model.cc", 7, "stepscope::Output stepscope::nn::dense(const stepscope::Scope&, int)"}),
            "model.cc:7:dense");
  EXPECT_EQ(code_trace_name({"a.cc", 1, "int main()"}), "a.cc:1:main");
  EXPECT_EQ(code_trace_name({"a.cc", 2, "main()::<lambda()>"}), "a.cc:2:<lambda>");
  EXPECT_EQ(code_trace_name({"a.cc", 3, "std::vector<int, std::allocator<int> > make_list(int)"}), "a.cc:3:make_list");
  EXPECT_EQ(code_trace_name({"a.cc", 4, "void {anonymous}::Fixture_Case_Test::TestBody()"}), "a.cc:4:TestBody");
  EXPECT_EQ(code_trace_name({"a.cc", 5, "(anonymous namespace)::helper(int)"}), "a.cc:5:helper");
  // 20 characters or more: cut to 17 and "...".
  EXPECT_EQ(code_trace_name({"a.cc", 6, "void build_the_whole_model()"}), "a.cc:6:build_the_whole_m...");
  EXPECT_EQ(code_trace_name({"a.cc", 6, "void nineteen_chars_name()"}), "a.cc:6:nineteen_chars_name");
}

class CodeViewTest : public ::testing::Test {
 protected:
  // Without stacks (capture off): one level of source lines under the root.
  CodeViewTest() {
    g_.set_capture_call_stacks(false);
    const SourceLocation model{"/home/u/model.cc", 10, "stepscope::Output build_model(stepscope::Scope&)"};
    const SourceLocation loss{"/home/u/model.cc", 20, "float compute_the_loss_function(int)"};
    const SourceLocation train{"/home/u/train.cc", 5, "int main()"};
    Node* x = add_node(g_, "x", "Placeholder", {}, Shape{64, 8}, 0, train);
    Node* w = add_node(g_, "dense/kernel", "VariableV2", {}, Shape{8, 4}, 0, model);
    g_.add_to_collection("trainable_variables", w);
    Node* mm = add_node(g_, "dense/MatMul", "MatMul", {x, w}, Shape{64, 4}, 4096, model);
    Node* l = add_node(g_, "loss", "Sum", {mm}, Shape(), 256, loss);
    Node* grad = add_node(g_, "gradients/dense/MatMul_grad/MatMul", "MatMul", {l, x}, Shape{8, 4}, 4096, train);
    add_node(g_, "gradients/missing_grad/Neg", "Neg", {l}, Shape(), 0, train);
    add_node(g_, "no_location", "NoOp");
    add_exec(md_, *x, kCpu, {.start_us = 1000, .duration_us = 1});
    add_exec(md_, *w, kCpu, {.start_us = 1001, .duration_us = 1});
    add_exec(md_, *mm, kCpu, {.start_us = 1002, .duration_us = 1500});
    add_exec(md_, *l, kCpu, {.start_us = 2600, .duration_us = 30});
    add_exec(md_, *grad, kCpu, {.start_us = 2700, .duration_us = 1200});
  }
  Graph g_;
  RunMetadata md_;
};

TEST_F(CodeViewTest, LinesAndGradients) {
  Profiler profiler(g_);
  std::ostringstream log;
  profiler.set_log(&log);
  profiler.add_step(3, md_);
  auto o =
      ProfileOptionBuilder().with_empty_output().order_by("micros").select({"micros", "params", "float_ops"}).build();
  MultiGraphProfile p = profiler.profile_code(o);
  EXPECT_EQ(p.text(),
            "node name | total execution time | accelerator execution time | cpu execution time | # parameters | "
            "# float_ops\n"
            "_TFProfRoot (--/2.73ms, --/0us, --/2.73ms, --/32 params, --/8.45k flops)\n"
            "  model.cc:10:build_model (1.50ms/1.50ms, 0us/0us, 1.50ms/1.50ms, 32/32 params, 4.10k/4.10k flops)\n"
            "  model.cc:10:build_model (gradient) (1.20ms/1.20ms, 0us/0us, 1.20ms/1.20ms, 0/0 params, 4.10k/4.10k "
            "flops)\n"
            "  model.cc:20:compute_the_loss_... (30us/30us, 0us/0us, 30us/30us, 0/0 params, 256/256 flops)\n"
            "  train.cc:5:main (1us/1us, 0us/0us, 1us/1us, 0/0 params, 0/0 flops)\n");
  EXPECT_EQ(log.str(), "1 gradient nodes not accounted\n");
  ASSERT_EQ(p.root.children.size(), 4u);
  ASSERT_EQ(p.root.children[0].graph_nodes.size(), 2u);
  EXPECT_EQ(p.root.children[0].graph_nodes[0].name, "dense/MatMul");
  EXPECT_EQ(p.root.children[0].graph_nodes[1].name, "dense/kernel");
}

TEST_F(CodeViewTest, MultiViewFieldsAndFilters) {
  Profiler profiler(g_);
  std::ostringstream log;
  profiler.set_log(&log);
  profiler.add_step(0, md_);
  auto o = ProfileOptionBuilder()
               .with_empty_output()
               .select({"bytes", "device", "op_types", "occurrence", "input_shapes"})
               .with_node_names({.show = std::vector<std::string>{"train.*"}})
               .account_displayed_op_only(true)
               .build();
  EXPECT_EQ(profiler.profile_code(o).text(),
            "node name | requested bytes | assigned devices | op types | op occurrence (run|defined) | input shapes\n"
            "_TFProfRoot (--/0B, , occurrence N/A in code view, input_shapes N/A in code view)\n"
            "  train.cc:5:main (0B/0B, /job:localhost/replica:0/task:0/device:cpu:0, "
            "/job:localhost/replica:0/task:0/device:cpu:0|Placeholder, occurrence N/A in code view, input_shapes N/A "
            "in code view)\n");
  EXPECT_EQ(log.str(), "1 gradient nodes not accounted\nNote: code view ignores account_displayed_op_only\n");
  // Accounting by type: only the MatMul nodes.
  o = ProfileOptionBuilder().with_empty_output().with_accounted_types({"MatMul"}).select({"float_ops"}).build();
  EXPECT_EQ(profiler.profile_code(o).text(),
            "node name | # float_ops\n"
            "_TFProfRoot (--/8.19k flops)\n"
            "  model.cc:10:build_model (4.10k/4.10k flops)\n"
            "  model.cc:10:build_model (gradient) (4.10k/4.10k flops)\n");
}

TEST(CodeView, NoSourceLocations) {
  Graph g;
  add_node(g, "a", "NoOp");
  Profiler profiler(g);
  std::ostringstream log;
  profiler.set_log(&log);
  MultiGraphProfile p = profiler.profile_code(ProfileOptionBuilder().with_empty_output().build());
  EXPECT_EQ(p.text(), "");
  EXPECT_EQ(log.str(), "No code trace information\n");
}

// A saved profile's stacks are as deep as kMaxStackFrames at most (deeper ones are corrupt):
// the code view, a level a frame, is that deep whole.
TEST(CodeView, TheDeepestStackAProfileMayHave) {
  tfprof::ProfileModel model;
  tfprof::ModelNode a;
  a.name = "a";
  a.op = "Const";
  using tfprof::kMaxStackFrames;
  for (size_t k = 0; k < kMaxStackFrames; ++k)
    a.stack.push_back(model.intern_frame({"deep.cc", static_cast<int>(k + 1), "f" + std::to_string(k)}));
  model.nodes.push_back(a);
  model.devices = {"/job:localhost/replica:0/task:0/device:cpu:0"};
  model.device_labels = {"/job:localhost/replica:0/task:0/device:CPU:0"};
  const std::string bytes = tfprof::encode_header() + tfprof::encode_model_chunk(model) +
                            tfprof::encode_traces_chunk(model) + tfprof::encode_state_chunk(model) +
                            tfprof::encode_end_chunk(0);
  Profiler profiler = Profiler::parse(bytes, "deep.profile");
  std::ostringstream log;
  profiler.set_log(&log);
  const MultiGraphProfile p =
      profiler.profile_code(ProfileOptionBuilder().with_empty_output().with_max_depth(5000).build());
  size_t depth = 0;
  const MultiGraphNodeProto* row = &p.root;
  for (; !row->children.empty(); ++depth) row = &row->children[0];
  EXPECT_EQ(depth, kMaxStackFrames);
  EXPECT_EQ(row->name, "deep.cc:4096:f4095");
  ASSERT_EQ(row->graph_nodes.size(), 1u);
  EXPECT_EQ(row->graph_nodes[0].name, "a");
}

}  // namespace
}  // namespace stepscope
