// DeviceTracer: what records a device's own activity beside a traced step — TensorFlow's
// DeviceTracer (its GPU tracer, which collects CUPTI's kernel and copy records). A tracer added to
// a Session's DeviceSet is started before every step run with trace_level HARDWARE_TRACE or
// FULL_TRACE (and RunMetadata to fill), stopped after it, and then adds its devices to the
// step's StepStats (profiler/gpu_activity.h's add_gpu_activity makes TensorFlow's GPU devices).
// A step with NO_TRACE or SOFTWARE_TRACE calls nothing of it.
//
// Traced steps running at the same time share the session's tracers: a tracer that cannot
// trace two steps at once should record nothing for the second (TensorFlow reports "Another
// profile session running").
#pragma once

namespace stepscope {

class StepStats;

class DeviceTracer {
 public:
  virtual ~DeviceTracer() = default;
  // Before the step's first node runs.
  virtual void start() = 0;
  // After its last node finished (the device's queued work may still be running: a GPU tracer
  // synchronises and flushes its buffers here).
  virtual void stop() = 0;
  // Appends what was recorded between start and stop to the step's StepStats, times on the
  // step's clock (now_ns()).
  virtual void collect(StepStats& step) = 0;
};

}  // namespace stepscope
