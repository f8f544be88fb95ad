// End-to-end tests of the example programs: each runs as a user would run it (in a fresh
// directory, on the shipped data) and the text and files it produces are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "stepscope/base/file_io.h"
#include "stepscope/testing/trace_validator.h"

namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(STEPSCOPE_SOURCE_DIR) + "/data/digits.csv.gz";

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class ExampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stepscope_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Runs the example program `name` in the test's directory.
  ProgramRun run(const std::string& name, const std::string& args = "") const {
    return run_program(name, "--data '" + kData + "' " + args);
  }

  // Runs the program `name` of the build directory (an example or `stepscope`) in the test's
  // directory with `args` as they are.
  ProgramRun run_program(const std::string& name, const std::string& args) const {
    const std::string command =
        "cd '" + dir_.string() + "' && '" + STEPSCOPE_BINARY_DIR + "/" + name + "' " + args + " 2>&1";
    ProgramRun result;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return result;
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

  fs::path dir_;
};

// Lines of `text` that start with one of the lifecycle messages, in order.
std::vector<std::string> lifecycle(const std::string& text) {
  static const std::regex kLine(
      "^(== .*|Starting the session\\.|Session created\\.|Before calling session\\.run\\(\\)\\.|Done running one "
      "step\\..*|Done with the session\\.|the loop ended cleanly|error: .*)$");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, kLine))
      lines.push_back(line.rfind("Done running one step.", 0) == 0 ? "Done running one step." : line);
  }
  return lines;
}

TEST_F(ExampleTest, HookLifecycleFollowsTheDocumentedOrder) {
  const ProgramRun r = run("hook_lifecycle");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = lifecycle(r.output);

  // 1: begin, after_create_session, then before_run/after_run pairs until the hook stops the
  // loop, then end.
  ASSERT_GE(lines.size(), 6u) << r.output;
  EXPECT_EQ(lines[0], "== 1. the hook requests stop");
  EXPECT_EQ(lines[1], "Starting the session.");
  EXPECT_EQ(lines[2], "Session created.");
  size_t i = 3;
  int steps = 0;
  while (i + 1 < lines.size() && lines[i] == "Before calling session.run().") {
    EXPECT_EQ(lines[i + 1], "Done running one step.");
    i += 2;
    ++steps;
  }
  EXPECT_GT(steps, 1);
  EXPECT_NE(r.output.find("loss below 1.50: requesting stop\nDone with the session."), std::string::npos);
  EXPECT_NE(r.output.find("adding an op now fails: Graph is finalized"), std::string::npos);

  // 2: two batches: two full steps, then a before_run whose run raises OutOfRangeError, no
  // after_run, and end() still called.
  const std::string two = r.output.substr(r.output.find("== 2."), r.output.find("== 3.") - r.output.find("== 2."));
  EXPECT_EQ(lifecycle(two), (std::vector<std::string>{
                                two.substr(0, two.find('\n')),
                                "Starting the session.",
                                "Session created.",
                                "Before calling session.run().",
                                "Done running one step.",
                                "Before calling session.run().",
                                "Done running one step.",
                                "Before calling session.run().",
                                "the loop ended cleanly",
                                "Done with the session.",
                            }));

  // 3: another error: before_run, the error, and neither after_run nor end().
  const std::string three = r.output.substr(r.output.find("== 3."));
  const std::vector<std::string> third = lifecycle(three);
  ASSERT_EQ(third.size(), 5u) << three;
  EXPECT_EQ(third[3], "Before calling session.run().");
  EXPECT_EQ(third[4].rfind("error: [IteratorGetNext] IteratorGetNext: cannot feed value of dtype float32 and shape "
                           "[64,3]",
                           0),
            0u);
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(ExampleTest, DemoTrainsWithHooksAndLeavesCheckpointsAndSummaries) {
  const ProgramRun r = run("demo", "--logdir run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.output, m, std::regex("trained 720 steps in .* global step 720; test accuracy ([0-9.]+)%")))
      << r.output;
  EXPECT_GT(std::stod(m[1]), 90.0);
  EXPECT_NE(r.output.find("INFO: Saving checkpoints for 250 into run/model.ckpt."), std::string::npos);
  EXPECT_NE(r.output.find("INFO: global_step/sec: "), std::string::npos);
  EXPECT_NE(r.output.find("INFO: loss = "), std::string::npos);
  const std::vector<std::string> files = files_in(dir_ / "run");
  for (const char* expected :
       {"checkpoint", "model.ckpt-720.safetensors", "model.ckpt-500.safetensors", "model.ckpt-720.meta", "graph.pbtxt"})
    EXPECT_NE(std::find(files.begin(), files.end(), expected), files.end()) << expected;
  EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                          [](const std::string& f) { return f.rfind("events.out.tfevents.", 0) == 0; }));
  // The ProfilerHook's files: a timeline, its RunMetadata and the tfprof profile.
  for (const char* expected :
       {"timeline-200.json", "timeline-400.json", "timeline-600.json", "run_metadata-600.pb", "profile"})
    EXPECT_NE(std::find(files.begin(), files.end(), expected), files.end()) << expected;
  EXPECT_NE(r.output.find("INFO: Saving timeline for 200 into 'run/timeline-200.json'."), std::string::npos);
  // It ends with the scope view of the traced steps and the critical path of the last one.
  EXPECT_NE(r.output.find("node name | requested bytes | total execution time | accelerator execution time | cpu "
                          "execution time\n_TFProfRoot ("),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("    hidden/MatMul ("), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("step 600: Critical path: [0-9]+ of [0-9]+ ops, wall time")))
      << r.output;

  // A second run restores the last checkpoint instead of starting over.
  const ProgramRun again = run("demo", "--logdir run");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("restored from the checkpoint at step 720"), std::string::npos) << again.output;
}

