#include "stepscope/profiler/tfprof/options.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <set>

#include "stepscope/base/error.h"
#include "stepscope/profiler/tfprof/internal/show.h"
#include "stepscope/profiler/tfprof/view_options.h"

namespace stepscope {
namespace {

using tfprof::join;

std::vector<std::string> split_skip_empty(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) parts.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

[[noreturn]] void invalid_option(std::string_view flag, std::string_view value) {
  throw InvalidArgumentError("Invalid option '" + std::string(flag) + "' value: '" + std::string(value) + "'");
}

ProfileOutput effective_output(const ProfileOptions& options) {
  ProfileOutput out = parse_profile_output(options.output);
  if (!options.dump_to_file.empty()) out = {"file", {{"outfile", options.dump_to_file}}};
  return out;
}

}  // namespace

ProfileOutput parse_profile_output(std::string_view output) {
  ProfileOutput out;
  if (output.empty()) {
    out.type = "stdout";
    return out;
  }
  // std::set order, as TensorFlow joins them.
  static const std::string kValidTypes = "file,none,pprof,stdout,timeline";
  auto valid_type = [](std::string_view t) {
    return std::find(kProfileOutputTypes.begin(), kProfileOutputTypes.end(), t) != kProfileOutputTypes.end();
  };
  std::vector<std::string> kv_split;
  const size_t colon = output.find(':');
  out.type = std::string(output.substr(0, colon));
  if (!valid_type(out.type))
    throw InvalidArgumentError("E.g. Unknown output type: " + out.type + ", Valid types: " + kValidTypes);
  if (colon != std::string_view::npos) kv_split = split_skip_empty(output.substr(colon + 1), ',');

  // Every output type with options has exactly one, required: outfile.
  const bool takes_outfile = out.type == "timeline" || out.type == "file" || out.type == "pprof";
  for (const std::string& kv_str : kv_split) {
    std::vector<std::string> kv = split_skip_empty(kv_str, '=');
    if (kv.size() < 2) throw InvalidArgumentError("Visualize format: -output timeline:key=value,key=value,...");
    if (!takes_outfile || kv[0] != "outfile")
      throw InvalidArgumentError("Unrecognized options " + kv[0] + " for output_type: " + out.type);
    out.options[kv[0]] = join(std::vector<std::string>(kv.begin() + 1, kv.end()), "=");
  }
  if (takes_outfile && !out.options.count("outfile"))
    throw InvalidArgumentError("Missing required output_options for " + out.type + "\nE.g. -output " + out.type +
                               ":outfile=...");
  return out;
}

std::string ProfileOptions::to_string() const {
  const ProfileOutput out = effective_output(*this);
  std::string text;
  char line[512];
  auto add = [&](const char* flag, const std::string& value) {
    std::snprintf(line, sizeof(line), "%-28s", flag);
    text += line;
    text += value;
    text += '\n';
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  add("-max_depth", num(max_depth));
  add("-min_bytes", num(min_bytes));
  add("-min_peak_bytes", num(min_peak_bytes));
  add("-min_residual_bytes", num(min_residual_bytes));
  add("-min_output_bytes", num(min_output_bytes));
  add("-min_micros", num(min_micros));
  add("-min_accelerator_micros", num(min_accelerator_micros));
  add("-min_cpu_micros", num(min_cpu_micros));
  add("-min_params", num(min_params));
  add("-min_float_ops", num(min_float_ops));
  add("-min_occurrence", num(min_occurrence));
  add("-step", num(step));
  add("-order_by", order_by);
  add("-account_type_regexes", join(account_type_regexes, ","));
  add("-start_name_regexes", join(start_name_regexes, ","));
  add("-trim_name_regexes", join(trim_name_regexes, ","));
  add("-show_name_regexes", join(show_name_regexes, ","));
  add("-hide_name_regexes", join(hide_name_regexes, ","));
  add("-account_displayed_op_only", account_displayed_op_only ? "true" : "false");
  const std::set<std::string> sorted(select.begin(), select.end());
  add("-select", join(std::vector<std::string>(sorted.begin(), sorted.end()), ","));
  std::vector<std::string> kvs;
  for (const auto& [k, v] : out.options) kvs.push_back(k + "=" + v);
  add("-output", out.type + ":" + join(kvs, ","));
  return text;
}

void validate_profile_options(const ProfileOptions& options) {
  tfprof::RegexCache cache;
  tfprof::resolve_options(options, cache);
}

namespace tfprof {

RegexCache::RegexCache() = default;
RegexCache::~RegexCache() = default;
RegexCache::RegexCache(RegexCache&&) noexcept = default;
RegexCache& RegexCache::operator=(RegexCache&&) noexcept = default;

const re2::RE2& RegexCache::get(const std::string& pattern, std::string_view flag) {
  auto it = compiled_.find(pattern);
  if (it != compiled_.end()) return *it->second;
  RE2::Options opts;
  opts.set_log_errors(false);  // the InvalidArgumentError says it; RE2 would also print to stderr
  auto re = std::make_unique<re2::RE2>(pattern, opts);
  if (!re->ok()) invalid_option(flag, pattern);
  return *compiled_.emplace(pattern, std::move(re)).first->second;
}

NameMatcher::NameMatcher(const std::vector<std::string>& patterns, std::string_view flag, RegexCache& cache) {
  if (patterns.size() == 1 && patterns[0] == ".*") {
    all_ = true;
    return;
  }
  for (const std::string& p : patterns) regexes_.push_back(&cache.get(p, flag));
}

bool NameMatcher::matches_a_regex(std::string_view name) const {
  for (const re2::RE2* re : regexes_)
    if (RE2::FullMatch(re2::StringPiece(name.data(), name.size()), *re)) return true;
  return false;
}

ViewOptions resolve_options(const ProfileOptions& options, RegexCache& cache, std::ostream* lenient) {
  ViewOptions v;
  v.options = &options;
  v.output = effective_output(options);
  auto order = std::find(kProfileOrderBy.begin(), kProfileOrderBy.end(), options.order_by);
  if (order != kProfileOrderBy.end()) {
    v.order_by = static_cast<OrderBy>(order - kProfileOrderBy.begin());
  } else if (lenient) {
    *lenient << "Warning: unknown order_by '" << options.order_by << "' ignored; ordering by name. Valid values: "
             << join(std::vector<std::string>(kProfileOrderBy.begin(), kProfileOrderBy.end()), ", ") << "\n";
    v.order_by = OrderBy::kName;
  } else {
    invalid_option("-order_by", options.order_by);
  }
  std::vector<std::string> unknown;
  for (const std::string& s : options.select) {
    auto it = std::find(kProfileSelect.begin(), kProfileSelect.end(), s);
    if (it != kProfileSelect.end())
      v.select |= 1u << (it - kProfileSelect.begin());
    else
      unknown.push_back(s);
  }
  if (!unknown.empty()) {
    if (!lenient) invalid_option("-select", join(options.select, ","));
    *lenient << "Warning: unknown select field" << (unknown.size() > 1 ? "s " : " ") << join(unknown, ", ")
             << " ignored. Valid fields: "
             << join(std::vector<std::string>(kProfileSelect.begin(), kProfileSelect.end()), ", ") << "\n";
  }
  v.max_depth = options.max_depth;
  v.min_bytes = options.min_bytes;
  v.min_peak_bytes = options.min_peak_bytes;
  v.min_residual_bytes = options.min_residual_bytes;
  v.min_output_bytes = options.min_output_bytes;
  v.min_micros = options.min_micros;
  v.min_accelerator_micros = options.min_accelerator_micros;
  v.min_cpu_micros = options.min_cpu_micros;
  v.min_params = options.min_params;
  v.min_float_ops = options.min_float_ops;
  v.min_occurrence = options.min_occurrence;
  v.step = options.step;
  v.account = NameMatcher(options.account_type_regexes, "-account_type_regexes", cache);
  v.start = NameMatcher(options.start_name_regexes, "-start_name_regexes", cache);
  v.trim = NameMatcher(options.trim_name_regexes, "-trim_name_regexes", cache);
  v.show = NameMatcher(options.show_name_regexes, "-show_name_regexes", cache);
  v.hide = NameMatcher(options.hide_name_regexes, "-hide_name_regexes", cache);
  v.account_displayed_op_only = options.account_displayed_op_only;
  return v;
}

}  // namespace tfprof
}  // namespace stepscope
