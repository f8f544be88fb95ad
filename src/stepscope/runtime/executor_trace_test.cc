// What a traced step (RunOptions FULL_TRACE) records: every node's times, thread, outputs and
// memory, fed tensors, StepStats copies and reuse, several threads, failing steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <span>
#include <thread>
#include <utility>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/runtime/executor_test_util.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

using namespace stepscope::testing;

TEST(Executor, FullTraceRecordsEveryNodeWithOutputsAndMemory) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{8});
  auto a = add_one(s.with_op_name("a"), x);
  auto b = add_one(s.with_op_name("b"), a);
  auto c = add(s.with_op_name("c"), a, b);
  Session sess(g);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  opts.output_partition_graphs = true;
  RunMetadata md;
  auto out = sess.run({{x, Tensor(DType::kFloat32, Shape{8})}}, {c}, {}, opts, &md);
  ASSERT_EQ(md.step_stats.dev_stats().size(), 1u);
  const auto& dev = md.step_stats.dev_stats()[0];
  EXPECT_EQ(dev.device, "/job:localhost/replica:0/task:0/device:CPU:0");
  ASSERT_EQ(dev.node_stats.size(), 4u);
  EXPECT_EQ(dev.node_stats[0].node_name, "x");  // fed
  const auto nodes = ran_nodes(dev);
  EXPECT_EQ(nodes[0].node_name, "a");
  EXPECT_EQ(nodes[0].timeline_label, "a = TestAddOne(x)");
  EXPECT_EQ(nodes[2].timeline_label, "c = TestAdd(a, b)");
  for (const auto& ns : nodes) {
    EXPECT_GT(ns.all_start_ns, 0);
    EXPECT_LE(ns.op_start_rel_ns, ns.op_end_rel_ns);
    EXPECT_LE(ns.op_end_rel_ns, ns.all_end_rel_ns);
    ASSERT_EQ(ns.output.size(), 1u);
    EXPECT_EQ(ns.output[0].tensor_description.shape, (Shape{8}));
    EXPECT_EQ(ns.output[0].tensor_description.allocation_description.requested_bytes, 32);
    EXPECT_EQ(ns.output[0].tensor_description.allocation_description.allocator_name, "cpu");
    ASSERT_EQ(ns.memory.size(), 1u);
    EXPECT_EQ(ns.memory[0].total_bytes, 32);
    EXPECT_EQ(ns.memory[0].allocation_records.front().alloc_bytes, 32);
  }
  // a and b are freed after c ran (their records end with a free); c is fetched, still live.
  EXPECT_EQ(nodes[0].memory[0].allocation_records.size(), 2u);
  EXPECT_EQ(nodes[0].memory[0].allocation_records.back().alloc_bytes, -32);
  EXPECT_EQ(nodes[2].memory[0].live_bytes, 32);
  ASSERT_EQ(md.partition_graphs.size(), 1u);
  EXPECT_EQ(md.partition_graphs[0].node_names.size(), 3u);

  RunMetadata untraced;
  sess.run({{x, Tensor(DType::kFloat32, Shape{8})}}, {c}, {}, {}, &untraced);
  EXPECT_TRUE(untraced.step_stats.empty());
}

// Two clock readings per node: all_start = op_start, op_end = all_end; scheduled is the end of
// the node that made it ready (the step's start for roots); nodes are in start order.
TEST(Executor, FullTraceTimestampsFollowTheDataflow) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  Output y = add_one_chain(s, x, 20);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  sess.run({{x, Tensor(DType::kFloat32, Shape{4})}}, {y}, {}, opts, &md);
  const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), 20u);
  EXPECT_EQ(nodes[0].scheduled_ns, md.step_stats.base_ns);
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].op_type, "TestAddOne");
    EXPECT_EQ(nodes[i].op_start_rel_ns, 0);
    EXPECT_EQ(nodes[i].op_end_rel_ns, nodes[i].all_end_rel_ns);
    EXPECT_GE(nodes[i].all_start_ns, md.step_stats.base_ns);
    EXPECT_EQ(nodes[i].thread_id, current_thread_id());
    if (i > 0) {
      EXPECT_EQ(nodes[i].scheduled_ns, nodes[i - 1].all_start_ns + nodes[i - 1].all_end_rel_ns);
      EXPECT_GE(nodes[i].all_start_ns, nodes[i].scheduled_ns);
    }
    EXPECT_EQ(nodes[i].all_start_micros(), nodes[i].all_start_ns / 1000);
  }
}

