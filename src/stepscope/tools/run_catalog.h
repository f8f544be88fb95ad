// What the runs under a directory hold, for `stepscope serve`'s pages: the runs (directories, as
// TensorBoard sees them: each directory that directly holds event files, a saved profile or
// timelines), and for one run its scalars over the steps, the time of its steps, its traces and
// the steps its profile kept.
//
// Runs still training are read as they grow: an event file's last record may be half written
// (read up to it, as TensorBoard does), and a catalog caches what it read by each file's size and
// modification time, so a page that polls costs only the files that changed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/profiler/tfprof/step_timings.h"

namespace stepscope {

class Profiler;

// A series of (step, value) points, in the order written (steps may repeat after a restart).
struct ScalarSeries {
  std::vector<int64_t> steps;
  std::vector<double> values;
  std::vector<double> wall_times;  // seconds since the epoch
};

struct RunEntry {
  std::string path;  // relative to the served directory ("." for the directory itself)
  int event_files = 0;
  int traces = 0;
  bool has_profile = false;
  int64_t modified_unix_secs = 0;  // the newest of the run's files
};

struct RunFile {
  std::string path;  // relative to the served directory
  int64_t step = -1;
  int64_t bytes = 0;
};

struct RunSummary {
  std::string path;
  std::map<std::string, ScalarSeries> scalars;  // by tag
  // Wall time of each traced step the profile kept (its first op's start to its last op's end).
  std::vector<std::pair<int64_t, double>> traced_step_ms;
  // Where the step_time/* series come from: "scalars" (StepTimingHook's), "profile" (the
  // profile's step timings, ProfilerHook's, when there are no such scalars), or "".
  std::string step_timing_source;
  std::vector<RunFile> traces;        // timeline-<step>.json(.gz), by step
  std::vector<RunFile> run_metadata;  // run_metadata-<step>.pb(.gz), by step
  std::string profile;                // the saved profile's path, "" when none
  std::vector<std::string> problems;  // files that could not be read, and why (the rest is shown)
  int64_t modified_unix_secs = 0;
  std::string to_json(size_t max_points_per_series) const;
};

class RunCatalog {
 public:
  // `root` must be canonical (ServedDirectory resolves it).
  explicit RunCatalog(std::filesystem::path root);

  // Every run under the root, by path; at most `max_runs`, looking at most 16 levels deep.
  std::vector<RunEntry> runs(size_t max_runs = 1000) const;
  // The run in `dir` (canonical, under the root). Event files that are corrupt are reported in
  // `problems`, with what was read before the damage kept.
  RunSummary summary(const std::filesystem::path& dir);
  // The run's saved profile, loaded once per version of the file; NotFoundError when the run
  // has none. Callers hold `profile_mutex()` while using it (a Profiler is not thread-safe).
  std::shared_ptr<Profiler> profile(const std::filesystem::path& dir);
  std::mutex& profile_mutex() { return profile_mu_; }

 private:
  struct FileVersion {
    int64_t bytes = -1;
    int64_t modified_ns = 0;
    bool operator==(const FileVersion&) const = default;
  };
  struct CachedEvents {
    FileVersion version;
    std::map<std::string, ScalarSeries> scalars;
    std::string problem;
  };
  struct CachedProfile {
    FileVersion version;
    std::shared_ptr<Profiler> profiler;
    std::vector<std::pair<int64_t, double>> step_ms;
    std::vector<StepTimingRecord> step_timings;  // copied at load: read without the profile's lock
  };
  static FileVersion version_of(const std::filesystem::path& file);
  const CachedProfile& load_profile(const std::filesystem::path& file);

  std::filesystem::path root_;
  std::mutex mu_;  // the caches
  std::map<std::string, CachedEvents> events_;
  std::map<std::string, CachedProfile> profiles_;
  std::mutex profile_mu_;
};

// The step of a timeline ProfilerHook wrote ("timeline-<step>.json", or ".json.gz"); -1 for any
// other name.
int64_t trace_step(std::string_view name);

// The file name of a run's saved profile, as ProfilerHook writes it.
inline constexpr const char* kRunProfileName = "profile";

}  // namespace stepscope
