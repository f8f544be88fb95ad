// ProfileContext: TensorFlow's tf.contrib.tfprof.ProfileContext. While one is alive, every
// Session::run of the process is a step of it (counted from 0): chosen steps are traced and added
// to its Profiler, views run automatically at chosen steps, and the profile is written to
// `<profile_dir>/profile_<step>` at dump steps, for `stepscope prof` or Profiler::load.
//
//   ProfileContext ctx("runs/x", {.trace_steps = range(100, 200, 3), .dump_steps = {200}});
//   ctx.add_auto_profiling("op", ProfileOptionBuilder::time_and_memory(), {150, 200});
//   train_loop();
//
//   ProfileContext ctx("runs/x", {.trace_steps = {}, .dump_steps = {}});  // explicit
//   ctx.trace_next_step();
//   session.run(train_op);
//   ctx.profiler()->profile_operations(ProfileOptionBuilder::time_and_memory());
//
// Without trace_steps (TF's None), steps are chosen automatically: after 10 warm-up steps, every
// step whose set of fetches was not traced before, and, while the traced steps cover under half
// of the graph's nodes and the step is under 100, about 2 in 11 others (a seeded generator); at
// most 100 traced steps in all. Without dump_steps, the profile is dumped at step 100.
//
// One context at a time (InternalError "Already in context or context not cleaned." for a
// second); create and destroy it while no session runs. Runs on several threads at once are
// steps too; a step that starts while another is being decided is not traced (TF's non-blocking
// lock). A run that raises ends its step without a trace or dump.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "stepscope/profiler/tfprof/options.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/run_interceptor.h"

namespace stepscope {

class Graph;

struct ProfileContextOptions {
  std::optional<std::vector<int64_t>> trace_steps = std::nullopt;  // nullopt: automatic; at most 100
  std::optional<std::vector<int64_t>> dump_steps = std::nullopt;   // nullopt: {100}
  bool enabled = true;  // false: nothing is installed, profiler() is null, every call a no-op
  bool debug = false;   // also writes each traced RunMetadata as run_meta_<step> and logs to stderr
};

class ProfileContext : private RunInterceptor {
 public:
  static constexpr int64_t kWarmupSteps = 10;
  static constexpr int64_t kMaxTracedSteps = 100;

  // InvalidArgumentError "Must have a directory for profile." for an empty directory,
  // "Only support tracing up to 100 steps." for more trace_steps (TensorFlow's texts).
  explicit ProfileContext(std::string profile_dir, ProfileContextOptions options = {});
  ~ProfileContext() override;  // uninstalls
  ProfileContext(const ProfileContext&) = delete;
  ProfileContext& operator=(const ProfileContext&) = delete;

  // Runs view `cmd` ("scope", "graph", "op" or "code") with `options` after each of the steps
  // (which are traced too). InvalidArgumentError "Unknown cmd: <cmd>" for another command.
  void add_auto_profiling(const std::string& cmd, ProfileOptions options, const std::vector<int64_t>& profile_steps);
  // Traces / dumps the next step whatever the lists say.
  void trace_next_step();
  void dump_next_step();

  // The profiler the traced steps go to; null until a step was traced (it profiles the graph of
  // the first traced run) or when disabled.
  Profiler* profiler() { return profiler_.get(); }
  // The number of the next step.
  int64_t step() const;

 private:
  bool before_run(const RunCall& call, int64_t& ticket) override;
  void after_run(const RunCall& call, int64_t ticket, const RunMetadata* traced) override;
  bool should_trace(int64_t step, const RunCall& call);
  void dump(const Profiler& profiler, int64_t step);
  double coverage() const;

  struct AutoProfile {
    std::string cmd;
    ProfileOptions options;
    std::set<int64_t> steps;
  };
  bool enabled_;
  bool debug_ = false;
  std::string dir_;
  bool auto_tracing_ = false;
  std::set<int64_t> trace_steps_, dump_steps_;
  std::vector<AutoProfile> auto_profiles_;
  std::set<std::string> fetched_;
  std::minstd_rand rng_{111};
  mutable std::mutex mu_;
  int64_t step_ = 0;
  int64_t traced_steps_ = 0;
  bool trace_next_ = false, dump_next_ = false;
  std::unique_ptr<Profiler> profiler_;
};

}  // namespace stepscope
