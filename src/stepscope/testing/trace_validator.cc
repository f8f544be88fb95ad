#include "stepscope/testing/trace_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "stepscope/base/file_io.h"

namespace stepscope {

namespace {

using nlohmann::json;

// Problems, at most kMaxPerRule reported per rule (then one line with how many more).
class Report {
 public:
  void error(const std::string& rule, std::string message) { add(rule, std::move(message), false); }
  void warning(const std::string& rule, std::string message) { add(rule, std::move(message), true); }
  std::vector<TraceProblem> finish() {
    for (const auto& [rule, n] : counts_)
      if (n > kMaxPerRule)
        problems_.push_back({rule, std::to_string(n - kMaxPerRule) + " more problems of this rule", true});
    return std::move(problems_);
  }

 private:
  static constexpr int kMaxPerRule = 50;
  void add(const std::string& rule, std::string message, bool warning) {
    if (++counts_[rule] <= kMaxPerRule) problems_.push_back({rule, std::move(message), warning});
  }
  std::vector<TraceProblem> problems_;
  std::map<std::string, int> counts_;
};

// The text of each event's ts and dur numbers, as written (nlohmann keeps only the value).
struct NumberText {
  std::string ts, dur;  // empty: absent or not a number; "int": written as an integer
};

// nlohmann's DOM builder, plus the raw text of the events' ts and dur.
class Sax {
 public:
  using BasicJson = json;
  Sax(json& root, std::vector<NumberText>& numbers) : dom_(root, true), numbers_(numbers) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool v) { return value(dom_.boolean(v)); }
  bool number_integer(json::number_integer_t v) { return number(dom_.number_integer(v), "int"); }
  bool number_unsigned(json::number_unsigned_t v) { return number(dom_.number_unsigned(v), "int"); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return number(dom_.number_float(v, s), s); }
  bool string(json::string_t& v) { return value(dom_.string(v)); }
  bool binary(json::binary_t& v) { return value(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    const size_t depth = stack_.size();
    if (events_depth_ && depth == *events_depth_) numbers_.emplace_back();
    stack_.push_back('{');
    pending_ = kNone;
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    const size_t depth = stack_.size();
    pending_ = kNone;
    if (depth == 1 && k == "traceEvents") pending_events_ = true;
    if (events_depth_ && depth == *events_depth_ + 1) pending_ = k == "ts" ? kTs : k == "dur" ? kDur : kNone;
    return dom_.key(k);
  }
  bool end_object() {
    stack_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (stack_.empty()) events_depth_ = 1;  // the array form
    if (pending_events_ && stack_.size() == 1) events_depth_ = 2;
    pending_events_ = false;
    stack_.push_back('[');
    return dom_.start_array(n);
  }
  bool end_array() {
    stack_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, token, e);
  }

