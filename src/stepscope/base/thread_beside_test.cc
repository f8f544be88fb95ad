#include "stepscope/base/thread_beside.h"

#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

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

TEST(ThreadBeside, ItsThreadIsKeptForTheNextOne) {
  std::thread::id first, second;
  ThreadBeside([&] { first = std::this_thread::get_id(); }).join();
  EXPECT_GE(ThreadBeside::parked(), 1);
  ThreadBeside([&] { second = std::this_thread::get_id(); }).join();
  EXPECT_EQ(first, second);  // the thread parked by the first, woken for the second
  EXPECT_NE(first, std::this_thread::get_id());
}

TEST(ThreadBeside, ManyAtOnceRunOnThreadsOfTheirOwn) {
  constexpr int kMany = 12;  // more than are kept parked
  std::atomic<int> arrived{0};
  std::vector<ThreadBeside> besides;
  for (int i = 0; i < kMany; ++i)
    besides.emplace_back([&] {
      arrived.fetch_add(1);
      while (arrived.load() < kMany) std::this_thread::yield();  // each waits for all the others
    });
  for (auto& beside : besides) beside.join();
  EXPECT_EQ(arrived.load(), kMany);
  EXPECT_LE(ThreadBeside::parked(), 8);
}

TEST(ThreadBeside, WhatTheWorkHoldsIsGoneWhenItIsDone) {
  auto held = std::make_shared<int>(1);
  ThreadBeside beside([copy = held] { (void)copy; });
  beside.join();
  EXPECT_EQ(held.use_count(), 1);
}

#if defined(__SANITIZE_THREAD__)
#define STEPSCOPE_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STEPSCOPE_UNDER_TSAN 1
#endif
#endif
#if defined(__linux__) && !defined(STEPSCOPE_UNDER_TSAN)
// A forked child has none of its parent's parked threads: its ThreadBesides make their own, and
// the threads made ahead are its own (kMadeAhead of them, once). (Not under TSan, which does not
// support threads made after a multi-threaded fork.)
TEST(ThreadBeside, AForkedChildMakesThreadsOfItsOwn) {
  ThreadBeside([] {}).join();  // one parked here, in the parent
  ASSERT_GE(ThreadBeside::parked(), 1);
  EXPECT_EXIT(
      {
        const bool none_inherited = ThreadBeside::parked() == 0;
        ThreadBeside::make_ahead();
        const bool made_ahead = ThreadBeside::parked() == ThreadBeside::kMadeAhead;
        ThreadBeside::make_ahead();  // made already: none more
        const bool once = ThreadBeside::parked() == ThreadBeside::kMadeAhead;
        std::atomic<bool> ran{false};
        ThreadBeside([&] { ran = true; }).join();
        std::_Exit(none_inherited && made_ahead && once && ran ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
#endif

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
