#include "stepscope/tools/run_catalog.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/step_stats.h"
#include "stepscope/train/event_file.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "<prefix><step><suffix>" (suffix one of `suffixes`) -> step; -1 for other names.
int64_t numbered(std::string_view name, std::string_view prefix, std::initializer_list<std::string_view> suffixes) {
  if (name.substr(0, prefix.size()) != prefix) return -1;
  for (std::string_view suffix : suffixes) {
    if (!ends_with(name, suffix) || name.size() <= prefix.size() + suffix.size()) continue;
    const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    int64_t step = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (error == std::errc() && end == digits.data() + digits.size()) return step;
  }
  return -1;
}

int64_t run_metadata_step(std::string_view name) { return numbered(name, "run_metadata-", {".pb", ".pb.gz"}); }
bool is_event_file(std::string_view name) { return name.find("tfevents") != std::string_view::npos; }

int64_t unix_secs(fs::file_time_type t) {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(t).time_since_epoch())
      .count();
}

std::string relative_to(const fs::path& path, const fs::path& root) {
  std::string rel = path.lexically_relative(root).generic_string();
  return rel.empty() ? "." : rel;
}

// The scalars of one event file, up to its end or the first damaged record (`problem` then says
// where). A half-written last record is what a live writer leaves: not a problem.
void read_scalars(const fs::path& file, std::map<std::string, ScalarSeries>& scalars, std::string& problem) {
  std::string bytes;
  try {
    bytes = read_file(file, kDefaultMaxDecompressedBytes, Gunzip::kNever);
  } catch (const std::exception& e) {
    problem = e.what();
    return;
  }
  size_t offset = 0;
  while (offset < bytes.size()) {
    if (bytes.size() - offset < 12) return;  // a header still being written
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[offset + i]);
    if (length > bytes.size() - offset - 12 || bytes.size() - offset - 12 - length < 4) {
      // The record runs past the end: half written, unless its header is damaged.
      uint32_t masked = 0;
      for (int i = 3; i >= 0; --i) masked = (masked << 8) | static_cast<unsigned char>(bytes[offset + 8 + i]);
      if (crc32c_unmask(masked) != crc32c(bytes.data() + offset, 8))
        problem = file.filename().string() + ": damaged record header at offset " + std::to_string(offset);
      return;
    }
    std::vector<Event> events;
    try {
      events = parse_events(std::string_view(bytes).substr(offset, 12 + length + 4), file.filename().string());
    } catch (const std::exception& e) {
      problem = std::string(e.what()) + " (at offset " + std::to_string(offset) + ")";
      return;
    }
    offset += 12 + length + 4;
    for (const Event& event : events) {
      for (const auto& [tag, value] : event.scalars()) {
        ScalarSeries& series = scalars[tag];
        series.steps.push_back(event.step);
        series.values.push_back(value);
        series.wall_times.push_back(event.wall_time);
      }
    }
  }
}

// A step's wall time: its first op's start to its last op's end.
double step_ms(const StepStats& step) {
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const DeviceStepStats& device : step.dev_stats()) {
    for (const NodeExecStats& node : device.node_stats) {
      first = std::min(first, node.all_start_ns);
      last = std::max(last, node.all_start_ns + node.all_end_rel_ns);
    }
  }
  return last >= first ? static_cast<double>(last - first) / 1e6 : 0.0;
}

void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // NaN and Inf losses are shown as gaps
    return;
  }
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, v);
  out.append(buffer, end);
}

void append_files(std::string& out, const std::vector<RunFile>& files) {
  out += '[';
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) out += ',';
    out += "{\"path\":";
    json_out::append_string(out, files[i].path);
    out += ",\"step\":" + std::to_string(files[i].step) + ",\"bytes\":" + std::to_string(files[i].bytes) + "}";
  }
  out += ']';
}

}  // namespace

int64_t trace_step(std::string_view name) { return numbered(name, "timeline-", {".json", ".json.gz"}); }

