#include "stepscope/train/idx.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "stepscope/base/error.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using testing::error_text;

std::string idx(uint8_t type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  return out + data;
}

TEST(Idx, EveryElementTypeBigEndian) {
  Tensor u8 = parse_idx(idx(0x08, {2, 3}, std::string("\x00\x01\x7f\x80\xfe\xff", 6)), "u8");
  EXPECT_EQ(u8.dtype(), DType::kInt32);
  EXPECT_EQ(u8.shape(), (Shape{2, 3}));
  EXPECT_EQ(u8.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 127, 128, 254, 255}));
  EXPECT_EQ(parse_idx(idx(0x09, {2}, "\x80\x7f"), "i8").to_vector<int32_t>(), (std::vector<int32_t>{-128, 127}));
  EXPECT_EQ(parse_idx(idx(0x0B, {2}, std::string("\xff\xfe\x01\x00", 4)), "i16").to_vector<int32_t>(),
            (std::vector<int32_t>{-2, 256}));
  EXPECT_EQ(parse_idx(idx(0x0C, {1}, std::string("\x80\x00\x00\x00", 4)), "i32").to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MIN}));
  Tensor f = parse_idx(idx(0x0D, {1}, std::string("\x3f\xc0\x00\x00", 4)), "f32");
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f}));
  EXPECT_EQ(parse_idx(idx(0x0E, {1}, std::string("\xc0\x04\x00\x00\x00\x00\x00\x00", 8)), "f64").to_vector<double>(),
            (std::vector<double>{-2.5}));
  Tensor scalar = parse_idx(idx(0x08, {}, "\x05"), "scalar");
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(parse_idx(idx(0x08, {0, 28, 28}, ""), "empty").shape(), (Shape{0, 28, 28}));
}

TEST(Idx, MalformedFilesAreDataLossNamingTheFile) {
  auto error = [](const std::string& bytes) {
    return error_text<DataLossError>([&] { parse_idx(bytes, "t10k-images-idx3-ubyte"); });
  };
  const std::string prefix = "corrupt IDX file 't10k-images-idx3-ubyte': ";
  EXPECT_EQ(error(""), prefix + "it has 0 bytes, fewer than the 4 of the magic");
  EXPECT_EQ(error(std::string("\x01\x00\x08\x01", 4)), prefix + "bad magic (the first two bytes must be 0; is it an IDX file?)");
  EXPECT_EQ(error(idx(0x0A, {1}, "x")), prefix + "unknown element type 0x0A");
  EXPECT_EQ(error(std::string("\0\0\x08\xff", 4)), prefix + "rank 255 exceeds stepscope's maximum of " +
                                                       std::to_string(Shape::kMaxRank));
  EXPECT_EQ(error(idx(0x08, {3, 2}, "").substr(0, 9)),
            prefix + "truncated header: 2 dimensions need 12 bytes, the file has 9");
  EXPECT_EQ(error(idx(0x08, {2, 2}, "abc")), prefix +
                                                 "dimensions [2x2] of 1-byte elements need 4 data bytes, the file has "
                                                 "3 from offset 12 (truncated at offset 15)");
  EXPECT_EQ(error(idx(0x0C, {2}, "abcdefghi")), prefix +
                                                    "dimensions [2] of 4-byte elements need 8 data bytes, the file has "
                                                    "9 from offset 8 (extra bytes from offset 16)");
  // Claimed sizes that overflow 64 bits are caught before anything is allocated.
  EXPECT_EQ(error(idx(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, "")),
            prefix +
                "dimensions [4294967295x4294967295x4294967295] of 8-byte elements need more bytes than fit in 64 "
                "bits, the file has 0 from offset 16 (truncated at offset 16)");
  EXPECT_EQ(error(idx(0x0E, {0xffffffff, 0xffffffff}, "")),
            prefix +
                "dimensions [4294967295x4294967295] of 8-byte elements need more bytes than fit in 64 bits, the "
                "file has 0 from offset 12 (truncated at offset 12)");
  // Even when a later dimension is 0 (found by the fuzzer: the Shape's left-to-right element
  // count overflowed in the Tensor it was about to make).
  EXPECT_EQ(error(idx(0x0D, {0x800000, 0x40000000, 0x40000000, 0}, "")),
            prefix +
                "dimensions [8388608x1073741824x1073741824x0] of 4-byte elements need more bytes than fit in 64 "
                "bits, the file has 0 from offset 20 (truncated at offset 20)");
}

TEST(Idx, ReadIdxGunzipsByContentWithABound) {
  const testing::TempDir tmp;
  const fs::path dir = tmp.path();
  const std::string bytes = idx(0x08, {100, 28, 28}, std::string(78400, '\x07'));
  write_file_atomically(dir / "images.idx", bytes);
  write_file_atomically(dir / "images.gz", bytes, /*gzip=*/true);
  write_file_atomically(dir / "images-idx3-ubyte", bytes, /*gzip=*/true);  // gzip without the name
  for (const char* name : {"images.idx", "images.gz", "images-idx3-ubyte"}) {
    Tensor t = read_idx((dir / name).string());
    EXPECT_EQ(t.shape(), (Shape{100, 28, 28})) << name;
    EXPECT_EQ(t.to_vector<int32_t>()[78399], 7) << name;
  }
  const std::string e =
      error_text<ResourceExhaustedError>([&] { read_idx((dir / "images.gz").string(), 10000); });
  EXPECT_EQ(e.rfind((dir / "images.gz").string() + ": gzip data inflates past the limit of 10000 bytes", 0), 0u) << e;
  EXPECT_THROW(read_idx((dir / "missing").string()), NotFoundError);
}

}  // namespace
}  // namespace stepscope
