#include "stepscope/profiler/tfprof/step_timings.h"

#include <algorithm>
#include <cstdio>

#include "stepscope/base/error.h"

namespace stepscope {

const char* input_bound_verdict(double input_share) {
  return input_share > 0.20    ? "highly input-bound (over 20%)"
         : input_share >= 0.05 ? "moderately input-bound (5% to 20%)"
                               : "not input-bound (under 5%)";
}

StepTimings::StepTimings(size_t capacity) : capacity_(capacity) {
  if (capacity == 0) throw InvalidArgumentError("StepTimings: capacity must be at least 1");
  // The first 1024 runs (48 KiB) add nothing to the heap: a hook's quiet runs allocate nothing.
  ring_.reserve(std::min<size_t>(capacity, 1024));
}

void StepTimings::add(const StepTimingRecord& record) {
  if (ring_.size() < capacity_) {
    ring_.push_back(record);
    return;
  }
  ring_[next_] = record;
  next_ = (next_ + 1) % capacity_;
  ++dropped_;
}

std::vector<StepTimingRecord> StepTimings::records() const {
  std::vector<StepTimingRecord> out;
  out.reserve(ring_.size());
  out.insert(out.end(), ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

void StepTimings::assign(std::vector<StepTimingRecord> records, int64_t dropped) {
  if (records.size() > capacity_) {
    dropped += static_cast<int64_t>(records.size() - capacity_);
    records.erase(records.begin(), records.end() - static_cast<std::ptrdiff_t>(capacity_));
  }
  ring_ = std::move(records);
  next_ = 0;
  dropped_ = dropped;
}

std::optional<StepTimingRecord> StepTimings::find(int64_t step) const {
  // Newest first: from just before next_ back round the ring.
  for (size_t k = 0; k < ring_.size(); ++k) {
    const StepTimingRecord& r = ring_[(next_ + ring_.size() - 1 - k) % ring_.size()];
    if (r.step == step) return r;
  }
  return std::nullopt;
}

StepTimings::Summary StepTimings::summarize() const {
  Summary s;
  s.steps = ring_.size();
  if (ring_.empty()) return s;
  std::vector<int64_t> walls;
  walls.reserve(ring_.size());
  double wall = 0, input = 0, idle = 0, hooks = 0;
  const StepTimingRecord* slowest = &ring_.front();
  for (const StepTimingRecord& r : ring_) {
    walls.push_back(r.wall_ns);
    wall += static_cast<double>(r.wall_ns);
    input += static_cast<double>(r.input_ns);
    idle += static_cast<double>(r.idle_ns);
    hooks += static_cast<double>(r.hooks_ns);
    if (r.wall_ns > slowest->wall_ns) slowest = &r;
  }
  std::sort(walls.begin(), walls.end());
  auto at = [&](double q) { return static_cast<double>(walls[static_cast<size_t>(q * (walls.size() - 1))]) / 1e6; };
  s.median_wall_ms = at(0.5);
  s.p90_wall_ms = at(0.9);
  s.max_wall_ms = static_cast<double>(walls.back()) / 1e6;
  s.mean_wall_ms = wall / static_cast<double>(walls.size()) / 1e6;
  s.input_share = wall > 0 ? input / wall : 0;
  s.idle_share = wall > 0 ? idle / wall : 0;
  s.hooks_share = wall + hooks > 0 ? hooks / (wall + hooks) : 0;
  s.slowest_step = slowest->step;
  return s;
}

std::string StepTimings::summary_text() const {
  if (ring_.empty()) return "no step timings\n";
  const Summary s = summarize();
  const std::vector<StepTimingRecord> all = records();
  char buffer[512];
  std::snprintf(buffer, sizeof buffer,
                "%zu steps (%lld to %lld)%s\n"
                "step time: median %.3f ms, p90 %.3f ms, max %.3f ms (step %lld), mean %.3f ms\n"
                "input: %.1f%% of the step time, %s\n"
                "idle: %.1f%% of the step time; hooks: %.1f%% of the time around the steps\n",
                s.steps, static_cast<long long>(all.front().step), static_cast<long long>(all.back().step),
                dropped_ > 0 ? (" (" + std::to_string(dropped_) + " older steps dropped)").c_str() : "",
                s.median_wall_ms, s.p90_wall_ms, s.max_wall_ms, static_cast<long long>(s.slowest_step), s.mean_wall_ms,
                100 * s.input_share, input_bound_verdict(s.input_share), 100 * s.idle_share, 100 * s.hooks_share);
  return buffer;
}

std::string StepTimings::to_json() const {
  const Summary s = summarize();
  char summary[512];
  std::snprintf(summary, sizeof summary,
                "{\"median_wall_ms\":%.6f,\"p90_wall_ms\":%.6f,\"max_wall_ms\":%.6f,\"mean_wall_ms\":%.6f,"
                "\"slowest_step\":%lld,\"input_share\":%.6f,\"idle_share\":%.6f,\"hooks_share\":%.6f,"
                "\"verdict\":\"%s\"}",
                s.median_wall_ms, s.p90_wall_ms, s.max_wall_ms, s.mean_wall_ms, static_cast<long long>(s.slowest_step),
                s.input_share, s.idle_share, s.hooks_share, s.steps ? input_bound_verdict(s.input_share) : "");
  std::string out = "{\"steps\":" + std::to_string(s.steps) + ",\"dropped\":" + std::to_string(dropped_) +
                    ",\"summary\":" + summary + ",\"records\":[";
  bool first = true;
  for (const StepTimingRecord& r : records()) {
    out += first ? "[" : ",[";
    first = false;
    out += std::to_string(r.step) + "," + std::to_string(r.wall_ns) + "," + std::to_string(r.busy_ns) + "," +
           std::to_string(r.input_ns) + "," + std::to_string(r.idle_ns) + "," + std::to_string(r.hooks_ns) + "]";
  }
  return out + "]}";
}

}  // namespace stepscope
