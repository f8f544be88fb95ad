// The memory a traced step's StepStats is written into and what it holds after the step:
// copies and moves, node entries made on the first read, arrays reused from one RunMetadata to
// the next, kept RunMetadata, memory made ahead for a session that expects traced steps, and a
// big plan's names made beside its first traced step.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "stepscope/ops/array_ops.h"
#include "stepscope/runtime/executor_test_util.h"
#include "stepscope/runtime/internal/executor_plan.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

using namespace stepscope::testing;

// Copies rebase the views onto their own arrays; moves keep them; everything outlives the
// session and the graph (names are interned).
TEST(Executor, StepStatsCopiesAndMovesKeepTheirViewsValid) {
  RunMetadata md;
  {
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
    auto a = add_one(s.with_op_name("a"), x);
    auto b = add_one(s.with_op_name("b"), a);
    Session sess(g);
    RunOptions opts;
    opts.trace_level = TraceLevel::kFullTrace;
    opts.output_partition_graphs = true;
    sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {b}, {}, opts, &md);
  }
  StepStats copy = md.step_stats;
  ASSERT_EQ(copy.dev_stats()[0].node_stats.size(), 3u);
  // The fed x's output too.
  EXPECT_NE(copy.dev_stats()[0].node_stats[0].output.data(), md.step_stats.dev_stats()[0].node_stats[0].output.data());
  EXPECT_EQ(copy.dev_stats()[0].node_stats[0].output[0].tensor_description.shape, (Shape{2}));
  const auto orig_nodes = ran_nodes(md.step_stats.dev_stats()[0]);
  const auto copy_nodes = ran_nodes(copy.dev_stats()[0]);
  ASSERT_EQ(copy_nodes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(copy_nodes[i].output.data(), orig_nodes[i].output.data());
    EXPECT_NE(copy_nodes[i].memory.data(), orig_nodes[i].memory.data());
    EXPECT_NE(copy_nodes[i].memory[0].allocation_records.data(), orig_nodes[i].memory[0].allocation_records.data());
    EXPECT_EQ(copy_nodes[i].output[0].tensor_description.shape, (Shape{2}));
    EXPECT_EQ(copy_nodes[i].memory[0].allocation_records[0].alloc_bytes, 8);
    EXPECT_EQ(copy_nodes[i].node_name.data(), orig_nodes[i].node_name.data());  // interned: shared
  }
  EXPECT_EQ(copy_nodes[0].node_name, "a");
  EXPECT_EQ(copy_nodes[1].timeline_label, "b = TestAddOne(a)");
  EXPECT_EQ(copy.dev_stats()[0].device, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(md.partition_graphs.at(0).node_names.at(1), "b");

  // The copy stands alone: destroying the original leaves it intact (ASan checks this).
  const void* copy_outputs = copy_nodes[0].output.data();
  md.clear();
  EXPECT_EQ(copy.dev_stats()[0].node_stats[1].output.data(), copy_outputs);
  EXPECT_EQ(copy.dev_stats()[0].node_stats[1].output[0].slot, 0);

  StepStats assigned;
  assigned = copy;
  EXPECT_EQ(assigned.dev_stats()[0].node_stats[2].memory[0].allocation_records[0].alloc_bytes, 8);
  EXPECT_NE(assigned.dev_stats()[0].node_stats[2].memory.data(), copy.dev_stats()[0].node_stats[2].memory.data());
  EXPECT_EQ(assigned.dev_stats()[0].node_stats[0].output[0].tensor_description.shape, (Shape{2}));

  const void* memory = copy.dev_stats()[0].node_stats[2].memory.data();
  StepStats moved = std::move(copy);
  EXPECT_EQ(moved.dev_stats()[0].node_stats[2].memory.data(), memory);
  EXPECT_EQ(moved.dev_stats()[0].node_stats[2].memory[0].live_bytes, 8);
}

