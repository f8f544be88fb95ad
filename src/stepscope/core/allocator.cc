#include "stepscope/core/allocator.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <string>
#include <type_traits>

#include "stepscope/base/error.h"
#include "stepscope/base/huge_pages.h"

// GCC defines __SANITIZE_ADDRESS__; clang 16 (the sanitizer build's compiler) only answers
// __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
#define STEPSCOPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STEPSCOPE_ASAN 1
#endif
#endif
#ifndef STEPSCOPE_ASAN
#define STEPSCOPE_ASAN 0
#endif
#if STEPSCOPE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace stepscope {

constinit thread_local RecordingScope tls_recording{};

namespace {
std::mutex recorder_pool_mutex;
std::vector<AllocationRecorder*>& recorder_pool() {
  static auto* pool = new std::vector<AllocationRecorder*>();  // never destroyed, like its recorders
  return *pool;
}
}  // namespace

AllocationRecorder* AllocationRecorder::take_from_pool() {
  {
    std::lock_guard<std::mutex> lock(recorder_pool_mutex);
    auto& pool = recorder_pool();
    if (!pool.empty()) {
      AllocationRecorder* r = pool.back();
      pool.pop_back();
      return r;
    }
  }
  return new AllocationRecorder();
}

AllocationRecorder* AllocationRecorder::acquire() {
  AllocationRecorder* r = take_from_pool();
  std::lock_guard<std::mutex> lock(r->mutex_);
  r->open_ = true;
  return r;
}

void AllocationRecorder::prepare(size_t events, size_t nodes, const std::atomic<bool>* stop) {
  // Not held to kMaxKeptEvents: what a step needs, once (its recycle() trims a log that big).
  AllocationRecorder* r = take_from_pool();
  {
    std::lock_guard<std::mutex> lock(r->mutex_);
    if (r->logs_.empty()) r->logs_.push_back(std::make_unique<ThreadLog>());
    ThreadLog& log = *r->logs_.front();  // empty: recycled logs are
    auto grow = [&](auto& array, size_t n) {
      if (array.capacity() >= n) return;
      array.reserve(n);
      prefault_pages_until(array.data(), n * sizeof(array[0]), stop);
    };
    grow(log.events, events);
    grow(log.nodes, nodes);
  }
  std::lock_guard<std::mutex> lock(recorder_pool_mutex);
  recorder_pool().push_back(r);  // the next one acquire() gives
}

namespace {
// The most a recorder's first log is grown to ahead of a step (~1.5 GB of events).
constexpr size_t kMostEventsAhead = size_t{1} << 25;
}  // namespace

std::vector<std::span<const std::byte>> AllocationRecorder::expect(size_t events, size_t nodes) {
  // The other threads' logs are given a share of the step's at most (each records a part of it).
  expected_events_ = std::min(events, kMaxKeptEvents);
  expected_nodes_ = std::min(nodes, kMaxKeptEvents);
  std::vector<std::span<const std::byte>> new_memory;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_.empty()) return new_memory;  // a thread took its log already
  if (logs_.empty()) logs_.push_back(std::make_unique<ThreadLog>());
  ThreadLog& log = *logs_.front();  // what thread_log() gives the first thread
  auto grow = [&](auto& array, size_t n) {
    if (array.capacity() >= n) return;
    array.reserve(n);
    new_memory.push_back(std::as_bytes(std::span(array.data(), n)));
  };
  // The first thread's log is given the whole step's room: on one thread it records all of it.
  grow(log.events, std::min(events, kMostEventsAhead));
  grow(log.nodes, std::min(nodes, kMostEventsAhead));
  return new_memory;
}

void AllocationRecorder::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = false;
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void AllocationRecorder::recycle() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A big log is kept where its step filled half of it or more: the next step of that plan
    // (a traced step of a million nodes records two million events, 96 MB) finds it mapped.
    auto reset = [](ThreadLog& log) {
      auto trim = [](auto& array) {
        // (Not `array = {}`: that assigns an empty list, and keeps the memory.)
        if (array.capacity() > kMaxKeptEvents && array.size() < array.capacity() / 2)
          array = std::remove_reference_t<decltype(array)>();
      };
      trim(log.events);
      trim(log.nodes);
      log.events.clear();
      log.nodes.clear();
    };
    for (ThreadLog* log : active_) reset(*log);
    active_.clear();
    expected_events_ = expected_nodes_ = 0;
    reset(other_);
  }
  std::lock_guard<std::mutex> lock(recorder_pool_mutex);
  recorder_pool().push_back(this);
}

