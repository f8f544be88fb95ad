#include "stepscope/tools/rank_jobs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "stepscope/base/error.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/tools/trace_server.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Rank `rank`'s timeline of one step: a compute process with an Allreduce named "grads" starting
// at `allreduce_us` (on its own clock, whose base is `base_ns`, `offset_ns` ahead of rank 0's).
std::string rank_timeline(int rank, int64_t base_ns, int64_t offset_ns, double allreduce_us) {
  const json trace = {
      {"traceEvents",
       {{{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "/job:localhost/cpu:0 Compute"}}}},
        {{"ph", "X"},
         {"name", "MatMul"},
         {"pid", 0},
         {"tid", 0},
         {"ts", 1.0},
         {"dur", 5.0},
         {"args", {{"name", "dense/MatMul"}, {"op", "MatMul"}}}},
        {{"ph", "X"},
         {"name", "Allreduce"},
         {"pid", 0},
         {"tid", 0},
         {"ts", allreduce_us},
         {"dur", 40.0},
         {"args", {{"name", "grads"}, {"op", "Allreduce"}}}}}},
      {"displayTimeUnit", "ns"},
      {"baseTimeNanoseconds", base_ns},
      {"metadata", {{"rank", rank}, {"size", 2}, {"clock_offset_ns", offset_ns}, {"clock_offset_error_ns", 800}}}};
  return trace.dump();
}

// runs/job/rank0 and rank1 traced steps 10 and 20 (rank 1 only 20 too late to be merged: it wrote
// 30 alone); runs/job/rank1's clock runs 2 µs ahead; runs/other is a plain run; runs/job/rankx is
// not a rank.
class RankJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::canonical(tmp_.path());
    const fs::path job = root_ / "runs" / "job";
    for (const char* dir : {"rank0", "rank1", "rankx"}) fs::create_directories(job / dir);
    fs::create_directories(root_ / "runs" / "other");
    const int64_t base = 1'700'000'000'000'000'000;
    for (int step : {10, 20}) {
      std::ofstream(job / "rank0" / ("timeline-" + std::to_string(step) + ".json")) << rank_timeline(0, base, 0, 10.0);
      // Rank 1 reached the allreduce 25 µs after rank 0 did (on rank 0's clock).
      std::ofstream(job / "rank1" / ("timeline-" + std::to_string(step) + ".json"))
          << rank_timeline(1, base + 2000, 2000, 35.0);
    }
    std::ofstream(job / "rank1" / "timeline-30.json") << rank_timeline(1, base, 2000, 35.0);
    std::ofstream(job / "rankx" / "timeline-10.json") << rank_timeline(0, base, 0, 1.0);
    std::ofstream(root_ / "runs" / "other" / "timeline-10.json") << rank_timeline(0, base, 0, 1.0);
    served_ = std::make_unique<ServedDirectory>(root_);
  }
  json get(const std::string& target, int status = 200) {
    const HttpReply reply = handle_request(*served_, "GET", target);
    EXPECT_EQ(reply.status, status) << target << ": " << reply.body;
    return json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  }

  testing::TempDir tmp_;
  fs::path root_;
  std::unique_ptr<ServedDirectory> served_;
};

TEST(RankJobs, RankDirectoriesAreNamedRankN) {
  EXPECT_EQ(rank_of_run("runs/x/rank12"), 12);
  EXPECT_EQ(rank_of_run("rank0"), 0);
  EXPECT_EQ(rank_of_run("runs/rank"), -1);
  EXPECT_EQ(rank_of_run("runs/rank1x"), -1);
  EXPECT_EQ(rank_of_run("runs/rank-1"), -1);
  EXPECT_EQ(rank_of_run("runs/rank1/eval"), -1);
  EXPECT_EQ(find_rank_jobs({{.path = "a/rank0", .traces = 1},
                            {.path = "a/rank1", .traces = 2},
                            {.path = "b/rank0", .traces = 1},  // one rank: not a job
                            {.path = "c/rank0", .traces = 1},
                            {.path = "c/rank1", .traces = 0}}),  // no timelines
            (std::vector<std::pair<std::string, int>>{{"a", 2}}));
}

