// What a traced step records, per device and per node: every field of TensorFlow's
// step_stats.proto, with nanosecond precision kept (the *_micros accessors give TensorFlow's
// microsecond views). Times are monotonic nanoseconds (now_ns()); StepStats carries the
// wall-clock base so files can record an absolute time.
//
// Laid out so that building it costs no allocation per node:
//  - strings are std::string_view of interned strings (StepStats::intern: process-wide, never
//    freed), so a StepStats stays valid after its Session and Graph are gone, and copying a
//    name is copying a pointer;
//  - the repeated fields of a node (output, memory and its allocation_records,
//    referenced_tensor, memory_stats.persistent_tensor_alloc_ids) are std::span views into flat
//    arrays owned by the StepStats. A copy of a StepStats rebases the views onto its own arrays;
//    a move keeps them as they are (the arrays do not move).
// A traced step writes less than that: what it recorded of each node, its allocation records and
// its outputs, as one stream of variable-length differences (~6 bytes a node of one output on a
// chain of small ops, 25-33 on real models, where the node entry, two AllocationRecords and a
// NodeOutput take ~450; see RecordedWriter), and the plan's names, shared. The node entries,
// output descriptions, memory entries and allocation records are made from them on the first
// read of dev_stats(), from any thread: a step whose stats nobody reads (most of what a flight
// recorder keeps) writes 6-33 bytes a node, not the ~420 its node entries take (and a holder may
// drop them again: drop_node_entries). On new memory a step's cost follows its bytes (a VM's
// host charges ~1-2 µs a 4 KiB page it still backs, 10-50 µs one it took back).
// To build one by hand (tests, readers of saved traces): fill NodeExecStats, putting repeated
// fields through the store_* functions of the StepStats that will hold the node, and strings
// through intern().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/base/proto_wire.h"
#include "stepscope/base/uninitialized_allocator.h"
#include "stepscope/core/dtype.h"
#include "stepscope/core/shape.h"

namespace stepscope {

struct AllocationRecord {
  int64_t alloc_ns = 0;
  int64_t alloc_bytes = 0;  // negative: a free
  int64_t alloc_micros() const { return alloc_ns / 1000; }
};

struct AllocatorMemoryUsed {
  std::string_view allocator_name;
  int64_t total_bytes = 0;  // allocated by this node during the step
  int64_t peak_bytes = 0;   // most of those live at once
  int64_t live_bytes = 0;   // still live when the step ended
  // This node's allocations and the frees of those buffers during the step, in time order.
  std::span<const AllocationRecord> allocation_records;
  int64_t allocator_bytes_in_use = 0;  // the whole allocator, when the node finished
};

struct AllocationDescription {
  int64_t requested_bytes = 0;
  int64_t allocated_bytes = 0;
  std::string_view allocator_name;
  int64_t allocation_id = 0;
  bool has_single_reference = false;
  uint64_t ptr = 0;
};

struct TensorDescription {
  DType dtype = DType::kFloat32;
  Shape shape;
  AllocationDescription allocation_description;
};

struct NodeOutput {
  int32_t slot = 0;
  TensorDescription tensor_description;
};

struct MemoryStats {
  int64_t temp_memory_size = 0;
  int64_t persistent_memory_size = 0;
  std::span<const int64_t> persistent_tensor_alloc_ids;
};

// One node's run. The executor takes two clock readings per node, right before and right
// after its kernel, as TensorFlow's step_stats_collector does around Compute:
//   all_start = op_start: the kernel starts (nothing of the node's own happens before it);
//   op_end = all_end:     the kernel returned (recording the outputs is not counted);
//   scheduled:            the node became ready: the all_end of the node whose completion made
//                         it ready, or the step's start for a node with no inputs to wait for.
// Allocation records are stamped with the same readings: the node's start for what its kernel
// allocates and frees, the end of the node that released a tensor for a free after a kernel.
struct NodeExecStats {
  std::string_view node_name;
  std::string_view op_type;  // not in TensorFlow's proto (it parses timeline_label); kept for convenience
  int32_t node_id = -1;      // index of the node in its graph
  int64_t scheduled_ns = 0;
  int64_t all_start_ns = 0;
  int64_t op_start_rel_ns = 0;  // relative to all_start_ns
  int64_t op_end_rel_ns = 0;
  int64_t all_end_rel_ns = 0;
  std::span<const AllocatorMemoryUsed> memory;  // one per allocator the node allocated from
  std::span<const NodeOutput> output;
  std::string_view timeline_label;  // "name = Op(in0, in1)"
  uint32_t thread_id = 0;
  std::span<const AllocationDescription> referenced_tensor;
  MemoryStats memory_stats;

  int64_t all_start_micros() const { return all_start_ns / 1000; }
  int64_t op_start_rel_micros() const { return op_start_rel_ns / 1000; }
  int64_t op_end_rel_micros() const { return op_end_rel_ns / 1000; }
  int64_t all_end_rel_micros() const { return all_end_rel_ns / 1000; }
  int64_t scheduled_micros() const { return scheduled_ns / 1000; }
};

struct DeviceStepStats {
  std::string_view device;
  std::vector<NodeExecStats> node_stats;
};

class StepStats {
 public:
  int64_t base_ns = 0;       // now_ns() when the step started
  int64_t base_wall_ns = 0;  // the same instant on the wall clock (ns since the epoch)

  // Per device, the nodes that ran. What a traced step recorded is made node entries here, on
  // the first call (see the top of this file).
  const std::vector<DeviceStepStats>& dev_stats() const {
    if (unbuilt_.load(std::memory_order_acquire)) build_nodes();
    return dev_stats_;
  }
  std::vector<DeviceStepStats>& dev_stats() {
    if (unbuilt_.load(std::memory_order_acquire)) build_nodes();
    // The entries may change: drop_node_entries keeps them from now on (atomic: concurrent
    // readers of a non-const StepStats call this too).
    remakeable_.store(false, std::memory_order_relaxed);
    return dev_stats_;
  }

  StepStats() = default;
  // A copy of a step not yet read is of what it recorded (its node entries made in the copy
  // when read there).
  StepStats(const StepStats& other);
  StepStats& operator=(const StepStats& other);
  StepStats(StepStats&& other) noexcept;
  StepStats& operator=(StepStats&& other) noexcept;
  // The arrays of a StepStats that goes away are kept (one set, process-wide) for the next
  // traced step that starts with an empty one, as a fresh RunMetadata per step does: a step's
  // worth of megabytes is not handed back to the system and faulted in again every step.
  ~StepStats();

  bool empty() const { return dev_stats_.empty() && !unbuilt_.load(std::memory_order_acquire); }
  // Forgets everything but keeps the memory, for the next step.
  void clear();
  // Frees the node entries a read made of what the step recorded (~420 bytes a node), keeping
  // the recorded stream (6-33): a later read makes them again. For a holder of many steps that
  // reads them now and then (a flight recorder's ring, which a dump reads whole), so that it
  // holds no more than the streams it counts. Nothing changes for a step whose entries cannot
  // be made again as they are: not recorded, recorded with allocators other than the kernels'
  // (those are made at once), or read through the non-const dev_stats() (they may have been
  // changed).
  void drop_node_entries();

  // A process-wide copy of `s` that is never freed (equal strings share one copy).
  static std::string_view intern(std::string_view s);
  // The same, keeping `s` itself as the copy where it is new and big (a plan's labels): no
  // second copy of tens of MB. `s` is left valid but unspecified.
  static std::string_view intern(std::string&& s);
  static std::string_view intern(const char* s) { return intern(std::string_view(s)); }

  // Copy the items (which must not be in this StepStats' arrays themselves) into its arrays
  // and return the view to put in a node of it. Put it there before the next store or add: when
  // an array has to grow, the views that nodes of dev_stats hold (and memory entries' records)
  // are rebased, but a view kept anywhere else dangles.
  std::span<const NodeOutput> store_outputs(std::span<const NodeOutput> outputs);
  // The allocation_records of each entry are stored too, unless they already are.
  std::span<const AllocatorMemoryUsed> store_memory(std::span<const AllocatorMemoryUsed> memory);
  std::span<const AllocationRecord> store_records(std::span<const AllocationRecord> records);
  std::span<const AllocationDescription> store_referenced(std::span<const AllocationDescription> tensors);
  std::span<const int64_t> store_alloc_ids(std::span<const int64_t> ids);
  // Append n default items and return them to fill in (writable until the next call for the
  // same array); the node then holds them as a std::span<const T>.
  std::span<NodeOutput> add_outputs(size_t n);
  // Memory entries are appended one by one, each built in place (no default fill first: the
  // builder adds them after every node of a traced step): room for n more, then each entry.
  void reserve_more_memory(size_t n) {
    if (memory_.size() + n > memory_.capacity()) reserve(0, std::max(n, memory_.capacity()), 0);
  }
  AllocatorMemoryUsed& add_memory(const AllocatorMemoryUsed& entry) { return memory_.emplace_back(entry); }
  std::span<AllocationRecord> add_records(size_t n);
  // Room for that many more items, so that the calls that follow never reallocate.
  void reserve(size_t outputs, size_t memory, size_t records);

  // The bytes its node entries and arrays hold (or what it recorded, before its node entries are
  // made): what it takes in memory, roughly, with no entries made to count it.
  size_t held_bytes() const;
  // Elements in the flat arrays (what copies of this StepStats copy).
  size_t num_stored_outputs() const { return outputs_.size(); }
  size_t num_recorded_outputs() const { return num_recorded_slots_; }
  size_t num_stored_records() const { return std::max(records_.size(), num_recorded_records_); }

  // What a traced step writes of an output while it runs (the executor's describe_output, in its
  // builder's array, a slot each; RecordedWriter keeps it in 0-9 bytes): 32 bytes, where the
  // NodeOutput the first read makes of it takes 144 (most of that the shape's
  // eight 64-bit dimensions). Its shape and allocator name are the process's (intern_shape,
  // allocator_index); its slot is its place among its node's outputs. An output whose sizes do
  // not fit 32 bits, or a fed tensor (its slot is the output it feeds), is kept in the StepStats
  // whole (keep_output_apart).
  struct RecordedOutput {
    uint64_t ptr;
    int64_t allocation_id;
    uint32_t requested_bytes, allocated_bytes;
    uint32_t shape;      // an InternedShape's index; where kept_apart: the output's in outputs_apart_
    uint16_t allocator;  // allocator_index; 0 and not kept apart: not produced (the kernel failed)
    DType dtype;
    // Whole bytes and words, not bit fields: a step stores each field whole, where setting a bit
    // field reads its line first (on a page not yet written, a fault for reading, then another).
    uint8_t flags;
    static constexpr uint8_t kSingleReference = 1, kKeptApart = 2;
    bool has_single_reference() const { return flags & kSingleReference; }
    bool kept_apart() const { return flags & kKeptApart; }
  };
  static_assert(sizeof(RecordedOutput) == 32);
  // A shape the process keeps (never freed), which recorded outputs name by its index.
  struct InternedShape {
    Shape shape;
    uint32_t index;
  };
  // The process's copy of `shape` (null once 2^18 shapes are kept: outputs of other shapes are
  // then kept apart). Takes a lock.
  static const InternedShape* intern_shape(const Shape& shape);
  // The same, found first among the shapes this thread interned last (64, by a hash of the
  // dimensions; no lock, no memory a step): what the executor's hot path names a shape by.
  static const InternedShape* find_shape(const Shape& shape) {
    uint64_t h = static_cast<uint64_t>(shape.rank());
    for (const int64_t d : shape.dims()) h = (h ^ static_cast<uint64_t>(d)) * 0x9E3779B97F4A7C15u;
    const InternedShape*& recent = recent_shapes_[h >> 58];
    if (recent && same_shape(recent->shape, shape)) [[likely]]
      return recent;
    const InternedShape* interned = intern_shape(shape);
    if (interned) recent = interned;
    return interned;
  }
  static const Shape& interned_shape(uint32_t index);
  static bool same_shape(const Shape& a, const Shape& b) {
    if (a.rank() != b.rank()) return false;
    for (int i = 0; i < a.rank(); ++i)
      if (a.dim(i) != b.dim(i)) return false;
    return true;
  }
  // A process-wide index of an allocator's name, from 1 (0 once 4095 names are kept: outputs
  // of other allocators are then kept apart), and the name of an index.
  static uint16_t allocator_index(std::string_view name);
  static std::string_view allocator_name(uint16_t index);
  // For writing a step in place (the executor's StepStatsBuilder), with no allocation once the
  // arrays have grown to a step's size:
  // Forgets everything, as clear() does (a step recorded and never read included), but keeps
  // the devices' node lists (emptied) with their memory, and the arrays' memory. A StepStats
  // with no memory of its own takes the spare arrays (see ~StepStats).
  // `spare_wanted`, where given, says whether a thread with nothing else to do should make the
  // next fresh StepStats' spare set (prepare_spare with SpareFor::kKeptSteps): this one had no
  // memory of its own and found the spare set empty although an earlier fresh StepStats traced
  // a step (it is still alive: its caller keeps each step's RunMetadata), or took a set made
  // for such steps.
  void reuse_for_step(bool* spare_wanted = nullptr);
  // An output whose description does not fit 32 bytes, kept whole (under a lock; from any of the
  // step's threads).
  void keep_output_apart(RecordedOutput& out, int32_t slot, int64_t requested_bytes, int64_t allocated_bytes,
                         const Shape& shape, std::string_view allocator);
  // Writes a tensor's description, output `slot` of its node (by hand: tests), as the executor
  // does: inline where it fits and `slot` is the output's place among its node's, else apart.
  void record_output(RecordedOutput& out, const NodeOutput& output, bool slot_is_place);
  // The view of `n` stored output descriptions from index `first`.
  std::span<const NodeOutput> stored_outputs(size_t first, size_t n) const { return {outputs_.data() + first, n}; }
  // The room reserved beyond what the recorded stream holds: what a step writes at its end, for
  // an idle thread to fault in before (prefault_pages).
  std::span<const std::byte> room() const;
  // The bytes the node lists and the output, memory, record and recorded-node arrays have room
  // for (kept between steps; what a StepStats that goes away hands on, see ~StepStats).
  size_t reserved_bytes() const;

  // What a traced step recorded of a node that ran (StepStatsBuilder::finish): what dev_stats()
  // makes its node entry of. Times in nanoseconds (now_ns's clock).
  struct RecordedNode {
    uint32_t item;          // its index in the plan's names
    bool missing_outputs;   // the kernel failed: its outputs not produced are left out
    uint32_t thread_id;
    int64_t start_ns, end_ns, scheduled_ns;
    int64_t bytes_in_use_at_end;  // of the kernel's allocator
  };
  // A step's fed outputs, then its recorded nodes in start order, each followed by its
  // allocation records and its outputs, are kept as one stream of variable-length integers
  // (LEB128), each the difference from what it most likely is:
  // - a node: a head byte whose bits say what is left unsaid, as the reader predicts it (its
  //   item is the one after the node before's; its thread, its counts of records and outputs
  //   and its allocator's bytes in use are the node before's; its records' bytes and its
  //   outputs are as predicted below; its first record is at its start) and whether its kernel
  //   failed; then what the head does not say: its start from the node before's, its end and
  //   scheduled time from its start, its bytes in use from the node before's;
  // - an allocation record: its time from its node's start; its bytes from the node before's
  //   first record's (a node's first), else from the negated record before (a free of what the
  //   node allocated, most often);
  // - an output: a head (0: not produced; 2: of the output before's dtype, flags, allocator,
  //   shape and sizes, with bits for an allocation id the next one and a pointer the output
  //   before the output before's, as an allocator handing back two buffers in turn gives them;
  //   else the dtype and flags, then those fields), its pointer and allocation id from the
  //   output before's where the head does not say them.
  // On a chain of small ops that is ~6 bytes a node (its head, three times, its free's time),
  // where fixed fields took 32 a node, 8 a record and 32 an output; on real models 25-33 bytes
  // a node (the costliest field an output's pointer). On new memory a step's cost follows its
  // bytes (see the top of this file). Every value fits: nothing but an output's
  // (see RecordedOutput) is kept apart.
  class RecordedWriter {
   public:
    // First, the outputs of each fed node, in the plan's order (from the step's end: not
    // thread-safe).
    void add_fed(const RecordedOutput* outputs, size_t num_outputs) {
      const size_t bound = 10 + num_outputs * kMaxOutputBytes;
      if (static_cast<size_t>(end_ - at_) < bound) [[unlikely]]
        grow(bound);
      uint8_t* p = put(at_, num_outputs);
      for (size_t i = 0; i < num_outputs; ++i) p = put_output(p, outputs[i]);
      at_ = p;
    }
    // Then each node that ran, in start order, with its `num_records` allocation records and its
    // `num_outputs` outputs.
    void add(const RecordedNode& node, const AllocationRecord* records, size_t num_records,
             const RecordedOutput* outputs, size_t num_outputs) {
      const size_t bound = kMaxNodeBytes + num_records * kMaxRecordBytes + num_outputs * kMaxOutputBytes;
      if (static_cast<size_t>(end_ - at_) < bound) [[unlikely]]
        grow(bound);
      const bool next_item = node.item == last_item_ + 1, same_thread = node.thread_id == last_thread_;
      const bool same_counts = num_records == last_records_ && num_outputs == last_outputs_;
      const bool same_in_use = node.bytes_in_use_at_end == last_in_use_;
      const bool first_at_start = num_records == 0 || records[0].alloc_ns == node.start_ns;
      bool bytes_predicted = true;
      for (size_t i = 0; i < num_records && bytes_predicted; ++i)
        bytes_predicted = static_cast<uint64_t>(records[i].alloc_bytes) == predicted_bytes(records, i);
      uint8_t* const head = at_;
      uint8_t* p = at_;
      *p++ = static_cast<uint8_t>((node.missing_outputs ? kMissing : 0) | (next_item ? kNextItem : 0) |
                                  (same_thread ? kSameThread : 0) | (same_counts ? kSameCounts : 0) |
                                  (same_in_use ? kSameInUse : 0) | (bytes_predicted ? kBytesPredicted : 0) |
                                  (first_at_start ? kFirstAtStart : 0));
      if (!next_item) p = put(p, zigzag32(node.item - last_item_));
      // Never negative (the nodes come in start order; a node ends after it starts, and starts
      // after it became ready), so not zigzagged: lossless all the same.
      p = put(p, static_cast<uint64_t>(node.start_ns) - static_cast<uint64_t>(last_start_));
      p = put(p, static_cast<uint64_t>(node.end_ns) - static_cast<uint64_t>(node.start_ns));
      p = put(p, static_cast<uint64_t>(node.start_ns) - static_cast<uint64_t>(node.scheduled_ns));
      if (!same_thread) p = put(p, zigzag32(node.thread_id - last_thread_));
      if (!same_in_use)
        p = put(p, zigzag(static_cast<uint64_t>(node.bytes_in_use_at_end) - static_cast<uint64_t>(last_in_use_)));
      if (!same_counts) {
        p = put(p, num_records);
        p = put(p, num_outputs);
      }
      for (size_t i = 0; i < num_records; ++i) {
        if (i > 0 || !first_at_start)
          p = put(p, zigzag(static_cast<uint64_t>(records[i].alloc_ns) - static_cast<uint64_t>(node.start_ns)));
        if (!bytes_predicted)
          p = put(p, zigzag(static_cast<uint64_t>(records[i].alloc_bytes) - predicted_bytes(records, i)));
      }
      if (num_records > 0) last_first_bytes_ = records[0].alloc_bytes;
      uint8_t* const outputs_at = p;
      for (size_t i = 0; i < num_outputs; ++i) p = put_output(p, outputs[i]);
      // Outputs each written as its one predicted head are left unsaid: the node's head says so.
      if (num_outputs > 0 && p == outputs_at + num_outputs &&
          std::all_of(outputs_at, p, [](uint8_t h) { return h == kOutputPredicted; })) {
        *head |= kOutputsPredicted;
        p = outputs_at;
      }
      at_ = p;
      last_item_ = node.item;
      last_thread_ = node.thread_id;
      last_start_ = node.start_ns;
      last_in_use_ = node.bytes_in_use_at_end;
      last_records_ = num_records;
      last_outputs_ = num_outputs;
      ++nodes_;
      records_ += num_records;
      groups_ += num_records > 0;
    }
    // The step's stream is whole: its size is what was written.
    void close();

   private:
    friend class StepStats;
    friend class RecordedReader;  // the heads' codes
    // A node's head (one byte), and its other fields at their longest.
    static constexpr size_t kMaxNodeBytes = 1 + 8 * 10, kMaxRecordBytes = 2 * 10, kMaxOutputBytes = 7 * 10;
    // A node's head: its kernel failed; what is left unsaid, as the reader predicts it.
    static constexpr uint8_t kMissing = 1, kNextItem = 2, kSameThread = 4, kSameCounts = 8, kSameInUse = 16,
                             kBytesPredicted = 32, kFirstAtStart = 64, kOutputsPredicted = 128;
    // An output's heads that are not a dtype's (odd): not produced; of the output before's
    // dtype, flags, allocator, shape and sizes, and, with the bits after, its allocation id the
    // next one and its pointer the one of the output before the output before.
    static constexpr uint8_t kNotProduced = 0, kAsTheOutputBefore = 2, kIdNext = 4, kPointerTwoBack = 8,
                             kOutputPredicted = kAsTheOutputBefore | kIdNext | kPointerTwoBack;
    RecordedWriter(StepStats& stats, size_t num_slots);
    void grow(size_t bound);
    // A difference taken in two's complement (wrapping), zigzagged: small either side of 0.
    static uint64_t zigzag(uint64_t difference) { return proto_wire::zigzag(static_cast<int64_t>(difference)); }
    // The same for 32-bit fields (an item's or thread's), small either side of 0 modulo 2^32.
    static uint64_t zigzag32(uint32_t difference) { return proto_wire::zigzag(static_cast<int32_t>(difference)); }
    static uint8_t* put(uint8_t* p, uint64_t v) { return proto_wire::put_varint(p, v); }
    // What record i of a node is predicted to allocate: a node's first, the node before's first
    // record's bytes; a later one, the negated record before (a free of what the node allocated).
    uint64_t predicted_bytes(const AllocationRecord* records, size_t i) const {
      return i == 0 ? static_cast<uint64_t>(last_first_bytes_) : 0 - static_cast<uint64_t>(records[i - 1].alloc_bytes);
    }
    uint8_t* put_output(uint8_t* p, const RecordedOutput& out) {
      if (!out.allocator && !out.kept_apart()) {
        *p++ = kNotProduced;
        return p;
      }
      if (out.dtype == last_.dtype && out.flags == last_.flags && out.allocator == last_.allocator &&
          out.shape == last_.shape && out.requested_bytes == last_.requested_bytes &&
          out.allocated_bytes == last_.allocated_bytes) {
        const bool id_next = static_cast<uint64_t>(out.allocation_id) == static_cast<uint64_t>(last_.allocation_id) + 1;
        const bool two_back = out.ptr == pointer_two_back_;
        *p++ = static_cast<uint8_t>(kAsTheOutputBefore | (id_next ? kIdNext : 0) | (two_back ? kPointerTwoBack : 0));
        if (!two_back) p = put(p, zigzag(out.ptr - last_.ptr));
        if (!id_next)
          p = put(p, zigzag(static_cast<uint64_t>(out.allocation_id) - static_cast<uint64_t>(last_.allocation_id)));
      } else {
        p = put(p, (uint64_t{static_cast<uint8_t>(out.dtype)} << 3) | (uint64_t{out.flags} << 1) | 1);
        p = put(p, zigzag(out.ptr - last_.ptr));
        p = put(p, zigzag(static_cast<uint64_t>(out.allocation_id) - static_cast<uint64_t>(last_.allocation_id)));
        p = put(p, out.requested_bytes);
        p = put(p, zigzag(uint64_t{out.allocated_bytes} - uint64_t{out.requested_bytes}));
        p = put(p, zigzag(uint64_t{out.shape} - uint64_t{last_.shape}));
        p = put(p, out.allocator);
      }
      pointer_two_back_ = last_.ptr;
      last_ = out;
      return p;
    }
    StepStats* stats_;
    RecordedOutput last_{};  // the last output written (not counting those not produced)
    uint64_t pointer_two_back_ = 0;  // the pointer of the output written before that one
    size_t num_slots_;
    uint8_t *at_, *end_;
    uint32_t last_item_ = UINT32_MAX, last_thread_ = 0;
    int64_t last_start_, last_in_use_ = 0, last_first_bytes_ = 0;
    size_t last_records_ = 0, last_outputs_ = 0;
    size_t nodes_ = 0, records_ = 0, groups_ = 0;
  };
  // The writer of a step's recorded stream, after base_ns is set, for a plan of `num_slots`
  // output slots; what the StepStats held before is gone.
  RecordedWriter write_recorded(size_t num_slots) { return RecordedWriter(*this, num_slots); }
  // Reads the stream back: for each fed node, next_fed() gives how many of its outputs follow,
  // output() each; then for each node, next() gives the node and how many of its records and
  // outputs follow, record() and output() each of them, in that order.
  class RecordedReader {
   public:
    explicit RecordedReader(const StepStats& stats);
    size_t next_fed() { return static_cast<size_t>(get()); }
    bool next(RecordedNode& node, size_t& num_records, size_t& num_outputs);
    void output(RecordedOutput& out);
    // Each of the node's records, in order, after next().
    AllocationRecord record() {
      const bool at_start = first_record_ && (head_ & RecordedWriter::kFirstAtStart);
      const int64_t at = static_cast<int64_t>(static_cast<uint64_t>(start_) + (at_start ? 0 : unzigzag(get())));
      const auto bytes =
          static_cast<int64_t>(expected_bytes_ + ((head_ & RecordedWriter::kBytesPredicted) ? 0 : unzigzag(get())));
      if (first_record_) last_first_bytes_ = bytes;
      first_record_ = false;
      expected_bytes_ = 0 - static_cast<uint64_t>(bytes);
      return {at, bytes};
    }

