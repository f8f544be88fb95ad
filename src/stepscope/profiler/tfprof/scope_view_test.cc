// The scope view: TensorFlow's tfprof_show_test.cc expectations on the same model, and the
// option semantics of tfprof_show.cc / tfprof_scope.cc.
#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "stepscope/base/bulk_arena.h"
#include "stepscope/base/error.h"
#include "stepscope/profiler/tfprof/internal/views.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::tf_test_model;

// Options(5, 0,...,0, -1, order_by, account, {".*"}, {""}, {".*"}, {""}, false, select, "none").
ProfileOptions tf_test_options(std::string order_by, std::vector<std::string> account,
                               std::vector<std::string> select) {
  ProfileOptions o;
  o.max_depth = 5;
  o.order_by = std::move(order_by);
  o.account_type_regexes = std::move(account);
  o.start_name_regexes = {".*"};
  o.trim_name_regexes = {""};
  o.show_name_regexes = {".*"};
  o.hide_name_regexes = {""};
  o.select = std::move(select);
  o.output = "none";
  return o;
}

class ScopeViewTest : public ::testing::Test {
 protected:
  ScopeViewTest() : model_(tf_test_model()), profiler_(model_->graph) {
    profiler_.set_log(&log_);
    profiler_.set_stdout(&out_);
    profiler_.add_step(0, model_->run_metadata);
  }
  std::unique_ptr<tfprof::testing::TfTestModel> model_;
  Profiler profiler_;
  std::ostringstream log_, out_;
};

TEST_F(ScopeViewTest, DumpScopeMode) {
  auto opts = tf_test_options("name", {"VariableV2"},
                              {"params", "bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros",
                               "accelerator_micros", "cpu_micros", "float_ops"});
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | # parameters | # float_ops | requested bytes | peak bytes | residual bytes | output bytes | "
            "total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/451 params, --/0 flops, --/0B, --/0B, --/0B, --/2.56KB, --/13us, --/0us, --/13us)\n"
            "  DW (3x3x3x6, 162/162 params, 0/0 flops, 0B/0B, 0B/0B, 0B/0B, 1.28KB/1.28KB, 2us/2us, 0us/0us, "
            "2us/2us)\n"
            "  DW2 (2x2x6x12, 288/288 params, 0/0 flops, 0B/0B, 0B/0B, 0B/0B, 1.28KB/1.28KB, 11us/11us, 0us/0us, "
            "11us/11us)\n"
            "  ScalarW (1, 1/1 params, 0/0 flops, 0B/0B, 0B/0B, 0B/0B, 0B/0B, 0us/0us, 0us/0us, 0us/0us)\n");
}

TEST_F(ScopeViewTest, DumpAcceleratorAndCPUMicros) {
  auto opts = tf_test_options("cpu_micros", {".*"}, {"accelerator_micros", "cpu_micros"});
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/404us, --/4.50ms)\n"
            "  Conv2D (226us/226us, 4.07ms/4.07ms)\n"
            "  Conv2D_1 (178us/178us, 419us/419us)\n"
            "  DW2 (0us/0us, 11us/11us)\n"
            "    DW2/Assign (0us/0us, 0us/0us)\n"
            "    DW2/Initializer (0us/0us, 0us/0us)\n"
            "      DW2/Initializer/random_normal (0us/0us, 0us/0us)\n"
            "        DW2/Initializer/random_normal/RandomStandardNormal (0us/0us, 0us/0us)\n"
            "        DW2/Initializer/random_normal/mean (0us/0us, 0us/0us)\n"
            "        DW2/Initializer/random_normal/mul (0us/0us, 0us/0us)\n"
            "        DW2/Initializer/random_normal/shape (0us/0us, 0us/0us)\n"
            "        DW2/Initializer/random_normal/stddev (0us/0us, 0us/0us)\n"
            "    DW2/read (0us/0us, 0us/0us)\n"
            "  DW (0us/0us, 2us/2us)\n"
            "    DW/Assign (0us/0us, 0us/0us)\n"
            "    DW/Initializer (0us/0us, 0us/0us)\n"
            "      DW/Initializer/random_normal (0us/0us, 0us/0us)\n"
            "        DW/Initializer/random_normal/RandomStandardNormal (0us/0us, 0us/0us)\n"
            "        DW/Initializer/random_normal/mean (0us/0us, 0us/0us)\n"
            "        DW/Initializer/random_normal/mul (0us/0us, 0us/0us)\n"
            "        DW/Initializer/random_normal/shape (0us/0us, 0us/0us)\n"
            "        DW/Initializer/random_normal/stddev (0us/0us, 0us/0us)\n"
            "    DW/read (0us/0us, 0us/0us)\n"
            "  zeros (0us/0us, 2us/2us)\n"
            "  ScalarW (0us/0us, 0us/0us)\n"
            "    ScalarW/Assign (0us/0us, 0us/0us)\n"
            "    ScalarW/Initializer (0us/0us, 0us/0us)\n"
            "      ScalarW/Initializer/random_normal (0us/0us, 0us/0us)\n"
            "        ScalarW/Initializer/random_normal/RandomStandardNormal (0us/0us, 0us/0us)\n"
            "        ScalarW/Initializer/random_normal/mean (0us/0us, 0us/0us)\n"
            "        ScalarW/Initializer/random_normal/mul (0us/0us, 0us/0us)\n"
            "        ScalarW/Initializer/random_normal/shape (0us/0us, 0us/0us)\n"
            "        ScalarW/Initializer/random_normal/stddev (0us/0us, 0us/0us)\n"
            "    ScalarW/read (0us/0us, 0us/0us)\n"
            "  init (0us/0us, 0us/0us)\n");
}