TEST_F(RankJobsTest, AJobIsItsRanksAndTheirTracedSteps) {
  const RankJob job = read_rank_job(root_, root_ / "runs" / "job");
  EXPECT_EQ(job.path, "runs/job");
  ASSERT_EQ(job.ranks.size(), 2u);
  EXPECT_EQ(job.ranks[1].run, "runs/job/rank1");
  EXPECT_EQ(job.ranks[1].traces.at(30), "runs/job/rank1/timeline-30.json");
  const auto steps = job.steps();
  EXPECT_EQ(steps.at(10), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(steps.at(30), (std::vector<int64_t>{1}));
  EXPECT_THROW(read_rank_job(root_, root_ / "runs" / "other"), NotFoundError);
  try {
    merge_rank_job_step(root_, job, 15, 1 << 20);
    ADD_FAILURE() << "step 15 merged";
  } catch (const NotFoundError& e) {
    EXPECT_STREQ(e.what(), "no rank of runs/job traced step 15 (traced steps: [10,20,30])");
  }
}

TEST_F(RankJobsTest, TheServerListsMergesAndReportsTheJob) {
  const json runs = get("/api/runs");
  EXPECT_EQ(runs["jobs"], json::parse(R"([{"path":"runs/job","ranks":2}])"));
  const json job = get("/api/job/runs/job");
  EXPECT_EQ(job["ranks"].size(), 2u);
  EXPECT_EQ(job["steps"][2], json::parse(R"({"step":30,"ranks":[1]})"));

  // The merged step: both ranks' processes, rank 1's events on rank 0's clock, a clean trace.
  const HttpReply merged = handle_request(*served_, "GET", "/api/merged/runs/job/timeline-20.json");
  ASSERT_EQ(merged.status, 200) << merged.body;
  for (const TraceProblem& p : validate_chrome_trace(merged.body)) ADD_FAILURE() << p.rule << ": " << p.message;
  const json trace = json::parse(merged.body);
  int processes = 0;
  for (const json& e : trace["traceEvents"]) processes += e["ph"] == "M" && e["name"] == "process_name";
  EXPECT_EQ(processes, 2);
  EXPECT_EQ(trace["metadata"]["merged_ranks"].size(), 2u);

  // Rank 1 arrived last at "grads"; rank 0 waited 25 µs.
  const json stragglers = get("/api/stragglers/runs/job?step=10");
  EXPECT_EQ(stragglers["step"], 10);
  EXPECT_EQ(stragglers["trace"], "runs/job/timeline-10.json");
  ASSERT_EQ(stragglers["stragglers"]["collectives"].size(), 1u);
  EXPECT_EQ(stragglers["stragglers"]["collectives"][0]["last_rank"], 1);
  EXPECT_NEAR(stragglers["stragglers"]["collectives"][0]["wait_us"]["0"].get<double>(), 25.0, 1e-6);
  EXPECT_EQ(get("/api/stragglers/runs/job")["step"], 30);  // the latest traced step by default
  EXPECT_EQ(get("/api/stragglers/runs/job?step=30")["stragglers"]["collectives"].size(), 0u);  // one rank

  // The viewer page fetches the merged trace from the API.
  const HttpReply viewer = handle_request(*served_, "GET", "/viewer/runs/job/timeline-10.json?merged=1");
  EXPECT_EQ(viewer.status, 200);
  EXPECT_NE(viewer.body.find("\"/api/merged/runs/job/timeline-10.json\""), std::string::npos);

  // Errors name what is wrong, and nothing outside the served directory is read.
  EXPECT_EQ(get("/api/stragglers/runs/job?step=15", 404)["error"],
            "no rank of runs/job traced step 15 (traced steps: [10,20,30])");
  EXPECT_EQ(get("/api/job/runs/other", 404)["error"],
            "runs/other is not a data-parallel job: no rank<N> directory in it holds a timeline");
  get("/api/merged/runs/job/notes.txt", 404);
  get("/api/stragglers/runs/job?step=x", 400);
  get("/api/job/../..", 403);
  std::ofstream(root_ / "runs" / "job" / "rank0" / "timeline-40.json") << "{\"traceEvents\": [";
  std::ofstream(root_ / "runs" / "job" / "rank1" / "timeline-40.json") << rank_timeline(1, 1, 0, 1.0);
  EXPECT_NE(get("/api/merged/runs/job/timeline-40.json", 400)["error"].get<std::string>().find(
                "runs/job/rank0/timeline-40.json"),
            std::string::npos);
}

}  // namespace
}  // namespace stepscope
