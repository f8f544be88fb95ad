#include "stepscope/tools/cli.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/version.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/run_options.h"
#include "stepscope/tools/diff_command.h"
#include "stepscope/tools/merge_command.h"
#include "stepscope/tools/trace_server.h"

namespace stepscope {

namespace {

// tfprof's flags, which its tool also takes with one dash.
const std::set<std::string, std::less<>> kLongFlags = {"max_depth",
                                                       "min_bytes",
                                                       "min_peak_bytes",
                                                       "min_residual_bytes",
                                                       "min_output_bytes",
                                                       "min_micros",
                                                       "min_accelerator_micros",
                                                       "min_cpu_micros",
                                                       "min_params",
                                                       "min_float_ops",
                                                       "min_occurrence",
                                                       "step",
                                                       "order_by",
                                                       "account_type_regexes",
                                                       "start_name_regexes",
                                                       "trim_name_regexes",
                                                       "show_name_regexes",
                                                       "hide_name_regexes",
                                                       "account_displayed_op_only",
                                                       "select",
                                                       "output",
                                                       "profile",
                                                       "profile_path",
                                                       "run_meta",
                                                       "run_meta_path",
                                                       "json",
                                                       "show_memory",
                                                       "show_dataflow",
                                                       "gzip",
                                                       "host",
                                                       "port",
                                                       "help"};

// "-max_depth" -> "--max_depth" (CLI11 reads one dash as short flags).
std::vector<std::string> normalize(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      const std::string name = a.substr(1, a.find('=') - 1);
      if (kLongFlags.count(name)) {
        out.push_back("-" + a);
        continue;
      }
    }
    out.push_back(a);
  }
  return out;
}

// "a,b,c" -> {"a", "b", "c"}, as tfprof's list flags.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

struct ProfFlags {
  ProfileOptions options;
  std::string account_type_regexes = ".*", start_name_regexes = ".*", trim_name_regexes, show_name_regexes = ".*",
              hide_name_regexes, select = "micros";
  bool json = false;
};

void add_prof_flags(CLI::App& app, ProfFlags& f) {
  ProfileOptions& o = f.options;
  auto number = [&](const char* name, auto& field, const char* what) {
    app.add_option(std::string("--") + name, field, what)->capture_default_str();
  };
  number("max_depth", o.max_depth, "Show nodes at most this deep in the tree");
  number("min_bytes", o.min_bytes, "Show nodes that requested at least this many bytes");
  number("min_peak_bytes", o.min_peak_bytes, "Show nodes whose peak memory is at least this many bytes");
  number("min_residual_bytes", o.min_residual_bytes, "Show nodes with at least this many bytes still live at the end");
  number("min_output_bytes", o.min_output_bytes, "Show nodes whose outputs are at least this many bytes");
  number("min_micros", o.min_micros, "Show nodes that ran at least this many microseconds (accelerator + cpu)");
  number("min_accelerator_micros", o.min_accelerator_micros, "Show nodes with at least this accelerator time");
  number("min_cpu_micros", o.min_cpu_micros, "Show nodes with at least this cpu time");
  number("min_params", o.min_params, "Show nodes with at least this many parameters");
  number("min_float_ops", o.min_float_ops, "Show nodes with at least this many float operations");
  number("min_occurrence", o.min_occurrence, "Show op types that occur at least this many times (op, code views)");
  number("step", o.step, "The step to show; -1: the average of all steps");
  app.add_option("--order_by", o.order_by,
                 "Order children by: name, bytes, peak_bytes, residual_bytes, output_bytes, micros, "
                 "accelerator_micros, cpu_micros, params, float_ops, occurrence")
      ->capture_default_str();
  app.add_option("--account_type_regexes", f.account_type_regexes,
                 "Comma-separated regexes: account only nodes with a matching op type (or '_trainable_variables')")
      ->capture_default_str();
  app.add_option("--start_name_regexes", f.start_name_regexes, "Comma-separated regexes: show from matching nodes")
      ->capture_default_str();
  app.add_option("--trim_name_regexes", f.trim_name_regexes,
                 "Comma-separated regexes: hide what is below matching nodes");
  app.add_option("--show_name_regexes", f.show_name_regexes, "Comma-separated regexes: show matching nodes")
      ->capture_default_str();
  app.add_option("--hide_name_regexes", f.hide_name_regexes, "Comma-separated regexes: hide matching nodes");
  app.add_option("--account_displayed_op_only", o.account_displayed_op_only,
                 "true: totals count the displayed nodes only")
      ->capture_default_str();
  app.add_option("--select", f.select,
                 "Comma-separated columns: bytes, micros, params, float_ops, device, op_types, occurrence, "
                 "input_shapes, accelerator_micros, cpu_micros, peak_bytes, residual_bytes, output_bytes, tensor_value")
      ->capture_default_str();
  app.add_option("--output", o.output, "stdout, file:outfile=F, timeline:outfile=F, pprof:outfile=F.pb.gz or none")
      ->capture_default_str();
  app.add_flag("--json", f.json, "Print the view's JSON form instead of the text");
}