TEST_F(ScopeViewTest, ProtoTreeMatchesTheText) {
  auto opts = tf_test_options("name", {"VariableV2"}, {"params"});
  GraphProfile p = profiler_.profile_name_scope(opts);
  EXPECT_EQ(p.root.name, "_TFProfRoot");
  EXPECT_EQ(p.root.total_parameters, 451);
  EXPECT_EQ(p.root.total_definition_count, 3);
  ASSERT_EQ(p.root.children.size(), 3u);
  EXPECT_EQ(p.root.children[0].name, "DW");
  EXPECT_EQ(p.root.children[0].parameters, 162);
  EXPECT_EQ(p.root.children[0].run_count, 1);
  EXPECT_EQ(p.root.children[0].cpu_exec_micros, 2);
  EXPECT_EQ(p.root.children[0].output_bytes, 1280);
  ASSERT_EQ(p.root.children[0].devices.size(), 1u);
  EXPECT_EQ(p.root.children[0].devices[0], "/job:localhost/replica:0/task:0/device:cpu:0");
  EXPECT_EQ(p.root.children[0].shapes, (std::vector<std::vector<int64_t>>{{3, 3, 3, 6}}));
  EXPECT_EQ(p.root.children[2].name, "ScalarW");
  EXPECT_EQ(p.root.children[2].run_count, 0);
}

TEST_F(ScopeViewTest, MaxDepthOneShowsOnlyTheRoot) {
  auto opts = tf_test_options("name", {".*"}, {"micros"});
  opts.max_depth = 1;
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/4.91ms, --/404us, --/4.50ms)\n");
  opts.max_depth = 2;
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/4.91ms, --/404us, --/4.50ms)\n"
            "  Conv2D (4.29ms/4.29ms, 226us/226us, 4.07ms/4.07ms)\n"
            "  Conv2D_1 (597us/597us, 178us/178us, 419us/419us)\n"
            "  DW (2us/2us, 0us/0us, 2us/2us)\n"
            "  DW2 (11us/11us, 0us/0us, 11us/11us)\n"
            "  ScalarW (0us/0us, 0us/0us, 0us/0us)\n"
            "  init (0us/0us, 0us/0us, 0us/0us)\n"
            "  zeros (2us/2us, 0us/0us, 2us/2us)\n");
}

TEST_F(ScopeViewTest, MinFloorsHideNodesButTheirTimeStaysInTheRoot) {
  auto opts = tf_test_options("micros", {".*"}, {"micros"});
  opts.min_micros = 10;
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/4.91ms, --/404us, --/4.50ms)\n"
            "  Conv2D (4.29ms/4.29ms, 226us/226us, 4.07ms/4.07ms)\n"
            "  Conv2D_1 (597us/597us, 178us/178us, 419us/419us)\n"
            "  DW2 (11us/11us, 0us/0us, 11us/11us)\n");
  // account_displayed_op_only: the totals are those of the displayed nodes only.
  opts.min_micros = 500;
  opts.account_displayed_op_only = true;
  EXPECT_EQ(profiler_.profile_name_scope(opts).text(),
            "node name | total execution time | accelerator execution time | cpu execution time\n"
            "_TFProfRoot (--/4.89ms, --/404us, --/4.49ms)\n"
            "  Conv2D (4.29ms/4.29ms, 226us/226us, 4.07ms/4.07ms)\n"
            "  Conv2D_1 (597us/597us, 178us/178us, 419us/419us)\n");
}