// Every problem validate_chrome_trace finds in the trace file at `path`, one per line ("" when
// there is none): the file must load in chrome://tracing and Perfetto as written.
std::string trace_problems(const fs::path& path) {
  std::string problems;
  for (const stepscope::TraceProblem& p : stepscope::validate_chrome_trace(stepscope::read_file(path)))
    problems += (p.warning ? "warning " : "error ") + p.rule + ": " + p.message + "\n";
  return problems;
}

// The steps N of the files "<prefix>N<suffix>" in `dir`.
std::vector<int64_t> steps_of_files(const fs::path& dir, const std::string& prefix, const std::string& suffix) {
  std::vector<int64_t> steps;
  for (const std::string& name : files_in(dir)) {
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 && name.ends_with(suffix)) {
      const std::string number = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
        steps.push_back(std::stoll(number));
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// The global step train_and_evaluate ended at, from the story's summary line (-1 if missing).
int64_t final_step_of(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("train_and_evaluate returned after [0-9.]+ s at global step ([0-9]+)")))
    return -1;
  return std::stoll(m[1]);
}

TEST_F(ExampleTest, EstimatorStoryStopsEarlyAndLeavesValidTimelines) {
  const ProgramRun r = run("estimator_story");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The early-stopping hook, not max_steps, ended training, within a couple of thousand steps.
  EXPECT_NE(r.output.find("INFO: Start train and evaluate loop. The evaluate will happen after every checkpoint."),
            std::string::npos)
      << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex("INFO: No increase in metric \"accuracy\" for ([0-9]+) steps, which is "
                                           "greater than or equal to max steps \\(300\\) configured for early "
                                           "stopping\\.")))
      << r.output;
  EXPECT_GE(std::stoll(m[1]), 300);
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("INFO: Requesting early stopping at global step ([0-9]+)")))
      << r.output;
  const int64_t stop_step = std::stoll(m[1]);
  EXPECT_NE(r.output.find("stopped by the early-stopping hook:\n  No increase in metric \"accuracy\""),
            std::string::npos)
      << r.output;
  const int64_t final_step = final_step_of(r.output);
  EXPECT_GE(final_step, 300 + 300) << r.output;  // min_steps + max_steps_without_increase at the least
  EXPECT_LE(final_step, 2000) << r.output;
  EXPECT_LE(final_step - stop_step, 2) << r.output;  // the step fetched beside the train op, before its increment
  EXPECT_TRUE(std::regex_search(r.output, std::regex("best accuracy 0\\.9[0-9]+ at global step [0-9]+"))) << r.output;

  // A timeline every 100 steps, named after the global step after its run (the reference's rule:
  // the run from step 99 to 100 writes timeline-100.json), up to the last step trained.
  const fs::path track = dir_ / "timeline_track";
  std::vector<int64_t> expected;
  for (int64_t step = 100; step <= final_step; step += 100) expected.push_back(step);
  EXPECT_EQ(steps_of_files(track, "timeline-", ".json"), expected) << r.output;
  EXPECT_EQ(steps_of_files(track, "run_metadata-", ".pb"), expected);
  EXPECT_TRUE(fs::is_regular_file(track / "profile"));
  for (int64_t step : expected) {
    const std::string name = "timeline-" + std::to_string(step) + ".json";
    EXPECT_NE(
        r.output.find("INFO: Saving timeline for " + std::to_string(step) + " into './timeline_track/" + name + "'."),
        std::string::npos)
        << name;
    EXPECT_NE(r.output.find("  timeline_track/" + name + "  ("), std::string::npos) << name;
    EXPECT_EQ(trace_problems(track / name), "") << name;
  }
  EXPECT_NE(r.output.find("stepscope serve timeline_track"), std::string::npos);
  EXPECT_NE(r.output.find("chrome://tracing"), std::string::npos);
  EXPECT_NE(r.output.find("ui.perfetto.dev"), std::string::npos);

  // Checkpoints and evaluations went to ./model_dir.
  EXPECT_TRUE(fs::is_regular_file(dir_ / "model_dir" / "checkpoint"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "model_dir" / "eval" / "eval_metrics.txt"));
}

