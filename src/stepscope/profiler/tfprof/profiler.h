// Profiler: TensorFlow's tf.profiler.Profiler (tfprof) for stepscope graphs. Add the
// RunMetadata of traced steps, then look at them through four views, each with tfprof's
// options, text layout and numbers:
//
//   Profiler profiler(graph);
//   RunOptions traced{.trace_level = TraceLevel::kFullTrace};
//   RunMetadata metadata;
//   session.run(feeds, fetches, targets, traced, &metadata);
//   profiler.add_step(step, metadata);
//
//   profiler.profile_name_scope(ProfileOptionBuilder::trainable_variables_parameter());
//   profiler.profile_operations(ProfileOptionBuilder::time_and_memory());
//   auto report = profiler.profile_graph(ProfileOptionBuilder().with_empty_output().build());
//   std::cout << report.text();            // or report.root / report.to_json() for programs
//   profiler.advise();
//   profiler.save("runs/x/profile");      // Profiler::load("runs/x/profile") reopens it
//
// Views: scope (the name-scope tree), graph (the dataflow: a node's children are its inputs),
// op (one row per op type, with cumulative percentages) and code (the source lines that created
// the nodes). What each option does: options.h. Where the output goes (options.output):
//   stdout    tfprof's report: the Options banner and options, the Model Analysis Report banner,
//             "\nDoc:\n..." help, "Profile:\n", the view's text, the End of Report banner;
//   file:outfile=F   the same without the banners, written to F atomically;
//   timeline:outfile=F   a Chrome trace of the nodes the view displays for the step, written to
//             "F_<step>" (with step -1: one file per added step), scope/graph/code views;
//   none      nothing (the result is returned either way);
//   pprof:outfile=F   a gzipped pprof profile.proto of the displayed view (internal/pprof_output.h:
//             as TensorFlow's for the code view, also the scope and op views; one select value
//             of micros, accelerator_micros, cpu_micros, bytes, peak_bytes, residual_bytes,
//             output_bytes, params or float_ops), then TensorFlow's "Run pprof ..." line;
// A step that was not added gives TensorFlow's "Options -step=<n> not found.\nAvailable steps: "
// line on the log and an empty result. Invalid options throw InvalidArgumentError.
//
// Statistics per node (profile_model.h): run count, execution time (accelerator, cpu, total;
// a run shorter than 1 µs counts 1 µs, as TensorFlow), requested/peak/residual/output bytes,
// parameters (element counts of the trainable variables), float ops (the op's FLOP rule on the
// shapes the step saw, times the runs), device, op types (the op, the device,
// "_trainable_variables"), input shapes. With step -1 each is averaged over the steps the node
// ran in.
//
// Not thread-safe: one thread at a time. The Graph must outlive the add_step calls (the views
// never touch it); a loaded Profiler has no Graph: it adds steps of the same graph by node
// names, with float ops from the FLOP counts saved with the graph's shapes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepscope/base/file_io.h"
#include "stepscope/profiler/memory_kinds.h"
#include "stepscope/profiler/tfprof/advisor.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/options.h"
#include "stepscope/profiler/tfprof/protos.h"
#include "stepscope/profiler/tfprof/step_timings.h"
#include "stepscope/profiler/tfprof/view_text.h"
#include "stepscope/runtime/run_options.h"

namespace stepscope {

class Graph;
class StepStats;
struct RunMetadata;

namespace tfprof {
class ProfileModel;
}

// The result of the scope and graph views.
struct GraphProfile {
  GraphNodeProto root;  // "_TFProfRoot" and the displayed tree under it
  // The legend line and the node lines. Where the output was not stdout or a file, the text is
  // written on the first call (view_text.h: a deep graph's is mostly indentation).
  const std::string& text() const { return view_text.str(); }
  std::string to_json() const { return stepscope::to_json(root); }
  tfprof::ViewText view_text;
};

// The result of the op and code views.
struct MultiGraphProfile {
  MultiGraphNodeProto root;
  const std::string& text() const { return view_text.str(); }
  std::string to_json() const { return stepscope::to_json(root); }
  tfprof::ViewText view_text;
};

struct ProfilerOptions {
  // How many traced steps are kept whole (their per-node statistics and execution records, for
  // the views of one step, timelines and the critical path); 0 keeps every step. Older steps
  // are folded into per-node totals, so the averages (step -1) still cover every step added
  // while memory and the saved file stay bounded however long a run traces.
  size_t max_steps = 100;
  // How many runs' step timings (add_step_timing) are kept; older ones are dropped (counted).
  size_t max_step_timings = StepTimings::kDefaultCapacity;
};

class Profiler {
 public:
  explicit Profiler(const Graph& graph, ProfilerOptions options = {});
  ~Profiler();
  Profiler(Profiler&&) noexcept;
  Profiler& operator=(Profiler&&) noexcept;

