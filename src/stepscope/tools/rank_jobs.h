// A data-parallel job's runs as `stepscope serve` shows them: a directory whose subdirectories
// rank0, rank1, ... (docs/distributed.md's layout: one ProfilerHook output directory a rank) hold
// each rank's timelines. The server merges the ranks' timelines of a step into one trace on rank
// 0's clock (merge_rank_traces) when asked, and reports who waited for whom (find_stragglers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stepscope/tools/run_catalog.h"

namespace stepscope {

struct RankRun {
  int64_t rank = 0;
  std::string run;                       // its directory, relative to the served root
  std::map<int64_t, std::string> traces;  // step -> its timeline, relative to the served root
};

struct RankJob {
  std::string path;  // relative to the served root ("." for the root itself)
  std::vector<RankRun> ranks;  // by rank
  // Each traced step and the ranks that traced it.
  std::map<int64_t, std::vector<int64_t>> steps() const;
  // {"path", "ranks": [{"rank", "run", "steps": [...]}...], "steps": [{"step", "ranks": [...]}...]}
  std::string to_json() const;
};

// N for a run directory named "rank<N>" (its last component), -1 for any other.
int64_t rank_of_run(std::string_view run_path);

// The jobs among `runs` (RunCatalog::runs): each directory holding two or more "rank<N>" runs
// with timelines, with its number of such ranks, by path.
std::vector<std::pair<std::string, int>> find_rank_jobs(const std::vector<RunEntry>& runs);

// The job in `dir` (canonical, under the canonical `root`): its "rank<N>" subdirectories and
// their timelines (symbolic links are not followed: nothing outside the root is read).
// NotFoundError when no rank subdirectory holds a timeline.
RankJob read_rank_job(const std::filesystem::path& root, const std::filesystem::path& dir);

// The ranks' timelines of `step` merged into one trace (merge_rank_traces), each read with at
// most `max_decompressed_bytes`; NotFoundError naming the traced steps when no rank traced it,
// InvalidArgumentError naming the file at fault when one is no trace.
std::string merge_rank_job_step(const std::filesystem::path& root, const RankJob& job, int64_t step,
                                uint64_t max_decompressed_bytes);

}  // namespace stepscope
