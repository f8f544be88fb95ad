#include "stepscope/tools/trace_window.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

enum Kind : uint8_t { kMeta, kSlice, kSliceEnd, kInstant, kCounter, kFlow, kObject, kAsync };

constexpr int kMaxDepth = 256;
constexpr uint32_t kNone = UINT32_MAX;

// A strict JSON reader over the file's text that returns the raw text of what it reads (the
// window copies events as written). Errors give the byte offset.
struct Cursor {
  const char* begin;
  const char* p;
  const char* end;
  const std::string& source;

  [[noreturn]] void fail(const std::string& what) const {
    throw DataLossError(source + ": not valid JSON at byte " + std::to_string(p - begin) + ": " + what);
  }
  void ws() {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  }
  bool at(char c) {
    ws();
    return p < end && *p == c;
  }
  void expect(char c) {
    ws();
    if (p >= end || *p != c) fail(std::string("expected '") + c + "'");
    ++p;
  }
  // The string's text between its quotes, escapes as written.
  std::string_view string() {
    ws();
    if (p >= end || *p != '"') fail("expected a string");
    const char* s = ++p;
    for (;;) {
      while (p < end && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20) ++p;
      if (p >= end) fail("unterminated string");
      if (*p == '"') break;
      if (*p != '\\') fail("control character in a string");
      if (++p >= end) fail("unterminated string");
      if (*p == 'u') {
        for (int i = 1; i <= 4; ++i)
          if (p + i >= end || !std::isxdigit(static_cast<unsigned char>(p[i]))) fail("bad \\u escape");
        p += 5;
      } else if (std::string_view("\"\\/bfnrt").find(*p) != std::string_view::npos) {
        ++p;
      } else {
        fail("bad escape in a string");
      }
    }
    return {s, static_cast<size_t>(p++ - s)};
  }
  void digits() {
    if (p >= end || !std::isdigit(static_cast<unsigned char>(*p))) fail("expected a digit");
    while (p < end && std::isdigit(static_cast<unsigned char>(*p))) ++p;
  }
  void number() {
    if (p < end && *p == '-') ++p;
    if (p < end && *p == '0')
      ++p;
    else
      digits();
    if (p < end && *p == '.') {
      ++p;
      digits();
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      digits();
    }
  }
  void literal(std::string_view word) {
    if (static_cast<size_t>(end - p) < word.size() || std::string_view(p, word.size()) != word)
      fail("expected a value");
    p += word.size();
  }
  // Any value, validated; its raw text.
  // The items of an object or an array, `p` at its opening bracket: each read by `item`, comma
  // separated, up to `close`.
  template <typename Item>
  void items(char close, Item&& item) {
    ++p;
    if (at(close)) {
      ++p;
      return;
    }
    for (;;) {
      item();
      ws();
      if (p < end && *p == ',') {
        ++p;
        continue;
      }
      expect(close);
      return;
    }
  }

  std::string_view value(int depth = 0) {
    ws();
    if (p >= end) fail("unexpected end of the data");
    const char* s = p;
    switch (*p) {
      case '"':
        string();
        break;
      case '{':
        if (depth >= kMaxDepth) fail("nested too deeply");
        items('}', [&] {
          string();
          expect(':');
          value(depth + 1);
        });
        break;
      case '[':
        if (depth >= kMaxDepth) fail("nested too deeply");
        items(']', [&] { value(depth + 1); });
        break;
      case 't':
        literal("true");
        break;
      case 'f':
        literal("false");
        break;
      case 'n':
        literal("null");
        break;
      default:
        if (*p != '-' && !std::isdigit(static_cast<unsigned char>(*p))) fail("expected a value");
        number();
    }
    return {s, static_cast<size_t>(p - s)};
  }
};

bool is_number(std::string_view raw) {
  return !raw.empty() && (raw[0] == '-' || std::isdigit(static_cast<unsigned char>(raw[0])));
}

double to_double(std::string_view raw) {
  double v = 0;
  std::from_chars(raw.data(), raw.data() + raw.size(), v);
  return v;
}

std::string fixed3(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3f", v);
  return buffer;
}

