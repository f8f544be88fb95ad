#include "stepscope/train/event_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <bit>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "stepscope/testing/error_text.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

std::string hex(std::string_view s) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Bit-at-a-time CRC-32C, the definition the table-driven one must agree with.
uint32_t crc32c_bitwise(std::string_view s) {
  uint32_t c = 0xFFFFFFFF;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78 : c >> 1;
  }
  return ~c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

using testing::TempDir;

using testing::error_text;

// ----- CRC32C ------------------------------------------------------------------------------

TEST(Crc32c, StandardCheckValueAndRfc3720Vectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c_mask(crc32c(std::string(32, '\0'))), 0x0FD7FFFAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) up.push_back(static_cast<char>(i)), down.push_back(static_cast<char>(31 - i));
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32c, MaskedValuesFromRealTensorFlowFiles) {
  // rustboard's masked_crc.rs and tf_record.rs test vectors.
  EXPECT_EQ(crc32c_mask(crc32c("\x1A\x11"
                               "CRC test, one two")),
            0x5794D08Au);
  EXPECT_EQ(crc32c_mask(crc32c(bytes({0x18, 0, 0, 0, 0, 0, 0, 0}))), 0x224B7FA3u);
}

TEST(Crc32c, MaskRoundTripsAndIsNotTheIdentity) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u, 0x12345678u}) {
    EXPECT_EQ(crc32c_unmask(crc32c_mask(c)), c);
    EXPECT_NE(crc32c_mask(c), c);
  }
}

TEST(Crc32c, AgreesWithTheBitwiseDefinitionAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t n = 0; n + offset <= data.size(); n += (n < 40 ? 1 : 37)) {
      std::string_view s(data.data() + offset, n);
      ASSERT_EQ(crc32c(s), crc32c_bitwise(s)) << "offset " << offset << " length " << n;
    }
}

TEST(Crc32c, ExtendsAPreviousCrc) {
  const std::string a = "brain.Event:2 and", b = " some more bytes after it";
  EXPECT_EQ(crc32c(b.data(), b.size(), crc32c(a)), crc32c(a + b));
}

// ----- Messages: the reference's worked examples (file-formats.md A9) ----------------------

TEST(EventProto, WorkedExampleAScalarSummaryIsByteExact) {
  Event e;
  e.wall_time = 1.0;
  e.step = 2;
  e.summary = Summary{{Summary::scalar("loss", 0.5f)}};
  const std::string data = e.serialize();
  EXPECT_EQ(hex(data), "09 00 00 00 00 00 00 F0 3F 10 02 2A 0D 0A 0B 0A 04 6C 6F 73 73 15 00 00 00 3F");
  const std::string record = frame_record(data);
  EXPECT_EQ(hex(record),
            "1A 00 00 00 00 00 00 00 12 9B D8 2D 09 00 00 00 00 00 00 F0 3F 10 02 2A 0D 0A 0B 0A 04 6C 6F 73 73 "
            "15 00 00 00 3F 97 14 C0 71");
  EXPECT_EQ(crc32c_unmask(0x2DD89B12u), 0xD81D45AAu);
  EXPECT_EQ(crc32c(record.substr(0, 8)), 0xD81D45AAu);
  EXPECT_EQ(crc32c(data), 0x94DFE79Eu);

  std::optional<Event> back = Event::parse(data);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->wall_time, 1.0);
  EXPECT_EQ(back->step, 2);
  EXPECT_EQ(back->scalars(), (std::map<std::string, float>{{"loss", 0.5f}}));
}

TEST(EventProto, WorkedExampleBTensorStyleScalarRoundTripsVerbatim) {
  const std::string data = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x10, 0x02, 0x2A, 0x23, 0x0A, 0x21, 0x0A, 0x04}) +
                           "loss" + bytes({0x42, 0x0A, 0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0x00, 0x00, 0x00, 0x3F}) +
                           bytes({0x4A, 0x0D, 0x0A, 0x09, 0x0A, 0x07}) + "scalars" + bytes({0x20, 0x01});
  ASSERT_EQ(data.size(), 48u);
  std::optional<Event> e = Event::parse(data);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->summary);
  ASSERT_EQ(e->summary->value.size(), 1u);
  const Summary::Value& v = e->summary->value[0];
  EXPECT_EQ(v.tag, "loss");
  EXPECT_FALSE(v.simple_value);
  EXPECT_EQ(hex(v.other_fields), "42 0A 08 01 12 00 22 04 00 00 00 3F");
  ASSERT_TRUE(v.metadata);
  EXPECT_EQ(hex(*v.metadata), "0A 09 0A 07 73 63 61 6C 61 72 73 20 01");
  EXPECT_EQ(e->serialize(), data);
}

TEST(EventProto, WorkedExampleCFirstRecord) {
  // The real first record from rustboard's tests (wall_time 1599759586.0).
  Event real;
  real.wall_time = 1599759586.0;
  real.file_version = "brain.Event:2";
  const std::string record = frame_record(real.serialize());
  EXPECT_EQ(hex(record.substr(0, 12)), "18 00 00 00 00 00 00 00 A3 7F 4B 22");
  EXPECT_EQ(hex(record.substr(12, 9)), "09 00 00 80 38 99 D6 D7 41");
  EXPECT_EQ(hex(record.substr(21, 2)), "1A 0D");
  EXPECT_EQ(record.substr(23, 13), "brain.Event:2");
  EXPECT_EQ(hex(record.substr(36)), "12 4B 36 AB");

  Event one;
  one.wall_time = 1.0;
  one.file_version = kEventFileVersion;
  const std::string data = one.serialize();
  EXPECT_EQ(hex(data.substr(0, 11)), "09 00 00 00 00 00 00 F0 3F 1A 0D");
  EXPECT_EQ(crc32c_mask(crc32c(data)), 0x7A57BF86u);
}

TEST(EventProto, WorkedExampleDRealTf2RecordDecodesAndReencodesByteForByte) {
  const std::string data =
      bytes({0x09, 0xC4, 0x05, 0xB7, 0x3D, 0x99, 0xD6, 0xD7, 0x41, 0x10, 0x4D, 0x2A, 0x25, 0x0A, 0x23, 0x0A, 0x08}) +
      "accuracy" + bytes({0x42, 0x0A, 0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0xA4, 0x70, 0x7D, 0x3F}) +
      bytes({0x4A, 0x0B, 0x0A, 0x09, 0x0A, 0x07}) + "scalars";
  ASSERT_EQ(data.size(), 50u);
  const std::string record = frame_record(data);
  EXPECT_EQ(hex(record.substr(0, 12)), "32 00 00 00 00 00 00 00 24 19 56 EC");
  EXPECT_EQ(hex(record.substr(62)), "A5 5B 64 33");
  std::optional<Event> e = Event::parse(data);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->step, 77);
  EXPECT_EQ(e->wall_time, std::bit_cast<double>(uint64_t{0x41D7D6993DB705C4}));  // 1599759606.86
  EXPECT_EQ(e->summary->value.at(0).tag, "accuracy");
  EXPECT_EQ(e->serialize(), data);
}

TEST(EventProto, WorkedExampleESessionLogStartAtStepZero) {
  Event e;
  e.wall_time = 1.5;
  e.session_log = SessionLog{SessionLog::kStart, "", ""};
  const std::string data = e.serialize();
  EXPECT_EQ(hex(data.substr(9)), "3A 02 08 01");  // step 0 is not written
  std::optional<Event> back = Event::parse(data);
  ASSERT_TRUE(back && back->session_log);
  EXPECT_EQ(back->session_log->status, SessionLog::kStart);
  EXPECT_EQ(back->step, 0);
}

TEST(EventProto, ProtoThreeDefaultsAndOneofRules) {
  Event e;  // wall_time 0, step 0: nothing
  EXPECT_EQ(e.serialize(), "");
  e.summary = Summary{{Summary::scalar("z", 0.0f)}};
  // simple_value is a oneof member: written even at 0.0 ("15 00 00 00 00").
  EXPECT_EQ(hex(e.serialize()), "2A 0A 0A 08 0A 01 7A 15 00 00 00 00");
  e.summary.reset();
  e.file_version = "";
  EXPECT_EQ(hex(e.serialize()), "1A 00");
}

TEST(EventProto, NegativeStepTakesTenBytesAndRoundTrips) {
  Event e;
  e.step = -1;
  EXPECT_EQ(hex(e.serialize()), "10 FF FF FF FF FF FF FF FF FF 01");
  EXPECT_EQ(Event::parse(e.serialize())->step, -1);
}

