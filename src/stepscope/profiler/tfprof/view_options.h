// ProfileOptions resolved once per query for the views: order_by and select as enums, the
// regexes compiled (from a cache, so repeated queries compile nothing) and the ".*" shortcuts
// TensorFlow takes, so that a query with the default regexes runs no regex at all.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepscope/profiler/tfprof/options.h"

namespace re2 {
class RE2;
}

namespace stepscope::tfprof {

// kProfileSelect's order.
enum class Field : uint8_t {
  kBytes,
  kMicros,
  kParams,
  kFloatOps,
  kTensorValue,
  kDevice,
  kOpTypes,
  kOccurrence,
  kInputShapes,
  kAcceleratorMicros,
  kCpuMicros,
  kPeakBytes,
  kResidualBytes,
  kOutputBytes,
};

// kProfileOrderBy's order.
enum class OrderBy : uint8_t {
  kName,
  kBytes,
  kPeakBytes,
  kResidualBytes,
  kOutputBytes,
  kMicros,
  kAcceleratorMicros,
  kCpuMicros,
  kParams,
  kFloatOps,
  kOccurrence,
};

// Compiled regexes by pattern; a Profiler keeps one for its lifetime. RE2, as in TensorFlow:
// the patterns come from the user (command line, web UI) and RE2 matches in time linear in the
// name, where a backtracking engine takes exponential time on patterns like '(.*)*Z'.
class RegexCache {
 public:
  RegexCache();
  ~RegexCache();
  RegexCache(RegexCache&&) noexcept;
  RegexCache& operator=(RegexCache&&) noexcept;
  // InvalidArgumentError "Invalid option '<flag>' value: '<pattern>'" when it does not compile.
  const re2::RE2& get(const std::string& pattern, std::string_view flag);

 private:
  std::unordered_map<std::string, std::unique_ptr<re2::RE2>> compiled_;
};

// A list of name regexes, each a full match (RE2::FullMatch in TensorFlow).
class NameMatcher {
 public:
  NameMatcher() = default;
  NameMatcher(const std::vector<std::string>& patterns, std::string_view flag, RegexCache& cache);

  // True when the list is exactly {".*"}: TensorFlow's shortcut for "everything".
  bool is_all() const { return all_; }
  bool empty() const { return regexes_.empty() && !all_; }
  // Inline where it is everything: a view asks once a node.
  bool matches(std::string_view name) const { return all_ || matches_a_regex(name); }

 private:
  bool matches_a_regex(std::string_view name) const;

  bool all_ = false;
  std::vector<const re2::RE2*> regexes_;
};

struct ViewOptions {
  const ProfileOptions* options = nullptr;  // the options as given (for the Options banner)
  int max_depth = 0;
  int64_t min_bytes = 0, min_peak_bytes = 0, min_residual_bytes = 0, min_output_bytes = 0;
  int64_t min_micros = 0, min_accelerator_micros = 0, min_cpu_micros = 0;
  int64_t min_params = 0, min_float_ops = 0, min_occurrence = 0;
  int64_t step = -1;
  OrderBy order_by = OrderBy::kName;
  uint32_t select = 0;  // bit per Field
  NameMatcher account, start, trim, show, hide;
  bool account_displayed_op_only = false;
  ProfileOutput output;

  bool has(Field f) const { return (select >> static_cast<int>(f)) & 1u; }
};

// Throws as validate_profile_options. With `lenient`, unknown select fields are dropped and an
// unknown order_by orders by name, as TensorFlow's Python API does, each with a warning written
// to `lenient`; regexes and the output are checked either way.
ViewOptions resolve_options(const ProfileOptions& options, RegexCache& cache, std::ostream* lenient = nullptr);

}  // namespace stepscope::tfprof