// What each node allocated, its peak, what is still live, and the allocator's whole use.
TEST(Executor, FullTraceMemoryFigures) {
  // Allocates a temporary of 100 floats, frees it, then its output (same shape as the input).
  static const OpDef temp_op{
      .name = "TestWithTemp",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            {
              Tensor temp(DType::kFloat32, Shape{100}, c.allocator());
              temp.flat<float>()[0] = 1;
            }
            Tensor& y = c.allocate_output(0, DType::kFloat32, c.input(0).shape());
            y.flat<float>()[0] = c.input(0).flat<float>()[0];
          },
      .doc = "a test op",
  };
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{8});
  auto t = s.with_op_name("t").add_node(temp_op, {x}, {}, CallSite::current())->output(0);
  auto a = add_one(s.with_op_name("a"), t);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  Tensor feed(DType::kFloat32, Shape{8});
  const int64_t in_use_before = cpu_allocator()->bytes_in_use();
  sess.run({{x, feed}}, {a}, {}, opts, &md);
  const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), 2u);
  const NodeExecStats& tn = nodes[0];
  ASSERT_EQ(tn.node_name, "t");
  ASSERT_EQ(tn.memory.size(), 1u);
  const AllocatorMemoryUsed& m = tn.memory[0];
  EXPECT_EQ(m.allocator_name, "cpu");
  EXPECT_EQ(m.total_bytes, 400 + 32);
  EXPECT_EQ(m.peak_bytes, 400);  // the temporary is gone before the output is made
  EXPECT_EQ(m.live_bytes, 0);    // the output was freed after `a` read it
  ASSERT_EQ(m.allocation_records.size(), 4u);
  EXPECT_EQ(m.allocation_records[0].alloc_bytes, 400);
  EXPECT_EQ(m.allocation_records[1].alloc_bytes, -400);
  EXPECT_EQ(m.allocation_records[2].alloc_bytes, 32);
  EXPECT_EQ(m.allocation_records[3].alloc_bytes, -32);
  // Stamped with the node's own readings: its start inside the kernel, then the end of `a`,
  // which released the output.
  EXPECT_EQ(m.allocation_records[0].alloc_ns, tn.all_start_ns);
  EXPECT_EQ(m.allocation_records[2].alloc_ns, tn.all_start_ns);
  EXPECT_EQ(m.allocation_records[3].alloc_ns, nodes[1].all_start_ns + nodes[1].all_end_rel_ns);
  // When t finished, the allocator held what it held before plus t's output (with the header
  // every block carries).
  EXPECT_EQ(m.allocator_bytes_in_use, in_use_before + 64 + 32);
  ASSERT_EQ(nodes[1].memory.size(), 1u);
  const AllocatorMemoryUsed& am = nodes[1].memory[0];
  EXPECT_EQ(am.live_bytes, 32);  // fetched: still live when the step ended
  EXPECT_EQ(am.peak_bytes, 32);
  EXPECT_EQ(am.allocator_bytes_in_use, in_use_before + 2 * (64 + 32));  // t's output is freed after a ends
  ASSERT_EQ(tn.output.size(), 1u);
  const auto& ad = tn.output[0].tensor_description.allocation_description;
  EXPECT_EQ(ad.requested_bytes, 32);
  EXPECT_EQ(ad.allocated_bytes, 128);  // header + data, in the 128-byte class
  EXPECT_GT(ad.allocation_id, 0);
  EXPECT_EQ(ad.allocator_name, "cpu");
}

// A node that allocates from two allocators gets one memory entry for each.
TEST(Executor, FullTraceMemoryPerAllocator) {
  class CountingAllocator final : public Allocator {
   public:
    CountingAllocator() : Allocator("test_pool") {}

   protected:
    void* raw_allocate(size_t bytes, size_t alignment) override {
      return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
    }
    void raw_deallocate(void* ptr, size_t) override { std::free(ptr); }
  };
  static CountingAllocator pool;
  static const OpDef two_pools_op{
      .name = "TestTwoPools",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            Tensor a(DType::kFloat64, Shape{4}, &pool);
            Tensor b(DType::kFloat64, Shape{2}, &pool);
            c.set_output(0, Tensor(DType::kFloat32, c.input(0).shape(), c.allocator()));
          },
      .doc = "a test op",
  };
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{3});
  auto t = s.with_op_name("t").add_node(two_pools_op, {x}, {}, CallSite::current())->output(0);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  sess.run({{x, Tensor(DType::kFloat32, Shape{3})}}, {t}, {}, opts, &md);
  const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), 1u);
  const auto& ns = nodes[0];
  ASSERT_EQ(ns.memory.size(), 2u);
  const AllocatorMemoryUsed& p = ns.memory[0].allocator_name == "test_pool" ? ns.memory[0] : ns.memory[1];
  const AllocatorMemoryUsed& c = ns.memory[0].allocator_name == "test_pool" ? ns.memory[1] : ns.memory[0];
  EXPECT_EQ(p.allocator_name, "test_pool");
  EXPECT_EQ(p.total_bytes, 48);
  EXPECT_EQ(p.peak_bytes, 48);
  EXPECT_EQ(p.live_bytes, 0);
  ASSERT_EQ(p.allocation_records.size(), 4u);  // +32 +16 -16 -32
  EXPECT_EQ(p.allocation_records[1].alloc_bytes, 16);
  EXPECT_EQ(p.allocation_records[2].alloc_bytes, -16);
  EXPECT_EQ(p.allocator_bytes_in_use, 0);  // after its last event, everything was freed
  EXPECT_EQ(c.allocator_name, "cpu");
  EXPECT_EQ(c.total_bytes, 12);
  EXPECT_EQ(c.live_bytes, 12);
  ASSERT_EQ(c.allocation_records.size(), 1u);
}

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
TEST(Executor, ATracedStepsNodeEntriesAreMadeOnFirstRead) {
  RunMetadata md, copied_md, twice;
  {
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
    Output y = add_one_chain(s, x, 50);
    Session sess(g);
    RunOptions opts;
    opts.trace_level = TraceLevel::kFullTrace;
    sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {y}, {}, opts, &md);
    sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {y}, {}, opts, &copied_md);
    sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {y}, {}, opts, &twice);
    sess.run({{x, Tensor(DType::kFloat32, Shape{2})}}, {y}, {}, opts, &twice);  // over one never read
  }
  StepStats moved = std::move(md.step_stats);
  EXPECT_FALSE(moved.empty());
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

// Tracing with several threads: every node is recorded once, frees made on other threads are
// sorted into their node's records.
TEST(Executor, FullTraceOnSeveralThreads) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  Output y = x;
  for (int i = 0; i < 10; ++i) y = add(s, add_one(s, y), add_one(s, y));
  Session sess(g, {.inter_op_threads = 4});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  for (int rep = 0; rep < 20; ++rep) {
    RunMetadata md;
    sess.run({{x, Tensor(DType::kFloat32, Shape{4})}}, {y}, {}, opts, &md);
    EXPECT_EQ(md.step_stats.dev_stats().at(0).node_stats.at(0).all_start_ns, md.step_stats.base_ns);  // fed x
    const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
    ASSERT_EQ(nodes.size(), 30u);
    std::set<std::string_view> names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      names.insert(nodes[i].node_name);
      if (i > 0) {
        EXPECT_LE(nodes[i - 1].all_start_ns, nodes[i].all_start_ns);
      }
      ASSERT_EQ(nodes[i].memory.size(), 1u);
      const auto& recs = nodes[i].memory[0].allocation_records;
      EXPECT_EQ(recs.front().alloc_bytes, 16);
      for (size_t j = 1; j < recs.size(); ++j) EXPECT_LE(recs[j - 1].alloc_ns, recs[j].alloc_ns);
    }
    EXPECT_EQ(names.size(), 30u);
  }
}

