// A diff of two profiles: where the time and memory of a step went in A and in B, per op type,
// per name scope and per node, what ran on one side only, the two critical paths side by side,
// and the step times with their ratio (the `stepscope diff` command and its CI gate).
//
//   Profiler a = Profiler::load("runs/before/profile");
//   Profiler b = Profiler::load("runs/after/profile");
//   ProfileDiff diff = diff_profiles(a, b);                 // each side: the average of its steps
//   std::cout << diff.to_text();
//   if (diff.step_ratio() > 1.05) ...                       // B more than 5% slower
//   diff_profiles(p, p, {.step_a = 200, .step_b = 400});   // two steps of one profile
//   diff_profiles(Profiler::from_run_metadata(ma), Profiler::from_run_metadata(mb));
//
// What a side measures (its `step`, or the average over the steps the profile keeps):
//   step time   a step's wall time: its start (the first op's when the step's start was not
//               recorded) to the last op's end, on every device, as the critical path measures
//               it; with step -1 the mean over the steps kept;
//   per node    tfprof's statistics (profile_model.h): time = accelerator + cpu micros,
//               bytes = requested bytes, peak bytes; with step -1 the sum over the steps kept
//               divided by their number (a node that ran in half the steps counts half), so the
//               nodes' times add up per step as the step time does;
//   op type     the sum over its nodes; name scope: the sum over the nodes under it ("a/b/c"
//               counts in "a" and "a/b"; a node at the top level is in no scope).
// Nodes are matched by name, so profiles of two different graphs diff too: the nodes that exist
// in one model only (graph nodes, or nodes seen in its steps) are listed, and a row that ran on
// one side only (run count 0 on the other) is marked appeared / disappeared.
//
// The critical path of each side (critical_path.h, found without the graph from the saved
// nodes' inputs): of its step, or with step -1 of its median step by wall time.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "stepscope/profiler/critical_path.h"

namespace stepscope {

class Profiler;

struct DiffOptions {
  int64_t step_a = -1;  // -1: the average of A's steps
  int64_t step_b = -1;
  std::string label_a = "A";  // how the text and JSON name the sides (e.g. the file@step)
  std::string label_b = "B";
};

// One op type, name scope or node on both sides (per step).
struct DiffRow {
  std::string name;
  double micros_a = 0, micros_b = 0;
  double bytes_a = 0, bytes_b = 0;  // requested bytes
  double peak_bytes_a = 0, peak_bytes_b = 0;
  int64_t nodes_a = 0, nodes_b = 0;  // nodes that ran (op types, scopes); 0 or 1 for a node
  bool ran_a() const { return nodes_a > 0; }
  bool ran_b() const { return nodes_b > 0; }
  bool appeared() const { return !ran_a() && ran_b(); }
  bool disappeared() const { return ran_a() && !ran_b(); }
  double delta_micros() const { return micros_b - micros_a; }
  double delta_bytes() const { return bytes_b - bytes_a; }
  // B / A: infinity when A is 0 and B is not, 1 when both are 0.
  double ratio_micros() const;
  double ratio_bytes() const;
};

struct DiffSide {
  std::string label;
  int64_t step = -1;           // the step diffed; -1: the average
  std::vector<int64_t> steps;  // the steps it covers
  double step_micros = 0;      // wall time of the step (the mean over `steps`)
  double op_micros = 0;        // the sum of its nodes' times
  double bytes = 0;            // the sum of its nodes' requested bytes
  int64_t nodes = 0;           // nodes in its model
  int64_t critical_path_step = -1;
  CriticalPath critical_path;
};

struct DiffTextOptions {
  size_t max_rows = 20;   // per table; the rest are counted on one line
  size_t max_names = 10;  // of the nodes that exist on one side only
  size_t max_path_rows = 25;
};

struct ProfileDiff {
  DiffSide a, b;
  // Sorted by |delta_micros| descending, then |delta_bytes|, then name.
  std::vector<DiffRow> op_types;
  std::vector<DiffRow> scopes;
  std::vector<DiffRow> nodes;
  // Nodes in one model and not the other (sorted): different graphs, graphs that grew, or a
  // RunMetadata (which knows only the nodes its step ran) against a profile (its whole graph).
  std::vector<std::string> only_in_a, only_in_b;

  // B's step time / A's (infinity when A's is 0 and B's is not; 1 when both are 0).
  double step_ratio() const;
  // The CI gate: B's step time is more than `percent`% over A's.
  bool slower_than(double percent) const { return step_ratio() > 1.0 + percent / 100.0; }

  // The summary line ("step time: A 12.3ms (average of 100 steps), B 13.1ms (step 400), B/A
  // 1.065x (+6.5%)"), the sides, the op type, name scope and node tables (time A, B, B-A, B/A;
  // bytes A, B, B-A), what appeared and disappeared, the nodes known to one side only, and the
  // two critical paths side by side (rows where they differ marked '*').
  std::string to_text(const DiffTextOptions& options = {}) const;
  // {"a": side, "b": side, "step_ratio", "op_types": [row...], "scopes": [...], "nodes": [...],
  //  "only_in_a": [names], "only_in_b": [names]}; side = {"label", "step" (-1: average),
  //  "steps", "step_micros", "op_micros", "bytes", "nodes", "critical_path_step",
  //  "critical_path": CriticalPath::to_json()}; row = {"name", "micros_a", "micros_b",
  //  "delta_micros", "ratio_micros" (null when infinite), "bytes_a", "bytes_b", "delta_bytes",
  //  "ratio_bytes", "peak_bytes_a", "peak_bytes_b", "nodes_a", "nodes_b", "status": "both",
  //  "appeared", "disappeared" or "neither"}. Every row, not only max_rows.
  std::string to_json() const;
};

// NotFoundError naming the label and the steps there are when step_a / step_b is not a step of
// its profile, or when a profile has no steps.
ProfileDiff diff_profiles(const Profiler& a, const Profiler& b, const DiffOptions& options = {});

}  // namespace stepscope
