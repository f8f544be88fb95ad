#include "stepscope/hooks/flight_recorder_hook.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <system_error>

#include "stepscope/base/file_io.h"
#include "stepscope/base/json_out.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/train/variables.h"

namespace stepscope {

namespace {

// SIGUSR1: the handler only sets a flag (all it may do); the hooks poll it after each run. One
// handler however many recorders; the previous one is restored when the last goes.
std::atomic<bool> g_sigusr1{false};
std::mutex g_signal_mu;
int g_signal_users = 0;
struct sigaction g_previous_action;

extern "C" void on_sigusr1(int) { g_sigusr1.store(true, std::memory_order_relaxed); }

void install_sigusr1() {
  std::lock_guard lock(g_signal_mu);
  if (g_signal_users++ > 0) return;
  struct sigaction action = {};
  action.sa_handler = on_sigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, &g_previous_action);
}

void uninstall_sigusr1() {
  std::lock_guard lock(g_signal_mu);
  if (--g_signal_users == 0) sigaction(SIGUSR1, &g_previous_action, nullptr);
}

// What a step's statistics take in memory, roughly: the ring's cap is on this. Counted with no
// node entries made: the ring keeps each step as it was recorded until a dump reads it.
size_t statistics_bytes(const RunMetadata& metadata) { return sizeof(RunMetadata) + metadata.step_stats.held_bytes(); }

std::string seconds_text(double secs) {
  char buffer[32];
  if (secs >= 1)
    std::snprintf(buffer, sizeof buffer, "%.3f s", secs);
  else
    std::snprintf(buffer, sizeof buffer, "%.3f ms", secs * 1e3);
  return buffer;
}

const FlightRecorderOptions& validated(const FlightRecorderOptions& o) {
  if (o.max_steps < 1) throw InvalidArgumentError("FlightRecorderHook: max_steps must be at least 1, given: 0");
  auto non_negative = [](double v, const char* name) {
    if (!(v >= 0) || !std::isfinite(v))
      throw InvalidArgumentError(std::string("FlightRecorderHook: ") + name +
                                 " must be a finite number >= 0, given: " + std::to_string(v));
  };
  non_negative(o.slow_step_secs, "slow_step_secs");
  non_negative(o.slow_factor, "slow_factor");
  non_negative(o.trigger_poll_secs, "trigger_poll_secs");
  non_negative(o.min_slow_step_secs, "min_slow_step_secs");
  if (o.max_dumps_per_hour < 1)
    throw InvalidArgumentError("FlightRecorderHook: max_dumps_per_hour must be at least 1, given: " +
                               std::to_string(o.max_dumps_per_hour));
  return o;
}

}  // namespace

FlightRecorderHook::FlightRecorderHook(FlightRecorderOptions options)
    : options_(validated(options)), clock_(options_.clock ? options_.clock : Clock::system()) {
  if (options_.dump_on_sigusr1) {
    install_sigusr1();
    signal_installed_ = true;
  }
}

FlightRecorderHook::~FlightRecorderHook() {
  if (signal_installed_) uninstall_sigusr1();
}

void FlightRecorderHook::begin(Graph& graph) {
  graph_ = &graph;
  // Steps are named by the global step when there is one (as ProfilerHook's files), else by run.
  global_step_read_ = get_global_step(graph) ? get_or_create_global_step_read(graph) : Output{};
  next_trigger_poll_ = clock_->now_secs();
}

void FlightRecorderHook::after_create_session(Session& session, Coordinator&) { session.expect_traced_steps(); }

std::optional<SessionRunArgs> FlightRecorderHook::before_run(SessionRunContext&) {
  SessionRunArgs args;
  args.options.emplace();
  args.options->trace_level = TraceLevel::kFullTrace;
  if (global_step_read_) args.fetches = global_step_read_;
  recorded_current_ = false;
  run_start_ = clock_->now_secs();
  return args;
}