// Traced and untraced runs at once from several threads of a multi-threaded session: each
// traced step records exactly its own nodes; tensors of one step freed by another's threads are
// attributed correctly or not at all.
TEST(Executor, ConcurrentTracedRuns) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  Output y = x;
  for (int i = 0; i < 8; ++i) y = add(s, add_one(s, y), add_one(s, y));
  Session sess(g, {.inter_op_threads = 3});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      RunOptions opts;
      if (t % 2 == 0) opts.trace_level = TraceLevel::kFullTrace;
      for (int rep = 0; rep < 25; ++rep) {
        RunMetadata md;
        sess.run({{x, Tensor(DType::kFloat32, Shape{4})}}, {y}, {}, opts, &md);
        if (t % 2 != 0) continue;
        const auto& all = md.step_stats.dev_stats().at(0).node_stats;
        if (all.size() != 25u || all[0].node_name != "x") {
          wrong++;
          continue;
        }
        for (const auto& ns : std::span(all).subspan(1)) {
          if (ns.memory.size() != 1 || ns.memory[0].allocation_records.front().alloc_bytes != 16) wrong++;
          if (ns.memory[0].total_bytes != 16) wrong++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A big plan's names (labels, op types) are made by its first traced step on a core the
// executor leaves idle, beside the step (one inter-op thread here; ThreadSanitizer runs this
// test). Two first traced steps at once: one makes them, the other waits for them.
TEST(Executor, ABigPlansFirstTracedStepsNameItsNodesBesideThem) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  Output y = add_one_chain(s, x, 10000);
  Session sess(g, {.inter_op_threads = 1});
  const FeedList feeds{{x, Tensor(DType::kFloat32, Shape{4})}};
  sess.run(feeds, {y});  // the plan, untraced: no names yet
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  opts.output_partition_graphs = true;
  std::vector<RunMetadata> md(2);
  std::thread other([&] { sess.run(feeds, {y}, {}, opts, &md[1]); });
  sess.run(feeds, {y}, {}, opts, &md[0]);
  other.join();
  for (const RunMetadata& m : md) {
    const auto nodes = ran_nodes(m.step_stats.dev_stats().at(0));
    ASSERT_EQ(nodes.size(), 10000u);
    EXPECT_EQ(nodes[0].timeline_label, std::string(nodes[0].node_name) + " = TestAddOne(x)");
    EXPECT_EQ(nodes[9999].timeline_label,
              std::string(nodes[9999].node_name) + " = TestAddOne(" + std::string(nodes[9998].node_name) + ")");
    EXPECT_EQ(nodes[9999].op_type, "TestAddOne");
    ASSERT_EQ(m.partition_graphs.size(), 1u);
    EXPECT_EQ(m.partition_graphs[0].node_names.size(), 10000u);
  }
}

// Traced steps of a big plan into RunMetadata that all stay alive: each step's arrays are new
// memory (no spare arrays to be had), which a core the step leaves idle maps while it runs
// (map_new_room). Every step is whole, each in its own arrays; one step with the spare arrays
// (the kept ones gone) is too.
TEST(Executor, TracedStepsIntoKeptRunMetadataOfABigPlanAreWhole) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{3});
  Output y = add_one_chain(s, x, 10000);
  Session sess(g, {.inter_op_threads = 1});
  const FeedList feeds{{x, Tensor(DType::kFloat32, Shape{3})}};
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  auto check = [](const RunMetadata& md) {
    const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
    ASSERT_EQ(nodes.size(), 10000u);
    for (const auto& ns : nodes) {
      ASSERT_EQ(ns.output.size(), 1u);
      ASSERT_EQ(ns.output[0].tensor_description.shape, (Shape{3}));
      ASSERT_EQ(ns.memory.size(), 1u);
      ASSERT_EQ(ns.memory[0].allocation_records[0].alloc_bytes, 12);
    }
    EXPECT_EQ(nodes[9999].timeline_label,
              std::string(nodes[9999].node_name) + " = TestAddOne(" + std::string(nodes[9998].node_name) + ")");
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

// A session told that steps will be traced has a plan's first traced step's memory made ahead:
// a spare StepStats set as big as a step of the plan (what the next fresh RunMetadata takes),
// made beside the plan's first step or while the plan is built. A session not told makes none.
TEST(Executor, APlanOfASessionThatExpectsTracedStepsHasASpareSetMadeAhead) {
  StepStats drained;
  drained.reuse_for_step();  // takes what earlier tests left, if anything
  AddOneChain chain(2000);
  const auto& [g, y, feeds] = std::tie(chain.g, chain.y, chain.feeds);
  auto spare_after_a_first_step = [&](bool expect) {
    {
      Session sess(g, {.inter_op_threads = 1});
      if (expect) sess.expect_traced_steps();
      EXPECT_EQ(sess.expects_traced_steps(), expect);
      sess.run(feeds, {y});
    }  // the session waits for what it makes beside its steps
    StepStats probe;
    probe.reuse_for_step();
    return probe.reserved_sizes();
  };
  EXPECT_EQ(spare_after_a_first_step(false).memory, 0u);
  const StepStats::ArraySizes made = spare_after_a_first_step(true);
  EXPECT_GE(made.outputs, 2001u);  // a slot a node, and the fed x
  EXPECT_GE(made.memory, 2000u);
  EXPECT_GE(made.records, 4000u);
  ASSERT_EQ(made.node_stats.size(), 1u);
  EXPECT_GE(made.node_stats[0], 2001u);
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
      const auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
      ASSERT_EQ(nodes.size(), 3000u);
      EXPECT_EQ(nodes[2999].timeline_label,
                std::string(nodes[2999].node_name) + " = TestAddOne(" + std::string(nodes[2998].node_name) + ")");
      for (const auto& ns : nodes) ASSERT_EQ(ns.memory.size(), 1u);
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
  AddOneChain chain(2000);
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
  for (const RunMetadata& md : kept) EXPECT_EQ(ran_nodes(md.step_stats.dev_stats().at(0)).size(), 2000u);
  StepStats next;
  bool spare_wanted = false;
  next.reuse_for_step(&spare_wanted);
  next.outputs_for_step(1);
  EXPECT_GE(next.reserved_sizes().outputs, 2001u);
  EXPECT_TRUE(spare_wanted);
}

// The thread that makes a big plan's names then faults in what the step's end writes. A first
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

// A traced step that fails still describes what ran, the failing node without outputs.
TEST(Executor, FullTraceOfAFailingStep) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
  auto a = add_one(s.with_op_name("a"), x);
  auto bad = s.with_op_name("bad").add_node(fail_negative_op(), {a}, {}, CallSite::current())->output(0);
  auto after = add_one(s.with_op_name("after"), bad);
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  EXPECT_THROW(sess.run({{x, Tensor::from_vector<float>({-5, 1})}}, {after}, {}, opts, &md), InvalidArgumentError);
  auto nodes = ran_nodes(md.step_stats.dev_stats().at(0));
  ASSERT_EQ(nodes.size(), 2u);  // `after` never ran
  EXPECT_EQ(nodes[0].node_name, "a");
  EXPECT_EQ(nodes[0].output.size(), 1u);
  EXPECT_EQ(nodes[1].node_name, "bad");
  EXPECT_TRUE(nodes[1].output.empty());
  // a's output was freed when the step gave up: its records end with the free.
  ASSERT_EQ(nodes[0].memory.size(), 1u);
  EXPECT_EQ(nodes[0].memory[0].allocation_records.back().alloc_bytes, -8);
  EXPECT_GE(nodes[0].memory[0].allocation_records.back().alloc_ns, nodes[0].all_start_ns);
  // The session is still fine, and so is the next traced step.
  auto ok = sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {after}, {}, opts, &md);
  EXPECT_EQ(ok[0].to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(ran_nodes(md.step_stats.dev_stats().at(0)).size(), 3u);
}

