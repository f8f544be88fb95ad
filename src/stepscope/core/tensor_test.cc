#include "stepscope/core/tensor.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "stepscope/base/clock.h"

namespace stepscope {
namespace {

TEST(Shape, DescribesKnownAndUnknownDims) {
  Shape s{64, 784};
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.num_elements(), 64 * 784);
  EXPECT_EQ(s.to_string(), "[64,784]");
  EXPECT_EQ(s.to_x_string(), "64x784");
  EXPECT_EQ(Shape{}.to_string(), "[]");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  Shape partial{-1, 10};
  EXPECT_FALSE(partial.fully_defined());
  EXPECT_EQ(partial.num_elements(), -1);
  EXPECT_EQ(partial.to_string(), "[?,10]");
  EXPECT_TRUE(partial.compatible_with(Shape{32, 10}));
  EXPECT_FALSE(partial.compatible_with(Shape{32, 11}));
  EXPECT_FALSE(partial.compatible_with(Shape{10}));
  EXPECT_TRUE(Shape::unknown_rank().compatible_with(Shape{1, 2, 3}));
  EXPECT_EQ(Shape::unknown_rank().to_string(), "<unknown>");
  EXPECT_EQ(s.dim(-1), 784);
}

TEST(Shape, RejectsTooManyDims) {
  std::vector<int64_t> dims(9, 1);
  EXPECT_THROW(Shape(std::span<const int64_t>(dims)), InvalidArgumentError);
}

// Issue 12: products of dims wrapped around (2^61 + 1) * 8 = 8 and a tensor of "8 elements"
// claimed a huge shape.
TEST(Shape, ElementCountsThatOverflowAreRefused) {
  const int64_t huge = 2305843009213693953;
  EXPECT_THROW((Shape{huge, 8}).num_elements(), InvalidArgumentError);
  EXPECT_THROW((Shape{int64_t{1} << 32, int64_t{1} << 32}).num_elements(), InvalidArgumentError);
  EXPECT_THROW(Tensor(DType::kFloat32, Shape{huge, 8}), InvalidArgumentError);
  Shape built;
  built.add_dim(huge);
  built.add_dim(8);
  EXPECT_THROW(built.num_elements(), InvalidArgumentError);
  EXPECT_THROW(Tensor(DType::kFloat32, built), InvalidArgumentError);
  EXPECT_THROW(Tensor(DType::kFloat64, Shape{int64_t{1} << 61}), InvalidArgumentError);  // bytes overflow
  EXPECT_EQ((Shape{huge, -1}).num_elements(), -1);
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}).num_elements(), int64_t{1} << 62);
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(dtype_name(DType::kFloat32), "float32");
  EXPECT_EQ(dtype_name(DType::kInt64), "int64");
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  EXPECT_TRUE(is_floating(DType::kFloat32));
  EXPECT_FALSE(is_floating(DType::kInt32));
}

TEST(Tensor, CopiesShareTheBufferAndDeepCopiesDoNot) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor b = a;
  EXPECT_TRUE(a.shares_buffer_with(b));
  EXPECT_FALSE(a.buffer_unique());
  b.data<float>()[0] = 10;
  EXPECT_EQ(a.at<float>({0, 0}), 10);
  Tensor c = a.deep_copy();
  EXPECT_FALSE(c.shares_buffer_with(a));
  c.data<float>()[1] = 20;
  EXPECT_EQ(a.at<float>({0, 1}), 2);
  EXPECT_EQ(a.at<float>({1, 2}), 6);
  EXPECT_TRUE(tensors_equal(a, b));
  EXPECT_FALSE(tensors_equal(a, c));
}

