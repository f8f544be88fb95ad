// The memory a traced step writes where it is new to the process (a fresh RunMetadata's arrays,
// a plan's first node records, a recorder's first log), mapped ahead of the step's writes.
// Internal to the runtime: the executor's.
//
// New memory costs a page fault a 4 KiB page when first written (~1-2.5 µs on this workplace's
// VMs: ~200 ns a node of a traced step). Mapped before the step, it adds that to the step;
// mapped by a thread on a core the step leaves idle, while the step runs, in the order the step
// writes it, it mostly does not. One madvise call an array maps it for ~20% less than faults do.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <vector>

namespace stepscope {

struct StepRoom {
  // Written while the step runs, node by node (output descriptions, node records, allocation
  // logs), and written at its end (recorded nodes, allocation records).
  std::vector<std::span<const std::byte>> early, late;
  bool empty() const { return early.empty() && late.empty(); }
};

// Maps the whole of `room`, here (before the step).
void map_room_now(const StepRoom& room) noexcept;

// Maps a step's room beside it: map() on a thread beside the step, stop() by the step once it
// has written what it writes (the rest is not worth mapping), or as it throws.
class RoomMapping {
 public:
  explicit RoomMapping(StepRoom room) : room_(std::move(room)) {}
  // The early spans a piece of each in turn (the step writes them all from its start, a node
  // at a time), then the late ones likewise, each piece a whole number of pages long (no small
  // array mapped a page a call, nor a page twice), until stop() is called.
  void map() noexcept;
  // Stops the mapping; returns once the room is no longer touched (the step's memory may go).
  void stop() noexcept;
  const StepRoom& room() const { return room_; }

 private:
  enum State : int { kWaiting, kMapping, kOver };
  const StepRoom room_;
  std::atomic<bool> stop_{false};
  std::atomic<int> state_{kWaiting};
};

}  // namespace stepscope