TEST_F(ScopeViewTest, EachMinFloor) {
  auto names = [&](ProfileOptions o) {
    std::vector<std::string> out;
    for (const auto& c : profiler_.profile_name_scope(o).root.children) out.push_back(c.name);
    return out;
  };
  auto base = tf_test_options("name", {".*"}, {"micros"});
  base.max_depth = 2;
  using V = std::vector<std::string>;
  auto o = base;
  o.min_bytes = 5000;
  EXPECT_EQ(names(o), (V{"Conv2D"}));
  o = base;
  o.min_peak_bytes = 4592;
  EXPECT_EQ(names(o), (V{"Conv2D", "Conv2D_1"}));
  o = base;
  o.min_output_bytes = 1;
  EXPECT_EQ(names(o), (V{"DW", "DW2"}));
  o = base;
  o.min_accelerator_micros = 200;
  EXPECT_EQ(names(o), (V{"Conv2D"}));
  o = base;
  o.min_cpu_micros = 3;
  EXPECT_EQ(names(o), (V{"Conv2D", "Conv2D_1", "DW2"}));
  o = base;
  o.min_params = 2;  // the node's own parameters
  EXPECT_EQ(names(o), (V{"DW", "DW2"}));
  o = base;
  o.min_float_ops = 5000;  // the node's own float ops
  EXPECT_EQ(names(o), (V{"Conv2D"}));
  o = base;
  o.min_occurrence = 1;  // the node's own run count
  EXPECT_EQ(names(o), (V{"Conv2D", "Conv2D_1", "DW", "DW2", "zeros"}));
  o = base;
  o.min_residual_bytes = 1;
  EXPECT_EQ(names(o), (V{}));
}

TEST_F(ScopeViewTest, NameRegexes) {
  auto o = tf_test_options("name", {".*"}, {"params"});
  o.max_depth = 100;
  o.show_name_regexes = {"DW.*read", "ScalarW"};
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters\n"
            "_TFProfRoot (--/451 params)\n"
            "  DW/read (0/0 params)\n"
            "  DW2/read (0/0 params)\n"
            "  ScalarW (1, 1/1 params)\n");
  // Full match: "DW" alone does not match DW2.
  o.show_name_regexes = {"DW"};
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters\n_TFProfRoot (--/451 params)\n  DW (3x3x3x6, 162/162 params)\n");
  // hide wins over show; the hidden node's children are still displayed.
  o.show_name_regexes = {"DW.*"};
  o.hide_name_regexes = {"DW2.*", "DW/Initializer.*"};
  o.max_depth = 3;
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters\n_TFProfRoot (--/451 params)\n  DW (3x3x3x6, 162/162 params)\n"
            "    DW/Assign (0/0 params)\n    DW/read (0/0 params)\n");
  // start: display begins at the first matching node of each branch.
  o = tf_test_options("name", {".*"}, {"params"});
  o.start_name_regexes = {".*/Initializer"};
  o.max_depth = 2;
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters\n_TFProfRoot (--/451 params)\n  DW/Initializer (0/0 params)\n"
            "  DW2/Initializer (0/0 params)\n  ScalarW/Initializer (0/0 params)\n");
  // trim: the matching node shows, its descendants do not.
  o = tf_test_options("name", {".*"}, {"params"});
  o.trim_name_regexes = {"DW.*", "ScalarW"};
  o.max_depth = 100;
  o.hide_name_regexes = {"Conv2D.*", "init", "zeros"};
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters\n_TFProfRoot (--/451 params)\n  DW (3x3x3x6, 162/162 params)\n"
            "  DW2 (2x2x6x12, 288/288 params)\n  ScalarW (1, 1/1 params)\n");
}

