// What every fuzz target shares: the rule that a parser may only fail with one of stepscope's typed
// errors. Anything else escaping it (std::bad_alloc, std::out_of_range, a crash, a sanitizer
// report) is a bug libFuzzer reports.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
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

// A file or directory of this process's in the temporary directory, "<name>-<pid>", removed
// when the process exits normally (libFuzzer exits through exit() after its runs or time limit):
// a fuzzing process, or ctest's run over the seeds, leaves nothing behind.
class ScratchPath {
 public:
  explicit ScratchPath(std::string_view name)
      : path_(std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()))) {}
  ~ScratchPath() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace stepscope::fuzz
