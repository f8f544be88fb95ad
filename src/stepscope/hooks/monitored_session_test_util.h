// Test helpers shared by the MonitoredSession tests: the reference tests' training graph (a
// global step and do_step = assign_add(global_step, 1)) and hooks that record calls or raise.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "stepscope/hooks/monitored_session.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/train/variables.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope::monitored_session_testing {

using stepscope::testing::TempDir;

inline int64_t i64(const Tensor& t) { return t.scalar_value<int64_t>(); }
inline float f32(const Tensor& t) { return t.flat<float>()[0]; }

// The reference tests' graph: a global step and a train op that increments it.
struct TrainingGraph {
  Graph g;
  Scope root{g};
  Variable gstep = get_or_create_global_step(root);
  Output do_step = assign_add(root.with_op_name("do_step"), gstep.value(), constant(root, int64_t{1}));
};

// Records every call, with the arguments the reference tests look at (FakeHook in the reference).
class RecordingHook : public SessionRunHook {
 public:
  explicit RecordingHook(std::string name = "hook", std::vector<std::string>* log = nullptr)
      : name_(std::move(name)), log_(log) {}

  using SessionRunHook::begin;
  void begin(Graph& graph) override {
    ++begin_calls;
    begin_graph = &graph;
    record("begin");
  }
  void after_create_session(Session& session, Coordinator& coord) override {
    ++after_create_session_calls;
    this->coord = &coord;
    record("after_create_session");
  }
  std::optional<SessionRunArgs> before_run(SessionRunContext& context) override {
    ++before_run_calls;
    record("before_run");
    last_original_args = context.original_args();
    last_session = &context.session();
    if (on_before_run) on_before_run(context);
    return request;
  }
  void after_run(SessionRunContext& context, const SessionRunValues& values) override {
    ++after_run_calls;
    record("after_run");
    last_results = values.results;
    last_options = values.options;
    // The RunMetadata of a call lives only as long as the call when the caller gave none: copy.
    last_run_metadata_address = values.run_metadata;
    last_run_metadata = *values.run_metadata;
    if (request_stop_in_after_run) context.request_stop();
    if (on_after_run) on_after_run(context, values);
  }
  void end(Session& session) override {
    ++end_calls;
    record("end");
    if (on_end) on_end(session);
  }

  std::optional<SessionRunArgs> request;
  bool request_stop_in_after_run = false;
  std::function<void(SessionRunContext&)> on_before_run;
  std::function<void(SessionRunContext&, const SessionRunValues&)> on_after_run;
  std::function<void(Session&)> on_end;

  int begin_calls = 0, after_create_session_calls = 0, before_run_calls = 0, after_run_calls = 0, end_calls = 0;
  SessionRunArgs last_original_args;
  Session* last_session = nullptr;
  Graph* begin_graph = nullptr;
  FetchResult last_results;
  RunOptions last_options;
  const RunMetadata* last_run_metadata_address = nullptr;
  RunMetadata last_run_metadata;
  Coordinator* coord = nullptr;

 private:
  void record(const std::string& what) {
    if (log_) log_->push_back(name_ + "." + what);
  }
  std::string name_;
  std::vector<std::string>* log_;
};

// Throws `raise()` the n-th time before_run is called, once (RaiseOnceAtCountN).
class RaiseOnceAtCountN : public SessionRunHook {
 public:
  RaiseOnceAtCountN(int n, std::function<void()> raise) : n_(n), raise_(std::move(raise)) {}
  std::optional<SessionRunArgs> before_run(SessionRunContext&) override {
    if (--n_ == 0 && !raised) {
      raised = true;
      raise_();
    }
    return std::nullopt;
  }
  bool raised = false;

 private:
  int n_;
  std::function<void()> raise_;
};

// Saves a checkpoint with the scaffold's saver after every step and when a session is created,
// enough to exercise restore-on-recovery here (CheckpointSaverHook has its own tests).
class SaveEveryStepHook : public SessionRunHook {
 public:
  SaveEveryStepHook(Scaffold& scaffold, std::string dir) : scaffold_(scaffold), dir_(std::move(dir)) {}
  using SessionRunHook::begin;
  void begin(Graph& graph) override { read_ = get_or_create_global_step_read(graph); }
  void after_create_session(Session& session, Coordinator&) override { save(session); }
  void after_run(SessionRunContext& context, const SessionRunValues&) override { save(context.session()); }

 private:
  void save(Session& session) { scaffold_.saver()->save(session, dir_ + "/model.ckpt", i64(session.run(read_))); }
  Scaffold& scaffold_;
  std::string dir_;
  Output read_;
};

template <typename F>
void expect_error(F&& f, ErrorCode code, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

inline std::unique_ptr<SessionCreator> chief(Graph& g, ChiefSessionCreatorOptions options = {}) {
  return std::make_unique<ChiefSessionCreator>(g, std::move(options));
}

}  // namespace stepscope::monitored_session_testing
