// safetensors: byte-exact layout against the reference's examples, round trips, every reader
// check, robustness against truncated and damaged files, atomic writes.
#include "stepscope/train/safetensors.h"
#include "stepscope/testing/temp_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
// A file from a header text (no padding added) and a data buffer.
std::string make_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

// Runs `f`, expecting a stepscope error of `code` whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown" << (parts.size() ? " for " + *parts.begin() : "");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}
void expect_corrupt(const std::string& bytes, std::initializer_list<std::string> parts) {
  SCOPED_TRACE(bytes);
  expect_error([&] { parse_safetensors(bytes, "x.safetensors"); }, ErrorCode::kDataLoss, parts);
}

// ---------------------------------------------------------------------------------------------
// Byte-exact layout (reference Part B6).

TEST(SafetensorsLayout, ReferenceTestSerialization) {
  std::string bytes =
      serialize_safetensors({{"attn.0", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, Shape{1, 2, 3})}});
  std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  const unsigned char data[] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40,
                                0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xA0, 0x40};
  std::string expected =
      std::string("\x40\0\0\0\0\0\0\0", 8) + header + std::string(reinterpret_cast<const char*>(data), sizeof data);
  EXPECT_EQ(bytes.size(), 96u);
  EXPECT_EQ(bytes, expected);
}