TEST(Tensor, BuffersAreAligned) {
  for (int n : {1, 3, 17, 1000}) {
    Tensor t(DType::kFloat32, Shape{n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Buffer::kAlignment, 0u);
  }
}

TEST(Tensor, PackedBuffersLieBackToBackAndFreeTheirAllocationWithTheLast) {
  Allocator* a = cpu_allocator();
  const int64_t before = a->bytes_in_use();
  const std::vector<int64_t> counts{16, 3, 0, 1000};  // 64 B, 12 B (padded to 64), empty, 4000 B
  std::vector<Buffer*> buffers(counts.size());
  Buffer::create_packed(a, DType::kFloat32, counts, buffers);
  std::vector<int64_t> bytes{64, 12, 0, 4000}, offsets(4);
  EXPECT_EQ(Buffer::packed_offsets(bytes, offsets), 64 + 64 + 0 + 4032);
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 64, 128, 128}));
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < counts.size(); ++i)
    tensors.push_back(Tensor::adopt(DType::kFloat32, Shape{counts[i]}, buffers[i]));
  const char* first = static_cast<const char*>(tensors[0].raw_data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % Buffer::kAlignment, 0u);
  for (size_t i = 0; i < counts.size(); ++i) {
    EXPECT_EQ(static_cast<const char*>(tensors[i].raw_data()) - first, offsets[i]) << i;
    EXPECT_EQ(tensors[i].buffer()->pack(), tensors[0].buffer()->pack());
    EXPECT_TRUE(tensors[i].buffer_unique());
    EXPECT_EQ(tensors[i].buffer()->requested_bytes(), bytes[i]);
    EXPECT_EQ(tensors[i].buffer()->allocated_bytes(), 64 + (i + 1 < counts.size() ? offsets[i + 1] : 4032 + 128) - offsets[i]);
  }
  EXPECT_NE(tensors[0].buffer()->pack(), nullptr);
  EXPECT_EQ(Tensor(DType::kFloat32, Shape{2}).buffer()->pack(), nullptr);
  // The padding after the 12 bytes is zero (it is reduced with the rest).
  for (int i = 12; i < 64; ++i) EXPECT_EQ(static_cast<const char*>(tensors[1].raw_data())[i], 0);
  for (int i = 0; i < 1000; ++i) tensors[3].data<float>()[i] = static_cast<float>(i);
  Tensor kept = tensors[3];
  tensors.clear();
  EXPECT_GT(a->bytes_in_use(), before);  // `kept` still holds the allocation
  EXPECT_EQ(kept.data<float>()[999], 999.0f);
  kept = Tensor();
  EXPECT_EQ(a->bytes_in_use(), before);
  EXPECT_THROW(Buffer::create_packed(a, DType::kString, counts, buffers), InvalidArgumentError);
}

TEST(Tensor, TypedAccessChecksDtypeAndIndex) {
  Tensor t = Tensor::scalar<int32_t>(7);
  EXPECT_EQ(t.scalar_value<int32_t>(), 7);
  EXPECT_THROW(t.data<float>(), InvalidArgumentError);
  Tensor m(DType::kFloat32, Shape{2, 2});
  EXPECT_THROW(m.at<float>({2, 0}), InvalidArgumentError);
  EXPECT_THROW(m.at<float>({0}), InvalidArgumentError);
  EXPECT_THROW(Tensor(DType::kFloat32, Shape{-1, 2}), InvalidArgumentError);
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, Shape{2, 2}), InvalidArgumentError);
}

TEST(Tensor, ReshapedSharesTheBuffer) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor r = t.reshaped(Shape{3, 2});
  EXPECT_TRUE(r.shares_buffer_with(t));
  EXPECT_EQ(r.at<float>({2, 1}), 6);
  EXPECT_THROW(t.reshaped(Shape{4}), InvalidArgumentError);
}

TEST(Tensor, StringsAndDebugString) {
  Tensor s(DType::kString, Shape{2});
  s.data<std::string>()[0] = "loss";
  s.data<std::string>()[1] = "accuracy";
  Tensor copy = s.deep_copy();
  EXPECT_EQ(copy.data<std::string>()[1], "accuracy");
  EXPECT_EQ(Tensor::from_vector<float>({1, 2.5f}).debug_string(), "float32[2] [1 2.5]");
  EXPECT_EQ(Tensor::from_vector<bool>({true, false}).debug_string(), "bool[2] [true false]");
  EXPECT_EQ(Tensor::from_vector<int32_t>({1, 2, 3}).debug_string(2), "int32[3] [1 2 ...]");
}

TEST(Allocator, TracksBytesInUsePeakAndCounts) {
  Allocator* a = cpu_allocator();
  const auto before = a->stats();
  {
    Tensor t(DType::kFloat32, Shape{1000});
    const auto during = a->stats();
    EXPECT_GE(during.bytes_in_use - before.bytes_in_use, 4000);
    EXPECT_GE(during.peak_bytes_in_use, during.bytes_in_use);
    EXPECT_EQ(during.num_allocs, before.num_allocs + 1);
  }
  EXPECT_EQ(a->stats().bytes_in_use, before.bytes_in_use);
}

TEST(Allocator, ReusesFreedSmallBlocksAndKeepsStatsExact) {
  Allocator* a = cpu_allocator();
  const auto before = a->stats();
  const void* first;
  {
    Tensor t(DType::kFloat32, Shape{16});
    first = t.raw_data();
  }
  Tensor again(DType::kFloat32, Shape{10});  // same size class (64 B header + 40 B -> 128 B)
  EXPECT_EQ(again.raw_data(), first);        // served from this thread's cache
  EXPECT_EQ(again.buffer()->allocated_bytes(), 128);
  const auto after = a->stats();
  EXPECT_EQ(after.num_allocs, before.num_allocs + 2);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use + 64 + 40);  // what was asked for, not the class
  EXPECT_EQ(after.total_allocated_bytes, before.total_allocated_bytes + (64 + 64) + (64 + 40));
  EXPECT_GT(again.buffer()->allocation_id(), 0);
}

