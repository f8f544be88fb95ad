#include "stepscope/hooks/flight_recorder_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/hook_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// Makes each run take as long as the test says: its after_run moves the fake clock, and it runs
// before the recorder's (hooks are called in order).
class StepDuration : public SessionRunHook {
 public:
  explicit StepDuration(FakeClock& clock) : clock_(clock) {}
  void after_run(SessionRunContext&, const SessionRunValues&) override { clock_.advance(next_secs); }
  double next_secs = 0.010;

 private:
  FakeClock& clock_;
};

class FlightRecorderTest : public ::testing::Test {
 protected:
  FlightRecorderTest() {
    get_or_create_global_step(root);
    Output x = constant(root.with_op_name("x"), Tensor::from_vector<float>(std::vector<float>(16, 0.5f)));
    Output y = reduce_sum(root, square(root, x));
    train_op = group(root, {testing::increment_global_step(g, 1), y.node});
  }
  FlightRecorderOptions options(FlightRecorderOptions o) {
    o.output_dir = dir.path();
    o.clock = &clock;
    o.log = log;
    o.dump_on_sigusr1 = o.dump_on_sigusr1 && signals;
    return o;
  }
  std::vector<std::string> dumps() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir.path()))
      if (entry.path().filename().string().rfind("flight-", 0) == 0) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  json read(const std::string& name) {
    std::ifstream in(fs::path(dir.path()) / name);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const auto& problem : validate_chrome_trace(text)) ADD_FAILURE() << name << ": " << problem.message;
    return json::parse(text);
  }
  static std::vector<int64_t> step_slices(const json& trace) {
    std::vector<int64_t> steps;
    for (const json& e : trace["traceEvents"]) {
      const std::string name = e.value("name", "");
      if (e["ph"] == "X" && name.rfind("step ", 0) == 0) steps.push_back(std::stoll(name.substr(5)));
    }
    std::sort(steps.begin(), steps.end());
    return steps;
  }

  Graph g;
  Scope root{g};
  Node* train_op = nullptr;
  testing::TempDir dir;
  FakeClock clock;
  StepDuration duration{clock};
  bool signals = false;
  std::vector<std::string> info, warnings;
  HookLog log{.info = [this](const std::string& s) { info.push_back(s); },
              .warning = [this](const std::string& s) { warnings.push_back(s); }};
};