TEST(SafetensorsLayout, ReferenceTestEmpty) {
  EXPECT_EQ(serialize_safetensors({}), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_EQ(serialize_safetensors({}, {{"framework", "pt"}}),
            le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST(SafetensorsLayout, ReferenceForcedAlignment) {
  std::string bytes =
      serialize_safetensors({{"attn0", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, Shape{1, 1, 2, 3})}});
  std::string json = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(json.size(), 65u);
  EXPECT_EQ(bytes.substr(0, 8 + 72), le64(72) + json + std::string(7, ' '));
  EXPECT_EQ(bytes.size(), 8u + 72 + 24);
}

// Hand-computed per B4: sort by dtype rank descending (I64 > F64 > F32 > I32 > BOOL), ties by
// name bytewise; offsets back to back; metadata first; spaces to a multiple of 8.
TEST(SafetensorsLayout, SortOrderOffsetsAndPadding) {
  NamedTensors tensors = {
      {"flag", Tensor::from_vector<bool>({true, false, true})},
      {"b", Tensor::from_vector<float>({1.5f, -2.0f})},
      {"step", Tensor::scalar<int64_t>(7)},
      {"a", Tensor::from_vector<float>({}, Shape{0, 3})},
      {"n", Tensor::scalar<int32_t>(-1)},
      {"d", Tensor::from_vector<double>({0.25})},
  };
  std::string bytes = serialize_safetensors(tensors, {{"global_step", "7"}});
  std::string json = R"({"__metadata__":{"global_step":"7"},)"
                     R"("step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                     R"("d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                     R"("a":{"dtype":"F32","shape":[0,3],"data_offsets":[16,16]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                     R"("n":{"dtype":"I32","shape":[],"data_offsets":[24,28]},)"
                     R"("flag":{"dtype":"BOOL","shape":[3],"data_offsets":[28,31]}})";
  size_t padded = (json.size() + 7) / 8 * 8;
  ASSERT_EQ(bytes.substr(0, 8 + padded), le64(padded) + json + std::string(padded - json.size(), ' '));
  std::string data = bytes.substr(8 + padded);
  ASSERT_EQ(data.size(), 31u);
  int64_t step;
  std::memcpy(&step, data.data(), 8);
  EXPECT_EQ(step, 7);
  double d;
  std::memcpy(&d, data.data() + 8, 8);
  EXPECT_EQ(d, 0.25);
  EXPECT_EQ(data.substr(16, 8), std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8));  // 1.5f, -2.0f
  EXPECT_EQ(data.substr(24, 4), std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(data.substr(28), std::string("\x01\x00\x01", 3));
}

TEST(SafetensorsLayout, NamesAreEscapedAsJson) {
  std::string name = "a\"b\\c\nd\x01\xc3\xa9";
  std::string bytes = serialize_safetensors({{name, Tensor::scalar<float>(1)}}, {{"k\t", "v\"\x7f"}});
  EXPECT_THAT(bytes, HasSubstr(R"({"__metadata__":{"k\t":"v\")"
                               "\x7f"
                               R"("},"a\"b\\c\nd\u0001)"
                               "\xc3\xa9"
                               R"(":)"));
  SafetensorsFile f = parse_safetensors(bytes);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].first, name);
  EXPECT_EQ(f.metadata.at("k\t"), "v\"\x7f");
}

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST(SafetensorsRoundTrip, EveryDtypeScalarsAndEmptyTensors) {
  TempDir dir;
  NamedTensors tensors = {
      {"f32", Tensor::from_vector<float>({1.5f, -0.0f, 3e38f, 1e-45f, 2, 3}, Shape{2, 3})},
      {"f64", Tensor::from_vector<double>({1e300, -2.5, 0.1}, Shape{3, 1})},
      {"i32", Tensor::from_vector<int32_t>({INT32_MIN, -1, 0, INT32_MAX})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, Shape{1, 2, 1})},
      {"bool", Tensor::from_vector<bool>({true, false, false, true}, Shape{2, 2})},
      {"f32_scalar", Tensor::scalar<float>(42.0f)},
      {"f64_scalar", Tensor::scalar<double>(-1.0)},
      {"i32_scalar", Tensor::scalar<int32_t>(5)},
      {"i64_scalar", Tensor::scalar<int64_t>(1LL << 40)},
      {"bool_scalar", Tensor::scalar<bool>(true)},
      {"f32_empty", Tensor::from_vector<float>({}, Shape{0})},
      {"f64_empty", Tensor::from_vector<double>({}, Shape{2, 0, 3})},
      {"i32_empty", Tensor::from_vector<int32_t>({}, Shape{0, 0})},
      {"i64_empty", Tensor::from_vector<int64_t>({}, Shape{0})},
      {"bool_empty", Tensor::from_vector<bool>({}, Shape{4, 0})},
      {"rank8", Tensor::from_vector<float>({1, 2}, Shape{1, 1, 1, 1, 1, 1, 1, 2})},
  };
  std::map<std::string, std::string> metadata = {{"format", "stepscope"}, {"note", "ünïcode ✓"}, {"", ""}};
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, tensors, metadata);
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata, metadata);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor* got = f.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype(), t.dtype()) << name;
    EXPECT_EQ(got->shape(), t.shape()) << name;
    EXPECT_TRUE(tensors_equal(*got, t)) << name << ": " << got->debug_string();
  }
  EXPECT_EQ(f.find("missing"), nullptr);
  // File order is the writer's order: the widest dtype first.
  EXPECT_EQ(f.tensors.front().second.dtype(), DType::kInt64);
  EXPECT_EQ(f.tensors.back().second.dtype(), DType::kBool);
  // The same bytes in memory as on disk.
  EXPECT_EQ(read_bytes(path), serialize_safetensors(tensors, metadata));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"all.safetensors"});  // no temporary left
}

TEST(SafetensorsRoundTrip, MapOverloadAndOverwrite) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  save_safetensors(path, std::map<std::string, Tensor>{{"x", Tensor::scalar<float>(1)}});
  save_safetensors(path, std::map<std::string, Tensor>{{"y", Tensor::scalar<int32_t>(2)}}, {{"v", "2"}});
  SafetensorsFile f = load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].first, "y");
  EXPECT_EQ(f.tensors[0].second.scalar_value<int32_t>(), 2);
  EXPECT_EQ(f.metadata.at("v"), "2");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
}

