// Executor and Session mechanics with test-local ops (the real op families have their own
// tests): pruning, feeds, fetches, errors from worker threads, concurrency, devices. Tracing:
// executor_trace_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>
#include <span>
#include <thread>

#include "stepscope/testing/error_text.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/control_ops.h"
#include "stepscope/runtime/executor_test_util.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

using namespace stepscope::testing;

TEST(Executor, RunsAChainAndFetchesResults) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
  Output y = add_one_chain(s, x, 100);
  Session sess(g, {.inter_op_threads = 2});
  auto out = sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {y});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{101, 102}));
}

// A kernel that splits 1,000 items of (nominally) 1 ms each: parallel_for cuts them into one
// chunk per intra-op thread. Records how many chunks it ran and on how many threads.
struct SplitRecord {
  std::mutex mutex;
  int chunks = 0;
  int intra_op_threads = 0;
  std::set<std::thread::id> threads;
};
SplitRecord g_split;
const OpDef& split_op() {
  static const OpDef def{
      .name = "TestSplit",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); },
      .kernel =
          [](KernelContext& c) {
            g_split.intra_op_threads = c.intra_op_threads();
            c.parallel_for(1000, 1000000, [](int64_t, int64_t) {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              std::lock_guard<std::mutex> lock(g_split.mutex);
              g_split.chunks++;
              g_split.threads.insert(std::this_thread::get_id());
            });
            c.set_output(0, c.input(0));
          },
      .doc = "a test op",
  };
  return def;
}

TEST(Executor, KernelsSplitOverIntraOpThreadsOnly) {
  struct Case {
    int inter, intra, expected;
  };
  for (Case k : {Case{1, 3, 3}, Case{4, 1, 1}, Case{2, 0, 2}, Case{3, 2, 2}, Case{2, 2, 2}}) {
    SCOPED_TRACE("inter_op_threads " + std::to_string(k.inter) + ", intra_op_threads " + std::to_string(k.intra));
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{1});
    Output y = s.add_node(split_op(), {x}, {}, CallSite::current())->output(0);
    Session sess(g, {.inter_op_threads = k.inter, .intra_op_threads = k.intra});
    g_split.chunks = 0;
    g_split.threads.clear();
    sess.run({{x, Tensor::from_vector<float>({1})}}, {y});
    EXPECT_EQ(g_split.intra_op_threads, k.expected);
    EXPECT_EQ(g_split.chunks, k.expected);
    EXPECT_LE(static_cast<int>(g_split.threads.size()), k.expected);
  }
}

TEST(Executor, NegativeThreadCountsAreRefused) {
  Graph g;
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { Session sess(g, {.inter_op_threads = -1}); }),
              ::testing::HasSubstr("inter_op_threads (-1)"));
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { Session sess(g, {.intra_op_threads = -2}); }),
              ::testing::HasSubstr("intra_op_threads (-2)"));
}

TEST(Executor, PrunesToWhatFetchesNeed) {
  Graph g;
  Scope s(g);
  auto c = constant(s, Tensor::from_vector<float>({1}));
  auto a = add_one(s, c);
  auto unused = add_one(s, add_one(s, c));
  (void)unused;
  Session sess(g, {.inter_op_threads = 1});
  g_runs = 0;
  EXPECT_EQ(sess.run(a).scalar_value<float>(), 2.0f);
  EXPECT_EQ(g_runs.load(), 1);
}

TEST(Executor, FeedingAnIntermediateSkipsItsProducers) {
  Graph g;
  Scope s(g);
  auto c = constant(s, Tensor::from_vector<float>({1}));
  auto a = add_one(s, c);
  auto b = add_one(s, a);
  Session sess(g);
  g_runs = 0;
  EXPECT_EQ(sess.run(b, {{a, Tensor::from_vector<float>({10})}}).scalar_value<float>(), 11.0f);
  EXPECT_EQ(g_runs.load(), 1);
}

