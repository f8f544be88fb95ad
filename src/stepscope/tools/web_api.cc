#include "stepscope/tools/web_api.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/step_stats.h"
#include "stepscope/tools/merge_command.h"
#include "stepscope/tools/rank_jobs.h"
#include "stepscope/tools/run_catalog.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxPointsPerSeries = 2000;

HttpReply json_reply(std::string body) { return {200, "application/json", std::move(body)}; }

HttpReply json_error(int status, std::string_view message) {
  std::string body = "{\"error\":";
  json_out::append_string(body, message);
  return {status, "application/json", body + "}"};
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "a=1&b=x%2Cy+z" -> {a: "1", b: "x,y z"}; InvalidArgumentError for a bad escape.
std::map<std::string, std::string, std::less<>> parse_query(std::string_view query) {
  std::map<std::string, std::string, std::less<>> params;
  auto decode = [](std::string_view in) {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] == '+') {
        out += ' ';
      } else if (in[i] == '%') {
        if (i + 2 >= in.size() || hex_digit(in[i + 1]) < 0 || hex_digit(in[i + 2]) < 0)
          throw InvalidArgumentError("bad percent escape in the query");
        out += static_cast<char>(hex_digit(in[i + 1]) * 16 + hex_digit(in[i + 2]));
        i += 2;
      } else {
        out += in[i];
      }
    }
    return out;
  };
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    const size_t end = std::min(query.find('&'), query.size());
    const std::string_view item = query.substr(0, end);
    const size_t eq = item.find('=');
    if (!item.empty())
      params[decode(item.substr(0, eq))] = eq == std::string_view::npos ? "" : decode(item.substr(eq + 1));
    query.remove_prefix(std::min(end + 1, query.size()));
  }
  return params;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= s.size()) {
    const size_t end = std::min(s.find(',', begin), s.size());
    if (end > begin) items.push_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

int64_t parse_int(const std::string& name, const std::string& value) {
  int64_t v = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (error != std::errc() || end != value.data() + value.size())
    throw InvalidArgumentError("Invalid option '-" + name + "' value: '" + value + "'");
  return v;
}

// tfprof's options from the query, over ProfileOptionBuilder's defaults.
ProfileOptions profile_options(const std::map<std::string, std::string, std::less<>>& params) {
  ProfileOptions o = ProfileOptionBuilder().build();
  const std::pair<const char*, int64_t ProfileOptions::*> numbers[] = {
      {"min_bytes", &ProfileOptions::min_bytes},
      {"min_peak_bytes", &ProfileOptions::min_peak_bytes},
      {"min_residual_bytes", &ProfileOptions::min_residual_bytes},
      {"min_output_bytes", &ProfileOptions::min_output_bytes},
      {"min_micros", &ProfileOptions::min_micros},
      {"min_accelerator_micros", &ProfileOptions::min_accelerator_micros},
      {"min_cpu_micros", &ProfileOptions::min_cpu_micros},
      {"min_params", &ProfileOptions::min_params},
      {"min_float_ops", &ProfileOptions::min_float_ops},
      {"min_occurrence", &ProfileOptions::min_occurrence},
      {"step", &ProfileOptions::step},
  };
  const std::pair<const char*, std::vector<std::string> ProfileOptions::*> lists[] = {
      {"account_type_regexes", &ProfileOptions::account_type_regexes},
      {"start_name_regexes", &ProfileOptions::start_name_regexes},
      {"trim_name_regexes", &ProfileOptions::trim_name_regexes},
      {"show_name_regexes", &ProfileOptions::show_name_regexes},
      {"hide_name_regexes", &ProfileOptions::hide_name_regexes},
      {"select", &ProfileOptions::select},
  };
  for (const auto& [key, value] : params) {
    if (key == "view" || key == "token") continue;
    bool known = false;
    for (const auto& [name, field] : numbers) {
      if (key == name) o.*field = parse_int(name, value), known = true;
    }
    for (const auto& [name, field] : lists) {
      if (key == name) o.*field = split_commas(value), known = true;
    }
    if (key == "max_depth") {
      const int64_t depth = parse_int(key, value);
      if (depth < 0 || depth > 1000000)
        throw InvalidArgumentError("Invalid option '-max_depth' value: '" + value + "'");
      o.max_depth = static_cast<int>(depth);
      known = true;
    } else if (key == "order_by") {
      o.order_by = value, known = true;
    } else if (key == "account_displayed_op_only") {
      if (value != "true" && value != "false")
        throw InvalidArgumentError("Invalid option '-account_displayed_op_only' value: '" + value + "'");
      o.account_displayed_op_only = value == "true", known = true;
    }
    if (!known) throw InvalidArgumentError("unknown tfprof option '" + key + "'");
  }
  o.output = "none";
  validate_profile_options(o);  // strict, as tfprof's command line
  return o;
}

std::string steps_json(const std::vector<int64_t>& steps) {
  std::string out = "[";
  for (size_t i = 0; i < steps.size(); ++i) out += (i ? "," : "") + std::to_string(steps[i]);
  return out + "]";
}

// The run directory `relative` names, confined to the root.
fs::path run_directory(const ServedDirectory& served, std::string_view relative) {
  fs::path dir;
  const int status = resolve_served_path(served, relative.empty() ? "." : relative, dir, /*directory=*/true);
  if (status == 403) throw PermissionDeniedError("forbidden");
  if (status != 200) throw NotFoundError("no run " + std::string(relative));
  return dir;
}

// The profiler's log (the views' warnings; none with validated options) goes nowhere while a
// request uses it: the server's terminal is not the user's.
class QuietLog {
 public:
  explicit QuietLog(Profiler& profiler) : profiler_(profiler) { profiler_.set_log(&discarded_); }
  ~QuietLog() { profiler_.set_log(nullptr); }

 private:
  Profiler& profiler_;
  std::ostringstream discarded_;
};

HttpReply tfprof_reply(const ServedDirectory& served, std::string_view run, std::string_view query) {
  const auto params = parse_query(query);
  const auto view_param = params.find("view");
  const std::string view = view_param == params.end() ? "scope" : view_param->second;
  if (view != "scope" && view != "graph" && view != "op" && view != "code")
    throw InvalidArgumentError("view must be scope, graph, op or code, not '" + view + "'");
  const ProfileOptions options = profile_options(params);
  RunCatalog& catalog = *served.catalog;
  const std::shared_ptr<Profiler> profiler = catalog.profile(run_directory(served, run));
  std::lock_guard lock(catalog.profile_mutex());
  const std::vector<int64_t> steps = profiler->steps();
  if (options.step >= 0 && !std::binary_search(steps.begin(), steps.end(), options.step))
    throw NotFoundError("the profile has no step " + std::to_string(options.step) + " (steps: " + steps_json(steps) +
                        ")");
  const QuietLog quiet(*profiler);
  std::string root;
  if (view == "scope") root = profiler->profile_name_scope(options).to_json();
  if (view == "graph") root = profiler->profile_graph(options).to_json();
  if (view == "op") root = profiler->profile_operations(options).to_json();
  if (view == "code") root = profiler->profile_code(options).to_json();
  std::string body = "{\"view\":";
  json_out::append_string(body, view);
  return json_reply(body + ",\"steps\":" + steps_json(steps) + ",\"root\":" + root + "}");
}

// A run's profile, held (a Profiler is not thread-safe), and the step a query asks for: "step",
// the latest when absent or -1; NotFoundError listing the steps when the profile lacks it.
struct ProfileStep {
  ProfileStep(RunCatalog& catalog, const fs::path& dir, const std::map<std::string, std::string, std::less<>>& params)
      : profiler(catalog.profile(dir)), lock(catalog.profile_mutex()), steps(profiler->steps()) {
    if (steps.empty()) throw NotFoundError("the profile has no steps");
    step = steps.back();
    if (auto it = params.find("step"); it != params.end() && it->second != "-1") step = parse_int("step", it->second);
    if (!std::binary_search(steps.begin(), steps.end(), step))
      throw NotFoundError("the profile has no step " + std::to_string(step) + " (steps: " + steps_json(steps) + ")");
  }
  std::shared_ptr<Profiler> profiler;
  std::lock_guard<std::mutex> lock;
  std::vector<int64_t> steps;
  int64_t step = -1;
};

HttpReply advise_reply(const ServedDirectory& served, std::string_view run_path, std::string_view query) {
  const auto params = parse_query(query);
  const fs::path dir = run_directory(served, run_path);
  RunCatalog& catalog = *served.catalog;
  const ProfileStep chosen(catalog, dir, params);
  const std::shared_ptr<Profiler>& profiler = chosen.profiler;
  const std::vector<int64_t>& steps = chosen.steps;
  const int64_t step = chosen.step;
  const QuietLog quiet(*profiler);
  const AdviceProto advice = profiler->advise(AdvisorOptions::all(), /*print=*/false);
  const StepStats stats = profiler->step_stats(step);
  CriticalPath path = critical_path(stats);
  if (const auto timing = profiler->step_timings().find(step)) path.hooks_ns = timing->hooks_ns;
  std::string what_if_json = "null";
  if (auto it = params.find("what_if"); it != params.end() && !it->second.empty()) {
    double speedup = 2.0;
    if (auto sp = params.find("speedup"); sp != params.end()) {
      const char* begin = sp->second.data();
      char* end = nullptr;
      speedup = std::strtod(begin, &end);
      if (sp->second.empty() || end != begin + sp->second.size())
        throw InvalidArgumentError("speedup must be a number, not '" + sp->second + "'");
    }
    what_if_json = what_if(nullptr, stats, it->second, speedup).to_json();
  }
  std::string trace = "null";
  for (const RunFile& file : catalog.summary(dir).traces) {
    if (file.step != step) continue;
    trace.clear();
    json_out::append_string(trace, file.path);
  }
  return json_reply("{\"step\":" + std::to_string(step) + ",\"steps\":" + steps_json(steps) +
                    ",\"advice\":" + to_json(advice) + ",\"critical_path\":" + path.to_json() + ",\"trace\":" + trace +
                    ",\"what_if\":" + what_if_json + "}");
}

HttpReply memory_reply(const ServedDirectory& served, std::string_view run_path, std::string_view query) {
  const ProfileStep chosen(*served.catalog, run_directory(served, run_path), parse_query(query));
  const std::optional<MemoryByKind> memory = chosen.profiler->memory_by_kind(chosen.step);
  return json_reply("{\"step\":" + std::to_string(chosen.step) + ",\"steps\":" + steps_json(chosen.steps) +
                    ",\"memory_by_kind\":" + (memory ? memory->to_json() : "null") + "}");
}

// A data-parallel job's step (rank_jobs.h): the step asked for ("step", the latest traced when
// absent), its merged trace's viewer path and who waited for whom at its collectives.
HttpReply stragglers_reply(const ServedDirectory& served, std::string_view job_path, std::string_view query) {
  const auto params = parse_query(query);
  const RankJob job = read_rank_job(served.root, run_directory(served, job_path));
  const auto steps = job.steps();
  int64_t step = steps.rbegin()->first;
  if (auto it = params.find("step"); it != params.end() && it->second != "-1") step = parse_int("step", it->second);
  const std::string merged = merge_rank_job_step(served.root, job, step, kDefaultMaxDecompressedBytes);
  std::string trace;
  json_out::append_string(trace,
                          (job.path == "." ? "" : job.path + "/") + "timeline-" + std::to_string(step) + ".json");
  return json_reply("{\"step\":" + std::to_string(step) + ",\"trace\":" + trace +
                    ",\"stragglers\":" + find_stragglers(merged).to_json(50) + "}");
}

// "<job>/timeline-<step>.json": the ranks' timelines of the step, merged.
HttpReply merged_trace_reply(const ServedDirectory& served, std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const int64_t step = trace_step(name);
  if (step < 0) throw NotFoundError("not a merged timeline: " + std::string(path) + " (<job>/timeline-<step>.json)");
  const RankJob job =
      read_rank_job(served.root, run_directory(served, slash == std::string_view::npos ? "." : path.substr(0, slash)));
  return json_reply(merge_rank_job_step(served.root, job, step, kDefaultMaxDecompressedBytes));
}

std::string runs_json(const ServedDirectory& served) {
  std::string out = "{\"title\":";
  json_out::append_string(out, served.title);
  const std::vector<RunEntry> runs = served.catalog->runs();
  out += ",\"jobs\":[";
  bool first_job = true;
  for (const auto& [path, ranks] : find_rank_jobs(runs)) {
    out += first_job ? "{\"path\":" : ",{\"path\":";
    first_job = false;
    json_out::append_string(out, path);
    out += ",\"ranks\":" + std::to_string(ranks) + "}";
  }
  out += "],\"runs\":[";
  bool first = true;
  for (const RunEntry& run : runs) {
    if (!first) out += ',';
    first = false;
    out += "{\"path\":";
    json_out::append_string(out, run.path);
    out += ",\"event_files\":" + std::to_string(run.event_files) + ",\"traces\":" + std::to_string(run.traces) +
           ",\"has_profile\":" + (run.has_profile ? "true" : "false") +
           ",\"modified\":" + std::to_string(run.modified_unix_secs) + "}";
  }
  return out + "]}";
}

// An error's message with the served directory's absolute path taken out (a client sees paths
// relative to it, as everywhere else).
std::string without_root(const ServedDirectory& served, std::string message) {
  const std::string root = served.root.string() + "/";
  for (size_t at; (at = message.find(root)) != std::string::npos;) message.erase(at, root.size());
  return message;
}

}  // namespace

