// Room for a big result's many small arrays, made at once and freed together: a tfprof view of
// 10^6 nodes makes ~10^4 arrays of children and 10^6 of input shapes, ~360 MB. From malloc they
// are new memory each query (past its trim threshold it gives them back), a fault each 4 KiB
// page; from a BulkArena they come from one block advised huge pages, which the next big view
// reuses (below). The scope view of 10^6 nodes, first query: 0.39-1.03 µs a node against
// 0.59-1.36 (BENCHMARKS.md, issue 16, thirty-first session).
//
//   BulkArena arena(bytes);               // room for about `bytes` of allocations
//   { BulkArena::Use use(arena); ... }    // on each thread that makes them
//
// While a Use is alive on a thread, BulkAllocator's requests there come from the arena, in
// slices a thread takes for itself (no atomic an allocation, no cache line shared between two
// threads making at once); elsewhere, and once the arena is full, from malloc. Each allocation
// carries a 16-byte header naming its block, so a container made in an arena may be moved,
// kept and freed anywhere, any time. Freeing into an arena gives no room back: it is for memory
// made once.
//
// When the arena is gone and its last allocation freed, its block is kept as the process's
// spare (one at most; its pages marked MADV_FREE, so the kernel may take them back when it
// needs memory): the next arena that fits in it reuses it, already mapped. On a VM whose host
// takes back free memory, mapping a 10^6-node view's results anew cost 0.1-1.6 s of system
// time a query (thirtieth session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace stepscope {

namespace bulk_arena_detail {
struct Block;
void* allocate(size_t bytes);
void deallocate(void* p) noexcept;
}  // namespace bulk_arena_detail

class BulkArena {
 public:
  // Room for `bytes` of allocations (room_for each), reserved, not yet mapped: pages no
  // allocation reaches cost nothing. An arena of no bytes has no room: its uses take from malloc.
  explicit BulkArena(size_t bytes);
  BulkArena() = default;
  // Uses of it must be over by then; what was made in it stays until it is freed.
  ~BulkArena();
  // Moved, it takes its room along (Uses made on it stay good: they hold the room, not the arena).
  BulkArena(BulkArena&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
  BulkArena& operator=(BulkArena&& other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }

  // Unmaps the spare block now (see above), for a program done with big views.
  static void drop_spare() noexcept;
  // The spare block's size in bytes (0: none).
  static size_t spare_bytes() noexcept;

  // The room an allocation of `bytes` takes in an arena: its header, rounded up to 16.
  static constexpr size_t room_for(size_t bytes) { return (bytes + 2 * kHeader - 1) / kHeader * kHeader; }
  static constexpr size_t kHeader = 16;

  // While alive, BulkAllocator's requests on this thread are served from `arena`. Uses nest
  // (the one before is restored).
  class Use {
   public:
    explicit Use(BulkArena& arena) noexcept;
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    friend void* bulk_arena_detail::allocate(size_t);
    bulk_arena_detail::Block* block_;
    char* next_ = nullptr;  // this thread's slice: [next_, end_)
    char* end_ = nullptr;
    int64_t made_ = 0;  // allocations made here, added to the block's count when done
    Use* before_;
  };

 private:
  bulk_arena_detail::Block* block_ = nullptr;
};

// std::allocator's interface over the above: stateless, so containers move and swap as with
// std::allocator.
template <typename T>
struct BulkAllocator {
  using value_type = T;
  BulkAllocator() noexcept = default;
  template <typename U>
  BulkAllocator(const BulkAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(bulk_arena_detail::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { bulk_arena_detail::deallocate(p); }
  template <typename U>
  bool operator==(const BulkAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace stepscope
