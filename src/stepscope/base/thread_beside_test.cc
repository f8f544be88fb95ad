#include "stepscope/base/thread_beside.h"

#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace stepscope {
namespace {

TEST(ThreadBeside, RunsTheWorkAndJoinWaitsForIt) {
  std::atomic<bool> release{false};
  int result = 0;
  ThreadBeside beside([&] {
    while (!release.load()) std::this_thread::yield();
    result = 42;
  });
  EXPECT_TRUE(beside.started());
  EXPECT_FALSE(beside.done());
  release = true;
  beside.join();
  EXPECT_TRUE(beside.done());
  EXPECT_FALSE(beside.started());
  EXPECT_EQ(result, 42);
}

TEST(ThreadBeside, WithoutWorkItIsDone) {
  ThreadBeside none;
  EXPECT_FALSE(none.started());
  EXPECT_TRUE(none.done());
  none.join();  // nothing to wait for
}

TEST(ThreadBeside, WhatTheWorkThrowsIsDropped) {
  ThreadBeside beside([] { throw std::runtime_error("a head start that failed"); });
  beside.join();
  EXPECT_TRUE(beside.done());
}

TEST(ThreadBeside, TheDestructorWaitsForTheWork) {
  std::atomic<int> finished{0};
  {
    ThreadBeside beside([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished = 1;
    });
  }
  EXPECT_EQ(finished.load(), 1);
}

TEST(ThreadBeside, AssigningWaitsForTheWorkItHeld) {
  std::atomic<bool> first_done{false}, second_done{false};
  ThreadBeside beside([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first_done = true;
  });
  beside = ThreadBeside([&] { second_done = true; });
  EXPECT_TRUE(first_done.load());
  beside.join();
  EXPECT_TRUE(second_done.load());

  ThreadBeside moved_from([] {});
  ThreadBeside taker(std::move(moved_from));
  EXPECT_FALSE(moved_from.started());  // NOLINT(bugprone-use-after-move): a moved-from one holds nothing
  EXPECT_TRUE(moved_from.done());
  taker.join();
}

#if defined(__linux__)
// Placed off its creator's core only to start: once it runs, it may use every core its
// creator may.
TEST(ThreadBeside, OnceRunningItMayUseEveryCoreItsCreatorMay) {
  cpu_set_t creator;
  ASSERT_EQ(sched_getaffinity(0, sizeof creator, &creator), 0);
  cpu_set_t seen;
  CPU_ZERO(&seen);
  ThreadBeside beside([&] { sched_getaffinity(0, sizeof seen, &seen); });
  beside.join();
  EXPECT_TRUE(CPU_EQUAL(&seen, &creator)) << CPU_COUNT(&seen) << " of " << CPU_COUNT(&creator) << " cores";
}
#endif

}  // namespace
}  // namespace stepscope
