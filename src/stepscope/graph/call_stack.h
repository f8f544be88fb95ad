// The call stack of a node's creation (TensorFlow records one per op for tfprof's code view):
// raw return addresses, captured cheaply when a node is added to a Graph and interned per graph
// so that the many nodes built by one loop share a stack. Turning addresses into functions and
// source lines is the profiler's business (profiler/symbolizer.h), done lazily, when a
// code view or a saved profile needs it.
//
// Capture is on by default; STEPSCOPE_CAPTURE_STACKS=0 (or false/off/no) in the environment
// turns it off for every Graph created afterwards, Graph::set_capture_call_stacks per graph.
// It costs ~0.26 µs a node (bench/graph_build_bench.cc) with libunwind's cached unwinder
// (libunwind.so.8, loaded at run time when present), ~3-5 µs with libgcc's _Unwind_Backtrace,
// the fallback (STEPSCOPE_CAPTURE_UNWINDER=libgcc forces it; sanitizer builds always use it).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace stepscope {

// At most this many frames are kept, the innermost ones.
inline constexpr int kMaxCallStackDepth = 32;

// Fills `out` with up to `max` return addresses of the calling thread, innermost first, leaving
// out the first `skip` frames (this function's own frame is always left out); returns how many.
int capture_call_stack(uintptr_t* out, int max, int skip = 0);

// Whether new Graphs capture call stacks: the environment's STEPSCOPE_CAPTURE_STACKS (read once;
// "0", "false", "off", "no" turn capture off; anything else, or unset, leaves it on).
bool capture_call_stacks_by_default();

// Stacks of one graph, each stored once. Ids are dense, from 0; a span is valid until the next intern.
class CallStackTable {
 public:
  int32_t intern(std::span<const uintptr_t> pcs);
  std::span<const uintptr_t> stack(int32_t id) const {
    return {pcs_.data() + offsets_[id], pcs_.data() + offsets_[id + 1]};
  }
  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }

 private:
  std::vector<uintptr_t> pcs_;           // all stacks, back to back
  std::vector<uint32_t> offsets_ = {0};  // stack i is pcs_[offsets_[i], offsets_[i + 1])
  std::unordered_multimap<uint64_t, int32_t> by_hash_;
};

}  // namespace stepscope
