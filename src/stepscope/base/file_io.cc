#include "stepscope/base/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>

#include "stepscope/base/error.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

// Writes all of [p, p + n); false (errno set) on failure.
bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t put = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// deflate into one gzip member, fed piece by piece, each compressed chunk handed to `out`
// (which returns false to stop). Level 1: on a 14 MB trace of a 10,000-node step, 51 ms and 7.0%
// of the JSON's size, where zlib's default (6) takes 118 ms for 5.7%; traces are written after a
// training step, so speed wins.
class GzipWriter {
 public:
  using Out = std::function<bool(const char*, size_t)>;
  explicit GzipWriter(Out out) : out_(std::move(out)) {
    ok_ = deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
    initialized_ = ok_;
  }
  ~GzipWriter() {
    if (initialized_) deflateEnd(&z_);
  }
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  bool write(std::string_view data) {
    while (ok_ && !data.empty()) {  // zlib's counters are 32-bit: at most 1 GiB at a time
      const size_t n = std::min<size_t>(data.size(), size_t{1} << 30);
      deflate_some(data.substr(0, n), Z_NO_FLUSH);
      data.remove_prefix(n);
    }
    return ok_;
  }
  // Ends the member; false when anything failed.
  bool finish() {
    deflate_some({}, Z_FINISH);
    return ok_;
  }

 private:
  void deflate_some(std::string_view in, int flush) {
    if (!ok_) return;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    char chunk[1 << 16];
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(chunk);
      z_.avail_out = sizeof chunk;
      rc = deflate(&z_, flush);
      const size_t have = sizeof chunk - z_.avail_out;
      if ((rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) || (have > 0 && !out_(chunk, have))) {
        ok_ = false;
        return;
      }
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }

  Out out_;
  z_stream z_{};
  bool ok_ = false, initialized_ = false;
};

// "<name>.tmp-<pid>-<n>": the pid, or 0 when `name` is not one of our temporary files.
pid_t temporary_owner(std::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == name.size()) return 0;
  uint64_t n;
  if (auto [p, ec] = std::from_chars(name.data() + dash + 1, name.data() + name.size(), n);
      ec != std::errc() || p != name.data() + name.size())
    return 0;
  const size_t tag = name.rfind(".tmp-", dash);
  if (tag == std::string_view::npos || tag == 0) return 0;
  const char* first = name.data() + tag + 5;
  pid_t pid = 0;
  if (auto [p, ec] = std::from_chars(first, name.data() + dash, pid); ec != std::errc() || p != name.data() + dash)
    return 0;
  return pid > 0 ? pid : 0;
}

// When the process `pid` started, in seconds since the epoch; 0 when unknown (no /proc).
double process_start_time(pid_t pid) {
  static const double boot_time = [] {
    std::ifstream in("/proc/stat");
    std::string key;
    double value = 0;
    while (in >> key)
      if (key == "btime" && (in >> value)) return value;
    return 0.0;
  }();
  if (boot_time == 0) return 0;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ..."; comm may hold spaces and parentheses. starttime is field 22,
  // the 20th after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::string_view rest = std::string_view(stat).substr(close + 1);
  for (int field = 3; field < 22; ++field) {
    const size_t start = rest.find_first_not_of(' ');
    const size_t space = start == std::string_view::npos ? start : rest.find(' ', start);
    if (space == std::string_view::npos) return 0;
    rest.remove_prefix(space);
  }
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  uint64_t ticks = 0;
  if (std::from_chars(rest.data(), rest.data() + rest.size(), ticks).ec != std::errc()) return 0;
  return boot_time + static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

bool owner_is_gone(pid_t pid, const struct stat& st) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A live process has the pid. Its own temporary files were written after it started; a file
  // last written before that belongs to an earlier holder of the pid. The 2 s margin covers
  // the clocks' granularity (jiffies, file-system timestamps).
  const double started = process_start_time(pid);
  return started > 0 && static_cast<double>(st.st_mtim.tv_sec) + 2 < started;
}

// Cleans each directory once per process: leftovers appear only when a writer dies, so once is
// enough, and the scan stays off the path of every later write.
void clean_directory_once(const fs::path& dir) {
  static std::mutex mutex;
  static std::set<std::string> cleaned;
  std::error_code ec;
  fs::path key = fs::weakly_canonical(dir, ec);
  if (ec) key = dir;
  {
    std::lock_guard lock(mutex);
    if (!cleaned.insert(key.string()).second) return;
  }
  remove_orphaned_temporaries(dir);
}

}  // namespace

size_t remove_orphaned_temporaries(const fs::path& dir) {
  size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const pid_t pid = temporary_owner(name);
    if (pid == 0) continue;
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (owner_is_gone(pid, st) && ::unlink(it->path().c_str()) == 0) ++removed;
  }
  return removed;
}

void gzip_append(std::string& out, std::string_view data) {
  GzipWriter gzip([&](const char* p, size_t n) {
    out.append(p, n);
    return true;
  });
  if (!gzip.write(data) || !gzip.finish()) throw InternalError("gzip: deflate failed");
}

void write_file_atomically(const fs::path& path, const std::vector<std::string_view>& pieces,
                           AtomicWriteOptions options) {
  write_file_atomically_streamed(
      path,
      [&](const PieceWriter& write) {
        for (std::string_view piece : pieces) write(piece);
      },
      options);
}