TEST(EventProto, EveryKindOfEventRoundTrips) {
  Event log;
  log.wall_time = 1700000000.25;
  log.step = 1234567890123;
  log.session_log = SessionLog{SessionLog::kCheckpoint, "/tmp/model.ckpt-100", "saved"};
  auto back = Event::parse(log.serialize());
  ASSERT_TRUE(back && back->session_log);
  EXPECT_EQ(back->wall_time, 1700000000.25);
  EXPECT_EQ(back->step, 1234567890123);
  EXPECT_EQ(back->session_log->status, SessionLog::kCheckpoint);
  EXPECT_EQ(back->session_log->checkpoint_path, "/tmp/model.ckpt-100");
  EXPECT_EQ(back->session_log->msg, "saved");

  Event meta;
  std::string blob = std::string("\0\x01\x02 binary \xFF", 13);
  meta.tagged_run_metadata = TaggedRunMetadata{"step_2", blob};
  back = Event::parse(meta.serialize());
  ASSERT_TRUE(back && back->tagged_run_metadata);
  EXPECT_EQ(back->tagged_run_metadata->tag, "step_2");
  EXPECT_EQ(back->tagged_run_metadata->run_metadata, blob);

  Event graph;
  graph.graph_def = "graph bytes";
  back = Event::parse(graph.serialize());
  ASSERT_TRUE(back && back->graph_def);
  EXPECT_EQ(*back->graph_def, "graph bytes");
  EXPECT_FALSE(back->summary || back->session_log || back->file_version);
}

TEST(EventProto, SettingTwoMembersOfTheOneofIsAnError) {
  Event e;
  e.file_version = kEventFileVersion;
  e.session_log = SessionLog{};
  EXPECT_THAT(error_text<InvalidArgumentError>([&] { e.serialize(); }), HasSubstr("oneof"));
}

TEST(EventProto, ParsingSkipsUnknownFieldsAndLetsTheLastOneofMemberWin) {
  // source_metadata (10) and an unknown field 15 are skipped; file_version then summary: summary wins.
  const std::string data = bytes({0x52, 0x03, 0x0A, 0x01, 'w', 0x78, 0x05}) + bytes({0x1A, 0x01, 'v'}) +
                           bytes({0x2A, 0x0A, 0x0A, 0x08, 0x0A, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0x3F});
  std::optional<Event> e = Event::parse(data);
  ASSERT_TRUE(e) << hex(data);
  EXPECT_FALSE(e->file_version);
  EXPECT_EQ(e->scalars(), (std::map<std::string, float>{{"a", 1.0f}}));
}

TEST(EventProto, MalformedBytesAreRejectedWithAReason) {
  std::string why;
  EXPECT_FALSE(Event::parse(bytes({0x09, 0x00, 0x00}), &why));  // truncated double
  EXPECT_THAT(why, HasSubstr("truncated fixed64"));
  EXPECT_FALSE(Event::parse(bytes({0x2A, 0x05, 0x0A}), &why));  // length past the end
  EXPECT_THAT(why, HasSubstr("past the end"));
  EXPECT_FALSE(Event::parse(bytes({0x08, 0x01}), &why));  // wall_time as a varint
  EXPECT_THAT(why, HasSubstr("expected a fixed64"));
  EXPECT_FALSE(Event::parse(bytes({0x0B}), &why));  // a group
  EXPECT_THAT(why, HasSubstr("wire type"));
  EXPECT_FALSE(Event::parse(bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F}), &why));
  EXPECT_THAT(why, HasSubstr("varint"));
  EXPECT_FALSE(Event::parse(bytes({0x2A, 0x02, 0x0A, 0x05}), &why));  // a Summary.Value past its end
  EXPECT_THAT(why, HasSubstr("Summary"));
}

// ----- Writer and reader -------------------------------------------------------------------

std::string host() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

TEST(EventFileWriter, NamesTheFileLikeTensorFlowAndStartsWithTheVersionEvent) {
  TempDir dir;
  const double before = static_cast<double>(std::time(nullptr));
  EventFileWriter writer(dir / "run/sub");  // created, parents included
  const std::string name = fs::path(writer.path()).filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + host()))) << name;
  EXPECT_EQ(fs::path(writer.path()).parent_path(), fs::path(dir / "run/sub"));
  // The version event is on disk before anything else is written.
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GE(events[0].wall_time, before);
  EXPECT_LE(events[0].wall_time, static_cast<double>(std::time(nullptr)) + 1);
  EXPECT_EQ(events[0].step, 0);
}

