// `stepscope diff A B`: the diff of two saved profiles, RunMetadata files or steps of one profile
// (profiler/tfprof/profile_diff.h), as text or JSON, with a CI gate on the step time. A part of
// run_cli (cli.h).
//
//   stepscope diff runs/before/profile runs/after/profile         the average step of each
//   stepscope diff runs/x/profile@200 runs/x/profile@400         two steps of one profile
//   stepscope diff profile --step-a 200 --step-b 400             the same
//   stepscope diff run_metadata-100.pb run_metadata-200.pb.gz    two RunMetadata files
//   stepscope diff base.profile new.profile --fail-if-slower 5   exit 3 when B is > 5% slower
//
// A file is a saved profile when it starts with the profile's magic (after gunzip), otherwise
// it is read as a RunMetadata (its step numbered N when the file is ProfilerHook's
// run_metadata-N.pb[.gz], else 0). "FILE@N" names step N of FILE (when no file is named
// "FILE@N"); with one input, B is the same file as A. A corrupt, truncated or missing file is
// an error naming it and what is wrong (exit status 1).
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace stepscope {

// Exit status of `stepscope diff` when --fail-if-slower trips (1: an error, 2: usage).
inline constexpr int kDiffSlowerExitCode = 3;

struct DiffCommand {
  CLI::App* command = nullptr;
  std::vector<std::string> inputs;
  int64_t step_a = std::numeric_limits<int64_t>::min();  // min: not given
  int64_t step_b = std::numeric_limits<int64_t>::min();
  bool json = false;
  double fail_if_slower = -1;  // < 0: no gate
  size_t top = 20;
};

// Adds the "diff" subcommand to `app`, its flags bound to `d`.
void add_diff_command(CLI::App& app, DiffCommand& d);
// Runs it once parsed: 0, kDiffSlowerExitCode when the gate trips (the reason on `err`); throws
// the loaders' errors (run_cli prints them and returns 1).
int run_diff_command(const DiffCommand& d, uint64_t max_decompressed_bytes, std::ostream& out, std::ostream& err);

}  // namespace stepscope
