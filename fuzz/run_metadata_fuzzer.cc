// RunMetadata protobufs (run_metadata-<step>.pb, or TensorFlow's own), then a timeline and a
// critical path of whatever was accepted, since those read every field the parser let through.
#include "fuzz/fuzz_util.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/run_metadata_io.h"
#include "stepscope/profiler/timeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  fuzz::expect_parsed_or_typed_error([&] {
    RunMetadata metadata = parse_run_metadata(fuzz::as_bytes(data, size));
    Timeline timeline(metadata.step_stats);
    (void)timeline.generate_chrome_trace_format(/*show_dataflow=*/true, /*show_memory=*/true);
    (void)critical_path(metadata.step_stats);
  });
  return 0;
}
