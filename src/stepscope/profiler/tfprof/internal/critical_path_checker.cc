#include "stepscope/profiler/tfprof/internal/critical_path_checker.h"

#include <algorithm>
#include <map>
#include <string>

#include "stepscope/base/error.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

namespace {

int64_t integer_option(const std::map<std::string, std::string>& options, const std::string& key, int64_t fallback) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  try {
    size_t used = 0;
    const int64_t value = std::stoll(it->second, &used);
    if (used == it->second.size()) return value;
  } catch (const std::exception&) {
  }
  throw InvalidArgumentError("CriticalPathChecker: option " + key + " must be an integer, got '" + it->second + "'");
}

}  // namespace

std::vector<std::string> CriticalPathChecker::check(const Profiler& profiler,
                                                    const std::map<std::string, std::string>& options,
                                                    std::ostream& log) const {
  const std::vector<int64_t> steps = profiler.steps();
  if (steps.empty()) {
    log << "Missing RunMetadata info. Skip " << name() << "\n";
    return {};
  }
  const int64_t step = integer_option(options, "step", steps.back());
  if (std::find(steps.begin(), steps.end(), step) == steps.end()) {
    log << "Step " << step << " was not added. Skip " << name() << "\n";
    return {};
  }
  const StepStats stats = profiler.step_stats(step);
  CriticalPath path = profiler.graph() ? critical_path(*profiler.graph(), stats) : critical_path(stats);
  if (path.empty()) return {};
  if (const auto timing = profiler.step_timings().find(step)) path.hooks_ns = timing->hooks_ns;
  std::string text =
      "step " + std::to_string(step) + ": " +
      path.to_text({.max_rows = static_cast<size_t>(std::max<int64_t>(1, integer_option(options, "max_rows", 15)))});
  // What if the op type with the most time on the path ran twice as fast? (The replay may move
  // the path to other ops: the wall time it gives is the one to expect.)
  std::map<std::string, int64_t> by_type;
  for (const CriticalPathOp& op : path.ops) by_type[op.op_type] += op.duration_ns;
  const auto top = std::max_element(by_type.begin(), by_type.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; });
  if (top != by_type.end() && top->second > 0) {
    const WhatIf w = what_if(profiler.graph(), stats, top->first, 2.0);
    const std::string what = w.to_text({.max_rows = 0, .show_threads = false});
    text += what.substr(0, what.find('\n') + 1);
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return {text};
}

}  // namespace stepscope