// A traced step records each fed node as TensorFlow records its feeds (_Arg/_Recv nodes): the
// fed tensors as its outputs, at the step's start, lasting nothing, allocating nothing.
TEST(Executor, FullTraceRecordsTheFeeds) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 4});
  auto ids = placeholder(s.with_op_name("ids"), DType::kInt64, Shape{-1});
  auto a = add_one(s.with_op_name("a"), x);
  Session sess(g, {.inter_op_threads = 2});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  opts.output_partition_graphs = true;
  Tensor xs(DType::kFloat32, Shape{3, 4});
  Tensor is(DType::kInt64, Shape{5});
  for (float& v : xs.flat<float>()) v = 1;
  RunMetadata md;
  // ids is fed but nothing reads it: still fed, still recorded.
  auto out = sess.run({{ids, is}, {x, xs}}, {a}, {}, opts, &md);
  EXPECT_EQ(out[0].flat<float>()[11], 2.0f);
  ASSERT_EQ(md.step_stats.dev_stats().size(), 1u);
  const auto& nodes = md.step_stats.dev_stats()[0].node_stats;
  ASSERT_EQ(nodes.size(), 3u);
  // Fed nodes first (by node id), then what ran.
  EXPECT_EQ(nodes[0].node_name, "x");
  EXPECT_EQ(nodes[1].node_name, "ids");
  EXPECT_EQ(nodes[2].node_name, "a");
  auto check_fed = [&](const NodeExecStats& ns, const Output& fed, const Tensor& value, std::string_view label) {
    SCOPED_TRACE(std::string(ns.node_name));
    EXPECT_EQ(ns.op_type, "Placeholder");
    EXPECT_EQ(ns.node_id, fed.node->id());
    EXPECT_EQ(ns.timeline_label, label);
    EXPECT_EQ(ns.scheduled_ns, md.step_stats.base_ns);
    EXPECT_EQ(ns.all_start_ns, md.step_stats.base_ns);
    EXPECT_EQ(ns.op_start_rel_ns, 0);
    EXPECT_EQ(ns.op_end_rel_ns, 0);
    EXPECT_EQ(ns.all_end_rel_ns, 0);
    EXPECT_EQ(ns.thread_id, current_thread_id());
    EXPECT_TRUE(ns.memory.empty());
    EXPECT_TRUE(ns.referenced_tensor.empty());
    ASSERT_EQ(ns.output.size(), 1u);
    const NodeOutput& o = ns.output[0];
    EXPECT_EQ(o.slot, 0);
    EXPECT_EQ(o.tensor_description.dtype, value.dtype());
    EXPECT_EQ(o.tensor_description.shape, value.shape());
    const AllocationDescription& ad = o.tensor_description.allocation_description;
    EXPECT_EQ(ad.requested_bytes, value.bytes());
    EXPECT_EQ(ad.allocated_bytes, value.buffer()->allocated_bytes());
    EXPECT_EQ(ad.allocator_name, "cpu");
    EXPECT_EQ(ad.allocation_id, value.buffer()->allocation_id());
    EXPECT_EQ(ad.ptr, reinterpret_cast<uint64_t>(value.raw_data()));
  };
  check_fed(nodes[0], x, xs, "x = Placeholder()");
  check_fed(nodes[1], ids, is, "ids = Placeholder()");
  EXPECT_EQ(nodes[0].output[0].tensor_description.allocation_description.requested_bytes, 48);
  EXPECT_EQ(nodes[1].output[0].tensor_description.allocation_description.requested_bytes, 40);
  EXPECT_GE(nodes[2].all_start_ns, nodes[0].all_start_ns);
  // Partition graphs list what the step executed, as before.
  ASSERT_EQ(md.partition_graphs.size(), 1u);
  EXPECT_EQ(md.partition_graphs[0].node_names, (std::vector<std::string_view>{"a"}));

  // The same plan traced again records the new feeds' shapes.
  sess.run({{ids, Tensor(DType::kInt64, Shape{2})}, {x, Tensor(DType::kFloat32, Shape{7, 4})}}, {a}, {}, opts, &md);
  ASSERT_EQ(md.step_stats.dev_stats().at(0).node_stats.size(), 3u);
  EXPECT_EQ(md.step_stats.dev_stats()[0].node_stats[0].output[0].tensor_description.shape, (Shape{7, 4}));
  EXPECT_EQ(md.step_stats.dev_stats()[0].node_stats[1].output[0].tensor_description.shape, (Shape{2}));

  // Untraced, nothing is recorded, with the same plan.
  RunMetadata untraced;
  RunOptions partitions;
  partitions.output_partition_graphs = true;
  out = sess.run({{ids, is}, {x, xs}}, {a}, {}, partitions, &untraced);
  EXPECT_EQ(out[0].flat<float>()[0], 2.0f);
  EXPECT_TRUE(untraced.step_stats.empty());
  EXPECT_EQ(untraced.partition_graphs.at(0).node_names, (std::vector<std::string_view>{"a"}));
  EXPECT_EQ(sess.run({{ids, is}, {x, xs}}, {a}, {}, {}, nullptr)[0].flat<float>()[5], 2.0f);
}

