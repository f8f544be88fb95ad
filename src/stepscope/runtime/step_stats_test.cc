// StepStats' API for writing a step in place (what the executor's StepStatsBuilder uses).
#include "stepscope/runtime/step_stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace stepscope {
namespace {

// Writes a step of one recorded node with no allocation records, as StepStatsBuilder::finish does:
// the outputs of each fed node, then the node with its outputs (one slot each).
void record_one_node(StepStats& st, const StepStats::RecordedNode& node,
                     std::span<const StepStats::RecordedOutput> outputs = {},
                     std::span<const StepStats::RecordedOutput> fed = {}) {
  StepStats::RecordedWriter writer = st.write_recorded(outputs.size() + fed.size());
  for (const StepStats::RecordedOutput& out : fed) writer.add_fed(&out, 1);
  writer.add(node, nullptr, 0, outputs.data(), outputs.size());
  writer.close();
}

// The memory of a StepStats' recorded stream (what a step writes at its end), with room for at
// least `bytes`: what tells one set of arrays from another.
const std::byte* stream_of(StepStats& st, size_t bytes) {
  st.reserve_recorded(bytes);
  return st.room().data();
}

TEST(StepStats, ReuseForStepForgetsTheStepButKeepsTheMemory) {
  StepStats st;
  st.reserve(1, 0, 0);  // memory of its own: it takes no spare arrays (another test's)
  st.base_ns = 5;
  st.base_wall_ns = 6;
  st.dev_stats().push_back({StepStats::intern("/device:CPU:0"), {}});
  st.dev_stats()[0].node_stats.resize(3);
  const NodeExecStats* nodes = st.dev_stats()[0].node_stats.data();
  const std::byte* stream = stream_of(st, 64);
  st.reuse_for_step();
  EXPECT_EQ(stream_of(st, 64), stream);  // the recorded stream's memory is kept
  EXPECT_EQ(st.base_ns, 0);
  EXPECT_EQ(st.base_wall_ns, 0);
  ASSERT_EQ(st.dev_stats().size(), 1u);
  EXPECT_TRUE(st.dev_stats()[0].node_stats.empty());
  EXPECT_EQ(st.dev_stats()[0].node_stats.data(), nodes);  // the node list's memory is kept

  // Output descriptions stored are what stored_outputs views; copies view their own arrays.
  NodeOutput out;
  out.slot = 7;
  NodeExecStats ns;
  ns.output = st.store_outputs(std::span(&out, 1));
  EXPECT_EQ(ns.output.data(), st.stored_outputs(0, 1).data());
  st.dev_stats()[0].node_stats.push_back(ns);
  const StepStats copy = st;
  EXPECT_EQ(copy.dev_stats()[0].node_stats[0].output[0].slot, 7);
  EXPECT_NE(copy.dev_stats()[0].node_stats[0].output.data(), ns.output.data());
}

// A new RunMetadata a step (TensorFlow's idiom) does not fault a step's arrays in again: the
// arrays of a StepStats that goes away are what the next fresh one writes into.
TEST(StepStats, AFreshOneTakesTheArraysOfOneThatWentAway) {
  const size_t bytes = size_t{1} << 20;  // over the minimum kept (64 KiB)
  StepStats earlier;
  earlier.reuse_for_step();  // takes what earlier tests left, if anything
  const std::byte* arrays = nullptr;
  {
    StepStats gone;
    gone.dev_stats().push_back({StepStats::intern("/device:CPU:0"), {}});
    gone.reuse_for_step();
    arrays = stream_of(gone, bytes);
  }
  StepStats fresh;
  fresh.reuse_for_step();
  EXPECT_EQ(stream_of(fresh, bytes / 2), arrays);
  StepStats another;  // the one spare set is taken
  another.reuse_for_step();
  EXPECT_NE(stream_of(another, bytes / 2), arrays);
}

// Sizes over the minimum kept as spare arrays (64 KiB).
StepStats::ArraySizes spare_sizes() {
  return {.outputs = 4096, .memory = 1000, .records = 2000, .node_stats = {1000}, .recorded_bytes = 100000};
}

bool holds_at_least(const StepStats::ArraySizes& have, const StepStats::ArraySizes& need) {
  return have.outputs >= need.outputs && have.memory >= need.memory && have.records >= need.records &&
         have.recorded_bytes >= need.recorded_bytes && have.node_stats.size() >= need.node_stats.size() &&
         have.node_stats[0] >= need.node_stats[0];
}

// A session that expects traced steps has a spare set made ahead (an idle thread maps it): the
// next fresh StepStats writes into it, and wants no other made.
TEST(StepStats, ASpareSetMadeAheadIsWhatTheNextFreshOneTakes) {
  StepStats earlier;
  earlier.reuse_for_step();  // takes what earlier tests left, if anything
  // Under 64 KiB a step makes its own cheaply: no set made, and the caller told so.
  StepStats::ArraySizes small;
  small.recorded_bytes = 1000;
  EXPECT_FALSE(StepStats::prepare_spare(small, StepStats::SpareFor::kFirstStep));
  EXPECT_TRUE(StepStats::prepare_spare(spare_sizes(), StepStats::SpareFor::kFirstStep));
  StepStats fresh;
  bool spare_wanted = true;
  fresh.reuse_for_step(&spare_wanted);
  EXPECT_TRUE(holds_at_least(fresh.reserved_sizes(), spare_sizes()));
  EXPECT_FALSE(spare_wanted);
  StepStats another;  // the set is taken: this one writes new memory
  another.reuse_for_step();
  another.reserve_recorded(100);
  EXPECT_LT(another.reserved_sizes().recorded_bytes, spare_sizes().recorded_bytes);
}

// A set whose making is stopped (the next traced step started: Executor::make_spare_beside) is
// dropped, not left half mapped: the next fresh StepStats finds none.
TEST(StepStats, ASpareSetStoppedBeforeItIsWholeIsDropped) {
  StepStats earlier;
  earlier.reuse_for_step();  // takes what earlier tests left, if anything
  const std::atomic<bool> stopped{true};
  EXPECT_FALSE(StepStats::prepare_spare(spare_sizes(), StepStats::SpareFor::kKeptSteps, &stopped));
  StepStats fresh;
  fresh.reuse_for_step();
  EXPECT_EQ(fresh.reserved_sizes().recorded_bytes, 0u);
  EXPECT_EQ(fresh.reserved_sizes().outputs, 0u);
}

// Steps traced into a new RunMetadata each, kept: each after the first finds the spare set
// empty (the one before holds it) and asks for one; a set made for them asks for the next.
TEST(StepStats, FreshOnesThatFindTheSpareSetGoneAskForOneMade) {
  StepStats first;
  first.reuse_for_step();  // takes what earlier tests left: a fresh step traced before
  StepStats kept;
  bool spare_wanted = false;
  kept.reuse_for_step(&spare_wanted);
  kept.reserve_recorded(1);
  EXPECT_TRUE(spare_wanted);
  EXPECT_TRUE(StepStats::prepare_spare(spare_sizes(), StepStats::SpareFor::kKeptSteps));
  StepStats next;
  spare_wanted = false;
  next.reuse_for_step(&spare_wanted);
  EXPECT_TRUE(holds_at_least(next.reserved_sizes(), spare_sizes()));
  EXPECT_TRUE(spare_wanted);
  // A StepStats with memory of its own asks for nothing.
  spare_wanted = true;
  next.reuse_for_step(&spare_wanted);
  EXPECT_FALSE(spare_wanted);
}

// A caller that stops keeping its RunMetadata: the arrays of one that goes away take the place
// of a set made ahead no bigger than they are, and the fresh StepStats that takes them asks for
// no other. A set as big as asked for already is not made again.
TEST(StepStats, ArraysLeftByOneThatWentAwayTakeThePlaceOfASetMadeAhead) {
  StepStats earlier;
  earlier.reuse_for_step();  // takes what earlier tests left, if anything
  const StepStats::ArraySizes sizes = spare_sizes();
  EXPECT_TRUE(StepStats::prepare_spare(sizes, StepStats::SpareFor::kKeptSteps));
  const std::byte* left = nullptr;
  {
    StepStats gone;
    gone.reserve(sizes.outputs, sizes.memory, sizes.records);  // memory of its own: takes no spare set
    gone.dev_stats().resize(1);
    gone.dev_stats()[0].node_stats.reserve(sizes.node_stats[0]);
    left = stream_of(gone, sizes.recorded_bytes);
  }
  // Big enough already: nothing made, and the caller is told so (Executor::make_spare_beside
  // times only sets made).
  EXPECT_FALSE(StepStats::prepare_spare(sizes, StepStats::SpareFor::kKeptSteps));
  StepStats fresh;
  bool spare_wanted = true;
  fresh.reuse_for_step(&spare_wanted);
  EXPECT_EQ(stream_of(fresh, 10), left);
  EXPECT_FALSE(spare_wanted);
}

// room() is what is reserved and not yet written of the recorded stream, for a thread to fault
// in before a step's end writes it.
TEST(StepStats, RoomIsWhatIsReservedBeyondWhatIsHeld) {
  StepStats st;
  st.dev_stats().resize(1);
  st.dev_stats()[0].node_stats.reserve(10);  // not room: the first read writes them
  st.reserve_recorded(100);
  // Output descriptions, memory entries and their allocation records: not room (the first read
  // writes them).
  st.reserve(7, 5, 8);
  const std::span<const std::byte> room = st.room();
  EXPECT_EQ(room.size(), 100u);
  // A node of 7 bytes written (its head and six fields a byte each; its counts, no records and
  // no outputs, go unsaid): the room after it is left.
  record_one_node(st, {.item = 1, .missing_outputs = false, .thread_id = 1, .start_ns = 5, .end_ns = 6,
                       .scheduled_ns = 4, .bytes_in_use_at_end = 8});
  EXPECT_EQ(st.room().data(), room.data() + 7);
  EXPECT_EQ(st.room().size(), 100u - 7);
}

// reserved_bytes() is what the arrays have room for, written or not: it grows only where a
// step's arrays had to be made bigger (new memory), not when a step reuses them.
TEST(StepStats, ReservedBytesAreTheArraysCapacities) {
  StepStats st;
  st.reserve(1, 5, 8);  // memory of its own: it takes no spare arrays (another test's)
  st.dev_stats().resize(1);
  st.dev_stats()[0].node_stats.reserve(10);
  st.reuse_for_step();
  st.reserve_recorded(96);
  const size_t reserved = st.reserved_bytes();
  EXPECT_GE(reserved, 10 * sizeof(NodeExecStats) + 96 + 5 * sizeof(AllocatorMemoryUsed) + 8 * sizeof(AllocationRecord));
  st.reuse_for_step();  // the next step, the same arrays
  st.reserve_recorded(96);
  st.dev_stats()[0].node_stats.reserve(10);
  st.reserve(0, 5, 0);
  EXPECT_EQ(st.reserved_bytes(), reserved);
  st.dev_stats()[0].node_stats.reserve(20);
  EXPECT_EQ(st.reserved_bytes(), reserved + 10 * sizeof(NodeExecStats));
}

TEST(StepStats, MemoryOfRecordsStoredAlreadyViewsThem) {
  StepStats st;
  const AllocationRecord records[] = {{5, 4}, {10, -4}, {12, 8}};
  const std::span<const AllocationRecord> stored = st.store_records(records);
  AllocatorMemoryUsed m;
  m.allocation_records = stored.subspan(1, 1);
  const std::span<const AllocatorMemoryUsed> memory = st.store_memory(std::span(&m, 1));
  // Already in this StepStats' records: viewed, not copied.
  EXPECT_EQ(st.num_stored_records(), 3u);
  EXPECT_EQ(memory[0].allocation_records.data(), stored.data() + 1);
  EXPECT_EQ(memory[0].allocation_records[0].alloc_bytes, -4);
}

// A step records its nodes and their allocation records as differences, each in as few bytes
// as it needs: any value reads back whole, in the StepStats and in a copy of it (times before the
// step's base, long ops, 2^40-byte allocations, the ends of int64's range), and a node of small
// differences takes a byte a field.
TEST(StepStats, RecordedNodesAndRecordsOfAnySizeReadBackWhole) {
  StepStats st;
  st.base_ns = 1'000'000'000'000;
  const int64_t base = st.base_ns;
  using Node = StepStats::RecordedNode;
  const std::vector<Node> nodes = {
      {.item = 3, .missing_outputs = false, .thread_id = 7, .start_ns = base + 5, .end_ns = base + 15,
       .scheduled_ns = base + 2, .bytes_in_use_at_end = 64},
      {.item = 1, .missing_outputs = true, .thread_id = 2, .start_ns = base + 5, .end_ns = base + 5'000'000'000,
       .scheduled_ns = base, .bytes_in_use_at_end = int64_t{1} << 40},
      {.item = UINT32_MAX, .missing_outputs = false, .thread_id = UINT32_MAX, .start_ns = base - 10,
       .end_ns = base - 20, .scheduled_ns = base + 100, .bytes_in_use_at_end = 0},
      {.item = 0, .missing_outputs = false, .thread_id = 0, .start_ns = INT64_MAX, .end_ns = INT64_MIN,
       .scheduled_ns = INT64_MIN, .bytes_in_use_at_end = INT64_MIN},
      {.item = 4, .missing_outputs = false, .thread_id = 7, .start_ns = INT64_MIN, .end_ns = INT64_MAX,
       .scheduled_ns = INT64_MAX, .bytes_in_use_at_end = INT64_MAX},
      // What the reader predicts: the allocator's bytes in use as before, records' bytes as
      // predicted, the first record at the node's start (and below, outputs as predicted).
      {.item = 5, .missing_outputs = false, .thread_id = 7, .start_ns = base, .end_ns = base + 1,
       .scheduled_ns = base, .bytes_in_use_at_end = INT64_MAX},
      {.item = 6, .missing_outputs = false, .thread_id = 7, .start_ns = base + 2, .end_ns = base + 3,
       .scheduled_ns = base + 1, .bytes_in_use_at_end = INT64_MAX},
      {.item = 7, .missing_outputs = false, .thread_id = 7, .start_ns = base + 4, .end_ns = base + 4,
       .scheduled_ns = base + 4, .bytes_in_use_at_end = 0},
  };
  const std::vector<std::vector<AllocationRecord>> records = {
      {{base + 7, 64}, {base + 8, -64}},
      {{base + 9, int64_t{3} << 40}, {base + 9, -(int64_t{1} << 31)}, {base + 6'000'000'000, 8}},
      {},
      {{INT64_MIN, INT64_MIN}, {INT64_MAX, INT64_MAX}},
      {{base, 0}},
      {{base, 0}, {base + 1, 0}},
      {{base + 2, 0}, {base + 9, -0}},
      {{base + 4, 1}, {base + 5, -1}},
  };
  // Outputs: one of every field's extremes, one as the output before but for its pointer and
  // allocation id (written as those two alone), one not produced, one kept apart.
  using Output = StepStats::RecordedOutput;
  const Output full{.ptr = UINT64_MAX,
                    .allocation_id = INT64_MIN,
                    .requested_bytes = UINT32_MAX,
                    .allocated_bytes = 0,
                    .shape = UINT32_MAX,
                    .allocator = UINT16_MAX,
                    .dtype = DType::kInt64,
                    .flags = Output::kSingleReference};
  Output moved = full;
  moved.ptr = 0;
  moved.allocation_id = INT64_MAX;
  Output kept_apart{.ptr = 64, .allocation_id = 3, .requested_bytes = 8, .allocated_bytes = 8, .shape = 0,
                    .allocator = 0, .dtype = DType::kFloat32, .flags = Output::kKeptApart};
  auto fields_of = [](const Output& o) {
    return std::tuple(o.ptr, o.allocation_id, o.requested_bytes, o.allocated_bytes, o.shape, static_cast<int>(o.dtype),
                      int{o.flags});
  };
  // Then outputs as the output before but for an allocation id the next one and a pointer the
  // one two outputs back, alone (the node says so: none is written) and with other outputs;
  // either alone, and the id's wrap from INT64_MAX to INT64_MIN.
  auto after = [](Output o, uint64_t ptr, int64_t id) {
    o.ptr = ptr;
    o.allocation_id = id;
    return o;
  };
  const std::vector<std::vector<Output>> outputs = {
      {full, moved, Output{}},
      {},
      {kept_apart},
      {moved, moved},
      {full},
      {after(full, 0, INT64_MIN + 1)},                                                  // both predicted
      {after(full, 12345, INT64_MIN + 2), after(full, 0, 7), after(full, 12345, 8)},  // id; pointer; both
      {after(full, 1, INT64_MAX), after(full, 12345, INT64_MIN), Output{}}};
  st.reserve_recorded(8);  // too little: the writer grows the stream
  StepStats::RecordedWriter writer = st.write_recorded(13);
  for (size_t k = 0; k < nodes.size(); ++k)
    writer.add(nodes[k], records[k].data(), records[k].size(), outputs[k].data(), outputs[k].size());
  writer.close();
  EXPECT_EQ(st.num_recorded_nodes(), nodes.size());
  EXPECT_EQ(st.num_recorded_records(), 14u);
  auto names = std::make_shared<StepStats::PlanNames>();  // none read: the entries are not made
  names->set_state(StepStats::PlanNames::kMade);
  st.set_recorded(names, StepStats::intern("cpu"), 0);  // a step recorded, and not read, is copied as it is
  const StepStats copy = st;
  for (const StepStats* read : std::initializer_list<const StepStats*>{&st, &copy}) {
    StepStats::RecordedReader reader(*read);
    Node node;
    size_t num_records = 0, num_outputs = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      ASSERT_TRUE(reader.next(node, num_records, num_outputs)) << k;
      EXPECT_EQ(node.item, nodes[k].item) << k;
      EXPECT_EQ(node.missing_outputs, nodes[k].missing_outputs) << k;
      EXPECT_EQ(node.thread_id, nodes[k].thread_id) << k;
      EXPECT_EQ(node.start_ns, nodes[k].start_ns) << k;
      EXPECT_EQ(node.end_ns, nodes[k].end_ns) << k;
      EXPECT_EQ(node.scheduled_ns, nodes[k].scheduled_ns) << k;
      EXPECT_EQ(node.bytes_in_use_at_end, nodes[k].bytes_in_use_at_end) << k;
      ASSERT_EQ(num_records, records[k].size()) << k;
      for (const AllocationRecord& want : records[k]) {
        const AllocationRecord got = reader.record();
        EXPECT_EQ(got.alloc_ns, want.alloc_ns) << k;
        EXPECT_EQ(got.alloc_bytes, want.alloc_bytes) << k;
      }
      ASSERT_EQ(num_outputs, outputs[k].size()) << k;
      for (const Output& want : outputs[k]) {
        Output got{};
        reader.output(got);
        EXPECT_EQ(got.allocator, want.allocator) << k;
        EXPECT_EQ(got.kept_apart(), want.kept_apart()) << k;
        if (!want.allocator && !want.kept_apart()) continue;  // not produced: nothing else is kept
        EXPECT_EQ(fields_of(got), fields_of(want)) << k;
      }
    }
    EXPECT_FALSE(reader.next(node, num_records, num_outputs));
  }

  // A chain of small ops as the executor records it (the item after the node before's, each
  // node 50 ns after the one before and 20 ns long, ready 10 ns before it starts, on one thread,
  // the allocator's bytes in use the same; a record of its output's 32 bytes at its start, and
  // one of their free at the next node's end; its output of the next allocation id, in the
  // buffer of the output two before, as the allocator hands back two buffers in turn): after
  // the first two nodes, each is its head, three times in a byte each and its free's time in two.
  StepStats small;
  small.base_ns = base;
  StepStats::RecordedWriter w = small.write_recorded(100);
  for (uint32_t i = 0; i < 100; ++i) {
    const int64_t start = base + 50 * (i + 1);
    const AllocationRecord chain_records[] = {{start, 32}, {start + 70, -32}};
    const StepStats::RecordedOutput output{.ptr = 4096 + 64 * uint64_t{i % 2},
                                           .allocation_id = i,
                                           .requested_bytes = 32,
                                           .allocated_bytes = 32,
                                           .shape = 5,
                                           .allocator = 1,
                                           .dtype = DType::kFloat32,
                                           .flags = 0};
    w.add({.item = i, .missing_outputs = false, .thread_id = 0, .start_ns = start, .end_ns = start + 20,
           .scheduled_ns = start - 10, .bytes_in_use_at_end = 32},
          chain_records, 2, &output, 1);
  }
  w.close();
  // The first node also says its bytes in use and its counts of records and outputs, its
  // records' bytes (the free's, as predicted from the first, in a byte), and its output whole:
  // seven fields, its pointer (4096 after 0) in two bytes. The second's output says its pointer
  // (64 after the first's, in two bytes).
  EXPECT_EQ(small.num_recorded_bytes(), 98u * (1 + 3 + 2) + (1 + 3 + 1 + 2 + 1 + (2 + 1) + 8) + (1 + 3 + 2 + 3));
}

// What a step recorded (as StepStatsBuilder::finish writes it) is made node entries on the first
// read: fed nodes first, then the recorded nodes with their outputs and memory figures; a node's
// allocation records out of time order (frees made on other threads) are sorted.
TEST(StepStats, RecordedNodesAreMadeEntriesOnTheFirstRead) {
  StepStats st;
  st.reuse_for_step();
  st.reserve(0, 0, 3);
  StepStats::RecordedOutput outputs[3];  // x's, a's and b's
  for (int slot = 0; slot < 3; ++slot) {
    NodeOutput out;
    out.tensor_description.dtype = DType::kInt32;
    out.tensor_description.shape = Shape{slot + 1};
    out.tensor_description.allocation_description = {.requested_bytes = 4 * (slot + 1),
                                                     .allocated_bytes = 64,
                                                     .allocator_name = "cpu",
                                                     .allocation_id = 10 + slot,
                                                     .has_single_reference = slot == 1,
                                                     .ptr = 4096u * static_cast<unsigned>(slot + 1)};
    st.record_output(outputs[slot], out, true);  // each the output 0 of its node
  }
  st.base_ns = 1;
  const AllocationRecord a_records[] = {{30, -8}, {10, 8}};  // a's output, freed after b ran, listed first
  const AllocationRecord b_records[] = {{20, 4}};
  auto names = std::make_shared<StepStats::PlanNames>();
  names->items = {{"a", "Op", "a = Op(x)", 1, 1, 1, 0}, {"b", "Op", "b = Op(a)", 2, 2, 1, 0}};
  names->fed = {{"x", "Placeholder", "x = Placeholder()", 0, 0, 1, 0}};
  names->devices = {StepStats::intern("/cpu:0")};
  names->set_state(StepStats::PlanNames::kMade);
  StepStats::RecordedWriter writer = st.write_recorded(3);
  writer.add_fed(&outputs[0], 1);
  writer.add({.item = 0, .missing_outputs = false, .thread_id = 7, .start_ns = 5, .end_ns = 15, .scheduled_ns = 2,
              .bytes_in_use_at_end = 8},
             a_records, 2, &outputs[1], 1);
  writer.add({.item = 1, .missing_outputs = false, .thread_id = 7, .start_ns = 16, .end_ns = 20, .scheduled_ns = 15,
              .bytes_in_use_at_end = 12},
             b_records, 1, &outputs[2], 1);
  writer.close();
  st.set_recorded(names, StepStats::intern("cpu"), 3);
  EXPECT_FALSE(st.empty());
  // A byte each of the fed count, a's head and seven fields (its item, 0, is the one after none),
  // b's head and six (its item and thread are a's after and a's), and the three records' two
  // fields; the three outputs whole (seven fields, two bytes for a pointer 4096 on, up to three
  // for a shape's index), less than a RecordedOutput each.
  EXPECT_EQ(st.held_bytes(), st.num_recorded_bytes());
  EXPECT_GE(st.num_recorded_bytes(), 1 + 8 + 7 + 3 * 2 + 3 * 8);
  EXPECT_LE(st.num_recorded_bytes(), 1 + 8 + 7 + 3 * 2 + 3 * 10);

  const StepStats& read = st;
  ASSERT_EQ(read.dev_stats().size(), 1u);
  EXPECT_EQ(read.dev_stats()[0].device, "/cpu:0");
  const auto& nodes = read.dev_stats()[0].node_stats;
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].node_name, "x");
  EXPECT_EQ(nodes[0].all_start_ns, 1);
  EXPECT_EQ(nodes[0].thread_id, 3u);
  EXPECT_EQ(nodes[0].output[0].tensor_description.shape, Shape{1});
  const NodeExecStats& a = nodes[1];
  EXPECT_EQ(a.node_name, "a");
  EXPECT_EQ(a.timeline_label, "a = Op(x)");
  EXPECT_EQ(a.node_id, 1);
  EXPECT_EQ(a.scheduled_ns, 2);
  EXPECT_EQ(a.all_start_ns, 5);
  EXPECT_EQ(a.all_end_rel_ns, 10);
  EXPECT_EQ(a.thread_id, 7u);
  ASSERT_EQ(a.output.size(), 1u);
  const TensorDescription& a_out = a.output[0].tensor_description;
  EXPECT_EQ(a_out.shape, Shape{2});
  EXPECT_EQ(a_out.dtype, DType::kInt32);
  EXPECT_EQ(a_out.allocation_description.requested_bytes, 8);
  EXPECT_EQ(a_out.allocation_description.allocated_bytes, 64);
  EXPECT_EQ(a_out.allocation_description.allocator_name, "cpu");
  EXPECT_EQ(a_out.allocation_description.allocation_id, 11);
  EXPECT_TRUE(a_out.allocation_description.has_single_reference);
  EXPECT_EQ(a_out.allocation_description.ptr, 8192u);
  ASSERT_EQ(a.memory.size(), 1u);
  EXPECT_EQ(a.memory[0].allocator_name, "cpu");
  ASSERT_EQ(a.memory[0].allocation_records.size(), 2u);
  EXPECT_EQ(a.memory[0].allocation_records[0].alloc_ns, 10);  // in time order
  EXPECT_EQ(a.memory[0].allocation_records[1].alloc_ns, 30);
  EXPECT_EQ(a.memory[0].total_bytes, 8);
  EXPECT_EQ(a.memory[0].peak_bytes, 8);
  EXPECT_EQ(a.memory[0].live_bytes, 0);
  EXPECT_EQ(a.memory[0].allocator_bytes_in_use, 8);
  const NodeExecStats& b = nodes[2];
  EXPECT_EQ(b.output[0].tensor_description.shape, Shape{3});
  EXPECT_EQ(b.memory[0].live_bytes, 4);
  EXPECT_EQ(b.memory[0].allocator_bytes_in_use, 12);
}

