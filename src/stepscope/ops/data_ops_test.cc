// IteratorGetNext and MakeIterator over a test-local dataset (the real pipelines are tested in
// train/dataset_test.cc): per-session iteration, End of sequence, restarts, errors, threads.
#include "stepscope/ops/data_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "stepscope/ops/array_ops.h"
#include "stepscope/testing/op_test_util.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

// Yields (i as int64 scalar, [i, i] as float32) for i in [0, n); fails at `fail_at` if set.
class RangeSource : public DatasetSource {
 public:
  explicit RangeSource(int64_t n, int64_t fail_at = -1, DType value_dtype = DType::kFloat32)
      : n_(n), fail_at_(fail_at), dtypes_{DType::kInt64, value_dtype}, shapes_{Shape{}, Shape{2}} {}
  std::string describe() const override { return "RangeSource(" + std::to_string(n_) + ")"; }
  const std::vector<DType>& output_dtypes() const override { return dtypes_; }
  const std::vector<Shape>& output_shapes() const override { return shapes_; }
  std::unique_ptr<DatasetIterator> make_iterator() const override {
    struct It : DatasetIterator {
      const RangeSource* src;
      int64_t i = 0;
      explicit It(const RangeSource* s) : src(s) {}
      bool get_next(std::vector<Tensor>& out) override {
        if (i >= src->n_) return false;
        if (i == src->fail_at_) {
          ++i;
          throw InvalidArgumentError("bad element");
        }
        out = {Tensor::scalar<int64_t>(i), Tensor::from_vector<float>({float(i), float(i)})};
        ++i;
        return true;
      }
    };
    made_++;
    return std::make_unique<It>(this);
  }
  mutable std::atomic<int> made_{0};

 private:
  int64_t n_, fail_at_;
  std::vector<DType> dtypes_;
  std::vector<Shape> shapes_;
};

int64_t next_index(Session& s, Output index) { return s.run(index).scalar_value<int64_t>(); }

TEST(IteratorGetNext, OutputsFollowTheDataset) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(3));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].node->op_type(), "IteratorGetNext");
  EXPECT_EQ(out[0].node->name(), "IteratorGetNext");
  EXPECT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(out[0].shape(), Shape{});
  EXPECT_EQ(out[1].dtype(), DType::kFloat32);
  EXPECT_EQ(out[1].shape(), Shape{2});
  EXPECT_TRUE(out[0].node->op().stateful);
  EXPECT_EQ(attr_to_string(*out[0].node->attrs().find("dataset")), "RangeSource(3)");
}

TEST(IteratorGetNext, SuccessiveRunsAdvanceThenEndOfSequenceStaysAndSessionStaysUsable) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(3));
  auto c = constant(root, 5.0f);
  Session s(g, {.inter_op_threads = 2});
  for (int64_t i = 0; i < 3; ++i) {
    auto t = s.run({out[0], out[1]});
    EXPECT_EQ(t[0].scalar_value<int64_t>(), i);
    testing::expect_tensor_near<float>(t[1], Shape{2}, {float(i), float(i)});
  }
  for (int k = 0; k < 2; ++k) {
    try {
      s.run(out[0]);
      FAIL() << "expected OutOfRangeError";
    } catch (const OutOfRangeError& e) {
      EXPECT_STREQ(e.what(), "[IteratorGetNext] IteratorGetNext: End of sequence");
    }
  }
  EXPECT_EQ(s.run(c).scalar_value<float>(), 5.0f);
}

TEST(IteratorGetNext, FetchingTwoOutputsInOneRunTakesOneElement) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(5));
  Session s(g);
  auto t = s.run({out[0], out[1], out[0]});
  EXPECT_EQ(t[0].scalar_value<int64_t>(), 0);
  EXPECT_EQ(t[2].scalar_value<int64_t>(), 0);
  EXPECT_EQ(next_index(s, out[0]), 1);
}

TEST(IteratorGetNext, SessionsIterateIndependently) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(4));
  Session a(g), b(g);
  EXPECT_EQ(next_index(a, out[0]), 0);
  EXPECT_EQ(next_index(a, out[0]), 1);
  EXPECT_EQ(next_index(b, out[0]), 0);
  EXPECT_EQ(next_index(a, out[0]), 2);
  EXPECT_EQ(next_index(b, out[0]), 1);
}