// 128 random bits, hex: the serve token when listening beyond loopback.
std::string random_token() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    char chunk[9];
    std::snprintf(chunk, sizeof chunk, "%08x", static_cast<unsigned>(device()));
    token += chunk;
  }
  return token;
}

ProfileOptions finish(ProfFlags& f) {
  ProfileOptions o = f.options;
  o.account_type_regexes = split_list(f.account_type_regexes);
  o.start_name_regexes = split_list(f.start_name_regexes);
  o.trim_name_regexes = split_list(f.trim_name_regexes);
  o.show_name_regexes = split_list(f.show_name_regexes);
  o.hide_name_regexes = split_list(f.hide_name_regexes);
  o.select = split_list(f.select);
  return o;
}

// The step of a saved profile: `step`, or the latest one added when -1.
StepStats profile_step(const Profiler& profiler, int64_t step, const std::string& path) {
  const std::vector<int64_t> steps = profiler.steps();
  if (steps.empty()) throw NotFoundError("profile " + path + " has no steps");
  if (step < 0) step = steps.back();
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
    std::string available;
    for (int64_t s : steps) available += (available.empty() ? "" : " ") + std::to_string(s);
    throw NotFoundError("profile " + path + " has no step " + std::to_string(step) + " (steps: " + available + ")");
  }
  return profiler.step_stats(step);
}

TraceServer* g_server = nullptr;
void stop_serving(int) {
  if (g_server) g_server->stop();
}

}  // namespace