TEST(EventFileWriter, TwoWritersInOneSecondGetDistinctFilesThatSortInCreationOrder) {
  TempDir dir;
  EventFileWriter a(dir.path()), b(dir.path()), c(dir.path(), ".suffix");
  EXPECT_NE(a.path(), b.path());
  EXPECT_NE(b.path(), c.path());
  const std::vector<std::string> files = list_event_files(dir.path());
  EXPECT_EQ(files.size(), 3u);
  EXPECT_THAT(c.path(), ::testing::EndsWith(".suffix"));
  if (fs::path(a.path()).filename().string().substr(0, 30) == fs::path(b.path()).filename().string().substr(0, 30)) {
    EXPECT_LT(a.path(), b.path());
  }
}

TEST(EventFileWriter, WritesAreBufferedUntilFlush) {
  TempDir dir;
  EventFileWriter writer(dir.path());
  const auto size0 = fs::file_size(writer.path());
  Event e;
  e.step = 5;
  e.summary = Summary{{Summary::scalar("x", 3.0f)}};
  writer.write_event(e);
  EXPECT_EQ(fs::file_size(writer.path()), size0);
  EXPECT_GT(writer.buffered_bytes(), 0u);
  writer.flush();
  EXPECT_EQ(writer.buffered_bytes(), 0u);
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 5);
  EXPECT_EQ(events[1].scalars().at("x"), 3.0f);
}

TEST(EventFileWriter, LargeRecordsGoOutWithoutAnExplicitFlushAndReadBack) {
  TempDir dir;
  EventFileWriter writer(dir.path());
  std::string blob(200000, '\0');
  std::mt19937 rng(1);
  for (char& c : blob) c = static_cast<char>(rng());
  Event e;
  e.tagged_run_metadata = TaggedRunMetadata{"big", blob};
  writer.write_event(e);
  EXPECT_GT(fs::file_size(writer.path()), blob.size());  // past the 64 KiB threshold
  writer.close();
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].tagged_run_metadata->run_metadata, blob);
}

TEST(EventFileWriter, DestructorFlushesAndCloseIsIdempotent) {
  TempDir dir;
  std::string path;
  {
    EventFileWriter writer(dir.path());
    path = writer.path();
    Event e;
    e.step = 9;
    writer.write_event(e);
  }
  EXPECT_EQ(read_events(path).size(), 2u);
  EventFileWriter w(dir.path());
  w.close();
  w.close();
  EXPECT_TRUE(w.closed());
  EXPECT_THROW(w.write_record("x"), FailedPreconditionError);
}

TEST(EventFileWriter, UnusableDirectoriesAreClearErrorsNamingThem) {
  // A path below a regular file.
  TempDir dir;
  write_file(dir / "file", "not a directory");
  std::string text;
  try {
    EventFileWriter w(dir / "file/run");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    text = e.what();
    EXPECT_TRUE(e.code() == ErrorCode::kNotFound || e.code() == ErrorCode::kFailedPrecondition) << text;
  }
  EXPECT_THAT(text, HasSubstr(dir / "file/run"));
  // A directory that exists but is a file.
  EXPECT_THAT(error_text<FailedPreconditionError>([&] { EventFileWriter w(dir / "file"); }),
              HasSubstr("is not a directory"));
  // A directory nobody may write to: /sys (read-only even for root) or a chmod'ed one.
  std::string unwritable;
  if (geteuid() != 0) {
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    unwritable = dir / "ro";
  } else if (fs::is_directory("/sys/kernel")) {
    unwritable = "/sys/kernel";
  } else {
    GTEST_SKIP() << "no unwritable directory available";
  }
  EXPECT_THAT(error_text<PermissionDeniedError>([&] { EventFileWriter w(unwritable); }),
              HasSubstr("cannot create event file '" + unwritable + "/events.out.tfevents."));
  EXPECT_THAT(error_text<PermissionDeniedError>([&] { EventFileWriter w(unwritable + "/new_run"); }),
              HasSubstr("cannot create summary directory '" + unwritable + "/new_run'"));
}

