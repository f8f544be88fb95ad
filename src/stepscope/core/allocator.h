// Memory for tensors. Every allocator tracks bytes in use, peak and allocation counts; while a
// traced step runs, an AllocationRecorder installed on the executing threads receives every
// allocation and free with its time and the node that made it, so timelines show real tensor
// lifetimes instead of guesses.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

struct AllocatorStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t num_allocs = 0;
  int64_t total_allocated_bytes = 0;  // sum over all allocations ever made
  int64_t largest_alloc_size = 0;
  // The allocator's own memory beside what tensors asked for (the CPU allocator's; 0 elsewhere):
  int64_t bytes_cached = 0;       // freed large blocks kept for reuse
  int64_t num_system_allocs = 0;  // large blocks mapped from the OS so far (a cache miss each)
};

class Allocator;

// One allocation (bytes > 0) or free (bytes < 0) seen during a traced step.
struct AllocationEvent {
  int64_t time_ns = 0;
  int64_t bytes = 0;
  int64_t allocation_id = 0;
  const Allocator* allocator = nullptr;
  int64_t allocator_bytes_in_use = 0;  // after this event
  int32_t node = -1;                   // the recording scope's node when the buffer was allocated (-1: none)
};

// Collects the allocation events of one traced step with no lock per event: each thread that
// runs the step's nodes installs the recorder (ScopedRecording) and appends to a log of its own.
// A buffer allocated while recording remembers its recorder and that recording's generation;
// its free goes to the freeing thread's log when that thread records the same step, otherwise
// (another thread, or after the step) to a shared log under a mutex, and is dropped once the
// recorder is closed. Recorders are recycled through a process-wide pool and never freed, so a
// buffer that outlives its step holds a plain pointer, not a reference count.
class AllocationRecorder {
 public:
  struct ThreadLog {
    std::vector<AllocationEvent> events;  // in the order they happened on that thread
    std::vector<int32_t> nodes;           // for the recorder's user (the executor: nodes the thread ran, in order)
  };

  // A recorder from the pool, recording.
  static AllocationRecorder* acquire();
  // Stops recording: later frees of the step's buffers are not recorded.
  void close();
  // Back to the pool (after close(), once the logs have been read).
  void recycle();

  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // The calling thread's log for this recording (only the first call per thread takes the lock).
  ThreadLog* thread_log();
  // Before the recording's threads start: room in each thread's log for this many events and
  // nodes, made when the thread takes its log. A log that grows by doubling copies what it
  // holds and touches fresh memory for every copy; a big step's first trace would pay that on
  // its own thread, while it runs. The log the first thread takes is made now: returned, its
  // memory that is new (not yet written, where it grew), for the caller to have it mapped while
  // the recording runs (empty where it had the room already).
  std::vector<std::span<const std::byte>> expect(size_t events, size_t nodes);
  // Logs that grew past this are trimmed when their recorder goes back to the pool.
  static constexpr size_t kMaxKeptEvents = size_t{1} << 20;
  // Makes the next recorder acquire() gives have a log with that much room, mapped (its first
  // recording thread takes it), even past kMaxKeptEvents: a step's first trace in a process
  // otherwise grows its log into new memory (~100 bytes a node) while it runs. For a thread
  // with nothing else to do; it maps no more once `stop` (where given) is set.
  static void prepare(size_t events, size_t nodes, const std::atomic<bool>* stop = nullptr);
  // After close(): the logs of the threads that recorded...
  std::span<ThreadLog* const> thread_logs() const { return {active_.data(), active_.size()}; }
  // ... and the frees made outside them (by other threads), stamped with the clock.
  const ThreadLog& other_log() const { return other_; }
  // After close(): every event, per allocator, each list in time order (tests, tools).
  struct PerAllocator {
    const Allocator* allocator;
    std::vector<AllocationEvent> events;
  };
  std::vector<PerAllocator> events_by_allocator() const;

  // A free of a buffer allocated under `generation`, made outside this recording's scopes.
  void record_other(uint64_t generation, const AllocationEvent& e);

 private:
  AllocationRecorder() = default;
  static AllocationRecorder* take_from_pool();  // or a new one
  std::mutex mutex_;
  std::atomic<uint64_t> generation_{1};  // advances at close()
  bool open_ = false;
  std::vector<std::unique_ptr<ThreadLog>> logs_;  // kept across recordings, with their capacity
  std::vector<ThreadLog*> active_;                // the logs in use by this recording
  ThreadLog other_;
  size_t expected_events_ = 0, expected_nodes_ = 0;
};

