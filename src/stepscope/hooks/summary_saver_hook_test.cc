// Ports SummarySaverHookTest of basic_session_run_hooks_test.py (reference §2.7, §6.2), reading
// the summaries back from real event files, plus an end-to-end training run.
#include "stepscope/hooks/summary_saver_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "stepscope/testing/error_text.h"
#include "stepscope/hooks/hook_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/step_counter_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope {
namespace {

using ::testing::ElementsAre;
using testing::read_dir_events;
using testing::summaries_by_step;
using testing::TempDir;
using Summaries = std::map<int64_t, std::map<std::string, float>>;

constexpr double kMockStartTime = 1484695987.209386;

using testing::error_text;

// The reference's setUp: var = 0.0; tensor = assign_add(var, 1.0); summaries of tensor and
// tensor * 2; a global step incremented by the train op.
struct Fixture {
  Fixture() {
    var = make_variable(root, "var", constant(root, 0.0f));
    Output tensor = assign_add(root, var.value(), constant(root, 1.0f));
    summary_op = scalar(root, "my_summary", tensor);
    summary_op2 = scalar(root, "my_summary2", mul(root, tensor, 2.0));
    get_or_create_global_step(root);
    train_op = testing::increment_global_step(g, 1);
    init = global_variables_initializer(root);
  }
  std::vector<Event> events() { return read_dir_events(dir.path()); }
  Summaries summaries() { return summaries_by_step(events()); }
  float var_value(Session& sess) { return sess.run(var.value()).scalar_value<float>(); }

  Graph g;
  Scope root{g};
  Variable var;
  Output summary_op, summary_op2;
  Node* train_op = nullptr;
  Node* init = nullptr;
  TempDir dir;
  std::shared_ptr<SummaryWriter> writer =
      std::make_shared<SummaryWriter>(dir.path(), SummaryWriterOptions{.max_queue = 1000});
  FakeClock clock{kMockStartTime};
};

TEST(SummarySaverHook, ExactlyOneOfScaffoldOrSummaryOp) {
  EXPECT_EQ(error_text<InvalidArgumentError>([] { SummarySaverHook h({.save_steps = 1}); }),
            "Exactly one of scaffold or summary_op must be provided.");
  Fixture f;
  Scaffold scaffold(f.g);
  EXPECT_EQ(error_text<InvalidArgumentError>(
                [&] { SummarySaverHook h({.save_steps = 1, .scaffold = &scaffold, .summary_op = {f.summary_op}}); }),
            "Exactly one of scaffold or summary_op must be provided.");
  // Checked before the timer's arguments.
  EXPECT_EQ(error_text<InvalidArgumentError>([] { SummarySaverHook h({}); }),
            "Exactly one of scaffold or summary_op must be provided.");
}

TEST(SummarySaverHook, ExactlyOneOfSaveSecsOrSaveSteps) {
  Fixture f;
  EXPECT_EQ(error_text<InvalidArgumentError>([&] {
              SummarySaverHook h(
                  {.save_steps = 20, .save_secs = 10, .summary_writer = f.writer, .summary_op = {f.summary_op}});
            }),
            "Can not provide both every_secs and every_steps.");
  EXPECT_EQ(error_text<InvalidArgumentError>(
                [&] { SummarySaverHook h({.summary_writer = f.writer, .summary_op = {f.summary_op}}); }),
            "Either every_secs or every_steps should be provided.");
}

TEST(SummarySaverHook, NeedsAGlobalStep) {
  Graph g;
  Scope root(g);
  SummarySaverHook hook({.save_steps = 1, .summary_op = {scalar(root, "x", constant(root, 1.0f))}});
  EXPECT_EQ(error_text<FailedPreconditionError>([&] { hook.begin(g); }),
            "Global step should be created to use SummarySaverHook.");
}

TEST(SummarySaverHook, SaveSteps) {
  Fixture f;
  SummarySaverHook hook({.save_steps = 8, .summary_writer = f.writer, .summary_op = {f.summary_op}});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 30; ++i) mon.run(f.train_op);
  hook.end(sess);  // flushes: the events are on disk without writer->flush()
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}}},
                                      {9, {{"my_summary", 2.0f}}},
                                      {17, {{"my_summary", 3.0f}}},
                                      {25, {{"my_summary", 4.0f}}}}));
  // The summary op ran only on those four runs.
  EXPECT_EQ(f.var_value(sess), 4.0f);
  // The first run wrote SessionLog START at its global step, before its summary.
  std::vector<Event> events = f.events();
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(events[1].session_log);
  EXPECT_EQ(events[1].session_log->status, SessionLog::kStart);
  EXPECT_EQ(events[1].step, 1);
  int starts = 0;
  for (const Event& e : events) starts += e.session_log.has_value();
  EXPECT_EQ(starts, 1);
}

