// safetensors checkpoints: parse_safetensors, and a file it accepts must survive a round trip.
#include "fuzz/fuzz_util.h"
#include "stepscope/train/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  fuzz::expect_parsed_or_typed_error([&] {
    SafetensorsFile file = parse_safetensors(fuzz::as_bytes(data, size), "fuzz.safetensors");
    // What was accepted is written back and read again: the same names, dtypes and shapes.
    const std::string again = serialize_safetensors(file.tensors, file.metadata);
    SafetensorsFile reread = parse_safetensors(again, "fuzz.safetensors (rewritten)");
    if (reread.tensors.size() != file.tensors.size()) __builtin_trap();
    for (const auto& [name, tensor] : file.tensors) {
      const Tensor* other = reread.find(name);
      if (other == nullptr || other->dtype() != tensor.dtype() || other->shape() != tensor.shape()) __builtin_trap();
    }
  });
  return 0;
}
