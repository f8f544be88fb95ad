// The critical path of a traced step through its dataflow graph: the chain of ops that
// determined the step's wall time. A sorted list of expensive ops says where CPU time went; the
// critical path says which of those ops the step actually waited for, and how much of the wall
// time was spent waiting to be dispatched rather than computing.
//
// GPU work (the GPU tracer's devices, gpu_activity.h) is on the path too: a kernel or copy on
// "/device:GPU:<d>/stream:<s>" waits for the op that launched it (named by its annotation) and
// for the work before it on its stream; the "/stream:all" and "/memcpy" devices, which repeat
// those records, are left out when per-stream devices are there.
//
// How it is found: start from the op that ended last; a node becomes ready when the last of its
// inputs (data or control) completes, which the executor records as scheduled_ns = the all_end
// of that input. So at each op, step back to the input whose end is its scheduled time (or,
// failing an exact match, the input with the latest end at or before its start), until an op
// with no traced input is reached: a root, or a consumer of a fed or pruned node.
//
// Beside the path: the busy time of every op in the step, the parallelism the executor got
// (busy / wall) and each thread's utilisation, so "the path is 40% of the ops but the machine
// was idle half the time" is visible at a glance.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

class Graph;
class StepStats;

// How an op on the path was made ready by the op before it.
enum class CriticalPathEdge {
  kStart,    // the first op on the path: ready when the step started (or no traced input)
  kData,     // a data input
  kControl,  // a control input only
  kLaunch,   // a GPU kernel or copy: the op that launched it
  kStream,   // a GPU kernel or copy: the one before it on its stream
};
// "start", "data", "control", "launch", "stream"
const char* critical_path_edge_name(CriticalPathEdge edge);

struct CriticalPathOp {
  std::string name;
  std::string op_type;
  std::string device;
  int32_t node_id = -1;
  uint32_t thread_id = 0;
  int64_t start_ns = 0;     // since the step's start
  int64_t duration_ns = 0;  // all_start .. all_end
  // The gap between the end of the previous op on the path (or the step's start) and this op's
  // start: time the path spent not computing (dispatch, queueing behind other ops, thread hops).
  int64_t wait_ns = 0;
  double share = 0;       // duration_ns / wall time
  double wait_share = 0;  // wait_ns / wall time
  CriticalPathEdge via = CriticalPathEdge::kStart;
};

struct ThreadUtilisation {
  std::string device;
  uint32_t thread_id = 0;
  int64_t busy_ns = 0;  // sum of the durations of the ops the thread ran
  int ops = 0;
  double utilisation = 0;  // busy_ns / wall time
};

struct CriticalPathTextOptions {
  // Longer paths show this many rows: the ops with the largest duration + wait, in path order,
  // each run of the others folded into one "... N ops" row.
  size_t max_rows = 25;
  bool show_threads = true;
};

struct CriticalPath {
  std::vector<CriticalPathOp> ops;  // in execution order: ops.front() started the chain
  int64_t step_start_ns = 0;        // monotonic ns the times above are relative to
  int64_t wall_ns = 0;              // the step's start .. the end of the last op
  int64_t busy_ns = 0;              // sum of all ops' durations (every device)
  int num_ops = 0;                  // ops in the step
  int64_t path_busy_ns = 0;         // sum of the path's durations
  int64_t path_wait_ns = 0;         // sum of the path's waits
  // Of path_busy_ns, the input pipeline's ops (IteratorGetNext and the other iterator ops): the
  // path by category is compute (path_busy_ns - path_input_ns), input and waiting.
  int64_t path_input_ns = 0;
  // The fourth category, hooks: they run around a step, outside its trace, so their time comes
  // from the step's timing (StepTimingRecord::hooks_ns, which ProfilerHook saves in the profile);
  // -1 when unknown. Shown beside the path, not on it.
  int64_t hooks_ns = -1;
  // busy_ns / wall_ns: how many ops were running at once on average.
  double parallelism = 0;
  std::vector<ThreadUtilisation> threads;  // by device, then thread id

  bool empty() const { return ops.empty(); }
  // A short table: a summary line, the path's ops (start, wait, duration, share, op, name), and
  // the threads' utilisation. Times in one unit chosen from the wall time.
  std::string to_text(const CriticalPathTextOptions& options = {}) const;
  // {"wall_ns", "busy_ns", "num_ops", "parallelism", "path_busy_ns", "path_wait_ns",
  //  "path": [{"name", "op_type", "device", "node_id", "thread_id", "start_ns", "duration_ns",
  //            "wait_ns", "share", "wait_share", "via"}...],
  //  "threads": [{"device", "thread_id", "busy_ns", "ops", "utilisation"}...], "hooks_ns" (-1: unknown)}
  std::string to_json() const;
};

// The critical path of `step`, whose nodes' node_id index `graph` (a node whose id does not
// match by name is looked up by name). Nodes of the graph that are not in the step (pruned)
// and fed nodes (recorded at the step's start, lasting nothing) are not on the path, nor
// counted as ops; the path stops at an op none of whose inputs ran in the step. An empty step
// gives an empty path.
CriticalPath critical_path(const Graph& graph, const StepStats& step);
// Without the graph (a RunMetadata read back from a file): the data inputs are taken from each
// node's timeline_label ("name = Op(in0, in1:1)"); control edges are not known.
CriticalPath critical_path(const StepStats& step);

// Whether an op type belongs to the input pipeline (IteratorGetNext, IteratorGetNextSync, ...).
bool is_input_op_type(std::string_view op_type);

// What if one op (by node name) or every op of one type ran `speedup` times faster? The step's
// recorded schedule is replayed: each op on the thread that ran it, in the order it ran there,
// starting when its inputs (data and control, as the critical path sees them) and its thread
// are free, plus the dispatch delay it had then; the chosen ops' durations are divided by
// `speedup`. Replayed unchanged (speedup 1) it gives the recorded times back. The critical path
// of the replayed step is found again: it may move to other ops.
struct WhatIf {
  std::string target;
  double speedup = 1;
  int matched_ops = 0;  // runs of the target in the step
  CriticalPath before;  // the recorded step's
  CriticalPath after;   // the replayed step's
  // "What if MatMul (3 ops) ran 2.00x faster: wall 1.234 ms -> 0.987 ms (-20.0%)", whether the
  // path moved, and the new path's table.
  std::string to_text(const CriticalPathTextOptions& options = {}) const;
  // {"target", "speedup", "matched_ops", "wall_ns", "new_wall_ns", "path_moved", "before", "after"}
  std::string to_json() const;
};
// InvalidArgumentError for a speedup that is not a finite number > 0; NotFoundError naming the
// target when no op of the step has that name or type. `graph` may be null (edges from labels).
WhatIf what_if(const Graph* graph, const StepStats& step, std::string_view target, double speedup);

}  // namespace stepscope
