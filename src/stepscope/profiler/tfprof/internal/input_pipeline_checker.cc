#include "stepscope/profiler/tfprof/internal/input_pipeline_checker.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "stepscope/base/error.h"
#include "stepscope/graph/graph.h"
#include "stepscope/graph/node_label.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace {

std::string millis(double ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f ms", ns / 1e6);
  return buffer;
}

// A record's op type: its own, else its node's in the graph, else its label's.
std::string_view op_type_of(const Profiler& profiler, const NodeExecStats& node) {
  if (!node.op_type.empty()) return node.op_type;
  if (const Graph* graph = profiler.graph())
    if (const Node* n = graph->find_node(node.node_name)) return n->op_type();
  return parse_node_label(node.timeline_label).op;
}

}  // namespace

std::vector<std::string> InputPipelineChecker::check(const Profiler& profiler,
                                                     const std::map<std::string, std::string>& options,
                                                     std::ostream& log) const {
  std::vector<int64_t> steps = profiler.steps();
  if (steps.empty()) {
    log << "Missing RunMetadata info. Skip " << name() << "\n";
    return {};
  }
  if (auto it = options.find("step"); it != options.end()) {
    int64_t step = 0;
    try {
      size_t used = 0;
      step = std::stoll(it->second, &used);
      if (used != it->second.size()) throw InvalidArgumentError("");
    } catch (const std::exception&) {
      throw InvalidArgumentError("InputPipelineChecker: option step must be an integer, got '" + it->second + "'");
    }
    if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
      log << "Step " << step << " was not added. Skip " << name() << "\n";
      return {};
    }
    steps = {step};
  }
  double wall_ns = 0, input_ns = 0;
  std::map<std::string, double> by_stage;     // input op name -> its time over the steps
  std::map<std::string, double> stage_times;  // "node: Iterator::...::stage" -> its own time
  for (int64_t step : steps)
    for (const InputStage& s : profiler.model().steps.at(step).input_stages)
      stage_times[s.node + ": " + s.stage] += static_cast<double>(s.self_ns);
  for (int64_t step : steps) {
    const StepStats stats = profiler.step_stats(step);
    int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
    for (const DeviceStepStats& device : stats.dev_stats()) {
      for (const NodeExecStats& node : device.node_stats) {
        first = std::min(first, node.all_start_ns);
        last = std::max(last, node.all_start_ns + node.all_end_rel_ns);
        if (!is_input_op_type(op_type_of(profiler, node))) continue;
        input_ns += static_cast<double>(node.all_end_rel_ns);
        by_stage[std::string(node.node_name)] += static_cast<double>(node.all_end_rel_ns);
      }
    }
    if (last > first) wall_ns += static_cast<double>(last - first);
  }
  const double n = static_cast<double>(steps.size());
  const std::string over = std::to_string(steps.size()) + (steps.size() == 1 ? " step" : " steps");
  if (by_stage.empty()) {
    return {"Input pipeline: no input op (IteratorGetNext) in the steps kept" + std::string() +
            ": the data is fed (feed_dict), so its time is spent outside the steps."};
  }
  const double share = wall_ns > 0 ? input_ns / wall_ns : 0;
  const char* verdict = input_bound_verdict(share);
  char percent[16];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100 * share);
  auto slowest = std::max_element(by_stage.begin(), by_stage.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string report = "Input pipeline: " + std::string(percent) + " of the step time waiting on input over the " +
                       over + " (" + millis(input_ns / n) + " of " + millis(wall_ns / n) + " per step): " + verdict +
                       ".\nSlowest input op: " + slowest->first + " (" + millis(slowest->second / n) + " per step).";
  // The pipeline's own stages (traced runs time them), slowest first.
  if (!stage_times.empty()) {
    std::vector<std::pair<std::string, double>> ranked(stage_times.begin(), stage_times.end());
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    report += "\nSlowest input stages (their own time per step):";
    for (size_t i = 0; i < ranked.size() && i < 5; ++i)
      report += std::string(i ? ";" : "") + " " + ranked[i].first + " " + millis(ranked[i].second / n);
    report += ".";
  }
  // Every run's timing, when the profile has it (ProfilerHook records it): the traced steps
  // may not be typical.
  const StepTimings& timings = profiler.step_timings();
  double typical_share = share;
  if (!timings.empty()) {
    const StepTimings::Summary all = timings.summarize();
    std::snprintf(percent, sizeof percent, "%.1f%%", 100 * all.input_share);
    report += "\nOver every run recorded (" + std::to_string(all.steps) + " step timings): " + percent +
              " of the step time waiting on input: " + input_bound_verdict(all.input_share) + ".";
    typical_share = all.input_share;
  }
  if (typical_share >= 0.05)
    report += "\nOverlap input with compute: Dataset::prefetch, a parallel map, cache() for data that fits in memory.";
  return {report};
}

}  // namespace stepscope
