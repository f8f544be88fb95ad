#include "stepscope/base/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace stepscope {
namespace {

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The kernel's THP mode: "always", "madvise" or "never" (the bracketed word), "" without THP.
std::string thp_mode() {
  const std::string modes = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  const size_t open = modes.find('['), close = modes.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : modes.substr(open + 1, close - open - 1);
}

// Whether the mapping that holds `address` may take huge pages (smaps' THPeligible); nothing on
// a kernel whose smaps does not say.
std::optional<bool> thp_eligible(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.starts_with("THPeligible:")) {
      return line.find('1') != std::string::npos;
    }
  }
  return std::nullopt;
}

// A vector of 1000 items that `reserve` then asks for one more item at a time, 99,000 times.
template <typename Reserve>
void expect_geometric_growth(std::vector<int32_t> v, const Reserve& reserve) {
  EXPECT_EQ(v.capacity(), 1000u);  // a fresh vector gets what it asks for
  size_t reallocations = 0;
  for (size_t n = 1001; n <= 100000; ++n) {
    const int32_t* data = v.data();
    reserve(v, n);
    v.push_back(static_cast<int32_t>(n));
    reallocations += v.data() != data;
  }
  EXPECT_LE(reallocations, 8u);  // 1000 -> 2000 -> ... -> 128000, not one a step
  EXPECT_EQ(v.size(), 100000u);
  EXPECT_EQ(v.back(), 100000);
}

TEST(HugePages, ReservingALittleMoreEachTimeGrowsGeometrically) {
  expect_geometric_growth(sized_huge<int32_t>(1000), [](std::vector<int32_t>& v, size_t n) { reserve_huge(v, n); });
  std::vector<int32_t> other;
  reserve_huge_unless_reclaimed(other, 1000);
  other.resize(1000);
  expect_geometric_growth(std::move(other),
                          [](std::vector<int32_t>& v, size_t n) { reserve_huge_unless_reclaimed(v, n); });
}

