#include "stepscope/train/event_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "stepscope/base/error.h"
#include "stepscope/base/file_io.h"
#include "stepscope/base/proto_wire.h"

namespace stepscope {

namespace wire = proto_wire;
namespace fs = std::filesystem;

// ----- CRC32C ------------------------------------------------------------------------------

namespace {

// Slicing-by-8: table k maps a byte to the CRC contribution of that byte followed by k zeros,
// so eight bytes are folded per step with eight independent lookups.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr CrcTables make_crc_tables() {
  constexpr uint32_t kPolynomial = 0x82F63B78;  // Castagnoli, reflected
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPolynomial & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  return t;
}

constexpr CrcTables kCrcTables = make_crc_tables();

}  // namespace

static_assert(std::endian::native == std::endian::little, "crc32c reads 8 bytes at a time as a little-endian word");

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto& t = kCrcTables;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= c;
    c = t[7][w & 0xFF] ^ t[6][(w >> 8) & 0xFF] ^ t[5][(w >> 16) & 0xFF] ^ t[4][(w >> 24) & 0xFF] ^
        t[3][(w >> 32) & 0xFF] ^ t[2][(w >> 40) & 0xFF] ^ t[1][(w >> 48) & 0xFF] ^ t[0][w >> 56];
  }
  for (; n > 0; --n) c = t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, crc32c_mask(crc32c(out.data(), 8)), 4);
  out.append(data);
  put_le(out, crc32c_mask(crc32c(data)), 4);
  return out;
}

// ----- Messages ----------------------------------------------------------------------------

namespace {

std::string serialize_session_log(const SessionLog& log) {
  std::string out;
  if (log.status != SessionLog::kStatusUnspecified) wire::put_int_field(out, 1, log.status);
  if (!log.checkpoint_path.empty()) wire::put_bytes_field(out, 2, log.checkpoint_path);
  if (!log.msg.empty()) wire::put_bytes_field(out, 3, log.msg);
  return out;
}

std::string serialize_tagged(const TaggedRunMetadata& t) {
  std::string out;
  if (!t.tag.empty()) wire::put_bytes_field(out, 1, t.tag);
  if (!t.run_metadata.empty()) wire::put_bytes_field(out, 2, t.run_metadata);
  return out;
}

bool parse_session_log(std::string_view bytes, SessionLog& log, std::string& error) {
  wire::Reader r(bytes);
  uint32_t field;
  wire::WireType type;
  while (!r.done()) {
    const size_t start = r.position();
    bool ok = r.next_field(field, type);
    int64_t i;
    std::string_view b;
    if (ok && field == 1) {
      if ((ok = r.read_int(type, i))) log.status = static_cast<SessionLog::Status>(i);
    } else if (ok && field == 2) {
      if ((ok = r.read_length_delimited(type, b))) log.checkpoint_path = b;
    } else if (ok && field == 3) {
      if ((ok = r.read_length_delimited(type, b))) log.msg = b;
    } else if (ok) {
      ok = r.skip(start, type);
    }
    if (!ok) {
      error = std::string("SessionLog: ") + r.error();
      return false;
    }
  }
  return true;
}

bool parse_tagged(std::string_view bytes, TaggedRunMetadata& t, std::string& error) {
  wire::Reader r(bytes);
  uint32_t field;
  wire::WireType type;
  while (!r.done()) {
    const size_t start = r.position();
    bool ok = r.next_field(field, type);
    std::string_view b;
    if (ok && field == 1) {
      if ((ok = r.read_length_delimited(type, b))) t.tag = b;
    } else if (ok && field == 2) {
      if ((ok = r.read_length_delimited(type, b))) t.run_metadata = b;
    } else if (ok) {
      ok = r.skip(start, type);
    }
    if (!ok) {
      error = std::string("TaggedRunMetadata: ") + r.error();
      return false;
    }
  }
  return true;
}

}  // namespace