class Interner {
 public:
  uint32_t operator()(std::string key) {
    auto [it, added] = ids_.try_emplace(std::move(key), static_cast<uint32_t>(ids_.size()));
    return it->second;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

// The event object `event` without its flow v2 members ("bind_id", "flow_in", "flow_out").
void append_without_flow_v2(std::string& out, std::string_view event, const std::string& source) {
  Cursor in{event.data(), event.data(), event.data() + event.size(), source};
  in.expect('{');
  out += '{';
  bool first = true;
  while (!in.at('}')) {
    in.ws();
    const char* begin = in.p;
    const std::string_view key = in.string();
    in.expect(':');
    in.value(1);
    if (key != "bind_id" && key != "flow_in" && key != "flow_out") {
      if (!first) out += ',';
      out.append(begin, static_cast<size_t>(in.p - begin));
      first = false;
    }
    if (in.at(',')) ++in.p;
  }
  out += '}';
}

std::string key_of(char tag, std::initializer_list<std::string_view> parts) {
  std::string key(1, tag);
  for (std::string_view part : parts) {
    key += part;
    key += '\x1f';
  }
  return key;
}

}  // namespace

TraceIndex::TraceIndex(std::string text, std::string source) : text_(std::move(text)), source_(std::move(source)) {
  const auto t0 = std::chrono::steady_clock::now();
  if (text_.size() >= UINT32_MAX) throw ResourceExhaustedError(source_ + ": over 4 GiB of JSON: too big to index");
  parse();
  index_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<const TraceIndex> TraceIndex::load(const fs::path& file, const std::string& source) {
  std::string text;
  try {
    text = read_file(file);
  } catch (const Error& e) {
    // Name the file as the caller does (a server's reply tells no server paths).
    std::string message = e.what();
    const std::string full = file.string();
    for (size_t at = message.find(full); at != std::string::npos; at = message.find(full, at + source.size()))
      message.replace(at, full.size(), source);
    throw_error(e.code(), message);
  }
  return std::make_shared<const TraceIndex>(std::move(text), source);
}

void TraceIndex::parse() {
  Cursor in{text_.data(), text_.data(), text_.data() + text_.size(), source_};
  Interner tracks, groups, flows2;
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_begins;  // per thread, B events not yet ended
  std::vector<uint32_t> next_slice_flows;                           // "f" without "bp":"e"
  bool have_events = false;

  auto parse_events = [&] {
    in.expect('[');
    if (in.at(']')) {
      ++in.p;
      return;
    }
    for (size_t i = 0;; ++i) {
      in.ws();
      if (!in.at('{')) {
        in.value();  // a syntax error is reported as such
        throw InvalidArgumentError(source_ + ": traceEvents[" + std::to_string(i) +
                                   "] is not an object: not a Chrome trace");
      }
      const char* event_begin = in.p;
      std::string_view ph, ts, dur, pid, tid, id, id2, cat, name, bp, args, bind_id;
      in.items('}', [&] {
        const std::string_view key = in.string();
        in.expect(':');
        const std::string_view value = in.value(1);
        if (key.size() <= 4) {
          if (key == "ph")
            ph = value;
          else if (key == "ts")
            ts = value;
          else if (key == "dur")
            dur = value;
          else if (key == "pid")
            pid = value;
          else if (key == "tid")
            tid = value;
          else if (key == "id")
            id = value;
          else if (key == "id2")
            id2 = value;
          else if (key == "cat")
            cat = value;
          else if (key == "name")
            name = value;
          else if (key == "bp")
            bp = value;
          else if (key == "args")
            args = value;
        } else if (key == "bind_id") {
          bind_id = value;
        }
      });
      Event e;
      e.offset = static_cast<uint32_t>(event_begin - in.begin);
      e.length = static_cast<uint32_t>(in.p - event_begin);
      e.ph = ph.size() == 3 ? ph[1] : 0;
      const auto index = static_cast<uint32_t>(events_.size());
      auto bad = [&](const std::string& what) {
        throw InvalidArgumentError(source_ + ": traceEvents[" + std::to_string(i) + "] (ph " + std::string(ph) +
                                   "): " + what);
      };
      if (e.ph == 'M') {
        e.kind = kMeta;
        events_.push_back(e);
      } else {
        if (!is_number(ts)) bad(ts.empty() ? "no \"ts\"" : "\"ts\" is not a number: " + std::string(ts));
        e.ts = e.end = to_double(ts);
        if (!dur.empty() && !is_number(dur)) bad("\"dur\" is not a number: " + std::string(dur));
        const uint32_t thread = tracks(key_of('T', {pid, tid}));
        e.track = thread;
        switch (e.ph) {
          case 'X':
            e.kind = kSlice;
            if (!dur.empty()) e.end = e.ts + std::max(0.0, to_double(dur));
            break;
          case 'B':
            e.kind = kInstant;  // until its E comes
            open_begins[thread].push_back(index);
            break;
          case 'E': {
            e.kind = kInstant;
            auto& open = open_begins[thread];
            if (!open.empty()) {
              Event& begin = events_[open.back()];
              open.pop_back();
              begin.kind = kSlice;
              begin.end = std::max(begin.ts, e.ts);
              begin.link = index;
              e.kind = kSliceEnd;
              e.ts = begin.ts;
              e.end = begin.end;
              e.link = static_cast<uint32_t>(&begin - events_.data());
            }
            break;
          }
          case 'C': {
            e.kind = kCounter;
            e.track = tracks(key_of('C', {pid, name, id}));
            if (!args.empty() && args[0] == '{') {
              Cursor a{args.data(), args.data() + 1, args.data() + args.size(), source_};
              while (!a.at('}')) {
                a.string();
                a.expect(':');
                const std::string_view v = a.value(1);
                if (is_number(v)) e.value += to_double(v);
                if (a.at(',')) ++a.p;
              }
            }
            break;
          }
          case 's':
          case 't':
          case 'f':
            e.kind = kFlow;
            e.link = groups(key_of('F', {cat, name, id, id2}));
            if (e.ph == 'f' && bp != "\"e\"") next_slice_flows.push_back(index);
            break;
          case 'N':
          case 'O':
          case 'D':
            e.kind = kObject;
            e.link = groups(key_of('O', {pid, id, id2}));
            break;
          case 'b':
          case 'e':
          case 'n':
          case 'S':
          case 'T':
          case 'p':
          case 'F':
            e.kind = kAsync;
            e.link = groups(key_of('A', {cat, id, id2}));
            break;
          default:
            e.kind = kInstant;
        }
        if (!bind_id.empty()) e.flow2 = flows2(key_of('V', {bind_id}));
        if (e.link != kNone && (e.kind == kFlow || e.kind == kObject || e.kind == kAsync)) {
          if (e.link >= groups_.size())
            groups_.resize(e.link + 1,
                           {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
          groups_[e.link].first = std::min(groups_[e.link].first, e.ts);
          groups_[e.link].second = std::max(groups_[e.link].second, e.ts);
        }
        events_.push_back(e);
      }
      in.ws();
      if (in.p < in.end && *in.p == ',') {
        ++in.p;
        continue;
      }
      in.expect(']');
      break;
    }
  };

  in.ws();
  if (in.at('[')) {
    parse_events();
    have_events = true;
  } else if (in.at('{')) {
    in.items('}', [&] {
      in.ws();
      const char* key_begin = in.p;
      const std::string_view key = in.string();
      in.expect(':');
      if (key == "traceEvents") {
        if (have_events) in.fail("a second \"traceEvents\"");
        if (!in.at('[')) {
          in.value();
          throw InvalidArgumentError(source_ + ": \"traceEvents\" is not an array: not a Chrome trace");
        }
        parse_events();
        have_events = true;
      } else {
        in.value(1);
        if (key != "stepscope_window") other_keys_.emplace_back(key_begin, static_cast<size_t>(in.p - key_begin));
      }
    });
  } else {
    if (in.p == in.end) in.fail("the file is empty");
    in.value();
    throw InvalidArgumentError(source_ + ": neither a JSON object nor an array: not a Chrome trace");
  }
  in.ws();
  if (in.p != in.end) in.fail("data after the end of the trace");
  if (!have_events) throw InvalidArgumentError(source_ + ": no \"traceEvents\" array: not a Chrome trace");
  link_next_slice_flows(next_slice_flows);
}

void TraceIndex::link_next_slice_flows(const std::vector<uint32_t>& flows) {
  // An "f" without "bp":"e" binds to the next slice that begins on its thread: the flow is whole
  // in a window only when that slice is in it too.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Event& e : events_) {
    if (e.kind == kMeta) continue;
    lo = std::min(lo, e.ts);
    hi = std::max(hi, e.end);
  }
  if (lo <= hi) start_ = lo, end_ = hi;
  for (const Event& e : events_) {
    if (e.flow2 == kNone) continue;
    if (e.flow2 >= flow2_.size())
      flow2_.resize(e.flow2 + 1, {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()});
    flow2_[e.flow2].first = std::max(flow2_[e.flow2].first, e.ts);
    flow2_[e.flow2].second = std::min(flow2_[e.flow2].second, e.end);
  }
  if (flows.empty()) return;
  std::unordered_map<uint32_t, std::vector<double>> starts;
  for (uint32_t i : flows) starts[events_[i].track];
  for (const Event& e : events_) {
    if (e.kind != kSlice) continue;
    if (auto it = starts.find(e.track); it != starts.end()) it->second.push_back(e.ts);
  }
  for (auto& [track, v] : starts) std::sort(v.begin(), v.end());
  for (uint32_t i : flows) {
    const Event& e = events_[i];
    const std::vector<double>& v = starts[e.track];
    const auto next = std::lower_bound(v.begin(), v.end(), e.ts);
    const double bound = next == v.end() ? std::numeric_limits<double>::infinity() : *next;
    groups_[e.link].second = std::max(groups_[e.link].second, bound);
  }
}

bool TraceIndex::overlaps(const Event& e, double start, double end) const { return e.ts <= end && e.end >= start; }

size_t TraceIndex::memory_bytes() const {
  size_t bytes = text_.capacity() + events_.capacity() * sizeof(Event) + groups_.capacity() * sizeof(groups_[0]) +
                 other_keys_.capacity() * sizeof(std::string_view) + source_.capacity();
  return bytes;
}

TraceSummary TraceIndex::summary(int buckets) const {
  TraceSummary s;
  buckets = std::clamp(buckets, 1, 100000);
  s.start_us = start_;
  s.end_us = end_;
  s.density.assign(static_cast<size_t>(buckets), 0);
  const double width = (end_ - start_) / buckets;
  std::vector<char> seen_group(groups_.size(), 0);
  s.flows = static_cast<int64_t>(flow2_.size());
  for (const Event& e : events_) {
    switch (e.kind) {
      case kMeta:
        ++s.metadata_events;
        continue;
      case kSlice:
        ++s.slices;
        break;
      case kCounter:
        ++s.counters;
        break;
      case kFlow:
        s.flows += !seen_group[e.link];
        seen_group[e.link] = 1;
        break;
      case kObject:
        s.objects += !seen_group[e.link];
        seen_group[e.link] = 1;
        break;
      default:
        break;
    }
    ++s.events;
    const double b = width > 0 ? (e.ts - start_) / width : 0;  // NaN for a range past a double's
    ++s.density[b >= 0 ? static_cast<size_t>(std::min(b, buckets - 1.0)) : 0];
  }
  return s;
}

std::string TraceIndex::summary_json(int buckets) const {
  const TraceSummary s = summary(buckets);
  std::string json = "{\"file\":";
  json_out::append_string(json, source_);
  json += ",\"events\":" + std::to_string(s.events) + ",\"metadata_events\":" + std::to_string(s.metadata_events) +
          ",\"slices\":" + std::to_string(s.slices) + ",\"counters\":" + std::to_string(s.counters) +
          ",\"flows\":" + std::to_string(s.flows) + ",\"objects\":" + std::to_string(s.objects) +
          ",\"start\":" + fixed3(s.start_us) + ",\"end\":" + fixed3(s.end_us) +
          ",\"bucket_us\":" + fixed3((s.end_us - s.start_us) / static_cast<double>(s.density.size())) +
          ",\"index_seconds\":" + fixed3(index_seconds_) + ",\"index_bytes\":" + std::to_string(memory_bytes()) +
          ",\"density\":[";
  for (size_t i = 0; i < s.density.size(); ++i) {
    if (i) json += ',';
    json += std::to_string(s.density[i]);
  }
  return json + "]}";
}

TraceWindow TraceIndex::window(double start, double end, int resolution, size_t max_events) const {
  if (!std::isfinite(start)) throw InvalidArgumentError(source_ + ": window start is not a finite number");
  if (!std::isfinite(end)) throw InvalidArgumentError(source_ + ": window end is not a finite number");
  if (start > end)
    throw InvalidArgumentError(source_ + ": window start " + fixed3(start) + " is after its end " + fixed3(end));
  if (resolution < 1 || resolution > 100000)
    throw InvalidArgumentError(source_ + ": window resolution " + std::to_string(resolution) +
                               " is outside [1, 100000]");
  TraceWindow w;
  for (const Event& e : events_)
    if (e.kind != kMeta && e.kind != kSliceEnd && overlaps(e, start, end))
      w.overlapping += e.kind == kSlice && e.link != kNone ? 2 : 1;
  w.sampled = static_cast<size_t>(w.overlapping) > max_events;

  std::vector<uint32_t> chosen;
  auto choose = [&](uint32_t i) {
    chosen.push_back(i);
    const Event& e = events_[i];
    if (e.kind == kSlice && e.link != kNone) chosen.push_back(e.link);  // B's E
  };
  const auto n = static_cast<uint32_t>(events_.size());
  if (!w.sampled) {
    for (uint32_t i = 0; i < n; ++i) {
      const Event& e = events_[i];
      switch (e.kind) {
        case kMeta:
          chosen.push_back(i);
          break;
        case kSlice:
        case kInstant:
        case kCounter:
          if (overlaps(e, start, end)) choose(i);
          break;
        case kFlow:
          if (groups_[e.link].first >= start && groups_[e.link].second <= end) chosen.push_back(i);
          break;
        case kObject:
        case kAsync:
          if (groups_[e.link].first <= end && groups_[e.link].second >= start) chosen.push_back(i);
          break;
        default:
          break;
      }
    }
  } else {
    const double pixel = (end - start) / resolution;
    auto bucket_of = [&](double ts) -> uint64_t {
      const double b = pixel > 0 ? (ts - start) / pixel : 0;
      return b >= 0 ? static_cast<uint64_t>(std::min(b, resolution - 1.0)) : 0;
    };
    // (track, pixel) -> the longest short slice / instant; (series, pixel) -> lowest, highest.
    std::unordered_map<uint64_t, uint32_t> longest, lowest, highest;
    for (uint32_t i = 0; i < n; ++i) {
      const Event& e = events_[i];
      if (e.kind == kMeta) {
        chosen.push_back(i);
        continue;
      }
      if (!overlaps(e, start, end)) continue;
      const uint64_t key = (uint64_t{e.track} << 32) | bucket_of(std::max(e.ts, start));
      if (e.kind == kSlice || e.kind == kInstant) {
        if (e.kind == kSlice && e.end - e.ts >= pixel) {
          choose(i);
          continue;
        }
        auto [it, added] = longest.try_emplace(key, i);
        if (!added && e.end - e.ts > events_[it->second].end - events_[it->second].ts) it->second = i;
      } else if (e.kind == kCounter) {
        auto [lo, added_lo] = lowest.try_emplace(key, i);
        if (!added_lo && e.value < events_[lo->second].value) lo->second = i;
        auto [hi, added_hi] = highest.try_emplace(key, i);
        if (!added_hi && e.value > events_[hi->second].value) hi->second = i;
      }
    }
    for (const auto& [key, i] : longest) choose(i);
    for (const auto& [key, i] : lowest) chosen.push_back(i);
    for (const auto& [key, i] : highest) chosen.push_back(i);
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  w.events = static_cast<int64_t>(chosen.size());

  size_t bytes = 256;
  for (uint32_t i : chosen) bytes += events_[i].length + 1;
  for (std::string_view kv : other_keys_) bytes += kv.size() + 1;
  w.json.reserve(bytes);
  w.json += "{\"traceEvents\":[";
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (k) w.json += ',';
    const Event& e = events_[chosen[k]];
    const std::string_view text(text_.data() + e.offset, e.length);
    // A v2 flow is kept when every slice with its bind_id overlaps the window (so is in it).
    if (e.flow2 != kNone && (w.sampled || flow2_[e.flow2].first > end || flow2_[e.flow2].second < start))
      append_without_flow_v2(w.json, text, source_);
    else
      w.json += text;
  }
  w.json += ']';
  for (std::string_view kv : other_keys_) {
    w.json += ',';
    w.json += kv;
  }
  w.json += ",\"stepscope_window\":{\"start\":" + fixed3(start) + ",\"end\":" + fixed3(end) +
            ",\"resolution\":" + std::to_string(resolution) + ",\"sampled\":" + (w.sampled ? "true" : "false") +
            ",\"events\":" + std::to_string(w.events) + ",\"overlapping\":" + std::to_string(w.overlapping) +
            ",\"total_events\":" + std::to_string(events_.size()) + "}}";
  return w;
}

// ----- The server's cache and routes ----------------------------------------------------------

namespace {

constexpr size_t kCacheEntries = 3;
constexpr size_t kCacheBytes = size_t{1536} << 20;

struct CacheEntry {
  fs::path path;
  uintmax_t size;
  fs::file_time_type modified;
  std::shared_ptr<const TraceIndex> index;
  uint64_t used;
};

std::mutex cache_mu;
std::vector<CacheEntry> cache;
uint64_t cache_clock = 0;

}  // namespace

std::shared_ptr<const TraceIndex> cached_trace_index(const fs::path& file, const std::string& source) {
  std::error_code error;
  const uintmax_t size = fs::file_size(file, error);
  if (error) throw NotFoundError(source + ": cannot read the file's size");
  const fs::file_time_type modified = fs::last_write_time(file, error);
  // One index is built at a time: two requests for a new big file wait for one parse.
  std::lock_guard lock(cache_mu);
  for (CacheEntry& entry : cache) {
    if (entry.path == file && entry.size == size && entry.modified == modified) {
      entry.used = ++cache_clock;
      return entry.index;
    }
  }
  std::erase_if(cache, [&](const CacheEntry& entry) { return entry.path == file; });
  auto index = TraceIndex::load(file, source);
  cache.push_back({file, size, modified, index, ++cache_clock});
  for (;;) {
    size_t bytes = 0;
    for (const CacheEntry& entry : cache) bytes += entry.index->memory_bytes();
    if (cache.size() <= 1 || (cache.size() <= kCacheEntries && bytes <= kCacheBytes)) break;
    cache.erase(std::min_element(cache.begin(), cache.end(),
                                 [](const CacheEntry& a, const CacheEntry& b) { return a.used < b.used; }));
  }
  return index;
}

namespace {

// The raw value of `key` in the query "k1=v1&k2=v2", or nullopt.
std::optional<std::string_view> query_value(std::string_view query, std::string_view key) {
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    const size_t end = std::min(query.find('&'), query.size());
    const std::string_view item = query.substr(0, end);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=')
      return item.substr(key.size() + 1);
    query.remove_prefix(std::min(end + 1, query.size()));
  }
  return std::nullopt;
}

double number_parameter(std::string_view query, std::string_view key, double fallback) {
  const auto raw = query_value(query, key);
  if (!raw) return fallback;
  double v = 0;
  const auto [end, error] = std::from_chars(raw->data(), raw->data() + raw->size(), v);
  if (raw->empty() || error != std::errc() || end != raw->data() + raw->size() || !std::isfinite(v))
    throw InvalidArgumentError("parameter " + std::string(key) + " is not a finite number: '" +
                               std::string(raw->substr(0, 64)) + "'");
  return v;
}

// As web_api.h's errors: {"error": "..."}.
HttpReply error_reply(int status, const std::string& message) {
  std::string body = "{\"error\":";
  json_out::append_string(body, message);
  return {status, "application/json", body + "}"};
}

}  // namespace

HttpReply trace_api_reply(const fs::path& file, const std::string& relative, std::string_view route,
                          std::string_view query) {
  std::shared_ptr<const TraceIndex> index;
  try {
    index = cached_trace_index(file, relative);
  } catch (const NotFoundError& e) {
    return error_reply(404, e.what());
  } catch (const Error& e) {
    return error_reply(422, e.what());
  }
  if (route == "trace_summary") return {200, "application/json", index->summary_json()};
  double start = 0, end = 0, resolution = 0;
  try {
    const TraceSummary s = index->summary(1);
    start = number_parameter(query, "start", s.start_us);
    end = number_parameter(query, "end", s.end_us);
    resolution = number_parameter(query, "resolution", 2000);
    if (resolution != std::floor(resolution) || resolution < 1 || resolution > 100000)
      throw InvalidArgumentError("parameter resolution must be a whole number in [1, 100000]");
    const double max_events = number_parameter(query, "max_events", kDefaultWindowMaxEvents);
    if (max_events != std::floor(max_events) || max_events < 1 || max_events > 1e6)
      throw InvalidArgumentError("parameter max_events must be a whole number in [1, 1000000]");
    TraceWindow w = index->window(start, end, static_cast<int>(resolution), static_cast<size_t>(max_events));
    HttpReply reply{200, "application/json", std::move(w.json)};
    reply.headers = {{"X-Stepscope-Window-Events", std::to_string(w.events)},
                     {"X-Stepscope-Window-Overlapping", std::to_string(w.overlapping)},
                     {"X-Stepscope-Window-Sampled", w.sampled ? "1" : "0"}};
    return reply;
  } catch (const InvalidArgumentError& e) {
    return error_reply(400, e.what());
  }
}

bool use_windowed_viewer(const fs::path& file, std::string_view query) {
  if (const auto mode = query_value(query, "mode")) {
    if (*mode == "window") return true;
    if (*mode == "full") return false;
  }
  std::error_code error;
  const uintmax_t size = fs::file_size(file, error);
  if (error) return false;
  const std::string name = file.filename().string();
  const bool gzipped = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
  return (gzipped ? size * 8 : size) > 15'000'000;
}

}  // namespace stepscope