// A fed intermediate: its producers are pruned, it does not run, and it is recorded once, as a
// fed node (its label names no inputs: it read none).
TEST(Executor, FullTraceOfAFedIntermediate) {
  Graph g;
  Scope s(g);
  auto c = constant(s.with_op_name("c"), Tensor::from_vector<float>({1, 2}));
  auto a = add_one(s.with_op_name("a"), c);
  auto b = add_one(s.with_op_name("b"), a);
  Session sess(g);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  g_runs = 0;
  auto out = sess.run({{a, Tensor::from_vector<float>({10, 20})}}, {b}, {}, opts, &md);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{11, 21}));
  EXPECT_EQ(g_runs.load(), 1);  // b only
  const auto& nodes = md.step_stats.dev_stats().at(0).node_stats;
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].node_name, "a");
  EXPECT_EQ(nodes[0].op_type, "TestAddOne");
  EXPECT_EQ(nodes[0].timeline_label, "a = TestAddOne()");
  EXPECT_EQ(nodes[0].all_end_rel_ns, 0);
  EXPECT_TRUE(nodes[0].memory.empty());
  ASSERT_EQ(nodes[0].output.size(), 1u);
  EXPECT_EQ(nodes[0].output[0].tensor_description.shape, (Shape{2}));
  EXPECT_EQ(nodes[1].node_name, "b");
  EXPECT_EQ(nodes[1].output[0].tensor_description.shape, (Shape{2}));
  // Fetching the fed tensor itself: nothing runs, the feed is still recorded.
  out = sess.run({{a, Tensor::from_vector<float>({5, 6})}}, {a}, {}, opts, &md);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{5, 6}));
  ASSERT_EQ(md.step_stats.dev_stats().at(0).node_stats.size(), 1u);
  EXPECT_EQ(md.step_stats.dev_stats()[0].node_stats[0].node_name, "a");
}

