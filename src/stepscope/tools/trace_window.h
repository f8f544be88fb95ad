// Big traces in the browser: catapult's viewer needs minutes to import a 100 MB, million-event
// timeline (BENCHMARKS.md), so `stepscope serve` shows such a trace through a window, as XProf
// does: the server indexes the file once and hands the page only the events of the time range
// on screen, down-sampled to the screen's resolution when there are too many.
//
// A TraceIndex is one trace file (a Chrome trace JSON object {"traceEvents": [...], ...} or a
// bare array of events, plain or gzipped), parsed once: per event its time range, phase, track
// and where its text lies in the file, so a window is written by copying the events' own text.
// Its summary is an overview (counts, time range, a density histogram); window(start, end,
// resolution) is a Chrome trace of the events overlapping [start, end] (µs, the file's own
// time base) that imports into catapult with no warnings:
//  - metadata events ("ph":"M") always;
//  - slices (X, and B/E pairs, which travel together) and instant events overlapping the range,
//    whole; counter events in the range;
//  - when the window is not down-sampled, also the flows (s/t/f) all of whose events bind to
//    slices in the window, and the object events (N/O/D: tensors) and async events (b/e/n/S/T/F)
//    of every object or async id whose lifetime overlaps the range, whole (a flow or an object
//    cut in half would be an import warning); a slice's flow v2 ("bind_id", "flow_in",
//    "flow_out") is kept when all the slices with that bind_id are in the window, and otherwise
//    taken out of the slice's text;
//  - down-sampled when more than `max_events` events overlap: per thread, every slice at least a
//    pixel ((end - start) / resolution) long and, of the shorter ones, the longest of each pixel;
//    per counter series the lowest and highest value of each pixel; no flows, objects or async
//    events. The reply says so: the top-level key "stepscope_window" ({start, end, resolution,
//    sampled, events, overlapping, total_events}; catapult lists unknown top-level keys as
//    metadata) beside the file's own top-level keys ("displayTimeUnit" among them).
// Errors name the file (as the caller names it) or the parameter: DataLossError for a file that
// is not valid JSON, InvalidArgumentError for JSON that is not a trace (an event that is not an
// object, a missing or non-numeric "ts"/"dur") and for bad window parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/tools/trace_server.h"

namespace stepscope {

inline constexpr size_t kDefaultWindowMaxEvents = 150000;
inline constexpr int kDefaultSummaryBuckets = 1000;

struct TraceSummary {
  int64_t events = 0;           // all but metadata
  int64_t metadata_events = 0;  // "ph":"M"
  int64_t slices = 0, counters = 0, flows = 0, objects = 0;
  double start_us = 0, end_us = 0;  // first start, last end (0, 0 without events)
  std::vector<int64_t> density;     // events starting in each of the buckets over [start, end]
};

struct TraceWindow {
  std::string json;         // the Chrome trace
  int64_t events = 0;       // events in it, metadata included
  int64_t overlapping = 0;  // events (not metadata) overlapping the range in the file
  bool sampled = false;     // down-sampled (flows and objects left out)
};

class TraceIndex {
 public:
  // Parses `text` (the file's JSON, already gunzipped); `source` names it in errors.
  TraceIndex(std::string text, std::string source);
  // Reads and parses `file` (gunzipped when its name ends in .gz); `source` names it in errors
  // (the path relative to the served directory, so a reply tells no server paths).
  static std::shared_ptr<const TraceIndex> load(const std::filesystem::path& file, const std::string& source);

  TraceSummary summary(int buckets = kDefaultSummaryBuckets) const;
  // {"file", "events", "metadata_events", "slices", "counters", "flows", "objects", "start",
  //  "end", "bucket_us", "density": [...], "index_seconds", "index_bytes"}
  std::string summary_json(int buckets = kDefaultSummaryBuckets) const;
  // InvalidArgumentError naming the parameter for start or end not finite, start > end, or a
  // resolution outside [1, 100000].
  TraceWindow window(double start_us, double end_us, int resolution, size_t max_events = kDefaultWindowMaxEvents) const;

  size_t event_count() const { return events_.size(); }
  // What the index holds in memory (the text and the per-event records).
  size_t memory_bytes() const;
  double index_seconds() const { return index_seconds_; }
  const std::string& source() const { return source_; }

 private:
  struct Event {
    double ts = 0, end = 0;           // µs; end = ts + dur for slices, ts otherwise
    double value = 0;                 // counters: the sum of their args' numbers
    uint32_t offset = 0, length = 0;  // the event's text in text_
    uint32_t track = 0;               // thread (pid, tid) or counter series (pid, name, id)
    uint32_t link = UINT32_MAX;       // B <-> E partner, or flow / object / async group
    uint32_t flow2 = UINT32_MAX;      // the "bind_id" (flow v2) group of a slice
    char ph = 0;
    uint8_t kind = 0;
  };
  void parse();
  void link_next_slice_flows(const std::vector<uint32_t>& flows);
  bool overlaps(const Event& e, double start, double end) const;

  std::string text_, source_;
  std::vector<Event> events_;
  std::vector<std::string_view> other_keys_;       // the other top-level "key": value pairs, as written
  std::vector<std::pair<double, double>> groups_;  // a flow's binding range, an object's lifetime
  std::vector<std::pair<double, double>> flow2_;   // per bind_id: the latest start, the earliest end
  double start_ = 0, end_ = 0, index_seconds_ = 0;
};

// The index of `file` from a process-wide cache keyed by (path, size, modification time): at
// most a few indexes and ~1.5 GB are kept (least recently used out first).
std::shared_ptr<const TraceIndex> cached_trace_index(const std::filesystem::path& file, const std::string& source);

// The replies of "/api/trace_summary/<path>" (`route` "trace_summary") and
// "/api/trace_window/<path>?start=&end=&resolution=[&max_events=]" (`route` "trace_window";
// resolution defaults to 2000, start and end to the trace's range, max_events to
// kDefaultWindowMaxEvents) for `file` (resolved by the server),
// named `relative`. Errors as web_api.h's, {"error": "..."}: 400 naming the parameter when one is
// bad, 422 naming the file when it is not a readable trace.
HttpReply trace_api_reply(const std::filesystem::path& file, const std::string& relative, std::string_view route,
                          std::string_view query);

// Whether the viewer page shows `file` through windows: over ~15 MB of JSON (plain, or gzipped
// at ~8:1); "?mode=window" or "?mode=full" in the viewer's query decides instead.
bool use_windowed_viewer(const std::filesystem::path& file, std::string_view query);

}  // namespace stepscope
