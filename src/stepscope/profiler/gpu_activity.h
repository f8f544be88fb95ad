// What a GPU did during a step, as CUPTI's activity API reports it (kernels, copies, memsets,
// each with its start and end on the GPU's clock, device, context, stream and the correlation id
// of the launch), and its conversion into the step's StepStats the way TensorFlow's GPU tracer
// writes it, so that timelines, tfprof and the critical path see the GPU:
//
//   /device:GPU:<d>/stream:all   every kernel (what tfprof counts as accelerator time)
//   /device:GPU:<d>/stream:<s>   the kernels, copies and memsets of stream s
//   /device:GPU:<d>/memcpy       every copy
//
// A record is named after the op that launched it, found by its correlation id in a
// GpuCorrelationMap that the runtime fills at launch time (CUPTI's runtime/driver API callback
// gives the id; the executor knows the node it is running). Kernels: node_name "<op>:<type>"
// (TensorFlow's annotation, which its timeline splits into name and op), timeline_label
// "<kernel> regs:R shm:S grid:X,Y,Z block:X,Y,Z@@<op>:<type>"; copies: node_name
// "<op>:MEMCPY<kind>", timeline_label "MEMCPY<kind> <bytes> bytes[ async]" (TensorFlow 1.x's
// device tracer); memsets likewise with "MEMSET". A record whose correlation id maps to no op
// keeps the kernel's name (a copy "MEMCPY<kind>", a memset "MEMSET"), as TensorFlow's tracer does.
//
// No CUDA is needed here: the records are plain values (cupti_records.h makes them from CUPTI's
// own structs where the CUDA headers are installed).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "stepscope/runtime/step_stats.h"

namespace stepscope {

enum class GpuActivityKind : uint8_t { kKernel, kMemcpy, kMemset };

// CUPTI's CUpti_ActivityMemcpyKind, the kinds TensorFlow names (others are kOther).
enum class GpuCopyKind : uint8_t { kUnknown, kHtoD, kDtoH, kDtoD, kHtoH, kPtoP, kOther };

// "HtoD", "DtoH", ... ("Unknown", "Other").
std::string_view gpu_copy_kind_name(GpuCopyKind kind);

struct GpuActivity {
  GpuActivityKind kind = GpuActivityKind::kKernel;
  int64_t start_ns = 0, end_ns = 0;  // the GPU's timestamps (cuptiGetTimestamp's clock)
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  std::string name;  // a kernel's (demangled) name; empty for copies and memsets
  // Kernels:
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  int32_t static_shared_memory = 0;
  // Copies and memsets:
  uint64_t bytes = 0;
  GpuCopyKind copy_kind = GpuCopyKind::kUnknown;
  bool async = false;
  uint32_t destination_device = 0;  // peer copies (kPtoP): the device copied to
};

// The op that launched a GPU activity: filled when the op launches its work, from the
// correlation id CUPTI's API callback reports for that launch.
struct GpuLaunch {
  std::string_view op_name;  // interned (StepStats::intern)
  std::string_view op_type;
  int32_t node_id = -1;
  int64_t launch_ns = 0;  // on the step's clock (now_ns()), 0: unknown
  uint32_t thread_id = 0;
};

class GpuCorrelationMap {
 public:
  void add(uint32_t correlation_id, std::string_view op_name, std::string_view op_type, int32_t node_id = -1,
           int64_t launch_ns = 0, uint32_t thread_id = 0);
  // Null when the id names no launch.
  const GpuLaunch* find(uint32_t correlation_id) const;
  size_t size() const { return launches_.size(); }
  void clear() { launches_.clear(); }

 private:
  std::unordered_map<uint32_t, GpuLaunch> launches_;
};

// "/device:GPU:<d>/stream:all", "/device:GPU:<d>/stream:<s>", "/device:GPU:<d>/memcpy"
std::string gpu_stream_all_device(uint32_t device_id);
std::string gpu_stream_device(uint32_t device_id, uint32_t stream_id);
std::string gpu_memcpy_device(uint32_t device_id);

// A device of the GPU tracer's ("/stream:" or "/memcpy" in its name), whose nodes are kernels and
// copies rather than the graph's ops.
bool is_gpu_tracer_device(std::string_view device);

// The op a GPU tracer node ran for, as TensorFlow's timeline reads it (_parse_kernel_label): the
// annotation after "@@" in the label (up to a '#'), else the node name, is "<name>:<op>". When
// no op type follows its last ':' (a kernel no op is known for), the whole is the name and the
// op is empty.
struct GpuOpName {
  std::string_view name, op;
};
GpuOpName gpu_op_of(std::string_view timeline_label, std::string_view node_name);

// Appends the GPU devices of `records` to `stats` (per GPU in id order: stream:all, the streams
// in id order, memcpy; each device's nodes in start order). `gpu_to_step_ns` takes a GPU
// timestamp to the step's clock: step time = GPU time + gpu_to_step_ns (both clocks read
// together when the step starts). Records that ended before they started are dropped.
void add_gpu_activity(StepStats& stats, std::span<const GpuActivity> records, const GpuCorrelationMap& launches,
                      int64_t gpu_to_step_ns);

}  // namespace stepscope
