#include "stepscope/profiler/gpu_activity.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>
#include <vector>

namespace stepscope {

std::string_view gpu_copy_kind_name(GpuCopyKind kind) {
  switch (kind) {
    case GpuCopyKind::kHtoD:
      return "HtoD";
    case GpuCopyKind::kDtoH:
      return "DtoH";
    case GpuCopyKind::kDtoD:
      return "DtoD";
    case GpuCopyKind::kHtoH:
      return "HtoH";
    case GpuCopyKind::kPtoP:
      return "PtoP";
    case GpuCopyKind::kOther:
      return "Other";
    case GpuCopyKind::kUnknown:
      break;
  }
  return "Unknown";
}

void GpuCorrelationMap::add(uint32_t correlation_id, std::string_view op_name, std::string_view op_type,
                            int32_t node_id, int64_t launch_ns, uint32_t thread_id) {
  launches_[correlation_id] =
      GpuLaunch{StepStats::intern(op_name), StepStats::intern(op_type), node_id, launch_ns, thread_id};
}

const GpuLaunch* GpuCorrelationMap::find(uint32_t correlation_id) const {
  auto it = launches_.find(correlation_id);
  return it == launches_.end() ? nullptr : &it->second;
}

std::string gpu_stream_all_device(uint32_t device_id) {
  return "/device:GPU:" + std::to_string(device_id) + "/stream:all";
}
std::string gpu_stream_device(uint32_t device_id, uint32_t stream_id) {
  return "/device:GPU:" + std::to_string(device_id) + "/stream:" + std::to_string(stream_id);
}
std::string gpu_memcpy_device(uint32_t device_id) { return "/device:GPU:" + std::to_string(device_id) + "/memcpy"; }

bool is_gpu_tracer_device(std::string_view device) {
  return device.find("/stream:") != std::string_view::npos || device.find("/memcpy") != std::string_view::npos;
}

GpuOpName gpu_op_of(std::string_view label, std::string_view node_name) {
  std::string_view annotated = node_name;
  if (const size_t at = label.find("@@"); at != std::string_view::npos) {
    std::string_view rest = label.substr(at + 2);
    rest = rest.substr(0, rest.find('#'));
    if (!rest.empty()) annotated = rest;
  }
  const size_t colon = annotated.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == annotated.size()) return {annotated, {}};
  const std::string_view op = annotated.substr(colon + 1);
  for (char c : op)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return {annotated, {}};
  return {annotated.substr(0, colon), op};
}

namespace {

// Where a node goes, in the order the devices are laid out: per GPU, stream:all (0), the
// streams (1, by id), memcpy (2).
using DeviceKey = std::tuple<uint32_t, int, uint32_t>;

std::string device_of(const DeviceKey& key) {
  const auto& [gpu, what, stream] = key;
  return what == 0 ? gpu_stream_all_device(gpu) : what == 1 ? gpu_stream_device(gpu, stream) : gpu_memcpy_device(gpu);
}

}  // namespace

void add_gpu_activity(StepStats& stats, std::span<const GpuActivity> records, const GpuCorrelationMap& launches,
                      int64_t gpu_to_step_ns) {
  std::map<DeviceKey, std::vector<NodeExecStats>> devices;
  for (const GpuActivity& r : records) {
    if (r.end_ns < r.start_ns) continue;
    const GpuLaunch* launch = launches.find(r.correlation_id);
    NodeExecStats ns;
    ns.all_start_ns = r.start_ns + gpu_to_step_ns;
    ns.op_start_rel_ns = 0;
    ns.op_end_rel_ns = ns.all_end_rel_ns = r.end_ns - r.start_ns;
    if (launch) {
      ns.node_id = launch->node_id;
      ns.op_type = launch->op_type;
      ns.scheduled_ns = launch->launch_ns;
      ns.thread_id = launch->thread_id;
    }
    const std::string annotation =
        launch ? std::string(launch->op_name) + ":" + std::string(launch->op_type) : std::string();
    std::string node_name, label;
    switch (r.kind) {
      case GpuActivityKind::kKernel: {
        node_name = launch ? annotation : r.name;
        label = r.name + " regs:" + std::to_string(r.registers_per_thread) +
                " shm:" + std::to_string(r.static_shared_memory) + " grid:" + std::to_string(r.grid[0]) + "," +
                std::to_string(r.grid[1]) + "," + std::to_string(r.grid[2]) + " block:" + std::to_string(r.block[0]) +
                "," + std::to_string(r.block[1]) + "," + std::to_string(r.block[2]) + "@@" + annotation;
        break;
      }
      case GpuActivityKind::kMemcpy: {
        const std::string what = "MEMCPY" + std::string(gpu_copy_kind_name(r.copy_kind));
        node_name = launch ? std::string(launch->op_name) + ":" + what : what;
        label = what + " " + std::to_string(r.bytes) + " bytes";
        if (r.async) label += " async";
        if (r.copy_kind == GpuCopyKind::kPtoP && r.destination_device != r.device_id)
          label += " to device:" + std::to_string(r.destination_device);
        break;
      }
      case GpuActivityKind::kMemset: {
        node_name = launch ? std::string(launch->op_name) + ":MEMSET" : std::string("MEMSET");
        label = "MEMSET " + std::to_string(r.bytes) + " bytes";
        if (r.async) label += " async";
        break;
      }
    }
    ns.node_name = StepStats::intern(node_name);
    ns.timeline_label = StepStats::intern(label);
    if (ns.op_type.empty()) ns.op_type = ns.node_name;
    devices[{r.device_id, 1, r.stream_id}].push_back(ns);
    if (r.kind == GpuActivityKind::kKernel) devices[{r.device_id, 0, 0}].push_back(ns);
    if (r.kind == GpuActivityKind::kMemcpy) devices[{r.device_id, 2, 0}].push_back(ns);
  }
  for (auto& [key, nodes] : devices) {
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const NodeExecStats& a, const NodeExecStats& b) { return a.all_start_ns < b.all_start_ns; });
    stats.dev_stats().push_back({StepStats::intern(device_of(key)), std::move(nodes)});
  }
}

}  // namespace stepscope