// A traced step's node entries are made on the first read of dev_stats(), after the session
// and graph are gone, by whichever of several readers comes first; a copy or move of a step not
// yet read, and a step traced over one never read, hold what they should.
// One traced step of a chain of 50 nodes after a fed x into each of `into`, in order; the
// session and the graph are gone when it returns.
void trace_chain_steps(std::initializer_list<RunMetadata*> into) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
  Output y = add_one_chain(s, x, 50);
  Session sess(g);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  for (RunMetadata* md : into) sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {y}, {}, opts, md);
}

TEST(Executor, ATracedStepsNodeEntriesAreMadeOnFirstRead) {
  RunMetadata md, copied_md, twice;
  trace_chain_steps({&md, &copied_md, &twice, &twice});  // the last over one never read
  StepStats moved = std::move(md.step_stats);
  EXPECT_FALSE(moved.empty());
  // Its nodes and their two allocation records each in a few bytes (fixed fields took 48).
  EXPECT_GE(moved.num_recorded_nodes(), 50u);
  EXPECT_EQ(moved.num_recorded_records(), 2 * moved.num_recorded_nodes() - 1);
  EXPECT_LT(moved.num_recorded_bytes(), 32 * moved.num_recorded_nodes());
  const StepStats& read = moved;
  std::atomic<int> ready{0};
  const std::vector<DeviceStepStats>* seen[2] = {};
  auto reader = [&](int i) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    seen[i] = &read.dev_stats();
  };
  std::thread other(reader, 1);
  reader(0);
  other.join();
  EXPECT_EQ(seen[0], seen[1]);
  auto check = [](const StepStats& st) {
    ASSERT_EQ(st.dev_stats().size(), 1u);
    const auto& nodes = st.dev_stats()[0].node_stats;
    ASSERT_EQ(nodes.size(), 51u);
    EXPECT_EQ(nodes[0].node_name, "x");  // fed: first
    int64_t last_start = 0;
    for (size_t i = 1; i < nodes.size(); ++i) {
      const NodeExecStats& ns = nodes[i];
      EXPECT_EQ(ns.op_type, "TestAddOne");
      EXPECT_GE(ns.all_start_ns, st.base_ns);
      EXPECT_GE(ns.all_start_ns, last_start);  // start order
      last_start = ns.all_start_ns;
      ASSERT_EQ(ns.output.size(), 1u);
      EXPECT_EQ(ns.output[0].tensor_description.shape, (Shape{2}));
      ASSERT_EQ(ns.memory.size(), 1u);
      EXPECT_EQ(ns.memory[0].allocator_name, "cpu");
      EXPECT_EQ(ns.memory[0].allocation_records.front().alloc_bytes, 8);
    }
    EXPECT_EQ(nodes.back().timeline_label.rfind(nodes.back().node_name, 0), 0u);
    EXPECT_NE(nodes.back().timeline_label.find(" = TestAddOne("), std::string_view::npos);
  };
  check(read);

  // A copy of a step not yet read is of what it recorded, made node entries in each when read,
  // even while another thread reads the original.
  StepStats copy;
  std::atomic<int> both{0};
  std::thread copier([&] {
    both.fetch_add(1);
    while (both.load() < 2) {
    }
    copy = copied_md.step_stats;
  });
  both.fetch_add(1);
  while (both.load() < 2) {
  }
  (void)std::as_const(copied_md.step_stats).dev_stats();
  copier.join();
  check(copy);
  check(copied_md.step_stats);
  EXPECT_NE(copy.dev_stats()[0].node_stats[1].output.data(),
            copied_md.step_stats.dev_stats()[0].node_stats[1].output.data());

  check(twice.step_stats);
  EXPECT_EQ(twice.step_stats.dev_stats()[0].node_stats[0].all_start_ns, twice.step_stats.base_ns);
}