void FlightRecorderHook::record(const RunMetadata* metadata, int64_t step, double secs) {
  recorded_current_ = true;
  Slot slot;
  if (ring_.size() >= options_.max_steps) {
    bytes_ -= ring_.front().bytes;
    slot = std::move(ring_.front());
    ring_.pop_front();
  } else if (!spare_.empty()) {
    slot = std::move(spare_.back());
    spare_.pop_back();
  }
  slot.step = step;
  slot.secs = secs;
  if (metadata)
    slot.run_metadata.step_stats = metadata->step_stats;  // into the slot's arrays when they are big enough
  else
    slot.run_metadata.step_stats.clear();
  slot.bytes = statistics_bytes(slot.run_metadata);
  bytes_ += slot.bytes;
  ring_.push_back(std::move(slot));
  while (ring_.size() > 1 && bytes_ > options_.max_bytes) {
    bytes_ -= ring_.front().bytes;
    spare_.push_back(std::move(ring_.front()));
    ring_.pop_front();
  }
}

std::optional<std::string> FlightRecorderHook::slow_verdict(double secs) {
  std::optional<std::string> verdict;
  if (options_.slow_step_secs > 0 && secs > options_.slow_step_secs) {
    verdict = "took " + seconds_text(secs) + ", over the threshold of " + seconds_text(options_.slow_step_secs);
  } else if (options_.slow_factor > 0 && secs >= options_.min_slow_step_secs &&
             recent_secs_.size() >= std::max<size_t>(1, options_.min_steps_for_median)) {
    median_scratch_.assign(recent_secs_.begin(), recent_secs_.end());
    auto middle = median_scratch_.begin() + static_cast<std::ptrdiff_t>(median_scratch_.size() / 2);
    std::nth_element(median_scratch_.begin(), middle, median_scratch_.end());
    const double median = *middle;
    if (median > 0 && secs > options_.slow_factor * median) {
      char factor[32];
      std::snprintf(factor, sizeof factor, "%.1fx", secs / median);
      verdict = "took " + seconds_text(secs) + ", " + factor + " the median " + seconds_text(median) + " of the last " +
                std::to_string(recent_secs_.size()) + " steps";
    }
  }
  // A slow step joins the median after the verdict: a run that slows down for good is slow once
  // the window has moved, not forever.
  recent_secs_.push_back(secs);
  if (recent_secs_.size() > std::max<size_t>(1, options_.median_window)) recent_secs_.pop_front();
  return verdict;
}

bool FlightRecorderHook::poll_trigger_file() {
  if (options_.trigger_file_name.empty()) return false;
  const double now = clock_->now_secs();
  if (now < next_trigger_poll_) return false;
  next_trigger_poll_ = now + options_.trigger_poll_secs;
  std::error_code error;
  return std::filesystem::exists(std::filesystem::path(options_.output_dir) / options_.trigger_file_name, error);
}

void FlightRecorderHook::after_run(SessionRunContext&, const SessionRunValues& run_values) {
  // The step's own time, the executor's (the hooks' writes, e.g. ProfilerHook's, are not the
  // step's); with a clock given (tests), that clock around the run.
  double secs = clock_->now_secs() - run_start_;
  if (!options_.clock && run_values.run_metadata && run_values.run_metadata->step_timing.wall_ns > 0)
    secs = static_cast<double>(run_values.run_metadata->step_timing.wall_ns) / 1e9;
  // The global step's read is the value before the run's increment, as ProfilerHook names it.
  const int64_t step =
      global_step_read_ && !run_values.results.empty() ? global_step_value(run_values.results.tensor()) + 1 : runs_ + 1;
  ++runs_;
  record(run_values.run_metadata, step, secs);
  if (std::optional<std::string> slow = slow_verdict(secs)) {
    dump("slow", "step " + std::to_string(step) + " " + *slow);
  } else if (g_sigusr1.exchange(false, std::memory_order_relaxed)) {
    dump("signal", "SIGUSR1 at step " + std::to_string(step));
  } else if (poll_trigger_file()) {
    const std::filesystem::path trigger = std::filesystem::path(options_.output_dir) / options_.trigger_file_name;
    if (dump("file", trigger.string() + " appeared at step " + std::to_string(step))) {
      std::error_code error;
      std::filesystem::remove(trigger, error);
    }
  }
}