  // Adds the statistics of a traced step (RunMetadata of a FULL_TRACE run). Several
  // RunMetadata may share a step number: they are merged. Past options.max_steps the lowest
  // step is dropped (steps() no longer lists it; the averages keep it). A RunMetadata without step stats is
  // ignored with TensorFlow's "Invalid RunMetadata for step <n>" on the log. A step of 10,000
  // records or more has its memory by kind worked out on a second thread meanwhile.
  void add_step(int64_t step, const RunMetadata& run_metadata);
  // The steps kept, ascending.
  std::vector<int64_t> steps() const;
  // Any run's timing, traced or not (RunMetadata::step_timing of a run with
  // RunOptions::collect_step_timing, and the hooks' time around it: SessionRunValues::hooks_ns).
  // Saved with the profile; ProfilerHook adds every run's.
  void add_step_timing(int64_t step, const StepTiming& timing, int64_t hooks_ns = 0);
  const StepTimings& step_timings() const;

  GraphProfile profile_name_scope(const ProfileOptions& options) const;
  GraphProfile profile_graph(const ProfileOptions& options) const;
  MultiGraphProfile profile_operations(const ProfileOptions& options) const;
  // TensorFlow's profile_python: nodes grouped by the source line that created them.
  MultiGraphProfile profile_code(const ProfileOptions& options) const;

  // Runs the checkers named in options (default: all) and prints their reports on stdout as
  // TensorFlow does (AdviceProto::text()), unless print is false.
  AdviceProto advise(const AdvisorOptions& options = AdvisorOptions::all(), bool print = true) const;
  // A checker advise() runs when its name is in AdvisorOptions::checkers (after the built-in
  // ones, in the order added).
  void add_checker(std::unique_ptr<AdviceChecker> checker);

  // The profile as bytes (profile_io.h's format) / written to `path` atomically (gzipped when
  // the path ends in ".gz"). Fast enough to call after every traced step: each step is encoded
  // once, when added (100 steps of an MLP: ~155 KB, well under a millisecond).
  std::string serialize_to_string() const;
  void save(const std::filesystem::path& path) const;
  // DataLossError naming the file when it is not a valid profile (profile_io.h lists the
  // checks); NotFoundError when missing; ResourceExhaustedError naming it and the limit when a
  // ".gz" file inflates past `max_decompressed_bytes`.
  static Profiler load(const std::filesystem::path& path,
                       uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes);
  // The same from the bytes of a profile (serialize_to_string's); `source` names them in errors.
  static Profiler parse(std::string_view bytes, const std::string& source);
  // Whether `bytes` start as a saved profile does (its magic), to tell one from other files.
  static bool looks_like_profile(std::string_view bytes);
  // A profile of one step recorded without its graph (a RunMetadata read back from a file):
  // nodes by name, op types from the records (their timeline labels), no parameters, no code.
  static Profiler from_run_metadata(const RunMetadata& run_metadata, int64_t step = 0);

  // Where the views' text goes for output "stdout" (default std::cout) and TensorFlow's
  // diagnostics (default std::cerr).
  void set_stdout(std::ostream* out);
  void set_log(std::ostream* log);
  std::ostream& log() const;

  // The step's node executions as a StepStats (names, op types, labels, device, times, threads;
  // no memory), for timelines and the critical path. Empty for a step not added.
  StepStats step_stats(int64_t step) const;
  // Each node's float ops per run in `step`, by node name (a loaded profile keeps them, so its
  // timelines can show them); empty for a step not added.
  std::unordered_map<std::string, int64_t> float_ops_per_run(int64_t step) const;
  // The step's peak memory split into parameters, optimizer slots, gradients, activations and
  // other (memory_kinds.h): worked out from the graph when the step was added, and saved with
  // the profile. Nothing for a step not added, or added to a loaded profile (no graph).
  std::optional<MemoryByKind> memory_by_kind(int64_t step) const;
  // Read-only view of everything the profiler holds (profile_model.h).
  const tfprof::ProfileModel& model() const;
  // The graph it profiles; null for a loaded profile (a file has none).
  const Graph* graph() const;

 private:
  struct Impl;
  Profiler();
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepscope
