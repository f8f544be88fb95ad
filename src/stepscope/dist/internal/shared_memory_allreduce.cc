#ifdef STEPSCOPE_HAVE_MPI

#include "stepscope/dist/internal/shared_memory_allreduce.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include "stepscope/base/error.h"

namespace stepscope::dist {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the ranks' counters are shared between processes");

// Each rank's part of the window: its arrival counter on a cache line of its own, then two slots.
constexpr int64_t kHeaderBytes = 128;

// 1 MiB a slot: measured best of 128 KiB .. 1 MiB at 2 ranks (a piece is then 1 MiB, and each
// rank reduces half of it from L2). Many ranks get smaller slots, so the window (2 slots a rank)
// stays at most ~16 MiB of the host's shared memory.
int64_t slot_bytes_for(int size) {
  const int64_t bytes = std::clamp<int64_t>((8 << 20) / size, 128 << 10, 1 << 20);
  return bytes & ~int64_t{4095};
}

// Where rank r's part of a piece of n elements starts (r = size: n). Parts start on multiples of
// 16 elements, so no two ranks write one cache line of an output.
int64_t part_start(int64_t n, int r, int size) {
  if (r == 0) return 0;
  if (r == size) return n;
  return (n * r / size) & ~int64_t{15};
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// out[0, n) = slot[0, n) = scale x (sources[0][i] + ... + sources[size - 1][i]), summed in rank
// order (every element by the same formula on every host and run). Through a block on the stack:
// `out` may be one of the sources (a rank's own input, reduced in place), and a loop that reads
// and writes one array through two pointers would not be vectorized.
template <typename T>
void reduce_part(const T* const* sources, int size, T* out, T* slot, int64_t n, double scale) {
  constexpr int64_t kBlock = 1024;
  alignas(64) T acc[kBlock];
  const bool scaled = scale != 1.0;
  const T factor = static_cast<T>(scale);
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t m = std::min(kBlock, n - begin);
    const T* a = sources[0] + begin;
    const T* b = sources[1] + begin;
    for (int64_t j = 0; j < m; ++j) acc[j] = a[j] + b[j];
    for (int r = 2; r < size; ++r) {
      const T* c = sources[r] + begin;
      for (int64_t j = 0; j < m; ++j) acc[j] += c[j];
    }
    if (scaled)
      for (int64_t j = 0; j < m; ++j) acc[j] *= factor;
    std::memcpy(out + begin, acc, static_cast<size_t>(m) * sizeof(T));
    std::memcpy(slot + begin, acc, static_cast<size_t>(m) * sizeof(T));
  }
}

}  // namespace

std::unique_ptr<SharedMemoryAllreduce> SharedMemoryAllreduce::create(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2) return nullptr;
  const int64_t slot_bytes = slot_bytes_for(size);
  const int64_t region_bytes = kHeaderBytes + 2 * slot_bytes;
  // MPI may place a part at any 8 bytes; each part is used from its first cache line. (The ranks
  // map the window at different addresses but at the same offsets in a page.)
  const auto cache_line = [](void* p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return reinterpret_cast<char*>((a + 63) & ~uintptr_t{63});
  };
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each rank's part on its own pages (NUMA)
  char* mine = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  int ok = MPI_Win_allocate_shared(region_bytes + 64, 1, info, comm, &mine, &window) == MPI_SUCCESS;
  MPI_Info_free(&info);
  std::vector<char*> regions(size);
  for (int r = 0; r < size && ok; ++r) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* base = nullptr;
    ok = MPI_Win_shared_query(window, r, &bytes, &unit, &base) == MPI_SUCCESS && bytes >= region_bytes + 64;
    regions[r] = cache_line(base);
  }
  if (ok) new (regions[rank]) std::atomic<uint64_t>(0);
  int all_ok = ok;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm);  // also: every counter is set
  if (!all_ok) {
    if (window != MPI_WIN_NULL) MPI_Win_free(&window);
    return nullptr;
  }
  MPI_Win_lock_all(MPI_MODE_NOCHECK, window);  // one passive epoch for the window's life: loads and stores
  return std::unique_ptr<SharedMemoryAllreduce>(
      new SharedMemoryAllreduce(window, rank, size, slot_bytes, std::move(regions)));
}

SharedMemoryAllreduce::SharedMemoryAllreduce(MPI_Win window, int rank, int size, int64_t slot_bytes,
                                             std::vector<char*> regions)
    : window_(window), rank_(rank), size_(size), slot_bytes_(slot_bytes), regions_(std::move(regions)) {}

SharedMemoryAllreduce::~SharedMemoryAllreduce() {
  MPI_Win_unlock_all(window_);
  MPI_Win_free(&window_);
}

std::atomic<uint64_t>& SharedMemoryAllreduce::arrivals(int rank) {
  return *std::launder(reinterpret_cast<std::atomic<uint64_t>*>(regions_[rank]));
}

char* SharedMemoryAllreduce::slot(int rank, int set) const { return regions_[rank] + kHeaderBytes + set * slot_bytes_; }