std::string RunSummary::to_json(size_t max_points_per_series) const {
  std::string out = "{\"path\":";
  json_out::append_string(out, path);
  out += ",\"modified\":" + std::to_string(modified_unix_secs) + ",\"scalars\":{";
  bool first = true;
  for (const auto& [tag, series] : scalars) {
    if (!first) out += ',';
    first = false;
    json_out::append_string(out, tag);
    // Long series are thinned evenly (the last point always kept) to what a chart can show.
    const size_t n = series.steps.size();
    const size_t stride =
        std::max<size_t>(1, (n + max_points_per_series - 1) / std::max<size_t>(1, max_points_per_series));
    out += ":{\"points\":" + std::to_string(n) + ",\"data\":[";
    for (size_t i = 0; i < n; i += stride) {
      const size_t k = (i + stride >= n) ? n - 1 : i;
      if (i) out += ',';
      out += '[' + std::to_string(series.steps[k]) + ',';
      append_number(out, series.values[k]);
      out += ',';
      append_number(out, series.wall_times[k]);
      out += ']';
      if (k == n - 1) break;
    }
    out += "]}";
  }
  out += "},\"traced_step_ms\":[";
  for (size_t i = 0; i < traced_step_ms.size(); ++i) {
    if (i) out += ',';
    out += '[' + std::to_string(traced_step_ms[i].first) + ',';
    append_number(out, traced_step_ms[i].second);
    out += ']';
  }
  out += "],\"step_timing_source\":";
  json_out::append_string(out, step_timing_source);
  out += ",\"traces\":";
  append_files(out, traces);
  out += ",\"run_metadata\":";
  append_files(out, run_metadata);
  out += ",\"profile\":";
  if (profile.empty())
    out += "null";
  else
    json_out::append_string(out, profile);
  out += ",\"problems\":[";
  for (size_t i = 0; i < problems.size(); ++i) {
    if (i) out += ',';
    json_out::append_string(out, problems[i]);
  }
  return out + "]}";
}

RunCatalog::RunCatalog(fs::path root) : root_(std::move(root)) {}

RunCatalog::FileVersion RunCatalog::version_of(const fs::path& file) {
  std::error_code error;
  FileVersion v;
  v.bytes = static_cast<int64_t>(fs::file_size(file, error));
  if (error) return {};
  v.modified_ns = fs::last_write_time(file, error).time_since_epoch().count();
  return v;
}

std::vector<RunEntry> RunCatalog::runs(size_t max_runs) const {
  std::map<std::string, RunEntry> found;
  std::error_code error;
  auto note = [&](const fs::path& dir) -> RunEntry& {
    RunEntry& run = found[relative_to(dir, root_)];
    run.path = relative_to(dir, root_);
    return run;
  };
  for (auto it = fs::recursive_directory_iterator(root_, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it.depth() > 16) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(error) || it->is_symlink(error)) continue;
    const std::string name = it->path().filename().string();
    const bool event = is_event_file(name), trace = trace_step(name) >= 0, profile = name == kRunProfileName;
    if (!event && !trace && !profile) continue;
    const fs::path dir = it->path().parent_path();
    if (found.size() >= max_runs && !found.count(relative_to(dir, root_))) continue;
    RunEntry& run = note(dir);
    run.event_files += event;
    run.traces += trace;
    run.has_profile |= profile;
    run.modified_unix_secs = std::max(run.modified_unix_secs, unix_secs(it->last_write_time(error)));
  }
  std::vector<RunEntry> out;
  for (auto& [path, run] : found) out.push_back(std::move(run));
  return out;
}

const RunCatalog::CachedProfile& RunCatalog::load_profile(const fs::path& file) {
  const FileVersion version = version_of(file);
  auto it = profiles_.find(file.string());
  if (it != profiles_.end() && it->second.version == version) return it->second;
  if (profiles_.size() >= 8) profiles_.clear();  // a bound on memory: the pages ask for one or two at a time
  CachedProfile loaded;
  loaded.version = version;
  loaded.profiler = std::make_shared<Profiler>(Profiler::load(file));
  for (int64_t step : loaded.profiler->steps())
    loaded.step_ms.emplace_back(step, step_ms(loaded.profiler->step_stats(step)));
  loaded.step_timings = loaded.profiler->step_timings().records();
  return profiles_[file.string()] = std::move(loaded);
}

