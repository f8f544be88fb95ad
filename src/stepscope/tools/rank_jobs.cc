#include "stepscope/tools/rank_jobs.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"
#include "stepscope/tools/merge_command.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

std::string relative_to(const fs::path& path, const fs::path& root) {
  std::string rel = path.lexically_relative(root).generic_string();
  return rel.empty() ? "." : rel;
}

void append_ints(std::string& out, const std::vector<int64_t>& values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  out += ']';
}

}  // namespace

int64_t rank_of_run(std::string_view run_path) {
  const size_t slash = run_path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? run_path : run_path.substr(slash + 1);
  if (name.size() <= 4 || name.substr(0, 4) != "rank") return -1;
  int64_t rank = -1;
  const auto [end, error] = std::from_chars(name.data() + 4, name.data() + name.size(), rank);
  return error == std::errc() && end == name.data() + name.size() && rank >= 0 ? rank : -1;
}

std::map<int64_t, std::vector<int64_t>> RankJob::steps() const {
  std::map<int64_t, std::vector<int64_t>> out;
  for (const RankRun& r : ranks)
    for (const auto& [step, _] : r.traces) out[step].push_back(r.rank);
  return out;
}

std::string RankJob::to_json() const {
  std::string out = "{\"path\":";
  json_out::append_string(out, path);
  out += ",\"ranks\":[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += i ? ",{\"rank\":" : "{\"rank\":";
    out += std::to_string(ranks[i].rank) + ",\"run\":";
    json_out::append_string(out, ranks[i].run);
    std::vector<int64_t> traced;
    for (const auto& [step, _] : ranks[i].traces) traced.push_back(step);
    out += ",\"steps\":";
    append_ints(out, traced);
    out += '}';
  }
  out += "],\"steps\":[";
  bool first = true;
  for (const auto& [step, with] : steps()) {
    out += first ? "{\"step\":" : ",{\"step\":";
    first = false;
    out += std::to_string(step) + ",\"ranks\":";
    append_ints(out, with);
    out += '}';
  }
  return out + "]}";
}

std::vector<std::pair<std::string, int>> find_rank_jobs(const std::vector<RunEntry>& runs) {
  std::map<std::string, std::set<int64_t>> ranks_of_job;
  for (const RunEntry& run : runs) {
    const int64_t rank = rank_of_run(run.path);
    if (rank < 0 || run.traces == 0) continue;
    const size_t slash = run.path.rfind('/');
    ranks_of_job[slash == std::string::npos ? "." : run.path.substr(0, slash)].insert(rank);
  }
  std::vector<std::pair<std::string, int>> jobs;
  for (const auto& [path, ranks] : ranks_of_job)
    if (ranks.size() >= 2) jobs.emplace_back(path, static_cast<int>(ranks.size()));
  return jobs;
}

RankJob read_rank_job(const fs::path& root, const fs::path& dir) {
  RankJob job;
  job.path = relative_to(dir, root);
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const int64_t rank = rank_of_run(it->path().filename().string());
    if (rank < 0 || !it->is_directory(error) || it->is_symlink(error)) continue;
    RankRun run{.rank = rank, .run = relative_to(it->path(), root), .traces = {}};
    std::error_code inner;
    for (fs::directory_iterator f(it->path(), inner), fend; !inner && f != fend; f.increment(inner)) {
      const std::string name = f->path().filename().string();
      const int64_t step = trace_step(name);
      if (step < 0 || name.find(".tmp") != std::string::npos || f->is_symlink(inner) || !f->is_regular_file(inner))
        continue;
      // A step written both plain and gzipped: either will do, the first seen is kept.
      run.traces.emplace(step, relative_to(f->path(), root));
    }
    if (!run.traces.empty()) job.ranks.push_back(std::move(run));
  }
  if (job.ranks.empty())
    throw NotFoundError(job.path + " is not a data-parallel job: no rank<N> directory in it holds a timeline");
  std::sort(job.ranks.begin(), job.ranks.end(), [](const RankRun& a, const RankRun& b) { return a.rank < b.rank; });
  return job;
}

std::string merge_rank_job_step(const fs::path& root, const RankJob& job, int64_t step,
                                uint64_t max_decompressed_bytes) {
  std::vector<std::pair<std::string, std::string>> traces;
  for (const RankRun& run : job.ranks)
    if (auto it = run.traces.find(step); it != run.traces.end())
      traces.emplace_back(it->second, read_file(root / it->second, max_decompressed_bytes));
  if (traces.empty()) {
    std::vector<int64_t> traced;
    for (const auto& [s, _] : job.steps()) traced.push_back(s);
    std::string list;
    append_ints(list, traced);
    throw NotFoundError("no rank of " + job.path + " traced step " + std::to_string(step) + " (traced steps: " + list +
                        ")");
  }
  return merge_rank_traces(traces);
}

}  // namespace stepscope