// What a step records of an output (32 bytes while it runs, a few in the recorded stream) names
// its shape and allocator by the process's index of them: shapes of any rank read back whole; an output of 4 GiB or more, and a fed
// tensor (whose slot need not be its place), are kept apart whole; an output the kernel did not
// produce is left out of its node's. In a copy too.
TEST(StepStats, RecordedOutputsReadBackWholeAndLeaveOutTheMissing) {
  StepStats st;
  st.reuse_for_step();
  const std::vector<Shape> shapes = {Shape{}, Shape{2, 3, 4, 5}, Shape{1, 2, 3, 4, 5}, Shape{int64_t{1} << 33, 2},
                                     Shape{7, 6, 5, 4, 3, 2, 1, 9}, Shape{0}, Shape{5, 1 << 28}};
  const size_t n = shapes.size() + 1;  // and one not produced, in the middle
  std::vector<StepStats::RecordedOutput> outputs(n + 1);  // and the fed x's
  std::vector<NodeOutput> described;
  for (size_t i = 0; i < n; ++i) {
    if (i == 2) {  // as the executor marks an output the kernel did not produce
      outputs[i] = {};
      continue;
    }
    NodeOutput& out = described.emplace_back();
    out.slot = static_cast<int32_t>(i);
    out.tensor_description.dtype = i % 2 ? DType::kInt64 : DType::kFloat32;
    out.tensor_description.shape = shapes[described.size() - 1];
    const bool huge = i + 1 == n;  // 5 GiB
    out.tensor_description.allocation_description = {.requested_bytes = huge ? int64_t{5} << 30 : int64_t(4 * i),
                                                     .allocated_bytes = huge ? int64_t{5} << 30 : 64,
                                                     .allocator_name = "gpu_bfc",
                                                     .allocation_id = int64_t{1} << 40 | int64_t(i),
                                                     .has_single_reference = i % 2 == 1,
                                                     .ptr = uint64_t{1} << 47 | 64 * i};
    st.record_output(outputs[i], out, true);
  }
  NodeOutput fed;
  fed.slot = 2;  // output 2 of x, alone fed
  fed.tensor_description.shape = Shape{3};
  fed.tensor_description.allocation_description = {.requested_bytes = 12, .allocated_bytes = 64,
                                                   .allocator_name = "cpu", .allocation_id = 1,
                                                   .has_single_reference = false, .ptr = 4096};
  st.record_output(outputs[n], fed, false);
  EXPECT_EQ(outputs[0].allocator, StepStats::allocator_index("gpu_bfc"));  // one per name
  EXPECT_EQ(StepStats::allocator_name(outputs[0].allocator), "gpu_bfc");
  EXPECT_EQ(outputs[1].shape, StepStats::intern_shape(Shape{2, 3, 4, 5})->index);  // one per shape
  for (size_t i = 0; i + 1 < n; ++i) EXPECT_FALSE(outputs[i].kept_apart()) << i;
  EXPECT_TRUE(outputs[n - 1].kept_apart());
  EXPECT_TRUE(outputs[n].kept_apart());

  auto names = std::make_shared<StepStats::PlanNames>();
  names->items = {{"a", "Op", "a = Op()", 0, 0, static_cast<int32_t>(n), 0}};
  names->fed = {{"x", "Placeholder", "x = Placeholder()", 1, static_cast<int32_t>(n), 1, 0}};
  names->devices = {StepStats::intern("/cpu:0")};
  names->set_state(StepStats::PlanNames::kMade);
  record_one_node(st,
                  {.item = 0, .missing_outputs = true, .thread_id = 7, .start_ns = 5, .end_ns = 15, .scheduled_ns = 2,
                   .bytes_in_use_at_end = 0},
                  std::span(outputs).first(n), std::span(outputs).subspan(n));
  st.set_recorded(names, StepStats::intern("cpu"), 3);
  const StepStats copy = st;
  auto expect_same = [](const NodeOutput& x, const NodeOutput& y) {
    EXPECT_EQ(x.slot, y.slot);
    const TensorDescription &a = x.tensor_description, &b = y.tensor_description;
    EXPECT_EQ(a.dtype, b.dtype) << x.slot;
    EXPECT_EQ(a.shape, b.shape) << x.slot << ": " << a.shape.to_string();
    const AllocationDescription &p = a.allocation_description, &q = b.allocation_description;
    EXPECT_EQ(p.requested_bytes, q.requested_bytes) << x.slot;
    EXPECT_EQ(p.allocated_bytes, q.allocated_bytes) << x.slot;
    EXPECT_EQ(p.allocator_name, q.allocator_name) << x.slot;
    EXPECT_EQ(p.allocation_id, q.allocation_id) << x.slot;
    EXPECT_EQ(p.has_single_reference, q.has_single_reference) << x.slot;
    EXPECT_EQ(p.ptr, q.ptr) << x.slot;
  };
  for (const StepStats* read : std::initializer_list<const StepStats*>{&st, &copy}) {
    ASSERT_EQ(read->dev_stats().size(), 1u);
    const auto& nodes = read->dev_stats()[0].node_stats;
    ASSERT_EQ(nodes.size(), 2u);
    ASSERT_EQ(nodes[0].output.size(), 1u);
    expect_same(nodes[0].output[0], fed);
    const auto& produced = nodes[1].output;
    ASSERT_EQ(produced.size(), described.size());
    for (size_t k = 0; k < described.size(); ++k) expect_same(produced[k], described[k]);
  }
}

