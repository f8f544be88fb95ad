// The advisor: TensorFlow's tfprof_advisor_test.cc cases with their full texts, the expensive
// operations of the tfprof test model, and the hook for more checkers.
#include <gtest/gtest.h>

#include <sstream>

#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"

namespace stepscope {
namespace {

using tfprof::testing::add_exec;
using tfprof::testing::test_op;

constexpr const char* kGpu = "/job:localhost/replica:0/task:0/device:GPU:0";

// TFProfAdvisorTest's fixture: two Conv2D nodes (one NHWC) with their records on a GPU, its
// "stream:all" and a stream.
class AdvisorTest : public ::testing::Test {
 protected:
  AdvisorTest() {
    Node* n1 = add("n1", "Conv2D", {{"data_format", std::string("NHWC")}});
    Node* n2 = add("n2", "Conv2D", {});
    for (auto [node, start] : {std::pair{n1, 10}, std::pair{n2, 20}}) {
      for (const std::string& device :
           {std::string(kGpu), std::string(kGpu) + ":stream:all", std::string(kGpu) + ":stream:0"})
        add_exec(md_, *node, device, {.start_us = start, .duration_us = 2});
    }
  }
  Node* add(const std::string& name, const std::string& op, AttrMap attrs) {
    NodeSpec spec;
    spec.name = name;
    spec.op = &test_op(op);
    spec.attrs = std::move(attrs);
    return g_.add_node(std::move(spec));
  }
  Profiler profiler() {
    Profiler p(g_);
    p.set_log(&log_);
    p.set_stdout(&out_);
    p.add_step(0, md_);
    return p;
  }
  Graph g_;
  RunMetadata md_;
  std::ostringstream log_, out_;
};

TEST_F(AdvisorTest, Basics) {
  AdviceProto advice = profiler().advise(AdvisorOptions::tensorflow());
  EXPECT_TRUE(advice.checkers.count("AcceleratorUtilizationChecker"));
  EXPECT_TRUE(advice.checkers.count("OperationChecker"));
  EXPECT_TRUE(advice.checkers.count("ExpensiveOperationChecker"));
  EXPECT_FALSE(advice.checkers.count("JobChecker"));  // Google-internal: nothing runs
  EXPECT_EQ(advice.text(),
            "\nAcceleratorUtilizationChecker:\n"
            "device: /job:localhost/replica:0/task:0/device:gpu:0 low utilization: 0.33\n"
            "\nExpensiveOperationChecker:\n"
            "top 1 operation type: Conv2D, cpu: 4us, accelerator: 4us, total: 8us (100.00%)\n"
            "\nOperationChecker:\n"
            "Found operation using NHWC data_format on GPU. Maybe NCHW is faster.\n");
  EXPECT_EQ(out_.str(), advice.text());
  EXPECT_EQ(log_.str(), "Missing op_log (code traces) for ExpensiveOperationChecker\n");
  EXPECT_EQ(to_json(advice).rfind("{\"checkers\":{\"AcceleratorUtilizationChecker\":{\"reports\":[\"device: ", 0), 0u);
}

TEST_F(AdvisorTest, OperationChecker) {
  AdviceProto advice = profiler().advise({.checkers = {{"OperationChecker", {}}}}, /*print=*/false);
  ASSERT_EQ(advice.checkers.size(), 1u);
  ASSERT_EQ(advice.checkers.at("OperationChecker").reports.size(), 1u);
  EXPECT_NE(advice.checkers.at("OperationChecker").reports[0].find("NCHW"), std::string::npos);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(AdvisorTest, UtilizationChecker) {
  AdviceProto advice = profiler().advise({.checkers = {{"AcceleratorUtilizationChecker", {}}}}, false);
  ASSERT_EQ(advice.checkers.at("AcceleratorUtilizationChecker").reports.size(), 1u);
  EXPECT_NE(advice.checkers.at("AcceleratorUtilizationChecker").reports[0].find("low utilization"), std::string::npos);
}

TEST_F(AdvisorTest, ExpensiveOperationChecker) {
  AdviceProto advice = profiler().advise({.checkers = {{"ExpensiveOperationChecker", {}}}}, false);
  EXPECT_EQ(advice.checkers.at("ExpensiveOperationChecker").reports[0].rfind("top 1 operation type: Conv2D", 0), 0u);
}

TEST_F(AdvisorTest, BatchNormAndHighUtilization) {
  Graph g;
  Node* bn = tfprof::testing::add_node(g, "layer/BatchNorm/mul", "Mul");
  RunMetadata md;
  add_exec(md, *bn, kGpu, {.start_us = 100, .duration_us = 10});
  add_exec(md, *bn, std::string(kGpu) + "/stream:all", {.start_us = 100, .duration_us = 8});
  Profiler p(g);
  p.add_step(0, md);
  AdviceProto advice = p.advise({.checkers = {{"OperationChecker", {}}, {"AcceleratorUtilizationChecker", {}}}}, false);
  EXPECT_EQ(advice.text(),
            "\nAcceleratorUtilizationChecker:\n"
            "device: /job:localhost/replica:0/task:0/device:gpu:0 utilization: 0.80\n"
            "\nOperationChecker:\n"
            "Maybe use faster FusedBatchNorm instead of BatchNorm\n");
}

TEST(Advisor, ExpensiveOperationsOfTheTfTestModel) {
  auto model = tfprof::testing::tf_test_model();
  Profiler p(model->graph);
  std::ostringstream log;
  p.set_log(&log);
  p.add_step(0, model->run_metadata);
  AdviceProto advice = p.advise({.checkers = {{"ExpensiveOperationChecker", {}}}}, false);
  EXPECT_EQ(advice.checkers.at("ExpensiveOperationChecker").reports,
            (std::vector<std::string>{
                "top 1 operation type: Conv2D, cpu: 4.49ms, accelerator: 404us, total: 4.89ms (99.69%)\n"
                "top 2 operation type: VariableV2, cpu: 13us, accelerator: 0us, total: 13us (0.27%)\n"
                "top 3 operation type: Const, cpu: 2us, accelerator: 0us, total: 2us (0.04%)",
                "top 1 graph node: Conv2D, cpu: 4.07ms, accelerator: 226us, total: 4.29ms\n"
                "top 2 graph node: Conv2D_1, cpu: 419us, accelerator: 178us, total: 597us"}));
}

TEST(Advisor, WithoutSteps) {
  Graph g;
  tfprof::testing::add_node(g, "a", "NoOp", {}, Shape(), 0, {"a.cc", 1, "int main()"});
  Profiler p(g);
  std::ostringstream log;
  p.set_log(&log);
  AdviceProto advice = p.advise(AdvisorOptions::all(), false);
  EXPECT_EQ(advice.text(),
            "\nAcceleratorUtilizationChecker:\n"
            "\nCriticalPathChecker:\n"
            "\nExpensiveOperationChecker:\n"
            "\nInputPipelineChecker:\n"
            "\nOperationChecker:\n");
  EXPECT_EQ(log.str(),
            "Missing RunMetadata info. Skip ExpensiveOperationChecker\n"
            "Missing run_meta for ExpensiveOperationChecker\n"
            "Missing RunMetadata info. Skip CriticalPathChecker\n"
            "Missing RunMetadata info. Skip InputPipelineChecker\n");
}

TEST_F(AdvisorTest, CriticalPathCheckerReportsTheLatestStep) {
  Profiler p = profiler();
  AdviceProto advice = p.advise(AdvisorOptions::all(), false);
  ASSERT_EQ(advice.checkers.count("CriticalPathChecker"), 1u);
  const std::vector<std::string>& reports = advice.checkers.at("CriticalPathChecker").reports;
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rfind("step 0: Critical path: 1 of 6 ops, wall time 12.000 us", 0), 0u) << reports[0];
  EXPECT_NE(reports[0].find("Conv2D   n2"), std::string::npos) << reports[0];
  // And what the step would take with the path's top op type twice as fast.
  EXPECT_NE(reports[0].find("What if Conv2D (6 ops) ran 2.00x faster: wall 12.000 us -> 10.000 us (-16.7%)"),
            std::string::npos)
      << reports[0];
  EXPECT_THROW(p.advise({.checkers = {{"CriticalPathChecker", {{"max_rows", "many"}}}}}, false), InvalidArgumentError);
  advice = p.advise({.checkers = {{"CriticalPathChecker", {{"step", "3"}}}}}, false);
  EXPECT_TRUE(advice.checkers.at("CriticalPathChecker").reports.empty());
}

class CountingChecker : public AdviceChecker {
 public:
  std::string name() const override { return "CountingChecker"; }
  std::vector<std::string> check(const Profiler& profiler, const std::map<std::string, std::string>& options,
                                 std::ostream&) const override {
    return {"steps: " + std::to_string(profiler.steps().size()) +
            ", option x=" + (options.count("x") ? options.at("x") : std::string("-"))};
  }
};

TEST(Advisor, AddedCheckersRunWhenNamed) {
  Graph g;
  Profiler p(g);
  std::ostringstream log;
  p.set_log(&log);
  p.add_checker(std::make_unique<CountingChecker>());
  EXPECT_FALSE(p.advise(AdvisorOptions::all(), false).checkers.count("CountingChecker"));
  AdviceProto advice = p.advise({.checkers = {{"CountingChecker", {{"x", "1"}}}}}, false);
  EXPECT_EQ(advice.text(), "\nCountingChecker:\nsteps: 0, option x=1\n");
}

// The input-pipeline check: the share of the step in the iterator ops, with XProf's thresholds.
TEST(Advisor, InputPipelineCheckerFindsAnInputBoundStep) {
  Graph g;
  auto node = [&](const char* name, const char* op) {
    NodeSpec spec;
    spec.name = name;
    spec.op = &tfprof::testing::test_op(op);
    return g.add_node(std::move(spec));
  };
  Node* next = node("IteratorGetNext", "IteratorGetNext");
  Node* matmul = node("dense/MatMul", "MatMul");
  auto advice_for = [&](int input_us, int compute_us, std::vector<StepTimingRecord> timings = {},
                        std::vector<InputStage> stages = {}) {
    RunMetadata md;
    md.input_stages = std::move(stages);
    add_exec(md, *next, tfprof::testing::kCpu, {.start_us = 1000, .duration_us = input_us});  // 0: "no start time"
    add_exec(md, *matmul, tfprof::testing::kCpu, {.start_us = 1000 + input_us, .duration_us = compute_us});
    Profiler p(g);
    std::ostringstream log;
    p.set_log(&log);
    p.add_step(1, md);
    for (const StepTimingRecord& t : timings)
      p.add_step_timing(t.step, {.wall_ns = t.wall_ns, .busy_ns = t.busy_ns, .input_ns = t.input_ns}, t.hooks_ns);
    const auto reports =
        p.advise({.checkers = {{"InputPipelineChecker", {}}}}, false).checkers.at("InputPipelineChecker").reports;
    return reports.empty() ? std::string() : reports[0];
  };
  EXPECT_EQ(advice_for(30, 70),
            "Input pipeline: 30.0% of the step time waiting on input over the 1 step (0.030 ms of 0.100 ms per step): "
            "highly input-bound (over 20%).\n"
            "Slowest input op: IteratorGetNext (0.030 ms per step).\n"
            "Overlap input with compute: Dataset::prefetch, a parallel map, cache() for data that fits in memory.");
  EXPECT_NE(advice_for(10, 90).find("moderately input-bound (5% to 20%)"), std::string::npos);
  EXPECT_NE(advice_for(2, 98).find("not input-bound (under 5%)"), std::string::npos);
  EXPECT_EQ(advice_for(2, 98).find("Overlap input"), std::string::npos);
  // With every run's step timing (ProfilerHook's), the verdict over all the runs follows, and
  // decides the suggestion: the traced step may not be typical.
  // The pipeline's own stages (traced runs time them), slowest first.
  const std::string staged = advice_for(
      30, 70, {},
      {{"IteratorGetNext", "Iterator::batch", 4000, 1}, {"IteratorGetNext", "Iterator::batch::csv", 25000, 64}});
  EXPECT_NE(
      staged.find("\nSlowest input stages (their own time per step): IteratorGetNext: Iterator::batch::csv 0.025 ms; "
                  "IteratorGetNext: Iterator::batch 0.004 ms.\n"),
      std::string::npos)
      << staged;
  std::vector<StepTimingRecord> input_bound;
  for (int64_t s = 1; s <= 4; ++s) input_bound.push_back({.step = s, .wall_ns = 1000000, .input_ns = 250000});
  const std::string all = advice_for(2, 98, input_bound);
  EXPECT_NE(all.find("not input-bound (under 5%).\nSlowest input op: IteratorGetNext (0.002 ms per step).\n"
                     "Over every run recorded (4 step timings): 25.0% of the step time waiting on input: highly "
                     "input-bound (over 20%).\nOverlap input with compute"),
            std::string::npos)
      << all;
}

}  // namespace
}  // namespace stepscope