   private:
    static uint64_t unzigzag(uint64_t v) { return static_cast<uint64_t>(proto_wire::unzigzag(v)); }
    uint64_t get() { return proto_wire::get_varint(at_); }
    const uint8_t *at_, *end_;
    uint32_t item_ = UINT32_MAX, thread_ = 0;
    int64_t start_, in_use_ = 0, last_first_bytes_ = 0;
    uint64_t expected_bytes_ = 0;
    uint8_t head_ = 0;  // the node's (none before the first: the fed outputs say their heads)
    bool first_record_ = false;
    size_t num_records_ = 0, num_outputs_ = 0;
    RecordedOutput last_{};
    uint64_t pointer_two_back_ = 0;
  };
  // How many nodes and allocation records the step recorded, and in how many bytes (until its
  // node entries are made).
  size_t num_recorded_nodes() const { return num_recorded_nodes_; }
  size_t num_recorded_records() const { return num_recorded_records_; }
  size_t num_recorded_bytes() const { return recorded_.size(); }
  // The bytes to reserve for the recorded stream of a step of n nodes, `records` allocation
  // records and `outputs` outputs: ~4x a chain of small ops' stream, a little under real models'
  // (the writer grows; a plan's later steps reserve what the step before took, see
  // StepStatsBuilder::recorded_room).
  static size_t recorded_bytes_estimate(size_t n, size_t records, size_t outputs) {
    return 12 * n + 3 * records + 10 * outputs;
  }
  // What a plan's traced steps need of each node, names interned (Executor::Plan::names), shared
  // by the StepStats that hold its steps until their node entries are made.
  struct ItemNames {
    std::string_view name, op_type, timeline_label;
    int32_t node_id, output_base, num_outputs, device;
  };
  // A plan's first traced step may be over before its names are made (on a thread beside it,
  // which maps the step's new memory first): a reader of the step's node entries waits for them.
  struct PlanNames {
    std::vector<ItemNames> items, fed;  // fed: the nodes whose outputs the caller fed
    std::vector<std::string_view> devices;
    enum State : int { kMaking, kMade, kFailed };
    std::atomic<int> state{kMaking};  // kFailed until made again (the plan retries)
    bool made() const { return state.load(std::memory_order_acquire) == kMade; }
    // Throws std::runtime_error where making them failed (out of memory).
    void wait_until_made() const;
    void set_state(State s) {
      state.store(s, std::memory_order_release);
      state.notify_all();
    }
  };
  // The allocator of an allocation record, for a step whose records are not all the kernels'
  // allocator's (then the node entries are made at once: the allocators may not outlive the step).
  struct RecordSource {
    const void* allocator;
    std::string_view name;
    int64_t bytes_in_use;  // the allocator's, after this record's event
  };
  // The arrays a traced step writes whole, item by item: growing them writes nothing (see
  // UninitializedAllocator), so that new memory is first written by the step, on pages a thread
  // beside it has mapped.
  using OutputArray = std::vector<NodeOutput, UninitializedAllocator<NodeOutput>>;
  using RecordedOutputArray = std::vector<RecordedOutput, UninitializedAllocator<RecordedOutput>>;
  using RecordedBytes = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;

