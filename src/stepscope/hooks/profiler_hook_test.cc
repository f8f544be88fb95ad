// Ports ProfilerHookTest of basic_session_run_hooks_test.py (TF 1.13+, reference §2.1, §6.1),
// then what stepscope adds: the files' contents, gzip, max_files_to_keep, windows, write
// failures, MonitoredTrainingSession and the Estimator loop, and the cost of a quiet run.
#include "stepscope/hooks/profiler_hook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "stepscope/base/file_io.h"
#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/estimator.h"
#include "stepscope/hooks/hook_test_util.h"
#include "stepscope/hooks/monitored_session.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/memory_kinds.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/train/checkpoint.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

// Counts the heap allocations of the thread that asks (AfterRunAllocatesNothingWhenQuiet).
// Not under AddressSanitizer, which owns operator new.
#if defined(__SANITIZE_ADDRESS__)
#define STEPSCOPE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STEPSCOPE_UNDER_ASAN 1
#endif
#endif
#if !defined(STEPSCOPE_UNDER_ASAN)
#define STEPSCOPE_COUNT_ALLOCATIONS 1
namespace {
thread_local bool g_counting = false;
thread_local long g_allocations = 0;
}  // namespace
void* operator new(std::size_t size) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
#endif

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::read_dir_events;
using testing::TempDir;

using testing::error_text;

std::vector<std::string> files_matching(const std::string& dir, const std::string& pattern) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  const std::regex re(pattern);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, re)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The global step of the newest checkpoint in `dir` (-1 without one).
int64_t latest_checkpoint_step(const std::string& dir) {
  std::optional<std::string> latest = latest_checkpoint(dir);
  if (!latest) return -1;
  return std::stoll(latest->substr(latest->rfind('-') + 1));
}