TEST(Executor, MissingFeedNamesThePlaceholder) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto y = add_one(s, x);
  Session sess(g);
  try {
    sess.run(y);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(
        e.what(),
        "[Placeholder] x: You must feed a value for placeholder tensor 'x' with dtype float32 and shape [?,3]");
  }
}

TEST(Executor, FeedOfWrongShapeOrDtypeIsRejected) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto y = add_one(s, x);
  Session sess(g);
  EXPECT_THROW(sess.run(y, {{x, Tensor::from_vector<float>({1, 2})}}), InvalidArgumentError);
  EXPECT_THROW(sess.run(y, {{x, Tensor(DType::kInt32, Shape{1, 3})}}), InvalidArgumentError);
  auto ok = sess.run(y, {{x, Tensor::from_vector<float>({1, 2, 3}, Shape{1, 3})}});
  EXPECT_EQ(ok.shape(), (Shape{1, 3}));
}

TEST(Executor, FetchFromAnotherGraphIsRejected) {
  Graph g1, g2;
  Scope s1(g1), s2(g2);
  auto a = constant(s1, 1.0f);
  auto b = constant(s2, 2.0f);
  (void)a;
  Session sess(g1);
  EXPECT_THROW(sess.run(b), InvalidArgumentError);
  EXPECT_THROW(sess.run_by_name({}, {"nope:0"}), NotFoundError);
}

// Issue 12: "a:-1" segfaulted and output(7) of a one-output node aborted in the executor's slot
// table; now each is refused before a plan is built, naming the node, and the session goes on.
TEST(Executor, OutOfRangeOutputIndexIsRejectedAndSessionStaysUsable) {
  Graph g;
  Scope s(g);
  auto a = constant(s.with_op_name("a"), Tensor::from_vector<float>({1}));
  auto b = add_one(s.with_op_name("b"), a);
  Session sess(g, {.inter_op_threads = 2});
  EXPECT_THROW(sess.run_by_name({}, {"a:-1"}), NotFoundError);
  EXPECT_THROW(sess.run_by_name({}, {"a:7"}), NotFoundError);
  for (int index : {7, -1, 1}) {
    std::string fetch_error = error_text<InvalidArgumentError>([&] { sess.run(a.node->output(index)); });
    EXPECT_NE(fetch_error.find("[Const] a: cannot fetch a:" + std::to_string(index)), std::string::npos)
        << fetch_error;
    EXPECT_NE(fetch_error.find("the node has 1 output(s)"), std::string::npos) << fetch_error;
    std::string feed_error = error_text<InvalidArgumentError>(
        [&] { sess.run(b, {{a.node->output(index), Tensor::from_vector<float>({5})}}); });
    EXPECT_NE(feed_error.find("cannot feed a:" + std::to_string(index)), std::string::npos) << feed_error;
  }
  EXPECT_EQ(sess.run(b).scalar_value<float>(), 2.0f);
  EXPECT_EQ(sess.run(b, {{a, Tensor::from_vector<float>({5})}}).scalar_value<float>(), 6.0f);
}

TEST(Executor, KernelErrorOnWorkerIsRaisedAndSessionStaysUsable) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
  // Several parallel branches so the failing node runs on a pool thread at times.
  std::vector<Output> branches;
  for (int i = 0; i < 8; ++i)
    branches.push_back(s.add_node(fail_negative_op(), {add_one(s, x)}, {}, CallSite::current())->output(0));
  Output sum = branches[0];
  for (int i = 1; i < 8; ++i) sum = add(s, sum, branches[i]);
  Session sess(g, {.inter_op_threads = 4});
  for (int rep = 0; rep < 20; ++rep) {
    try {
      sess.run(sum, {{x, Tensor::from_vector<float>({-5, 1})}});
      FAIL();
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("[TestFailNegative] TestFailNegative"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("found a negative value"), std::string::npos);
    }
    auto ok = sess.run(sum, {{x, Tensor::from_vector<float>({1, 2})}});
    EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{16, 24}));
  }
}