  // Room for `recorded_bytes` of the recorded stream (what a step's end writes: see
  // recorded_bytes_estimate).
  void reserve_recorded(size_t recorded_bytes);
  // Then the step is recorded: its node entries are made on the first read of dev_stats(), or
  // here where `sources` (one a stored allocation record) are given. Fed nodes come first, on
  // `caller_thread`, with no duration.
  void set_recorded(std::shared_ptr<const PlanNames> names, std::string_view kernel_allocator_name,
                    uint32_t caller_thread, std::span<RecordSource> sources = {});

  // How many items a step's arrays have room for: what a spare set made ahead needs.
  struct ArraySizes {
    size_t outputs = 0, memory = 0, records = 0;
    std::vector<size_t> node_stats;  // per device
    size_t recorded_bytes = 0;
    size_t bytes() const;
  };
  ArraySizes reserved_sizes() const;
  // Why a spare set is made ahead: for a plan's first traced step (a session that expects
  // traced steps), or for the next of the steps whose callers keep each RunMetadata.
  enum class SpareFor { kFirstStep, kKeptSteps };
  // Makes the process's spare set (see ~StepStats) as big as `sizes`, mapped, unless it is that
  // big already: the next fresh StepStats' step then writes memory mapped already, where new
  // memory costs ~2 µs a 4 KiB page on a VM (~200 ns a node of a step). For a thread with
  // nothing else to do: it maps ~450 bytes a node, and the set becomes the spare one once its
  // pages are mapped. Where `stop` is given and set before then, the set is dropped (a step that
  // starts meanwhile makes its own: see Executor::Plan::stop_preparation).
  // Returns whether it made a set (false where one was there already, the sizes are outside
  // what a spare set may be, or `stop` came first): how long it took says only then what the
  // next set will cost.
  static bool prepare_spare(const ArraySizes& sizes, SpareFor why, const std::atomic<bool>* stop = nullptr);

