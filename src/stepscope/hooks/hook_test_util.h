// Test-only helpers for the summary hooks' tests: the reference's _increment_global_step, a
// temporary directory, and event files read back. (Hooks are driven by HookedSession from
// monitored_session.h, as basic_session_run_hooks_test.py drives them with _HookedSession.)
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/train/event_file.h"
#include "stepscope/train/variables.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope::testing {
// Inline namespace: the two hook test harnesses link into one program without clashing.
inline namespace summary_harness {

// TensorFlow's training_util._increment_global_step: adds `increment` to the global step after
// reading it through global_step/read (a control dependency), so a hook fetching the read beside
// this op always sees the value before the increment.
inline Node* increment_global_step(Graph& graph, int64_t increment) {
  Variable step = get_global_step(graph);
  Output read = get_or_create_global_step_read(graph);
  Scope scope = Scope(graph).with_name_scope(step.name() + "/").with_control_dependencies({read.node});
  Output amount =
      step.dtype() == DType::kInt32 ? constant(scope, static_cast<int32_t>(increment)) : constant(scope, increment);
  return assign_add(scope, step.value(), amount).node;
}


// Every event of every event file in `dir`, in TensorBoard's read order (checksums checked).
inline std::vector<Event> read_dir_events(const std::string& dir) {
  std::vector<Event> all;
  for (const std::string& f : list_event_files(dir))
    for (Event& e : read_events(f)) all.push_back(std::move(e));
  return all;
}

// step -> (tag -> simple_value) of the summaries in `events` (FakeSummaryWriter.summaries in the
// reference's tests).
inline std::map<int64_t, std::map<std::string, float>> summaries_by_step(const std::vector<Event>& events) {
  std::map<int64_t, std::map<std::string, float>> out;
  for (const Event& e : events)
    if (e.summary)
      for (const auto& [tag, value] : e.scalars()) out[e.step][tag] = value;
  return out;
}

}  // namespace summary_harness
}  // namespace stepscope::testing
