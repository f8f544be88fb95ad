#include "stepscope/profiler/tfprof/step_timings.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "stepscope/base/error.h"

namespace stepscope {
namespace {

StepTimingRecord record(int64_t step, int64_t wall_ms, int64_t input_ms, int64_t hooks_ms = 0) {
  return {.step = step,
          .wall_ns = wall_ms * 1000000,
          .busy_ns = (wall_ms - input_ms) * 1000000,
          .input_ns = input_ms * 1000000,
          .idle_ns = 0,
          .hooks_ns = hooks_ms * 1000000};
}

TEST(StepTimings, RingKeepsTheNewestAndCountsTheDropped) {
  StepTimings t(3);
  for (int64_t s = 1; s <= 5; ++s) t.add(record(s, s, 0));
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.dropped(), 2);
  const auto all = t.records();
  EXPECT_EQ(all[0].step, 3);
  EXPECT_EQ(all[1].step, 4);
  EXPECT_EQ(all[2].step, 5);
  EXPECT_THROW(StepTimings(0), InvalidArgumentError);
}

TEST(StepTimings, AssignPastTheCapacityKeepsTheNewest) {
  StepTimings t(2);
  t.assign({record(1, 1, 0), record(2, 2, 0), record(3, 3, 0)}, 4);
  EXPECT_EQ(t.dropped(), 5);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.records().front().step, 2);
  t.add(record(4, 4, 0));  // the ring goes on from the oldest
  EXPECT_EQ(t.records().front().step, 3);
  EXPECT_EQ(t.records().back().step, 4);
}

TEST(StepTimings, SummaryAndVerdict) {
  StepTimings t;
  EXPECT_EQ(t.summary_text(), "no step timings\n");
  // 10 steps of 10 ms with 3 ms of input (30%: highly input-bound), one slow step of 100 ms.
  for (int64_t s = 1; s <= 10; ++s) t.add(record(s, 10, 3, 1));
  t.add(record(11, 100, 30, 1));
  const StepTimings::Summary s = t.summarize();
  EXPECT_EQ(s.steps, 11u);
  EXPECT_DOUBLE_EQ(s.median_wall_ms, 10);
  EXPECT_DOUBLE_EQ(s.max_wall_ms, 100);
  EXPECT_EQ(s.slowest_step, 11);
  EXPECT_NEAR(s.input_share, 0.3, 1e-12);
  EXPECT_NEAR(s.hooks_share, 11.0 / 211.0, 1e-12);
  const std::string text = t.summary_text();
  EXPECT_NE(text.find("11 steps (1 to 11)"), std::string::npos) << text;
  EXPECT_NE(text.find("max 100.000 ms (step 11)"), std::string::npos) << text;
  EXPECT_NE(text.find("30.0% of the step time, highly input-bound (over 20%)"), std::string::npos) << text;

  const auto json = nlohmann::json::parse(t.to_json());
  EXPECT_EQ(json["steps"], 11);
  EXPECT_EQ(json["dropped"], 0);
  EXPECT_EQ(json["summary"]["verdict"], "highly input-bound (over 20%)");
  ASSERT_EQ(json["records"].size(), 11u);
  EXPECT_EQ(json["records"][10], nlohmann::json({11, 100000000, 70000000, 30000000, 0, 1000000}));
}

TEST(StepTimings, VerdictThresholdsAreXProfs) {
  EXPECT_STREQ(input_bound_verdict(0.049), "not input-bound (under 5%)");
  EXPECT_STREQ(input_bound_verdict(0.05), "moderately input-bound (5% to 20%)");
  EXPECT_STREQ(input_bound_verdict(0.20), "moderately input-bound (5% to 20%)");
  EXPECT_STREQ(input_bound_verdict(0.201), "highly input-bound (over 20%)");
}

}  // namespace
}  // namespace stepscope
