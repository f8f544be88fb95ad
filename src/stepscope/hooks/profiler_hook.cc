#include "stepscope/hooks/profiler_hook.h"

#include <system_error>

#include "stepscope/base/file_io.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

// The reference gets its writer before it validates anything; a directory where no event file
// can be created is not worth failing the training for.
std::shared_ptr<SummaryWriter> cached_writer(const ProfilerHookOptions& options) {
  auto warn = [&](const std::string& why) {
    options.log.log_warning("ProfilerHook: no summary writer for '" + options.output_dir + "': " + why);
  };
  // A directory that cannot be made is caught here rather than by the cache, which keeps an
  // empty entry for a writer it failed to make.
  std::error_code ec;
  if (!options.output_dir.empty()) std::filesystem::create_directories(options.output_dir, ec);
  if (ec) {
    warn(ec.message());
    return nullptr;
  }
  try {
    return SummaryWriterCache::get(options.output_dir);
  } catch (const Error& e) {
    warn(e.what());
    return nullptr;
  }
}

const ProfilerHookOptions& validated(const ProfilerHookOptions& options) {
  if (options.window_steps < 1)
    throw InvalidArgumentError("window_steps must be at least 1, given: " + std::to_string(options.window_steps));
  if (options.max_files_to_keep < 0)
    throw InvalidArgumentError("max_files_to_keep must be >= 0, given: " + std::to_string(options.max_files_to_keep));
  return options;
}

}  // namespace

ProfilerHook::ProfilerHook(ProfilerHookOptions options)
    : options_(std::move(options)),
      writer_(cached_writer(options_)),
      timer_(options_.save_secs, options_.save_steps, options_.clock, "save_secs", "save_steps") {
  validated(options_);
  window_.reserve(options_.window_steps);
}

ProfilerHook::~ProfilerHook() = default;

std::filesystem::path ProfilerHook::timeline_path(int64_t step) const {
  return std::filesystem::path(options_.output_dir) /
         ("timeline-" + std::to_string(step) + (options_.gzip ? ".json.gz" : ".json"));
}

std::filesystem::path ProfilerHook::run_metadata_path(int64_t step) const {
  return std::filesystem::path(options_.output_dir) / ("run_metadata-" + std::to_string(step) + ".pb");
}

std::filesystem::path ProfilerHook::profile_path() const {
  return std::filesystem::path(options_.output_dir) / "profile";
}

void ProfilerHook::begin() {
  next_step_.reset();
  request_trace_ = false;
  window_.clear();
  global_step_read_ = Output{};
}

void ProfilerHook::begin(Graph& graph) {
  begin();
  resolve(graph);
}

void ProfilerHook::after_create_session(Session& session, Coordinator&) {
  if (!global_step_read_) resolve(session.graph());
  session.expect_traced_steps();
}

void ProfilerHook::resolve(Graph& graph) {
  if (!get_global_step(graph)) throw FailedPreconditionError("Global step should be created to use ProfilerHook.");
  global_step_read_ = get_or_create_global_step_read(graph);
  graph_ = &graph;
  // The Profiler keeps a pointer to its graph: one that may be gone is replaced, never used.
  if (options_.save_profile && (!profiler_ || profiler_graph_id_ != graph.id())) {
    profiler_ = std::make_unique<Profiler>(graph, ProfilerOptions{.max_steps = options_.profile_max_steps});
    profiler_graph_id_ = graph.id();
  }
}

std::optional<SessionRunArgs> ProfilerHook::before_run(SessionRunContext&) {
  // A window in progress traces its remaining runs whatever the timer says.
  request_trace_ = !window_.empty() || (next_step_ && timer_.should_trigger_for_step(*next_step_));
  SessionRunArgs args;
  args.fetches = global_step_read_;
  const bool timing = options_.record_step_timing && profiler_;
  if (request_trace_ || timing) {
    args.options.emplace();
    if (request_trace_) args.options->trace_level = TraceLevel::kFullTrace;
    args.options->collect_step_timing = timing;
  }
  return args;
}

void ProfilerHook::after_run(SessionRunContext& run_context, const SessionRunValues& run_values) {
  const int64_t stale_global_step = global_step_value(run_values.results.tensor());
  if (!next_step_) timer_.update_last_triggered_step(stale_global_step);
  int64_t global_step = stale_global_step + 1;
  if (request_trace_) {
    global_step = global_step_value(run_context.session().run(global_step_read_));
    // The period counts from the start of a window.
    if (window_.empty()) timer_.update_last_triggered_step(global_step);
    window_.push_back({global_step, run_values.run_metadata ? *run_values.run_metadata : RunMetadata()});
  }
  if (options_.record_step_timing && profiler_ && run_values.run_metadata) {
    profiler_->add_step_timing(global_step, run_values.run_metadata->step_timing, run_values.hooks_ns);
    timings_unsaved_ = true;
  }
  if (request_trace_ && static_cast<int>(window_.size()) >= options_.window_steps) write_window();
  next_step_ = global_step + 1;
}

