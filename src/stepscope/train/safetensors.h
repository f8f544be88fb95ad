// safetensors files (https://github.com/huggingface/safetensors): the checkpoint format, chosen
// because other tools (Python `safetensors`, torch, numpy readers) open it directly.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// `{"__metadata__":{..},"name":{"dtype":"F32","shape":[..],"data_offsets":[b,e]},..}` padded with
// spaces to a multiple of 8, then the tensors' bytes back to back (little-endian, row-major).
// stepscope reads and writes F32, F64, I32, I64 and BOOL; a valid file holding another dtype
// (F16, U8, ...) is refused with UnimplementedError when loaded.
//
// Writes are atomic (temporary file in the same directory, fsync, rename): a crash or a failed
// write never leaves a half-written file at `path` and never damages an existing one. The reader
// runs the reference implementation's checks in its order and never trusts the file: anything
// malformed is a DataLossError naming the file and the problem.
//
// Limits (checked before any tensor is allocated): the JSON header is at most
// kSafetensorsMaxHeaderSize bytes and within the file; offsets are contiguous from 0 and cover
// the data exactly; each tensor's shape product times its dtype's size is computed with overflow
// checks and must equal its offsets' span, so the tensors together are exactly the file's data
// bytes; JSON nesting is at most 128 deep; rank at most Shape::kMaxRank.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stepscope/core/tensor.h"

namespace stepscope {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  // In file order (by data offset), which is the writer's order: widest dtype first, then name.
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;

  // The tensor called `name`, or null.
  const Tensor* find(std::string_view name) const;
};

// The reference's limit on the JSON header (bytes, padding included), on write and on read.
inline constexpr uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

// Writes `tensors` (unique names in valid UTF-8, none called "__metadata__") and
// `metadata` to `path`. InvalidArgumentError for unsupported dtypes, uninitialized tensors or bad
// names; NotFoundError / PermissionDeniedError / ResourceExhaustedError naming the path when the
// file system refuses.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a whole file. NotFoundError / PermissionDeniedError naming a file that cannot be opened,
// DataLossError for a corrupt one, UnimplementedError for a valid file with dtypes or ranks
// stepscope has no tensors for.
SafetensorsFile load_safetensors(const std::string& path);

// The same format in memory (what the file functions use). `source` names the bytes in errors.
std::string serialize_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source = "<memory>");

}  // namespace stepscope
