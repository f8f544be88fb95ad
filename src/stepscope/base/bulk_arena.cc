#include "stepscope/base/bulk_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>

#include "stepscope/base/huge_pages.h"

namespace stepscope {
namespace bulk_arena_detail {

// One mapping, 2 MiB aligned so that huge pages cover all of it, and how much of it the uses
// have taken. `live` counts allocations not yet freed, plus kOpen while the arena is alive: an
// allocation may be freed before the Use that made it has added it to the count, and the count
// must not reach zero then.
struct Block {
  static constexpr int64_t kOpen = int64_t{1} << 62;
  char* base = nullptr;
  size_t size = 0;
  std::atomic<size_t> taken{0};
  std::atomic<int64_t> live{kOpen};

  // Takes `count` off the live count; the last one makes the block the spare.
  void release(int64_t count) noexcept {
    if (live.fetch_sub(count, std::memory_order_acq_rel) == count) keep_as_spare(this);
  }
  void unmap() noexcept {
    munmap(base, size);
    delete this;
  }
  static void keep_as_spare(Block* block) noexcept;
  static Block* take_spare(size_t size) noexcept;
};

namespace {
// The last block whose allocations are all gone: the next arena that fits in it reuses it.
// Touched once a big view, so a lock, not a lock-free protocol.
std::mutex spare_mutex;
Block* spare_block = nullptr;

Block* swap_spare(Block* block) noexcept {
  std::lock_guard<std::mutex> lock(spare_mutex);
  return std::exchange(spare_block, block);
}
}  // namespace

void Block::keep_as_spare(Block* block) noexcept {
#ifdef MADV_FREE
  // Its pages stay mapped for the next arena, unless the kernel needs the memory first.
  (void)madvise(block->base, block->size, MADV_FREE);
#endif
  if (Block* before = swap_spare(block)) before->unmap();
}

Block* Block::take_spare(size_t size) noexcept {
  Block* block = swap_spare(nullptr);
  if (block && block->size < size) {
    block->unmap();
    return nullptr;
  }
  if (block) {
    block->taken.store(0, std::memory_order_relaxed);
    block->live.store(kOpen, std::memory_order_relaxed);
  }
  return block;
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// What a thread takes of its block at a time: big enough that the shared count is touched
// once a few thousand allocations, small enough that two threads waste little.
constexpr size_t kSlice = size_t{1} << 20;

thread_local BulkArena::Use* current_use = nullptr;

struct Header {
  Block* block;  // null: from malloc
  size_t unused;
};
static_assert(sizeof(Header) == BulkArena::kHeader);

void* from_malloc(size_t bytes) {
  void* raw = std::malloc(bytes + sizeof(Header));
  if (!raw) throw std::bad_alloc();
  static_cast<Header*>(raw)->block = nullptr;
  return static_cast<char*>(raw) + sizeof(Header);
}

}  // namespace

void deallocate(void* p) noexcept {
  if (!p) return;
  Header* header = reinterpret_cast<Header*>(static_cast<char*>(p) - sizeof(Header));
  if (header->block)
    header->block->release(1);
  else
    std::free(header);
}

}  // namespace bulk_arena_detail

using bulk_arena_detail::Block;

void* bulk_arena_detail::allocate(size_t bytes) {
  BulkArena::Use* use = current_use;
  if (!use || !use->block_) return from_malloc(bytes);
  const size_t room = BulkArena::room_for(bytes);
  if (static_cast<size_t>(use->end_ - use->next_) < room) {
    // A new slice for this thread (what was left of the last one stays unused).
    const size_t slice = std::max(room, kSlice);
    Block& block = *use->block_;
    const size_t at = block.taken.fetch_add(slice, std::memory_order_relaxed);
    if (at > block.size || block.size - at < room) return from_malloc(bytes);  // the arena is full
    use->next_ = block.base + at;
    use->end_ = block.base + std::min(block.size, at + slice);
  }
  Header* header = reinterpret_cast<Header*>(use->next_);
  header->block = use->block_;
  use->next_ += room;
  ++use->made_;
  return header + 1;
}

BulkArena::BulkArena(size_t bytes) {
  if (bytes == 0) return;
  const size_t size = (bytes + bulk_arena_detail::kHugePage - 1) & ~(bulk_arena_detail::kHugePage - 1);
  if ((block_ = Block::take_spare(size))) return;
  // Mapped with a huge page's worth to spare, then cut to a 2 MiB boundary at both ends.
  const size_t mapped = size + bulk_arena_detail::kHugePage;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return;  // no room reserved: every allocation from malloc
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + bulk_arena_detail::kHugePage - 1) & ~(bulk_arena_detail::kHugePage - 1);
  if (aligned > start) munmap(raw, aligned - start);
  if (const uintptr_t tail = start + mapped - (aligned + size); tail > 0)
    munmap(reinterpret_cast<void*>(aligned + size), tail);
  block_ = new Block;
  block_->base = reinterpret_cast<char*>(aligned);
  block_->size = size;
  advise_huge_pages(block_->base, size);
}

void BulkArena::drop_spare() noexcept {
  if (Block* spare = bulk_arena_detail::swap_spare(nullptr)) spare->unmap();
}

size_t BulkArena::spare_bytes() noexcept {
  std::lock_guard<std::mutex> lock(bulk_arena_detail::spare_mutex);
  return bulk_arena_detail::spare_block ? bulk_arena_detail::spare_block->size : 0;
}

BulkArena::~BulkArena() {
  if (block_) block_->release(Block::kOpen);
}

BulkArena::Use::Use(BulkArena& arena) noexcept : block_(arena.block_), before_(bulk_arena_detail::current_use) {
  bulk_arena_detail::current_use = this;
}

BulkArena::Use::~Use() {
  bulk_arena_detail::current_use = before_;
  if (block_ && made_ > 0) block_->live.fetch_add(made_, std::memory_order_relaxed);
}

}  // namespace stepscope
