// `stepscope merge`: the timelines of a job's ranks become one trace on one clock, one process
// group per rank, valid for the viewers.
#include "stepscope/tools/merge_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "stepscope/base/file_io.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/temp_dir.h"
#include "stepscope/testing/trace_validator.h"
#include "stepscope/tools/tools_test_util.h"

namespace stepscope {
namespace {

using nlohmann::json;

// A real traced step written as rank `rank`'s timeline: its base moved to `base_ns`, its clock
// `offset_ns` ahead of rank 0's.
std::string rank_trace(testing::TracedMlp& mlp, int rank, int64_t base_ns, int64_t offset_ns) {
  RunMetadata md = mlp.step();
  const int64_t shift = base_ns - md.step_stats.base_wall_ns;
  md.step_stats.base_wall_ns += shift;
  const std::string metadata = "{\"rank\":" + std::to_string(rank) +
                               ",\"size\":2,\"clock_offset_ns\":" + std::to_string(offset_ns) +
                               ",\"clock_offset_error_ns\":1500}";
  std::string out;
  Timeline(md.step_stats, &mlp.graph).write_chrome_trace(out, {.metadata_json = metadata});
  return out;
}

double first_op_ts(const json& trace, const std::string& process_prefix) {
  std::map<int64_t, std::string> names;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  double first = 1e300;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && names[e["pid"]].starts_with(process_prefix)) first = std::min(first, e["ts"].get<double>());
  return first;
}

TEST(Merge, PutsTheRanksOnRankZerosClockInProcessGroups) {
  testing::TracedMlp mlp;
  // Rank 1's trace starts 5 ms later by its own clock, which runs 2 ms ahead of rank 0's: on rank
  // 0's clock it starts 3 ms after rank 0's.
  const int64_t base0 = 1'700'000'000'000'000'000, base1 = base0 + 5'000'000;
  const std::string t0 = rank_trace(mlp, 0, base0, 0), t1 = rank_trace(mlp, 1, base1, 2'000'000);
  const json a = json::parse(t0), b = json::parse(t1);
  // Inputs in any order.
  const std::string merged_text = merge_rank_traces({{"r1.json", t1}, {"r0.json", t0}});
  EXPECT_EQ(validate_chrome_trace(t0).size(), 0u);  // the inputs are clean, and so must the merge be
  for (const TraceProblem& p : validate_chrome_trace(merged_text)) ADD_FAILURE() << p.rule << ": " << p.message;
  const json merged = json::parse(merged_text);
  EXPECT_EQ(merged["traceEvents"].size(), a["traceEvents"].size() + b["traceEvents"].size());
  EXPECT_EQ(merged["baseTimeNanoseconds"].get<int64_t>(), base0);
  EXPECT_EQ(merged["metadata"]["merged_ranks"][1]["file"], "r1.json");
  EXPECT_EQ(merged["metadata"]["merged_ranks"][1]["clock_offset_error_ns"], 1500);

  // Every process of each rank, renamed, with pids of its own.
  std::set<int64_t> pids0, pids1;
  for (const json& e : merged["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string name = e["args"]["name"];
      ASSERT_TRUE(name.starts_with("rank 0: ") || name.starts_with("rank 1: ")) << name;
      (name.starts_with("rank 0: ") ? pids0 : pids1).insert(e["pid"].get<int64_t>());
    }
  EXPECT_FALSE(pids0.empty());
  EXPECT_EQ(pids0.size(), pids1.size());
  for (int64_t p : pids0) EXPECT_EQ(pids1.count(p), 0u);
  EXPECT_LT(*pids0.rbegin(), *pids1.begin());  // rank 0's group first

  // Rank 0's events where they were; rank 1's 3 ms later than in its own file.
  EXPECT_NEAR(first_op_ts(merged, "rank 0: "), first_op_ts(a, ""), 1e-3);
  EXPECT_NEAR(first_op_ts(merged, "rank 1: "), first_op_ts(b, "") + 3000.0, 1e-3);
}

TEST(Merge, NamesTheInputAtFault) {
  testing::TracedMlp mlp;
  const std::string t0 = rank_trace(mlp, 0, 1'000'000'000, 0);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              merge_rank_traces({{"a.json", t0}, {"b.json", "[1"}});
            }),
            "b.json: not a Chrome trace (a JSON object with a traceEvents array)");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              merge_rank_traces({{"a.json", t0}, {"c.json", t0}});
            }),
            "c.json: rank 0 again (also a.json)");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              merge_rank_traces({{"a.json", t0}, {"d.json", "{\"traceEvents\":[]}"}});
            }),
            "d.json: no baseTimeNanoseconds, so its events cannot be placed on the job's clock");
}

