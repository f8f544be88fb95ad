#include "stepscope/tools/cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "stepscope/base/file_io.h"
#include "stepscope/base/version.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/timeline_test_util.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/tools/tools_test_util.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

using testing::cli;
using testing::CliResult;

// Three traced steps of a small model, saved as a profile and as RunMetadata files.
class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    dir_ = new fs::path(tmp_->path());
    testing::TracedMlp mlp;
    Profiler profiler(mlp.graph);
    for (int step = 1; step <= 3; ++step) {
      const RunMetadata metadata = mlp.step();
      profiler.add_step(step, metadata);
      save_run_metadata(*dir_ / ("run_metadata-" + std::to_string(step) + ".pb"), metadata);
      profiler.add_step_timing(step, metadata.step_timing, 1000);
    }
    profiler.save(*dir_ / "profile");
    profiler.save(*dir_ / "profile.gz");
    std::ostringstream expected;
    profiler.set_stdout(&expected);
    ProfileOptions options;
    options.max_depth = 2;
    options.select = {"micros", "bytes", "params"};
    options.order_by = "params";
    options.account_type_regexes = {".*"};
    options.start_name_regexes = {".*"};
    options.show_name_regexes = {".*"};
    profiler.profile_name_scope(options);
    expected_scope_ = new std::string(expected.str());
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete tmp_;
    delete expected_scope_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  static testing::TempDir* tmp_;
  static fs::path* dir_;
  static std::string* expected_scope_;
};
fs::path* CliTest::dir_ = nullptr;
testing::TempDir* CliTest::tmp_ = nullptr;
std::string* CliTest::expected_scope_ = nullptr;

