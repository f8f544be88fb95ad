// Memory new to the process that a thread is about to write, mapped ahead of its writes by a
// thread on a core it leaves idle: a traced step's arrays (a fresh RunMetadata's, a plan's first
// node records, a recorder's first log), a new Profiler's model of a big graph.
//
// New memory costs a page fault a 4 KiB page when first written (~1-2.5 µs on this workplace's
// VMs: ~200 ns a node of a traced step, ~0.3 µs a node of a Profiler's model). Mapped before
// the writes, it adds that to them; mapped by a thread beside the writer, while it writes, in the
// order it writes, it mostly does not. One madvise call an array maps it for ~20% less than
// faults do.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "stepscope/base/thread_beside.h"

namespace stepscope {

struct NewMemory {
  // Written from the start, a piece of each at a time (a step's output descriptions, node
  // records and allocation logs, node by node), and written after those (a step's end).
  std::vector<std::span<const std::byte>> early, late;
  bool empty() const { return early.empty() && late.empty(); }
  size_t bytes() const;
  // The room of `v` beyond its size, up to its capacity (what push_back writes next), as early.
  template <typename T, typename A>
  void add_room_of(const std::vector<T, A>& v) {
    early.push_back({reinterpret_cast<const std::byte*>(v.data() + v.size()), (v.capacity() - v.size()) * sizeof(T)});
  }
};

// Maps the whole of `memory`, here (before the writes).
void map_now(const NewMemory& memory) noexcept;

// Maps memory beside its writer: map() on a thread beside the writer, stop() by the writer once
// it has written what it writes (the rest is not worth mapping), or as it throws.
class MappingAhead {
 public:
  explicit MappingAhead(NewMemory memory) : memory_(std::move(memory)) {}
  // The early spans a piece of each in turn, then the late ones likewise, each piece a whole
  // number of pages long (no small array mapped a page a call, nor a page twice), until stop()
  // is called.
  void map() noexcept;
  // Stops the mapping; returns once the memory is no longer touched (it may go).
  void stop() noexcept;
  const NewMemory& memory() const { return memory_; }

 private:
  enum State : int { kWaiting, kMapping, kOver };
  const NewMemory memory_;
  std::atomic<bool> stop_{false};
  std::atomic<int> state_{kWaiting};
};

// A MappingAhead on a ThreadBeside of its own for as long as it lives, where the memory is worth
// a thread (at least `min_bytes`) and the process may use another core; else nothing is mapped
// (the writer faults its pages in itself, as it would have).
class MappedBeside {
 public:
  MappedBeside(NewMemory memory, size_t min_bytes);
  // Stops the mapping and waits for the thread: the memory may go after it.
  ~MappedBeside();
  MappedBeside(const MappedBeside&) = delete;
  MappedBeside& operator=(const MappedBeside&) = delete;
  bool started() const { return thread_.started(); }

 private:
  std::shared_ptr<MappingAhead> mapping_;
  ThreadBeside thread_;
};

}  // namespace stepscope
