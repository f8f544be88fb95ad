// tfprof profile files (ProfilerHook's `profile`, `stepscope prof --profile`): loaded as the
// command line loads them, then shown in the four views, which walk everything the loader let in.

#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_util.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  // Profiler::load reads a path; one scratch file per fuzzing process.
  static const fuzz::ScratchPath scratch("stepscope-fuzz-profile");
  const std::filesystem::path& path = scratch.path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  fuzz::expect_parsed_or_typed_error([&] {
    Profiler profiler = Profiler::load(path);
    const ProfileOptions options = ProfileOptionBuilder::time_and_memory(0, 0);
    (void)profiler.profile_name_scope(options);
    (void)profiler.profile_graph(options);
    (void)profiler.profile_operations(options);
    (void)profiler.profile_code(options);
  });
  return 0;
}