TEST(SummarySaverHook, MultipleSummaries) {
  Fixture f;
  SummarySaverHook hook({.save_steps = 8, .summary_writer = f.writer, .summary_op = {f.summary_op, f.summary_op2}});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 10; ++i) mon.run(f.train_op);
  hook.end(sess);
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}, {"my_summary2", 2.0f}}},
                                      {9, {{"my_summary", 2.0f}, {"my_summary2", 4.0f}}}}));
}

TEST(SummarySaverHook, SaveSecsSavingOnceEveryStep) {
  Fixture f;
  SummarySaverHook hook(
      {.save_secs = 0.5, .summary_writer = f.writer, .summary_op = {f.summary_op}, .clock = &f.clock});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 4; ++i) {
    mon.run(f.train_op);
    f.clock.advance(0.5);
  }
  hook.end(sess);
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}}},
                                      {2, {{"my_summary", 2.0f}}},
                                      {3, {{"my_summary", 3.0f}}},
                                      {4, {{"my_summary", 4.0f}}}}));
}

TEST(SummarySaverHook, SaveSecsSavingOnceEveryThreeSteps) {
  Fixture f;
  SummarySaverHook hook(
      {.save_secs = 9.0, .summary_writer = f.writer, .summary_op = {f.summary_op}, .clock = &f.clock});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 8; ++i) {
    mon.run(f.train_op);
    f.clock.advance(3.1);
  }
  hook.end(sess);
  // 24.8 seconds pass (3.1 * 8); it saves every 9 seconds starting from the first run.
  EXPECT_EQ(f.summaries(),
            (Summaries{{1, {{"my_summary", 1.0f}}}, {4, {{"my_summary", 2.0f}}}, {7, {{"my_summary", 3.0f}}}}));
}

TEST(SummarySaverHook, WithoutAWriterItAsksForTheSummariesOnEveryRunAndWritesNothing) {
  Fixture f;
  SummarySaverHook hook({.save_steps = 8, .summary_op = {f.summary_op}});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 5; ++i) mon.run(f.train_op);
  hook.end(sess);
  // after_run returns at once, next_step stays unset, so every run evaluated the summary op.
  EXPECT_EQ(f.var_value(sess), 5.0f);
  EXPECT_EQ(f.events().size(), 1u);  // only the fixture writer's version event
}

TEST(SummarySaverHook, OutputDirUsesTheCachedWriterAndEndFlushesIt) {
  Fixture f;
  const std::string dir = f.dir / "summaries";
  SummarySaverHook hook({.save_steps = 2, .output_dir = dir, .summary_op = {f.summary_op}});
  hook.begin(f.g);
  Session sess(f.g);
  sess.run(f.init);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 4; ++i) mon.run(f.train_op);
  hook.end(sess);
  EXPECT_EQ(summaries_by_step(read_dir_events(dir)),
            (Summaries{{1, {{"my_summary", 1.0f}}}, {3, {{"my_summary", 2.0f}}}}));
  EXPECT_EQ(SummaryWriterCache::get(dir)->path(), list_event_files(dir).at(0));
  SummaryWriterCache::clear();
}

