#include "stepscope/base/bulk_arena.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace stepscope {
namespace {

template <typename T>
using BulkVector = std::vector<T, BulkAllocator<T>>;

// Whether the page holding `p` is mapped in this process (mincore fails with ENOMEM where not).
bool mapped(const void* p) {
  const auto page = reinterpret_cast<uintptr_t>(p) & ~static_cast<uintptr_t>(sysconf(_SC_PAGESIZE) - 1);
  unsigned char resident = 0;
  errno = 0;
  const int rc = mincore(reinterpret_cast<void*>(page), 1, &resident);
  return rc == 0 || errno != ENOMEM;
}

TEST(BulkArena, OutsideAnArenaAllocationsComeFromMalloc) {
  BulkVector<int64_t> v;
  for (int64_t i = 0; i < 1000; ++i) v.push_back(i);
  BulkVector<int64_t> copy = v;
  EXPECT_EQ(copy, v);
  EXPECT_EQ(copy[999], 999);
}

TEST(BulkArena, AUseServesItsThreadBackToBack) {
  BulkArena arena(size_t{8} << 20);
  BulkArena::Use use(arena);
  BulkVector<int64_t> a(3, 7), b(5, 8);
  // One after the other, each after its header: the arena's memory, not malloc's.
  EXPECT_EQ(reinterpret_cast<const char*>(b.data()),
            reinterpret_cast<const char*>(a.data()) + BulkArena::room_for(3 * sizeof(int64_t)));
  EXPECT_EQ(a[2], 7);
  EXPECT_EQ(b[4], 8);
}

// The first allocation an arena makes: where its block begins (after the header).
const int64_t* first_allocation(BulkArena& arena, BulkVector<int64_t>& into) {
  BulkArena::Use use(arena);
  into.assign(16, 5);
  return into.data();
}

TEST(BulkArena, TheBlockStaysUntilItsLastAllocationGoesThenIsTheSpare) {
  BulkArena::drop_spare();
  const int64_t* data = nullptr;
  BulkVector<int64_t> kept;
  {
    BulkArena arena(size_t{4} << 20);
    BulkArena::Use use(arena);
    kept.assign(1000, 42);
    BulkVector<int64_t> gone(10, 1);
    data = kept.data();
  }
  ASSERT_TRUE(mapped(data));  // the arena is gone, not what was made in it
  EXPECT_EQ(kept[999], 42);
  BulkVector<int64_t> moved = std::move(kept);  // a stateless allocator: the memory moves with it
  EXPECT_EQ(moved.data(), data);
  moved = BulkVector<int64_t>();
  // Kept as the spare: the next arena that fits starts where this one did.
  ASSERT_TRUE(mapped(data));
  BulkArena next(size_t{2} << 20);
  BulkVector<int64_t> first;
  EXPECT_EQ(first_allocation(next, first), data);
  EXPECT_EQ(first[15], 5);
}

TEST(BulkArena, OneSpareAtMostAndOneTooSmallIsUnmapped) {
  BulkArena::drop_spare();
  BulkVector<int64_t> a, b;
  const int64_t* first = nullptr;
  const int64_t* second = nullptr;
  {
    BulkArena one(size_t{2} << 20), two(size_t{2} << 20);
    first = first_allocation(one, a);
    second = first_allocation(two, b);
  }
  a = BulkVector<int64_t>();  // the spare
  b = BulkVector<int64_t>();  // the spare now; the one before unmapped
  EXPECT_FALSE(mapped(first));
  ASSERT_TRUE(mapped(second));
  EXPECT_EQ(BulkArena::spare_bytes(), size_t{2} << 20);
  BulkArena bigger(size_t{8} << 20);  // the spare does not fit it: unmapped, a new block mapped
  EXPECT_EQ(BulkArena::spare_bytes(), 0u);
  BulkVector<int64_t> c;
  first_allocation(bigger, c);
  c = BulkVector<int64_t>();
  EXPECT_EQ(BulkArena::spare_bytes(), 0u);  // the arena is still there
  {
    BulkArena gone = std::move(bigger);
  }
  EXPECT_EQ(BulkArena::spare_bytes(), size_t{8} << 20);
  BulkArena::drop_spare();
  EXPECT_EQ(BulkArena::spare_bytes(), 0u);
}

TEST(BulkArena, DropSpareUnmapsIt) {
  BulkArena::drop_spare();
  BulkVector<int64_t> a;
  const int64_t* data = nullptr;
  {
    BulkArena arena(size_t{2} << 20);
    data = first_allocation(arena, a);
  }
  a = BulkVector<int64_t>();
  ASSERT_TRUE(mapped(data));
  BulkArena::drop_spare();
  EXPECT_FALSE(mapped(data));
}

TEST(BulkArena, FreedBeforeItsUseEndsTheBlockStays) {
  BulkArena arena(size_t{4} << 20);
  BulkArena::Use use(arena);
  const int64_t* first = nullptr;
  {
    BulkVector<int64_t> v(100, 3);
    first = v.data();
  }  // freed before the Use has counted it
  BulkVector<int64_t> next(100, 4);
  ASSERT_TRUE(mapped(first));
  EXPECT_EQ(next[99], 4);
}

TEST(BulkArena, AFullArenaFallsBackToMalloc) {
  BulkArena arena(BulkArena::room_for(64));  // rounded up to one huge page
  BulkArena::Use use(arena);
  std::vector<BulkVector<char>> many;
  for (int i = 0; i < 64; ++i) many.emplace_back(size_t{64} << 10, static_cast<char>(i));  // 4 MiB in all
  for (int i = 0; i < 64; ++i) EXPECT_EQ(many[i].back(), static_cast<char>(i));
}

TEST(BulkArena, UsesNestAndRestoreTheOneBefore) {
  BulkArena outer(size_t{4} << 20), inner(size_t{4} << 20);
  BulkArena::Use outer_use(outer);
  BulkVector<int64_t> a(2, 1);
  {
    BulkArena::Use inner_use(inner);
    BulkVector<int64_t> elsewhere(2, 2);
    EXPECT_NE(reinterpret_cast<const char*>(elsewhere.data()),
              reinterpret_cast<const char*>(a.data()) + BulkArena::room_for(2 * sizeof(int64_t)));
  }
  BulkVector<int64_t> b(2, 3);
  EXPECT_EQ(reinterpret_cast<const char*>(b.data()),
            reinterpret_cast<const char*>(a.data()) + BulkArena::room_for(2 * sizeof(int64_t)));
}

TEST(BulkArena, TwoThreadsMakeInOneArenaAndAThirdFreesIt) {
  BulkArena::drop_spare();
  std::vector<BulkVector<int64_t>> made[2];
  {
    BulkArena arena(size_t{64} << 20);
    std::thread threads[2];
    for (int t = 0; t < 2; ++t)
      threads[t] = std::thread([&, t] {
        BulkArena::Use use(arena);
        for (int i = 0; i < 20000; ++i) made[t].emplace_back(static_cast<size_t>(1 + i % 7), int64_t{t * 100000 + i});
      });
    for (auto& th : threads) th.join();
  }
  const int64_t* sample = made[1][19999].data();
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 20000; ++i) ASSERT_EQ(made[t][i].back(), t * 100000 + i);
  std::thread([&] {
    for (auto& m : made) m.clear();
  }).join();
  ASSERT_TRUE(mapped(sample));  // the spare
  BulkArena::drop_spare();
  EXPECT_FALSE(mapped(sample));
}

}  // namespace
}  // namespace stepscope
