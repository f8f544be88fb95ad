// What every fuzz target shares: the rule that a parser may only fail with one of stepscope's typed
// errors. Anything else escaping it (std::bad_alloc, std::out_of_range, a crash, a sanitizer
// report) is a bug libFuzzer reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stepscope/base/error.h"

namespace stepscope::fuzz {

inline std::string_view as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `parse`; a stepscope::Error is the expected answer to bad bytes and is swallowed, but only
// if it says what is wrong (an empty message would give the user nothing to act on).
template <typename Parse>
void expect_parsed_or_typed_error(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
}

}  // namespace stepscope::fuzz