void FlightRecorderHook::on_run_error(SessionRunContext&, const SessionRunValues& run_values,
                                      const std::exception& error) {
  if (!options_.dump_on_error) return;
  // The failing run: recorded here unless this hook's after_run already did (the error came from
  // a hook after it).
  if (!recorded_current_) {
    ++runs_;
    const int64_t step = ring_.empty() ? runs_ : ring_.back().step + 1;
    record(run_values.run_metadata, step, clock_->now_secs() - run_start_);
  }
  dump("error", "step " + std::to_string(ring_.back().step) + " raised: " + error.what());
}

std::optional<std::filesystem::path> FlightRecorderHook::dump(const std::string& reason, const std::string& detail) {
  if (ring_.empty()) return std::nullopt;
  const double now = clock_->now_secs();
  while (!dump_times_.empty() && dump_times_.front() <= now - 3600) dump_times_.pop_front();
  if (dump_times_.size() >= static_cast<size_t>(options_.max_dumps_per_hour)) {
    ++skipped_dumps_;
    return std::nullopt;
  }
  const int64_t last = ring_.back().step;
  const std::filesystem::path path =
      std::filesystem::path(options_.output_dir) /
      ("flight-" + std::to_string(last) + "-" + reason + (options_.gzip ? ".json.gz" : ".json"));

  std::string metadata = "{\"stepscope_flight_recorder\":{\"reason\":";
  json_out::append_string(metadata, reason);
  metadata += ",\"detail\":";
  json_out::append_string(metadata, detail);
  metadata += ",\"steps\":[";
  for (size_t i = 0; i < ring_.size(); ++i) metadata += (i ? "," : "") + std::to_string(ring_[i].step);
  metadata += "],\"step_secs\":[";
  for (size_t i = 0; i < ring_.size(); ++i) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.9g", ring_[i].secs);
    metadata += (i ? "," : "") + std::string(secs);
  }
  metadata += "],\"skipped_dumps\":" + std::to_string(skipped_dumps_) + "}}";

  std::vector<const StepStats*> steps;
  std::vector<int64_t> numbers;
  for (const Slot& slot : ring_) {
    steps.push_back(&slot.run_metadata.step_stats);
    numbers.push_back(slot.step);
  }
  std::optional<std::string> failure;
  try {
    if (!options_.output_dir.empty()) std::filesystem::create_directories(options_.output_dir);
    // Streamed into the file as it is made: a dump's text (97 MB for 10 steps of a 10,000-node
    // graph) is never held whole, and the hook keeps no memory beyond its ring between dumps.
    const Timeline timeline(steps, graph_, numbers);
    write_file_atomically_streamed(path,
                                   [&](const PieceWriter& write) {
                                     timeline.write_chrome_trace(write, {.show_dataflow = options_.show_dataflow,
                                                                         .show_memory = options_.show_memory,
                                                                         .metadata_json = metadata});
                                   },
                                   {.gzip = options_.gzip});
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // The dump read every step whole (node entries of ~420 bytes a node): the ring goes back to
  // holding what its cap counts, the steps as they were recorded.
  for (Slot& slot : ring_) slot.run_metadata.step_stats.drop_node_entries();
  if (failure) {
    const std::string& why = *failure;
    options_.log.log_warning("FlightRecorder: could not write " + path.string() +
                             (why.find(path.string()) == std::string::npos ? ": " + why : " (" + why + ")"));
    return std::nullopt;
  }
  dump_times_.push_back(now);
  options_.log.log_info(
      "FlightRecorder: " + detail + ": wrote " + path.string() + " (steps " + std::to_string(ring_.front().step) +
      ".." + std::to_string(last) + ")" +
      (skipped_dumps_ ? "; " + std::to_string(skipped_dumps_) + " dumps skipped by the rate limit" : ""));
  return path;
}

size_t FlightRecorderHook::held_memory_bytes() const {
  size_t bytes = 0;
  for (const Slot& slot : ring_) bytes += slot.run_metadata.step_stats.reserved_bytes();
  for (const Slot& slot : spare_) bytes += slot.run_metadata.step_stats.reserved_bytes();
  return bytes;
}

std::vector<int64_t> FlightRecorderHook::recorded_steps() const {
  std::vector<int64_t> steps;
  for (const Slot& slot : ring_) steps.push_back(slot.step);
  return steps;
}

}  // namespace stepscope