TEST_F(ExampleTest, StepscopeCommandLineReadsWhatTheEstimatorStoryLeft) {
  const ProgramRun story = run("estimator_story");
  ASSERT_EQ(story.exit_code, 0) << story.output;
  const std::vector<int64_t> steps = steps_of_files(dir_ / "timeline_track", "run_metadata-", ".pb");
  ASSERT_FALSE(steps.empty()) << story.output;

  const ProgramRun prof = run_program("stepscope", "prof scope --profile timeline_track/profile -max_depth 2");
  ASSERT_EQ(prof.exit_code, 0) << prof.output;
  EXPECT_NE(prof.output.find("node name | total execution time | accelerator execution time | cpu execution time\n"),
            std::string::npos)
      << prof.output;
  EXPECT_NE(prof.output.find("_TFProfRoot ("), std::string::npos) << prof.output;
  EXPECT_NE(prof.output.find("  hidden ("), std::string::npos) << prof.output;
  EXPECT_EQ(prof.output.find("hidden/MatMul ("), std::string::npos) << "deeper than -max_depth 2:\n" << prof.output;

  const std::string meta = "timeline_track/run_metadata-" + std::to_string(steps.back()) + ".pb";
  const ProgramRun timeline = run_program("stepscope", "timeline --run_meta " + meta + " -o t.json");
  ASSERT_EQ(timeline.exit_code, 0) << timeline.output;
  EXPECT_TRUE(std::regex_search(timeline.output, std::regex("^wrote t\\.json \\([0-9]+ bytes of JSON\\)\n")))
      << timeline.output;
  ASSERT_TRUE(fs::is_regular_file(dir_ / "t.json"));
  EXPECT_EQ(trace_problems(dir_ / "t.json"), "");

  const ProgramRun path = run_program("stepscope", "critical_path --run_meta " + meta);
  ASSERT_EQ(path.exit_code, 0) << path.output;
  EXPECT_NE(path.output.find("MatMul"), std::string::npos) << path.output;
}