std::string Event::serialize() const {
  const int set = file_version.has_value() + graph_def.has_value() + summary.has_value() + session_log.has_value() +
                  tagged_run_metadata.has_value() + meta_graph_def.has_value();
  if (set > 1)
    throw InvalidArgumentError(
        "Event: more than one of file_version, graph_def, summary, session_log, tagged_run_metadata and "
        "meta_graph_def is set (they form a oneof)");
  std::string out;
  if (std::bit_cast<uint64_t>(wall_time) != 0) wire::put_double_field(out, 1, wall_time);
  if (step != 0) wire::put_int_field(out, 2, step);
  // A member of a oneof is written when set, even at its default.
  if (file_version) wire::put_bytes_field(out, 3, *file_version);
  if (graph_def) wire::put_bytes_field(out, 4, *graph_def);
  if (summary) wire::put_bytes_field(out, 5, summary->serialize());
  if (session_log) wire::put_bytes_field(out, 7, serialize_session_log(*session_log));
  if (tagged_run_metadata) wire::put_bytes_field(out, 8, serialize_tagged(*tagged_run_metadata));
  if (meta_graph_def) wire::put_bytes_field(out, 9, *meta_graph_def);
  return out;
}

std::optional<Event> Event::parse(std::string_view bytes, std::string* error) {
  Event e;
  std::string why;
  wire::Reader r(bytes);
  uint32_t field;
  wire::WireType type;
  // Setting one member of the oneof clears the others (the last one read wins, as in protobuf).
  auto clear_what = [&e] {
    e.file_version.reset(), e.graph_def.reset(), e.summary.reset(), e.session_log.reset();
    e.tagged_run_metadata.reset(), e.meta_graph_def.reset();
  };
  while (!r.done() && why.empty()) {
    const size_t start = r.position();
    bool ok = r.next_field(field, type);
    std::string_view b;
    if (ok && field == 1) {
      ok = r.read_double(type, e.wall_time);
    } else if (ok && field == 2) {
      ok = r.read_int(type, e.step);
    } else if (ok && (field == 3 || field == 4 || field == 5 || field == 7 || field == 8 || field == 9)) {
      if ((ok = r.read_length_delimited(type, b))) {
        clear_what();
        switch (field) {
          case 3:
            e.file_version = std::string(b);
            break;
          case 4:
            e.graph_def = std::string(b);
            break;
          case 9:
            e.meta_graph_def = std::string(b);
            break;
          case 5:
            if (auto s = Summary::parse(b, &why)) e.summary = std::move(*s);
            break;
          case 7:
            if (parse_session_log(b, e.session_log.emplace(), why)) break;
            e.session_log.reset();
            break;
          case 8:
            if (parse_tagged(b, e.tagged_run_metadata.emplace(), why)) break;
            e.tagged_run_metadata.reset();
            break;
        }
      }
    } else if (ok) {
      ok = r.skip(start, type);
    }
    if (!ok) why = std::string("Event: ") + r.error();
  }
  if (!why.empty()) {
    if (error) *error = why;
    return std::nullopt;
  }
  return e;
}

std::map<std::string, float> Event::scalars() const {
  std::map<std::string, float> out;
  if (summary)
    for (const Summary::Value& v : summary->value)
      if (v.simple_value) out[v.tag] = *v.simple_value;
  return out;
}

// ----- Errors from the file system -----------------------------------------------------------

namespace {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string version_record() {
  Event e;
  e.wall_time = wall_time_now();
  e.file_version = kEventFileVersion;
  return frame_record(e.serialize());
}

void make_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::error_code ec2;
    if (fs::exists(dir, ec2) && !fs::is_directory(dir, ec2))
      throw FailedPreconditionError("cannot use summary directory '" + dir + "': it exists and is not a directory");
    throw_os_error(ec.value(), "cannot create summary directory '" + dir + "'");
  }
  if (!fs::is_directory(dir, ec))
    throw FailedPreconditionError("cannot use summary directory '" + dir + "': it exists and is not a directory");
}

}  // namespace

// ----- EventFileWriter ---------------------------------------------------------------------

