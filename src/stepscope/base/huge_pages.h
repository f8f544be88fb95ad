// Transparent huge pages for big arrays written right after they are made: on a VM the kernel
// charges ~2 µs for each 4 KiB page it maps, and 2 MiB pages make one fault in 512 of those.
//
// Where it pays, measured (BENCHMARKS.md, issue 16, eleventh session): a tfprof view's text (a
// 10^4-deep chain's graph view writes 100 MB of indentation: twice as fast). A view's working
// arrays and scope tree have it too (a 10^6-node scope view: 2.2-3.7 s with, 2.8-3.7 s without).
// Arrays past glibc's mmap threshold (32 MiB at most) are fresh mappings, faulted in again each
// time, where smaller ones come back from the heap already mapped.
// A Profiler's model of the graph and a step's records in it (add_step) have huge pages only
// where the host does not take back free memory (reserve_huge_unless_reclaimed). Where it does
// not, they made add_step of 10^6 nodes 0.75x (thirteenth session). On a VM whose balloon
// reports free pages to its host (fifteenth session, a 2-core AMD EPYC VM), memory left free for
// ~2 s goes back to the host, and a huge page made of such memory cost 5-10x what 4 KiB pages
// did: add_step of 10^6 nodes took 2.0-6.3 s on memory free for a few seconds (as in a new
// process, or minutes after the last query) against 1.1-1.6 s in 4 KiB pages, and even back to
// back some repetitions took 2.2-6.3 s (medians 0.62-2.2 s against 0.95-1.5 s). The views'
// arrays keep their advice there: the same comparison was mixed for them. The op view's protos
// of 10^6 nodes of one type (~300 MB, new each query) took 0.30-1.18 s in huge pages against
// 0.42-1.75 s (thirtieth session, three rounds of four queries; with 3 s between queries too);
// views of 500,000 nodes and more now make their protos in an arena (bulk_arena.h).
// Not on what a traced step writes: advising a step's StepStats arrays made a fresh
// RunMetadata's second traced run at 10^6 ops ~40% slower (most likely the kernel zeroing 2 MiB
// ahead of the writes, out of cache by the time they come, where a 4 KiB page is zeroed and
// written while hot), and the plan's labels and the allocation logs showed no gain beyond this
// VM's noise.
//
// Only advice: on a kernel with huge pages off (or "never") nothing changes, and the memory is
// the same memory.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace stepscope {

// Advises huge pages for the whole 2 MiB pages inside [data, data + bytes) that nothing has
// touched yet (a no-op below 4 MiB, and where madvise is missing).
void advise_huge_pages(const void* data, size_t bytes) noexcept;

// Whether memory this process frees may go back to a host that takes it: a virtio balloon with
// free page reporting (Linux's page_reporting). Read from sysfs once per process.
bool host_takes_back_free_memory();
// The check itself, on a virtio balloon driver's sysfs directory: whether a device bound there
// has VIRTIO_BALLOON_F_REPORTING (bit 5 of its `features`, one character a bit, bit 0 first).
// False where there is no such directory.
bool balloon_reports_free_pages(const std::string& driver_dir);

// Maps the pages holding [data, data + bytes) writable now, without changing what they hold
// (MADV_POPULATE_WRITE, Linux 5.14): a thread with nothing else to do takes the faults of
// memory another is about to write (two cores fault in ~1.7x as fast as one on this VM). Only
// advice: where it is missing or fails (memory no longer mapped) nothing changes.
void prefault_pages(const void* data, size_t bytes) noexcept;
// The same a piece at a time (1 MiB), until `stop` (where not null) is set: returns whether all
// of it was mapped. For a thread making memory ahead that a step may start to want before it
// is done, and then should not fight for the kernel's page faults (see
// Executor::Plan::stop_preparation).
bool prefault_pages_until(const void* data, size_t bytes, const std::atomic<bool>* stop) noexcept;

// v.reserve(n), with the new room advised as above. A vector that holds items already grows
// to at least twice its capacity, as push_back would: callers that reserve a little more each
// time (a Profiler synced with a graph that grows by a few nodes between steps) must not copy
// the whole array every time.
template <typename T, typename A>
size_t grown_capacity(const std::vector<T, A>& v, size_t n) {
  return v.empty() ? n : std::max(n, 2 * v.capacity());
}
template <typename T, typename A>
void reserve_huge(std::vector<T, A>& v, size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(grown_capacity(v, n));
  advise_huge_pages(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(T));
}
// reserve_huge, but in 4 KiB pages where the host takes back free memory (see above).
template <typename T>
void reserve_huge_unless_reclaimed(std::vector<T>& v, size_t n) {
  if (!host_takes_back_free_memory())
    reserve_huge(v, n);
  else if (n > v.capacity())
    v.reserve(grown_capacity(v, n));
}
// A vector of n value-initialized items, in advised room.
template <typename T>
std::vector<T> sized_huge(size_t n) {
  std::vector<T> v;
  reserve_huge(v, n);
  v.resize(n);
  return v;
}
inline void reserve_huge(std::string& s, size_t n) {
  if (n <= s.capacity()) return;
  s.reserve(n);
  advise_huge_pages(s.data() + s.size(), s.capacity() - s.size());
}

}  // namespace stepscope