TEST(EventFileWriter, AFullDiskIsReportedNamingTheFile) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  EXPECT_THAT(error_text<ResourceExhaustedError>([] { EventFileWriter::open_path("/dev/full"); }),
              HasSubstr("cannot write event file '/dev/full': No space left on device"));
}

TEST(EventFileWriter, AFailedWriteKeepsTheFileWholeAndIsRetriedByTheNextFlush) {
  TempDir dir;
  EventFileWriter writer(dir.path());
  const auto size0 = fs::file_size(writer.path());
  // Let the file grow by 100 bytes only: the next write fails part-way (EFBIG).
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = size0 + 100;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Event e;
  e.step = 3;
  e.tagged_run_metadata = TaggedRunMetadata{"t", std::string(1000, 'x')};
  writer.write_event(e);
  std::string text;
  try {
    writer.flush();
  } catch (const ResourceExhaustedError& err) {
    text = err.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(text, HasSubstr("cannot write event file '" + writer.path() + "'"));
  EXPECT_EQ(fs::file_size(writer.path()), size0);  // cut back to the last whole record
  EXPECT_EQ(read_events(writer.path()).size(), 1u);
  writer.flush();  // room again: the kept record goes out
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 3);
}

TEST(EventFileWriter, AFileDeletedWhileOpenIsReplacedByANewOne) {
  TempDir dir;
  EventFileWriter writer(dir / "logs");
  const std::string first = writer.path();
  fs::remove_all(dir / "logs");
  Event e;
  e.step = 11;
  writer.write_event(e);
  writer.flush();
  ASSERT_TRUE(fs::exists(writer.path()));
  std::vector<Event> events = read_events(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 11);
}

// A run's directory removed after its last event (a test's temporary directory, a user cleaning
// up): closing the writer, as a cache does at exit, leaves it removed.
TEST(EventFileWriter, ClosingWithNothingToWriteDoesNotBringBackADeletedDirectory) {
  TempDir dir;
  EventFileWriter writer(dir / "logs");
  Event e;
  e.step = 1;
  writer.write_event(e);
  writer.flush();
  fs::remove_all(dir / "logs");
  writer.flush();
  writer.close();
  EXPECT_FALSE(fs::exists(dir / "logs"));
}

class EventFileReaderCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    EventFileWriter writer(dir_.path());
    path_ = writer.path();
    for (int step = 1; step <= 3; ++step) {
      Event e;
      e.step = step;
      e.summary = Summary{{Summary::scalar("loss", 1.0f / static_cast<float>(step))}};
      writer.write_event(e);
    }
    writer.close();
    contents_ = read_file(path_);
    // The version record's length fits its first byte; the first summary record follows it.
    first_size_ = 12 + static_cast<size_t>(static_cast<unsigned char>(contents_[0])) + 4;
  }

  TempDir dir_;
  std::string path_;
  std::string contents_;
  size_t first_size_ = 0;
};

TEST_F(EventFileReaderCorruption, IntactFileReadsBackInOrder) {
  EventFileReader reader(path_);
  std::optional<Event> e = reader.read_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->file_version, "brain.Event:2");
  EXPECT_EQ(reader.offset(), first_size_);
  for (int step = 1; step <= 3; ++step) {
    e = reader.read_event();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->step, step);
  }
  EXPECT_FALSE(reader.read_event());
  EXPECT_EQ(reader.offset(), contents_.size());
}

TEST_F(EventFileReaderCorruption, BadDataChecksumNamesFileAndOffset) {
  std::string bad = contents_;
  bad[first_size_ + 14] ^= 0x01;  // a data byte of the second record
  write_file(path_, bad);
  EventFileReader reader(path_);
  reader.read_event();
  EXPECT_THAT(error_text<DataLossError>([&] { reader.read_event(); }),
              HasSubstr("corrupted record at offset " + std::to_string(first_size_) + " of event file '" + path_ +
                        "': data checksum mismatch"));
}

TEST_F(EventFileReaderCorruption, BadLengthChecksumNamesFileAndOffset) {
  std::string bad = contents_;
  bad[first_size_] ^= 0x40;  // the length of the second record
  write_file(path_, bad);
  EXPECT_THAT(error_text<DataLossError>([&] { read_events(path_); }),
              HasSubstr("corrupted record at offset " + std::to_string(first_size_) + " of event file '" + path_ +
                        "': length checksum mismatch"));
}