TEST(Allocator, BlocksOfEverySizeAreUsableAndFreedOnAnyThread) {
  Allocator* a = cpu_allocator();
  const int64_t in_use = a->bytes_in_use();
  std::vector<Tensor> made;
  for (int64_t n = 0; n <= 20000; n = n * 3 / 2 + 1) {  // up to 80 KB: past the largest class
    Tensor t(DType::kFloat32, Shape{n});
    for (auto& v : t.flat<float>()) v = 1.0f;  // ASan checks every byte is ours
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Buffer::kAlignment, 0u);
    EXPECT_GE(t.buffer()->allocated_bytes(), 64 + t.bytes());
    made.push_back(std::move(t));
  }
  // Freed on another thread: the blocks go to that thread's cache, which it gives back to glibc
  // when it exits (LeakSanitizer checks this).
  std::thread([&] { made.clear(); }).join();
  EXPECT_EQ(a->bytes_in_use(), in_use);
  // Allocated there, freed here: lands in this thread's cache.
  Tensor moved;
  std::thread([&] { moved = Tensor(DType::kFloat64, Shape{3}); }).join();
  const void* p = moved.raw_data();
  moved = Tensor();
  EXPECT_EQ(Tensor(DType::kFloat64, Shape{3}).raw_data(), p);
}

// Counts are kept per thread and ids handed out in blocks: still exact and unique, also with
// more threads than there are stripes (the extra ones share one) and after threads exit.
TEST(Allocator, CountsAndIdsStayExactAcrossThreads) {
  Allocator* a = cpu_allocator();
  for (int round = 0; round < 2; ++round) {
    const auto before = a->stats();
    constexpr int kThreads = 80, kAllocs = 200;
    std::vector<std::vector<int64_t>> ids(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kAllocs; ++i)
          ids[t].push_back(Tensor(DType::kFloat32, Shape{16}).buffer()->allocation_id());
      });
    }
    for (auto& th : threads) th.join();
    const auto after = a->stats();
    EXPECT_EQ(after.num_allocs - before.num_allocs, kThreads * kAllocs);
    EXPECT_EQ(after.total_allocated_bytes - before.total_allocated_bytes, int64_t{kThreads} * kAllocs * (64 + 64));
    EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
    std::set<int64_t> unique;
    for (const auto& v : ids) unique.insert(v.begin(), v.end());
    EXPECT_EQ(unique.size(), size_t{kThreads} * kAllocs);
    EXPECT_GT(*unique.begin(), 0);
  }
}

TEST(Allocator, RecorderSeesAllocationsAndFreesWithNodeAndTime) {
  AllocationRecorder* recorder = AllocationRecorder::acquire();
  const int64_t t0 = now_ns();
  Tensor* t;
  {
    ScopedRecording scope(recorder, 42);
    t = new Tensor(DType::kFloat64, Shape{10});
  }
  EXPECT_EQ(current_recording().recorder, nullptr);  // the scope is restored
  delete t;                                          // recorded although it happens outside the recording scope
  recorder->close();
  auto events = recorder->events_by_allocator();
  recorder->recycle();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].allocator->name(), "cpu");
  ASSERT_EQ(events[0].events.size(), 2u);
  EXPECT_EQ(events[0].events[0].bytes, 80);
  EXPECT_EQ(events[0].events[0].node, 42);
  EXPECT_EQ(events[0].events[1].node, 42);  // a free is attributed to the allocating node
  EXPECT_GE(events[0].events[0].time_ns, t0);
  EXPECT_EQ(events[0].events[1].bytes, -80);
  EXPECT_EQ(events[0].events[1].allocation_id, events[0].events[0].allocation_id);
  EXPECT_LE(events[0].events[0].time_ns, events[0].events[1].time_ns);
}