TEST(Executor, OutOfMemoryNamesTheNodeAndTheSessionStaysUsable) {
  Graph g;
  Scope s(g);
  // 2^50 floats: 4 PiB, beyond any machine, yet far from int64's limits.
  auto huge = fill(s.with_op_name("huge"), {int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 10}, 1.0f);
  auto small = fill(s.with_op_name("small"), {1 << 16}, 2.0f);
  Session sess(g, {.inter_op_threads = 2});
  const int64_t in_use = cpu_allocator()->bytes_in_use();
  for (int rep = 0; rep < 3; ++rep) {
    try {
      sess.run({}, {huge, small});
      FAIL() << "expected ResourceExhaustedError";
    } catch (const ResourceExhaustedError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("[Fill] huge: OOM when allocating ", 0), 0u) << message;
      EXPECT_NE(message.find(std::to_string((int64_t{4} << 50) + 64) + " bytes"), std::string::npos) << message;
    }
    EXPECT_EQ(sess.run(small).num_elements(), 1 << 16);
  }
  EXPECT_EQ(cpu_allocator()->bytes_in_use(), in_use);
}

// Counts the references to its input's buffer while it runs (int32 scalar).
const OpDef& ref_count_op() {
  static const OpDef def{
      .name = "TestRefCount",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, DType::kInt32, Shape{}); },
      .kernel = [](KernelContext& c) { c.set_output(0, Tensor::scalar<int32_t>(c.input(0).buffer_ref_count())); },
      .doc = "a test op",
  };
  return def;
}

TEST(Executor, EveryConsumerAndFetchOfAnOutputHoldsAReference) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  auto y = add_one(s, x);
  std::vector<Output> counts;
  for (int i = 0; i < 3; ++i) counts.push_back(s.add_node(ref_count_op(), {y}, {}, CallSite::current())->output(0));
  // One thread: the consumers run one after the other, each giving its reference up after it.
  Session sess(g, {.inter_op_threads = 1});
  const Tensor feed = Tensor::from_vector<float>({1, 2, 3, 4});
  auto seen = [](const std::vector<Tensor>& out, size_t n) {
    std::vector<int32_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(out[i].scalar_value<int32_t>());
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(seen(sess.run({{x, feed}}, counts), 3), (std::vector<int32_t>{1, 2, 3}));
  // Fetched too: the fetch holds one more until the step ends, and only its own afterwards.
  std::vector<Output> with_y = counts;
  with_y.push_back(y);
  auto out = sess.run({{x, feed}}, with_y);
  EXPECT_EQ(seen(out, 3), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_TRUE(out[3].buffer_unique());
  EXPECT_TRUE(feed.buffer_unique());
  // A fed tensor: the caller's references, the feed's and each consumer's.
  const Tensor other = Tensor::from_vector<float>({5, 6, 7, 8});
  auto fed = seen(sess.run({{y, other}}, counts), 3);
  EXPECT_GE(fed[0], 3);
  EXPECT_EQ(fed[1], fed[0] + 1);
  EXPECT_EQ(fed[2], fed[1] + 1);
  EXPECT_TRUE(other.buffer_unique());
  // Fetched twice: no reference is left behind.
  auto twice = sess.run({{x, feed}}, {y, y, counts[0]});
  EXPECT_EQ(twice[2].scalar_value<int32_t>(), 3);
  EXPECT_EQ(twice[0].buffer_ref_count(), 2);  // twice[0] and twice[1]
}

TEST(Executor, ControlDependenciesOrderTargets) {
  Graph g;
  Scope s(g);
  auto c = constant(s, Tensor::from_vector<float>({1}));
  auto a = add_one(s, c);
  Node* grouped = group(s, {a.node});
  Session sess(g);
  g_runs = 0;
  sess.run(grouped);
  EXPECT_EQ(g_runs.load(), 1);
}

TEST(Executor, CachesOnePlanPerSignature) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{1});
  auto y = add_one(s, x);
  auto z = add_one(s, y);
  Graph& gr = g;
  ResourceStore store;
  Executor ex(gr, store, 1);
  FeedList feeds{{x, Tensor::from_vector<float>({1})}};
  for (int i = 0; i < 3; ++i) ex.run(feeds, {y}, {}, {}, nullptr);
  ex.run(feeds, {z}, {}, {}, nullptr);
  ex.run(feeds, {y, z}, {}, {}, nullptr);
  EXPECT_EQ(ex.num_cached_plans(), 3);
}