TEST(SummarySaverHook, APlainBeginFindsTheGlobalStepWhenTheSessionIsCreated) {
  Fixture f;
  SummarySaverHook hook({.save_steps = 8, .summary_writer = f.writer, .summary_op = {f.summary_op}});
  hook.begin();
  Session sess(f.g);
  sess.run(f.init);
  Coordinator coord;
  hook.after_create_session(sess, coord);
  HookedSession mon(sess, {&hook});
  for (int i = 0; i < 10; ++i) mon.run(f.train_op);
  hook.end(sess);
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}}}, {9, {{"my_summary", 2.0f}}}}));
}

TEST(SummarySaverHook, ANewSessionStartsAgainWithSessionLogStart) {
  Fixture f;
  SummarySaverHook hook({.save_steps = 100, .summary_writer = f.writer, .summary_op = {f.summary_op}});
  Session sess(f.g);
  sess.run(f.init);
  for (int session = 0; session < 2; ++session) {
    hook.begin(f.g);
    HookedSession mon(sess, {&hook});
    for (int i = 0; i < 3; ++i) mon.run(f.train_op);
    hook.end(sess);
  }
  std::vector<int64_t> starts;
  for (const Event& e : f.events())
    if (e.session_log) starts.push_back(e.step);
  EXPECT_THAT(starts, ElementsAre(1, 4));
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}}}, {4, {{"my_summary", 2.0f}}}}));
}

TEST(SummarySaverHook, AScaffoldsDefaultSummaryOpMergesAllSummaries) {
  // Under a SingularMonitoredSession, as a MonitoredTrainingSession would set it up.
  Fixture f;
  Scaffold scaffold(f.g);
  SummarySaverHook hook({.save_steps = 8, .summary_writer = f.writer, .scaffold = &scaffold});
  SingularMonitoredSession sess(f.g, {.hooks = {&hook}, .scaffold = &scaffold});
  for (int i = 0; i < 10; ++i) sess.run(f.train_op);
  sess.close();
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary", 1.0f}, {"my_summary2", 2.0f}}},
                                      {9, {{"my_summary", 2.0f}, {"my_summary2", 4.0f}}}}));
  ASSERT_TRUE(scaffold.summary_op());
  EXPECT_EQ(scaffold.summary_op().node->op_type(), "MergeSummary");
}

TEST(SummarySaverHook, AScaffoldsOwnSummaryOpIsUsed) {
  Fixture f;
  Scaffold scaffold(f.g, {.summary_op = f.summary_op2});
  SummarySaverHook hook({.save_steps = 8, .summary_writer = f.writer, .scaffold = &scaffold});
  SingularMonitoredSession sess(f.g, {.hooks = {&hook}, .scaffold = &scaffold});
  for (int i = 0; i < 10; ++i) sess.run(f.train_op);
  sess.close();
  EXPECT_EQ(f.summaries(), (Summaries{{1, {{"my_summary2", 2.0f}}}, {9, {{"my_summary2", 4.0f}}}}));
}

TEST(SummarySaverHook, AScaffoldWithoutSummariesOnlyLogsTheStart) {
  Graph g;
  Scope root(g);
  get_or_create_global_step(root);
  Node* train_op = testing::increment_global_step(g, 1);
  TempDir dir;
  auto writer = std::make_shared<SummaryWriter>(dir.path());
  Scaffold scaffold(g);
  SummarySaverHook hook({.save_steps = 2, .summary_writer = writer, .scaffold = &scaffold});
  SingularMonitoredSession sess(g, {.hooks = {&hook}, .scaffold = &scaffold});
  for (int i = 0; i < 5; ++i) sess.run(train_op);
  sess.close();
  EXPECT_FALSE(scaffold.summary_op());
  std::vector<Event> events = read_dir_events(dir.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].session_log->status, SessionLog::kStart);
  EXPECT_EQ(events[1].step, 1);
}

// ----- End to end --------------------------------------------------------------------------