TEST_F(ScopeViewTest, AccountTypesIncludeTheDeviceAndTrainableVariables) {
  auto o = tf_test_options("name", {".*gpu:0"}, {"micros", "device"});
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time | assigned devices\n"
            "_TFProfRoot (--/4.89ms, --/404us, --/4.49ms)\n"
            "  Conv2D (4.29ms/4.29ms, 226us/226us, 4.07ms/4.07ms, /job:localhost/replica:0/task:0/device:gpu:0)\n"
            "  Conv2D_1 (597us/597us, 178us/178us, 419us/419us, /job:localhost/replica:0/task:0/device:gpu:0)\n");
  o = tf_test_options("name", {"_trainable_variables"}, {"params", "op_types"});
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters | op types\n"
            "_TFProfRoot (--/451 params, _kTFScopeParent)\n"
            "  DW (3x3x3x6, 162/162 params, /job:localhost/replica:0/task:0/device:cpu:0|VariableV2|"
            "_trainable_variables)\n"
            "  DW2 (2x2x6x12, 288/288 params, /job:localhost/replica:0/task:0/device:cpu:0|VariableV2|"
            "_trainable_variables)\n"
            "  ScalarW (1, 1/1 params, VariableV2|_trainable_variables)\n");
}

TEST_F(ScopeViewTest, UnaccountedParentsShowDashes) {
  // Identity nodes accounted: their parents (variables, not accounted) still show, with "--".
  auto o = tf_test_options("name", {"Identity"}, {"params", "occurrence", "input_shapes"});
  o.max_depth = 100;
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | # parameters | op count (run|defined) | input shapes\n"
            "_TFProfRoot (--/451 params, --/2|--/6, )\n"
            "  DW (3x3x3x6, --/162 params, --/1|--/2, )\n"
            "    DW/read (0/0 params, 0/0|1/1, 0:3x3x3x6)\n"
            "  DW2 (2x2x6x12, --/288 params, --/1|--/2, )\n"
            "    DW2/read (0/0 params, 0/0|1/1, 0:2x2x6x12)\n"
            "  ScalarW (1, --/1 params, --/0|--/2, )\n"
            "    ScalarW/read (0/0 params, 0/0|1/1, 0:1)\n");
}

TEST_F(ScopeViewTest, OrderBy) {
  auto names = [&](const std::string& order) {
    auto o = tf_test_options(order, {".*"}, {"micros"});
    o.max_depth = 2;
    std::vector<std::string> out;
    for (const auto& c : profiler_.profile_name_scope(o).root.children) out.push_back(c.name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("name"), (V{"Conv2D", "Conv2D_1", "DW", "DW2", "ScalarW", "init", "zeros"}));
  EXPECT_EQ(names("micros"), (V{"Conv2D", "Conv2D_1", "DW2", "DW", "zeros", "ScalarW", "init"}));
  EXPECT_EQ(names("accelerator_micros"), (V{"Conv2D", "Conv2D_1", "DW", "DW2", "ScalarW", "init", "zeros"}));
  EXPECT_EQ(names("bytes"), (V{"Conv2D", "Conv2D_1", "DW", "DW2", "ScalarW", "init", "zeros"}));
  EXPECT_EQ(names("output_bytes"), (V{"DW", "DW2", "Conv2D", "Conv2D_1", "ScalarW", "init", "zeros"}));
  EXPECT_EQ(names("params"), (V{"DW2", "DW", "ScalarW", "Conv2D", "Conv2D_1", "init", "zeros"}));
  EXPECT_EQ(names("float_ops"), (V{"Conv2D", "Conv2D_1", "DW", "DW2", "ScalarW", "init", "zeros"}));
  EXPECT_EQ(names("occurrence"), names("name"));  // no occurrence order in the scope view
}

TEST_F(ScopeViewTest, StepsAreAveragedAndAMissingStepIsReported) {
  // Step 1: DW runs 4us, DW2 does not run.
  RunMetadata md;
  tfprof::testing::add_exec(md, *model_->graph.find_node("DW"), tfprof::testing::kCpu,
                            {.start_us = 2000, .duration_us = 4});
  profiler_.add_step(1, md);
  EXPECT_EQ(profiler_.steps(), (std::vector<int64_t>{0, 1}));
  auto o = tf_test_options("name", {"VariableV2"}, {"micros", "occurrence"});
  // Averages over the steps each node ran in: DW (2 + 4) / 2, DW2 11 / 1.
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time | op count "
            "(run|defined)\n"
            "_TFProfRoot (--/14us, --/0us, --/14us, --/2|--/3)\n"
            "  DW (3us/3us, 0us/0us, 3us/3us, 1/1|1/1)\n"
            "  DW2 (11us/11us, 0us/0us, 11us/11us, 1/1|1/1)\n"
            "  ScalarW (0us/0us, 0us/0us, 0us/0us, 0/0|1/1)\n");
  o.step = 1;
  EXPECT_EQ(profiler_.profile_name_scope(o).text(),
            "node name | total execution time | accelerator execution time | cpu execution time | op count "
            "(run|defined)\n"
            "_TFProfRoot (--/4us, --/0us, --/4us, --/1|--/3)\n"
            "  DW (4us/4us, 0us/0us, 4us/4us, 1/1|1/1)\n"
            "  DW2 (0us/0us, 0us/0us, 0us/0us, 0/0|1/1)\n"
            "  ScalarW (0us/0us, 0us/0us, 0us/0us, 0/0|1/1)\n");
  o.step = 7;
  GraphProfile missing = profiler_.profile_name_scope(o);
  EXPECT_EQ(missing.text(), "");
  EXPECT_TRUE(missing.root.children.empty());
  EXPECT_EQ(log_.str(), "Options -step=7 not found.\nAvailable steps: 0 1 \n");
}

