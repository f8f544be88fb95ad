// Every step's timing in a profile: RunMetadata::step_timing (the executor's wall, busy, input
// and idle time) plus the hooks' own time, for every run ProfilerHook sees, not only the traced
// ones. "Step time over the run" and "input-bound or compute-bound" then come from the profile
// alone (`stepscope prof timing`, the advisor, `stepscope serve`), as they do from
// StepTimingHook's scalars.
//
// A bounded ring: past its capacity the oldest steps go (counted in dropped()), so a run of
// days keeps a profile of bounded size. add() allocates only while the ring grows to capacity
// (its first 1024 records are reserved up front).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stepscope {

struct StepTimingRecord {
  int64_t step = 0;
  int64_t wall_ns = 0;   // the executor's part of Session::run
  int64_t busy_ns = 0;   // summed over its threads: running nodes
  int64_t input_ns = 0;  // of which in input-pipeline ops (IteratorGetNext)
  int64_t idle_ns = 0;   // no thread running a node while the step was unfinished
  int64_t hooks_ns = 0;  // the hooks' own time around the step (outside wall_ns)
  bool operator==(const StepTimingRecord&) const = default;
};

// XProf's input-bound thresholds (share of step time waiting on input): over 20% highly, 5% to
// 20% moderately, under 5% not input-bound; the text the advisor and the CLI print.
const char* input_bound_verdict(double input_share);

class StepTimings {
 public:
  static constexpr size_t kDefaultCapacity = 100000;  // ~4.8 MB of records
  explicit StepTimings(size_t capacity = kDefaultCapacity);

  void add(const StepTimingRecord& record);
  // Oldest first.
  std::vector<StepTimingRecord> records() const;
  size_t size() const { return ring_.size(); }
  bool empty() const { return ring_.empty(); }
  size_t capacity() const { return capacity_; }
  int64_t dropped() const { return dropped_; }
  // The newest record of `step`, if kept.
  std::optional<StepTimingRecord> find(int64_t step) const;
  // Records read back from a file (oldest first) and the count it says were dropped.
  void assign(std::vector<StepTimingRecord> records, int64_t dropped);

  struct Summary {
    size_t steps = 0;
    double median_wall_ms = 0, p90_wall_ms = 0, max_wall_ms = 0, mean_wall_ms = 0;
    double input_share = 0;  // summed input / summed wall
    double idle_share = 0;   // summed idle / summed wall
    double hooks_share = 0;  // summed hooks / (summed wall + summed hooks)
    int64_t slowest_step = 0;
  };
  Summary summarize() const;
  // A few lines: steps, median / p90 / max step time, the shares and the verdict.
  std::string summary_text() const;
  // {"steps": n, "dropped": n, "summary": {...}, "records": [[step, wall, busy, input, idle, hooks], ...]}
  // (nanoseconds).
  std::string to_json() const;

 private:
  size_t capacity_;
  std::vector<StepTimingRecord> ring_;
  size_t next_ = 0;  // once full: the oldest, overwritten next
  int64_t dropped_ = 0;
};

}  // namespace stepscope