TEST(Merge, TheCommandReadsAndWritesFiles) {
  testing::TracedMlp mlp;
  testing::TempDir dir;
  const std::filesystem::path r0 = std::filesystem::path(dir.path()) / "timeline-0.json";
  const std::filesystem::path r1 = std::filesystem::path(dir.path()) / "timeline-1.json.gz";
  write_file_atomically(r0, rank_trace(mlp, 0, 2'000'000'000, 0));
  write_file_atomically(r1, rank_trace(mlp, 1, 2'000'000'000, 0), /*gzip=*/true);
  const std::string out = (std::filesystem::path(dir.path()) / "job.json").string();
  const testing::CliResult r = testing::cli({"merge", "-o", out, r0.string(), r1.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out + ": 2 rank(s)"), std::string::npos) << r.out;
  EXPECT_EQ(json::parse(read_file(out))["metadata"]["merged_ranks"].size(), 2u);
  // The MLP has no collectives: the report says so.
  const testing::CliResult report = testing::cli({"merge", "--stragglers", "-o", out, r0.string(), r1.string()});
  EXPECT_NE(report.out.find("no collective ran on two ranks or more"), std::string::npos) << report.out;
  const testing::CliResult missing = testing::cli({"merge", "-o", out, r0.string(), "/nonexistent/t.json"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/t.json"), std::string::npos) << missing.err;
}

// Rank 1 reaches the gradients' allreduce 30 us after rank 0, and rank 0 the broadcast 5 us
// after rank 1; both ranks ran the allreduce twice.
TEST(Merge, StragglerReportNamesTheLastRankAndTheWaits) {
  auto x = [](int pid, double ts, const char* name, const char* op) {
    return json{{"ph", "X"},
                {"name", op},
                {"pid", pid},
                {"tid", 0},
                {"ts", ts},
                {"dur", 1.0},
                {"args", {{"name", name}, {"op", op}}}};
  };
  json trace = {{"traceEvents",
                 {{{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "rank 0: cpu Compute"}}}},
                  {{"ph", "M"}, {"name", "process_name"}, {"pid", 7}, {"args", {{"name", "rank 1: cpu Compute"}}}},
                  x(0, 100, "grads", "Allreduce"),
                  x(7, 130, "grads", "Allreduce"),
                  x(0, 200, "grads", "Allreduce"),
                  x(7, 202, "grads", "Allreduce"),
                  x(0, 305, "w", "Broadcast"),
                  x(7, 300, "w", "Broadcast"),
                  x(0, 400, "loss", "Mean")}}};
  EXPECT_EQ(straggler_report(trace.dump()),
            "collective  last to arrive  others waited (us)\n"
            "grads  rank 1  rank 0 30.000\n"
            "w  rank 0  rank 1 5.000\n"
            "grads #2  rank 1  rank 0 2.000\n"
            "total wait (us): rank 0 32.000 rank 1 5.000\n");
  EXPECT_EQ(straggler_report(json{{"traceEvents", json::array()}}.dump()), "no collective ran on two ranks or more\n");
  // The same numbers as JSON, for `stepscope serve`'s job page.
  const json stragglers = json::parse(find_stragglers(trace.dump()).to_json(2));
  ASSERT_EQ(stragglers["collectives"].size(), 2u);
  EXPECT_EQ(stragglers["collectives"][0]["collective"], "grads");
  EXPECT_EQ(stragglers["collectives"][0]["last_rank"], 1);
  EXPECT_EQ(stragglers["collectives"][0]["wait_us"]["0"], 30.0);
  EXPECT_EQ(stragglers["collectives"][1]["collective"], "w");
  EXPECT_EQ(stragglers["total_wait_us"], json({{"0", 32.0}, {"1", 5.0}}));
  EXPECT_THROW(find_stragglers("[1,2"), InvalidArgumentError);
}

}  // namespace
}  // namespace stepscope
