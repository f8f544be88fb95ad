// `stepscope serve`'s request handling (handle_request: the method and the raw request target,
// as they arrive off the socket). The input is "METHOD target". Besides not crashing, the server
// must never hand out a byte from outside the directory it serves: a file outside it holds a
// marker, reachable from inside only through a symbolic link and `..`, and no reply may carry it.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_util.h"
#include "stepscope/tools/trace_server.h"

namespace {

constexpr std::string_view kSecret = "OUTSIDE-THE-SERVED-DIRECTORY";

void write(const std::filesystem::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary) << text;
}

// <tmp>/stepscope-http-fuzz-<pid>/{root/..., outside/secret.txt}, made once per process.
const stepscope::ServedDirectory& served() {
  static const stepscope::ServedDirectory directory = [] {
    namespace fs = std::filesystem;
    const fs::path base = fs::temp_directory_path() / ("stepscope-http-fuzz-" + std::to_string(getpid()));
    fs::remove_all(base);
    fs::create_directories(base / "root" / "run1");
    fs::create_directories(base / "outside");
    write(base / "outside" / "secret.txt", kSecret);
    write(base / "root" / "timeline-200.json", R"({"traceEvents":[]})");
    write(base / "root" / "run1" / "timeline-5.json", R"({"traceEvents":[]})");
    write(base / "root" / "run_metadata-200.pb", "\x0a\x00");
    fs::create_directory_symlink(base / "outside", base / "root" / "escape");
    fs::create_symlink(base / "outside" / "secret.txt", base / "root" / "secret-link.json");
    return stepscope::ServedDirectory(base / "root");
  }();
  return directory;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = stepscope::fuzz::as_bytes(data, size);
  const size_t space = input.find(' ');
  const std::string_view method = space == std::string_view::npos ? input : input.substr(0, space);
  const std::string_view target = space == std::string_view::npos ? std::string_view() : input.substr(space + 1);
  // handle_request throws only when the served directory itself cannot be read, which it can here:
  // any exception is a bug.
  const stepscope::HttpReply reply = stepscope::handle_request(served(), method, target);
  if (reply.status < 100 || reply.status > 599) __builtin_trap();
  if (reply.body.find(kSecret) != std::string::npos) __builtin_trap();
  return 0;
}