// A step's node entries, dropped, free their memory and are made again alike on the next read
// (a flight recorder's ring after a dump), the session and graph gone; entries that cannot be
// made again as they are stay.
TEST(Executor, ATracedStepsDroppedNodeEntriesAreMadeAgainAlike) {
  RunMetadata md;
  trace_chain_steps({&md});
  const StepStats& read = md.step_stats;
  auto entries = [&] {
    std::vector<std::tuple<std::string, int64_t, int64_t, Shape, int64_t>> seen;
    for (const NodeExecStats& ns : read.dev_stats()[0].node_stats)
      seen.emplace_back(ns.node_name, ns.all_start_ns, ns.all_end_rel_ns, ns.output[0].tensor_description.shape,
                        ns.memory.empty() ? -1 : ns.memory[0].allocation_records.front().alloc_bytes);
    return seen;
  };
  // A copy of the step unread holds its recorded stream and nothing more, as a ring's slot does.
  StepStats copy = md.step_stats;
  const size_t recorded = copy.held_bytes();
  EXPECT_LE(copy.reserved_bytes(), recorded);
  (void)std::as_const(copy).dev_stats();
  EXPECT_GT(copy.reserved_bytes(), 10 * recorded);
  copy.drop_node_entries();
  EXPECT_EQ(copy.held_bytes(), recorded);
  EXPECT_LE(copy.reserved_bytes(), recorded);

  const auto first = entries();
  ASSERT_EQ(first.size(), 51u);
  // A copy of a step read is of its stream too.
  EXPECT_EQ(StepStats(md.step_stats).held_bytes(), recorded);
  md.step_stats.drop_node_entries();
  EXPECT_EQ(entries(), first);
  md.step_stats.drop_node_entries();  // twice: as once
  EXPECT_EQ(entries(), first);

  // Read through the non-const dev_stats(), the entries may have been changed: they stay.
  (void)md.step_stats.dev_stats();
  const NodeExecStats* kept = read.dev_stats()[0].node_stats.data();
  md.step_stats.drop_node_entries();
  EXPECT_EQ(read.dev_stats()[0].node_stats.data(), kept);
  // A copy of a dropped step is of the recorded step again, its entries made alike.
  StepStats again = copy;
  EXPECT_EQ(again.held_bytes(), recorded);
  ASSERT_EQ(std::as_const(again).dev_stats()[0].node_stats.size(), 51u);
  EXPECT_EQ(std::as_const(again).dev_stats()[0].node_stats[50].node_name, std::get<0>(first[50]));
  // Entries made by hand are not the stream's: they stay.
  StepStats by_hand;
  NodeExecStats n;
  n.node_name = "n";
  by_hand.dev_stats().push_back({StepStats::intern("/cpu:0"), {n}});
  by_hand.drop_node_entries();
  ASSERT_EQ(std::as_const(by_hand).dev_stats().size(), 1u);
  EXPECT_EQ(std::as_const(by_hand).dev_stats()[0].node_stats[0].node_name, "n");
}

// A RunMetadata per step (as hooks do): the arrays of the one that went away are reused by the
// next traced step, and what a kept copy holds is its own.
TEST(Executor, FreshRunMetadataPerStepReusesArraysSafely) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{3});
  Output y = add_one_chain(s, x, 800);  // big enough for the arrays to be kept
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  StepStats first;
  for (int step = 0; step < 4; ++step) {
    auto md = std::make_unique<RunMetadata>();
    sess.run({{x, Tensor(DType::kFloat32, Shape{3})}}, {y}, {}, opts, md.get());
    const auto nodes = ran_nodes(md->step_stats.dev_stats().at(0));
    ASSERT_EQ(nodes.size(), 800u);
    for (const auto& ns : nodes) {
      ASSERT_EQ(ns.output.size(), 1u);
      EXPECT_EQ(ns.output[0].tensor_description.shape, (Shape{3}));
      ASSERT_EQ(ns.memory.size(), 1u);
      EXPECT_EQ(ns.memory[0].allocation_records[0].alloc_bytes, 12);
    }
    EXPECT_EQ(nodes.back().memory[0].live_bytes, 12);
    if (step == 0) first = md->step_stats;
    if (step == 2) md->clear();  // by move-assignment: gives the arrays away too
  }
  const auto kept = ran_nodes(first.dev_stats().at(0));
  ASSERT_EQ(kept.size(), 800u);
  EXPECT_EQ(kept[10].output[0].tensor_description.shape, (Shape{3}));
  EXPECT_EQ(kept[10].memory[0].allocation_records.size(), 2u);
  EXPECT_EQ(kept[10].memory[0].allocation_records[1].alloc_bytes, -12);
}