TEST_F(CliTest, ProfPrintsTheViewWithTfprofFlags) {
  const CliResult r = cli({"prof", "scope", "--profile", path("profile"), "-max_depth", "2", "-select",
                           "micros,bytes,params", "-order_by=params"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, *expected_scope_);
  EXPECT_NE(r.out.find("hidden"), std::string::npos);
}

TEST_F(CliTest, ProfEveryViewAndJson) {
  for (const char* view : {"op", "graph", "code", "advise"}) {
    const CliResult r = cli({"prof", view, "--profile_path", path("profile")});
    EXPECT_EQ(r.code, 0) << view << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << view;
  }
  const CliResult r = cli({"prof", "op", "--profile", path("profile"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_FALSE(json.empty());
}

TEST_F(CliTest, BadInputIsNamed) {
  CliResult r = cli({"prof", "scope", "--profile", path("missing")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;

  r = cli({"prof", "scope", "--profile", path("profile"), "-order_by", "speed"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("speed"), std::string::npos) << r.err;

  r = cli({"prof", "flame", "--profile", path("profile")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("flame"), std::string::npos) << r.err;

  r = cli({"prof", "scope", "--profile", path("profile"), "-max_depth", "deep"});
  EXPECT_EQ(r.code, 2);

  r = cli({"timeline", "--run_meta", path("run_metadata-1.pb"), "--profile", path("profile"), "-o", path("x.json")});
  EXPECT_EQ(r.code, 2);

  r = cli({"critical_path", "--profile", path("profile"), "--step", "7"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no step 7 (steps: 1 2 3)"), std::string::npos) << r.err;
}

TEST_F(CliTest, GzipInputsAreBoundedByMaxDecompressedBytes) {
  // Issue 12: a small .gz could inflate without limit; the bound is an option of every command
  // that reads files, and the error names the file and the limit.
  CliResult r = cli({"prof", "scope", "--profile", path("profile.gz")});
  EXPECT_EQ(r.code, 0) << r.err;
  r = cli({"prof", "scope", "--profile", path("profile.gz"), "--max-decompressed-bytes", "100"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(path("profile.gz") + ": gzip data inflates past the limit of 100 bytes"), std::string::npos)
      << r.err;
  r = cli({"critical_path", "--profile", path("profile.gz"), "--max-decompressed-bytes", "100"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("limit of 100 bytes"), std::string::npos) << r.err;
  r = cli({"timeline", "--profile", path("profile.gz"), "-o", path("t.json"), "--max-decompressed-bytes", "100"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("limit of 100 bytes"), std::string::npos) << r.err;
}

TEST_F(CliTest, TimelineFromRunMetadataOrProfileValidates) {
  CliResult r =
      cli({"timeline", "--run_meta", path("run_metadata-2.pb"), "-o", path("t2.json"), "--show_memory", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string trace = read_file(path("t2.json"));
  EXPECT_TRUE(validate_chrome_trace(trace).empty());
  EXPECT_NE(trace.find("\"ph\":\"C\""), std::string::npos);  // memory counters

  r = cli({"timeline", "--profile", path("profile"), "--step", "3", "-o", path("t3.json.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  trace = read_file(path("t3.json.gz"));
  EXPECT_TRUE(validate_chrome_trace(trace).empty());
  EXPECT_NE(trace.find("MatMul"), std::string::npos);
  // The profile's FLOPs are in the args, as in the hook's timelines.
  const nlohmann::json j = nlohmann::json::parse(trace);
  int64_t matmul_flops = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "MatMul") matmul_flops += e["args"].value("flops", int64_t{0});
  EXPECT_GT(matmul_flops, 0);

  // A saved profile has no tensor memory: no memory tracks are named, and the user is told where
  // memory is.
  r = cli({"timeline", "--profile", path("profile"), "-o", path("t4.json"), "--show_memory", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("--run_meta"), std::string::npos) << r.err;
  trace = read_file(path("t4.json"));
  EXPECT_TRUE(validate_chrome_trace(trace).empty());
  EXPECT_EQ(trace.find("\"memory\""), std::string::npos);
}

// A RunMetadata file as TensorFlow writes it (no allocation records): the memory tracks come
// from the outputs' allocation descriptions, as TensorFlow's timeline does.
TEST_F(CliTest, TimelineShowsMemoryOfTensorFlowsOwnRunMetadata) {
  write_file_atomically(path("tf_run_metadata.pb"),
                        testing::tf_run_metadata({{"a", "Const", {}, 0, 5, 64}, {"b", "Neg", {"a"}, 10, 5, 64}}));
  const CliResult r =
      cli({"timeline", "--run_meta", path("tf_run_metadata.pb"), "-o", path("tf.json"), "--show_memory", "true"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json trace = nlohmann::json::parse(read_file(path("tf.json")));
  std::vector<int64_t> totals;
  int objects = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "cpu memory") totals.push_back(e["args"]["bytes in use"].get<int64_t>());
    objects += e["ph"] == "N";
  }
  EXPECT_EQ(totals, (std::vector<int64_t>{0, 64, 128, 64, 0}));
  EXPECT_EQ(objects, 2);
}

TEST_F(CliTest, CriticalPathOfASavedStep) {
  CliResult r = cli({"critical_path", "--run_meta", path("run_metadata-3.pb")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Critical path: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GradientDescent"), std::string::npos) << r.out;  // the step ends with the train op
  r = cli({"critical_path", "--profile", path("profile"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_FALSE(json["path"].empty()) << r.out;
  EXPECT_EQ(json["path"].back()["op_type"], "NoOp") << r.out;
}

TEST_F(CliTest, WhatIfAnOpTypeRanFaster) {
  CliResult r =
      cli({"critical_path", "--run_meta", path("run_metadata-3.pb"), "--what-if", "MatMul", "--speedup", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("What if MatMul (", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("ran 3.00x faster: wall "), std::string::npos) << r.out;
  r = cli({"critical_path", "--profile", path("profile"), "--what-if", "MatMul", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["speedup"], 2.0);
  EXPECT_GT(json["matched_ops"].get<int>(), 0);
  EXPECT_LE(json["new_wall_ns"].get<int64_t>(), json["wall_ns"].get<int64_t>());
  r = cli({"critical_path", "--profile", path("profile"), "--what-if", "Conv2D"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "stepscope: what-if: no op named or of type 'Conv2D' ran in the step\n");
  r = cli({"critical_path", "--profile", path("profile"), "--what-if", "MatMul", "--speedup", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the speedup must be a finite number > 0"), std::string::npos) << r.err;
}

TEST_F(CliTest, ProfMemoryIsAStepsPeakByKind) {
  CliResult r = cli({"prof", "memory", "--profile", path("profile")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("step 3: Peak memory ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("parameters 848 B"), std::string::npos) << r.out;  // (8*16 + 16 + 16*4 + 4) floats
  r = cli({"prof", "memory", "--profile", path("profile"), "-step", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["parameters"], 848);
  EXPECT_EQ(json["optimizer_slots"], 0);  // plain gradient descent keeps none
  EXPECT_GT(json["gradients"].get<int64_t>(), 0);
  r = cli({"prof", "memory", "--profile", path("profile"), "-step", "9"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no step 9 (steps: 1 2 3)"), std::string::npos) << r.err;
}

TEST_F(CliTest, ProfTimingSummarisesEveryRunsStepTime) {
  CliResult r = cli({"prof", "timing", "--profile", path("profile")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("3 steps (1 to 3)\nstep time: median ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("not input-bound (under 5%)"), std::string::npos) << r.out;  // fed, no input ops
  r = cli({"prof", "timing", "--profile", path("profile.gz"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["steps"], 3);
  ASSERT_EQ(json["records"].size(), 3u);
  EXPECT_EQ(json["records"][2][0], 3);
  EXPECT_GT(json["records"][2][1].get<int64_t>(), 0);  // the traced step's wall time
  EXPECT_EQ(json["records"][2][5], 1000);              // the hooks' time given

  // The critical path's fourth category, hooks, from the step's timing (1000 ns given above).
  r = cli({"critical_path", "--profile", path("profile"), "--step", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nHooks around the step (outside its trace): "), std::string::npos) << r.out;
  r = cli({"critical_path", "--profile", path("profile"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["hooks_ns"], 1000);
  r = cli({"critical_path", "--run_meta", path("run_metadata-3.pb"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["hooks_ns"], -1);  // a RunMetadata file has no hooks' time

  testing::TracedMlp mlp;  // a profile without timings (as older ones are)
  Profiler bare(mlp.graph);
  bare.add_step(1, mlp.step());
  bare.save(path("bare.profile"));
  r = cli({"prof", "timing", "--profile", path("bare.profile")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no step timings (ProfilerHook records them"), std::string::npos) << r.err;
}

TEST_F(CliTest, DiffOfStepsAndFilesOfARealRun) {
  CliResult r = cli({"diff", path("profile") + "@1", path("profile") + "@3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(step 1), B "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MatMul"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hidden"), std::string::npos) << r.out;
  // ProfilerHook's RunMetadata file (its step from the name) against the saved profile's step.
  r = cli({"diff", path("run_metadata-2.pb"), path("profile.gz") + "@2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["a"]["critical_path_step"], 2);
  EXPECT_NEAR(j["step_ratio"].get<double>(), 1.0, 0.02);  // the same step, read two ways
  EXPECT_TRUE(j["only_in_a"].empty());
}

TEST_F(CliTest, ProfWritesPprofOutput) {
  const CliResult r = cli({"prof", "code", "--profile", path("profile"), "-select", "micros", "-output",
                           "pprof:outfile=" + path("p.pb.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Run pprof -png --nodecount=100 --sample_index=1 <" + path("p.pb.gz") + ">"), std::string::npos)
      << r.out;
  EXPECT_TRUE(is_gzip(read_file(path("p.pb.gz"), kDefaultMaxDecompressedBytes, Gunzip::kNever)));
}

TEST(Cli, VersionPrintsTheProjectVersion) {
  const CliResult r = cli({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "stepscope " STEPSCOPE_VERSION "\n");
}

TEST(Cli, HelpListsEveryTfprofFlag) {
  const CliResult r = cli({"prof", "--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--max_depth",
                           "--min_bytes",
                           "--min_peak_bytes",
                           "--min_residual_bytes",
                           "--min_output_bytes",
                           "--min_micros",
                           "--min_accelerator_micros",
                           "--min_cpu_micros",
                           "--min_params",
                           "--min_float_ops",
                           "--min_occurrence",
                           "--step",
                           "--order_by",
                           "--account_type_regexes",
                           "--start_name_regexes",
                           "--trim_name_regexes",
                           "--show_name_regexes",
                           "--hide_name_regexes",
                           "--account_displayed_op_only",
                           "--select",
                           "--output"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace stepscope