// A plan's first traced step may end before its names are made (on the thread beside it): the
// first read waits for them, the copy's too; where making them failed, reading says so, and
// reads once they are made again.
TEST(StepStats, TheFirstReadWaitsForThePlansNames) {
  auto names = std::make_shared<StepStats::PlanNames>();
  auto record = [&](StepStats& st) {
    st.reuse_for_step();
    st.reserve(1, 0, 0);
    const StepStats::RecordedOutput not_produced{};
    record_one_node(st,
                    {.item = 0, .missing_outputs = false, .thread_id = 7, .start_ns = 5, .end_ns = 15,
                     .scheduled_ns = 2, .bytes_in_use_at_end = 0},
                    std::span(&not_produced, 1));
    st.set_recorded(names, StepStats::intern("cpu"), 3);
  };
  StepStats failed;
  record(failed);
  names->set_state(StepStats::PlanNames::kFailed);
  try {
    (void)failed.dev_stats();
    ADD_FAILURE() << "read without names";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("making its plan's names failed"), std::string::npos) << e.what();
  }

  names->set_state(StepStats::PlanNames::kMaking);  // made again, by another thread
  StepStats st;
  record(st);
  const StepStats copy = st;
  std::atomic<bool> made{false};
  std::thread maker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    names->items = {{"a", "Op", "a = Op()", 1, 0, 1, 0}};
    names->devices = {StepStats::intern("/cpu:0")};
    made.store(true);
    names->set_state(StepStats::PlanNames::kMade);
  });
  for (const StepStats* read : std::initializer_list<const StepStats*>{&st, &copy, &failed}) {
    ASSERT_EQ(read->dev_stats().size(), 1u);
    EXPECT_TRUE(made.load());
    ASSERT_EQ(read->dev_stats()[0].node_stats.size(), 1u);
    EXPECT_EQ(read->dev_stats()[0].node_stats[0].timeline_label, "a = Op()");
  }
  maker.join();
}