AllocationRecorder::ThreadLog* AllocationRecorder::thread_log() {
  struct Cached {
    const AllocationRecorder* recorder;
    uint64_t generation;
    ThreadLog* log;
  };
  constinit thread_local Cached cached{};
  const uint64_t gen = generation_.load(std::memory_order_relaxed);
  if (cached.recorder == this && cached.generation == gen) return cached.log;
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_.size() == logs_.size()) logs_.push_back(std::make_unique<ThreadLog>());
  ThreadLog* log = logs_[active_.size()].get();
  log->events.reserve(expected_events_);
  log->nodes.reserve(expected_nodes_);
  active_.push_back(log);
  cached = {this, gen, log};
  return log;
}

void AllocationRecorder::record_other(uint64_t generation, const AllocationEvent& e) {
  if (generation_.load(std::memory_order_acquire) != generation) return;  // long closed: no lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ && generation_.load(std::memory_order_relaxed) == generation) other_.events.push_back(e);
}

std::vector<AllocationRecorder::PerAllocator> AllocationRecorder::events_by_allocator() const {
  std::vector<PerAllocator> out;
  auto add = [&](const ThreadLog& log) {
    for (const AllocationEvent& e : log.events) {
      auto it = std::find_if(out.begin(), out.end(), [&](const PerAllocator& p) { return p.allocator == e.allocator; });
      if (it == out.end()) it = out.insert(out.end(), {e.allocator, {}});
      it->events.push_back(e);
    }
  };
  for (const ThreadLog* log : active_) add(*log);
  add(other_);
  for (auto& per : out)
    std::stable_sort(per.events.begin(), per.events.end(),
                     [](const AllocationEvent& a, const AllocationEvent& b) { return a.time_ns < b.time_ns; });
  return out;
}

namespace {

// Stripe i of every allocator belongs to one live thread at a time; the last one is shared by
// the threads that found none free (and by exiting threads), under atomic read-modify-writes.
constexpr int kStripes = 64;
constexpr int kSharedStripe = kStripes - 1;
constexpr int64_t kIdBlock = 1024;

std::mutex stripe_mutex;
std::vector<int>& free_stripes() {
  static auto* free = [] {
    auto* v = new std::vector<int>();
    for (int i = kSharedStripe - 1; i >= 0; --i) v->push_back(i);
    return v;
  }();
  return *free;
}
constinit thread_local int tls_stripe = -1;  // -1: none taken yet

// Gives the thread's stripe back when it exits; its counts stay for the next owner to add to.
struct StripeOwner {
  int index;
  ~StripeOwner() {
    std::lock_guard<std::mutex> lock(stripe_mutex);
    if (index != kSharedStripe) free_stripes().push_back(index);
    tls_stripe = kSharedStripe;
  }
};

int take_stripe() {
  int index = kSharedStripe;
  {
    std::lock_guard<std::mutex> lock(stripe_mutex);
    if (!free_stripes().empty()) {
      index = free_stripes().back();
      free_stripes().pop_back();
    }
  }
  thread_local StripeOwner owner{index};
  tls_stripe = owner.index;
  return owner.index;
}

inline int stripe_index() {
  const int i = tls_stripe;
  return i >= 0 ? i : take_stripe();
}

}  // namespace

Allocator::Allocator(std::string name) : name_(std::move(name)), stripes_(new Stripe[kStripes]) {}
Allocator::~Allocator() = default;

