// The `checkpoint` index file (text proto naming the newest and all kept checkpoints).
#include "fuzz/fuzz_util.h"
#include "stepscope/train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  fuzz::expect_parsed_or_typed_error(
      [&] { parse_checkpoint_state(fuzz::as_bytes(data, size), "fuzz/checkpoint"); });
  return 0;
}
