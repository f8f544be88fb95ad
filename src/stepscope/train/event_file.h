// TensorBoard event files, byte for byte: the Event protocol buffer (and the SessionLog and
// TaggedRunMetadata it carries), TFRecord framing with masked CRC32C checksums, a writer that
// produces what TensorFlow's EventsWriter does, and a reader that checks every checksum.
//
// A file is a sequence of records, back to back, each
//   uint64 length (LE) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// whose data is one serialized Event; the first Event carries file_version "brain.Event:2".
// Files are named events.out.tfevents.<10-digit epoch seconds>.<hostname>; TensorBoard reads
// the files of a directory in name order, so one writer per directory at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/ops/summary_ops.h"

namespace stepscope {

// ----- CRC32C ------------------------------------------------------------------------------

// CRC-32C (Castagnoli, the iSCSI CRC) of `n` bytes, extending `crc` (the CRC of the bytes
// before them; 0 to start). crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view s) { return crc32c(s.data(), s.size()); }
// LevelDB's masking, which TFRecord stores: rotate right by 15, add 0xA282EAD8.
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }
inline uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t r = masked - 0xA282EAD8u;
  return (r >> 17) | (r << 15);
}

// One TFRecord record (header, data, footer) around `data`.
std::string frame_record(std::string_view data);

// ----- Messages (tensorflow/core/util/event.proto) -----------------------------------------

struct SessionLog {
  enum Status : int { kStatusUnspecified = 0, kStart = 1, kStop = 2, kCheckpoint = 3 };
  Status status = kStatusUnspecified;  // field 1
  std::string checkpoint_path = {};    // field 2
  std::string msg = {};                // field 3
};

struct TaggedRunMetadata {
  std::string tag = {};           // field 1
  std::string run_metadata = {};  // field 2: the bytes of a serialized RunMetadata, stored as given
};

// At most one of the optional members (the proto's oneof "what") may be set.
struct Event {
  double wall_time = 0;                                                 // field 1: seconds since the epoch
  int64_t step = 0;                                                     // field 2
  std::optional<std::string> file_version = std::nullopt;               // field 3, "brain.Event:2"
  std::optional<std::string> graph_def = std::nullopt;                  // field 4: a serialized GraphDef
  std::optional<Summary> summary = std::nullopt;                        // field 5
  std::optional<SessionLog> session_log = std::nullopt;                 // field 7
  std::optional<TaggedRunMetadata> tagged_run_metadata = std::nullopt;  // field 8
  std::optional<std::string> meta_graph_def = std::nullopt;             // field 9: a serialized MetaGraphDef

  // InvalidArgumentError when more than one member of the oneof is set.
  std::string serialize() const;
  // Nothing when `bytes` is not a valid Event; `error` (optional) then says why. Fields this
  // struct does not model (log_message, source_metadata, unknown ones) are skipped.
  static std::optional<Event> parse(std::string_view bytes, std::string* error = nullptr);

  // The summary's simple values by tag (empty without a summary).
  std::map<std::string, float> scalars() const;
};

inline constexpr const char* kEventFileVersion = "brain.Event:2";

// ----- Writing -----------------------------------------------------------------------------

// Appends records to one event file. Records are buffered in memory: write_record() only
// copies, and the bytes reach the file when the buffer passes 64 KiB or on flush(), which also
// syncs them to disk. A failed write is thrown as an error naming the file (ENOSPC ->
// ResourceExhaustedError, EACCES -> PermissionDeniedError, others UnknownError); the file is cut
// back to its last whole record and the buffered records are kept, so a later flush() retries
// them. If the file is deleted while open, the next flush starts a new file (with a new
// file_version record) and writes the buffered records there, as TensorFlow's EventsWriter does.
// Not thread-safe (SummaryWriter serializes access).
class EventFileWriter {
 public:
  // Creates `logdir` (and its parents) when missing, then a new file
  // events.out.tfevents.<seconds>.<hostname><suffix> in it (".1", ".2", ... before the suffix when
  // that name is taken), and writes and flushes the file_version event. An unusable directory is
  // PermissionDeniedError / NotFoundError / FailedPreconditionError naming it.
  explicit EventFileWriter(const std::string& logdir, const std::string& filename_suffix = "");
  // A writer on exactly `path` (truncated), for tests and tools; the file_version event is written.
  static std::unique_ptr<EventFileWriter> open_path(const std::string& path);
  ~EventFileWriter();  // close(); an error there goes to stderr
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  void write_event(const Event& event) { write_record(event.serialize()); }
  void write_record(std::string_view data);
  void flush();
  // Flushes and closes; further writes are FailedPreconditionError. Idempotent.
  void close();

  const std::string& path() const { return path_; }
  bool closed() const { return fd_ < 0; }
  size_t buffered_bytes() const { return buffer_.size(); }

 private:
  struct ExactPath {};
  EventFileWriter(ExactPath, const std::string& path);
  void open_new_file();
  void write_buffer();  // to the OS, no sync

  std::string logdir_;  // empty for open_path writers (which reopen the same path)
  std::string suffix_;
  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  uint64_t committed_ = 0;  // bytes of whole records in the file
};

// ----- Reading -----------------------------------------------------------------------------

// Reads the records of one event file in order, checking both checksums of each. A bad
// checksum, a truncated record and an undecodable Event are DataLossError naming the file and
// the record's offset. (TensorBoard treats a partial last record as "still being written"; call
// read_record again after the writer flushes.)
class EventFileReader {
 public:
  // NotFoundError / PermissionDeniedError when the file cannot be opened.
  explicit EventFileReader(const std::string& path);
  ~EventFileReader();
  EventFileReader(const EventFileReader&) = delete;
  EventFileReader& operator=(const EventFileReader&) = delete;

  // The next record's data, or nothing at the end of the file.
  std::optional<std::string> read_record();
  // The next Event, or nothing at the end of the file.
  std::optional<Event> read_event();
  // Offset of the next record.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
};

// Every event of a file, all checksums checked (errors as EventFileReader's; the whole file is
// read into memory first).
std::vector<Event> read_events(const std::string& path);
// The same for a file's bytes; `source` names them in errors. read_events reads the file and
// calls this.
//
// Limits: a record's length is checked against its header checksum and against the bytes left
// before anything is allocated for it, so memory never exceeds the input's size (plus the
// decoded events); an Event's nested lengths are checked the same way (proto_wire.h).
std::vector<Event> parse_events(std::string_view bytes, const std::string& source);
// The event files (basename contains "tfevents") directly in `dir`, in the order TensorBoard
// reads them (by name); empty when `dir` does not exist.
std::vector<std::string> list_event_files(const std::string& dir);

}  // namespace stepscope
