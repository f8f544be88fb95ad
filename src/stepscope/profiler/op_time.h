// TensorFlow's timeline option op_time (_preprocess_op_time): what a traced op's slice spans
// when its kernels ran later on a GPU stream than the op that launched them.
//   kSchedule: as recorded — the op's slice is its launch on the CPU (the StepStats as it is);
//   kAll:      from the op's start to the end of its last kernel (or its own end, if later);
//   kGpu:      from its first kernel's start to the end of its last kernel (or its own end).
// The kernels are those on "/stream:all" devices whose annotation ("<name>:<op>", gpu_op_of)
// names an op; the ops changed are those on devices with "/job" in their name.
#pragma once

#include "stepscope/runtime/step_stats.h"

namespace stepscope {

enum class OpTime { kSchedule, kAll, kGpu };

// A copy of `step` with the ops' times as `op_time` says (kSchedule: an unchanged copy). Only
// all_start and all_end_rel change, as in TensorFlow.
StepStats apply_op_time(const StepStats& step, OpTime op_time);

}  // namespace stepscope