// Building a StepStats by hand: views into its arrays stay valid as they grow.
TEST(Executor, StepStatsBuiltByHand) {
  StepStats stats;
  auto& dev = stats.dev_stats().emplace_back();
  dev.device = StepStats::intern(std::string("/device:CPU:0"));
  std::vector<AllocationRecord> records{{1000, 16}, {2000, -16}};
  for (int i = 0; i < 100; ++i) {
    NodeExecStats& ns = dev.node_stats.emplace_back();
    ns.node_name = StepStats::intern("n" + std::to_string(i));
    NodeOutput out;
    out.slot = i;
    ns.output = stats.store_outputs(std::span(&out, 1));
    AllocatorMemoryUsed used;
    used.allocator_name = StepStats::intern("cpu");
    used.allocation_records = records;
    ns.memory = stats.store_memory(std::span(&used, 1));
    const int64_t ids[] = {i, i + 1};
    ns.memory_stats.persistent_tensor_alloc_ids = stats.store_alloc_ids(ids);
    AllocationDescription ref;
    ref.allocation_id = i;
    ns.referenced_tensor = stats.store_referenced(std::span(&ref, 1));
  }
  records.assign(2, {});  // the StepStats has its own copy
  for (int i = 0; i < 100; ++i) {
    const NodeExecStats& ns = dev.node_stats[i];
    EXPECT_EQ(ns.node_name, "n" + std::to_string(i));
    EXPECT_EQ(ns.output[0].slot, i);
    EXPECT_EQ(ns.memory[0].allocation_records[1].alloc_bytes, -16);
    EXPECT_EQ(ns.memory[0].allocation_records[1].alloc_micros(), 2);
    EXPECT_EQ(ns.memory_stats.persistent_tensor_alloc_ids[1], i + 1);
    EXPECT_EQ(ns.referenced_tensor[0].allocation_id, i);
  }
  StepStats copy(stats);
  EXPECT_EQ(copy.dev_stats()[0].node_stats[99].memory_stats.persistent_tensor_alloc_ids[0], 99);
  EXPECT_NE(copy.dev_stats()[0].node_stats[99].referenced_tensor.data(),
            stats.dev_stats()[0].node_stats[99].referenced_tensor.data());
}

// A chain of n TestAddOne nodes from a fed x of 3 floats.
struct AddOneChain {
  explicit AddOneChain(int n)
      : x(placeholder(scope.with_op_name("x"), DType::kFloat32, Shape{3})),
        y(add_one_chain(scope, x, n)),
        feeds{{x, Tensor(DType::kFloat32, Shape{3})}} {}
  Graph g;
  Scope scope{g};
  Output x, y;
  FeedList feeds;
};

// A traced step of add_one_chain(x, n): every node ran, each labelled with its input.
void expect_whole_chain(const StepStats& stats, size_t n) {
  const auto nodes = ran_nodes(stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), n);
  EXPECT_EQ(nodes[0].timeline_label, std::string(nodes[0].node_name) + " = TestAddOne(x)");
  const NodeExecStats& last = nodes[n - 1];
  EXPECT_EQ(last.timeline_label,
            std::string(last.node_name) + " = TestAddOne(" + std::string(nodes[n - 2].node_name) + ")");
  EXPECT_EQ(last.op_type, "TestAddOne");
}

