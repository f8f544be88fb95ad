// `stepscope diff`: profiles and RunMetadata files with known step times (a 130 µs step and a
// 190 µs one), steps of one profile, text and JSON, the --fail-if-slower gate's exit status, and
// corrupt, truncated or missing inputs named in the error.
#include "stepscope/tools/diff_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "stepscope/base/file_io.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/tfprof/tfprof_test_util.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/tools/cli.h"
#include "stepscope/tools/tools_test_util.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using tfprof::testing::add_exec;
using tfprof::testing::add_node;
using tfprof::testing::kCpu;

using testing::cli;
using testing::CliResult;

// One step: a/x 10us -> a/mm `mm_us` -> b/add 20us (starting at 1000us).
RunMetadata step_of(const Graph& g, int64_t mm_us) {
  RunMetadata md;
  add_exec(md, *g.find_node("a/x"), kCpu, {.start_us = 1000, .duration_us = 10});
  add_exec(md, *g.find_node("a/mm"), kCpu, {.start_us = 1010, .duration_us = mm_us, .requested_bytes = 4096});
  add_exec(md, *g.find_node("b/add"), kCpu, {.start_us = 1010 + mm_us, .duration_us = 20});
  return md;
}

class DiffCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    Graph g;
    Node* x = add_node(g, "a/x", "Const");
    Node* mm = add_node(g, "a/mm", "MatMul", {x});
    add_node(g, "b/add", "Add", {mm});
    Profiler fast(g), slow(g), both(g);
    fast.add_step(1, step_of(g, 100));  // 130us
    slow.add_step(1, step_of(g, 160));  // 190us
    both.add_step(100, step_of(g, 100));
    both.add_step(200, step_of(g, 160));
    fast.save(path("fast"));
    slow.save(path("slow.gz"));
    both.save(path("both"));
    save_run_metadata(path("fast.pb"), step_of(g, 100));
    save_run_metadata(path("slow.pb.gz"), step_of(g, 160));
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string path(const std::string& name) { return (fs::path(tmp_->path()) / name).string(); }
  static testing::TempDir* tmp_;
};
testing::TempDir* DiffCommandTest::tmp_ = nullptr;

TEST_F(DiffCommandTest, TextOfTwoProfiles) {
  const CliResult r = cli({"diff", path("fast"), path("slow.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "step time: A 130us (its one step, 1), B 190us (its one step, 1), B/A 1.462x (+46.2%)");
  EXPECT_NE(r.out.find("A: " + path("fast") + "\nB: " + path("slow.gz")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Op types (by |B-A| time; 3 of 3):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MatMul"), std::string::npos);
  EXPECT_NE(r.out.find("+60us"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.600x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Critical paths"), std::string::npos);
  EXPECT_EQ(r.err, "");
}

TEST_F(DiffCommandTest, JsonParses) {
  const CliResult r = cli({"diff", path("fast"), path("slow.gz"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["a"]["step_micros"].get<double>(), 130);
  EXPECT_DOUBLE_EQ(j["b"]["step_micros"].get<double>(), 190);
  EXPECT_EQ(j["op_types"][0]["name"], "MatMul");
  EXPECT_EQ(j["op_types"][0]["delta_micros"], 60);
  EXPECT_EQ(j["scopes"][0]["name"], "a");
  EXPECT_EQ(j["a"]["critical_path"]["path"].size(), 3u);
}

TEST_F(DiffCommandTest, FailIfSlowerGate) {
  CliResult r = cli({"diff", path("fast"), path("slow.gz"), "--fail-if-slower", "50"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ok: B's step time 190.0us is +46.2% over A's 130.0us (limit +50%)"), std::string::npos)
      << r.err;
  r = cli({"diff", path("fast"), path("slow.gz"), "--fail-if-slower", "10", "--json"});
  EXPECT_EQ(r.code, kDiffSlowerExitCode);
  EXPECT_NE(r.err.find("FAIL: B's step time 190.0us is +46.2% over A's 130.0us (limit +10%)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded());  // the report is still printed
  // Faster is never a failure.
  r = cli({"diff", path("slow.gz"), path("fast"), "--fail-if-slower", "0"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("-31.6% vs"), std::string::npos) << r.err;
  r = cli({"diff", path("fast"), path("slow.gz"), "--fail-if-slower", "-5"});
  EXPECT_EQ(r.code, 2);
}

TEST_F(DiffCommandTest, StepsOfOneProfile) {
  CliResult r = cli({"diff", path("both") + "@100", path("both") + "@200"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time: A 130us (step 100), B 190us (step 200)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("A: " + path("both") + "@100"), std::string::npos) << r.out;
  r = cli({"diff", path("both"), "--step-a", "200", "--step-b", "100", "--fail-if-slower", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time: A 190us (step 200), B 130us (step 100)"), std::string::npos) << r.out;
  // The average of both steps against one.
  r = cli({"diff", path("both"), path("fast")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A 160us (average of 2 steps, 100..200)"), std::string::npos) << r.out;
  r = cli({"diff", path("both") + "@300", path("fast")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("both") + "@300: no step 300 (steps: 100 200)"), std::string::npos) << r.err;
}

TEST_F(DiffCommandTest, RunMetadataFilesAndProfilesMix) {
  CliResult r = cli({"diff", path("fast.pb"), path("slow.pb.gz"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["step_ratio"].get<double>(), 190.0 / 130.0, 1e-9);
  EXPECT_EQ(j["op_types"][0]["name"], "MatMul");  // op types from the records' labels
  EXPECT_EQ(j["b"]["critical_path"]["path"].size(), 3u);
  r = cli({"diff", path("fast"), path("fast.pb"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["step_ratio"].get<double>(), 1);
  EXPECT_TRUE(j["only_in_a"].empty() && j["only_in_b"].empty());
}

TEST_F(DiffCommandTest, CorruptTruncatedAndMissingFilesAreNamed) {
  const std::string profile = read_file(path("fast"));
  write_file_atomically(path("truncated"), std::string_view(profile).substr(0, profile.size() / 2));
  CliResult r = cli({"diff", path("truncated"), path("fast")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("stepscope: "), std::string::npos);
  EXPECT_NE(r.err.find(path("truncated")), std::string::npos) << r.err;

  write_file_atomically(path("garbage"), std::string("\xff\xff\xff\xff not a profile", 19));
  r = cli({"diff", path("fast"), path("garbage")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("garbage") + ": neither a saved profile"), std::string::npos) << r.err;

  write_file_atomically(path("empty"), "");
  r = cli({"diff", path("empty"), path("fast")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("empty") + ": neither a saved profile nor a RunMetadata"), std::string::npos) << r.err;

  const std::string gz = read_file(path("slow.gz"), kDefaultMaxDecompressedBytes, Gunzip::kNever);
  write_file_atomically(path("cut.gz"), std::string_view(gz).substr(0, gz.size() - 12));
  r = cli({"diff", path("fast"), path("cut.gz")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("cut.gz")), std::string::npos) << r.err;

  r = cli({"diff", path("fast"), path("nowhere")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("nowhere")), std::string::npos) << r.err;

  r = cli({"diff"});
  EXPECT_EQ(r.code, 2);
}

TEST(DiffCommand, HelpDocumentsTheSyntax) {
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"diff", "--help"}, out, err), 0);
  for (const char* text :
       {"FILE@STEP", "--step-a", "--step-b", "--json", "--fail-if-slower", "exit status 3", "RunMetadata"})
    EXPECT_NE(out.str().find(text), std::string::npos) << text << "\n" << out.str();
}

}  // namespace
}  // namespace stepscope
