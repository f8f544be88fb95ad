// What a traced step writes while it runs, and how that becomes StepStats (internal to the
// runtime: the executor's).
//
// While the step runs, each node writes its NodeRecord and its outputs' descriptions into
// slots preallocated for it (TraceScratch: no lock, no allocation, no string); its allocations
// go to the AllocationRecorder's per-thread logs. After the step, finish() writes into the
// StepStats the fed outputs, then the nodes in start order, each with its allocation records
// and outputs, as one stream of small differences (StepStats::RecordedWriter), with the plan's
// names (made once per plan, shared): the StepStats makes its node entries of them when they are
// first read. No lock, no map, no string built, no allocation once the arrays have grown to the
// step's size: the builder's scratch is kept with the plan's step buffers, and a StepStats
// keeps its memory from the step it held before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "stepscope/base/uninitialized_allocator.h"
#include "stepscope/core/allocator.h"
#include "stepscope/core/tensor.h"
#include "stepscope/runtime/executor.h"
#include "stepscope/runtime/step_clock.h"
#include "stepscope/runtime/step_stats.h"

namespace stepscope {

// What a traced step records for a node while it runs, in a slot of its own. Times are in
// ticks (see StepClock); its outputs' descriptions go into slots of their own (TraceScratch).
struct NodeRecord {
  int64_t start, end, scheduled;
  int64_t bytes_in_use_at_end;  // of the kernel's allocator
  uint32_t thread_id;
  int32_t missing_outputs;  // outputs the kernel did not produce (it failed)
};

// What a plan's traced steps write while they run, and finish() groups the allocation records
// in: kept by the plan's builder from step to step, so that only the plan's first traced step
// writes it new (or none, where the plan's preparation made it ahead: Plan::prepare_scratch).
// Not initialized: a step writes the record and outputs of every node it runs, and reads no
// other.
struct TraceScratch {
  std::unique_ptr<NodeRecord[]> records;  // per plan item
  std::unique_ptr<StepStats::RecordedOutput[]> outputs;  // per plan slot: a node's outputs are consecutive
  // Two a plan item (finish() makes more where a step has more). Growing it writes nothing, where
  // new AllocationRecord[n] would write each one's zeros.
  std::vector<AllocationRecord, UninitializedAllocator<AllocationRecord>> grouped;
  size_t num_items, num_slots;
  // Made, not mapped: its caller maps `memory()` (a thread beside the step, or the preparation).
  TraceScratch(size_t items, size_t slots);
  // Its arrays, in the order a step writes them (the records and outputs from its start, the
  // grouped records at its end).
  std::vector<std::span<const std::byte>> memory() const;
};

// Tensor `t`, output `slot` of its node, kept apart whole with its slot (StepStats::
// keep_output_apart): what a fed tensor is recorded as (the fed outputs of a node are
// consecutive slots, but need not be consecutive outputs), and an output that does not fit 32
// bytes.
inline void describe_output_apart(const Tensor& t, int slot, StepStats& stats, StepStats::RecordedOutput& out) {
  const Buffer* b = t.buffer();
  out.ptr = reinterpret_cast<uint64_t>(t.raw_data());
  out.allocation_id = b->allocation_id();
  out.dtype = t.dtype();
  out.flags = b->unique() ? StepStats::RecordedOutput::kSingleReference : uint8_t{0};
  stats.keep_output_apart(out, slot, b->requested_bytes(), b->allocated_bytes(), t.shape(), b->allocator()->name());
}
// Records tensor `t`, output `slot` of its node, into `out` (of `stats`). Its shape is named by
// its interned copy (StepStats::find_shape: usually one this thread found before); its
// allocator by a comparison for the kernels' allocator (the hot path's common case), and
// through StepStats::allocator_index for any other.
[[gnu::always_inline]] inline void describe_output(const Tensor& t, int slot, const Allocator* kernel_allocator,
                                                   uint16_t kernel_allocator_index, StepStats& stats,
                                                   StepStats::RecordedOutput& out) {
  const Buffer* b = t.buffer();
  const Shape& shape = t.shape();
  const StepStats::InternedShape* interned = StepStats::find_shape(shape);
  const uint16_t allocator = b->allocator() == kernel_allocator ? kernel_allocator_index
                                                                : StepStats::allocator_index(b->allocator()->name());
  const int64_t requested = b->requested_bytes(), allocated = b->allocated_bytes();  // a tensor spans its buffer
  if (interned && allocator && static_cast<uint64_t>(requested) <= UINT32_MAX &&
      static_cast<uint64_t>(allocated) <= UINT32_MAX) [[likely]] {
    // Each field stored whole, in place (a description built beside and copied would be read
    // back before its parts were stored: a stall an output).
    out.ptr = reinterpret_cast<uint64_t>(t.raw_data());
    out.allocation_id = b->allocation_id();
    out.requested_bytes = static_cast<uint32_t>(requested);
    out.allocated_bytes = static_cast<uint32_t>(allocated);
    out.shape = interned->index;
    out.allocator = allocator;
    out.dtype = t.dtype();
    out.flags = b->unique() ? StepStats::RecordedOutput::kSingleReference : uint8_t{0};
  } else {
    describe_output_apart(t, slot, stats, out);
  }
}
// An output the kernel did not produce (it failed): left out of the node's when it is read.
inline void mark_missing(StepStats::RecordedOutput& out) { out = {}; }

// One per StepBuffers of a plan (so one per step running at a time), kept between steps.
class StepStatsBuilder {
 public:
  struct Begun {
    // Whether the room for finish() is new memory (a fresh RunMetadata's traced step, where no
    // spare arrays were to be had): the caller has it mapped (prefault_pages over
    // StepStats::room), by a thread it leaves idle while the step runs, or before the step.
    bool new_room;
    // Whether an idle thread should make the next fresh RunMetadata's arrays (see
    // StepStats::reuse_for_step).
    bool spare_wanted;
  };
  // Before the step: `stats` forgets what it held (keeping its memory), takes the step's base
  // times, and has room reserved for what finish() writes (StepStats::room).
  Begun begin(const Executor::Plan& plan, StepStats& stats, StepClock::Point start);
  // The room begin() reserves for a step's recorded stream: the step before's and an eighth
  // more (the plan's first traced step: StepStats::recorded_bytes_estimate, two allocation
  // records a node and an output a slot).
  size_t recorded_room(const Executor::Plan& plan) const;
  // The slots a traced step writes while it runs (the builder's, kept for the plan's next
  // traced step; finish() writes what they hold into the StepStats' recorded stream).
  struct Slots {
    NodeRecord* records;  // per plan item
    StepStats::RecordedOutput* outputs;  // per plan slot: a node's outputs are consecutive slots
    // The scratch where it was made now (a plan's first traced step, unless the plan made it
    // ahead), not mapped: the caller has it mapped with the room (TraceScratch::memory).
    const TraceScratch* new_scratch;
  };
  // Then the slots.
  Slots slots(const Executor::Plan& plan);
  // After the step (the recorder closed): fills `stats`.
  void finish(const Executor::Plan& plan, AllocationRecorder& recorder, const StepClock& clock, StepStats& stats);

 private:
  std::unique_ptr<TraceScratch> scratch_;  // made (or taken from the plan) by the first traced step
  std::vector<int32_t> order_, cursor_, position_;  // scratch of finish()
  std::vector<StepStats::RecordSource> sources_;  // each allocation record's allocator, when needed
  std::vector<AllocationRecord> more_grouped_;    // a step's records where they are more than two a node
  size_t last_recorded_bytes_ = 0;  // of the step before (StepStats::num_recorded_bytes)
};

}  // namespace stepscope
