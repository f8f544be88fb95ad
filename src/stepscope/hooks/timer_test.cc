#include "stepscope/hooks/timer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "stepscope/base/error.h"

namespace stepscope {
namespace {

TEST(SecondOrStepTimer, ExactlyOneOfSecsOrSteps) {
  try {
    SecondOrStepTimer t(std::nullopt, std::nullopt);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "Either every_secs or every_steps should be provided.");
  }
  try {
    SecondOrStepTimer t(1.0, 2);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "Can not provide both every_secs and every_steps.");
  }
}

// Issue 12: the reference takes any number; 0 or negative steps and NaN or negative seconds
// are mistakes, named after the option as the hook calls it.
TEST(SecondOrStepTimer, RefusesNonPositiveStepsAndNegativeOrNanSecs) {
  auto error = [](std::optional<double> secs, std::optional<int64_t> steps) {
    try {
      SecondOrStepTimer t(secs, steps, nullptr, "every_n_secs", "every_n_steps");
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(std::nullopt, 0), "every_n_steps must be at least 1, given: 0");
  EXPECT_EQ(error(std::nullopt, -3), "every_n_steps must be at least 1, given: -3");
  EXPECT_EQ(error(-0.5, std::nullopt), "every_n_secs must be a finite number of seconds >= 0, given: -0.5");
  EXPECT_EQ(error(std::nan(""), std::nullopt), "every_n_secs must be a finite number of seconds >= 0, given: nan");
  EXPECT_EQ(error(0.0, std::nullopt), "no error");
  EXPECT_EQ(error(std::nullopt, 1), "no error");
}

TEST(SecondOrStepTimer, EverySecs) {
  FakeClock clock;
  SecondOrStepTimer t(1.0, std::nullopt, &clock);
  EXPECT_TRUE(t.should_trigger_for_step(1));
  t.update_last_triggered_step(1);
  EXPECT_FALSE(t.should_trigger_for_step(1));
  EXPECT_FALSE(t.should_trigger_for_step(2));
  clock.advance(1.0);
  EXPECT_FALSE(t.should_trigger_for_step(1));  // the same step never triggers twice
  EXPECT_TRUE(t.should_trigger_for_step(2));   // inclusive: exactly 1.0 s later
}

TEST(SecondOrStepTimer, EverySteps) {
  SecondOrStepTimer t(std::nullopt, 3);
  EXPECT_TRUE(t.should_trigger_for_step(1));
  t.update_last_triggered_step(1);
  EXPECT_FALSE(t.should_trigger_for_step(1));
  EXPECT_FALSE(t.should_trigger_for_step(2));
  EXPECT_FALSE(t.should_trigger_for_step(3));
  EXPECT_TRUE(t.should_trigger_for_step(4));
}

TEST(SecondOrStepTimer, UpdateReturnsElapsedTimeAndSteps) {
  FakeClock clock;
  SecondOrStepTimer t(std::nullopt, 1, &clock);
  EXPECT_FALSE(t.update_last_triggered_step(1).has_value());
  clock.advance(0.5);
  auto e = t.update_last_triggered_step(5);
  ASSERT_TRUE(e.has_value());
  EXPECT_DOUBLE_EQ(e->first, 0.5);
  EXPECT_EQ(e->second, 4);
  e = t.update_last_triggered_step(7);
  EXPECT_EQ(e->second, 2);
  EXPECT_EQ(t.last_triggered_step(), 7);
  t.reset();
  EXPECT_FALSE(t.last_triggered_step().has_value());
}

TEST(NeverTriggerTimer, NeverTriggers) {
  NeverTriggerTimer t;
  EXPECT_FALSE(t.should_trigger_for_step(1));
  EXPECT_FALSE(t.update_last_triggered_step(1).has_value());
}

}  // namespace
}  // namespace stepscope
