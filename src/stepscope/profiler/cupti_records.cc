#include "stepscope/profiler/cupti_records.h"

#if defined(STEPSCOPE_HAVE_CUPTI)
#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace stepscope {

namespace {

std::string demangled(const char* name) {
  if (!name) return "unknown";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

GpuCopyKind copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN:
      return GpuCopyKind::kUnknown;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return GpuCopyKind::kHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return GpuCopyKind::kDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return GpuCopyKind::kDtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return GpuCopyKind::kHtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return GpuCopyKind::kPtoP;
    default:
      return GpuCopyKind::kOther;
  }
}

// What every CUPTI activity record of these kinds carries, under the same field names.
template <typename Record>
void fill_common(GpuActivity& a, const Record& r) {
  a.start_ns = static_cast<int64_t>(r.start);
  a.end_ns = static_cast<int64_t>(r.end);
  a.device_id = r.deviceId;
  a.context_id = r.contextId;
  a.stream_id = r.streamId;
  a.correlation_id = r.correlationId;
}

}  // namespace

GpuActivity gpu_activity_from_cupti(const CUpti_ActivityKernel10& k) {
  GpuActivity a;
  a.kind = GpuActivityKind::kKernel;
  fill_common(a, k);
  a.name = demangled(k.name);
  a.grid[0] = k.gridX, a.grid[1] = k.gridY, a.grid[2] = k.gridZ;
  a.block[0] = k.blockX, a.block[1] = k.blockY, a.block[2] = k.blockZ;
  a.registers_per_thread = k.registersPerThread;
  a.static_shared_memory = k.staticSharedMemory;
  return a;
}

GpuActivity gpu_activity_from_cupti(const CUpti_ActivityMemcpy6& c) {
  GpuActivity a;
  a.kind = GpuActivityKind::kMemcpy;
  fill_common(a, c);
  a.bytes = c.bytes;
  a.copy_kind = copy_kind(c.copyKind);
  a.async = (c.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0;
  a.destination_device = c.deviceId;
  return a;
}

GpuActivity gpu_activity_from_cupti(const CUpti_ActivityMemset4& m) {
  GpuActivity a;
  a.kind = GpuActivityKind::kMemset;
  fill_common(a, m);
  a.bytes = m.bytes;
  a.async = (m.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0;
  return a;
}

std::optional<GpuActivity> gpu_activity_from_cupti(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return gpu_activity_from_cupti(reinterpret_cast<const CUpti_ActivityKernel10&>(record));
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return gpu_activity_from_cupti(reinterpret_cast<const CUpti_ActivityMemcpy6&>(record));
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return gpu_activity_from_cupti(reinterpret_cast<const CUpti_ActivityMemset4&>(record));
    default:
      return std::nullopt;
  }
}

}  // namespace stepscope

#endif
