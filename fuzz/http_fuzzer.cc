// `stepscope serve`'s request handling (handle_request: the method and the raw request target,
// as they arrive off the socket). The input is "METHOD target". Besides not crashing, the server
// must never hand out a byte from outside the directory it serves: a file outside it holds a
// marker, reachable from inside only through a symbolic link and `..`, and no reply may carry it.

#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_util.h"
#include "stepscope/tools/trace_server.h"

namespace {

constexpr std::string_view kSecret = "OUTSIDE-THE-SERVED-DIRECTORY";

void write(const std::filesystem::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary) << text;
}

// <tmp>/stepscope-http-fuzz-<pid>/{root/..., outside/secret.txt}, made once per process.
const stepscope::ServedDirectory& served() {
  static const stepscope::fuzz::ScratchPath scratch("stepscope-http-fuzz");
  static const stepscope::ServedDirectory directory = [] {
    namespace fs = std::filesystem;
    const fs::path& base = scratch.path();
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

// "%4Fx" -> "Ox"; a malformed escape is kept as it is.
std::string percent_decoded(std::string_view in) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
      out += static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// What a request spells once the served directory's path is taken out of it, as the server
// takes it out of the errors that quote the request (web_api.cc: without_root). Taken out
// repeatedly, so "DIREC<root>/TORY" spells "DIRECTORY": the fuzzer learns the root from the
// server's comparisons and found that.
std::string without_root(std::string text) {
  const std::string root = served().root.string() + "/";
  for (size_t at; (at = text.find(root)) != std::string::npos;) text.erase(at, root.size());
  return text;
}

bool spells_the_marker(std::string_view target) {
  return without_root(std::string(target)).find(kSecret) != std::string::npos ||
         without_root(percent_decoded(target)).find(kSecret) != std::string::npos;
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
  // An error may quote what was asked ("no run <path>", "unknown tfprof option '<key>'"): the
  // marker in a reply is a leak only when the request did not spell it (raw or percent-decoded,
  // as the server decodes it once, and without the served directory's path, see without_root).
  if (reply.body.find(kSecret) != std::string::npos && !spells_the_marker(target)) __builtin_trap();
  return 0;
}