 private:
  enum Pending { kNone, kTs, kDur };
  bool value(bool ok) {
    pending_ = kNone;
    pending_events_ = false;
    return ok;
  }
  bool number(bool ok, const std::string& text) {
    if (pending_ != kNone && !numbers_.empty()) (pending_ == kTs ? numbers_.back().ts : numbers_.back().dur) = text;
    return value(ok);
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<NumberText>& numbers_;
  std::vector<char> stack_;
  std::optional<size_t> events_depth_;
  bool pending_events_ = false;
  Pending pending_ = kNone;
};

std::string describe(size_t i, const json& e) {
  std::string d = "event " + std::to_string(i);
  if (!e.is_object()) return d;
  d += " (";
  if (e.contains("ph")) d += "ph " + e["ph"].dump();
  if (e.contains("name")) d += ", name " + e["name"].dump();
  if (e.contains("pid")) d += ", pid " + e["pid"].dump();
  if (e.contains("tid")) d += ", tid " + e["tid"].dump();
  if (e.contains("ts")) d += ", ts " + e["ts"].dump();
  return d + ")";
}

bool numeric_string(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// ts/dur (µs) in integer ns.
int64_t to_ns(double us) {
  const double ns = std::round(us * 1000);
  if (ns > 9.0e18) return INT64_MAX / 2;
  if (ns < -9.0e18) return INT64_MIN / 2;
  return static_cast<int64_t>(ns);
}

int significant_digits(const std::string& text) {
  int n = 0;
  bool leading = true;
  for (char c : text) {
    if (c == 'e' || c == 'E') break;
    if (c < '0' || c > '9') continue;
    if (leading && c == '0') continue;
    leading = false;
    ++n;
  }
  return n;
}

// Raw control characters inside strings (they make the JSON invalid): the offset of the first.
std::optional<size_t> raw_control_character(std::string_view text) {
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (!in_string) {
      in_string = c == '"';
      continue;
    }
    if (c == '\\') {
      ++i;
    } else if (c == '"') {
      in_string = false;
    } else if (c < 0x20) {
      return i;
    }
  }
  return std::nullopt;
}

using Thread = std::pair<std::string, std::string>;  // (pid, tid) as written
Thread thread_of(const json& e) {
  return {e.contains("pid") ? e["pid"].dump() : "", e.contains("tid")   ? e["tid"].dump()
                                                    : e.contains("pid") ? e["pid"].dump()
                                                                        : ""};
}

struct Slice {
  int64_t start, end;
  size_t event;
};

const std::set<char> kPhases = {'B', 'E', 'X', 'i', 'I', 'C', 'b', 'n', 'e', 'S', 'T', 'p', 'F', 's',
                                't', 'f', 'P', 'N', 'O', 'D', 'M', 'v', 'V', 'R', 'c', '(', ')', '='};
const std::map<std::string, std::string> kMetadataArg = {{"process_name", "name"},
                                                         {"process_labels", "labels"},
                                                         {"process_sort_index", "sort_index"},
                                                         {"thread_name", "name"},
                                                         {"thread_sort_index", "sort_index"}};

}  // namespace

// With STEPSCOPE_TRACE_CORPUS set, every trace found clean is also written there (named by its
// hash), so the browser tests can load what the test suite checked into the real viewers
// (tests/browser: scripts/test.sh sets it).
namespace {
void keep_in_corpus(std::string_view text) {
  const char* dir = std::getenv("STEPSCOPE_TRACE_CORPUS");
  if (!dir || !*dir) return;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.json", static_cast<unsigned long long>(hash));
  const std::filesystem::path path = std::filesystem::path(dir) / name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::exists(path, ec)) write_file_atomically(path, text);
}
}  // namespace

