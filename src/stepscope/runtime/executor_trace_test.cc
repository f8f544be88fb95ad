// What a traced step (RunOptions FULL_TRACE) records: every node's times, thread, outputs and
// memory, fed tensors, several threads, failing steps. (Copies, reuse and the memory a step is
// written into: executor_trace_memory_test.cc.)
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
