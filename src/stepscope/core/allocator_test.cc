// The CPU allocator's caches: large blocks come back from its cache instead of the OS, within
// its bound, and its tracking figures stay what tensors asked for.
#include "stepscope/core/allocator.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/core/tensor.h"

// GCC defines __SANITIZE_ADDRESS__; clang 16 only answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define STEPSCOPE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STEPSCOPE_UNDER_ASAN 1
#endif
#endif
#ifndef STEPSCOPE_UNDER_ASAN
#define STEPSCOPE_UNDER_ASAN 0
#endif

namespace stepscope {
namespace {

constexpr size_t kLarge = size_t{1} << 20;  // over the 64 KiB of the per-thread caches

// Restores the CPU allocator's cache bound when a test that changes it ends.
struct KeepCacheLimit {
  size_t limit = cpu_allocator()->cache_limit();
  ~KeepCacheLimit() { cpu_allocator()->set_cache_limit(limit); }
};

int64_t minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Libraries the kernels call (oneDNN's GEMMs) malloc scratch buffers on every call: once the CPU
// allocator exists, glibc keeps such a block's pages when it is freed instead of trimming the heap
// and faulting them in again on the next call.
TEST(CpuAllocator, FreedHeapBlocksKeepTheirPages) {
  cpu_allocator();
  constexpr size_t kBytes = 229824;  // oneDNN's packing buffer in the model suite's MLP
  auto touch_and_free = [] {
    auto* p = static_cast<volatile char*>(std::malloc(kBytes));  // volatile: not optimised away
    for (size_t b = 0; b < kBytes; b += 4096) p[b] = 1;
    std::free(const_cast<char*>(p));
  };
  touch_and_free();  // the first block's pages fault in once
  const int64_t before = minor_page_faults();
  for (int i = 0; i < 20; ++i) touch_and_free();
  const int64_t faults = minor_page_faults() - before;
#if STEPSCOPE_UNDER_ASAN
  (void)faults;  // the sanitizer's allocator is not glibc's
#else
  EXPECT_LT(faults, 10) << "glibc trimmed the heap at every free (57 pages a block)";
#endif
}

TEST(CpuAllocator, ReusesFreedLargeBlocksWithoutAskingTheOs) {
  Allocator* a = cpu_allocator();
  void* first = a->allocate(kLarge, 64);
  std::memset(first, 1, kLarge);
  a->deallocate(first, kLarge);
  const AllocatorStats before = a->stats();
  EXPECT_GE(before.bytes_cached, static_cast<int64_t>(kLarge));
  for (int i = 0; i < 10; ++i) {
    void* p = a->allocate(kLarge, 64);
    EXPECT_EQ(p, first);  // the most recently freed block of its class
    a->deallocate(p, kLarge);
  }
  // A smaller request of the same size class (1/8 of a power of two) takes the same block.
  void* p = a->allocate(kLarge - 4096, 64);
  EXPECT_EQ(p, first);
  a->deallocate(p, kLarge - 4096);
  const AllocatorStats after = a->stats();
  EXPECT_EQ(after.num_system_allocs, before.num_system_allocs);
  // What tensors asked for is counted as before, cache or not.
  EXPECT_EQ(after.num_allocs - before.num_allocs, 11);
  EXPECT_EQ(after.total_allocated_bytes - before.total_allocated_bytes, static_cast<int64_t>(11 * kLarge - 4096));
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

TEST(CpuAllocator, AllocatedSizeIsTheSizeClass) {
  const Allocator* a = cpu_allocator();
  EXPECT_EQ(a->allocated_size(kLarge, 64), kLarge);
  EXPECT_EQ(a->allocated_size(kLarge + 1, 64), kLarge + kLarge / 8);
  EXPECT_EQ(a->allocated_size((size_t{64} << 10) + 1, 64), size_t{72} << 10);  // steps of 8 KiB
  EXPECT_EQ(a->allocated_size(100, 64), 128u);                                 // small classes as before
}

TEST(CpuAllocator, CachedMemoryIsBoundedAndTheOldestGoesFirst) {
  KeepCacheLimit keep;
  Allocator* a = cpu_allocator();
  a->release_cached_memory();
  EXPECT_EQ(a->stats().bytes_cached, 0);
  a->set_cache_limit(3 * kLarge);
  EXPECT_EQ(a->cache_limit(), 3 * kLarge);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(a->allocate(kLarge, 64));
  for (void* p : blocks) a->deallocate(p, kLarge);
  EXPECT_EQ(a->stats().bytes_cached, static_cast<int64_t>(3 * kLarge));
  // The first freed went back to the OS; the others come back newest first.
  const int64_t maps = a->stats().num_system_allocs;
  EXPECT_EQ(a->allocate(kLarge, 64), blocks[3]);
  EXPECT_EQ(a->allocate(kLarge, 64), blocks[2]);
  EXPECT_EQ(a->allocate(kLarge, 64), blocks[1]);
  EXPECT_EQ(a->stats().num_system_allocs, maps);
  a->deallocate(blocks[1], kLarge);
  a->deallocate(blocks[2], kLarge);
  a->deallocate(blocks[3], kLarge);
  // Lowering the bound gives back at once what is over it.
  a->set_cache_limit(kLarge);
  EXPECT_EQ(a->stats().bytes_cached, static_cast<int64_t>(kLarge));
  // A block over the bound is never kept; none is with a bound of 0.
  void* big = a->allocate(4 * kLarge, 64);
  a->deallocate(big, 4 * kLarge);
  EXPECT_EQ(a->stats().bytes_cached, static_cast<int64_t>(kLarge));
  a->set_cache_limit(0);
  EXPECT_EQ(a->stats().bytes_cached, 0);
  void* p = a->allocate(kLarge, 64);
  a->deallocate(p, kLarge);
  EXPECT_EQ(a->stats().bytes_cached, 0);
}

TEST(CpuAllocator, ReleaseCachedMemoryGivesEverythingBack) {
  Allocator* a = cpu_allocator();
  void* p = a->allocate(kLarge, 64);
  void* q = a->allocate(2 * kLarge, 64);
  a->deallocate(p, kLarge);
  a->deallocate(q, 2 * kLarge);
  const int64_t cached = a->stats().bytes_cached;
  EXPECT_GE(cached, static_cast<int64_t>(3 * kLarge));
  EXPECT_GE(a->release_cached_memory(), static_cast<size_t>(cached));
  EXPECT_EQ(a->stats().bytes_cached, 0);
  const int64_t maps = a->stats().num_system_allocs;
  a->deallocate(a->allocate(kLarge, 64), kLarge);
  EXPECT_EQ(a->stats().num_system_allocs, maps + 1);
}

TEST(CpuAllocator, OutOfMemoryIsResourceExhaustedAndLeavesTheFiguresAlone) {
  Allocator* a = cpu_allocator();
  const AllocatorStats before = a->stats();
  const size_t absurd = size_t{1} << 52;  // 4 PiB
  try {
    a->allocate(absurd, 64);
    FAIL() << "expected ResourceExhaustedError";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(absurd) + " bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor(DType::kFloat32, Shape{int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 10}),
               ResourceExhaustedError);
  const AllocatorStats after = a->stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  Tensor fine(DType::kFloat32, Shape{1 << 18});  // and the allocator goes on
  EXPECT_EQ(fine.num_elements(), 1 << 18);
}

TEST(CpuAllocator, ThreadsShareTheLargeCacheSafely) {
  Allocator* a = cpu_allocator();
  const int64_t in_use = a->bytes_in_use();
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 8 && (live.empty() || rng() % 2)) {
          const size_t bytes = (size_t{64} << 10) + rng() % (4 * kLarge);
          auto* p = static_cast<unsigned char*>(a->allocate(bytes, 64));
          // Ends and middle marked with this block's own byte; checked before it is freed.
          const auto mark = static_cast<unsigned char>(i);
          p[0] = p[bytes / 2] = p[bytes - 1] = mark;
          live.emplace_back(p, bytes);
        } else {
          auto [p, bytes] = live[rng() % live.size()];
          if (p[0] != p[bytes / 2] || p[0] != p[bytes - 1]) corrupted++;
          a->deallocate(p, bytes);
          std::erase(live, std::pair{p, bytes});
        }
      }
      for (auto [p, bytes] : live) a->deallocate(p, bytes);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(a->bytes_in_use(), in_use);
}

}  // namespace
}  // namespace stepscope
