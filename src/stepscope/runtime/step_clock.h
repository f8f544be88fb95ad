// The clock of traced steps (internal to the runtime: the executor reads it around each
// kernel, the StepStatsBuilder turns its readings into nanoseconds after the step).
//
// Where Linux keeps time with the TSC (so it is invariant and in step across cores), a node's
// two readings are raw TSC reads, about half the cost of steady_clock::now(), turned into
// now_ns() nanoseconds after the step by a linear map anchored at the step's start and scaled
// over everything measured since the first traced step. Elsewhere, or with
// STEPSCOPE_TRACE_CLOCK=steady in the environment, ticks are now_ns() and the map is the
// identity.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "stepscope/base/clock.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace stepscope {

class StepClock {
 public:
  static bool tsc() {
    static const bool use = [] {
#if defined(__x86_64__) && defined(__linux__)
      if (const char* choice = std::getenv("STEPSCOPE_TRACE_CLOCK"); choice && std::string_view(choice) == "steady")
        return false;
      std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
      std::string source;
      return static_cast<bool>(f >> source) && source == "tsc";
#else
      return false;
#endif
    }();
    return use;
  }
  static int64_t ticks() {
#if defined(__x86_64__)
    if (tsc()) return static_cast<int64_t>(__rdtsc());
#endif
    return now_ns();
  }

  // A (ticks, ns) pair read together.
  struct Point {
    int64_t ticks, ns;
    static Point now() {
      const int64_t t = StepClock::ticks();
      return {t, tsc() ? now_ns() : t};
    }
  };
  StepClock(Point start, Point end) : start_(start) {
    static const Point first = start;  // the first traced step's start
    if (tsc() && end.ticks > first.ticks)
      mult_ = static_cast<int64_t>(std::ldexp(double(end.ns - first.ns) / double(end.ticks - first.ticks), 32) + 0.5);
  }
  int64_t ns(int64_t ticks) const {
    return start_.ns + static_cast<int64_t>((static_cast<__int128>(ticks - start_.ticks) * mult_) >> 32);
  }

 private:
  Point start_;
  int64_t mult_ = int64_t{1} << 32;  // ns per tick, 32.32 fixed point
};

}  // namespace stepscope
