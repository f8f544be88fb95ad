#include "stepscope/tools/web_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/summary_ops.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/tools/run_catalog.h"
#include "stepscope/tools/tools_test_util.h"
#include "stepscope/train/event_file.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/summary_writer.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Two runs: "train" (three traced steps of a small model saved as a profile, a loss and a
// global_step/sec per step in an event file, two timelines) and "train/eval" (one scalar).
class WebApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    const fs::path run = fs::path(tmp_->path()) / "train";
    fs::create_directories(run / "eval");
    testing::TracedMlp mlp;
    Profiler profiler(mlp.graph);
    {
      SummaryWriter writer(run.string());
      for (int step = 1; step <= 3; ++step) {
        float loss = 0;
        profiler.add_step(step * 10, mlp.step(&loss));
        profiler.add_step_timing(step * 10, {.wall_ns = step * 1000000, .busy_ns = 500000, .input_ns = 250000}, 100000);
        writer.add_scalar("loss", loss, step * 10);
        writer.add_scalar("global_step/sec", 100.0f * step, step * 10);
      }
      writer.flush();
    }
    profiler.save(run / "profile");
    for (int step : {10, 30}) std::ofstream(run / ("timeline-" + std::to_string(step) + ".json")) << "{}";
    SummaryWriter eval((run / "eval").string());
    eval.add_scalar("accuracy", 0.5f, 30);
    eval.add_scalar("step_time/wall_ms", 2.5f, 30);  // StepTimingHook's
  }
  static void TearDownTestSuite() { delete tmp_; }
  void SetUp() override { served_ = std::make_unique<ServedDirectory>(tmp_->path()); }

  // The JSON of a GET, checking its status.
  json get(std::string_view path, std::string_view query = "", int status = 200) {
    const HttpReply reply =
        handle_request(*served_, "GET", std::string(path) + (query.empty() ? "" : "?") + std::string(query));
    EXPECT_EQ(reply.status, status) << path << "?" << query << ": " << reply.body;
    EXPECT_EQ(reply.content_type, "application/json") << path;
    return json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  }
  static fs::path run_path() { return fs::path(tmp_->path()) / "train"; }

  static testing::TempDir* tmp_;
  std::unique_ptr<ServedDirectory> served_;
};
testing::TempDir* WebApiTest::tmp_ = nullptr;

TEST_F(WebApiTest, ListsTheRunsAsTensorBoardDoes) {
  const json runs = get("/api/runs")["runs"];
  ASSERT_EQ(runs.size(), 2u) << runs;
  EXPECT_EQ(runs[0]["path"], "train");
  EXPECT_EQ(runs[0]["event_files"], 1);
  EXPECT_EQ(runs[0]["traces"], 2);
  EXPECT_EQ(runs[0]["has_profile"], true);
  EXPECT_EQ(runs[1]["path"], "train/eval");
  EXPECT_EQ(runs[1]["has_profile"], false);
}

TEST_F(WebApiTest, ARunHasItsScalarsStepTimesTracesAndProfile) {
  const json run = get("/api/run/train");
  EXPECT_EQ(run["path"], "train");
  ASSERT_TRUE(run["scalars"].contains("loss")) << run;
  const json loss = run["scalars"]["loss"];
  EXPECT_EQ(loss["points"], 3);
  ASSERT_EQ(loss["data"].size(), 3u);
  EXPECT_EQ(loss["data"][2][0], 30);
  EXPECT_EQ(run["scalars"]["global_step/sec"]["data"][1][1], 200.0);
  ASSERT_EQ(run["traced_step_ms"].size(), 3u);
  EXPECT_EQ(run["traced_step_ms"][0][0], 10);
  EXPECT_GT(run["traced_step_ms"][0][1].get<double>(), 0.0);
  ASSERT_EQ(run["traces"].size(), 2u);
  EXPECT_EQ(run["traces"][1]["path"], "train/timeline-30.json");
  EXPECT_EQ(run["traces"][1]["step"], 30);
  EXPECT_EQ(run["profile"], "train/profile");
  EXPECT_TRUE(run["problems"].empty());
  EXPECT_EQ(get("/api/run/train/eval")["scalars"]["accuracy"]["data"][0][1], 0.5);
  // Every run's step timing: from the profile (ProfilerHook's) where no StepTimingHook wrote any.
  EXPECT_EQ(run["step_timing_source"], "profile");
  const json wall = run["scalars"]["step_time/wall_ms"]["data"];
  ASSERT_EQ(wall.size(), 3u) << run["scalars"];
  EXPECT_EQ(wall[2][0], 30);
  EXPECT_EQ(wall[2][1], 3.0);
  EXPECT_EQ(run["scalars"]["step_time/input_ms"]["data"][0][1], 0.25);
  EXPECT_EQ(run["scalars"]["step_time/ops_ms"]["data"][0][1], 0.5);
  EXPECT_EQ(run["scalars"]["step_time/hooks_ms"]["data"][0][1], 0.1);
  EXPECT_EQ(get("/api/run/train/eval")["step_timing_source"], "scalars");
  EXPECT_EQ(get("/api/run")["path"], ".");  // the served directory itself
}

