#include "stepscope/train/idx.h"

#include <bit>
#include <cstring>
#include <vector>

#include "stepscope/base/error.h"

namespace stepscope {

namespace {

[[noreturn]] void corrupt(const std::string& source, const std::string& why) {
  throw DataLossError("corrupt IDX file '" + source + "': " + why);
}

uint32_t get_be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Converts n big-endian elements of type S into `out` (T: the tensor's element type).
template <typename S, typename T>
void convert(const unsigned char* p, size_t n, T* out) {
  for (size_t i = 0; i < n; ++i, p += sizeof(S)) {
    std::make_unsigned_t<std::conditional_t<std::is_floating_point_v<S>,
                                            std::conditional_t<sizeof(S) == 4, int32_t, int64_t>, S>>
        u = 0;
    for (size_t b = 0; b < sizeof(S); ++b) u = static_cast<decltype(u)>((u << 8) | p[b]);
    out[i] = static_cast<T>(std::bit_cast<S>(u));
  }
}

}  // namespace

Tensor parse_idx(std::string_view bytes, const std::string& source) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) corrupt(source, "it has " + std::to_string(bytes.size()) + " bytes, fewer than the 4 of the magic");
  if (p[0] != 0 || p[1] != 0) corrupt(source, "bad magic (the first two bytes must be 0; is it an IDX file?)");
  const unsigned type = p[2], rank = p[3];
  size_t element = 0;
  DType dtype = DType::kInt32;
  switch (type) {
    case 0x08:
    case 0x09:
      element = 1;
      break;
    case 0x0B:
      element = 2;
      break;
    case 0x0C:
      element = 4;
      break;
    case 0x0D:
      element = 4, dtype = DType::kFloat32;
      break;
    case 0x0E:
      element = 8, dtype = DType::kFloat64;
      break;
    default:
      corrupt(source, "unknown element type 0x" + std::string(1, "0123456789ABCDEF"[type >> 4]) +
              std::string(1, "0123456789ABCDEF"[type & 15]));
  }
  if (rank > static_cast<unsigned>(Shape::kMaxRank))
    corrupt(source, "rank " + std::to_string(rank) + " exceeds stepscope's maximum of " + std::to_string(Shape::kMaxRank));
  const uint64_t header = 4 + 4 * uint64_t{rank};
  if (bytes.size() < header)
    corrupt(source, "truncated header: " + std::to_string(rank) + " dimensions need " + std::to_string(header) +
            " bytes, the file has " + std::to_string(bytes.size()));
  std::vector<int64_t> dims(rank);
  uint64_t count = 1, data_bytes = 0;
  bool overflow = false;
  // The running product must also fit a Shape's int64 element count, which is computed left to
  // right: [2^23, 2^30, 2^30, 0] holds no element but is still refused, as TensorFlow refuses it.
  int64_t running = 1;
  for (unsigned i = 0; i < rank; ++i) {
    dims[i] = get_be32(p + 4 + 4 * i);
    overflow |= __builtin_mul_overflow(count, static_cast<uint64_t>(dims[i]), &count);
    overflow |= __builtin_mul_overflow(running, dims[i], &running);
  }
  overflow |= __builtin_mul_overflow(count, uint64_t{element}, &data_bytes);
  const uint64_t have = bytes.size() - header;
  if (overflow || data_bytes != have) {
    std::string shape;
    for (unsigned i = 0; i < rank; ++i) shape += (i ? "x" : "") + std::to_string(dims[i]);
    corrupt(source, "dimensions [" + shape + "] of " + std::to_string(element) + "-byte elements need " +
                        (overflow ? std::string("more bytes than fit in 64 bits")
                                  : std::to_string(data_bytes) + " data bytes") +
                        ", the file has " + std::to_string(have) + " from offset " + std::to_string(header) + " (" +
                        (have < data_bytes || overflow ? "truncated at offset " : "extra bytes from offset ") +
                        std::to_string(have < data_bytes || overflow ? bytes.size() : header + data_bytes) + ")");
  }
  // The size is now the file's own, so allocating it is safe.
  Tensor t(dtype, Shape(std::span<const int64_t>(dims)));
  const unsigned char* data = p + header;
  switch (type) {
    case 0x08:
      convert<uint8_t>(data, count, t.data<int32_t>());
      break;
    case 0x09:
      convert<int8_t>(data, count, t.data<int32_t>());
      break;
    case 0x0B:
      convert<int16_t>(data, count, t.data<int32_t>());
      break;
    case 0x0C:
      convert<int32_t>(data, count, t.data<int32_t>());
      break;
    case 0x0D:
      convert<float>(data, count, t.data<float>());
      break;
    default:
      convert<double>(data, count, t.data<double>());
  }
  return t;
}

Tensor read_idx(const std::string& path, uint64_t max_decompressed_bytes) {
  return parse_idx(read_file(path, max_decompressed_bytes, Gunzip::kByContent), path);
}

}  // namespace stepscope
