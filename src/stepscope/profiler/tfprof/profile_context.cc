#include "stepscope/profiler/tfprof/profile_context.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "stepscope/base/error.h"
#include "stepscope/graph/graph.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

constexpr const char* kCommands[] = {"scope", "graph", "op", "code"};

// TensorFlow's key for "these fetches were traced before": the sorted names, joined by '-'.
std::string fetch_key(const RunCall& call) {
  std::vector<std::string> names;
  for (const Output& f : call.fetches) names.push_back(f.name());
  for (const Node* t : call.targets) names.push_back(t->name());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string key;
  for (const std::string& n : names) key += (key.empty() ? "" : "-") + n;
  return key;
}

// A ticket: the step, and whether it is traced and dumped whatever the lists say.
constexpr int64_t kTraced = 1, kDumpNext = 2;
int64_t make_ticket(int64_t step, bool traced, bool dump_next) {
  return step * 4 + (traced ? kTraced : 0) + (dump_next ? kDumpNext : 0);
}

}  // namespace

ProfileContext::ProfileContext(std::string profile_dir, ProfileContextOptions options)
    : enabled_(options.enabled), debug_(options.debug), dir_(std::move(profile_dir)) {
  if (!enabled_) return;
  if (dir_.empty()) throw InvalidArgumentError("Must have a directory for profile.");
  if (options.trace_steps) {
    if (options.trace_steps->size() > static_cast<size_t>(kMaxTracedSteps))
      throw InvalidArgumentError("Only support tracing up to 100 steps.");
    trace_steps_.insert(options.trace_steps->begin(), options.trace_steps->end());
  } else {
    auto_tracing_ = true;
  }
  if (options.dump_steps)
    dump_steps_.insert(options.dump_steps->begin(), options.dump_steps->end());
  else
    dump_steps_ = {kMaxTracedSteps};
  install_run_interceptor(this);
}

ProfileContext::~ProfileContext() {
  if (enabled_) remove_run_interceptor(this);
}

void ProfileContext::add_auto_profiling(const std::string& cmd, ProfileOptions options,
                                        const std::vector<int64_t>& profile_steps) {
  if (!enabled_) return;
  if (std::find(std::begin(kCommands), std::end(kCommands), cmd) == std::end(kCommands))
    throw InvalidArgumentError("Unknown cmd: " + cmd + " (one of scope, graph, op, code)");
  std::lock_guard lock(mu_);
  auto_profiles_.push_back({cmd, std::move(options), {profile_steps.begin(), profile_steps.end()}});
  trace_steps_.insert(profile_steps.begin(), profile_steps.end());
}

void ProfileContext::trace_next_step() {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  trace_next_ = true;
}

void ProfileContext::dump_next_step() {
  if (!enabled_) return;
  std::lock_guard lock(mu_);
  dump_next_ = true;
}

int64_t ProfileContext::step() const {
  std::lock_guard lock(mu_);
  return step_;
}

double ProfileContext::coverage() const {
  if (!profiler_ || profiler_->model().nodes.empty()) return 0;
  const auto& nodes = profiler_->model().nodes;
  const auto covered = std::count_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.steps_run > 0; });
  return static_cast<double>(covered) / static_cast<double>(nodes.size());
}

bool ProfileContext::should_trace(int64_t step, const RunCall& call) {
  if (traced_steps_ >= kMaxTracedSteps) return false;
  if (trace_steps_.count(step) || trace_next_ || dump_next_) {
    ++traced_steps_;
    return true;
  }
  if (!auto_tracing_ || step <= kWarmupSteps) return false;
  // Fetches not traced before are traced; while the traces cover little of the graph, a few
  // random steps too.
  if (fetched_.insert(fetch_key(call)).second ||
      (coverage() < 0.5 && step < kMaxTracedSteps && std::uniform_int_distribution<int>(0, 10)(rng_) < 2)) {
    ++traced_steps_;
    return true;
  }
  return false;
}

bool ProfileContext::before_run(const RunCall& call, int64_t& ticket) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {  // another run is deciding or recording: this one is not profiled
    ticket = -1;
    return false;
  }
  const int64_t step = step_++;
  // Alive, the context traces steps of every session it sees: each makes a plan's first traced
  // step's memory ahead, from its next plan on (Session::expect_traced_steps).
  call.session.expect_traced_steps();
  const bool traced = should_trace(step, call);
  ticket = make_ticket(step, traced, dump_next_);
  trace_next_ = dump_next_ = false;
  if (traced && debug_) std::cerr << "debug: tracing step: " << step << "\n";
  return traced;
}

void ProfileContext::after_run(const RunCall& call, int64_t ticket, const RunMetadata* traced) {
  if (ticket < 0) return;
  std::lock_guard lock(mu_);
  const int64_t step = ticket / 4;
  // Made when first needed, for the graph of the run that needs it (TF's default graph).
  auto profiler = [&]() -> Profiler& {
    if (!profiler_) profiler_ = std::make_unique<Profiler>(call.session.graph());
    return *profiler_;
  };
  if (traced) {
    if (debug_) {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      save_run_metadata(std::filesystem::path(dir_) / ("run_meta_" + std::to_string(step)), *traced);
    }
    if (profiler().graph() == &call.session.graph())
      profiler_->add_step(step, *traced);
    else
      profiler_->log() << "ProfileContext: step " << step
                       << " ran another graph than the profiled one; its trace is not added\n";
  }
  if (dump_steps_.count(step) || (ticket & kDumpNext)) dump(profiler(), step);
  for (const AutoProfile& p : auto_profiles_) {
    if (!p.steps.count(step)) continue;
    profiler();
    if (debug_) std::cerr << "debug: profiling " << p.cmd << " step: " << step << "\n";
    if (p.cmd == "graph")
      profiler_->profile_graph(p.options);
    else if (p.cmd == "scope")
      profiler_->profile_name_scope(p.options);
    else if (p.cmd == "op")
      profiler_->profile_operations(p.options);
    else
      profiler_->profile_code(p.options);
  }
}

void ProfileContext::dump(const Profiler& profiler, int64_t step) {
  if (debug_) std::cerr << "debug: dumping file at step: " << step << "\n";
  std::error_code ec;  // a directory that cannot be made: the save's error names the file
  std::filesystem::create_directories(dir_, ec);
  profiler.save(std::filesystem::path(dir_) / ("profile_" + std::to_string(step)));
}

}  // namespace stepscope