int64_t Allocator::note_allocation(int64_t bytes) {
  const int64_t now = bytes_in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  // Peak and largest change rarely: a plain load first keeps them off the hot path.
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  int64_t largest = largest_.load(std::memory_order_relaxed);
  while (bytes > largest && !largest_.compare_exchange_weak(largest, bytes, std::memory_order_relaxed)) {
  }
  const int index = stripe_index();
  Stripe& st = stripes_[index];
  if (index == kSharedStripe) {
    st.num_allocs.fetch_add(1, std::memory_order_relaxed);
    st.total_bytes.fetch_add(bytes, std::memory_order_relaxed);
    return next_id_block_.fetch_add(1, std::memory_order_relaxed);
  }
  st.num_allocs.store(st.num_allocs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  st.total_bytes.store(st.total_bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  if (st.next_id == st.id_limit) {
    st.next_id = next_id_block_.fetch_add(kIdBlock, std::memory_order_relaxed);
    st.id_limit = st.next_id + kIdBlock;
  }
  return st.next_id++;
}

void Allocator::note_free(int64_t bytes) { bytes_in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

void* Allocator::allocate(size_t bytes, size_t alignment, int64_t* allocation_id) {
  void* p = raw_allocate(bytes, alignment);
  if (!p)
    throw ResourceExhaustedError("OOM when allocating " + std::to_string(bytes) + " bytes: allocator " + name_ +
                                 " ran out of memory (" + std::to_string(bytes_in_use()) + " bytes in use)");
  const int64_t id = note_allocation(static_cast<int64_t>(bytes));
  if (allocation_id) *allocation_id = id;
  return p;
}

void Allocator::deallocate(void* ptr, size_t bytes) {
  raw_deallocate(ptr, bytes);
  note_free(static_cast<int64_t>(bytes));
}

AllocatorStats Allocator::stats() const {
  AllocatorStats stats{bytes_in_use_.load(), peak_.load(), 0, 0, largest_.load()};
  for (int i = 0; i < kStripes; ++i) {
    stats.num_allocs += stripes_[i].num_allocs.load(std::memory_order_relaxed);
    stats.total_allocated_bytes += stripes_[i].total_bytes.load(std::memory_order_relaxed);
  }
  cache_stats(stats);
  return stats;
}

namespace {

// Per-thread caches of freed small blocks, so that a step of tiny ops does not pay glibc's
// memalign/free (~1,000 instructions) per tensor. Blocks up to 64 KiB come in power-of-two size
// classes (64 B .. 64 KiB); a freed block goes to the cache of the thread that frees it (which
// need not be the one that allocated it) as long as that cache holds under kMaxCachedBytes and
// its class under kMaxCachedBlocks, otherwise back to glibc. The caches hold free memory only:
// Allocator's stats (bytes in use, peak, counts) count what tensors asked for, cached or not.
constexpr size_t kMinClassSize = 64;
constexpr int kNumClasses = 11;  // 64 B << 0 .. 64 B << 10 = 64 KiB
constexpr size_t kMaxClassSize = kMinClassSize << (kNumClasses - 1);
constexpr size_t kMaxCachedBytes = size_t{1} << 20;  // per thread
constexpr uint32_t kMaxCachedBlocks = 512;           // per thread and class

int size_class(size_t bytes) {
  return bytes <= kMinClassSize ? 0 : std::bit_width(bytes - 1) - std::bit_width(kMinClassSize - 1);
}

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable while the thread's other thread_locals are
// destroyed (a tensor freed then goes straight to glibc).
struct ThreadCache {
  enum State : uint8_t { kUnused, kActive, kDead };
  FreeBlock* head[kNumClasses];
  uint32_t count[kNumClasses];
  size_t cached_bytes;
  State state;
};
constinit thread_local ThreadCache tls_cache{};

void poison(void* p, size_t n) {
#if STEPSCOPE_ASAN
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}
void unpoison(void* p, size_t n) {
#if STEPSCOPE_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

// Gives the calling thread's cached small blocks back to glibc; returns their bytes.
size_t release_thread_cache() {
  ThreadCache& c = tls_cache;
  const size_t released = c.cached_bytes;
  for (int k = 0; k < kNumClasses; ++k) {
    while (FreeBlock* b = c.head[k]) {
      unpoison(b, kMinClassSize << k);
      c.head[k] = b->next;
      std::free(b);
    }
    c.count[k] = 0;
  }
  c.cached_bytes = 0;
  return released;
}

// Empties a thread's cache when the thread exits.
struct ThreadCacheReaper {
  ~ThreadCacheReaper() {
    release_thread_cache();
    tls_cache.state = ThreadCache::kDead;
  }
};

// Blocks over kMaxClassSize, cached whole in size classes: eight per power of two, each a
// multiple of 8 KiB (so of the page size). The mapping is the OS's (mmap, not glibc's heap), so
// that what is given back really goes back, and a block's pages past the request stay untouched.
// A free block carries its links in its first bytes (the cache allocates nothing); one mutex
// guards the cache: a large allocation is rare next to the work on its memory.
class LargeBlockCache {
 public:
  static constexpr int kSubClasses = 8;
  static constexpr size_t kMaxBytes = size_t{1} << 47;  // beyond any address space

  static size_t class_size(size_t bytes) {
    const int k = std::bit_width(bytes - 1) - 1;  // 2^k < bytes <= 2^(k+1)
    const size_t step = size_t{1} << (k - 3);
    return (bytes + step - 1) / step * step;
  }

  LargeBlockCache() {
    size_t limit = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE)) / 4;
    if (const char* mb = std::getenv("STEPSCOPE_ALLOCATOR_CACHE_MB"); mb && *mb) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(mb, &end, 10);
      if (end && *end == 0) limit = static_cast<size_t>(v) << 20;
    }
    limit_.store(limit, std::memory_order_relaxed);
  }

  void* allocate(size_t bytes) {
    if (bytes > kMaxBytes) return nullptr;
    const size_t size = class_size(bytes);
    const int k = index(size);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (Block* b = heads_[k]) {
        unlink(b);
        unpoison(b, size);
        poison(reinterpret_cast<char*>(b) + bytes, size - bytes);  // the class's rounding
        return b;
      }
    }
    void* p = map(size);
    if (!p && release() > 0) p = map(size);  // what the cache held may be what is missing
    if (p) poison(static_cast<char*>(p) + bytes, size - bytes);
    return p;
  }

  void deallocate(void* ptr, size_t bytes) {
    const size_t size = class_size(bytes);
    if (size > limit_.load(std::memory_order_relaxed)) return unmap(ptr, size);
    unpoison(ptr, size);
    poison(static_cast<char*>(ptr) + sizeof(Block), size - sizeof(Block));
    Block* evicted = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto* b = new (ptr) Block{size, index(size), nullptr, nullptr, nullptr, nullptr};
      if (Block* head = heads_[b->klass]) head->prev = b, b->next = head;
      heads_[b->klass] = b;
      if (newest_) newest_->newer = b, b->older = newest_;
      newest_ = b;
      if (!oldest_) oldest_ = b;
      cached_ += size;
      evicted = evict(limit_.load(std::memory_order_relaxed));
    }
    unmap_all(evicted);
  }

  void set_limit(size_t bytes) {
    limit_.store(bytes, std::memory_order_relaxed);
    Block* evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      evicted = evict(bytes);
    }
    unmap_all(evicted);
  }
  size_t limit() const { return limit_.load(std::memory_order_relaxed); }

  size_t release() {
    Block* evicted;
    size_t released;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released = cached_;
      evicted = evict(0);
    }
    unmap_all(evicted);
    return released;
  }

  int64_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(cached_);
  }
  int64_t num_maps() const { return num_maps_.load(std::memory_order_relaxed); }

 private:
  // A cached block's first bytes: its class list (most recently freed first, whose memory is
  // likeliest still in cache) and the cache's list in freeing order (the oldest go first).
  struct Block {
    size_t size;
    int klass;
    Block *prev, *next;    // in heads_[klass]
    Block *older, *newer;  // from oldest_ to newest_
  };
  static constexpr int kNumClasses = (64 - 17) * kSubClasses;

  static int index(size_t size) {
    const int k = std::bit_width(size - 1) - 1;
    return (k - 16) * kSubClasses + static_cast<int>(size >> (k - 3)) - (kSubClasses + 1);
  }

  void unlink(Block* b) {
    (b->prev ? b->prev->next : heads_[b->klass]) = b->next;
    if (b->next) b->next->prev = b->prev;
    (b->older ? b->older->newer : oldest_) = b->newer;
    (b->newer ? b->newer->older : newest_) = b->older;
    cached_ -= b->size;
  }

  // Takes the oldest blocks out until at most `limit` bytes stay; returns them chained by `next`.
  Block* evict(size_t limit) {
    Block* out = nullptr;
    while (cached_ > limit) {
      Block* b = oldest_;
      unlink(b);
      b->next = out;
      out = b;
    }
    return out;
  }

  void* map(size_t size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    num_maps_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  static void unmap(void* p, size_t size) {
    unpoison(p, size);
    munmap(p, size);
  }
  static void unmap_all(Block* b) {
    while (b) {
      Block* next = b->next;
      unmap(b, b->size);
      b = next;
    }
  }

  mutable std::mutex mutex_;
  Block* heads_[kNumClasses] = {};
  Block *oldest_ = nullptr, *newest_ = nullptr;
  size_t cached_ = 0;
  std::atomic<size_t> limit_{0};
  std::atomic<int64_t> num_maps_{0};
};

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : Allocator("cpu") {}

  size_t allocated_size(size_t bytes, size_t alignment) const override {
    if (bytes > kMaxClassSize) return LargeBlockCache::class_size(bytes);
    return std::max(kMinClassSize << size_class(bytes), alignment);
  }

  void set_cache_limit(size_t bytes) override { large_.set_limit(bytes); }
  size_t cache_limit() const override { return large_.limit(); }
  size_t release_cached_memory() override { return large_.release() + release_thread_cache(); }

 protected:
  void* raw_allocate(size_t bytes, size_t alignment) override {
    if (bytes > kMaxClassSize) {
      // Mappings are page-aligned; tensors ask for 64 bytes.
      if (alignment > kPageAlignment)
        throw InternalError("allocator " + name() + ": no alignment over " + std::to_string(kPageAlignment) +
                            " bytes (asked for " + std::to_string(alignment) + ")");
      return large_.allocate(bytes);
    }
    const int k = size_class(bytes);
    const size_t size = kMinClassSize << k;
    if (alignment <= kMinClassSize) {
      ThreadCache& c = tls_cache;
      if (FreeBlock* b = c.head[k]) {
        unpoison(b, size);
        c.head[k] = b->next;
        c.count[k]--;
        c.cached_bytes -= size;
        return b;
      }
      return std::aligned_alloc(kMinClassSize, size);
    }
    // Over-aligned: a block of at least the class size, so it may join the cache when freed.
    return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  }

  void raw_deallocate(void* ptr, size_t bytes) override {
    if (bytes > kMaxClassSize) return large_.deallocate(ptr, bytes);
    ThreadCache& c = tls_cache;
    const int k = size_class(bytes);
    const size_t size = kMinClassSize << k;
    if (c.state == ThreadCache::kUnused) {
      thread_local ThreadCacheReaper reaper;  // registers the exit hook for this thread
      (void)reaper;
      c.state = ThreadCache::kActive;
    }
    if (c.state == ThreadCache::kActive && c.count[k] < kMaxCachedBlocks && c.cached_bytes + size <= kMaxCachedBytes) {
      auto* b = static_cast<FreeBlock*>(ptr);
      b->next = c.head[k];
      c.head[k] = b;
      c.count[k]++;
      c.cached_bytes += size;
      poison(b, size);
      return;
    }
    std::free(ptr);
  }

  void cache_stats(AllocatorStats& stats) const override {
    stats.bytes_cached = large_.cached_bytes();
    stats.num_system_allocs = large_.num_maps();
  }

 private:
  static constexpr size_t kPageAlignment = 4096;
  LargeBlockCache large_;
};

// Keeps glibc from giving freed heap memory back to the OS at every free. Libraries the kernels
// call allocate their own scratch memory on every call (oneDNN's GEMMs: a 225 KiB packing buffer
// per MatMul in the MLP of the model suite). glibc trims the top of the heap when a free leaves
// more than M_TRIM_THRESHOLD there, so each call faulted those pages in again (49 page faults a
// step, +10% step time); its threshold only adapts after an mmap'ed block is freed, so whether
// it happened depended on the allocation history. Fixed thresholds make a steady step ask the OS
// for nothing, as the tensors' own blocks already do (LargeBlockCache). Process-wide, once.
void keep_freed_heap_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // blocks below 32 MiB from the heap (glibc's maximum)
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // trim only when 256 MiB at the top are free
}

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator* allocator = [] {
    keep_freed_heap_memory();
    return new CpuAllocator();  // never destroyed: tensors may outlive main
  }();
  return allocator;
}

}  // namespace stepscope
