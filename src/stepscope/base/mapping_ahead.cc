#include "stepscope/base/mapping_ahead.h"

#include <algorithm>
#include <system_error>

#include "stepscope/base/huge_pages.h"

namespace stepscope {

size_t NewMemory::bytes() const {
  size_t n = 0;
  for (const auto* spans : {&early, &late})
    for (const auto& span : *spans) n += span.size();
  return n;
}

void map_now(const NewMemory& memory) noexcept {
  for (const auto* spans : {&memory.early, &memory.late})
    for (const auto& span : *spans) prefault_pages(span.data(), span.size());
}

void MappingAhead::map() noexcept {
  int waiting = kWaiting;
  if (!state_.compare_exchange_strong(waiting, kMapping, std::memory_order_acq_rel)) return;  // stopped first
  const auto in_pieces = [this](const std::vector<std::span<const std::byte>>& spans) {
    // A piece is at least 8 pages: a call costs ~1.4 µs more than its pages on this workplace's
    // VMs (a kept step of 1,000 nodes took ~50 µs longer with its 36 pages of output
    // descriptions mapped a page a call).
    constexpr size_t kPieces = 64, kPage = 4096, kMinPiece = 8 * kPage;
    for (size_t k = 0; k < kPieces; ++k)
      for (const auto& span : spans) {
        if (stop_.load(std::memory_order_acquire)) return false;
        const size_t piece = std::max(kMinPiece, ((span.size() + kPieces - 1) / kPieces + kPage - 1) / kPage * kPage);
        const size_t at = std::min(span.size(), k * piece);
        prefault_pages(span.data() + at, std::min(piece, span.size() - at));
      }
    return true;
  };
  if (in_pieces(memory_.early)) in_pieces(memory_.late);
  state_.store(kOver, std::memory_order_release);
  state_.notify_all();
}

void MappingAhead::stop() noexcept {
  stop_.store(true, std::memory_order_release);
  int s = kWaiting;
  if (state_.compare_exchange_strong(s, kOver, std::memory_order_acq_rel)) return;  // never started
  while (s != kOver) {
    state_.wait(s, std::memory_order_acquire);
    s = state_.load(std::memory_order_acquire);
  }
}

MappedBeside::MappedBeside(NewMemory memory, size_t min_bytes) {
  if (memory.bytes() < min_bytes || hardware_cores() < 2) return;
  mapping_ = std::make_shared<MappingAhead>(std::move(memory));
  try {
    thread_ = ThreadBeside([mapping = mapping_] { mapping->map(); });
  } catch (const std::system_error&) {  // no thread to be had: the writer faults its pages in
  }
}

MappedBeside::~MappedBeside() {
  if (mapping_) mapping_->stop();
}

}  // namespace stepscope