TEST(HugePages, ReserveHugeKeepsTheVectorsContentsAndRoom) {
  std::vector<int64_t> v{1, 2, 3};
  reserve_huge(v, 1 << 20);  // 8 MiB
  EXPECT_EQ(v, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_GE(v.capacity(), size_t{1} << 20);
  const int64_t* data = v.data();
  reserve_huge(v, 16);  // room already there: nothing moves
  EXPECT_EQ(v.data(), data);
  v.resize(1 << 20, 7);
  EXPECT_EQ(v.back(), 7);

  std::string s = "label";
  reserve_huge(s, 8 << 20);
  EXPECT_EQ(s, "label");
  EXPECT_GE(s.capacity(), size_t{8} << 20);
}

TEST(HugePages, AdvisedRoomMayTakeHugePagesWhereTheKernelOffersThem) {
  std::vector<char> v;
  reserve_huge(v, 16 << 20);
  const char* middle = v.data() + (8 << 20);  // inside a whole 2 MiB page of the room
  const std::string mode = thp_mode();
  const std::optional<bool> eligible = thp_eligible(middle);
  if (mode.empty() || !eligible) GTEST_SKIP() << "this kernel does not say what takes huge pages";
  EXPECT_EQ(*eligible, mode == "always" || mode == "madvise") << "THP mode " << mode;

  // The same room where the host takes back free memory is left in 4 KiB pages, unless the
  // kernel gives huge pages to all memory.
  std::vector<char> w;
  reserve_huge_unless_reclaimed(w, 16 << 20);
  const std::optional<bool> w_eligible = thp_eligible(w.data() + (8 << 20));
  ASSERT_TRUE(w_eligible);
  EXPECT_EQ(*w_eligible, mode == "always" || (mode == "madvise" && !host_takes_back_free_memory()))
      << "THP mode " << mode << ", host takes back free memory: " << host_takes_back_free_memory();
}

// The balloon's feature bits as sysfs writes them: bit 5 is free page reporting.
TEST(HugePages, ABalloonThatReportsFreePagesIsFoundByItsFeatureBit) {
  namespace fs = std::filesystem;
  const fs::path driver = fs::temp_directory_path() / ("stepscope-balloon-" + std::to_string(::getpid()));
  fs::remove_all(driver);
  auto device = [&](const std::string& name, const char* features) {
    fs::create_directories(driver / name);
    if (features) std::ofstream(driver / name / "features") << features << "\n";
  };
  EXPECT_FALSE(balloon_reports_free_pages(driver.string()));  // no driver: no balloon
  fs::create_directories(driver);
  std::ofstream(driver / "uevent") << "DRIVER=virtio_balloon\n";  // the driver's own files
  EXPECT_FALSE(balloon_reports_free_pages(driver.string()));
  device("virtio0", "01100000000000000000000000000000100000000000");  // stats, deflate on OOM
  device("virtio1", nullptr);                                         // no features file
  device("virtio2", "0110");                                          // too short to say
  EXPECT_FALSE(balloon_reports_free_pages(driver.string()));
  device("virtio3", "01100101000000000000000000000000100000000000");  // and free page reporting
  EXPECT_TRUE(balloon_reports_free_pages(driver.string()));
  fs::remove_all(driver);
}

TEST(HugePages, SmallOrEmptyRangesAreLeftAlone) {
  advise_huge_pages(nullptr, 0);
  std::vector<char> small(1 << 20);
  advise_huge_pages(small.data(), small.size());  // under 4 MiB: no advice, no error
  EXPECT_EQ(small[12345], 0);
}

// Prefaulting maps pages without changing them: what was written stays, the rest reads zero,
// and where the kernel has MADV_POPULATE_WRITE (5.14) every page inside is then resident.
TEST(HugePages, PrefaultedPagesKeepWhatTheyHoldAndAreMapped) {
  const size_t page = 4096, pages = 64;
  void* mapped = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(mapped);
  bytes[3 * page + 5] = 42;
  bytes[40 * page] = 7;
  // From inside the second page to inside the last but one: those two pages are asked for too.
  prefault_pages(bytes + page + 100, (pages - 2) * page - 200);
  EXPECT_EQ(bytes[3 * page + 5], 42);
  EXPECT_EQ(bytes[40 * page], 7);
  EXPECT_EQ(bytes[20 * page + 1], 0);
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(mincore(mapped, pages * page, resident.data()), 0);
  const bool kernel_populates = madvise(bytes + 10 * page, page, 23 /* MADV_POPULATE_WRITE */) == 0;
  if (kernel_populates) {
    for (size_t i = 1; i + 1 < pages; ++i) EXPECT_TRUE(resident[i] & 1) << "page " << i;
  }
  // Outside the range: left alone.
  EXPECT_FALSE(resident[0] & 1);
  EXPECT_FALSE(resident[pages - 1] & 1);
  ASSERT_EQ(munmap(mapped, pages * page), 0);
  prefault_pages(mapped, pages * page);  // no longer mapped: nothing happens
  prefault_pages(nullptr, 0);
}

// Mapping a piece at a time covers the same pages as one call (a range over several pieces,
// starting and ending inside a page) where it has no stop flag, and maps nothing once told to
// stop.
TEST(HugePages, PrefaultingUntilStoppedMapsEveryPageOrStops) {
  const size_t page = 4096, pages = 3 * 256 + 10;  // three 1 MiB pieces and a bit
  void* mapped = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(mapped);
  bytes[300 * page + 9] = 42;
  const std::atomic<bool> stop{true};
  std::vector<unsigned char> resident(pages);
  EXPECT_FALSE(prefault_pages_until(bytes + page + 100, (pages - 2) * page - 200, &stop));
  ASSERT_EQ(mincore(mapped, pages * page, resident.data()), 0);
  for (size_t i = 0; i < pages; ++i) EXPECT_EQ(resident[i] & 1, i == 300 ? 1 : 0) << "page " << i;

  EXPECT_TRUE(prefault_pages_until(bytes + page + 100, (pages - 2) * page - 200, nullptr));
  EXPECT_EQ(bytes[300 * page + 9], 42);
  ASSERT_EQ(mincore(mapped, pages * page, resident.data()), 0);
  if (madvise(bytes + 10 * page, page, 23 /* MADV_POPULATE_WRITE */) == 0) {
    for (size_t i = 1; i + 1 < pages; ++i) EXPECT_TRUE(resident[i] & 1) << "page " << i;
  }
  EXPECT_FALSE(resident[0] & 1);
  EXPECT_FALSE(resident[pages - 1] & 1);
  ASSERT_EQ(munmap(mapped, pages * page), 0);
  EXPECT_TRUE(prefault_pages_until(nullptr, 0, &stop));  // nothing to map: all of it mapped
}

}  // namespace
}  // namespace stepscope
