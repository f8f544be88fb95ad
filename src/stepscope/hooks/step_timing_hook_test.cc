#include "stepscope/hooks/step_timing_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "stepscope/hooks/hook_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

using ::testing::HasSubstr;

// A training-like step reading its batch from an input pipeline (IteratorGetNext) and computing
// on it, with a global step.
struct InputModel {
  Graph g;
  Node* train = nullptr;
  InputModel() {
    Scope root(g);
    get_or_create_global_step(root);
    std::vector<float> values(64 * 32);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7);
    Tensor data = Tensor::from_vector<float>(values).reshaped(Shape{64, 32});
    auto next = Dataset::from_tensor_slices({data}).batch(8).repeat().make_iterator(root).get_next();
    Output y = reduce_sum(root, matmul(root, next[0], next[0], false, true));
    train = group(root, {testing::increment_global_step(g, 1), y.node});
  }
};

TEST(StepTimingHook, EveryStepsTimingIsAScalar) {
  testing::TempDir dir;
  InputModel m;
  {
    StepTimingHook timing({.output_dir = dir.path()});
    SingularMonitoredSession sess(m.g, {.hooks = {&timing}});
    for (int i = 0; i < 5; ++i) sess.run(m.train);
  }
  SummaryWriterCache::clear();
  const auto by_step = testing::summaries_by_step(testing::read_dir_events(dir.path()));
  ASSERT_EQ(by_step.size(), 5u);
  for (int64_t step = 1; step <= 5; ++step) {
    ASSERT_TRUE(by_step.count(step)) << step;
    const auto& s = by_step.at(step);
    for (const char* tag :
         {"step_time/wall_ms", "step_time/input_ms", "step_time/ops_ms", "step_time/idle_ms", "step_time/hooks_ms"})
      ASSERT_TRUE(s.count(tag)) << tag;
    EXPECT_GT(s.at("step_time/wall_ms"), 0);
    EXPECT_GT(s.at("step_time/ops_ms"), 0);
    EXPECT_GT(s.at("step_time/input_ms"), 0);  // the IteratorGetNext ran
    EXPECT_LE(s.at("step_time/input_ms"), s.at("step_time/ops_ms"));
    EXPECT_GE(s.at("step_time/idle_ms"), 0);
    EXPECT_GE(s.at("step_time/hooks_ms"), 0);
  }
}

TEST(StepTimingHook, EveryNStepsAndBadOptions) {
  testing::TempDir dir;
  InputModel m;
  {
    StepTimingHook timing({.output_dir = dir.path(), .every_n_steps = 3});
    SingularMonitoredSession sess(m.g, {.hooks = {&timing}});
    for (int i = 0; i < 7; ++i) sess.run(m.train);
  }
  SummaryWriterCache::clear();
  const auto by_step = testing::summaries_by_step(testing::read_dir_events(dir.path()));
  std::vector<int64_t> steps;
  for (const auto& [step, _] : by_step) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6}));
  try {
    StepTimingHook bad({.output_dir = dir.path(), .every_n_steps = 0});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("every_n_steps must be at least 1, given: 0"));
  }
}

}  // namespace
}  // namespace stepscope
