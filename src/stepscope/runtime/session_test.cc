// The RunOptions fields Session::run reads besides tracing and timeouts (those are in
// executor_test.cc and executor_trace_test.cc): the inter-op pool, tfdbg watches and the
// out-of-memory report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "stepscope/core/allocator.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RunOptions, OnlyInterOpPoolZeroExists) {
  Graph g;
  Scope s(g);
  auto c = constant(s.with_op_name("c"), 3.0f);
  Session sess(g);
  RunOptions options;
  options.inter_op_thread_pool = 1;
  EXPECT_THAT(testing::error_text<InvalidArgumentError>([&] { sess.run({}, {c}, {}, options); }),
              HasSubstr("Invalid inter_op_thread_pool: 1 (a session has one inter-op pool, number 0"));
  options.inter_op_thread_pool = -1;
  EXPECT_THAT(testing::error_text<InvalidArgumentError>([&] { sess.run({}, {c}, {}, options); }),
              HasSubstr("Invalid inter_op_thread_pool: -1"));
  options.inter_op_thread_pool = 0;
  EXPECT_EQ(sess.run({}, {c}, {}, options)[0].scalar_value<float>(), 3.0f);
}

TEST(RunOptions, DebugWatchesAreCheckedAgainstTheGraph) {
  Graph g;
  Scope s(g);
  auto c = constant(s.with_op_name("scope/c"), 3.0f);
  Session sess(g);
  auto run_watching = [&](std::string watch) {
    RunOptions options{.debug_options = {.debug_tensor_watch_opts = {std::move(watch)}}};
    return sess.run({}, {c}, {}, options)[0].scalar_value<float>();
  };
  EXPECT_EQ(run_watching("scope/c:0:DebugIdentity"), 3.0f);
  EXPECT_EQ(run_watching("scope/c:0:DebugNumericSummary"), 3.0f);
  auto error = [&](std::string watch) {
    return testing::error_text<InvalidArgumentError>([&] { run_watching(watch); });
  };
  EXPECT_THAT(error("nothing:0:DebugIdentity"),
              HasSubstr("RunOptions.debug_options.debug_tensor_watch_opts: 'nothing:0:DebugIdentity' names no node "
                        "of the graph ('nothing'); write \"<node name>:<output index>:<debug op>\""));
  EXPECT_THAT(error("scope/c:1:DebugIdentity"), HasSubstr("has output '1', but scope/c has 1 output(s)"));
  EXPECT_THAT(error("scope/c:x:DebugIdentity"), HasSubstr("has output 'x'"));
  EXPECT_THAT(error("scope/c:0:Print"), HasSubstr("names the debug op 'Print'"));
  EXPECT_THAT(error("scope/c"), HasSubstr("'scope/c' is not a watch"));
  EXPECT_THAT(error(":0:DebugIdentity"), HasSubstr("is not a watch"));
}

TEST(RunOptions, OutOfMemoryGivesTheAllocatorsFiguresWhenAskedAndAHintOtherwise) {
  Graph g;
  Scope s(g);
  // 2^50 floats: 4 PiB, beyond any machine.
  auto huge = fill(s.with_op_name("huge"), {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 10}, 1.0f);
  Session sess(g);
  const std::string hinted = testing::error_text<ResourceExhaustedError>([&] { sess.run(huge); });
  EXPECT_THAT(hinted, HasSubstr("[Fill] huge: OOM when allocating"));
  EXPECT_THAT(hinted, HasSubstr("\nHint: If you want to see a list of allocated tensors when OOM happens, add "
                                "report_tensor_allocations_upon_oom to RunOptions for current allocation info."));
  EXPECT_THAT(hinted, Not(HasSubstr("Current usage")));

  RunOptions options;
  options.report_tensor_allocations_upon_oom = true;
  const std::string reported = testing::error_text<ResourceExhaustedError>([&] { sess.run({}, {huge}, {}, options); });
  EXPECT_THAT(reported, HasSubstr("[Fill] huge: OOM when allocating"));
  EXPECT_THAT(reported, HasSubstr("\nCurrent usage from device: CPU, allocator: " + cpu_allocator()->name() + "\n  "));
  EXPECT_THAT(reported, HasSubstr(" bytes in use by tensors (peak "));
  EXPECT_THAT(reported, Not(HasSubstr("Hint:")));
}

}  // namespace
}  // namespace stepscope