// The tags of the TaggedRunMetadata events in `dir`'s event files.
std::vector<std::string> run_metadata_tags(const std::string& dir) {
  SummaryWriterCache::get(dir)->flush();
  std::vector<std::string> out;
  for (const Event& e : read_dir_events(dir))
    if (e.tagged_run_metadata) out.push_back(e.tagged_run_metadata->tag);
  return out;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Records the trace level every run used (the merged options hooks see).
class TraceLevelSpy : public SessionRunHook {
 public:
  void after_run(SessionRunContext&, const SessionRunValues& values) override {
    levels.push_back(values.options.trace_level);
  }
  std::vector<TraceLevel> levels;
};

// The reference's setUp: a global step and a train op that increments it (after the hooks' read
// of it, as _increment_global_step does), a small computation so traces have something in them.
class ProfilerHookTest : public ::testing::Test {
 protected:
  ProfilerHookTest() {
    get_or_create_global_step(root);
    Output x = constant(root.with_op_name("x"), Tensor::from_vector<float>(std::vector<float>(16, 0.5f)));
    Output y = reduce_sum(root, square(root, x));
    train_op = group(root, {testing::increment_global_step(g, 1), y.node});
  }
  ~ProfilerHookTest() override { SummaryWriterCache::clear(); }

  int timeline_files() const { return static_cast<int>(files_matching(dir.path(), R"(timeline-.*\.json)").size()); }
  ProfilerHookOptions options(ProfilerHookOptions o) {
    o.output_dir = dir.path();
    o.log = log;
    return o;
  }
  std::vector<std::string> tags() { return run_metadata_tags(dir.path()); }

  Graph g;
  Scope root{g};
  Node* train_op = nullptr;
  TempDir dir;
  std::vector<std::string> info, warnings;
  HookLog log{.info = [this](const std::string& s) { info.push_back(s); },
              .warning = [this](const std::string& s) { warnings.push_back(s); },
              .error = [](const std::string&) {}};
};

// ----- The reference's tests (§6.1) -----------------------------------------------------------

TEST_F(ProfilerHookTest, RaiseInBothSecsAndSteps) {
  EXPECT_EQ(error_text<InvalidArgumentError>([&] { ProfilerHook(options({.save_steps = 20, .save_secs = 10})); }),
            "Can not provide both every_secs and every_steps.");
}

TEST_F(ProfilerHookTest, RaiseInNoneSecsAndSteps) {
  EXPECT_EQ(error_text<InvalidArgumentError>([&] { ProfilerHook(options({})); }),
            "Either every_secs or every_steps should be provided.");
  // The summary writer was made before the arguments were checked (§9.3).
  EXPECT_EQ(files_matching(dir.path(), R"(events\.out\.tfevents\..*)").size(), 1u);
}

TEST_F(ProfilerHookTest, SaveSecsDoesNotSaveInFirstStep) {
  ProfilerHook hook(options({.save_secs = 2}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  sess.run(train_op);
  EXPECT_EQ(timeline_files(), 0);
}

TEST_F(ProfilerHookTest, SaveSecsSavesPeriodically) {
  FakeClock clock(1484695987.209386);
  const double t = clock.now_secs();
  ProfilerHook hook(options({.save_secs = 2, .clock = &clock}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  sess.run(train_op);  // not saved
  EXPECT_EQ(timeline_files(), 0);
  clock.set(t + 2.5);
  sess.run(train_op);  // saved
  EXPECT_EQ(timeline_files(), 1);
  clock.set(t + 2.6);
  sess.run(train_op);  // not saved
  EXPECT_EQ(timeline_files(), 1);
  clock.set(t + 4.4);
  sess.run(train_op);  // not saved: 4.4 < 2.5 + 2
  EXPECT_EQ(timeline_files(), 1);
  clock.set(t + 4.5);
  sess.run(train_op);  // saved
  EXPECT_EQ(timeline_files(), 2);
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-2.json", "timeline-5.json"));
}

// The hook traces steps: the session makes a plan's first traced step's memory ahead.
TEST_F(ProfilerHookTest, TellsTheSessionThatStepsWillBeTraced) {
  ProfilerHook hook(options({.save_steps = 1}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  EXPECT_TRUE(sess.raw_session().expects_traced_steps());
  SingularMonitoredSession without(g);
  EXPECT_FALSE(without.raw_session().expects_traced_steps());
}

TEST_F(ProfilerHookTest, SaveStepsDoesNotSaveInFirstStep) {
  ProfilerHook hook(options({.save_steps = 1}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  sess.run(train_op);
  EXPECT_EQ(timeline_files(), 0);
}

TEST_F(ProfilerHookTest, SaveStepsSavesPeriodically) {
  ProfilerHook hook(options({.save_steps = 2}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  EXPECT_EQ(timeline_files(), 0);
  std::vector<int> counts;
  for (int i = 0; i < 5; ++i) {
    sess.run(train_op);
    counts.push_back(timeline_files());
  }
  EXPECT_THAT(counts, ElementsAre(0, 1, 1, 2, 2));
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-2.json", "timeline-4.json"));
}

TEST_F(ProfilerHookTest, RunMetadataSaves) {
  ProfilerHook hook(options({.save_steps = 1}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  sess.run(train_op);  // not saved
  sess.run(train_op);  // saved
  EXPECT_THAT(tags(), ElementsAre("step_2"));
}

// ----- The rest of §2.1 -----------------------------------------------------------------------

TEST(ProfilerHook, RequiresAGlobalStep) {
  TempDir dir;
  Graph g;
  ProfilerHook hook({.save_steps = 1, .output_dir = dir.path()});
  EXPECT_EQ(error_text<FailedPreconditionError>([&] { hook.begin(g); }),
            "Global step should be created to use ProfilerHook.");
  SummaryWriterCache::clear();
}

TEST_F(ProfilerHookTest, FullTraceOnlyOnRunsThatSaveAndTheLogLine) {
  ProfilerHook hook(options({.save_steps = 2}));
  TraceLevelSpy spy;
  SingularMonitoredSession sess(g, {.hooks = {&hook, &spy}});
  for (int i = 0; i < 5; ++i) sess.run(train_op);
  const auto no = TraceLevel::kNoTrace, full = TraceLevel::kFullTrace;
  EXPECT_THAT(spy.levels, ElementsAre(no, full, no, full, no));
  EXPECT_THAT(info,
              ElementsAre("Saving timeline for 2 into '" + (fs::path(dir.path()) / "timeline-2.json").string() + "'.",
                          "Saving timeline for 4 into '" + (fs::path(dir.path()) / "timeline-4.json").string() + "'."));
  EXPECT_TRUE(warnings.empty());
}

// A hook re-used by a second session: begin() does not reset the timer, and the new session's
// first run primes it again with its own step, as in the reference.
TEST_F(ProfilerHookTest, AHookReusedByASecondSession) {
  ProfilerHook hook(options({.save_steps = 3}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 4; ++i) sess.run(train_op);  // primes at 0, saves at 3
  }
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-3.json"));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});  // the global step starts at 0 again
  for (int i = 0; i < 6; ++i) sess.run(train_op);
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-3.json", "timeline-6.json"));
  EXPECT_THAT(info, ElementsAre(HasSubstr("for 3 into"), HasSubstr("for 3 into"), HasSubstr("for 6 into")));
  // The event file already has "step_3": TensorFlow raises there; here it is a warning.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("The provided tag was already used"));
}

// ----- The files ------------------------------------------------------------------------------

// Closing the session puts the run metadata summaries on disk (TensorBoard sees them at once),
// not the cached writer's close at exit, when a temporary directory may be gone.
TEST_F(ProfilerHookTest, ClosingTheSessionFlushesTheSummaries) {
  {
    ProfilerHook hook(options({.save_steps = 1}));
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    sess.run(train_op);
    sess.run(train_op);
    sess.close();
  }
  std::vector<std::string> on_disk;
  for (const Event& e : read_dir_events(dir.path()))
    if (e.tagged_run_metadata) on_disk.push_back(e.tagged_run_metadata->tag);
  EXPECT_THAT(on_disk, ElementsAre("step_2"));
}

TEST_F(ProfilerHookTest, FilesParseAndValidate) {
  for (bool show_memory : {false, true}) {
    SCOPED_TRACE(show_memory);
    TempDir out;
    ProfilerHook hook({.save_steps = 1, .output_dir = out.path(), .show_memory = show_memory, .log = log});
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    sess.run(train_op);
    sess.run(train_op);
    const std::string trace = slurp(fs::path(out.path()) / "timeline-2.json");
    auto json = nlohmann::json::parse(trace);
    ASSERT_TRUE(json.contains("traceEvents"));
    std::set<std::string> names;
    for (const auto& e : json["traceEvents"])
      if (e["ph"] == "X") names.insert(e["args"]["name"].get<std::string>());
    EXPECT_TRUE(names.count("x")) << trace.substr(0, 2000);
    EXPECT_TRUE(names.count("global_step/AssignAdd")) << trace.substr(0, 2000);
    const auto problems = validate_chrome_trace(trace);
    for (const auto& p : problems) ADD_FAILURE() << p.rule << ": " << p.message;

    RunMetadata md = load_run_metadata(fs::path(out.path()) / "run_metadata-2.pb");
    ASSERT_FALSE(md.step_stats.empty());
    size_t nodes = 0;
    for (const auto& d : md.step_stats.dev_stats()) nodes += d.node_stats.size();
    EXPECT_EQ(nodes, names.size());
  }
}

// Every traced step goes into a tfprof Profiler, saved after each trace; a hook re-used with a
// new graph starts a new profile.
TEST_F(ProfilerHookTest, KeepsATfprofProfile) {
  ProfilerHook hook(options({.save_steps = 2}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 3; ++i) sess.run(train_op);
    EXPECT_THAT(Profiler::load(fs::path(dir.path()) / "profile").steps(), ElementsAre(2));
    for (int i = 0; i < 2; ++i) sess.run(train_op);
  }
  ASSERT_NE(hook.profiler(), nullptr);
  EXPECT_THAT(hook.profiler()->steps(), ElementsAre(2, 4));
  Profiler loaded = Profiler::load(hook.profile_path());
  EXPECT_THAT(loaded.steps(), ElementsAre(2, 4));
  auto ops = loaded.profile_operations(
      ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory()).with_step(4).with_empty_output().build());
  EXPECT_THAT(ops.text(), HasSubstr("AssignAdd"));

  Graph other;
  get_or_create_global_step(Scope(other));
  Node* increment = testing::increment_global_step(other, 10);
  {
    SingularMonitoredSession sess(other, {.hooks = {&hook}});
    for (int i = 0; i < 2; ++i) sess.run(increment);  // primes at 0, fires for the predicted 2: step 20
  }
  EXPECT_THAT(Profiler::load(hook.profile_path()).steps(), ElementsAre(20));
  EXPECT_TRUE(warnings.empty());

  ProfilerHook without(options({.save_steps = 2, .save_profile = false}));
  without.begin(g);
  EXPECT_EQ(without.profiler(), nullptr);
}

// Past 10,000 records the Profiler works a step's memory by kind out on a thread of its own,
// beside its model taking the step in (ThreadSanitizer runs this test).
TEST_F(ProfilerHookTest, ABigStepGoesInTheProfileWithItsMemoryByKind) {
  Output one = constant(root.with_op_name("one"), Tensor::from_vector<float>({1, 1}));
  Output chain = one;
  const Scope links = root.with_name_scope("chain");
  for (int i = 0; i < 10000; ++i) chain = add(links, chain, one);
  Node* step_and_chain = group(root, {train_op, chain.node});
  ProfilerHook hook(options({.save_steps = 2}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 3; ++i) sess.run(step_and_chain);
  }
  ASSERT_NE(hook.profiler(), nullptr);
  ASSERT_THAT(hook.profiler()->steps(), ElementsAre(2));
  const std::optional<MemoryByKind> memory = hook.profiler()->memory_by_kind(2);
  ASSERT_TRUE(memory.has_value());
  EXPECT_GT(memory->of(MemoryKind::kActivations), 0);
  int64_t sum = 0;
  for (int64_t bytes : memory->bytes) sum += bytes;
  EXPECT_EQ(sum, memory->peak_bytes);
  EXPECT_TRUE(warnings.empty());
}

// Every run's step timing goes in the profile, traced or not, numbered by the global step; the
// runs after the last trace are saved at the end.
TEST_F(ProfilerHookTest, TheProfileHasEveryRunsStepTiming) {
  ProfilerHook hook(options({.save_steps = 2, .record_step_timing = true}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 5; ++i) sess.run(train_op);  // traces step 2 and 4
    // Saved with the trace of step 4: the runs up to it.
    const StepTimings saved = Profiler::load(hook.profile_path()).step_timings();
    ASSERT_EQ(saved.size(), 4u);
    EXPECT_EQ(saved.records().back().step, 4);
  }
  const std::vector<StepTimingRecord> all = Profiler::load(hook.profile_path()).step_timings().records();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_GT(all[i].wall_ns, 0) << "step " << all[i].step;
    EXPECT_GT(all[i].busy_ns, 0);
    EXPECT_GE(all[i].idle_ns, 0);
    EXPECT_GE(all[i].hooks_ns, 0);
  }
  EXPECT_GT(all[3].hooks_ns, 0);  // ProfilerHook's own work before step 4 counts

  ProfilerHook off(options({.save_steps = 2}));  // the default: off
  {
    SingularMonitoredSession sess(g, {.hooks = {&off}});
    for (int i = 0; i < 3; ++i) sess.run(train_op);
  }
  EXPECT_TRUE(Profiler::load(off.profile_path()).step_timings().empty());
}

// Issue 12: the profile kept (and rewrote) every traced step; now the newest profile_max_steps,
// the older ones folded into its averages.
TEST_F(ProfilerHookTest, TheProfileKeepsAtMostProfileMaxSteps) {
  ProfilerHook hook(options({.save_steps = 1, .profile_max_steps = 2}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 8; ++i) sess.run(train_op);  // traces 2..8
  }
  ASSERT_NE(hook.profiler(), nullptr);
  EXPECT_THAT(hook.profiler()->steps(), ElementsAre(7, 8));
  Profiler loaded = Profiler::load(hook.profile_path());
  EXPECT_THAT(loaded.steps(), ElementsAre(7, 8));
  // The averages cover all seven traced steps: AssignAdd ran in each.
  int assign_adds = 0;
  for (const auto& node : loaded.model().nodes) {
    if (node.op != "AssignAdd") continue;
    ++assign_adds;
    EXPECT_EQ(node.steps_run, 7) << node.name;
  }
  EXPECT_EQ(assign_adds, 1);
  EXPECT_TRUE(warnings.empty());
}

// One gzip member that gunzips to a valid trace.
TEST_F(ProfilerHookTest, GzipWritesOneMember) {
  ProfilerHook hook(options({.save_steps = 1, .gzip = true}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  sess.run(train_op);
  sess.run(train_op);
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*)"), ElementsAre("timeline-2.json.gz"));
  EXPECT_EQ(info.back(),
            "Saving timeline for 2 into '" + (fs::path(dir.path()) / "timeline-2.json.gz").string() + "'.");
  const std::string gz = slurp(fs::path(dir.path()) / "timeline-2.json.gz");
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);

  // Inflate one member and check it ends exactly at the end of the file.
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  std::string json(1 << 16, '\0');
  size_t produced = 0;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (produced == json.size()) json.resize(json.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(json.data() + produced);
    z.avail_out = static_cast<uInt>(json.size() - produced);
    rc = inflate(&z, Z_NO_FLUSH);
    produced = json.size() - z.avail_out;
  }
  EXPECT_EQ(rc, Z_STREAM_END);
  EXPECT_EQ(z.avail_in, 0u) << "bytes after the first gzip member";
  inflateEnd(&z);
  json.resize(produced);
  EXPECT_EQ(json, read_file(fs::path(dir.path()) / "timeline-2.json.gz"));
  EXPECT_TRUE(validate_chrome_trace(json).empty());
}

TEST_F(ProfilerHookTest, MaxFilesToKeep) {
  ProfilerHook hook(options({.save_steps = 1, .max_files_to_keep = 2}));
  SingularMonitoredSession sess(g, {.hooks = {&hook}});
  for (int i = 0; i < 5; ++i) sess.run(train_op);  // traces 2, 3, 4, 5
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-4.json", "timeline-5.json"));
  EXPECT_THAT(files_matching(dir.path(), R"(run_metadata-.*\.pb)"),
              ElementsAre("run_metadata-4.pb", "run_metadata-5.pb"));
  // Files it did not write are not its to delete.
  std::ofstream(fs::path(dir.path()) / "timeline-1.json") << "{}";
  sess.run(train_op);
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"),
              ElementsAre("timeline-1.json", "timeline-5.json", "timeline-6.json"));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(ProfilerHookTest, MaxFilesToKeepAndWindowStepsAreValidated) {
  EXPECT_EQ(error_text<InvalidArgumentError>([&] { ProfilerHook(options({.save_steps = 1, .window_steps = 0})); }),
            "window_steps must be at least 1, given: 0");
  EXPECT_EQ(
      error_text<InvalidArgumentError>([&] { ProfilerHook(options({.save_steps = 1, .max_files_to_keep = -1})); }),
      "max_files_to_keep must be >= 0, given: -1");
}

// Issue 12: save_steps <= 0 traced every step (or, with NaN seconds, never) without a word.
TEST_F(ProfilerHookTest, SaveStepsAndSaveSecsAreValidated) {
  for (int64_t steps : {0, -5})
    EXPECT_EQ(error_text<InvalidArgumentError>([&] { ProfilerHook(options({.save_steps = steps})); }),
              "save_steps must be at least 1, given: " + std::to_string(steps));
  EXPECT_EQ(error_text<InvalidArgumentError>([&] { ProfilerHook(options({.save_secs = -1.5})); }),
            "save_secs must be a finite number of seconds >= 0, given: -1.5");
  EXPECT_EQ(error_text<InvalidArgumentError>(
                [&] { ProfilerHook(options({.save_secs = std::numeric_limits<double>::quiet_NaN()})); }),
            "save_secs must be a finite number of seconds >= 0, given: nan");
  EXPECT_EQ(error_text<InvalidArgumentError>(
                [&] { ProfilerHook(options({.save_secs = std::numeric_limits<double>::infinity()})); }),
            "save_secs must be a finite number of seconds >= 0, given: inf");
  ProfilerHook every_run(options({.save_secs = 0}));  // zero seconds: every run after the first
  ProfilerHook every_step(options({.save_steps = 1}));
}

// window_steps = 3: the run the timer fires on and the two after it, in one trace named after
// the last; each gets FULL_TRACE and its own run_metadata file and tag.
TEST_F(ProfilerHookTest, WindowOfConsecutiveSteps) {
  ProfilerHook hook(options({.save_steps = 5, .window_steps = 3}));
  TraceLevelSpy spy;
  SingularMonitoredSession sess(g, {.hooks = {&hook, &spy}});
  for (int i = 0; i < 8; ++i) sess.run(train_op);
  const auto no = TraceLevel::kNoTrace, full = TraceLevel::kFullTrace;
  // Primed at 0; fires for the predicted step 5 (run 5), traces runs 5, 6, 7.
  EXPECT_THAT(spy.levels, ElementsAre(no, no, no, no, full, full, full, no));
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-7.json"));
  EXPECT_THAT(files_matching(dir.path(), R"(run_metadata-.*\.pb)"),
              ElementsAre("run_metadata-5.pb", "run_metadata-6.pb", "run_metadata-7.pb"));
  EXPECT_THAT(tags(), ElementsAre("step_5", "step_6", "step_7"));
  EXPECT_THAT(info, ElementsAre(HasSubstr("Saving timeline for 7 into")));

  const std::string trace = slurp(fs::path(dir.path()) / "timeline-7.json");
  EXPECT_TRUE(validate_chrome_trace(trace).empty());
  int assign_adds = 0;
  const auto json = nlohmann::json::parse(trace);
  for (const auto& e : json["traceEvents"])
    if (e["ph"] == "X" && e["args"].value("name", "") == "global_step/AssignAdd") ++assign_adds;
  EXPECT_EQ(assign_adds, 3);

  // The period counts from the start of the window: the next fires for step 10.
  for (int i = 0; i < 4; ++i) sess.run(train_op);
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-12.json", "timeline-7.json"));
}

// A window the session ends in the middle of is written by end().
TEST_F(ProfilerHookTest, AWindowCutShortIsWrittenAtTheEnd) {
  ProfilerHook hook(options({.save_steps = 2, .window_steps = 4}));
  {
    SingularMonitoredSession sess(g, {.hooks = {&hook}});
    for (int i = 0; i < 3; ++i) sess.run(train_op);  // traces 2, 3
    EXPECT_EQ(timeline_files(), 0);
  }
  EXPECT_THAT(files_matching(dir.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-3.json"));
  EXPECT_TRUE(validate_chrome_trace(slurp(fs::path(dir.path()) / "timeline-3.json")).empty());
}

// An output_dir that cannot be written: warnings naming the paths, no exception out of the run,
// training goes on and the other hooks' files are intact.
TEST_F(ProfilerHookTest, UnwritableOutputDirIsAWarning) {
  TempDir ckpt;
  fs::path blocked = fs::path(dir.path()) / "blocked";
  std::ofstream(blocked) << "a file, not a directory";
  const std::string out = (blocked / "profiles").string();

  ProfilerHook hook({.save_steps = 1, .output_dir = out, .log = log});  // no event file either
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("no summary writer for '" + out + "'"));
  warnings.clear();

  CheckpointSaverHook saver({.checkpoint_dir = ckpt.path(), .save_steps = 1, .log = log});
  SingularMonitoredSession sess(g, {.hooks = {&hook, &saver}});
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(sess.run(train_op));
  EXPECT_EQ(sess.raw_session().run(get_global_step(g).value()).scalar_value<int64_t>(), 3);
  sess.close();

  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings[0],
              HasSubstr("could not write the timeline of step 2: cannot write '" + out + "/timeline-2.json'"));
  EXPECT_THAT(warnings, ::testing::Contains(HasSubstr("run_metadata-3.pb")));
  EXPECT_TRUE(latest_checkpoint_step(ckpt.path()) == 3);
}

// The directory goes away after the hook was made (a full disk behaves the same: the write
// throws): the other hooks' files of that step are still written.
TEST_F(ProfilerHookTest, AFailedWriteLosesNothingElse) {
  TempDir ckpt;
  fs::path out = fs::path(dir.path()) / "profiles";
  ProfilerHook hook({.save_steps = 1, .output_dir = out.string(), .log = log});
  CheckpointSaverHook saver({.checkpoint_dir = ckpt.path(), .save_steps = 1, .log = log});
  SingularMonitoredSession sess(g, {.hooks = {&hook, &saver}});
  sess.run(train_op);
  fs::remove_all(out);
  std::ofstream(out) << "in the way";
  EXPECT_NO_THROW(sess.run(train_op));
  EXPECT_THAT(warnings, ::testing::Contains(HasSubstr("'" + (out / "timeline-2.json").string() + "'")));
  EXPECT_TRUE(latest_checkpoint_step(ckpt.path()) == 2);
  fs::remove(out);
  fs::create_directories(out);
  sess.run(train_op);
  EXPECT_TRUE(fs::exists(out / "timeline-3.json"));
}

// ----- In the training loops ------------------------------------------------------------------

TEST_F(ProfilerHookTest, InsideMonitoredTrainingSession) {
  TempDir run;
  Graph graph;
  Scope s(graph);
  Output x = constant(s, Tensor::from_vector<float>(std::vector<float>(8 * 4, 0.25f), Shape{8, 4}));
  Output labels = constant(s, Tensor::from_vector<int32_t>(std::vector<int32_t>(8, 1)));
  Output logits = nn::dense(s.with_name_scope("dense"), x, 3);
  Output loss = reduce_mean(s, sparse_softmax_cross_entropy_with_logits(s, labels, logits));
  Variable step = get_or_create_global_step(s);
  Node* train = GradientDescentOptimizer(0.1).minimize(s, loss, step);

  ProfilerHook profiler({.save_steps = 4, .output_dir = run.path(), .show_memory = true, .log = log});
  StopAtStepHook stop({.last_step = 10});
  auto sess = MonitoredTrainingSession(
      graph, {.checkpoint_dir = run.path(), .hooks = {&profiler, &stop}, .log_step_count_steps = 0});
  int runs = 0;
  while (!sess.should_stop()) {
    sess.run(train);
    ++runs;
  }
  sess.close();
  EXPECT_EQ(runs, 10);
  EXPECT_THAT(files_matching(run.path(), R"(timeline-.*\.json)"), ElementsAre("timeline-4.json", "timeline-8.json"));
  for (const char* f : {"timeline-4.json", "timeline-8.json"}) {
    for (const auto& p : validate_chrome_trace(slurp(fs::path(run.path()) / f)))
      ADD_FAILURE() << f << ": " << p.message;
  }
  // The checkpoints and summaries of the session are there beside them.
  EXPECT_TRUE(latest_checkpoint_step(run.path()) == 10);
  EXPECT_THAT(run_metadata_tags(run.path()), ElementsAre("step_4", "step_8"));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(ProfilerHookTest, InsideEstimatorTrainAndEvaluate) {
  TempDir model_dir;
  const fs::path profiles = fs::path(model_dir.path()) / "profiles";
  auto input = [](const Scope&) -> Input {
    Tensor x(DType::kFloat32, Shape{32, 4});
    Tensor y(DType::kInt32, Shape{32});
    for (int i = 0; i < 32; ++i) {
      for (int j = 0; j < 4; ++j) x.flat<float>()[i * 4 + j] = static_cast<float>((i + j) % 3);
      y.flat<int32_t>()[i] = i % 2;
    }
    return Dataset::from_tensor_slices({x, y}).batch(8).repeat();
  };
  auto model = [](Output x, Output labels, ModeKeys mode, const Scope& root) {
    Output logits = nn::dense(root.with_name_scope("dense"), x, 2, nn::Activation::none, {.seed = 1});
    EstimatorSpec spec{.mode = mode};
    spec.loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, labels, logits));
    if (mode == ModeKeys::TRAIN)
      spec.train_op = GradientDescentOptimizer(0.1).minimize(root, spec.loss, get_global_step(root.graph()));
    return spec;
  };
  HookLog quiet{.info = [](const std::string&) {}, .warning = log.warning, .error = [](const std::string&) {}};
  Estimator est(model, {.model_dir = model_dir.path(), .save_checkpoints_steps = 5, .log = quiet});
  ProfilerHook profiler({.save_steps = 3, .output_dir = profiles.string(), .log = log});
  auto metrics = train_and_evaluate(est, {.input_fn = input, .max_steps = 10, .hooks = {&profiler}},
                                    {.input_fn = input, .steps = 2, .throttle_secs = 0});
  ASSERT_TRUE(metrics.has_value());
  EXPECT_EQ(metrics->at("global_step"), 10);
  // The first run of train() restores nothing (step 0), primes at 0: traces at 3, 6, 9.
  EXPECT_THAT(files_matching(profiles.string(), R"(timeline-.*\.json)"),
              ElementsAre("timeline-3.json", "timeline-6.json", "timeline-9.json"));
  for (const auto& p : validate_chrome_trace(slurp(profiles / "timeline-9.json"))) ADD_FAILURE() << p.message;
  EXPECT_TRUE(warnings.empty());
}

// ----- Cost -----------------------------------------------------------------------------------

// Runs the timer does not fire on allocate nothing in the hook (before_run and after_run).
TEST_F(ProfilerHookTest, QuietRunsAllocateNothing) {
#ifndef STEPSCOPE_COUNT_ALLOCATIONS
  GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
#else
  for (const bool timing : {false, true}) {
    ProfilerHook hook(options({.save_steps = 1000, .record_step_timing = timing}));
    hook.begin(g);
    Session session(g);
    session.run(global_variables_initializer(root));
    SessionRunContext context(SessionRunArgs{}, &session);
    RunMetadata metadata;
    SessionRunValues values{
        .results = FetchResult(Tensor::scalar<int64_t>(0)), .options = {}, .run_metadata = &metadata};
    for (int64_t step = 0; step < 100; ++step) {
      values.results = FetchResult(Tensor::scalar<int64_t>(step));
      g_allocations = 0;
      g_counting = true;
      auto args = hook.before_run(context);
      hook.after_run(context, values);
      g_counting = false;
      EXPECT_EQ(g_allocations, 0) << "step " << step << (timing ? " recording step timings" : "");
      ASSERT_TRUE(args.has_value());
      // Only the step timing is asked for (a few clock readings), never a trace.
      EXPECT_EQ(args->options.has_value(), timing);
      if (timing) {
        EXPECT_TRUE(args->options->collect_step_timing);
        EXPECT_EQ(args->options->trace_level, TraceLevel::kNoTrace);
      }
    }
    EXPECT_EQ(hook.profiler()->step_timings().size(), timing ? 100u : 0u);
    EXPECT_EQ(timeline_files(), 0);
  }
#endif
}

}  // namespace
}  // namespace stepscope
