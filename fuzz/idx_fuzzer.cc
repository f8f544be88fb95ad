// IDX files (MNIST, Fashion-MNIST; plain or gzip).
#include "fuzz/fuzz_util.h"
#include "stepscope/train/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  fuzz::expect_parsed_or_typed_error([&] { (void)parse_idx(fuzz::as_bytes(data, size), "fuzz.idx"); });
  return 0;
}