// Bit-at-a-time CRC-32C, independent of the library's table-driven one.
uint32_t reference_crc32c(const std::string& s, size_t from, size_t n) {
  uint32_t c = 0xFFFFFFFF;
  for (size_t i = from; i < from + n; ++i) {
    c ^= static_cast<unsigned char>(s[i]);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78 : c >> 1;
  }
  c = ~c;
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

TEST(SummaryEndToEnd, TrainingLossSummariesReadBackAsTheSessionComputedThem) {
  // y = 3x - 1 fitted by gradient descent; the loss summary is written every step.
  Graph g;
  Scope root(g);
  Output x = constant(root, Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{8, 1}));
  Output y = constant(root, Tensor::from_vector<float>({-1, 2, 5, 8, 11, 14, 17, 20}, Shape{8, 1}));
  Variable w = make_variable(root, "w", constant(root, Tensor::from_vector<float>({0.5f}, Shape{1, 1})));
  Variable b = make_variable(root, "b", constant(root, 0.0f));
  Output pred = add(root, matmul(root, x, w.value()), b.value());
  Output loss = reduce_mean(root, square(root, sub(root, pred, y)));
  Variable step = get_or_create_global_step(root);
  Node* train = GradientDescentOptimizer(0.01).minimize(root.with_name_scope("train"), loss, step);
  scalar(root, "loss", loss);

  TempDir dir;
  FakeClock clock(kMockStartTime);
  Scaffold scaffold(g);  // its summary_op: the merge of every summary
  SummarySaverHook saver({.save_steps = 1, .output_dir = dir.path(), .scaffold = &scaffold});
  std::vector<std::string> log_lines;
  StepCounterHook counter(
      {.every_n_steps = 5, .output_dir = dir.path(), .clock = &clock, .log = {.info = [&](const std::string& s) {
                                                                        log_lines.push_back(s);
                                                                      }}});
  SingularMonitoredSession sess(g, {.hooks = {&saver, &counter}, .scaffold = &scaffold});
  std::map<int64_t, float> computed;  // global step after the run -> the loss that run computed
  for (int i = 0; i < 12; ++i) {
    clock.advance(0.1);
    FetchResult r = sess.run(Fetch::list({loss, train}));
    computed[sess.raw_session().run(step.value()).scalar_value<int64_t>()] = r[0].tensor().scalar_value<float>();
  }
  sess.close();                                                    // the hooks' end() flushes the shared writer
  EXPECT_LT(computed.rbegin()->second, computed.begin()->second);  // it trained

  // Every record's framing and both checksums, checked here with an independent CRC.
  const std::vector<std::string> files = list_event_files(dir.path());
  ASSERT_EQ(files.size(), 1u);  // one cached writer shared by both hooks
  std::ifstream in(files[0], std::ios::binary);
  const std::string raw{std::istreambuf_iterator<char>(in), {}};
  size_t at = 0;
  int records = 0;
  while (at < raw.size()) {
    ASSERT_LE(at + 12, raw.size());
    const uint64_t n = le(raw, at, 8);
    EXPECT_EQ(le(raw, at + 8, 4), reference_crc32c(raw, at, 8)) << "length crc of record " << records;
    ASSERT_LE(at + 12 + n + 4, raw.size());
    EXPECT_EQ(le(raw, at + 12 + n, 4), reference_crc32c(raw, at + 12, n)) << "data crc of record " << records;
    at += 12 + n + 4;
    ++records;
  }
  EXPECT_EQ(at, raw.size());

  // The values are exactly what the session computed, at the steps it computed them.
  std::vector<Event> events = read_events(files[0]);
  EXPECT_EQ(static_cast<int>(events.size()), records);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::map<int64_t, float> written, rates;
  for (const Event& e : events) {
    auto s = e.scalars();
    if (s.count("loss")) written[e.step] = s.at("loss");
    if (s.count("global_step/sec")) rates[e.step] = s.at("global_step/sec");
  }
  EXPECT_EQ(written, computed);
  EXPECT_EQ(rates.size(), 2u);                                             // steps 6 and 11
  for (const auto& [s, rate] : rates) EXPECT_NEAR(rate, 10.0, 1e-3) << s;  // 5 steps / 0.5 s
  EXPECT_EQ(log_lines.size(), 2u);
  SummaryWriterCache::clear();
}

}  // namespace
}  // namespace stepscope
