// Chrome Trace Format timelines of traced steps, laid out like TensorFlow's timeline.py and
// clean for Perfetto (see reference/chrome-trace.md, "Lessons").
//
// Layout (TensorFlow's):
//  - pid 0 "Allocators": one `C` counter per allocator (cat "Memory", named "<allocator> memory",
//    series "bytes in use": TensorFlow used the bare allocator name for both), bytes in use by the
//    buffers the step allocated (show_memory);
//  - per device k (in StepStats order): pid 2k+1 "<device> Compute" with one `X` event per node
//    (cat "Op", named by op type; args.name = node name, args.op, args.input0..N: the op and
//    data inputs from the graph when given, else from the timeline_label), and pid 2k+2 "<device> Tensors" with the
//    tensors as `N`/`O`/`D` object events (cat "Tensor", show_memory);
//  - a node's tid is its lane: the first lane of its device whose last node ended strictly
//    before (in ns) the node started, so slices on one tid never overlap;
//  - `DataFlow` flows from a producer to each consumer on another (pid, tid): `s` inside the
//    producer's slice (1 ns before its end), `f` with "bp":"e" at the consumer's start, so both
//    ends bind to their slices in Perfetto and in chrome://tracing;
//  - metadata first: process_name and process_sort_index for every pid (Allocators, then every
//    device's Compute, then the Tensors processes), thread_name and thread_sort_index for every
//    (pid, tid) that has events;
//  - "displayTimeUnit": "ns" at the top level: without it chrome://tracing builds its slice tree
//    on whole microseconds and nests sub-µs ops under neighbours (dropping their flows).
// Beyond TensorFlow's: ts/dur are microseconds with three decimals relative to the trace's
// origin (the first step's start), whose wall-clock time is the top-level "baseTimeNanoseconds";
// args also carry output dtypes and shapes, output bytes, the thread that ran the node, and
// its float ops when the graph is given; tensor lifetimes and the memory counters come from the
// allocator's records of the step (allocation and free of every buffer), not from guesses.
//
// A window (several steps in one trace) puts each step's nodes on the same tracks and adds a
// "Steps" process (pid 2 * num_devices + 1, shown first) with one slice per step.
//
// A Timeline keeps pointers to the StepStats (and graph) it was given: they must outlive it.
// Nothing given to it is modified.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

class Graph;
class StepStats;
struct NodeExecStats;

struct AllocationMaximum {
  int64_t timestamp_ns = 0;          // when it was first reached, on the clock of NodeExecStats::all_start_ns
  int64_t num_bytes = 0;             // bytes allocated during the step and live then
  std::vector<std::string> tensors;  // the tensors (node outputs) live then, sorted
  // The bytes of each of those tensors then, by name ("node" or "node:k"), and of the live
  // allocations no tensor owns (a kernel's temporaries).
  std::map<std::string, int64_t> tensor_bytes;
  int64_t untracked_bytes = 0;
};

struct StepStatsAnalysis {
  std::string chrome_trace;
  std::map<std::string, AllocationMaximum> allocator_maximums;  // filled with show_memory only
};

struct ChromeTraceOptions {
  bool show_dataflow = true;
  bool show_memory = false;
  bool pretty = false;  // TensorFlow's layout: indent 4, separators "," and ": "
  // A JSON object written as the trace's top-level "metadata" (Perfetto keeps that key, catapult
  // shows it in its Metadata dialog); empty: none. Written as given: it must be valid JSON.
  std::string_view metadata_json = {};
};

class Timeline {
 public:
  // With the graph the step ran (a node is matched by node_id and name, else by name), its ops
  // and dataflow edges come from the graph and its FLOPs are given; labels are parsed only for
  // nodes it does not have, and without it (a RunMetadata read from a file).
  explicit Timeline(const StepStats& step, const Graph* graph = nullptr);
  // Several steps in one trace (in the order given). step_numbers, when given (one per step),
  // name the step slices "step <n>"; otherwise they are named "step".
  explicit Timeline(std::span<const StepStats* const> window, const Graph* graph = nullptr,
                    std::span<const int64_t> step_numbers = {});
  ~Timeline();
  Timeline(Timeline&&) noexcept;
  Timeline& operator=(Timeline&&) noexcept;

  // FLOPs for the nodes the graph did not give (a step read from a file, e.g. with a saved
  // profile's figures): `float_ops(ns)` per node record, < 0 for unknown; before writing a trace.
  void set_float_ops(const std::function<int64_t(const NodeExecStats&)>& float_ops);

  // The trace as a JSON string (compact; TensorFlow's pretty-prints here).
  std::string generate_chrome_trace_format(bool show_dataflow = true, bool show_memory = false) const;
  // Appends the trace to `out`.
  void write_chrome_trace(std::string& out, const ChromeTraceOptions& options) const;
  // The trace handed to `write` in pieces as it is made (to a file: see write_file_atomically_streamed).
  // A pretty trace is laid out from the whole compact text, so it is made whole first.
  void write_chrome_trace(const std::function<void(std::string_view)>& write, const ChromeTraceOptions& options) const;
  // The trace (compact) and, with show_memory, each allocator's maximum.
  StepStatsAnalysis analyze_step_stats(bool show_dataflow = true, bool show_memory = true) const;

  // Each allocator's maximum bytes in use, without writing a trace.
  std::map<std::string, AllocationMaximum> allocator_maximums() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepscope
