#include "stepscope/profiler/op_time.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "stepscope/profiler/gpu_activity.h"

namespace stepscope {

StepStats apply_op_time(const StepStats& step, OpTime op_time) {
  StepStats out = step;
  if (op_time == OpTime::kSchedule) return out;
  std::unordered_map<std::string_view, std::pair<int64_t, int64_t>> kernels;  // op name -> first start, last end
  for (const DeviceStepStats& dev : out.dev_stats()) {
    if (dev.device.find("/stream:all") == std::string_view::npos) continue;
    for (const NodeExecStats& k : dev.node_stats) {
      const std::string_view name = gpu_op_of(k.timeline_label, k.node_name).name;
      const int64_t start = k.all_start_ns, end = k.all_start_ns + k.all_end_rel_ns;
      auto [it, added] = kernels.try_emplace(name, start, end);
      if (!added) it->second = {std::min(it->second.first, start), std::max(it->second.second, end)};
    }
  }
  for (DeviceStepStats& dev : out.dev_stats()) {
    if (dev.device.find("/job") == std::string_view::npos) continue;
    for (NodeExecStats& op : dev.node_stats) {
      auto it = kernels.find(op.node_name);
      if (it == kernels.end()) continue;
      const int64_t end = std::max(it->second.second, op.all_start_ns + op.all_end_rel_ns);
      if (op_time == OpTime::kGpu) op.all_start_ns = it->second.first;
      op.all_end_rel_ns = end - op.all_start_ns;
    }
  }
  return out;
}

}  // namespace stepscope