 private:
  template <typename T, typename A>
  std::span<T> add(std::vector<T, A>& array, size_t n);
  template <typename T, typename A>
  void rebase(const std::vector<T, A>& array, const T* old_data, size_t old_size);
  void rebase_all(const StepStats& from);
  void give_arrays_away() noexcept;
  bool take_spare_arrays();  // whether the spare set is wanted again (see reuse_for_step)
  void build_nodes() const;  // the recorded nodes' entries, once (thread-safe)
  // The output descriptions of slots [first, first + n), read from the recorded stream.
  std::span<const NodeOutput> describe_outputs(RecordedReader& reader, size_t first, size_t n);
  void make_node_entries(std::span<RecordSource> sources);

  // Mutable: dev_stats() makes the node entries of a const StepStats.
  mutable std::vector<DeviceStepStats> dev_stats_;
  mutable std::atomic<bool> unbuilt_{false};  // recorded_ holds a step whose entries are not made
  std::atomic<bool> remakeable_{false};       // recorded_ makes the node entries (not made at once, from sources)
  mutable RecordedBytes recorded_;  // the recorded stream: fed outputs, nodes, records, outputs (RecordedWriter)
  size_t num_recorded_nodes_ = 0, num_recorded_records_ = 0;
  size_t num_recorded_groups_ = 0;  // nodes with allocation records
  size_t num_recorded_slots_ = 0;   // the plan's (the output descriptions' array, when read)
  mutable std::shared_ptr<const PlanNames> names_;  // of the plan that recorded it
  std::string_view kernel_allocator_name_;
  uint32_t caller_thread_ = 0;
  static inline thread_local const InternedShape* recent_shapes_[64] = {};  // see find_shape
  // The outputs kept whole (see RecordedOutput).
  struct OutputApart {
    int32_t slot;
    int64_t requested_bytes, allocated_bytes;
    std::string_view allocator;
    Shape shape;
  };
  std::vector<OutputApart> outputs_apart_;
  mutable OutputArray outputs_;
  mutable std::vector<AllocatorMemoryUsed> memory_;
  mutable std::vector<AllocationRecord> records_;
  std::vector<AllocationDescription> referenced_;
  std::vector<int64_t> alloc_ids_;
};

}  // namespace stepscope
