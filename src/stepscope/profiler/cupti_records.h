// CUPTI's activity records (cupti_activity.h of the CUDA 13 toolkit: CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemset4, the versions its activity buffers hold) as
// GpuActivity values for add_gpu_activity. Built only where CMake found the CUPTI headers
// (STEPSCOPE_HAVE_CUPTI); it reads the structs and calls nothing of libcupti, so it needs no GPU.
#pragma once

#include "stepscope/profiler/gpu_activity.h"

#if defined(STEPSCOPE_HAVE_CUPTI)
#include <cupti_activity.h>

#include <optional>

namespace stepscope {

// A kernel (CUPTI_ACTIVITY_KIND_KERNEL or _CONCURRENT_KERNEL); its name demangled.
GpuActivity gpu_activity_from_cupti(const CUpti_ActivityKernel10& kernel);
// A copy (CUPTI_ACTIVITY_KIND_MEMCPY).
GpuActivity gpu_activity_from_cupti(const CUpti_ActivityMemcpy6& copy);
// A memset (CUPTI_ACTIVITY_KIND_MEMSET).
GpuActivity gpu_activity_from_cupti(const CUpti_ActivityMemset4& memset);
// A record of an activity buffer (cuptiActivityGetNextRecord), by its kind; nothing for the
// kinds above it does not convert.
std::optional<GpuActivity> gpu_activity_from_cupti(const CUpti_Activity& record);

}  // namespace stepscope

#endif