TEST(MakeIterator, RestartsTheIteratorOfThisSessionOnly) {
  Graph g;
  Scope root(g);
  auto src = std::make_shared<RangeSource>(2);
  auto out = iterator_get_next(root, src);
  Node* init = make_iterator(root, out[0].node);
  EXPECT_EQ(init->op_type(), "MakeIterator");
  EXPECT_EQ(init->name(), "MakeIterator");
  EXPECT_EQ(init->num_outputs(), 0);
  Session a(g), b(g);
  EXPECT_EQ(next_index(a, out[0]), 0);
  EXPECT_EQ(next_index(a, out[0]), 1);
  EXPECT_THROW(next_index(a, out[0]), OutOfRangeError);
  EXPECT_EQ(next_index(b, out[0]), 0);
  a.run(init);
  EXPECT_EQ(next_index(a, out[0]), 0);
  EXPECT_EQ(next_index(b, out[0]), 1);  // b's iterator was not touched
  // Initializing before the first run is fine too.
  Session c(g);
  c.run(init);
  EXPECT_EQ(next_index(c, out[0]), 0);
}

TEST(MakeIterator, SwitchesToACompatibleDataset) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(10));
  Node* to_short = make_iterator(root, out[0].node, std::make_shared<RangeSource>(1));
  Session s(g);
  EXPECT_EQ(next_index(s, out[0]), 0);
  EXPECT_EQ(next_index(s, out[0]), 1);
  s.run(to_short);
  EXPECT_EQ(next_index(s, out[0]), 0);
  EXPECT_THROW(next_index(s, out[0]), OutOfRangeError);
}

TEST(MakeIterator, RejectsAnIncompatibleDatasetOrNode) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root, std::make_shared<RangeSource>(10));
  try {
    make_iterator(root, out[0].node, std::make_shared<RangeSource>(1, -1, DType::kFloat64));
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "[MakeIterator] MakeIterator: dataset with types (int64, float64) and shapes ([], [2]) is not "
                 "compatible with iterator 'IteratorGetNext' with types (int64, float32) and shapes ([], [2])");
  }
  auto c = constant(root.with_op_name("c"), 1.0f);
  try {
    make_iterator(root, c.node);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "[MakeIterator] expects an IteratorGetNext node, got Const node 'c'");
  }
  EXPECT_THROW(iterator_get_next(root, nullptr), InvalidArgumentError);
}

TEST(IteratorGetNext, PipelineErrorsNameTheNodeAndIterationContinues) {
  Graph g;
  Scope root(g);
  auto out = iterator_get_next(root.with_op_name("next"), std::make_shared<RangeSource>(3, 1));
  Session s(g);
  EXPECT_EQ(next_index(s, out[0]), 0);
  try {
    s.run(out[0]);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "[IteratorGetNext] next: bad element");
  }
  EXPECT_EQ(next_index(s, out[0]), 2);
}

TEST(IteratorGetNext, ConcurrentRunsEachGetADistinctElement) {
  constexpr int kThreads = 4, kPerThread = 200;
  Graph g;
  Scope root(g);
  auto src = std::make_shared<RangeSource>(kThreads * kPerThread);
  auto out = iterator_get_next(root, src);
  Session s(g, {.inter_op_threads = 4});
  std::mutex mu;
  std::set<int64_t> seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        int64_t v = next_index(s, out[0]);
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(v);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen.size(), size_t(kThreads * kPerThread));
  EXPECT_EQ(*seen.rbegin(), kThreads * kPerThread - 1);
  EXPECT_THROW(next_index(s, out[0]), OutOfRangeError);
  EXPECT_EQ(src->made_.load(), 1);
}

TEST(DatasetIterator, DefaultSkipPullsElements) {
  RangeSource src(5);
  auto it = src.make_iterator();
  EXPECT_EQ(it->skip(2), 2);
  std::vector<Tensor> e;
  ASSERT_TRUE(it->get_next(e));
  EXPECT_EQ(e[0].scalar_value<int64_t>(), 2);
  EXPECT_EQ(it->skip(-1), 2);
  EXPECT_FALSE(it->get_next(e));
}

}  // namespace
}  // namespace stepscope