TEST_F(ScopeViewTest, StdoutReport) {
  auto o = tf_test_options("name", {"VariableV2"}, {"params"});
  o.output = "stdout";
  o.max_depth = 2;
  o.trim_name_regexes = {};
  o.hide_name_regexes = {};
  profiler_.profile_name_scope(o);
  EXPECT_EQ(out_.str(),
            "\n=========================Options=============================\n"
            "-max_depth                  2\n"
            "-min_bytes                  0\n"
            "-min_peak_bytes             0\n"
            "-min_residual_bytes         0\n"
            "-min_output_bytes           0\n"
            "-min_micros                 0\n"
            "-min_accelerator_micros     0\n"
            "-min_cpu_micros             0\n"
            "-min_params                 0\n"
            "-min_float_ops              0\n"
            "-min_occurrence             0\n"
            "-step                       -1\n"
            "-order_by                   name\n"
            "-account_type_regexes       VariableV2\n"
            "-start_name_regexes         .*\n"
            "-trim_name_regexes          \n"
            "-show_name_regexes          .*\n"
            "-hide_name_regexes          \n"
            "-account_displayed_op_only  false\n"
            "-select                     params\n"
            "-output                     stdout:\n"
            "\n==================Model Analysis Report======================\n"
            "\nDoc:\n"
            "scope: The nodes in the model graph are organized by their names, which is hierarchical like "
            "filesystem.\n"
            "param: Number of parameters (in the Variable).\n\n"
            "Profile:\n"
            "node name | # parameters\n"
            "_TFProfRoot (--/451 params)\n"
            "  DW (3x3x3x6, 162/162 params)\n"
            "  DW2 (2x2x6x12, 288/288 params)\n"
            "  ScalarW (1, 1/1 params)\n"
            "\n======================End of Report==========================\n");
}

TEST_F(ScopeViewTest, FileReportHasTheDocAndProfilePrefix) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "tfprof_scope_dump";
  auto o = tf_test_options("name", {"VariableV2"}, {"params", "micros"});
  o.output = "file:outfile=" + path.string();
  const std::string text = profiler_.profile_name_scope(o).text();
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_EQ(contents.str(),
            "\nDoc:\nscope: The nodes in the model graph are organized by their names, which is hierarchical like "
            "filesystem.\n"
            "total execution time: Sum of accelerator execution time and cpu execution time.\n"
            "cpu execution time: The time from the start to the end of the operation. It's the sum of actual cpu "
            "run time plus the time that it spends waiting if part of computation is launched asynchronously.\n"
            "accelerator execution time: Time spent executing on the accelerator. This is normally measured by the "
            "actual hardware library.\n"
            "param: Number of parameters (in the Variable).\n\nProfile:\n" +
                text);
  EXPECT_TRUE(out_.str().empty());
  std::filesystem::remove(path);
}