TEST_F(EventFileReaderCorruption, TruncationIsDataLossAtTheRecordThatIsCut) {
  for (size_t cut : {size_t{1}, size_t{3}, size_t{5}, size_t{20}}) {
    write_file(path_, std::string_view(contents_).substr(0, contents_.size() - cut));
    const std::vector<std::string> records = [&] {
      std::vector<std::string> r;
      EventFileReader reader(path_);
      try {
        while (auto rec = reader.read_record()) r.push_back(*rec);
      } catch (const DataLossError& e) {
        EXPECT_THAT(e.what(), HasSubstr("truncated record at offset"));
        EXPECT_THAT(e.what(), HasSubstr(path_));
        r.push_back("<error>");
      }
      return r;
    }();
    ASSERT_EQ(records.size(), 4u) << "cut " << cut;
    EXPECT_EQ(records.back(), "<error>") << "cut " << cut;
  }
  // Cut inside the 12-byte header.
  write_file(path_, std::string_view(contents_).substr(0, first_size_ + 7));
  EventFileReader reader(path_);
  reader.read_record();
  EXPECT_THAT(error_text<DataLossError>([&] { reader.read_record(); }), HasSubstr("7 of the 12 header bytes"));
}

TEST_F(EventFileReaderCorruption, ARecordThatIsNotAnEventIsDataLoss) {
  std::string bad = contents_.substr(0, first_size_) + frame_record(bytes({0x0B, 0x0C}));
  write_file(path_, bad);
  EventFileReader reader(path_);
  reader.read_event();
  EXPECT_THAT(
      error_text<DataLossError>([&] { reader.read_event(); }),
      HasSubstr("record at offset " + std::to_string(first_size_) + " of event file '" + path_ + "' is not an Event"));
}

// The in-memory entry point (for fuzzing): what read_events gives, with the same checks; a
// record's length is compared with the bytes left before anything is allocated for it.
TEST_F(EventFileReaderCorruption, ParseEventsFromBytes) {
  const std::vector<Event> events = parse_events(contents_, "mem");
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].step, 3);
  EXPECT_EQ(read_events(path_).size(), 4u);
  EXPECT_TRUE(parse_events("", "mem").empty());
  EXPECT_THAT(error_text<DataLossError>([&] { parse_events(contents_.substr(0, first_size_ + 7), "mem"); }),
              HasSubstr("truncated record at offset " + std::to_string(first_size_) +
                        " of event file 'mem': 7 of the 12 header bytes"));
  // A header claiming 2^62 bytes, with a valid checksum.
  std::string header(12, '\0');
  header[7] = 0x40;
  const uint32_t crc = crc32c_mask(crc32c(header.data(), 8));
  std::memcpy(header.data() + 8, &crc, 4);
  EXPECT_THAT(error_text<DataLossError>([&] { parse_events(header + "abcd", "mem"); }),
              HasSubstr("truncated record at offset 0 of event file 'mem': it needs 4611686018427387904 data bytes"));
  std::string bad = contents_;
  bad[first_size_ + 14] ^= 0x01;
  EXPECT_THAT(error_text<DataLossError>([&] { parse_events(bad, "mem"); }), HasSubstr("data checksum mismatch"));
}

TEST(EventFileReader, MissingFileIsNotFound) {
  EXPECT_THAT(error_text<NotFoundError>([] { EventFileReader r("/nonexistent/events.out.tfevents.1"); }),
              HasSubstr("/nonexistent/events.out.tfevents.1"));
}

TEST(EventFiles, ListingKeepsEventFilesInNameOrder) {
  TempDir dir;
  write_file(dir / "events.out.tfevents.0000000002.h", "");
  write_file(dir / "events.out.tfevents.0000000001.h", "");
  write_file(dir / "checkpoint", "");
  fs::create_directories(dir / "sub.tfevents.dir");
  EXPECT_THAT(list_event_files(dir.path()), ::testing::ElementsAre(dir / "events.out.tfevents.0000000001.h",
                                                                   dir / "events.out.tfevents.0000000002.h"));
  EXPECT_TRUE(list_event_files(dir / "missing").empty());
}

}  // namespace
}  // namespace stepscope