// Every rank has called meet() as often as this one. Spins a while (a meeting at a few µs is the
// common case), then yields the core to a rank that still has work.
void SharedMemoryAllreduce::meet() {
  const uint64_t meeting = ++meetings_;
  arrivals(rank_).store(meeting, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (int spins = 0; arrivals(r).load(std::memory_order_acquire) < meeting; ++spins) {
      if (spins < 256)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  }
}

void SharedMemoryAllreduce::allreduce(const void* in, void* out, int64_t count, DType dtype, double scale) {
  const AllreduceInput one{in, count};
  allreduce(std::span<const AllreduceInput>(&one, 1), out, dtype, scale);
}

void SharedMemoryAllreduce::allreduce(std::span<const AllreduceInput> inputs, void* out, DType dtype, double scale) {
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64 && dtype != DType::kInt32 && dtype != DType::kInt64)
    throw InvalidArgumentError("shared-memory allreduce: dtype " + std::string(dtype_name(dtype)) + " cannot be summed");
  // Where each input starts among them all, in elements (starts.back(): the total).
  std::vector<int64_t> starts(inputs.size() + 1, 0);
  for (size_t k = 0; k < inputs.size(); ++k) starts[k + 1] = starts[k] + inputs[k].count;
  const int64_t count = starts.back();
  // The input holding element `at` (of a non-empty range).
  const auto input_of = [&](int64_t at) {
    return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), at) - starts.begin()) - 1;
  };
  // Elements [begin, end) of the inputs taken back to back, into `to`.
  const auto gather = [&](int64_t begin, int64_t end, char* to) {
    for (size_t k = begin < end ? input_of(begin) : inputs.size(); begin < end; ++k) {
      const int64_t stop = std::min(end, starts[k + 1]);
      const auto bytes = static_cast<size_t>((stop - begin) * esize);
      if (inputs[k].data)
        std::memcpy(to, static_cast<const char*>(inputs[k].data) + (begin - starts[k]) * esize, bytes);
      else if (bytes)
        std::memset(to, 0, bytes);
      to += bytes;
      begin = stop;
    }
  };
  struct Segment {
    int64_t begin, end;  // elements of the piece
    const char* own;
  };
  std::vector<Segment> segments;
  std::lock_guard lock(mutex_);
  const int64_t piece = slot_bytes_ / esize;
  for (int64_t done = 0; done < count; done += piece) {
    const int64_t n = std::min(piece, count - done);
    const int set = static_cast<int>(pieces_++ & 1);
    char* dst = static_cast<char*>(out) + done * esize;
    char* mine = slot(rank_, set);
    const int64_t lo = part_start(n, rank_, size_), hi = part_start(n, rank_ + 1, size_);
    // This rank's own part is reduced from its inputs where they lie: a segment per input it
    // spans (own: null for a gap of zeros, which the slot holds).
    segments.clear();
    for (int64_t at = lo; at < hi;) {
      const size_t k = input_of(done + at);
      const int64_t stop = std::min(hi, starts[k + 1] - done);
      const auto* data = static_cast<const char*>(inputs[k].data);
      segments.push_back({at, stop, data ? data + (done + at - starts[k]) * esize : nullptr});
      at = stop;
    }
    // 1. The parts the other ranks reduce go into this rank's slot (and its own gaps' zeros).
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const int64_t b = part_start(n, q, size_), e = part_start(n, q + 1, size_);
      gather(done + b, done + e, mine + b * esize);
    }
    for (const Segment& g : segments)
      if (!g.own) std::memset(mine + g.begin * esize, 0, static_cast<size_t>((g.end - g.begin) * esize));
    meet();
    // 2. This rank's part, from every rank's slot (its own inputs where they lie).
    const auto reduce = [&]<typename T>(T*) {
      std::vector<const T*> sources(size_);
      for (const Segment& g : segments) {
        for (int r = 0; r < size_; ++r)
          sources[r] = r == rank_ && g.own ? reinterpret_cast<const T*>(g.own)
                                           : reinterpret_cast<const T*>(slot(r, set)) + g.begin;
        reduce_part(sources.data(), size_, reinterpret_cast<T*>(dst) + g.begin, reinterpret_cast<T*>(mine) + g.begin,
                    g.end - g.begin, scale);
      }
    };
    switch (dtype) {
      case DType::kFloat32: reduce(static_cast<float*>(nullptr)); break;
      case DType::kFloat64: reduce(static_cast<double*>(nullptr)); break;
      case DType::kInt32: reduce(static_cast<int32_t*>(nullptr)); break;
      default: reduce(static_cast<int64_t*>(nullptr)); break;
    }
    meet();
    // 3. The other parts' results, from their ranks' slots.
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const int64_t b = part_start(n, q, size_), e = part_start(n, q + 1, size_);
      if (e > b) std::memcpy(dst + b * esize, slot(q, set) + b * esize, static_cast<size_t>((e - b) * esize));
    }
  }
}

}  // namespace stepscope::dist

#endif  // STEPSCOPE_HAVE_MPI
