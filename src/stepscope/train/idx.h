// IDX files, the format of MNIST and Fashion-MNIST (train-images-idx3-ubyte, often gzipped):
//
//   u8 0, u8 0, u8 type, u8 rank       the magic; type 0x08 uint8, 0x09 int8, 0x0B int16,
//                                      0x0C int32, 0x0D float32, 0x0E float64
//   rank x u32 big-endian              the dimensions
//   the elements, big-endian, row-major
//
// stepscope has no 8- or 16-bit tensors: integer types are read as int32 (exactly), float32 and
// float64 as themselves.
//
// Limits: the data must be exactly the product of the dimensions times the element size (the
// product is computed with overflow checks), so a tensor is never larger than 4x its file's
// data; rank at most Shape::kMaxRank; a gzip file inflates to at most max_decompressed_bytes
// (1 GiB by default: MNIST's largest file is 47 MB). Corrupt input is a DataLossError naming
// the file and what is wrong; too much inflation a ResourceExhaustedError naming the limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stepscope/base/file_io.h"
#include "stepscope/core/tensor.h"

namespace stepscope {

// One IDX file's bytes (not gzipped) as a tensor of its dimensions; `source` names them in errors.
Tensor parse_idx(std::string_view bytes, const std::string& source);
// The file at `path`, gunzipped when its content is gzip (whatever its name), then parse_idx.
Tensor read_idx(const std::string& path, uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes);

}  // namespace stepscope