EventFileWriter::EventFileWriter(const std::string& logdir, const std::string& filename_suffix)
    : logdir_(logdir.empty() ? "." : logdir), suffix_(filename_suffix) {
  make_directory(logdir_);
  open_new_file();
}

EventFileWriter::EventFileWriter(ExactPath, const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_os_error(errno, "cannot create event file '" + path + "'");
  buffer_ = version_record();
  flush();
}

std::unique_ptr<EventFileWriter> EventFileWriter::open_path(const std::string& path) {
  return std::unique_ptr<EventFileWriter>(new EventFileWriter(ExactPath{}, path));
}

EventFileWriter::~EventFileWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepscope: closing event file: %s\n", e.what());
  }
}

void EventFileWriter::open_new_file() {
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%010lld", static_cast<long long>(std::time(nullptr)));
  const std::string base =
      (fs::path(logdir_) / ("events.out.tfevents." + std::string(stamp) + "." + hostname())).string();
  for (int n = 0;; ++n) {
    std::string name = base + (n ? "." + std::to_string(n) : "") + suffix_;
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd_ = fd;
      path_ = std::move(name);
      break;
    }
    if (errno != EEXIST) throw_os_error(errno, "cannot create event file '" + name + "'");
  }
  committed_ = 0;
  // The new file starts with its own version record, then whatever was still buffered.
  buffer_.insert(0, version_record());
  flush();
}

void EventFileWriter::write_record(std::string_view data) {
  if (fd_ < 0) throw FailedPreconditionError("event file '" + path_ + "' is closed");
  buffer_ += frame_record(data);
  constexpr size_t kWriteThreshold = 64 << 10;
  if (buffer_.size() >= kWriteThreshold) write_buffer();
}

void EventFileWriter::write_buffer() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n =
        ::pwrite(fd_, buffer_.data() + done, buffer_.size() - done, static_cast<off_t>(committed_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      // Keep the file a sequence of whole records; the buffer is retried by the next flush.
      if (done > 0 && ::ftruncate(fd_, static_cast<off_t>(committed_)) != 0 && errno != EINVAL)
        throw_os_error(errno, "cannot write event file '" + path_ + "' (" + std::strerror(err) +
                               ") nor cut it back to its last whole record");
      throw_os_error(err, "cannot write event file '" + path_ + "'");
    }
    done += static_cast<size_t>(n);
  }
  committed_ += buffer_.size();
  buffer_.clear();
}

void EventFileWriter::flush() {
  if (fd_ < 0) return;
  if (!logdir_.empty()) {
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0 && errno == ENOENT) {
      // Deleted under us (a user cleaning the log directory): start a new file, as TensorFlow's
      // EventsWriter does, carrying over what was not yet written. With nothing to write, nothing
      // is made (TensorFlow's Flush returns when no event is outstanding): a writer closed after
      // its directory was removed must not bring the directory back.
      if (buffer_.empty()) return;
      ::close(fd_);
      fd_ = -1;
      make_directory(logdir_);
      open_new_file();
      return;
    }
  }
  write_buffer();
  if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS)
    throw_os_error(errno, "cannot sync event file '" + path_ + "'");
}

void EventFileWriter::close() {
  if (fd_ < 0) return;
  try {
    flush();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && errno != EINTR) throw_os_error(errno, "cannot close event file '" + path_ + "'");
}

// ----- EventFileReader ---------------------------------------------------------------------

EventFileReader::EventFileReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_os_error(errno, "cannot open event file '" + path + "'");
}

EventFileReader::~EventFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Reads up to n bytes at `offset`; returns how many were there.
size_t pread_fully(int fd, void* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_os_error(errno, "cannot read event file '" + path + "'");
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

}  // namespace

