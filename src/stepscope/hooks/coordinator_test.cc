// Coordinator, ported from TensorFlow's coordinator_test.py: the stop flag, errors reported by
// threads (first one wins, clean-stop types dropped), join with and without a grace period.
#include "stepscope/hooks/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace stepscope {
namespace {

using namespace std::chrono_literals;

std::exception_ptr make_error(const Error& e) {
  try {
    throw_error(e.code(), e.what());
  } catch (...) {
    return std::current_exception();
  }
}

TEST(Coordinator, StopApi) {
  Coordinator coord;
  EXPECT_FALSE(coord.should_stop());
  EXPECT_FALSE(coord.wait_for_stop(0.01));
  coord.request_stop();
  EXPECT_TRUE(coord.should_stop());
  EXPECT_TRUE(coord.wait_for_stop(0.01));
  EXPECT_TRUE(coord.wait_for_stop());
}

TEST(Coordinator, StopAsync) {
  Coordinator coord;
  EXPECT_FALSE(coord.should_stop());
  std::thread t([&] {
    std::this_thread::sleep_for(10ms);
    coord.request_stop();
  });
  EXPECT_TRUE(coord.wait_for_stop(10.0));
  t.join();
}

TEST(Coordinator, JoinWaitsForThreadsThatStopOnRequest) {
  Coordinator coord;
  std::atomic<int> finished{0};
  for (int i = 0; i < 3; ++i)
    coord.start_thread("t" + std::to_string(i), [&](Coordinator& c) {
      c.wait_for_stop();
      ++finished;
    });
  coord.request_stop();
  coord.join();
  EXPECT_EQ(finished.load(), 3);
  EXPECT_TRUE(coord.joined());
}

TEST(Coordinator, JoinWaitsForThreadsThatFinishWithoutAStop) {
  Coordinator coord;
  std::atomic<bool> done{false};
  coord.start_thread("worker", [&](Coordinator&) {
    std::this_thread::sleep_for(20ms);
    done = true;
  });
  coord.join();  // no stop requested: waits for the thread itself
  EXPECT_TRUE(done.load());
  EXPECT_FALSE(coord.should_stop());
}

TEST(Coordinator, JoinGraceExpiresWithStragglers) {
  std::atomic<bool> release{false};  // before coord: its destructor joins a thread that reads it
  Coordinator coord;
  coord.start_thread("slow_one", [&](Coordinator&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  coord.request_stop();
  try {
    coord.join(/*stop_grace_period_secs=*/0.01);
    FAIL();
  } catch (const FailedPreconditionError& e) {
    EXPECT_STREQ(e.what(), "Coordinator stopped with threads still running: slow_one");
  }
  release = true;  // the destructor joins the straggler
}

TEST(Coordinator, JoinIgnoresLiveThreadsWhenAsked) {
  std::atomic<bool> release{false};  // before coord: its destructor joins a thread that reads it
  Coordinator coord;
  coord.start_thread("slow_one", [&](Coordinator&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  coord.request_stop();
  coord.join(0.01, /*ignore_live_threads=*/true);
  EXPECT_TRUE(coord.joined());
  release = true;
}

TEST(Coordinator, JoinWithoutGraceExpiring) {
  Coordinator coord;
  coord.start_thread("quick", [](Coordinator& c) {
    c.wait_for_stop();
    std::this_thread::sleep_for(5ms);
  });
  coord.request_stop();
  coord.join(/*stop_grace_period_secs=*/10.0);  // returns as soon as the thread is done
}

TEST(Coordinator, JoinRaisesTheErrorAThreadReported) {
  Coordinator coord;
  coord.start_thread("fails", [](Coordinator&) { throw InvalidArgumentError("First error"); });
  coord.start_thread("fails_later", [](Coordinator& c) {
    c.wait_for_stop();
    c.request_stop(make_error(InvalidArgumentError("Second error")));
  });
  try {
    coord.join();
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "First error");  // the first error wins, later ones are dropped
  }
}

TEST(Coordinator, StopOnExceptionReportsTheError) {
  Coordinator coord;
  coord.stop_on_exception([] { throw UnavailableError("lost a worker"); });
  EXPECT_TRUE(coord.should_stop());
  EXPECT_THROW(coord.raise_requested_exception(), UnavailableError);
  EXPECT_THROW(coord.raise_requested_exception(), UnavailableError);  // stays recorded
  EXPECT_THROW(coord.join(), UnavailableError);
}

TEST(Coordinator, JoinIgnoresOutOfRangeByDefault) {
  Coordinator coord;
  coord.request_stop(make_error(OutOfRangeError("End of sequence")));
  EXPECT_TRUE(coord.should_stop());
  EXPECT_NO_THROW(coord.raise_requested_exception());
  EXPECT_NO_THROW(coord.join());
}

TEST(Coordinator, CleanStopTypesAreConfigurable) {
  Coordinator keeps_all(std::vector<ErrorCode>{});
  keeps_all.request_stop(make_error(OutOfRangeError("End of sequence")));
  EXPECT_THROW(keeps_all.join(), OutOfRangeError);

  Coordinator ignores_aborted({ErrorCode::kAborted});
  ignores_aborted.request_stop(make_error(AbortedError("Abort")));
  EXPECT_NO_THROW(ignores_aborted.join());
}

TEST(Coordinator, ClearStopClearsTheErrorToo) {
  Coordinator coord;
  coord.request_stop(make_error(InternalError("boom")));
  coord.clear_stop();
  EXPECT_FALSE(coord.should_stop());
  EXPECT_NO_THROW(coord.raise_requested_exception());
  EXPECT_NO_THROW(coord.join(0));
}

TEST(Coordinator, RequestStopRaisesIfJoined) {
  Coordinator coord;
  coord.request_stop();
  coord.join();
  EXPECT_THROW(coord.request_stop(make_error(InvalidArgumentError("late"))), InvalidArgumentError);
  EXPECT_NO_THROW(coord.request_stop());  // a plain stop is harmless
}

TEST(Coordinator, AnErrorAfterTheStopIsNotRecorded) {
  Coordinator coord;
  coord.request_stop();
  coord.request_stop(make_error(InternalError("too late")));
  EXPECT_NO_THROW(coord.raise_requested_exception());
}

}  // namespace
}  // namespace stepscope