std::vector<TraceProblem> validate_chrome_trace(std::string_view text) {
  Report report;
  if (text.size() > (size_t{1} << 30)) {
    report.warning("size", std::to_string(text.size() >> 20) +
                               " MB: the Perfetto UI needs trace_processor's server above about 1 GB");
  } else if (text.size() > (size_t{256} << 20)) {
    report.warning("size", std::to_string(text.size() >> 20) + " MB: chrome://tracing fails above 256 MB");
  }
  // Whitespace around the JSON counts for the size, not for the parser.
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (auto at = raw_control_character(text))
    report.error("json", "raw control character 0x" +
                             std::string(1, "0123456789abcdef"[static_cast<unsigned char>(text[*at]) >> 4]) +
                             std::string(1, "0123456789abcdef"[text[*at] & 15]) + " in a string at offset " +
                             std::to_string(*at));

  json root;
  std::vector<NumberText> numbers;
  auto parse = [&](std::string_view t) {
    root = json();
    numbers.clear();
    Sax sax(root, numbers);
    return json::sax_parse(t.begin(), t.end(), &sax);
  };
  try {
    parse(text);
  } catch (const json::exception& e) {
    // An array left open (a writer that crashed): catapult closes it; say so, and go on.
    std::string closed(text);
    while (!closed.empty() && (std::isspace(static_cast<unsigned char>(closed.back())) || closed.back() == ','))
      closed.pop_back();
    closed += "]";
    bool fixed = false;
    if (text.find_first_not_of(" \t\r\n") != std::string_view::npos && text[text.find_first_not_of(" \t\r\n")] == '[') {
      try {
        parse(closed);
        fixed = true;
      } catch (const json::exception&) {
      }
    }
    if (!fixed) {
      // 406: a number beyond a double's range (1e400): no finite time.
      report.error(e.id == 406 ? "ts-finite" : "json", e.what());
      return report.finish();
    }
    report.warning("container", "array without its closing ']' (catapult adds it; never rely on it)");
  }

  const json* events = nullptr;
  bool ns_display_unit = false;
  if (root.is_array()) {
    events = &root;
  } else if (root.is_object() && root.contains("traceEvents") && root["traceEvents"].is_array()) {
    events = &root["traceEvents"];
    if (root.contains("displayTimeUnit")) {
      const json& unit = root["displayTimeUnit"];
      if (unit != "ms" && unit != "ns")
        report.error("display-time-unit", "displayTimeUnit " + unit.dump() + " (catapult accepts \"ms\" or \"ns\")");
      ns_display_unit = unit == "ns";
    }
  } else {
    report.error("container", "the top level is neither an array nor an object with a traceEvents array");
    return report.finish();
  }

  std::map<Thread, std::vector<Slice>> slices;
  struct Open {
    size_t event;
    int64_t ts;
    std::string name;
  };
  std::map<Thread, std::vector<Open>> open_begins;
  std::map<Thread, int64_t> last_begin_end_ts;
  std::vector<size_t> flows, objects;
  std::map<std::tuple<std::string, std::string, std::string>, int> open_async;  // (cat, scope, id) → open b
  std::map<char, int> unrendered;
  bool has_counters = false;

  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) {
      report.error("event", "event " + std::to_string(i) + " is not an object");
      continue;
    }
    auto where = [&] { return describe(i, e); };
    if (!e.contains("ph") || !e["ph"].is_string() || e["ph"].get<std::string>().size() != 1 ||
        !kPhases.contains(e["ph"].get<std::string>()[0])) {
      report.error("event", where() + ": ph missing or not a known phase");
      continue;
    }
    const char ph = e["ph"].get<std::string>()[0];
    const NumberText raw = i < numbers.size() ? numbers[i] : NumberText{};
    const std::string name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";

    // Common fields.
    if (!e.contains("pid")) report.error("event", where() + ": pid missing");
    const bool process_level_meta = ph == 'M' && name.rfind("process_", 0) == 0;
    const std::string scope = e.contains("s") && e["s"].is_string() ? e["s"].get<std::string>() : "";
    const bool global_instant = (ph == 'i' || ph == 'I') && (scope == "g" || scope == "p");
    if (!e.contains("tid") && !process_level_meta && !global_instant) report.error("event", where() + ": tid missing");
    for (const char* field : {"pid", "tid"})
      if (e.contains(field) && e[field].is_string())
        report.warning("event", where() + ": " + field + " is a string (a Perfetto-only extension)");
    if (e.contains("tid") && e["tid"].is_number() && e["tid"].get<double>() < 0)
      report.warning("event", where() + ": negative tid");
    double ts = 0;
    if (ph != 'M') {
      if (!e.contains("ts") || !e["ts"].is_number()) {
        report.error("event", where() + ": ts missing or not a number");
        continue;
      }
      ts = e["ts"].get<double>();
      if (!std::isfinite(ts)) {
        report.error("ts-finite", where() + ": ts is not finite");
        continue;
      }
      if (ts < 0) report.warning("event", where() + ": negative ts");
      if (!raw.ts.empty() && significant_digits(raw.ts == "int" ? e["ts"].dump() : raw.ts) > 15)
        report.warning("ts-precision", where() + ": ts has more than 15 significant digits (write relative times)");
    }
    for (const auto& [field, text] : {std::pair{"ts", raw.ts}, std::pair{"dur", raw.dur}}) {
      if (!e.contains(field) || !e[field].is_number()) continue;
      const std::string written = text == "int" || text.empty() ? e[field].dump() : text;
      const size_t dot = written.find('.');
      const bool three =
          written.find_first_of("eE") == std::string::npos && dot != std::string::npos && written.size() - dot - 1 == 3;
      if (!three)
        report.warning("ts-format",
                       where() + ": " + field + " " + written + " is not microseconds with exactly three decimals");
    }
    if (e.contains("dur") && e["dur"].is_number()) {
      if (!std::isfinite(e["dur"].get<double>()))
        report.error("ts-finite", where() + ": dur is not finite");
      else if (e["dur"].get<double>() < 0 && ph != 'X')
        report.warning("event", where() + ": negative dur");
    }
    if (e.contains("bind_id") && !e.contains("flow_in") && !e.contains("flow_out"))
      report.error("flow-v2", where() + ": bind_id without flow_in or flow_out");

    const Thread thread = thread_of(e);
    switch (ph) {
      case 'X': {
        if (!e.contains("dur") || !e["dur"].is_number() || !std::isfinite(e["dur"].get<double>()) ||
            e["dur"].get<double>() < 0) {
          report.error("complete-dur", where() + ": X without a numeric dur >= 0");
          break;
        }
        const int64_t start = to_ns(ts);
        slices[thread].push_back({start, start + to_ns(e["dur"].get<double>()), i});
        break;
      }
      case 'B':
      case 'E': {
        auto last = last_begin_end_ts.find(thread);
        if (last != last_begin_end_ts.end() && to_ns(ts) < last->second)
          report.error("begin-end-order", where() + ": B/E timestamp before the previous one on its thread");
        last_begin_end_ts[thread] = std::max(to_ns(ts), last == last_begin_end_ts.end() ? INT64_MIN : last->second);
        auto& stack = open_begins[thread];
        if (ph == 'B') {
          stack.push_back({i, to_ns(ts), name});
        } else if (stack.empty()) {
          report.error("end-unmatched", where() + ": E with no open B on its thread");
        } else {
          if (e.contains("name") && name != stack.back().name)
            report.warning("end-name", where() + ": E named \"" + name + "\" closes B \"" + stack.back().name + "\"");
          slices[thread].push_back({stack.back().ts, std::max(stack.back().ts, to_ns(ts)), stack.back().event});
          stack.pop_back();
        }
        break;
      }
      case 'i':
      case 'I':
        if (e.contains("s") && scope != "g" && scope != "p" && scope != "t")
          report.error("instant-scope", where() + ": s " + e["s"].dump() + " (must be g, p or t)");
        break;
      case 'C': {
        has_counters = true;
        if (!e.contains("args") || !e["args"].is_object()) {
          report.error("counter-args", where() + ": C args is not an object");
          break;
        }
        for (const auto& [key, v] : e["args"].items())
          if (!(v.is_number() || (v.is_string() && numeric_string(v.get<std::string>()))))
            report.error("counter-args", where() + ": series \"" + key + "\" is " + v.dump() + ", not a number");
        if (e["args"].size() > 16) report.warning("counter-args", where() + ": more than 16 series");
        break;
      }
      case 'b':
      case 'n':
      case 'e': {
        const bool has_id = e.contains("id"), has_id2 = e.contains("id2");
        if (has_id == has_id2) {
          report.error("async-id", where() + (has_id ? ": both id and id2" : ": neither id nor id2"));
          break;
        }
        const std::string cat = e.contains("cat") ? e["cat"].dump() : "";
        const auto key = std::make_tuple(cat, e.contains("scope") ? e["scope"].dump() : "",
                                         has_id ? e["id"].dump() : e["id2"].dump());
        if (ph == 'b') {
          open_async[key]++;
        } else if (ph == 'e') {
          if (open_async[key] == 0)
            report.error("async-id", where() + ": e without an open b of that cat and id");
          else
            open_async[key]--;
        }
        break;
      }
      case 's':
      case 't':
      case 'f': {
        bool ok = true;
        for (const char* field : {"id", "name", "cat"})
          if (!e.contains(field)) {
            report.error("flow-fields", where() + ": flow without " + field);
            ok = false;
          }
        if (e.contains("bp") && e["bp"] != "e") {
          report.error("flow-bp", where() + ": bp " + e["bp"].dump() + " (only \"e\" is valid)");
          ok = false;
        }
        if (ok) flows.push_back(i);
        break;
      }
      case 'M': {
        auto it = kMetadataArg.find(name);
        if (it == kMetadataArg.end()) {
          report.error("metadata", where() + ": unknown metadata name \"" + name + "\"");
        } else if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains(it->second)) {
          report.error("metadata", where() + ": " + name + " without args." + it->second);
        } else {
          const json& v = e["args"][it->second];
          if (it->second == "sort_index" ? !v.is_number_integer() : !v.is_string())
            report.error("metadata", where() + ": args." + it->second + " is " + v.dump());
        }
        break;
      }
      case 'N':
      case 'O':
      case 'D':
        if (!e.contains("id") && !e.contains("id2")) {
          report.error("object", where() + ": object event without id");
          break;
        }
        if (ph == 'O' && (!e.contains("args") || !e["args"].is_object() || !e["args"].contains("snapshot")))
          report.error("object", where() + ": O without args.snapshot");
        objects.push_back(i);
        unrendered[ph]++;
        break;
      case 'v':
      case 'V':
      case 'S':
      case 'T':
      case 'F':
      case 'p':
      case 'c':
      case '(':
      case ')':
      case '=':
        unrendered[ph]++;
        break;
      default:
        break;
    }
  }

  for (const auto& [thread, stack] : open_begins)
    for (const Open& b : stack)
      report.warning("begin-unclosed", describe(b.event, (*events)[b.event]) + ": B never closed");
  for (const auto& [key, n] : open_async)
    if (n > 0) report.warning("async-id", "async b never closed: cat " + std::get<0>(key) + ", id " + std::get<2>(key));

  // Nesting: per thread, by (start, longest first), with a stack of enclosing slices.
  for (auto& [thread, list] : slices) {
    std::stable_sort(list.begin(), list.end(), [](const Slice& a, const Slice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Slice*> stack;
    int64_t previous_end = INT64_MIN;  // of the last slice that ended before this one started
    for (size_t k = 0; k < list.size(); ++k) {
      const Slice& s = list[k];
      while (!stack.empty() && stack.back()->end <= s.start) {
        previous_end = std::max(previous_end, stack.back()->end);
        stack.pop_back();
      }
      // Without "ns", catapult builds its slice tree on whole microseconds: a slice shorter than
      // 1 µs, or starting within 1 µs of its neighbour's end, is nested under a slice it does
      // not overlap (and flows starting in it are dropped).
      if (!ns_display_unit && (s.end - s.start < 1000 || (previous_end != INT64_MIN && s.start - previous_end < 1000)))
        report.error(
            "display-time-unit",
            describe(s.event, (*events)[s.event]) +
                (s.end - s.start < 1000 ? " is shorter than 1 us" : " starts within 1 us of the previous slice's end") +
                " and the trace has no \"displayTimeUnit\":\"ns\": chrome://tracing nests "
                "it on whole microseconds, under a slice it does not overlap");
      if (!stack.empty() && s.end > stack.back()->end) {
        report.error("nesting", describe(s.event, (*events)[s.event]) + " partially overlaps " +
                                    describe(stack.back()->event, (*events)[stack.back()->event]) +
                                    " on its thread (Perfetto moves it to an overflow track)");
        continue;
      }
      if (k > 0 && list[k - 1].start == s.start && list[k - 1].end == s.end)
        report.warning("nesting", describe(s.event, (*events)[s.event]) +
                                      " has the start and duration of another slice: which one is the parent "
                                      "depends on their order");
      stack.push_back(&s);
    }
  }

  // Flows, in time order: each end must bind to a slice, ids must pair up. A slice encloses t
  // when one of those that start at or before t ends at or after it: the largest end among them
  // (kept per thread, slices sorted by start) says.
  std::map<Thread, std::vector<int64_t>> max_end;
  for (const auto& [thread, list] : slices) {
    auto& m = max_end[thread];
    for (const Slice& s : list) m.push_back(std::max(m.empty() ? INT64_MIN : m.back(), s.end));
  }
  auto enclosing = [&](const Thread& thread, int64_t t) {
    auto it = slices.find(thread);
    if (it == slices.end()) return false;
    const auto& list = it->second;
    const size_t n =
        std::upper_bound(list.begin(), list.end(), t, [](int64_t v, const Slice& s) { return v < s.start; }) -
        list.begin();
    return n > 0 && max_end[thread][n - 1] >= t;
  };
  auto next_slice = [&](const Thread& thread, int64_t t) {
    auto it = slices.find(thread);
    return it != slices.end() && !it->second.empty() && it->second.back().start >= t;
  };
  std::stable_sort(flows.begin(), flows.end(), [&](size_t a, size_t b) {
    return (*events)[a]["ts"].get<double>() < (*events)[b]["ts"].get<double>();
  });
  std::map<std::tuple<std::string, std::string, std::string>, size_t> open_flows;  // (cat, name, id) → its s
  for (size_t i : flows) {
    const json& e = (*events)[i];
    const char ph = e["ph"].get<std::string>()[0];
    auto where = [&] { return describe(i, e); };
    const int64_t t = to_ns(e["ts"].get<double>());
    const Thread thread = thread_of(e);
    const bool bind_enclosing = ph != 'f' || e.contains("bp");
    if (bind_enclosing ? !enclosing(thread, t) : !next_slice(thread, t))
      report.error("flow-binding", where() + (bind_enclosing ? ": no slice encloses it on its thread"
                                                             : ": no slice starts at or after it on its thread"));
    const auto key = std::make_tuple(e["cat"].dump(), e["name"].dump(), e["id"].dump());
    auto it = open_flows.find(key);
    if (ph == 's') {
      if (it != open_flows.end()) report.error("flow-id-reuse", where() + ": id reused while its flow is open");
      open_flows[key] = i;
    } else if (it == open_flows.end()) {
      report.error("flow-unmatched", where() + ": " + std::string(1, ph) + " without an open s of that id");
    } else if (ph == 'f') {
      open_flows.erase(it);
    }
  }
  for (const auto& [key, i] : open_flows)
    report.warning("flow-unterminated", describe(i, (*events)[i]) + ": flow never ended by an f");

  // Objects: a D needs an earlier N of its id in its process.
  std::stable_sort(objects.begin(), objects.end(), [&](size_t a, size_t b) {
    return (*events)[a]["ts"].get<double>() < (*events)[b]["ts"].get<double>();
  });
  std::set<std::pair<std::string, std::string>> live;
  for (size_t i : objects) {
    const json& e = (*events)[i];
    const auto key =
        std::make_pair(e.contains("pid") ? e["pid"].dump() : "", e.contains("id") ? e["id"].dump() : e["id2"].dump());
    const char ph = e["ph"].get<std::string>()[0];
    if (ph == 'N') live.insert(key);
    if (ph == 'D' && !live.erase(key)) report.error("object", describe(i, e) + ": D without an earlier N of its id");
  }

  for (const auto& [ph, n] : unrendered) {
    const bool objects_with_counters = (ph == 'N' || ph == 'O' || ph == 'D') && has_counters;
    if (!objects_with_counters)
      report.warning("not-rendered", std::to_string(n) + " '" + std::string(1, ph) + "' events: Perfetto ignores them" +
                                         (ph == 'N' || ph == 'O' || ph == 'D' ? " (show memory with C counters)" : ""));
  }
  std::vector<TraceProblem> problems = report.finish();
  if (problems.empty()) keep_in_corpus(text);
  return problems;
}

}  // namespace stepscope