TEST(SafetensorsRoundTrip, LoadedTensorsAreIndependent) {
  Tensor t = Tensor::from_vector<float>({1, 2});
  SafetensorsFile f = parse_safetensors(serialize_safetensors({{"t", t}}));
  f.tensors[0].second.data<float>()[0] = 9;
  EXPECT_EQ(t.data<float>()[0], 1);
}

// ---------------------------------------------------------------------------------------------
// What the reader accepts beyond what the writer produces.

TEST(SafetensorsReader, AcceptsWhitespaceKeyOrderExtraKeysAndNullMetadata) {
  std::string header =
      " \t\r\n{\"__metadata__\":null, \"b\":{\"data_offsets\":[4,8],\"shape\":[],\"dtype\":\"F32\",\"extra\":[1]},"
      "\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}\n  ";
  std::string data = std::string("\x07\0\0\0", 4) + std::string("\0\0\x80\x3f", 4);
  SafetensorsFile f = parse_safetensors(make_file(header, data));
  EXPECT_TRUE(f.metadata.empty());
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "a");
  EXPECT_EQ(f.tensors[0].second.to_vector<int32_t>(), std::vector<int32_t>{7});
  EXPECT_EQ(f.tensors[1].first, "b");
  EXPECT_EQ(f.tensors[1].second.scalar_value<float>(), 1.0f);
}

TEST(SafetensorsReader, EmptyTensorsMayShareAnOffset) {
  std::string header =
      R"({"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"y":{"dtype":"BOOL","shape":[3,0],"data_offsets":[0,0]},)"
      R"("x":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  SafetensorsFile f = parse_safetensors(make_file(header, std::string(8, '\0')));
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.find("y")->shape(), (Shape{3, 0}));
  EXPECT_EQ(f.find("x")->scalar_value<int64_t>(), 0);
}

TEST(SafetensorsReader, ValidFileWithOtherDtypesIsUnimplemented) {
  std::string header = R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  expect_error([&] { parse_safetensors(make_file(header, "abcd"), "half.safetensors"); }, ErrorCode::kUnimplemented,
               {"half.safetensors", "`h`", "F16"});
  std::string deep = R"({"r":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})";
  expect_error([&] { parse_safetensors(make_file(deep, "abcd")); }, ErrorCode::kUnimplemented, {"rank 9"});
}

// ---------------------------------------------------------------------------------------------
// Every reader check of the reference (B5), in its order.

TEST(SafetensorsReader, Check1HeaderTooSmall) {
  expect_corrupt("", {"x.safetensors", "header too small", "0 bytes"});
  expect_corrupt(std::string("\x08\0\0\0\0\0\0", 7), {"header too small", "7 bytes"});
}

TEST(SafetensorsReader, Check2HeaderTooLarge) {
  expect_corrupt(le64(100'000'001) + "{}", {"header too large", "100000001"});
  expect_corrupt(le64(~0ULL) + "{}", {"header too large"});
}

TEST(SafetensorsReader, Check3InvalidHeaderLength) {
  expect_corrupt(le64(16) + "{}      ", {"invalid header length", "16 bytes", "has 16 bytes"});
  expect_corrupt(le64(100'000'000) + "{}", {"invalid header length"});
}

TEST(SafetensorsReader, Check4InvalidUtf8) {
  expect_corrupt(make_file("{\"a\xff\":1}"), {"invalid UTF-8 in header at byte 11"});
  expect_corrupt(make_file("{\"\xc0\xaf\":1}"), {"invalid UTF-8"});          // overlong '/'
  expect_corrupt(make_file("{\"\xed\xa0\x80\":1}"), {"invalid UTF-8"});      // surrogate
  expect_corrupt(make_file("{\"\xf4\x90\x80\x80\":1}"), {"invalid UTF-8"});  // above U+10FFFF
  expect_corrupt(make_file("{\"\xe2\x82\":1}"), {"invalid UTF-8"});          // cut short
}

