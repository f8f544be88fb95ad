#include "stepscope/graph/call_stack.h"

#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace stepscope {
namespace {

struct Walk {
  uintptr_t* out;
  int max;
  int skip;
  int count;
};

_Unwind_Reason_Code on_frame(_Unwind_Context* context, void* arg) {
  Walk& w = *static_cast<Walk*>(arg);
  const uintptr_t pc = _Unwind_GetIP(context);
  if (pc == 0) return _URC_END_OF_STACK;
  if (w.skip > 0) {
    --w.skip;
    return _URC_NO_REASON;
  }
  if (w.count >= w.max) return _URC_END_OF_STACK;
  w.out[w.count++] = pc;
  return _URC_NO_REASON;
}

// libunwind's unw_backtrace (the "fast trace": it caches how to step over each return address,
// ~10 ns a frame where libgcc's unwinder re-reads the DWARF call frame information, ~100 ns), if
// the library is there. Loaded RTLD_LOCAL so that its _Unwind_* functions do not replace
// libgcc's for C++ exceptions, as linking it would.
// Not under the sanitizers: LeakSanitizer's exit-time check crashes ("Tracer caught signal 11")
// on the thread-local storage of a library dlopen'ed this way (clang 16, glibc 2.36), and
// capture speed does not matter there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

using UnwBacktrace = int (*)(void**, int);
UnwBacktrace fast_backtrace() {
  static const UnwBacktrace fn = []() -> UnwBacktrace {
    if (kSanitized) return nullptr;
    const char* off = std::getenv("STEPSCOPE_CAPTURE_UNWINDER");
    if (off && std::string_view(off) == "libgcc") return nullptr;
    void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    return reinterpret_cast<UnwBacktrace>(dlsym(lib, "unw_backtrace"));
  }();
  return fn;
}

}  // namespace

// Not inlined: its own frame is the first one the unwinder reports, and is skipped.
__attribute__((noinline)) int capture_call_stack(uintptr_t* out, int max, int skip) {
  if (max <= 0) return 0;
  ++skip;  // this function
  if (UnwBacktrace unw = fast_backtrace()) {
    constexpr int kBuffer = 128;
    void* pcs[kBuffer];
    const int got = unw(pcs, std::min(kBuffer, max + skip));
    int n = 0;
    for (int i = skip; i < got && n < max; ++i) out[n++] = reinterpret_cast<uintptr_t>(pcs[i]);
    return n;
  }
  Walk w{out, max, skip, 0};
  _Unwind_Backtrace(on_frame, &w);
  return w.count;
}

bool capture_call_stacks_by_default() {
  static const bool enabled = [] {
    const char* v = std::getenv("STEPSCOPE_CAPTURE_STACKS");
    if (!v) return true;
    const std::string_view s(v);
    return !(s == "0" || s == "false" || s == "off" || s == "no" || s == "FALSE" || s == "OFF" || s == "NO");
  }();
  return enabled;
}

int32_t CallStackTable::intern(std::span<const uintptr_t> pcs) {
  uint64_t h = 0xcbf29ce484222325ull ^ pcs.size();
  for (uintptr_t pc : pcs) h = (h ^ pc) * 0x100000001b3ull;
  auto [begin, end] = by_hash_.equal_range(h);
  for (auto it = begin; it != end; ++it) {
    const auto s = stack(it->second);
    if (std::equal(s.begin(), s.end(), pcs.begin(), pcs.end())) return it->second;
  }
  const int32_t id = size();
  pcs_.insert(pcs_.end(), pcs.begin(), pcs.end());
  offsets_.push_back(static_cast<uint32_t>(pcs_.size()));
  by_hash_.emplace(h, id);
  return id;
}

}  // namespace stepscope