void ProfilerHook::end(Session&) {
  if (!window_.empty()) {
    write_window();
  } else if (timings_unsaved_ && profiler_) {
    // The runs since the last trace: their timings would be lost with the hook.
    try {
      profiler_->save(profile_path());
      timings_unsaved_ = false;
    } catch (const std::exception& e) {
      options_.log.log_warning("ProfilerHook: could not write the profile's step timings: " + std::string(e.what()));
    }
  }
  // The run metadata summaries go out with the session, as the other hooks' summaries do, not
  // when the cached writer is closed at exit (by then the directory may be gone).
  if (writer_) {
    try {
      writer_->flush();
    } catch (const std::exception& e) {
      options_.log.log_warning("ProfilerHook: could not flush the summaries to '" + writer_->path() +
                               "': " + std::string(e.what()));
    }
  }
}

void ProfilerHook::write_window() {
  const int64_t step = window_.back().step;
  std::vector<std::filesystem::path> written;
  auto attempt = [&](const std::filesystem::path& path, const char* what, auto&& write) {
    try {
      write();
      return true;
    } catch (const std::exception& e) {
      // The profiler's file errors name the path already.
      const std::string why = e.what();
      options_.log.log_warning(
          "ProfilerHook: could not write the " + std::string(what) + " of step " + std::to_string(step) +
          (why.find(path.string()) == std::string::npos ? " to '" + path.string() + "': " : ": ") + why);
      return false;
    }
  };

  const std::filesystem::path timeline = timeline_path(step);
  options_.log.log_info("Saving timeline for " + std::to_string(step) + " into '" + timeline.string() + "'.");
  if (!options_.output_dir.empty()) {
    std::error_code ec;  // a failure shows when the file is written
    std::filesystem::create_directories(options_.output_dir, ec);
  }
  // In a job of several processes each rank's trace says which rank wrote it and how its clock
  // stands against rank 0's, what merging the ranks' traces into one needs; one process writes
  // none, as TensorFlow.
  std::string metadata;
  if (dist::size() > 1) {
    // With this rank's clock against rank 0's: subtracting clock_offset_ns puts the trace's
    // times on rank 0's clock, to within clock_offset_error_ns.
    const dist::ClockOffset clock = dist::clock_offset();
    metadata = "{\"rank\":" + std::to_string(dist::rank()) + ",\"size\":" + std::to_string(dist::size()) +
               ",\"local_rank\":" + std::to_string(dist::local_rank()) +
               ",\"clock_offset_ns\":" + std::to_string(clock.offset_ns) +
               ",\"clock_offset_error_ns\":" + std::to_string(clock.error_ns) + "}";
  }
  const ChromeTraceOptions trace_options{.show_dataflow = options_.show_dataflow,
                                         .show_memory = options_.show_memory,
                                         .pretty = options_.pretty,
                                         .metadata_json = metadata};
  bool ok = attempt(timeline, "timeline", [&] {
    std::vector<const StepStats*> steps;
    std::vector<int64_t> numbers;
    for (const TracedStep& t : window_) {
      steps.push_back(&t.run_metadata.step_stats);
      numbers.push_back(t.step);
    }
    const Timeline trace = window_.size() == 1 ? Timeline(window_.front().run_metadata.step_stats, graph_)
                                               : Timeline(steps, graph_, numbers);
    // Streamed into the file as it is made: the trace's text is never held whole.
    write_file_atomically_streamed(timeline,
                                   [&](const PieceWriter& write) { trace.write_chrome_trace(write, trace_options); },
                                   {.gzip = options_.gzip});
  });
  if (ok) written.push_back(timeline);

  for (const TracedStep& t : window_) {
    if (options_.save_run_metadata) {
      const std::filesystem::path path = run_metadata_path(t.step);
      if (attempt(path, "run metadata", [&] { save_run_metadata(path, t.run_metadata); })) written.push_back(path);
    }
    if (writer_) {
      attempt(writer_->path(), "run metadata summary", [&] {
        writer_->add_run_metadata("step_" + std::to_string(t.step), serialize_run_metadata(t.run_metadata));
      });
    }
  }
  if (profiler_) {
    const std::filesystem::path path = profile_path();
    attempt(path, "profile", [&] {
      for (const TracedStep& t : window_) profiler_->add_step(t.step, t.run_metadata);
      profiler_->save(path);
      timings_unsaved_ = false;
    });
  }
  window_.clear();

  if (!written.empty() && options_.max_files_to_keep > 0) {
    kept_.push_back(std::move(written));
    while (kept_.size() > static_cast<size_t>(options_.max_files_to_keep)) forget_oldest_files();
  }
}

void ProfilerHook::forget_oldest_files() {
  for (const std::filesystem::path& path : kept_.front()) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    if (ec) options_.log.log_warning("ProfilerHook: could not delete '" + path.string() + "': " + ec.message());
  }
  kept_.pop_front();
}

}  // namespace stepscope
