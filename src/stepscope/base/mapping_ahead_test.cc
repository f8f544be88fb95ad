#include "stepscope/base/mapping_ahead.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

namespace stepscope {
namespace {

// Pages of `span` that are mapped (mincore: resident).
size_t resident_pages(std::span<const std::byte> span) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((span.size() + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<std::byte*>(span.data()), span.size(), resident.data()), 0);
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return n;
}

// Whether this kernel maps pages ahead (MADV_POPULATE_WRITE, Linux 5.14): where it does not,
// nothing is mapped ahead and the step faults its pages in itself.
bool kernel_populates() {
  static const bool populates = [] {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const bool ok = madvise(p, page, 23 /* MADV_POPULATE_WRITE */) == 0;
    munmap(p, page);
    return ok;
  }();
  return populates;
}

struct Mapping {
  explicit Mapping(size_t bytes)
      : bytes(bytes),
        data(
            static_cast<std::byte*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
  }
  ~Mapping() { munmap(data, bytes); }
  std::span<const std::byte> span() const { return {data, bytes}; }
  size_t bytes;
  std::byte* data;
};

TEST(MappingAhead, MappedBesideTheStepEarlySpansFirstUntilStopped) {
  Mapping early(64 * 4096), late(32 * 4096);
  ASSERT_EQ(resident_pages(early.span()), 0u);
  MappingAhead mapping({.early = {early.span()}, .late = {late.span()}});
  std::thread beside([&] { mapping.map(); });
  beside.join();
  mapping.stop();  // after map() returned: returns at once
  EXPECT_EQ(resident_pages(early.span()), kernel_populates() ? 64u : 0u);
  EXPECT_EQ(resident_pages(late.span()), kernel_populates() ? 32u : 0u);
}

// A step over before its thread starts mapping stops a mapping that then never starts: the
// step's memory may be gone by then.
TEST(MappingAhead, AMappingStoppedBeforeItStartsMapsNothing) {
  Mapping room(16 * 4096);
  MappingAhead mapping({.early = {room.span()}, .late = {}});
  mapping.stop();
  mapping.map();
  EXPECT_EQ(resident_pages(room.span()), 0u);
}

// stop() returns once map() no longer touches the room, wherever map() was.
TEST(MappingAhead, StopWaitsForTheMappingUnderWay) {
  for (int round = 0; round < 20; ++round) {
    Mapping room(2048 * 4096);
    MappingAhead mapping({.early = {room.span()}, .late = {room.span()}});
    std::thread beside([&] { mapping.map(); });
    std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
    mapping.stop();
    const size_t mapped = resident_pages(room.span());
    EXPECT_EQ(resident_pages(room.span()), mapped) << "mapped after stop() returned";
    beside.join();
    EXPECT_EQ(resident_pages(room.span()), mapped);
  }
}

TEST(MappingAhead, MappedNowWhole) {
  Mapping a(8 * 4096), b(3 * 4096);
  map_now({.early = {a.span()}, .late = {b.span()}});
  EXPECT_EQ(resident_pages(a.span()), kernel_populates() ? 8u : 0u);
  EXPECT_EQ(resident_pages(b.span()), kernel_populates() ? 3u : 0u);
}

// A MappedBeside maps on a thread of its own only memory worth one, and maps no more once gone.
TEST(MappingAhead, MappedBesideWhileItLivesWhereWorthAThread) {
  Mapping small(4 * 4096);
  {
    MappedBeside mapped({.early = {small.span()}, .late = {}}, 64 * 4096);
    EXPECT_FALSE(mapped.started());
  }
  EXPECT_EQ(resident_pages(small.span()), 0u);

  Mapping big(256 * 4096);
  {
    MappedBeside mapped({.early = {big.span()}, .late = {}}, 64 * 4096);
    ASSERT_EQ(mapped.started(), hardware_cores() > 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (kernel_populates() && mapped.started() && resident_pages(big.span()) < 256 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(resident_pages(big.span()), kernel_populates() && hardware_cores() > 1 ? 256u : 0u);

  for (int round = 0; round < 10; ++round) {
    Mapping room(2048 * 4096);
    {
      MappedBeside mapped({.early = {room.span()}, .late = {}}, 64 * 4096);
      std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    }
    const size_t mapped = resident_pages(room.span());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(resident_pages(room.span()), mapped) << "mapped after the MappedBeside went";
  }
}

}  // namespace
}  // namespace stepscope