TEST(Allocator, RecordingThreadsAppendToTheirOwnLogWithTheScopeTime) {
  AllocationRecorder* recorder = AllocationRecorder::acquire();
  Tensor kept;
  auto work = [&](int node, bool keep) {
    ScopedRecording scope(recorder, node);
    scope.scope().time_ns = 1000 + node;
    Tensor temp(DType::kFloat32, Shape{4});
    if (keep) kept = Tensor(DType::kFloat32, Shape{2});
  };
  std::thread a(work, 1, true);
  a.join();
  std::thread b(work, 2, false);
  b.join();
  kept = Tensor();  // freed by a thread outside the recording: the shared log, clock time
  recorder->close();
  ASSERT_EQ(recorder->thread_logs().size(), 2u);
  const auto& log_a = recorder->thread_logs()[0]->events;
  ASSERT_EQ(log_a.size(), 3u);  // temp +16, kept +8, temp -16
  EXPECT_EQ(log_a[0].bytes, 16);
  EXPECT_EQ(log_a[1].bytes, 8);
  EXPECT_EQ(log_a[2].bytes, -16);
  for (const auto& e : log_a) EXPECT_EQ(e.time_ns, 1001);
  EXPECT_EQ(recorder->thread_logs()[1]->events.size(), 2u);
  ASSERT_EQ(recorder->other_log().events.size(), 1u);
  EXPECT_EQ(recorder->other_log().events[0].bytes, -8);
  EXPECT_EQ(recorder->other_log().events[0].node, 1);
  EXPECT_GT(recorder->other_log().events[0].time_ns, 1001);
  recorder->recycle();
}

// A recorder told how much a step will record gives each thread's log that room when the
// thread takes it (no doubling and copying while the step runs), and forgets it when recycled.
// The first thread's log is made by expect() itself: its new memory is returned, for the
// caller to have mapped before that thread writes it.
TEST(Allocator, RecorderGivesEachThreadLogTheRoomExpected) {
  AllocationRecorder* recorder = AllocationRecorder::acquire();
  const auto new_memory = recorder->expect(5000, 2000);
  AllocationRecorder::ThreadLog* log = nullptr;
  std::thread([&] {
    ScopedRecording scope(recorder, 1);
    Tensor temp(DType::kFloat32, Shape{4});
    log = scope.scope().log;
  }).join();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->events.size(), 2u);
  EXPECT_GE(log->events.capacity(), 5000u);
  EXPECT_GE(log->nodes.capacity(), 2000u);
  // Unless a recycled log had that room already, it is the memory of the log the thread took.
  for (const auto& span : new_memory) {
    const bool events = span.data() == reinterpret_cast<const std::byte*>(log->events.data());
    EXPECT_TRUE(events || span.data() == reinterpret_cast<const std::byte*>(log->nodes.data()));
    EXPECT_EQ(span.size(), events ? 5000 * sizeof(AllocationEvent) : 2000 * sizeof(int32_t));
  }
  recorder->close();
  recorder->recycle();
  // Taken again from the pool, the log has the room: nothing new.
  recorder = AllocationRecorder::acquire();
  EXPECT_TRUE(recorder->expect(5000, 2000).empty());
  recorder->close();
  recorder->recycle();
  // A step bigger than what a recycled log keeps: the first thread's log has room for all of
  // it (on one thread, it records all of it), another thread's for what a recycled log keeps. A
  // big log its step left mostly empty is trimmed when recycled.
  const size_t big = 3 * AllocationRecorder::kMaxKeptEvents;
  recorder = AllocationRecorder::acquire();
  EXPECT_FALSE(recorder->expect(big, 0).empty());
  AllocationRecorder::ThreadLog* other = nullptr;
  for (AllocationRecorder::ThreadLog** taken : {&log, &other})
    std::thread([&] {
      ScopedRecording scope(recorder, 1);
      Tensor temp(DType::kFloat32, Shape{4});
      *taken = scope.scope().log;
    }).join();
  EXPECT_GE(log->events.capacity(), big);
  EXPECT_LE(other->events.capacity(), 2 * AllocationRecorder::kMaxKeptEvents);
  recorder->close();
  recorder->recycle();
  recorder = AllocationRecorder::acquire();  // the same one (the pool's last)
  EXPECT_FALSE(recorder->expect(big, 0).empty());
  recorder->close();
  recorder->recycle();
}

TEST(Allocator, FreeAfterTheRecorderClosedIsHarmless) {
  AllocationRecorder* recorder = AllocationRecorder::acquire();
  Tensor* t;
  {
    ScopedRecording scope(recorder, 1);
    t = new Tensor(DType::kFloat32, Shape{4});
  }
  recorder->close();
  EXPECT_EQ(recorder->events_by_allocator()[0].events.size(), 1u);
  recorder->recycle();
  // Recycled and recording again: the old buffer's free belongs to an older generation.
  AllocationRecorder* again = AllocationRecorder::acquire();
  EXPECT_EQ(again, recorder);
  delete t;
  again->close();
  EXPECT_TRUE(again->events_by_allocator().empty());
  again->recycle();
}

}  // namespace
}  // namespace stepscope