// The text between the header line "== <title>..." and the next "\n== " (or the end).
std::string section(const std::string& output, const std::string& title) {
  const size_t start = output.find("\n== " + title);
  if (start == std::string::npos) return "";
  const size_t end = output.find("\n== ", start + 1);
  return output.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST_F(ExampleTest, ProfilerStoryShowsEveryViewAndWritesTimelines) {
  const ProgramRun r = run("profiler_story");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 0: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 40: loss "), std::string::npos) << r.output;

  // The blog's timeline output: one Chrome trace per added step (every 5th), "<file>_<step>".
  EXPECT_EQ(steps_of_files(dir_, "train_profiler.json_", ""),
            (std::vector<int64_t>{0, 5, 10, 15, 20, 25, 30, 35, 40, 45}))
      << r.output;
  for (int step = 0; step < 50; step += 5) {
    const std::string name = "train_profiler.json_" + std::to_string(step);
    EXPECT_EQ(trace_problems(dir_ / name), "") << name;
  }
  // The same view with floors the model passes: a timeline of the last traced step with its ops.
  EXPECT_EQ(trace_problems(dir_ / "train_ops.json_45"), "");
  EXPECT_NE(stepscope::read_file(dir_ / "train_ops.json_45").find("\"name\":\"MatMul\""), std::string::npos);

  const std::string scope = section(r.output, "scope view");
  EXPECT_NE(scope.find("node name | # parameters | requested bytes | total execution time | accelerator execution "
                       "time | cpu execution time\n"),
            std::string::npos)
      << scope;
  EXPECT_NE(scope.find("siamese/hidden/kernel (64x128, 8.19k/8.19k params"), std::string::npos) << scope;

  const std::string op = section(r.output, "op view");
  EXPECT_NE(op.find("\nMatMul "), std::string::npos) << op;

  const std::string code = section(r.output, "code view");
  EXPECT_TRUE(std::regex_search(code, std::regex("profiler_story\\.cc:[0-9]+"))) << code;

  const std::string graph = section(r.output, "graph view");
  EXPECT_TRUE(std::regex_search(graph, std::regex("[0-9.]+[kmb]?/[0-9.]+[kmb]? flops"))) << graph;

  EXPECT_NE(section(r.output, "advice").find("CriticalPathChecker:"), std::string::npos) << r.output;
}

// Seed 002's model: ESMM on a generated click log with a known ground truth. The early-stopping
// hook on the CTCVR AUC ends training; the AUC reached is close to the ground truth's and far
// above what the category and hour alone give (about 0.6).
TEST_F(ExampleTest, EsmmStoryLearnsTheClickLogAndStopsOnTheCtcvrAuc) {
  const ProgramRun r = run_program("esmm_story", "--examples 200000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex("best CTCVR AUC ([0-9.]+) at global step ([0-9]+) \\(ground truth's: ([0-9.]+), a gap of")))
      << r.output;
  const double auc = std::stod(m[1]);
  const double truth = std::stod(m[3]);
  EXPECT_GT(truth, 0.8) << r.output;
  EXPECT_GT(auc, 0.74) << r.output;
  EXPECT_GT(auc, truth - 0.08) << r.output;
  EXPECT_LE(auc, truth + 0.01) << "no model beats the true probabilities by more than noise\n" << r.output;
  EXPECT_NE(r.output.find("INFO: No increase in metric \"ctcvr_cvr_auc_esmm\" for "), std::string::npos) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("INFO: Requesting early stopping at global step ([0-9]+)")))
      << r.output;
  const int64_t stop_step = std::stoll(m[1]);
  EXPECT_GE(stop_step, 1000);  // min_steps 500 + 500 without increase at the least

  // A timeline every 100 steps into ./timeline_track, each a valid trace with the embedding
  // lookups and the sparse updates in it.
  const fs::path track = dir_ / "timeline_track";
  std::vector<int64_t> expected;
  for (int64_t step = 100; step <= stop_step; step += 100) expected.push_back(step);
  const auto steps = steps_of_files(track, "timeline-", ".json");
  ASSERT_GE(steps.size(), expected.size()) << r.output;
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), steps.begin())) << r.output;
  const std::string last = "timeline-" + std::to_string(expected.back()) + ".json";
  EXPECT_EQ(trace_problems(track / last), "") << last;
  const std::string trace = stepscope::read_file(track / last);
  EXPECT_NE(trace.find("\"name\":\"Gather\""), std::string::npos) << last;
  EXPECT_NE(trace.find("\"name\":\"SparseApplyAdam\""), std::string::npos) << last;
  // The streaming AUC's counts are local variables: evaluations start from zero, so the
  // evaluation directory holds one record per checkpoint evaluated.
  EXPECT_TRUE(fs::is_regular_file(dir_ / "esmm_model_dir" / "eval" / "eval_metrics.txt"));
}

// Fashion-MNIST from Debian's package, the short run: the BN + dropout CNN learns, and the
// ProfilerHook's timelines are of a real step (conv, batch norm and dropout ops, memory counters).
TEST_F(ExampleTest, FashionMnistCnnLearnsAndProfilesARealStep) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_FAIL() << "Debian's dataset-fashion-mnist is not installed: scripts/install-deps.sh installs it";
  // 400 steps: at 200 the batch norms' moving averages (what evaluation uses) still lag the
  // weights, and the test accuracy then depends on the CPU's rounding (44% on an AMD EPYC VM
  // whose training loss was 0.53; 79% at 400 steps there).
  const ProgramRun r = run_program("fashion_mnist_cnn", "--steps 400 --min_accuracy 0.5 --profile_steps 200");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("test accuracy ([0-9.]+)% on 10000 images"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 50.0);
  const fs::path dir = dir_ / "fashion_timelines";
  EXPECT_EQ(steps_of_files(dir, "timeline-", ".json"), (std::vector<int64_t>{200, 400})) << r.output;
  EXPECT_EQ(trace_problems(dir / "timeline-400.json"), "");
  const std::string trace = stepscope::read_file(dir / "timeline-400.json");
  for (const char* op : {"Conv2D", "FusedBatchNorm", "FusedBatchNormGrad", "Dropout", "MaxPool"})
    EXPECT_NE(trace.find("\"name\":\"" + std::string(op) + "\""), std::string::npos) << op;
  EXPECT_NE(trace.find("\"cat\":\"Memory\""), std::string::npos);

  const ProgramRun bad = run_program("fashion_mnist_cnn", "--dir /nonexistent --steps 1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("/nonexistent/train-images-idx3-ubyte.gz not found: install Debian's "
                            "dataset-fashion-mnist"),
            std::string::npos)
      << bad.output;
}

// The character LSTM: the held-out loss ends below the stated target, progress on the way.
TEST_F(ExampleTest, LstmTextLearnsTheGrammar) {
  const ProgramRun r = run_program("lstm_text", "--steps 600");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 100/600  loss "), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("held-out loss ([0-9.]+) nats/char"))) << r.output;
  EXPECT_LT(std::stod(m[1]), 0.4) << r.output;
  EXPECT_EQ(run_program("lstm_text", "--units 0").exit_code, 2);
}

}  // namespace