TEST(Executor, ConcurrentRunsFromManyThreads) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{4});
  Output y = x;
  for (int i = 0; i < 10; ++i) y = add(s, add_one(s, y), add_one(s, y));
  Session sess(g, {.inter_op_threads = 3});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        float v = static_cast<float>(t);
        auto out = sess.run(y, {{x, Tensor::from_vector<float>({v, v, v, v})}});
        // y_{k+1} = 2 y_k + 2  =>  y_10 = 2^10 (v + 2) - 2 (exact in float)
        float expect = static_cast<float>(std::ldexp(v + 2.0, 10) - 2.0);
        for (float o : out.flat<float>())
          if (o != expect) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Executor, PlacedOnSeveralCpuDevices) {
  Graph g;
  Scope s(g);
  auto a = add_one(s.with_device("/cpu:0"), constant(s, Tensor::from_vector<float>({1})));
  auto b = add_one(s.with_device("/cpu:1"), constant(s, Tensor::from_vector<float>({2})));
  auto c = add(s.with_device("/device:CPU:2"), a, b);
  Session sess(g);
  RunOptions opts;
  opts.trace_level = TraceLevel::kFullTrace;
  RunMetadata md;
  EXPECT_EQ(sess.run({}, {c}, {}, opts, &md)[0].scalar_value<float>(), 5.0f);
  std::vector<std::string> devices;
  for (auto& d : md.step_stats.dev_stats()) devices.emplace_back(d.device);
  EXPECT_NE(std::find(devices.begin(), devices.end(), "/job:localhost/replica:0/task:0/device:CPU:2"), devices.end());
  EXPECT_THROW(s.with_device("/gpu:0"), InvalidArgumentError);
}

TEST(Executor, ClosedSessionRefusesToRun) {
  Graph g;
  Scope s(g);
  auto c = constant(s, 1.0f);
  Session sess(g);
  sess.close();
  EXPECT_THROW(sess.run(c), CancelledError);
}

// A run that asks says where its time went, traced or not.
TEST(Executor, ARunThatAsksHasItsStepTiming) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    Graph g;
    Scope s(g);
    auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{2});
    Output y = add_one_chain(s, x, 200);
    Session sess(g, {.inter_op_threads = threads});
    RunMetadata metadata;
    sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {y}, {}, RunOptions{}, &metadata);
    EXPECT_EQ(metadata.step_timing.wall_ns, 0);  // not asked for: nothing paid
    RunOptions timed;
    timed.collect_step_timing = true;
    sess.run({{x, Tensor::from_vector<float>({1, 2})}}, {y}, {}, timed, &metadata);
    const StepTiming& t = metadata.step_timing;
    EXPECT_TRUE(metadata.step_stats.empty());  // untraced
    EXPECT_GT(t.wall_ns, 0);
    EXPECT_GT(t.busy_ns, 0);
    EXPECT_LE(t.busy_ns, t.wall_ns * threads);
    EXPECT_GE(t.idle_ns, 0);
    EXPECT_LE(t.idle_ns, t.wall_ns);
    EXPECT_EQ(t.input_ns, 0);  // no input-pipeline op
  }
}

}  // namespace
}  // namespace stepscope