TEST_F(WebApiTest, LongSeriesAreThinnedKeepingTheLastPoint) {
  RunSummary summary;
  ScalarSeries& s = summary.scalars["x"];
  for (int i = 0; i < 10001; ++i) {
    s.steps.push_back(i);
    s.values.push_back(i);
    s.wall_times.push_back(i);
  }
  const json out = json::parse(summary.to_json(2000));
  EXPECT_EQ(out["scalars"]["x"]["points"], 10001);
  const json data = out["scalars"]["x"]["data"];
  EXPECT_LE(data.size(), 2000u);
  EXPECT_GE(data.size(), 1600u);
  EXPECT_EQ(data.back()[0], 10000);
  EXPECT_EQ(data.front()[0], 0);
}

TEST_F(WebApiTest, ALiveRunIsReadUpToAHalfWrittenRecordAndADamagedOneIsNamed) {
  const fs::path dir = fs::path(tmp_->path()) / "live";
  fs::create_directories(dir);
  std::string events;
  {
    auto writer = EventFileWriter::open_path((dir / "events.out.tfevents.1.test").string());
    Event e;
    e.step = 7;
    e.summary = Summary{};
    e.summary->value.push_back(Summary::scalar("loss", 1.5f));
    writer->write_event(e);
    writer->close();
  }
  // A writer caught mid-record: half of another record appended.
  std::string whole;
  {
    std::ifstream in(dir / "events.out.tfevents.1.test", std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(dir / "events.out.tfevents.1.test", std::ios::app | std::ios::binary) << whole.substr(0, 20);
  json run = get("/api/run/live");
  EXPECT_EQ(run["scalars"]["loss"]["data"][0][1], 1.5);
  EXPECT_TRUE(run["problems"].empty()) << run["problems"];
  // A flipped byte inside the scalar's record: what came before is kept, the file is named.
  whole[whole.size() - 6] ^= 0x55;
  std::ofstream(dir / "events.out.tfevents.1.test", std::ios::binary | std::ios::trunc) << whole;
  run = get("/api/run/live");
  ASSERT_EQ(run["problems"].size(), 1u);
  EXPECT_NE(run["problems"][0].get<std::string>().find("events.out.tfevents.1.test"), std::string::npos) << run;
  EXPECT_EQ(run["problems"][0].get<std::string>().find(tmp_->path()), std::string::npos) << "no server paths";
  fs::remove_all(dir);
}

TEST_F(WebApiTest, TfprofViewsTakeTheCommandLinesOptions) {
  auto count = [](const json& node, auto& self) -> int {
    int n = 1;
    if (node.contains("children"))
      for (const json& c : node["children"]) n += self(c, self);
    return n;
  };
  json view = get("/api/tfprof/train", "view=scope&max_depth=2&select=micros,params&order_by=params");
  EXPECT_EQ(view["view"], "scope");
  EXPECT_EQ(view["steps"], json({10, 20, 30}));
  EXPECT_EQ(view["root"]["name"], "_TFProfRoot");
  ASSERT_FALSE(view["root"]["children"].empty());
  EXPECT_EQ(view["root"]["children"][0]["name"], "hidden");  // 8*16+16 params, the most
  EXPECT_LT(count(view["root"], count), count(get("/api/tfprof/train", "view=scope&max_depth=100")["root"], count));
  view = get("/api/tfprof/train", "view=op&step=20&account_type_regexes=MatMul%2CBiasAdd");
  std::vector<std::string> ops;
  for (const json* n = &view["root"]; !(*n)["children"].empty(); n = &(*n)["children"][0])
    ops.push_back((*n)["children"][0]["name"]);
  std::sort(ops.begin(), ops.end());
  EXPECT_EQ(ops, (std::vector<std::string>{"BiasAdd", "MatMul"}));
  EXPECT_FALSE(get("/api/tfprof/train", "view=graph")["root"]["children"].empty());
  EXPECT_FALSE(get("/api/tfprof/train", "view=code")["root"].is_null());
}

TEST_F(WebApiTest, BadTfprofOptionsAreTheCommandLinesErrors) {
  EXPECT_EQ(get("/api/tfprof/train", "order_by=time", 400)["error"], "Invalid option '-order_by' value: 'time'");
  EXPECT_EQ(get("/api/tfprof/train", "max_depth=ten", 400)["error"], "Invalid option '-max_depth' value: 'ten'");
  EXPECT_EQ(get("/api/tfprof/train", "show_name_regexes=(%5B", 400)["error"],
            "Invalid option '-show_name_regexes' value: '(['");
  EXPECT_EQ(get("/api/tfprof/train", "view=tree", 400)["error"], "view must be scope, graph, op or code, not 'tree'");
  EXPECT_EQ(get("/api/tfprof/train", "color=red", 400)["error"], "unknown tfprof option 'color'");
  EXPECT_EQ(get("/api/tfprof/train", "step=%zz", 400)["error"], "bad percent escape in the query");
  EXPECT_EQ(get("/api/tfprof/train", "step=99", 404)["error"], "the profile has no step 99 (steps: [10,20,30])");
  EXPECT_EQ(get("/api/tfprof/train/eval", "", 404)["error"],
            "run train/eval has no saved profile (ProfilerHook writes profile)");
  EXPECT_EQ(get("/api/tfprof/nope", "", 404)["error"], "no run nope");
}

TEST_F(WebApiTest, TheAdvisorAndTheCriticalPathOfAStep) {
  json advice = get("/api/advise/train");
  EXPECT_EQ(advice["step"], 30);
  EXPECT_TRUE(advice["advice"]["checkers"].contains("CriticalPathChecker"));
  EXPECT_FALSE(advice["critical_path"]["path"].empty());
  EXPECT_GT(advice["critical_path"]["wall_ns"].get<int64_t>(), 0);
  EXPECT_EQ(advice["trace"], "train/timeline-30.json");
  advice = get("/api/advise/train", "step=20");
  EXPECT_EQ(advice["step"], 20);
  EXPECT_TRUE(advice["trace"].is_null());  // no timeline of step 20
  EXPECT_EQ(get("/api/advise/train", "step=5", 404)["error"], "the profile has no step 5 (steps: [10,20,30])");
  EXPECT_EQ(get("/api/advise/train", "step=x", 400)["error"], "Invalid option '-step' value: 'x'");
  // What if the MatMuls ran 4x faster?
  const json w = get("/api/advise/train", "what_if=MatMul&speedup=4")["what_if"];
  EXPECT_EQ(w["target"], "MatMul");
  EXPECT_EQ(w["speedup"], 4.0);
  EXPECT_GE(w["matched_ops"].get<int>(), 2);
  EXPECT_LT(w["new_wall_ns"].get<int64_t>(), w["wall_ns"].get<int64_t>());
  EXPECT_TRUE(get("/api/advise/train")["what_if"].is_null());
  EXPECT_EQ(get("/api/advise/train", "what_if=Conv2D", 404)["error"],
            "what-if: no op named or of type 'Conv2D' ran in the step");
  EXPECT_EQ(get("/api/advise/train", "what_if=MatMul&speedup=fast", 400)["error"],
            "speedup must be a number, not 'fast'");
  EXPECT_THAT(get("/api/advise/train", "what_if=MatMul&speedup=-1", 400)["error"].get<std::string>(),
              ::testing::HasSubstr("the speedup must be a finite number > 0"));
}

TEST_F(WebApiTest, AStepsMemoryByKind) {
  json memory = get("/api/memory/train");
  EXPECT_EQ(memory["step"], 30);
  EXPECT_EQ(memory["memory_by_kind"]["parameters"], (8 * 16 + 16 + 16 * 4 + 4) * 4);
  EXPECT_GT(memory["memory_by_kind"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(get("/api/memory/train", "step=10")["step"], 10);
  EXPECT_EQ(get("/api/memory/train", "step=11", 404)["error"], "the profile has no step 11 (steps: [10,20,30])");
}

TEST_F(WebApiTest, PathsStayUnderTheServedDirectory) {
  fs::create_symlink("/etc", run_path() / "etc_link");
  EXPECT_EQ(get("/api/run/train/etc_link", "", 403)["error"], "forbidden");
  EXPECT_EQ(get("/api/run/../x", "", 403)["error"], "forbidden");
  EXPECT_EQ(get("/api/run/train/profile", "", 404)["error"], "no run train/profile");  // a file, not a run
  EXPECT_EQ(handle_request(*served_, "GET", "/api/nothing").status, 404);
  fs::remove(run_path() / "etc_link");
  // The pages themselves.
  const HttpReply index = handle_request(*served_, "GET", "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("/ui/app.js"), std::string::npos);
  EXPECT_EQ(handle_request(*served_, "GET", "/ui/app.js").content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(handle_request(*served_, "GET", "/ui/app.css").status, 200);
  EXPECT_EQ(handle_request(*served_, "GET", "/ui/../profile").status, 404);
}

TEST_F(WebApiTest, ADamagedProfileIsNamedNotFatal) {
  const fs::path dir = fs::path(tmp_->path()) / "broken";
  fs::create_directories(dir);
  std::ofstream(dir / "profile") << "not a profile";
  const json error = get("/api/tfprof/broken", "", 422);
  EXPECT_NE(error["error"].get<std::string>().find("broken/profile"), std::string::npos) << error;
  EXPECT_EQ(error["error"].get<std::string>().find(tmp_->path()), std::string::npos) << "no server paths";
  // The run page still shows the rest, with the problem said.
  const json run = get("/api/run/broken");
  ASSERT_EQ(run["problems"].size(), 1u);
  fs::remove_all(dir);
}

// The server answers from many threads at once: the catalog's caches and the (not thread-safe)
// Profiler are shared between them (run under ThreadSanitizer by scripts/test.sh).
TEST_F(WebApiTest, ConcurrentRequestsShareTheCaches) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        const char* targets[] = {"/api/run/train", "/api/tfprof/train?view=op", "/api/advise/train", "/api/runs",
                                 "/api/tfprof/train?view=scope&step=20"};
        ok += handle_request(*served_, "GET", targets[(t + i) % 5]).status == 200;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

}  // namespace
}  // namespace stepscope