TEST(SafetensorsReader, Check5InvalidJson) {
  const std::string j = "invalid JSON in header";
  expect_corrupt(make_file("{"), {j});
  expect_corrupt(make_file("{}x"), {j});
  expect_corrupt(make_file(std::string("{}\0\0\0\0\0\0", 8)), {j});  // NUL padding is not whitespace
  expect_corrupt(make_file(std::string("{\"a\"\0:1}", 8)), {j, "NUL byte at byte 12"});
  expect_corrupt(make_file("[]"), {j, "not a JSON object"});
  expect_corrupt(make_file(R"({"a":1})"), {j, "`a` is not an object"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F17","shape":[],"data_offsets":[0,0]}})"), {j, "unknown dtype `F17`"});
  expect_corrupt(make_file(R"({"a":{"dtype":"f32","shape":[],"data_offsets":[0,4]}})", "abcd"), {j, "unknown dtype"});
  expect_corrupt(make_file(R"({"a":{"dtype":3,"shape":[],"data_offsets":[0,4]}})", "abcd"),
                 {j, "dtype is not a string"});
  expect_corrupt(make_file(R"({"a":{"shape":[],"data_offsets":[0,4]}})", "abcd"), {j, "`a` has no dtype"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), {j, "has no shape"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[]}})", "abcd"), {j, "has no data_offsets"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4,4]}})", "abcd"), {j, "data_offsets"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0]}})", "abcd"), {j, "data_offsets"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[-1,4]}})", "abcd"), {j, "non-negative"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), {j, "shape"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", "abcd"), {j, "shape"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", "abcd"), {j, "not an array"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}})", "abcd"),
                 {j});
  expect_corrupt(make_file(R"({"__metadata__":{"k":1}})"), {j, "__metadata__ value for `k` is not a string"});
  expect_corrupt(make_file(R"({"__metadata__":["k"]})"), {j, "__metadata__"});
  // Duplicates are refused outright (the reference would silently keep the last one).
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                           "abcd"),
                 {j, "duplicate key `a`"});
  expect_corrupt(make_file(R"({"__metadata__":{"k":"1","k":"2"}})"), {j, "duplicate key `k`"});
  expect_corrupt(make_file(std::string(1000, '[') + std::string(1000, ']')), {j, "recursion limit"});
}

TEST(SafetensorsReader, Check6InvalidOffset) {
  const std::string data(8, '\0');
  // Gap before the first tensor.
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})", data),
                 {"invalid offset for tensor `a`", "[4,8]", "begin at 0"});
  // Gap between tensors.
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("b":{"dtype":"F32","shape":[],"data_offsets":[5,9]}})",
                           std::string(9, '\0')),
                 {"invalid offset for tensor `b`"});
  // Overlap.
  expect_corrupt(make_file(R"({"a":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
                           data),
                 {"invalid offset for tensor `b`", "begin at 8"});
  // end < begin.
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                           R"("b":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("c":{"dtype":"F32","shape":[],"data_offsets":[4,2]}})",
                           data),
                 {"invalid offset for tensor `c`"});
}

TEST(SafetensorsReader, Check7Overflow) {
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd"),
                 {"overflow computing buffer size for tensor `a`"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", "abcd"),
                 {"overflow computing buffer size"});
}

TEST(SafetensorsReader, Check8MisalignedSubByteSlice) {
  expect_corrupt(make_file(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "ab"),
                 {"sub-byte", "`a`", "F4"});
}

TEST(SafetensorsReader, Check9SizeMismatch) {
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, '\0')),
                 {"invalid shape, data type, or offset for tensor `a`", "needs 24 bytes", "give 20"});
  expect_corrupt(make_file(R"({"a":{"dtype":"I64","shape":[],"data_offsets":[0,4]}})", "abcd"),
                 {"invalid shape, data type, or offset"});
}

