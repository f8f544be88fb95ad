// TensorBoard event files (length, masked CRCs, Event protos).
#include "fuzz/fuzz_util.h"
#include "stepscope/train/event_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  fuzz::expect_parsed_or_typed_error(
      [&] { (void)parse_events(fuzz::as_bytes(data, size), "fuzz/events.out.tfevents"); });
  return 0;
}
