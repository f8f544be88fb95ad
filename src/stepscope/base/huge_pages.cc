#include "stepscope/base/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>

namespace stepscope {

bool balloon_reports_free_pages(const std::string& driver_dir) {
  constexpr size_t kReportingBit = 5;
  try {
    std::error_code missing;
    for (const auto& entry : std::filesystem::directory_iterator(driver_dir, missing)) {
      std::ifstream features(entry.path() / "features");  // devices have one; the driver's own files not
      std::string bits;
      if (features >> bits && bits.size() > kReportingBit && bits[kReportingBit] == '1') return true;
    }
  } catch (const std::exception&) {  // sysfs changing under the walk: as if there were no balloon
  }
  return false;
}

bool host_takes_back_free_memory() {
  static const bool reclaimed = balloon_reports_free_pages("/sys/bus/virtio/drivers/virtio_balloon");
  return reclaimed;
}

void advise_huge_pages(const void* data, size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last <= first) return;
  // Advice only: an error (no THP support) leaves the memory as it was.
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

void prefault_pages(const void* data, size_t bytes) noexcept {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // the kernel's value, where the C library predates it
#endif
  constexpr uintptr_t kPage = 4096;
  if (bytes == 0) return;
  // Every page holding a byte of the range, the partly covered ones at its ends too: they are
  // the caller's memory's pages as well, and left out, a range cut into pieces (map_room)
  // would skip two pages a piece.
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = begin & ~(kPage - 1);
  const uintptr_t last = (begin + bytes + kPage - 1) & ~(kPage - 1);
  (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

bool prefault_pages_until(const void* data, size_t bytes, const std::atomic<bool>* stop) noexcept {
  constexpr size_t kPiece = size_t{1} << 20;  // ~0.3-2 ms to map on this workplace's VMs
  const auto* at = static_cast<const std::byte*>(data);
  const std::byte* const end = at + bytes;
  while (at < end) {
    if (stop && stop->load(std::memory_order_relaxed)) return false;
    // Pieces end on a page boundary: no page is mapped twice, none skipped.
    const auto next_page = (reinterpret_cast<uintptr_t>(at) + kPiece) & ~uintptr_t{4095};
    const std::byte* piece_end = std::min(end, reinterpret_cast<const std::byte*>(next_page));
    prefault_pages(at, static_cast<size_t>(piece_end - at));
    at = piece_end;
  }
  return true;
}

}  // namespace stepscope