TEST(StepStats, ViewsThatNodesHoldFollowTheArraysWhenTheyGrow) {
  StepStats st;
  st.reserve(1, 0, 0);  // memory of its own: it takes no spare arrays (another test's)
  st.dev_stats().push_back({StepStats::intern("/device:CPU:0"), {}});
  auto& nodes = st.dev_stats()[0].node_stats;
  nodes.reserve(1000);
  for (int32_t i = 0; i < 1000; ++i) {
    NodeOutput out;
    out.slot = i;
    nodes.emplace_back().output = st.store_outputs(std::span(&out, 1));  // grows the array ~10 times
  }
  for (int32_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(nodes[i].output.size(), 1u);
    EXPECT_EQ(nodes[i].output[0].slot, i);
    EXPECT_EQ(nodes[i].output.data(), st.stored_outputs(i, 1).data());  // rebased, not dangling
  }
}

}  // namespace
}  // namespace stepscope

namespace stepscope {
namespace {

TEST(StepStatsInternTest, EqualStringsShareOneCopyAndOutliveTheirSource) {
  std::string source = "scope/node_with_a_long_name_past_the_small_string_buffer";
  const std::string_view first = StepStats::intern(source);
  source[0] = 'X';  // the interned copy is the table's, not the caller's
  EXPECT_EQ(first, "scope/node_with_a_long_name_past_the_small_string_buffer");
  EXPECT_EQ(StepStats::intern("scope/node_with_a_long_name_past_the_small_string_buffer").data(), first.data());
  // An empty string is a view with data(), as readers test data() for "set".
  EXPECT_NE(StepStats::intern("").data(), nullptr);
  EXPECT_TRUE(StepStats::intern("").empty());
}

// A plan's labels (tens of MB) are interned by giving the string itself: kept, not copied,
// and hashed on a sample, which must still tell apart strings that differ outside it.
TEST(StepStatsInternTest, ABigStringGivenIsKeptAsItIsAndSharedByEqualOnes) {
  static int run = 0;  // new strings on every run of the test in this process
  std::string big(1 << 20, 'x');
  big += "/run " + std::to_string(run++);
  const std::string copy = big;
  const char* buffer = big.data();
  const std::string_view kept = StepStats::intern(std::move(big));
  EXPECT_EQ(kept.data(), buffer);
  EXPECT_EQ(kept, copy);
  EXPECT_EQ(StepStats::intern(copy).data(), buffer);  // an equal string, given as a view
  std::string other = copy;
  other[100000] = 'y';  // 1,696 bytes into its 4 KiB: outside the sampled 64
  const std::string_view apart = StepStats::intern(std::move(other));
  EXPECT_NE(apart.data(), buffer);
  EXPECT_EQ(apart[100000], 'y');
  EXPECT_EQ(kept[100000], 'x');
  // A small string given is copied as any other.
  std::string small = "intern_given/small " + std::to_string(run);
  const std::string_view small_kept = StepStats::intern(std::move(small));
  EXPECT_EQ(small_kept, "intern_given/small " + std::to_string(run));
}

TEST(StepStatsInternTest, EqualStringsShareOneCopyThroughTheTablesGrowth) {
  // Enough new strings to grow the table several times, with repeats, and big strings (a plan's
  // labels are interned as one string) between small ones.
  const std::string_view before = StepStats::intern("intern_growth/node_7");
  std::vector<std::string_view> first(3000);
  for (int i = 0; i < 5000; ++i) {
    const std::string name = "intern_growth/node_" + std::to_string(i % 3000);
    const std::string_view interned = StepStats::intern(name);
    EXPECT_EQ(interned, name);
    if (i < 3000)
      first[i] = interned;
    else
      EXPECT_EQ(interned.data(), first[i % 3000].data()) << name;
    if (i % 1000 == 0) {
      const std::string big(100000 + i, static_cast<char>('a' + i / 1000));
      const std::string_view big_interned = StepStats::intern(big);
      EXPECT_EQ(big_interned, big);
      EXPECT_EQ(StepStats::intern(std::string(big)).data(), big_interned.data());
    }
  }
  EXPECT_EQ(first[7].data(), before.data());
  for (int i = 0; i < 3000; ++i) EXPECT_EQ(first[i], "intern_growth/node_" + std::to_string(i));
}

}  // namespace
}  // namespace stepscope
