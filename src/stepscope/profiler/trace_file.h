// Files of the profiler (timelines, run metadata, profiles): written so that a reader never
// sees half a file, optionally gzipped, and read back (gunzipped) with errors that name the file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace stepscope {

// Writes `contents` to a temporary file beside `path` and renames it over `path`; with gzip,
// one gzip member (chrome://tracing loads multi-member files truncated, catapult#4633). Errors
// (unwritable directory, full disk) throw an Error naming the path: NotFoundError (no such
// directory), PermissionDeniedError, ResourceExhaustedError (disk full, file too large),
// UnknownError otherwise; nothing at `path` is touched then. With sync, the data and the
// rename are flushed to disk before returning (slower; a crash cannot lose the file).
void write_file_atomically(const std::filesystem::path& path, std::string_view contents, bool gzip = false,
                           bool sync = false);

// The file's contents; a ".gz" file is gunzipped (every member). NotFoundError /
// PermissionDeniedError naming the path when it cannot be read, DataLossError naming it when
// its gzip data is corrupt or truncated.
std::string read_file(const std::filesystem::path& path);

// gzip of `data` as one member (zlib's deflate, level 1: see trace_file.cc), appended to `out`.
void gzip_append(std::string& out, std::string_view data);

}  // namespace stepscope