TEST(SafetensorsReader, Check10BufferNotCovered) {
  std::string good = serialize_safetensors({{"a", Tensor::from_vector<float>({1, 2})}});
  expect_corrupt(good + "x", {"incomplete metadata, file not fully covered", "8 bytes", "9 bytes"});
  expect_corrupt(make_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abc"), {"incomplete metadata"});
  expect_corrupt(make_file(R"({"a":{"dtype":"U8","shape":[281474976710655],"data_offsets":[0,281474976710655]}})"),
                 {"incomplete metadata"});
}

TEST(SafetensorsReader, BoolBytesMustBeZeroOrOne) {
  std::string header = R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
  expect_corrupt(make_file(header, std::string("\x01\x00\x02", 3)), {"`b`", "byte 2 at element 2"});
}

// ---------------------------------------------------------------------------------------------
// Robustness: nothing a damaged file holds may crash the reader.

std::string small_valid_file() {
  return serialize_safetensors({{"w", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})},
                                {"step", Tensor::scalar<int64_t>(12)},
                                {"mask", Tensor::from_vector<bool>({true, false})},
                                {"e", Tensor::from_vector<double>({}, Shape{0, 2})}},
                               {{"global_step", "12"}});
}

TEST(SafetensorsRobustness, EveryTruncationIsDataLoss) {
  const std::string full = small_valid_file();
  ASSERT_NO_THROW(parse_safetensors(full));
  for (size_t len = 0; len < full.size(); ++len) {
    try {
      parse_safetensors(full.substr(0, len));
      ADD_FAILURE() << "a file cut to " << len << " bytes was accepted";
    } catch (const DataLossError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "length " << len << ": " << e.what();
    }
  }
  // The same through the file system for a few lengths.
  TempDir dir;
  for (size_t len : {size_t{0}, size_t{7}, size_t{8}, full.size() / 2, full.size() - 1}) {
    write_bytes(dir.file("t"), full.substr(0, len));
    EXPECT_THROW(load_safetensors(dir.file("t")), DataLossError) << len;
  }
}

TEST(SafetensorsRobustness, RandomByteFlipsNeverCrash) {
  const std::string full = small_valid_file();
  const uint64_t header_end = 8 + (static_cast<unsigned char>(full[0]) | static_cast<unsigned char>(full[1]) << 8);
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = full;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      // Mostly in the header (that is where the structure is), sometimes anywhere.
      size_t at = (iter % 4 == 0) ? rng() % bytes.size() : rng() % header_end;
      bytes[at] = (iter % 2) ? static_cast<char>(rng()) : static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
    }
    try {
      SafetensorsFile f = parse_safetensors(bytes);
      ++accepted;
      for (const auto& [name, t] : f.tensors) ASSERT_GE(t.num_elements(), 0);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a stepscope::Error: " << e.what();
    }
  }
  // Flips inside tensor data, names or metadata values leave valid files; most others do not.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 20000);
}