int run_cli(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err) {
  CLI::App app{"stepscope: look at the traces and profiles of training runs", "stepscope"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stepscope " STEPSCOPE_VERSION);
  // For every command that reads files: a gzipped input may inflate this far, no further.
  uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes;
  auto add_limit = [&](CLI::App& command) {
    command
        .add_option("--max-decompressed-bytes", max_decompressed_bytes,
                    "Refuse a .gz input that inflates past this many bytes (a small .gz can hold gigabytes)")
        ->capture_default_str();
  };

  // prof
  ProfFlags prof;
  std::string prof_view, prof_path;
  CLI::App* prof_command = app.add_subcommand("prof", "Print a tfprof view of a saved profile (ProfilerHook's)");
  prof_command
      ->add_option("view", prof_view,
                   "scope, op, graph, code, advise, memory (a step's peak memory by kind: parameters, optimizer "
                   "slots, gradients, activations, other), or timing (every run's step time, input / idle / hooks "
                   "shares: ProfilerHook records them)")
      ->required()
      ->check(CLI::IsMember({"scope", "op", "graph", "code", "advise", "memory", "timing"}));
  prof_command->add_option("--profile,--profile_path", prof_path, "A profile saved by Profiler::save / ProfilerHook")
      ->required();
  add_prof_flags(*prof_command, prof);
  add_limit(*prof_command);

  // timeline
  std::string timeline_run_meta, timeline_profile, timeline_output;
  int64_t timeline_step = -1;
  bool show_memory = false, show_dataflow = true, gzip = false;
  CLI::App* timeline_command =
      app.add_subcommand("timeline", "Convert a saved step (RunMetadata or profile) to a Chrome trace");
  auto* tl_meta = timeline_command->add_option("--run_meta,--run_meta_path", timeline_run_meta,
                                               "A RunMetadata file (run_metadata-<step>.pb)");
  auto* tl_profile = timeline_command->add_option("--profile,--profile_path", timeline_profile, "A saved profile");
  tl_meta->excludes(tl_profile);
  timeline_command->add_option("--step", timeline_step, "With --profile: the step (-1: the latest)")
      ->capture_default_str();
  timeline_command->add_option("--output,-o", timeline_output, "The trace to write (.json, or .json.gz)")->required();
  timeline_command->add_option("--show_memory", show_memory, "Tensor and allocator memory tracks")
      ->capture_default_str();
  timeline_command->add_option("--show_dataflow", show_dataflow, "Dataflow arrows")->capture_default_str();
  timeline_command->add_flag("--gzip", gzip, "gzip the trace (also implied by a .gz name)");
  add_limit(*timeline_command);

  // critical_path
  std::string cp_run_meta, cp_profile;
  int64_t cp_step = -1;
  bool cp_json = false;
  CLI::App* cp_command =
      app.add_subcommand("critical_path", "The chain of ops that determined a saved step's wall time");
  auto* cp_meta = cp_command->add_option("--run_meta,--run_meta_path", cp_run_meta, "A RunMetadata file");
  auto* cp_prof = cp_command->add_option("--profile,--profile_path", cp_profile, "A saved profile");
  cp_meta->excludes(cp_prof);
  cp_command->add_option("--step", cp_step, "With --profile: the step (-1: the latest)")->capture_default_str();
  cp_command->add_flag("--json", cp_json, "JSON instead of text");
  std::string what_if_target;
  double what_if_speedup = 2.0;
  cp_command->add_option("--what-if", what_if_target,
                         "Replay the step with this op (node name) or op type faster, and show the new wall time "
                         "and critical path");
  cp_command->add_option("--speedup", what_if_speedup, "With --what-if: how many times faster")->capture_default_str();
  add_limit(*cp_command);

  // diff
  DiffCommand diff;
  add_diff_command(app, diff);
  add_limit(*diff.command);

  // merge
  MergeCommand merge;
  add_merge_command(app, merge);
  add_limit(*merge.command);

  // serve
  std::string serve_dir, host = "127.0.0.1";
  int port = 9001;
  CLI::App* serve_command = app.add_subcommand(
      "serve",
      "A web UI for the runs under a directory: step time, scalars, timelines, tfprof views, critical path, memory, "
      "and data-parallel jobs with their ranks merged");
  serve_command
      ->add_option(
          "dir", serve_dir,
          "Directory of a run or of many runs (each directory with event files, timelines or a profile is a run; "
          "a directory of runs named rank0, rank1, ... is a data-parallel job)")
      ->required();
  serve_command->add_option("--host", host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  serve_command->add_option("--port", port, "Port (Perfetto's URL links need 9001; 0: any free port)")
      ->capture_default_str();
  std::string token;
  serve_command->add_option("--token", token,
                            "Required on every request (default: none on loopback; made up and printed for any "
                            "other --host)");

  std::vector<std::string> args = normalize(raw_args);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);  // prints the help, or the mistake and a hint
    return code == 0 ? 0 : 2;
  }

  try {
    if (prof_command->parsed()) {
      Profiler profiler = Profiler::load(prof_path, max_decompressed_bytes);
      profiler.set_stdout(&out);
      profiler.set_log(&err);
      ProfileOptions options = finish(prof);
      validate_profile_options(options);  // strict here, as tfprof's command line is
      if (prof_view == "advise") {
        out << profiler.advise(AdvisorOptions::all(), false).text();
        return 0;
      }
      if (prof_view == "timing") {
        const StepTimings& timings = profiler.step_timings();
        if (timings.empty())
          throw NotFoundError("profile " + prof_path +
                              " has no step timings (ProfilerHook records them since this version; "
                              "Profiler::add_step_timing adds them by hand)");
        out << (prof.json ? timings.to_json() + "\n" : timings.summary_text());
        return 0;
      }
      if (prof_view == "memory") {
        const std::vector<int64_t> steps = profiler.steps();
        if (steps.empty()) throw NotFoundError("profile " + prof_path + " has no steps");
        const int64_t step = options.step >= 0 ? options.step : steps.back();
        profile_step(profiler, step, prof_path);  // NotFoundError listing the steps
        const std::optional<MemoryByKind> memory = profiler.memory_by_kind(step);
        if (!memory)
          throw NotFoundError("profile " + prof_path + " has no memory breakdown of step " + std::to_string(step) +
                              " (the step was added without its graph, or by an older stepscope)");
        out << (prof.json ? memory->to_json() + "\n" : "step " + std::to_string(step) + ": " + memory->to_text());
        return 0;
      }
      if (prof.json) options.output = "none";
      if (prof_view == "scope") {
        auto r = profiler.profile_name_scope(options);
        if (prof.json) out << r.to_json() << "\n";
      } else if (prof_view == "graph") {
        auto r = profiler.profile_graph(options);
        if (prof.json) out << r.to_json() << "\n";
      } else if (prof_view == "op") {
        auto r = profiler.profile_operations(options);
        if (prof.json) out << r.to_json() << "\n";
      } else {
        auto r = profiler.profile_code(options);
        if (prof.json) out << r.to_json() << "\n";
      }
      return 0;
    }
    if (timeline_command->parsed() || cp_command->parsed()) {
      const bool timeline = timeline_command->parsed();
      const std::string& meta_path = timeline ? timeline_run_meta : cp_run_meta;
      const std::string& profile_path = timeline ? timeline_profile : cp_profile;
      if (meta_path.empty() && profile_path.empty()) {
        err << "stepscope: give --run_meta FILE or --profile FILE\n";
        return 2;
      }
      std::optional<Profiler> profile;
      if (meta_path.empty()) profile.emplace(Profiler::load(profile_path, max_decompressed_bytes));
      StepStats step = profile ? profile_step(*profile, timeline ? timeline_step : cp_step, profile_path)
                               : load_run_metadata(meta_path, max_decompressed_bytes).step_stats;
      if (timeline) {
        std::string trace;
        Timeline tl(step);
        if (profile) {
          // The profile saved each node's FLOPs (the hook's timelines have them from the graph).
          const int64_t number = timeline_step >= 0 ? timeline_step : profile->steps().back();
          const auto flops = profile->float_ops_per_run(number);
          tl.set_float_ops([&](const NodeExecStats& ns) {
            auto it = flops.find(std::string(ns.node_name));
            return it == flops.end() ? int64_t{-1} : it->second;
          });
          if (show_memory)
            err << "note: a saved profile keeps no tensor memory (only per-node totals); for memory tracks convert "
                   "the step's RunMetadata (ProfilerHook writes run_metadata-<step>.pb beside its timelines) "
                   "with --run_meta\n";
        }
        tl.write_chrome_trace(trace, {.show_dataflow = show_dataflow, .show_memory = show_memory});
        const bool gz = gzip || (timeline_output.size() > 3 && timeline_output.ends_with(".gz"));
        write_file_atomically(timeline_output, trace, gz);
        out << "wrote " << timeline_output << " (" << trace.size() << " bytes of JSON)\n";
      } else {
        if (!what_if_target.empty()) {
          const WhatIf w = what_if(nullptr, step, what_if_target, what_if_speedup);
          out << (cp_json ? w.to_json() + "\n" : w.to_text());
          return 0;
        }
        CriticalPath path = critical_path(step);
        if (profile) {
          const int64_t number = cp_step >= 0 ? cp_step : profile->steps().back();
          if (const auto timing = profile->step_timings().find(number)) path.hooks_ns = timing->hooks_ns;
        }
        out << (cp_json ? path.to_json() + "\n" : path.to_text());
      }
      return 0;
    }
    if (diff.command->parsed()) return run_diff_command(diff, max_decompressed_bytes, out, err);
    if (merge.command->parsed()) return run_merge_command(merge, max_decompressed_bytes, out);
    if (serve_command->parsed()) {
      if (token.empty() && !is_loopback_host(host)) token = random_token();
      TraceServer server({.root = serve_dir, .host = host, .port = port, .token = token});
      const int bound = server.bind();
      const std::string query = token.empty() ? "" : "?token=" + token;
      out << "serving the runs under " << serve_dir << " at " << server.url() << " (Ctrl-C stops)\n";
      if (is_loopback_host(host))
        out << "  from another machine: ssh -L " << bound << ":localhost:" << bound
            << " <this host>, then open http://localhost:" << bound << "/\n";
      else
        out << "  every request needs the token: open the URL above (it sets a cookie)\n";
      if (bound == 9001)
        out << "  or directly: https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/<file>" << query << "\n";
      out.flush();
      g_server = &server;
      std::signal(SIGINT, stop_serving);
      std::signal(SIGTERM, stop_serving);
      server.serve();
      g_server = nullptr;
      return 0;
    }
  } catch (const std::exception& e) {
    err << "stepscope: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace stepscope