// The recording the calling thread takes part in (none: recorder null, the common, free case).
// Events are stamped with time_ns when it is set, otherwise with now_ns(). The executor sets it
// to the clock reading it took at the node's start or end, so recording costs no clock reading
// of its own; those readings are TSC ticks where it uses the TSC, which it turns into
// nanoseconds when it reads the logs after the step (frees in other_log() are always now_ns()).
struct RecordingScope {
  AllocationRecorder* recorder = nullptr;
  AllocationRecorder::ThreadLog* log = nullptr;
  uint64_t generation = 0;
  int64_t time_ns = 0;
  int32_t node = -1;  // the node allocations are attributed to
};
extern constinit thread_local RecordingScope tls_recording;
inline RecordingScope& current_recording() { return tls_recording; }

// Installs `recorder` on the calling thread for the lifetime of this object, then restores the
// previous scope.
class ScopedRecording {
 public:
  explicit ScopedRecording(AllocationRecorder* recorder, int32_t node = -1) : saved_(tls_recording) {
    tls_recording = {recorder, recorder->thread_log(), recorder->generation(), 0, node};
  }
  ~ScopedRecording() { tls_recording = saved_; }
  ScopedRecording(const ScopedRecording&) = delete;
  ScopedRecording& operator=(const ScopedRecording&) = delete;
  RecordingScope& scope() { return tls_recording; }

 private:
  RecordingScope saved_;
};

class Allocator {
 public:
  explicit Allocator(std::string name);
  virtual ~Allocator();
  const std::string& name() const { return name_; }

  // Aligned raw memory; throws ResourceExhaustedError naming the allocator when out of memory.
  // `allocation_id`, when given, receives the allocation's id: unique per allocator, from 1 (each
  // thread takes ids in blocks, so they rise in time on one thread only).
  void* allocate(size_t bytes, size_t alignment, int64_t* allocation_id = nullptr);
  // `bytes` must be what allocate() was asked for.
  void deallocate(void* ptr, size_t bytes);
  // What an allocation of `bytes` really takes (TensorFlow's allocated_bytes).
  virtual size_t allocated_size(size_t bytes, size_t alignment) const {
    return (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  }

  AllocatorStats stats() const;
  // Free memory an allocator keeps for reuse (see cpu_allocator()): its bound in bytes, and a way
  // to give it back to the OS (returns the bytes released). Allocators that keep none ignore both.
  virtual void set_cache_limit(size_t bytes) { (void)bytes; }
  virtual size_t cache_limit() const { return 0; }
  virtual size_t release_cached_memory() { return 0; }
  int64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }
  // Bookkeeping only (used by buffers that record themselves); returns the allocation id.
  int64_t note_allocation(int64_t bytes);
  void note_free(int64_t bytes);

 protected:
  virtual void* raw_allocate(size_t bytes, size_t alignment) = 0;
  virtual void raw_deallocate(void* ptr, size_t bytes) = 0;
  // Fills the cache figures of stats().
  virtual void cache_stats(AllocatorStats& stats) const { (void)stats; }

 private:
  // bytes_in_use is one atomic, so that it and its peak are exact at every moment. The counts
  // are kept per thread (a stripe each, written with plain stores by its owner, summed by
  // stats()), so an allocation costs one locked instruction instead of three.
  struct alignas(64) Stripe {
    std::atomic<int64_t> num_allocs{0}, total_bytes{0};
    int64_t next_id = 0, id_limit = 0;  // the owner's block of ids
  };
  std::string name_;
  std::atomic<int64_t> bytes_in_use_{0}, peak_{0}, largest_{0};
  std::atomic<int64_t> next_id_block_{1};
  std::unique_ptr<Stripe[]> stripes_;
};

// The process-wide CPU allocator ("cpu", as TensorFlow names it). It keeps freed memory for
// reuse, so that a training step in the steady state asks nothing of the OS (no mmap, munmap or
// page fault) and nothing of glibc:
// - blocks up to 64 KiB: per-thread caches of freed blocks in power-of-two classes (bounded at
//   1 MiB per thread), over glibc;
// - larger blocks: mapped from the OS in size classes (eight per power of two, so at most 1/8
//   of a block's address space is rounding, and pages past the request are never touched unless
//   a larger request of the class reuses it), kept when freed in one cache shared by all threads,
//   and given to the next request of the same class. The cache holds at most cache_limit() bytes
//   (default: a quarter of physical memory; STEPSCOPE_ALLOCATOR_CACHE_MB in the environment, in
//   MiB, or set_cache_limit(); 0 caches nothing) and gives its least recently freed blocks back
//   first; release_cached_memory() empties it (and the calling thread's small-block cache). When
//   the OS refuses a mapping, the cache is emptied and the mapping tried once more before the
//   allocation fails with ResourceExhaustedError.
Allocator* cpu_allocator();

}  // namespace stepscope
