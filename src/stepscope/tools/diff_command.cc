#include "stepscope/tools/diff_command.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profile_diff.h"
#include "stepscope/profiler/tfprof/profiler.h"

namespace stepscope {

namespace {

struct Input {
  std::string path;
  int64_t step = -1;  // -1: not named
};

// "FILE@N" -> (FILE, N) unless a file is named so.
Input parse_input(const std::string& arg) {
  const size_t at = arg.rfind('@');
  if (at == std::string::npos || at + 1 == arg.size() || std::filesystem::exists(arg)) return {arg, -1};
  const std::string number = arg.substr(at + 1);
  if (number.find_first_not_of("0123456789") != std::string::npos) return {arg, -1};
  try {
    return {arg.substr(0, at), std::stoll(number)};
  } catch (const std::out_of_range&) {
    throw InvalidArgumentError(arg + ": step number out of range");
  }
}

struct Loaded {
  Profiler profiler;
  bool run_metadata = false;  // a RunMetadata made into a one-step profile
};

// A saved profile, or a RunMetadata made into a one-step profile: step `step`, or the step of
// ProfilerHook's file name, or 0.
Loaded load_input(const std::string& path, int64_t step, uint64_t max_decompressed_bytes) {
  const std::string bytes = read_file(path, max_decompressed_bytes);
  if (Profiler::looks_like_profile(bytes)) return {Profiler::parse(bytes, path)};
  RunMetadata metadata;
  try {
    metadata = parse_run_metadata(bytes, path);
  } catch (const DataLossError& e) {
    throw DataLossError(path +
                        ": neither a saved profile (it does not start with the profile's magic) nor a "
                        "RunMetadata: " +
                        e.what());
  }
  if (metadata.step_stats.dev_stats().empty())
    throw DataLossError(path + ": neither a saved profile nor a RunMetadata with step stats (" +
                        std::to_string(bytes.size()) + " bytes)");
  if (step < 0) {  // ProfilerHook's name for it: run_metadata-<step>.pb[.gz]
    std::smatch m;
    static const std::regex kHookName(R"(run_metadata-(\d{1,18})\.pb(\.gz)?$)");
    const std::string name = std::filesystem::path(path).filename().string();
    step = std::regex_search(name, m, kHookName) ? std::stoll(m[1].str()) : 0;
  }
  return {Profiler::from_run_metadata(metadata, step), true};
}

std::string percent(double ratio) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.1f%%", (ratio - 1) * 100);
  return buf;
}

}  // namespace

void add_diff_command(CLI::App& app, DiffCommand& d) {
  d.command = app.add_subcommand(
      "diff",
      "Compare two saved profiles, RunMetadata files or steps: time and memory per op type, name scope and node, "
      "what appeared and disappeared, both critical paths, the step times and their ratio");
  d.command->footer(
      "Inputs: a profile saved by Profiler::save / ProfilerHook, or a RunMetadata file (run_metadata-<step>.pb, "
      ".gz or not); FILE@N is step N of FILE, FILE alone the average of its steps.\n"
      "  stepscope diff before/profile after/profile\n"
      "  stepscope diff runs/x/profile@200 runs/x/profile@400   (or: runs/x/profile --step-a 200 --step-b 400)\n"
      "  stepscope diff run_metadata-100.pb run_metadata-200.pb\n"
      "  stepscope diff base/profile new/profile --fail-if-slower 5   (exit status 3 when B's step time is more "
      "than 5% over A's)");
  d.command->add_option("inputs", d.inputs, "A and B (FILE or FILE@STEP); with one, B is A's file too")
      ->required()
      ->expected(1, 2)
      ->type_name("FILE[@STEP]");
  d.command->add_option("--step-a", d.step_a, "A's step (-1: the average of its steps)");
  d.command->add_option("--step-b", d.step_b, "B's step (-1: the average of its steps)");
  d.command->add_flag("--json", d.json, "JSON instead of text (every row)");
  d.command
      ->add_option("--fail-if-slower", d.fail_if_slower,
                   "Exit with status 3 when B's step time is more than PCT% over A's (a CI gate)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("PCT");
  d.command->add_option("--top", d.top, "Rows per table in the text")->capture_default_str();
}

int run_diff_command(const DiffCommand& d, uint64_t max_decompressed_bytes, std::ostream& out, std::ostream& err) {
  Input a = parse_input(d.inputs[0]);
  Input b = d.inputs.size() > 1 ? parse_input(d.inputs[1]) : Input{a.path, -1};
  if (d.step_a != std::numeric_limits<int64_t>::min()) a.step = d.step_a;
  if (d.step_b != std::numeric_limits<int64_t>::min()) b.step = d.step_b;
  // Each file once, even when both sides are steps of it.
  std::map<std::string, std::unique_ptr<Loaded>> loaded;
  auto get = [&](const Input& in) -> const Loaded& {
    auto& p = loaded[in.path];
    if (!p) p = std::make_unique<Loaded>(load_input(in.path, in.step, max_decompressed_bytes));
    return *p;
  };
  const Loaded& la = get(a);
  const Loaded& lb = get(b);
  const Profiler& pa = la.profiler;
  const Profiler& pb = lb.profiler;
  auto label = [](const Input& in) { return in.step >= 0 ? in.path + "@" + std::to_string(in.step) : in.path; };
  // A RunMetadata's one step is its step (whatever number it was given).
  auto step_of = [](const Loaded& l, const Input& in) {
    return l.run_metadata && in.step >= 0 ? l.profiler.steps().front() : in.step;
  };
  const ProfileDiff diff = diff_profiles(
      pa, pb, {.step_a = step_of(la, a), .step_b = step_of(lb, b), .label_a = label(a), .label_b = label(b)});
  if (d.json)
    out << diff.to_json() << "\n";
  else
    out << diff.to_text({.max_rows = d.top});
  out.flush();
  if (d.fail_if_slower >= 0) {
    const double r = diff.step_ratio();
    char line[512];
    std::snprintf(line, sizeof line, "B's step time %.1fus is %s A's %.1fus (limit +%g%%)", diff.b.step_micros,
                  std::isinf(r) ? "infinitely over" : (percent(r) + (r > 1 ? " over" : " vs")).c_str(),
                  diff.a.step_micros, d.fail_if_slower);
    if (diff.slower_than(d.fail_if_slower)) {
      err << "stepscope diff: FAIL: " << line << "\n";
      return kDiffSlowerExitCode;
    }
    err << "stepscope diff: ok: " << line << "\n";
  }
  return 0;
}

}  // namespace stepscope