TEST_F(FlightRecorderTest, ASlowStepWritesTheRingOnOneTimeAxisAndSaysWhy) {
  FlightRecorderHook recorder(options({.max_steps = 4, .slow_factor = 3, .min_steps_for_median = 3}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  for (int i = 0; i < 6; ++i) sess.run(train_op);  // 10 ms each
  EXPECT_TRUE(dumps().empty());
  EXPECT_EQ(recorder.recorded_steps(), (std::vector<int64_t>{3, 4, 5, 6}));
  duration.next_secs = 0.050;
  sess.run(train_op);
  ASSERT_EQ(dumps(), (std::vector<std::string>{"flight-7-slow.json"}));
  const json trace = read("flight-7-slow.json");
  EXPECT_EQ(step_slices(trace), (std::vector<int64_t>{4, 5, 6, 7}));
  const json meta = trace["metadata"]["stepscope_flight_recorder"];
  EXPECT_EQ(meta["reason"], "slow");
  EXPECT_EQ(meta["steps"], json({4, 5, 6, 7}));
  EXPECT_THAT(meta["detail"].get<std::string>(), HasSubstr("step 7 took 50.000 ms, 5.0x the median 10.000 ms"));
  ASSERT_EQ(info.size(), 1u);
  EXPECT_THAT(info[0], HasSubstr("FlightRecorder: step 7 took 50.000 ms"));
  EXPECT_THAT(info[0], HasSubstr("flight-7-slow.json (steps 4..7)"));
  // One time axis: every step's slices after the previous step's.
  std::set<std::string> names;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") names.insert(e["args"].value("name", ""));
  EXPECT_TRUE(names.count("global_step/AssignAdd"));
}

// Every step is traced: the session makes a plan's first traced step's memory ahead.
TEST_F(FlightRecorderTest, TellsTheSessionThatStepsWillBeTraced) {
  FlightRecorderHook recorder(options({}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  EXPECT_TRUE(sess.raw_session().expects_traced_steps());
  SingularMonitoredSession without(g, {.hooks = {&duration}});
  EXPECT_FALSE(without.raw_session().expects_traced_steps());
}

TEST_F(FlightRecorderTest, ShortStepsAreNeverSlowByTheFactor) {
  FlightRecorderHook recorder(options({.slow_factor = 3, .min_steps_for_median = 3}));  // floor: 5 ms
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  duration.next_secs = 0.0001;
  for (int i = 0; i < 5; ++i) sess.run(train_op);
  duration.next_secs = 0.004;  // 40x the median, but 4 ms: jitter
  sess.run(train_op);
  EXPECT_TRUE(dumps().empty());
  duration.next_secs = 0.006;
  sess.run(train_op);
  EXPECT_EQ(dumps(), (std::vector<std::string>{"flight-7-slow.json"}));
}

TEST_F(FlightRecorderTest, AnAbsoluteThresholdAndNoVerdictBeforeTheMedianHasSteps) {
  FlightRecorderHook recorder(options({.slow_step_secs = 0.5, .slow_factor = 2, .min_steps_for_median = 5}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  duration.next_secs = 0.2;
  sess.run(train_op);
  duration.next_secs = 0.45;  // over 2x the median of one step, but the median needs 5 steps
  sess.run(train_op);
  EXPECT_TRUE(dumps().empty());
  duration.next_secs = 0.6;
  sess.run(train_op);
  EXPECT_EQ(dumps(), (std::vector<std::string>{"flight-3-slow.json"}));
  EXPECT_THAT(read("flight-3-slow.json")["metadata"]["stepscope_flight_recorder"]["detail"].get<std::string>(),
              HasSubstr("over the threshold of 500.000 ms"));
}

TEST_F(FlightRecorderTest, AKernelErrorDumpsTheFailingStepBeforeItPropagates) {
  Output bad = check_numerics(root, div(root, constant(root, 0.0f), constant(root, 0.0f)), "the loss is broken");
  FlightRecorderHook recorder(options({}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  sess.run(train_op);
  sess.run(train_op);
  EXPECT_THROW(sess.run(bad), InvalidArgumentError);
  ASSERT_EQ(dumps(), (std::vector<std::string>{"flight-3-error.json"}));
  const json trace = read("flight-3-error.json");
  const json meta = trace["metadata"]["stepscope_flight_recorder"];
  EXPECT_EQ(meta["reason"], "error");
  EXPECT_THAT(meta["detail"].get<std::string>(), HasSubstr("step 3 raised: "));
  EXPECT_THAT(meta["detail"].get<std::string>(), HasSubstr("the loss is broken"));
  EXPECT_EQ(meta["steps"], json({1, 2, 3}));
  // The failing step's partial trace is in: the division ran, then CheckNumerics failed.
  bool saw_div = false;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["args"].value("step", 0) == 3 && e["args"].value("op", "").find("Div") != std::string::npos)
      saw_div = true;
  EXPECT_TRUE(saw_div) << trace.dump().substr(0, 3000);
}

TEST_F(FlightRecorderTest, NanTensorHooksErrorIsCaughtAfterTheRecordersAfterRun) {
  Output nan_loss = div(root, constant(root, 0.0f), constant(root, 0.0f));
  NanTensorHook nan({.loss_tensor = nan_loss, .log = log});
  FlightRecorderHook recorder(options({}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder, &nan}});
  EXPECT_THROW(sess.run(train_op), NanLossDuringTrainingError);
  ASSERT_EQ(dumps(), (std::vector<std::string>{"flight-1-error.json"}));
  const json meta = read("flight-1-error.json")["metadata"]["stepscope_flight_recorder"];
  EXPECT_THAT(meta["detail"].get<std::string>(), HasSubstr("NaN loss during training."));
  EXPECT_EQ(meta["steps"], json({1}));  // the NaN step once: recorded by after_run, not again
}

TEST_F(FlightRecorderTest, SigusrOneAndATriggerFileAskFromOutside) {
  signals = true;
  FlightRecorderHook recorder(options({.trigger_poll_secs = 1.0}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  sess.run(train_op);
  std::raise(SIGUSR1);
  sess.run(train_op);
  EXPECT_EQ(dumps(), (std::vector<std::string>{"flight-2-signal.json"}));
  EXPECT_EQ(read("flight-2-signal.json")["metadata"]["stepscope_flight_recorder"]["detail"], "SIGUSR1 at step 2");

  const fs::path trigger = fs::path(dir.path()) / "DUMP_FLIGHT_RECORDER";
  std::ofstream(trigger) << "";
  duration.next_secs = 0.3;  // the file is looked for once a second
  for (int i = 0; i < 5 && fs::exists(trigger); ++i) sess.run(train_op);
  EXPECT_FALSE(fs::exists(trigger)) << "deleted once the dump is written";
  std::vector<std::string> written = dumps();
  ASSERT_EQ(written.size(), 2u);
  std::erase(written, "flight-2-signal.json");
  ASSERT_EQ(written.size(), 1u);
  EXPECT_THAT(written[0], HasSubstr("-file.json"));
  EXPECT_THAT(read(written[0])["metadata"]["stepscope_flight_recorder"]["detail"].get<std::string>(),
              HasSubstr("DUMP_FLIGHT_RECORDER appeared at step "));
}

TEST_F(FlightRecorderTest, AtMostMDumpsAnHour) {
  FlightRecorderHook recorder(options({.slow_step_secs = 0.001, .max_dumps_per_hour = 2}));
  SingularMonitoredSession sess(g, {.hooks = {&duration, &recorder}});
  for (int i = 0; i < 5; ++i) sess.run(train_op);  // every step is slow
  EXPECT_EQ(dumps().size(), 2u);
  EXPECT_EQ(recorder.skipped_dumps(), 3);
  clock.advance(3600);
  sess.run(train_op);
  ASSERT_EQ(dumps().size(), 3u);
  EXPECT_EQ(read("flight-6-slow.json")["metadata"]["stepscope_flight_recorder"]["skipped_dumps"], 3);
  EXPECT_THAT(info.back(), HasSubstr("3 dumps skipped by the rate limit"));
}

TEST_F(FlightRecorderTest, TheRingIsBoundedInStepsAndBytesAndReusesItsSlots) {
  FlightRecorderHook by_steps(options({.max_steps = 3, .slow_factor = 0, .dump_on_sigusr1 = false}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&by_steps}});
    for (int i = 0; i < 50; ++i) sess.run(train_op);
  }
  EXPECT_EQ(by_steps.recorded_steps(), (std::vector<int64_t>{48, 49, 50}));
  const size_t three_steps = by_steps.recorded_bytes();
  EXPECT_GT(three_steps, 0u);

  // A cap in bytes below one step keeps just the newest.
  FlightRecorderHook by_bytes(options({.max_steps = 10, .max_bytes = 1, .slow_factor = 0}));
  SingularMonitoredSession sess(g, {.hooks = {&by_bytes}});
  for (int i = 0; i < 20; ++i) sess.run(train_op);
  EXPECT_EQ(by_bytes.recorded_steps(), (std::vector<int64_t>{20}));  // a new session: the global step restarts
  EXPECT_LT(by_bytes.recorded_bytes(), three_steps);
}

// A dump reads every step of the ring whole (~420 bytes a node of node entries, against the
// 6-33 of a recorded step): afterwards the ring holds what it did before, what its cap counts,
// and the next dump makes the entries again.
TEST_F(FlightRecorderTest, ADumpLeavesTheRingHoldingWhatItCounts) {
  FlightRecorderHook recorder(options({.max_steps = 4, .slow_factor = 0, .dump_on_sigusr1 = false}));
  SingularMonitoredSession sess(g, {.hooks = {&recorder}});
  for (int i = 0; i < 8; ++i) sess.run(train_op);
  const size_t before = recorder.held_memory_bytes();
  EXPECT_GT(before, 0u);
  EXPECT_LE(before, 2 * recorder.recorded_bytes());
  ASSERT_TRUE(recorder.dump("manual").has_value());
  EXPECT_EQ(recorder.held_memory_bytes(), before);
  for (int i = 0; i < 4; ++i) sess.run(train_op);       // into the slots the dump read
  EXPECT_LT(recorder.held_memory_bytes(), 2 * before);  // steps as big, a time's varint a byte more or less
  ASSERT_TRUE(recorder.dump("again").has_value());
  EXPECT_EQ(step_slices(read("flight-12-again.json")), (std::vector<int64_t>{9, 10, 11, 12}));
  const json first = read("flight-8-manual.json");
  EXPECT_EQ(step_slices(first), (std::vector<int64_t>{5, 6, 7, 8}));
  std::set<std::string> names;
  for (const json& e : first["traceEvents"])
    if (e["ph"] == "X") names.insert(e["args"].value("name", ""));
  EXPECT_TRUE(names.count("global_step/AssignAdd"));
}

TEST_F(FlightRecorderTest, AnUnwritableDirectoryIsAWarningAndTrainingGoesOn) {
  FlightRecorderHook recorder(options({}));
  const fs::path blocked = fs::path(dir.path()) / "blocked";
  std::ofstream(blocked) << "a file where the directory should be";
  FlightRecorderOptions o = options({});
  o.output_dir = (blocked / "sub").string();
  FlightRecorderHook bad(o);
  SingularMonitoredSession sess(g, {.hooks = {&bad}});
  sess.run(train_op);
  EXPECT_FALSE(bad.dump("manual").has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("FlightRecorder: could not write"));
  EXPECT_THAT(warnings[0], HasSubstr("blocked/sub/flight-1-manual.json"));
  sess.run(train_op);  // and the next run is fine
}

TEST(FlightRecorderOptions, BadOptionsAreNamed) {
  auto error = [](FlightRecorderOptions o) {
    try {
      FlightRecorderHook hook(o);
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({.max_steps = 0}), "FlightRecorderHook: max_steps must be at least 1, given: 0");
  EXPECT_THAT(error({.slow_factor = -1}), HasSubstr("slow_factor must be a finite number >= 0"));
  EXPECT_THAT(error({.slow_step_secs = std::nan("")}), HasSubstr("slow_step_secs must be a finite number >= 0"));
  EXPECT_EQ(error({.max_dumps_per_hour = 0}), "FlightRecorderHook: max_dumps_per_hour must be at least 1, given: 0");
}

}  // namespace
}  // namespace stepscope
