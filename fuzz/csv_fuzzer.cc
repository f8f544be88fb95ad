// CSV tables (plain or gzip) for Dataset::csv. The first byte picks the options, so the fuzzer
// also reaches every dtype, label column and delimiter.
#include "fuzz/fuzz_util.h"
#include "stepscope/train/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stepscope;
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  static constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64};
  CsvOptions options;
  options.feature_dtype = kDtypes[pick & 3];
  options.label_dtype = kDtypes[(pick >> 2) & 3];
  switch ((pick >> 4) & 3) {
    case 0: options.label_column = -1; break;
    case 1: options.label_column = 0; break;
    case 2: options.label_column = std::nullopt; break;
    default: options.label_column = 2; break;
  }
  options.header_lines = (pick >> 6) & 1;
  options.delimiter = (pick & 0x80) ? ';' : ',';
  fuzz::expect_parsed_or_typed_error(
      [&] { (void)parse_csv_table(fuzz::as_bytes(data + 1, size - 1), options, "fuzz.csv"); });
  return 0;
}