// A big plan's names (labels, op types) are made on a core the executor leaves idle, beside its
// first traced step (one inter-op thread here; ThreadSanitizer runs this test), once the thread
// there has mapped the step's new memory. Two first traced steps at once: one starts that
// thread, the other asks it to map its memory too; their readers wait for the names.
TEST(Executor, ABigPlansFirstTracedStepsNameItsNodesBesideThem) {
  AddOneChain chain(10000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  Session sess(g, {.inter_op_threads = 1});
  sess.run(feeds, {y});  // the plan, untraced: no names yet
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  opts.output_partition_graphs = true;
  std::vector<RunMetadata> md(2);
  std::thread other([&] { sess.run(feeds, {y}, {}, opts, &md[1]); });
  sess.run(feeds, {y}, {}, opts, &md[0]);
  other.join();
  for (const RunMetadata& m : md) {
    expect_whole_chain(m.step_stats, 10000);
    ASSERT_EQ(m.partition_graphs.size(), 1u);
    EXPECT_EQ(m.partition_graphs[0].node_names.size(), 10000u);
  }
}

// A big plan's first traced step does not wait for its names: the first read of its node
// entries does, even after the session has gone (the plan waits for the thread that makes
// them). The traced steps that come meanwhile, each into a new RunMetadata, have that thread
// map their memory first; every one is whole.
TEST(Executor, ABigPlansFirstTracedStepsAreReadOnceItsNamesAreMade) {
  AddOneChain chain(20000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  std::vector<RunMetadata> md(4);
  {
    Session sess(g, {.inter_op_threads = 1});
    sess.run(feeds, {y});  // the plan, untraced: no names yet
    for (RunMetadata& m : md) sess.run(feeds, {y}, {}, opts, &m);
  }
  for (const RunMetadata& m : md) {
    expect_whole_chain(m.step_stats, 20000);
    const auto nodes = ran_nodes(m.step_stats.dev_stats().at(0));
    ASSERT_EQ(nodes[19999].memory.size(), 1u);
    EXPECT_EQ(nodes[19999].memory[0].total_bytes, 12);
    ASSERT_EQ(nodes[19999].output.size(), 1u);
    EXPECT_EQ(nodes[19999].output[0].tensor_description.shape, Shape{3});
  }
}

// Traced steps of a big plan into RunMetadata that all stay alive: each step's arrays are new
// memory (no spare arrays to be had), which a core the step leaves idle maps while it runs
// (map_room_and_name). Every step is whole, each in its own arrays; one step with the spare arrays
// (the kept ones gone) is too.
TEST(Executor, TracedStepsIntoKeptRunMetadataOfABigPlanAreWhole) {
  AddOneChain chain(10000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  auto check = [](const RunMetadata& md) {
    expect_whole_chain(md.step_stats, 10000);
    for (const auto& ns : ran_nodes(md.step_stats.dev_stats().at(0))) {
      ASSERT_EQ(ns.output.size(), 1u);
      ASSERT_EQ(ns.output[0].tensor_description.shape, (Shape{3}));
      ASSERT_EQ(ns.memory.size(), 1u);
      ASSERT_EQ(ns.memory[0].allocation_records[0].alloc_bytes, 12);
    }
  };
  {
    std::vector<RunMetadata> kept(4);
    for (RunMetadata& md : kept) sess.run(feeds, {y}, {}, opts, &md);
    for (size_t i = 0; i < kept.size(); ++i) {
      SCOPED_TRACE("kept step " + std::to_string(i));
      check(kept[i]);
      if (i > 0) {
        EXPECT_NE(kept[i].step_stats.dev_stats()[0].node_stats.data(),
                  kept[i - 1].step_stats.dev_stats()[0].node_stats.data());
      }
    }
  }
  RunMetadata after;  // takes the arrays the kept ones gave away
  sess.run(feeds, {y}, {}, opts, &after);
  check(after);
}

// A session told that steps will be traced has a plan's first traced step's memory made ahead:
// a spare StepStats set as big as a step of the plan (what the next fresh RunMetadata takes),
// made beside the plan's first step or while the plan is built. A session not told has it made
// for a plan of up to 16,384 nodes where a core is left idle, and for no bigger plan.
TEST(Executor, APlanOfASessionThatExpectsTracedStepsHasASpareSetMadeAhead) {
  // Each probe takes the spare set and is kept: one that went away would leave its arrays as
  // the spare set again (see ~StepStats), for the next probe to find.
  std::deque<StepStats> probes;
  auto take_spare = [&] {
    probes.emplace_back().reuse_for_step();
    return probes.back().reserved_sizes();
  };
  take_spare();  // what earlier tests left, if anything
  auto spare_after_a_first_step = [&](int nodes, bool expect) {
    AddOneChain chain(nodes);
    {
      Session sess(chain.g, {.inter_op_threads = 1});
      if (expect) sess.expect_traced_steps();
      EXPECT_EQ(sess.expects_traced_steps(), expect);
      sess.run(chain.feeds, {chain.y});
    }  // the session waits for what it makes beside its steps
    return take_spare();
  };
  EXPECT_EQ(spare_after_a_first_step(20000, false).memory, 0u);
  for (int nodes : {2000, 20000}) {
    SCOPED_TRACE(nodes);
    const StepStats::ArraySizes made = spare_after_a_first_step(nodes, true);
    // The stream the step writes: its nodes, two records a node, an output a slot (a node's and
    // the fed x's).
    EXPECT_GE(made.recorded_bytes, StepStats::recorded_bytes_estimate(nodes, 2u * nodes, nodes + 1u));
    EXPECT_GE(made.outputs, nodes + 1u);  // the output descriptions, when read
    EXPECT_GE(made.memory, nodes + 0u);
    EXPECT_GE(made.records, 2u * nodes);
    ASSERT_EQ(made.node_stats.size(), 1u);
    EXPECT_GE(made.node_stats[0], nodes + 1u);
  }
  const StepStats::ArraySizes untold = spare_after_a_first_step(2000, false);
  if (std::thread::hardware_concurrency() < 2) {
    EXPECT_EQ(untold.memory, 0u);  // no core left idle: none made on the caller's time
  } else {
    EXPECT_GE(untold.outputs, 2001u);
    ASSERT_EQ(untold.node_stats.size(), 1u);
    EXPECT_GE(untold.node_stats[0], 2001u);
  }
  // Nor where the session's threads take every core.
  AddOneChain chain(2000);
  {
    Session busy(chain.g, {.inter_op_threads = static_cast<int>(std::thread::hardware_concurrency())});
    busy.run(chain.feeds, {chain.y});
  }
  EXPECT_EQ(take_spare().memory, 0u);
}

// A traced step that starts while its plan's memory is being made ahead stops that (the set
// half made is dropped) and makes its own: the two would fight for the kernel's page faults.
// A plan whose first step is untraced has the set made whole, as before.
TEST(Executor, ATracedStepStopsItsPlansPreparationAndMakesItsOwnMemory) {
  std::deque<StepStats> probes;  // kept: see the test above
  auto take_spare = [&] {
    probes.emplace_back().reuse_for_step();
    return probes.back().reserved_sizes();
  };
  take_spare();  // what earlier tests left, if anything
  AddOneChain chain(20000);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata traced;
  traced.step_stats.reserve_recorded(1);  // memory of its own: it neither takes a spare set nor asks for one
  // The preparation is held until the step has stopped it (10 s at most: one never stopped then
  // makes its set, and the check below fails).
  Executor::Plan::before_preparing_beside = [](const std::atomic<bool>& stopped) {
    for (int ms = 0; ms < 10000 && !stopped.load(); ++ms) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  {
    Session sess(chain.g, {.inter_op_threads = 1});
    sess.expect_traced_steps();
    sess.run(chain.feeds, {chain.y}, {}, opts, &traced);  // the plan is made, its preparation starts, the step too
  }  // the session waits for what it makes beside its steps
  Executor::Plan::before_preparing_beside = nullptr;
  expect_whole_chain(traced.step_stats, 20000);
  const bool made_beside = std::thread::hardware_concurrency() >= 2;  // else made before the step
  EXPECT_EQ(take_spare().memory > 0, !made_beside);
  {
    Session sess(chain.g, {.inter_op_threads = 1});
    sess.expect_traced_steps();
    sess.run(chain.feeds, {chain.y});
  }
  EXPECT_GE(take_spare().memory, 20000u);
}

// Its first traced steps, run right away (racing what is made beside them, and again in a
// session that goes away while it is made), are whole.
TEST(Executor, TheFirstTracedStepsOfASessionThatExpectsThemAreWhole) {
  AddOneChain chain(3000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  for (int round = 0; round < 3; ++round) {
    Session sess(g, {.inter_op_threads = 1});
    sess.expect_traced_steps();
    std::vector<RunMetadata> steps(2);
    for (RunMetadata& md : steps) sess.run(feeds, {y}, {}, opts, &md);
    for (const RunMetadata& md : steps) {
      expect_whole_chain(md.step_stats, 3000);
      for (const auto& ns : ran_nodes(md.step_stats.dev_stats().at(0))) ASSERT_EQ(ns.memory.size(), 1u);
    }
    Session gone(g, {.inter_op_threads = 1});
    gone.expect_traced_steps();
    gone.run(feeds, {y});  // and away, while its plan's memory may still be being made
  }
}

// Steps traced into a new RunMetadata each, kept, with time between them: a core the steps
// leave idle makes the next one's arrays there (a spare set made for such steps, which asks
// for another).
TEST(Executor, StepsTracedIntoKeptRunMetadataHaveTheNextOnesArraysMadeBeside) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: none left idle to make them";
  StepStats drained;
  drained.reuse_for_step();  // takes what earlier tests left, if anything
  // A step's unread arrays over the 64 KiB a spare set must have (its stream, ~6 bytes a node,
  // and an eighth more: at 8,000 nodes too small to be worth a set made ahead).
  AddOneChain chain(12000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  std::vector<RunMetadata> kept(3);
  {
    Session sess(g, {.inter_op_threads = 1});
    for (RunMetadata& md : kept) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // longer than making a set takes
      sess.run(feeds, {y}, {}, opts, &md);
    }
  }  // the session waits for what it makes beside its steps
  for (const RunMetadata& md : kept) EXPECT_EQ(ran_nodes(md.step_stats.dev_stats().at(0)).size(), 12000u);
  StepStats next;
  bool spare_wanted = false;
  next.reuse_for_step(&spare_wanted);
  EXPECT_GE(next.reserved_sizes().recorded_bytes, kept.back().step_stats.num_recorded_bytes());  // a step's
  // and an eighth (the room the next step reserves), not the plan's first estimate (~4x that)
  EXPECT_LE(next.reserved_sizes().recorded_bytes, kept.back().step_stats.num_recorded_bytes() * 5 / 4);
  EXPECT_TRUE(spare_wanted);
}

// The thread that makes a big plan's names first maps what the step writes. A first
// traced step that fails on its last node still records every node that ran, with its memory;
// the next traced step is whole.
TEST(Executor, ABigPlansFirstTracedStepThatFailsRecordsWhatRan) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
  Output chain = add_one_chain(s, x, 10000);
  auto bad = s.with_op_name("bad").add_node(fail_negative_op(), {chain}, {}, CallSite::current())->output(0);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata failed;
  EXPECT_THROW(sess.run({{x, Tensor::from_vector<float>({-20000, 1})}}, {bad}, {}, opts, &failed),
               InvalidArgumentError);
  const auto nodes = ran_nodes(failed.step_stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), 10001u);
  EXPECT_EQ(nodes[0].timeline_label, std::string(nodes[0].node_name) + " = TestAddOne(x)");
  EXPECT_EQ(nodes[10000].node_name, "bad");
  EXPECT_TRUE(nodes[10000].output.empty());
  size_t without_memory = 0;
  for (const auto& ns : nodes.first(10000)) without_memory += ns.memory.size() != 1 || ns.memory[0].total_bytes != 8;
  EXPECT_EQ(without_memory, 0u);
  RunMetadata ok;
  auto out = sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {bad}, {}, opts, &ok);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{10001, 10002}));
  EXPECT_EQ(ran_nodes(ok.step_stats.dev_stats().at(0)).size(), 10001u);
}

}  // namespace
}  // namespace stepscope