std::shared_ptr<Profiler> RunCatalog::profile(const fs::path& dir) {
  const fs::path file = dir / kRunProfileName;
  std::error_code error;
  if (!fs::is_regular_file(file, error))
    throw NotFoundError("run " + relative_to(dir, root_) + " has no saved profile (ProfilerHook writes " +
                        std::string(kRunProfileName) + ")");
  std::lock_guard lock(mu_);
  return load_profile(file).profiler;
}

RunSummary RunCatalog::summary(const fs::path& dir) {
  RunSummary summary;
  summary.path = relative_to(dir, root_);
  std::vector<fs::path> event_files;
  std::error_code error;
  for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::directory_iterator(); it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const std::string name = it->path().filename().string();
    summary.modified_unix_secs = std::max(summary.modified_unix_secs, unix_secs(it->last_write_time(error)));
    const int64_t bytes = static_cast<int64_t>(it->file_size(error));
    if (is_event_file(name)) {
      event_files.push_back(it->path());
    } else if (const int64_t step = trace_step(name); step >= 0 && name.find(".tmp") == std::string::npos) {
      summary.traces.push_back({relative_to(it->path(), root_), step, bytes});
    } else if (const int64_t meta_step = run_metadata_step(name); meta_step >= 0) {
      summary.run_metadata.push_back({relative_to(it->path(), root_), meta_step, bytes});
    } else if (name == kRunProfileName) {
      summary.profile = relative_to(it->path(), root_);
    }
  }
  if (error) throw NotFoundError("run directory " + summary.path + " cannot be read: " + error.message());
  auto by_step = [](const RunFile& a, const RunFile& b) { return std::tie(a.step, a.path) < std::tie(b.step, b.path); };
  std::sort(summary.traces.begin(), summary.traces.end(), by_step);
  std::sort(summary.run_metadata.begin(), summary.run_metadata.end(), by_step);
  std::sort(event_files.begin(), event_files.end());  // TensorBoard's order: by name

  std::lock_guard lock(mu_);
  for (const fs::path& file : event_files) {
    CachedEvents& cached = events_[file.string()];
    const FileVersion version = version_of(file);
    if (!(cached.version == version)) {
      cached = {version, {}, {}};
      read_scalars(file, cached.scalars, cached.problem);
    }
    if (!cached.problem.empty()) summary.problems.push_back(cached.problem);
    for (const auto& [tag, series] : cached.scalars) {
      ScalarSeries& into = summary.scalars[tag];
      into.steps.insert(into.steps.end(), series.steps.begin(), series.steps.end());
      into.values.insert(into.values.end(), series.values.begin(), series.values.end());
      into.wall_times.insert(into.wall_times.end(), series.wall_times.begin(), series.wall_times.end());
    }
  }
  if (summary.scalars.count("step_time/wall_ms")) summary.step_timing_source = "scalars";
  if (!summary.profile.empty()) {
    try {
      const CachedProfile& profile = load_profile(dir / kRunProfileName);
      summary.traced_step_ms = profile.step_ms;
      if (!summary.scalars.count("step_time/wall_ms") && !profile.step_timings.empty()) {
        // The profile's step timings, as StepTimingHook would have written them.
        summary.step_timing_source = "profile";
        for (const auto& [tag, field] :
             {std::pair{"wall_ms", &StepTimingRecord::wall_ns}, std::pair{"input_ms", &StepTimingRecord::input_ns},
              std::pair{"ops_ms", &StepTimingRecord::busy_ns}, std::pair{"idle_ms", &StepTimingRecord::idle_ns},
              std::pair{"hooks_ms", &StepTimingRecord::hooks_ns}}) {
          ScalarSeries& series = summary.scalars[std::string("step_time/") + tag];
          for (const StepTimingRecord& r : profile.step_timings) {
            series.steps.push_back(r.step);
            series.values.push_back(static_cast<double>(r.*field) / 1e6);
            series.wall_times.push_back(0);
          }
        }
      }
    } catch (const std::exception& e) {
      summary.problems.push_back(e.what());
    }
  }
  return summary;
}

}  // namespace stepscope