TEST_F(ScopeViewTest, JsonForm) {
  auto o = tf_test_options("name", {"VariableV2"}, {"params"});
  o.max_depth = 2;
  GraphProfile p = profiler_.profile_name_scope(o);
  const std::string json = p.to_json();
  EXPECT_EQ(json.rfind("{\"name\":\"_TFProfRoot\",\"run_count\":0,", 0), 0u);
  EXPECT_NE(json.find("\"total_parameters\":451"), std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"DW\",\"run_count\":1,\"exec_micros\":2,"), std::string::npos);
  EXPECT_NE(json.find("\"shapes\":[[3,3,3,6]]"), std::string::npos);
}

}  // namespace
}  // namespace stepscope

namespace stepscope::tfprof {
namespace {

// The tree as text: "name#node(children...)" from the root down (#node where a node has the name).
std::string render_scope_tree(const ViewTree& tree) {
  std::function<std::string(int32_t)> render = [&](int32_t e) {
    const ViewTree::Entry& entry = tree.entries[e];
    std::string out = std::string(entry.name) + (entry.node >= 0 ? "#" + std::to_string(entry.node) : "");
    if (entry.children.empty()) return out;
    out += "(";
    for (size_t i = 0; i < entry.children.size(); ++i) out += (i ? " " : "") + render(entry.children[i]);
    return out + ")";
  };
  return render(tree.root);
}

// The scope tree's shape on names whose scopes sort unlike their characters ('-' < '/' < '0'),
// with empty components and a node that is also a scope.
TEST(ScopeTree, ChildrenInNameOrderWhateverTheCharacters) {
  const ProfileModel model = tfprof::testing::model_of({"a/b/c", "a/b0", "a/b-x", "a", "z//d", "/lead"});
  const ViewTree tree = build_scope_tree(model);
  EXPECT_EQ(render_scope_tree(tree), "_TFProfRoot((/lead#5) a#3(a/b(a/b/c#0) a/b-x#2 a/b0#1) z(z/(z//d#4)))");
}

// The tree takes a node's scopes shared with the previous node's name without a lookup: names
// that share a prefix but not a scope ("ab/c" then "a/c"), a scope left and entered again, a
// node named like the previous node's scope, and one deeper in it must still land in place.
TEST(ScopeTree, NeighboursSharingPrefixesButNotScopesLandInTheirOwn) {
  const ProfileModel model =
      tfprof::testing::model_of({"ab/c", "a/c", "a/b/c", "a/x/y", "a/b/d", "a/b", "a", "a/b/c/e", "ab/c/f", "ab"});
  const ViewTree tree = build_scope_tree(model);
  EXPECT_EQ(render_scope_tree(tree),
            "_TFProfRoot(a#6(a/b#5(a/b/c#2(a/b/c/e#7) a/b/d#4) a/c#1 a/x(a/x/y#3)) ab#9(ab/c#0(ab/c/f#8)))");
}

// Runs `work` on a thread whose stack is `bytes`: what recursed a level a scope overflowed it.
void run_on_a_stack_of(size_t bytes, const std::function<void()>& work) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  const auto run = [](void* w) -> void* {
    (*static_cast<const std::function<void()>*>(w))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&work)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// A node 20,000 scopes deep ("s/s/.../s/c", as a profile file may hold): the scope view's
// accounting went down a level a scope by recursion, and overflowed this 1 MiB stack.
TEST(ScopeView, ANameDeeperThanTheStack) {
  constexpr int kDepth = 20000;
  std::string name;
  for (int i = 0; i < kDepth; ++i) name += "s/";
  Graph g;
  tfprof::testing::add_node(g, name + "c", "Add", {}, Shape{16}, 16);
  tfprof::testing::add_node(g, "d", "Add", {}, Shape{16}, 16);
  std::string text, hidden;
  run_on_a_stack_of(1 << 20, [&] {
    Profiler p(g);
    auto o = tf_test_options("name", {".*"}, {"float_ops"});
    o.max_depth = 3;
    text = p.profile_name_scope(o).text();
    o.account_type_regexes = {"Nothing"};  // no node accounted: no scope stays
    hidden = p.profile_name_scope(o).text();
  });
  EXPECT_EQ(text,
            "node name | # float_ops\n_TFProfRoot (--/32 flops)\n  d (16/16 flops)\n  s (0/16 flops)\n"
            "    s/s (0/16 flops)\n");
  EXPECT_EQ(hidden, "node name | # float_ops\n_TFProfRoot (--/0 flops)\n");
}

// Names 200,000 scopes deep: each scope is found by its parent and last component, in time
// linear in the name (hashing and comparing every whole prefix took ~10 s a name here). The
// second deep name comes after another, so its scopes are found through the index, not shared
// with its neighbour's.
TEST(ScopeTree, NamesAsDeepAsAProfileFileMayMakeThemStayLinear) {
  constexpr int kDepth = 200000;
  std::string scopes;
  for (int i = 0; i < kDepth; ++i) scopes += "s/";
  const ProfileModel model = tfprof::testing::model_of({scopes + "a", std::string("x"), scopes + "c"});
  const ViewTree tree = build_scope_tree(model);
  ASSERT_EQ(tree.entries.size(), static_cast<size_t>(kDepth) + 4);  // the scopes, a, x, c and the root
  const ViewTree::Entry* deepest = &tree.entries[tree.entries[tree.root].children.at(0)];
  for (int level = 1; level < kDepth; ++level) {
    ASSERT_EQ(deepest->children.size(), 1u) << level;
    deepest = &tree.entries[deepest->children[0]];
  }
  ASSERT_EQ(deepest->children.size(), 2u);
  EXPECT_EQ(tree.entries[deepest->children[0]].node, 0);  // a, then c: in name order
  EXPECT_EQ(tree.entries[deepest->children[1]].node, 2);
  EXPECT_EQ(tree.entries[tree.entries[tree.root].children.at(1)].name, "x");
}

// Random names of a few short components (empty ones too: "a//b", "/a", "a/"), repeated and in
// any order: one entry for each name and each scope in it, under the scope that is its name up
// to the last '/', a node name's entry holding its first node.
TEST(ScopeTree, EveryNameAndScopeOnceUnderItsParent) {
  std::mt19937 random(16);
  const std::vector<std::string> components{"a", "b", "ab", "", "a_1"};
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    std::string name = components[random() % components.size()];
    for (int depth = static_cast<int>(random() % 5); depth > 0; --depth)
      name += "/" + components[random() % components.size()];
    names.push_back(name);
  }
  const ProfileModel model = tfprof::testing::model_of(names);
  const ViewTree tree = build_scope_tree(model);
  std::map<std::string, int32_t> entry_of;
  std::map<int32_t, int32_t> parent_of;
  for (size_t e = 0; e < tree.entries.size(); ++e) {
    if (static_cast<int32_t>(e) == tree.root) continue;
    EXPECT_TRUE(entry_of.emplace(std::string(tree.entries[e].name), static_cast<int32_t>(e)).second)
        << "twice: " << tree.entries[e].name;
  }
  for (size_t e = 0; e < tree.entries.size(); ++e)
    for (int32_t c : tree.entries[e].children) EXPECT_TRUE(parent_of.emplace(c, static_cast<int32_t>(e)).second);
  std::set<std::string> expected;
  for (const std::string& name : names)
    for (size_t slash = name.find('/');; slash = name.find('/', slash + 1)) {
      expected.insert(name.substr(0, slash));
      if (slash == std::string::npos) break;
    }
  EXPECT_EQ(entry_of.size(), expected.size());
  for (const auto& [name, e] : entry_of) {
    EXPECT_TRUE(expected.count(name)) << name;
    const size_t slash = name.rfind('/');
    const int32_t parent = parent_of.at(e);
    const std::string parent_name = slash == std::string::npos ? std::string(kTFProfRoot) : name.substr(0, slash);
    EXPECT_EQ(tree.entries[parent].name, parent_name) << name;
  }
  std::map<std::string, int32_t> first_node;
  for (size_t i = 0; i < names.size(); ++i) first_node.emplace(names[i], static_cast<int32_t>(i));
  for (const auto& [name, node] : first_node) EXPECT_EQ(tree.entries[entry_of.at(name)].node, node) << name;
}

// A view of 500,000 protos or more makes their arrays in an arena (arena_for_protos): the same
// result as from malloc, copies of it from malloc, and once the result is gone the arena's block
// is the process's spare (bulk_arena.h). The op view's graph_nodes likewise.
TEST(BigViews, MakeTheirProtosInAnArenaThatIsTheSpareOnceTheResultGoes) {
  constexpr size_t kScopes = 5001, kPerScope = 100;  // 500,100 nodes
  std::vector<std::string> names;
  names.reserve(kScopes * kPerScope);
  for (size_t s = 0; s < kScopes; ++s)
    for (size_t n = 0; n < kPerScope; ++n) names.push_back("s" + std::to_string(s) + "/n" + std::to_string(n));
  const ProfileModel model = tfprof::testing::model_of(names);
  const std::vector<tfprof::NodeStats> stats(model.nodes.size());
  tfprof::RegexCache cache;
  ProfileOptions options = tf_test_options("name", {".*"}, {"params"});
  options.max_depth = 10;
  const tfprof::ViewOptions o = tfprof::resolve_options(options, cache);
  BulkArena::drop_spare();

  const tfprof::ViewTree tree = tfprof::build_scope_tree(model);
  GraphNodeProto copied;
  {
    const tfprof::GraphViewResult scopes = tfprof::show_scope(tree, model, stats, o);
    ASSERT_EQ(scopes.root.children.size(), kScopes);
    const GraphNodeProto& first = scopes.root.children[0];  // by name: s0, s1, s10, s100, ...
    EXPECT_EQ(first.name, "s0");
    ASSERT_EQ(first.children.size(), kPerScope);
    EXPECT_EQ(first.children[0].name, "s0/n0");
    EXPECT_EQ(first.children[2].name, "s0/n10");
    EXPECT_EQ(scopes.root.children.back().name, "s999");
    EXPECT_EQ(scopes.root.total_definition_count, static_cast<int64_t>(kScopes * (kPerScope + 1)));  // the root not counted
    EXPECT_EQ(scopes.displayed.size(), kScopes * kPerScope);
    copied = scopes.root.children[1];
    EXPECT_EQ(BulkArena::spare_bytes(), 0u);  // the result holds it
  }
  EXPECT_GE(BulkArena::spare_bytes(), kScopes * kPerScope * sizeof(GraphNodeProto));
  EXPECT_EQ(copied.name, "s1");
  ASSERT_EQ(copied.children.size(), kPerScope);
  EXPECT_EQ(copied.children[99].name, "s1/n99");

  BulkArena::drop_spare();
  {
    const tfprof::MultiViewResult ops = tfprof::show_op(tfprof::build_op_groups(model), model, stats, o);
    ASSERT_EQ(ops.root.children.size(), 1u);
    EXPECT_EQ(ops.root.children[0].name, "NoOp");
    ASSERT_EQ(ops.root.children[0].graph_nodes.size(), kScopes * kPerScope);
    EXPECT_EQ(ops.root.children[0].graph_nodes[0].name, "s0/n0");
    EXPECT_EQ(BulkArena::spare_bytes(), 0u);
  }
  EXPECT_GE(BulkArena::spare_bytes(), kScopes * kPerScope * sizeof(GraphNodeProto));
  BulkArena::drop_spare();
}

// A query keeps totals only for the root and the entries with children (Entry::inner); a leaf's
// are its node's own. Both trees number those entries 0, 1, ... and leave the leaves at -1.
void expect_slots_for_inner_entries_only(const ViewTree& tree) {
  std::vector<int32_t> slots;
  for (size_t e = 0; e < tree.entries.size(); ++e) {
    const ViewTree::Entry& entry = tree.entries[e];
    const bool inner = !entry.children.empty() || static_cast<int32_t>(e) == tree.root;
    EXPECT_EQ(entry.inner >= 0, inner) << entry.name;
    if (inner) slots.push_back(entry.inner);
  }
  std::sort(slots.begin(), slots.end());
  ASSERT_EQ(slots.size(), static_cast<size_t>(tree.inner_count));
  for (size_t i = 0; i < slots.size(); ++i) EXPECT_EQ(slots[i], static_cast<int32_t>(i));
}

TEST(ScopeTree, TotalsSlotsForTheRootAndEntriesWithChildren) {
  const ProfileModel model = tfprof::testing::model_of({"a/b/c", "a", "a/d", "e"});
  const ViewTree scopes = build_scope_tree(model);
  expect_slots_for_inner_entries_only(scopes);
  EXPECT_EQ(scopes.inner_count, 3);  // the root, a, a/b
  const ViewTree graph = build_graph_tree(model);
  expect_slots_for_inner_entries_only(graph);
  EXPECT_EQ(graph.inner_count, 1);  // no inputs: the root alone

  ProfileModel empty;
  const ViewTree no_nodes = build_scope_tree(empty);
  expect_slots_for_inner_entries_only(no_nodes);
  EXPECT_EQ(no_nodes.inner_count, 1);
}

}  // namespace
}  // namespace stepscope::tfprof