// Structural damage: spans of the header replaced by JSON-looking tokens, so that the parser and
// the schema checks see many almost-valid headers.
TEST(SafetensorsRobustness, RandomHeaderEditsNeverCrash) {
  const std::string full = small_valid_file();
  const size_t n = static_cast<unsigned char>(full[0]) | static_cast<unsigned char>(full[1]) << 8;
  const std::string header = full.substr(8, n), data = full.substr(8 + n);
  const std::vector<std::string> tokens = {"{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           ",",
                                           ":",
                                           "0",
                                           "8",
                                           "24",
                                           "-1",
                                           "1e400",
                                           "18446744073709551615",
                                           "null",
                                           "true",
                                           "\"F32\"",
                                           "\"BOOL\"",
                                           "\"F4\"",
                                           "\"shape\"",
                                           "\"dtype\"",
                                           "\"data_offsets\"",
                                           "\"__metadata__\"",
                                           "\\u0000",
                                           " ",
                                           "\xff"};
  std::mt19937 rng(99);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string h = header;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % (h.size() + 1), len = std::min<size_t>(rng() % 6, h.size() - at);
      h.replace(at, len, tokens[rng() % tokens.size()]);
    }
    std::string bytes = make_file(h, iter % 3 ? data : data.substr(0, rng() % (data.size() + 1)));
    try {
      parse_safetensors(bytes);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a stepscope::Error: " << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Writer argument checks.

TEST(SafetensorsWriter, RefusesWhatCannotBeReadBack) {
  auto ser = [](NamedTensors t, std::map<std::string, std::string> m = {}) { serialize_safetensors(t, m); };
  expect_error([&] { ser({{"s", Tensor(DType::kString, Shape{1})}}); }, ErrorCode::kInvalidArgument, {"string"});
  expect_error([&] { ser({{"u", Tensor()}}); }, ErrorCode::kInvalidArgument, {"`u`", "uninitialized"});
  expect_error(
      [&] {
        ser({{"a", Tensor::scalar<float>(1)}, {"a", Tensor::scalar<float>(2)}});
      },
      ErrorCode::kInvalidArgument, {"two tensors are named `a`"});
  expect_error(
      [&] {
        ser({{"__metadata__", Tensor::scalar<float>(1)}});
      },
      ErrorCode::kInvalidArgument, {"__metadata__"});
  expect_error([&] { ser({{"bad\xff", Tensor::scalar<float>(1)}}); }, ErrorCode::kInvalidArgument, {"UTF-8"});
  expect_error([&] { ser({}, {{"k", "\xc3"}}); }, ErrorCode::kInvalidArgument, {"UTF-8", "`k`"});
}

// ---------------------------------------------------------------------------------------------
// File-system errors and atomic writes.

TEST(SafetensorsFiles, MissingFileIsNotFound) {
  TempDir dir;
  expect_error([&] { load_safetensors(dir.file("nope.safetensors")); }, ErrorCode::kNotFound,
               {dir.file("nope.safetensors")});
  expect_error([&] { load_safetensors(dir.path()); }, ErrorCode::kFailedPrecondition, {"not a regular file"});
}

TEST(SafetensorsFiles, MissingDirectoryIsNotFoundAndCreatesNothing) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/x.safetensors");
  expect_error(
      [&] {
        save_safetensors(path, NamedTensors{{"x", Tensor::scalar<float>(1)}});
      },
      ErrorCode::kNotFound, {path, dir.file("no/such/dir")});
  EXPECT_TRUE(dir.entries().empty());
  // A parent that is a file, not a directory.
  write_bytes(dir.file("plain"), "x");
  EXPECT_THROW(save_safetensors(dir.file("plain/x.safetensors"), NamedTensors{}), NotFoundError);
}

TEST(SafetensorsFiles, ReadOnlyDirectoryKeepsTheOldFile) {
  // Root ignores directory permissions: as root, the write is made as user "nobody".
  const bool as_root = ::geteuid() == 0;
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  save_safetensors(path, NamedTensors{{"x", Tensor::scalar<float>(1)}});
  const std::string before = read_bytes(path);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  expect_error(
      [&] {
        if (as_root) {
          ASSERT_EQ(::seteuid(65534), 0);
        }
        try {
          save_safetensors(path, NamedTensors{{"x", Tensor::scalar<float>(2)}});
        } catch (...) {
          if (as_root) (void)::seteuid(0);
          throw;
        }
        if (as_root) (void)::seteuid(0);
      },
      ErrorCode::kPermissionDenied, {path, dir.path()});
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.safetensors"});
}

// A write that fails halfway (here: the file-size limit) leaves the old file whole and no
// temporary behind. Works as root, unlike permissions.
TEST(SafetensorsFiles, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  save_safetensors(path, NamedTensors{{"x", Tensor::scalar<float>(1)}});
  const std::string before = read_bytes(path);
  Tensor big(DType::kFloat32, Shape{1 << 16});
  std::fill_n(big.data<float>(), 1 << 16, 3.0f);

  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    save_safetensors(path, NamedTensors{{"x", big}});
    ADD_FAILURE() << "the write did not fail";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.safetensors"});
  EXPECT_EQ(load_safetensors(path).tensors[0].second.scalar_value<float>(), 1.0f);
}

}  // namespace
}  // namespace stepscope