namespace {

std::string record_where(uint64_t offset, const std::string& path) {
  return "record at offset " + std::to_string(offset) + " of event file '" + path + "'";
}

// The data length a record's 12 header bytes give, after checking their checksum and that the
// data and its footer fit in the `available` bytes after the header (a length is never trusted
// before it is compared with the file's size, so it cannot make the reader allocate).
uint64_t record_length(const unsigned char* header, uint64_t available, uint64_t offset, const std::string& path) {
  const uint64_t length = get_le(header, 8);
  const uint32_t stored = static_cast<uint32_t>(get_le(header + 8, 4));
  const uint32_t computed = crc32c_mask(crc32c(header, 8));
  if (stored != computed)
    throw DataLossError("corrupted " + record_where(offset, path) + ": length checksum mismatch (stored " +
                        hex32(stored) + ", computed " + hex32(computed) + ")");
  if (length > available || available - length < 4)
    throw DataLossError("truncated " + record_where(offset, path) + ": it needs " + std::to_string(length) +
                        " data bytes and a 4-byte checksum, the file has " + std::to_string(available) + " more bytes");
  return length;
}

void check_record_data(std::string_view data, const unsigned char* footer, uint64_t offset, const std::string& path) {
  const uint32_t stored = static_cast<uint32_t>(get_le(footer, 4));
  const uint32_t computed = crc32c_mask(crc32c(data));
  if (stored != computed)
    throw DataLossError("corrupted " + record_where(offset, path) + ": data checksum mismatch (stored " +
                        hex32(stored) + ", computed " + hex32(computed) + ")");
}

Event record_event(std::string_view data, uint64_t offset, const std::string& path) {
  std::string why;
  std::optional<Event> event = Event::parse(data, &why);
  if (!event) throw DataLossError(record_where(offset, path) + " is not an Event: " + why);
  return std::move(*event);
}

}  // namespace

std::optional<std::string> EventFileReader::read_record() {
  unsigned char header[12];
  const size_t got = pread_fully(fd_, header, sizeof(header), offset_, path_);
  if (got == 0) return std::nullopt;
  if (got < sizeof(header))
    throw DataLossError("truncated " + record_where(offset_, path_) + ": " + std::to_string(got) +
                        " of the 12 header bytes");
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw_os_error(errno, "cannot read event file '" + path_ + "'");
  const uint64_t available = static_cast<uint64_t>(st.st_size) > offset_ + 12 ? st.st_size - offset_ - 12 : 0;
  const uint64_t length = record_length(header, available, offset_, path_);
  std::string data(length, '\0');
  unsigned char footer[4];
  if (pread_fully(fd_, data.data(), length, offset_ + 12, path_) != length ||
      pread_fully(fd_, footer, 4, offset_ + 12 + length, path_) != 4)
    throw DataLossError("truncated " + record_where(offset_, path_) + ": the file ended while it was read");
  check_record_data(data, footer, offset_, path_);
  offset_ += 12 + length + 4;
  return data;
}

std::optional<Event> EventFileReader::read_event() {
  const uint64_t at = offset_;
  std::optional<std::string> record = read_record();
  if (!record) return std::nullopt;
  return record_event(*record, at, path_);
}

std::vector<Event> parse_events(std::string_view bytes, const std::string& source) {
  std::vector<Event> events;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  uint64_t offset = 0;
  while (offset < bytes.size()) {
    const uint64_t left = bytes.size() - offset;
    if (left < 12)
      throw DataLossError("truncated " + record_where(offset, source) + ": " + std::to_string(left) +
                          " of the 12 header bytes");
    const uint64_t length = record_length(p + offset, left - 12, offset, source);
    const std::string_view data = bytes.substr(offset + 12, length);
    check_record_data(data, p + offset + 12 + length, offset, source);
    events.push_back(record_event(data, offset, source));
    offset += 12 + length + 4;
  }
  return events;
}

std::vector<Event> read_events(const std::string& path) {
  // The whole file at once (it is what the caller asked for): its size bounds the memory.
  return parse_events(read_file(path, 0, Gunzip::kNever), path);
}

std::vector<std::string> list_event_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find("tfevents") == std::string::npos) continue;
    std::error_code ec2;
    if (it->is_regular_file(ec2)) files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace stepscope