// Feeds of outputs other than 0: one entry for the node, each fed output with its slot. A node
// one of whose outputs is fed but which runs for another is recorded once, as the node that ran.
TEST(Executor, FullTraceOfFedOutputsOfAMultiOutputNode) {
  Graph g;
  Scope s(g);
  auto c = constant(s.with_op_name("c"), Tensor::from_vector<float>({1, 2}));
  Node* pair = s.with_op_name("pair").add_node(pair_op(), {c}, {}, CallSite::current());
  auto u = add_one(s.with_op_name("u"), pair->output(0));
  auto v = add_one(s.with_op_name("v"), pair->output(1));
  Session sess(g, {.inter_op_threads = 1});
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;

  {  // Output 1 fed, only v fetched: pair is pruned.
    RunMetadata md;
    g_runs = 0;
    auto out = sess.run({{pair->output(1), Tensor::from_vector<float>({7, 8})}}, {v}, {}, opts, &md);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{8, 9}));
    EXPECT_EQ(g_runs.load(), 1);  // v only
    const auto& nodes = md.step_stats.dev_stats().at(0).node_stats;
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[0].node_name, "pair");
    EXPECT_EQ(nodes[0].node_id, pair->id());
    ASSERT_EQ(nodes[0].output.size(), 1u);
    EXPECT_EQ(nodes[0].output[0].slot, 1);
    EXPECT_EQ(nodes[0].output[0].tensor_description.shape, (Shape{2}));
    EXPECT_EQ(nodes[0].output[0].tensor_description.allocation_description.requested_bytes, 8);
    EXPECT_EQ(nodes[1].node_name, "v");
  }
  {  // Both outputs fed (in reverse order): one entry, outputs in slot order.
    RunMetadata md;
    const Tensor one = Tensor::from_vector<float>({7, 8}), zero = Tensor::from_vector<float>({3, 4});
    auto out = sess.run({{pair->output(1), one}, {pair->output(0), zero}}, {u, v}, {}, opts, &md);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4, 5}));
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{8, 9}));
    const auto& nodes = md.step_stats.dev_stats().at(0).node_stats;
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0].node_name, "pair");
    ASSERT_EQ(nodes[0].output.size(), 2u);
    EXPECT_EQ(nodes[0].output[0].slot, 0);
    EXPECT_EQ(nodes[0].output[0].tensor_description.allocation_description.ptr,
              reinterpret_cast<uint64_t>(zero.raw_data()));
    EXPECT_EQ(nodes[0].output[1].slot, 1);
    EXPECT_EQ(nodes[0].output[1].tensor_description.allocation_description.ptr,
              reinterpret_cast<uint64_t>(one.raw_data()));
  }
  {  // Output 1 fed, u fetched: pair runs for output 0 and is recorded once, as it ran.
    RunMetadata md;
    g_runs = 0;
    const Tensor fed = Tensor::from_vector<float>({7, 8});
    auto out = sess.run({{pair->output(1), fed}}, {u, v}, {}, opts, &md);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3, 4}));
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{8, 9}));
    EXPECT_EQ(g_runs.load(), 3);  // pair, u, v
    const auto& nodes = md.step_stats.dev_stats().at(0).node_stats;
    ASSERT_EQ(nodes.size(), 4u);  // c, pair, u, v
    int pairs = 0;
    for (const auto& ns : nodes) {
      if (ns.node_name != "pair") continue;
      ++pairs;
      EXPECT_FALSE(ns.memory.empty());  // it ran
      ASSERT_EQ(ns.output.size(), 2u);
      EXPECT_NE(ns.output[1].tensor_description.allocation_description.ptr,  // what it computed
                reinterpret_cast<uint64_t>(fed.raw_data()));
    }
    EXPECT_EQ(pairs, 1);
  }
}

