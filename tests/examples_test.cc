// End-to-end tests of the example programs: each runs as a user would run it (in a fresh
// directory, on the shipped data) and the text and files it produces are checked.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

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
    const std::string command = "cd '" + dir_.string() + "' && '" + STEPSCOPE_BINARY_DIR + "/" + name + "' --data '" +
                                kData + "' " + args + " 2>&1";
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
  for (const char* expected : {"checkpoint", "model.ckpt-720.safetensors", "model.ckpt-500.safetensors"})
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

}  // namespace