void write_file_atomically_streamed(const fs::path& path, const std::function<void(const PieceWriter&)>& produce,
                                    AtomicWriteOptions options) {
  static std::atomic<uint64_t> sequence{0};
  const std::string target = path.string();
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  clean_directory_once(parent);
  std::string tmp;
  int raw = -1;
  for (int attempt = 0; raw < 0; ++attempt) {
    tmp = target + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(sequence++);
    raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (raw >= 0) break;
    const int err = errno;
    if (err == EEXIST && attempt < 100) continue;  // left by a dead process that had our pid
    if (err == ENOENT || err == ENOTDIR)
      throw NotFoundError("cannot write '" + target + "': directory '" + parent.string() + "' does not exist");
    if (err == EACCES || err == EPERM || err == EROFS)
      throw PermissionDeniedError("cannot write '" + target + "': directory '" + parent.string() +
                                  "' is not writable: " + std::strerror(err));
    throw_os_error(err, "cannot write '" + target + "'");
  }
  Fd fd(raw);
  auto fail = [&](int err, const std::string& what) {
    ::unlink(tmp.c_str());
    throw_os_error(err, "cannot write '" + target + "': " + what);
  };
  // The first failed write stops the file: later pieces are dropped (a producer cannot be
  // stopped halfway, and a writer that throws could be called from a destructor), and the
  // error is thrown once the producer returns.
  int write_error = 0;
  const auto write_raw = [&](const char* p, size_t n) {
    if (write_error == 0 && !write_all(fd.get(), p, n)) write_error = errno ? errno : EIO;
    return write_error == 0;
  };
  std::optional<GzipWriter> gzip;
  if (options.gzip) gzip.emplace(write_raw);
  bool gzip_ok = true;
  // Small pieces are gathered into writes of 1 MiB: a write() of each 32 KiB piece of a streamed
  // trace made a 97 MB dump 20% slower.
  constexpr size_t kStaged = size_t{1} << 20;
  std::string staged;
  const auto write_staged = [&](std::string_view piece) {
    if (staged.size() + piece.size() > kStaged && !staged.empty()) {
      write_raw(staged.data(), staged.size());
      staged.clear();
    }
    if (piece.size() >= kStaged) {
      write_raw(piece.data(), piece.size());
      return;
    }
    staged.append(piece);
  };
  try {
    produce([&](std::string_view piece) {
      if (gzip)
        gzip_ok = gzip->write(piece) && gzip_ok;
      else
        write_staged(piece);
    });
    if (gzip) gzip_ok = gzip->finish() && gzip_ok;
    if (!staged.empty()) write_raw(staged.data(), staged.size());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (write_error != 0) fail(write_error, "write failed");
  if (!gzip_ok) fail(EIO, "gzip failed");
  if (options.sync && ::fsync(fd.get()) != 0) fail(errno, "fsync failed");
  if (const int err = fd.close(); err != 0) fail(err, "close failed");
  if (::rename(tmp.c_str(), target.c_str()) != 0) fail(errno, "rename from '" + tmp + "' failed");
  if (options.sync) {
    // Make the rename itself durable; file systems that cannot fsync a directory lose nothing here.
    const int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view data, const std::string& source, uint64_t max_decompressed_bytes) {
  std::string out;
  out.reserve(std::min<uint64_t>(uint64_t{data.size()} * 4, std::min<uint64_t>(max_decompressed_bytes, 1u << 30)));
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw InternalError("gunzip: inflateInit failed");
  struct End {
    z_stream& z;
    ~End() { inflateEnd(&z); }
  } end{z};
  auto corrupt = [&](const std::string& why) { throw DataLossError(source + ": " + why); };
  if (data.empty()) corrupt("empty file, not gzip data");
  size_t fed = 0;
  char buf[1 << 16];
  for (;;) {
    if (z.avail_in == 0 && fed < data.size()) {
      const size_t n = std::min<size_t>(data.size() - fed, UINT32_MAX);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
      z.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = sizeof buf - z.avail_out;
    if (produced > max_decompressed_bytes - out.size())
      throw ResourceExhaustedError(source + ": gzip data inflates past the limit of " +
                                   std::to_string(max_decompressed_bytes) +
                                   " bytes (raise the limit, e.g. max_decompressed_bytes / "
                                   "--max-decompressed-bytes, if the file is genuine)");
    out.append(buf, produced);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && fed == data.size()) break;  // every member, one after the other
      if (inflateReset(&z) != Z_OK) corrupt("corrupt gzip data (bad member)");
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && fed == data.size())
      corrupt("truncated gzip data (unexpected end of file)");
    if (rc != Z_OK && rc != Z_BUF_ERROR) corrupt(std::string("corrupt gzip data (") + (z.msg ? z.msg : "?") + ")");
  }
  return out;
}

std::string read_file(const fs::path& path, uint64_t max_decompressed_bytes, Gunzip when) {
  const std::string name = path.string();
  Fd fd(::open(name.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_os_error(errno, "cannot read '" + name + "'");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_os_error(errno, "cannot read '" + name + "'");
  if (S_ISDIR(st.st_mode)) throw_os_error(EISDIR, "cannot read '" + name + "'");
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_os_error(errno, "cannot read '" + name + "'");
    if (got == 0) break;
    data.append(buf, static_cast<size_t>(got));
  }
  const bool inflate =
      when == Gunzip::kByName ? path.extension() == ".gz" : when == Gunzip::kByContent && is_gzip(data);
  return inflate ? gunzip(data, name, max_decompressed_bytes) : data;
}

}  // namespace stepscope
