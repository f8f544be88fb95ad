// Transparent huge pages for the big arrays a traced step fills the first time: a plan's first
// traced run writes ~500 bytes an op into memory it never touched, and on a VM the kernel
// charges ~2 µs for each 4 KiB page it maps (issue 16: +0.8 µs an op on that run). Asking for
// 2 MiB pages where the array spans them makes one fault in 512 of those.
//
// Only advice: on a kernel with huge pages off (or "never") nothing changes, and the memory is
// the same memory. Used on arrays of megabytes written right after they are made: a traced
// step's, and the profiler's model and views of a big graph.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stepscope {

// Advises huge pages for the whole 2 MiB pages inside [data, data + bytes) that nothing has
// touched yet (a no-op below 4 MiB, and where madvise is missing).
void advise_huge_pages(const void* data, size_t bytes) noexcept;

// v.reserve(n), with the new room advised as above.
template <typename T>
void reserve_huge(std::vector<T>& v, size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge_pages(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(T));
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
