// Files as every layer reads and writes them: written atomically (a reader never sees half a
// file, a crash never damages the old one), read whole, gunzipped with a bound on what the
// inflation may produce. Errors name the file and, for a limit, the limit.
//
// Limits (see also the loaders' headers):
//  - decompressed size of a gzip input: kDefaultMaxDecompressedBytes (1 GiB) unless the caller
//    passes another bound; beyond it ResourceExhaustedError "<file>: gzip data inflates past the
//    limit of N bytes (...)". A 4 MB `.gz` can inflate to gigabytes; the bound keeps a hostile or
//    mistaken input from taking the machine's memory.
//  - plain files are read as they are: their size is their own bound.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

// An open file descriptor, closed when the Fd goes (or by close(), which reports the error that
// a write-back at close may bring: errno, or 0).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// ----- Writing -----------------------------------------------------------------------------

struct AtomicWriteOptions {
  bool gzip = false;  // one gzip member (chrome://tracing loads multi-member files truncated, catapult#4633)
  bool sync = false;  // fsync the data and the rename before returning (a crash cannot lose the file)
};

// Replaces `path` with the concatenation of `pieces`: writes a temporary file beside it, named
// `<path>.tmp-<pid>-<n>`, and renames it over `path`. On any failure the temporary file is removed
// and `path` is left as it was; errors name the path: NotFoundError (no such directory),
// PermissionDeniedError (read-only directory), ResourceExhaustedError (disk full, file too large),
// UnknownError otherwise.
//
// The first write into a directory by a process removes the temporary files that writers killed
// in the middle of a write left there (see remove_orphaned_temporaries).
void write_file_atomically(const std::filesystem::path& path, const std::vector<std::string_view>& pieces,
                           AtomicWriteOptions options = {});
inline void write_file_atomically(const std::filesystem::path& path, std::string_view contents, bool gzip = false,
                                  bool sync = false) {
  write_file_atomically(path, std::vector<std::string_view>{contents}, {.gzip = gzip, .sync = sync});
}

// The same, with the contents made while they are written: `produce(write)` calls write(piece)
// for each piece in order, so a big text (a flight recorder's dump) goes to the file, and through
// gzip, without being held whole in memory. When the producer throws, the temporary file is
// removed, `path` is left as it was and the exception propagates.
using PieceWriter = std::function<void(std::string_view)>;
void write_file_atomically_streamed(const std::filesystem::path& path,
                                    const std::function<void(const PieceWriter&)>& produce,
                                    AtomicWriteOptions options = {});

// Removes from `dir` the temporary files of write_file_atomically (`<name>.tmp-<pid>-<n>`) whose
// writer is gone: no process has that pid, or the process that has it now started after the
// file was last written (so the pid was reused). Returns how many were removed; errors are
// ignored (another process may be cleaning too). Called by write_file_atomically.
size_t remove_orphaned_temporaries(const std::filesystem::path& dir);

// gzip of `data` as one member (zlib's deflate, level 1: see file_io.cc), appended to `out`.
void gzip_append(std::string& out, std::string_view data);

// ----- Reading -----------------------------------------------------------------------------

inline constexpr uint64_t kDefaultMaxDecompressedBytes = uint64_t{1} << 30;

// When read_file inflates: files whose name ends in ".gz" (corrupt when they are not gzip),
// files that start with gzip's magic bytes 1f 8b whatever their name, or never (the raw bytes).
enum class Gunzip { kByName, kByContent, kNever };

// The file's contents, gunzipped (every member) as `when` says, at most `max_decompressed_bytes`
// after inflation. NotFoundError / PermissionDeniedError naming the path when it cannot be read,
// DataLossError naming it when its gzip data is corrupt or truncated, ResourceExhaustedError
// naming it and the limit when the data inflates past it.
std::string read_file(const std::filesystem::path& path, uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes,
                      Gunzip when = Gunzip::kByName);

// Whether `bytes` start with gzip's magic (1f 8b).
bool is_gzip(std::string_view bytes);
// Every gzip member of `data`, inflated; `source` names the data in errors (as read_file).
std::string gunzip(std::string_view data, const std::string& source,
                   uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes);

}  // namespace stepscope