// Fed nodes on a device no executed node is on get that device's entry in the step.
TEST(Executor, FullTraceOfAFeedOnAnotherDevice) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_device("/cpu:1").with_op_name("x"), DType::kFloat32, Shape{2});
  auto a = add_one(s.with_device("/cpu:0").with_op_name("a"), x);
  Session sess(g);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  opts.output_partition_graphs = true;
  RunMetadata md;
  sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {a}, {}, opts, &md);
  ASSERT_EQ(md.step_stats.dev_stats().size(), 2u);
  EXPECT_EQ(md.step_stats.dev_stats()[0].device, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(md.step_stats.dev_stats()[1].device, "/job:localhost/replica:0/task:0/device:CPU:1");
  ASSERT_EQ(md.step_stats.dev_stats()[1].node_stats.size(), 1u);
  EXPECT_EQ(md.step_stats.dev_stats()[1].node_stats[0].node_name, "x");
  ASSERT_EQ(md.step_stats.dev_stats()[0].node_stats.size(), 1u);
  EXPECT_EQ(md.step_stats.dev_stats()[0].node_stats[0].node_name, "a");
  ASSERT_EQ(md.partition_graphs.size(), 1u);  // what ran
}

// Every fetch fed: nothing runs, and the partition graph is the fed nodes' (TensorFlow returns
// its graph of _Arg and _Retval nodes then, not none).
TEST(Executor, PartitionGraphsWhenEveryFetchIsFed) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_device("/cpu:1").with_op_name("x"), DType::kFloat32, Shape{2});
  add_one(s.with_op_name("a"), x);
  Session sess(g);
  RunOptions opts;
  opts.output_partition_graphs = true;
  RunMetadata md;
  const auto out = sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {x}, {}, opts, &md);
  EXPECT_EQ(out.at(0).flat<float>()[1], 2.0f);
  ASSERT_EQ(md.partition_graphs.size(), 1u);
  EXPECT_EQ(md.partition_graphs[0].device, "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_EQ(md.partition_graphs[0].node_names, (std::vector<std::string_view>{"x"}));
  // Traced too.
  opts.trace_level = TraceLevel::kFullTrace;
  sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {x}, {}, opts, &md);
  ASSERT_EQ(md.partition_graphs.size(), 1u);
  EXPECT_EQ(md.partition_graphs[0].node_names, (std::vector<std::string_view>{"x"}));
}

}  // namespace
}  // namespace stepscope