std::optional<HttpReply> handle_api_request(const ServedDirectory& served, std::string_view path,
                                            std::string_view query) {
  auto route = [&](std::string_view prefix, std::string_view& rest) {
    if (path == prefix.substr(0, prefix.size() - 1)) {  // "/api/run": the root's run
      rest = ".";
      return true;
    }
    if (path.substr(0, prefix.size()) != prefix) return false;
    rest = path.substr(prefix.size());
    return true;
  };
  std::string_view run;
  try {
    if (path == "/api/runs") return json_reply(runs_json(served));
    if (route("/api/run/", run))
      return json_reply(served.catalog->summary(run_directory(served, run)).to_json(kMaxPointsPerSeries));
    if (route("/api/tfprof/", run)) return tfprof_reply(served, run, query);
    if (route("/api/advise/", run)) return advise_reply(served, run, query);
    if (route("/api/memory/", run)) return memory_reply(served, run, query);
    if (route("/api/job/", run)) return json_reply(read_rank_job(served.root, run_directory(served, run)).to_json());
    if (route("/api/stragglers/", run)) return stragglers_reply(served, run, query);
    if (route("/api/merged/", run)) return merged_trace_reply(served, run);
  } catch (const Error& e) {
    const std::string message = without_root(served, e.what());
    switch (e.code()) {
      case ErrorCode::kInvalidArgument:
        return json_error(400, message);
      case ErrorCode::kPermissionDenied:
        return json_error(403, message);
      case ErrorCode::kNotFound:
        return json_error(404, message);
      default:
        return json_error(422, message);
    }
  }
  return std::nullopt;
}

}  // namespace stepscope
