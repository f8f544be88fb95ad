#include "stepscope/base/file_io.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "stepscope/base/error.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

class FileIoTest : public ::testing::Test {
 protected:
  std::vector<std::string> entries() const { return tmp_.entries(); }
  static std::string raw(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  testing::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

std::string sample(size_t n) {
  std::string s;
  for (size_t i = 0; s.size() < n; ++i) s += "{\"ph\":\"X\",\"name\":\"op" + std::to_string(i % 97) + "\"},";
  s.resize(n);
  return s;
}

TEST_F(FileIoTest, PlainRoundTripAndNoTemporaryLeft) {
  const std::string text = sample(100'000);
  write_file_atomically(dir_ / "t.json", text);
  EXPECT_EQ(read_file(dir_ / "t.json"), text);
  EXPECT_EQ(raw(dir_ / "t.json"), text);
  write_file_atomically(dir_ / "t.json", "replaced", false, /*sync=*/true);
  EXPECT_EQ(read_file(dir_ / "t.json"), "replaced");
  EXPECT_EQ(entries(), std::vector<std::string>{"t.json"});
}

TEST_F(FileIoTest, GzipIsOneMember) {
  const std::string text = sample(3'000'000);  // several deflate output chunks
  write_file_atomically(dir_ / "t.json.gz", text, /*gzip=*/true);
  const std::string bytes = raw(dir_ / "t.json.gz");
  ASSERT_GE(bytes.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  EXPECT_LT(bytes.size(), text.size() / 5);
  // One member: a gzip-only inflate ends its stream exactly at the end of the file.
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(text.size() + 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  EXPECT_EQ(z.avail_in, 0u);
  EXPECT_EQ(z.total_out, text.size());
  inflateEnd(&z);
  EXPECT_EQ(read_file(dir_ / "t.json.gz"), text);
}

TEST_F(FileIoTest, ReadsMultiMemberGzip) {
  std::string two;
  gzip_append(two, "abc");
  gzip_append(two, "def");
  write_file_atomically(dir_ / "x.gz", two);
  EXPECT_EQ(read_file(dir_ / "x.gz"), "abcdef");
}

TEST_F(FileIoTest, CorruptOrTruncatedGzipIsDataLossNamingTheFile) {
  std::string gz;
  gzip_append(gz, sample(10'000));
  write_file_atomically(dir_ / "trunc.json.gz", gz.substr(0, gz.size() / 2));
  try {
    read_file(dir_ / "trunc.json.gz");
    FAIL() << "no error";
  } catch (const DataLossError& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "trunc.json.gz").string()), std::string::npos) << e.what();
  }
  write_file_atomically(dir_ / "bad.json.gz", "this is not gzip");
  EXPECT_THROW(read_file(dir_ / "bad.json.gz"), DataLossError);
}

TEST_F(FileIoTest, MissingDirectoryErrorNamesThePath) {
  const fs::path path = dir_ / "no" / "such" / "dir" / "timeline-1.json";
  try {
    write_file_atomically(path, "x");
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  // A file where a directory should be.
  write_file_atomically(dir_ / "file", "x");
  try {
    write_file_atomically(dir_ / "file" / "t.json", "x", true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "file" / "t.json").string()), std::string::npos) << e.what();
  }
  try {
    read_file(dir_ / "absent.json");
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "absent.json").string()), std::string::npos) << e.what();
  }
}

TEST_F(FileIoTest, ReadOnlyDirectoryErrorNamesThePath) {
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  // Root writes into read-only directories: run the write as "nobody" (the directory is root's).
  const uid_t user = ::geteuid();
  if (user == 0 && ::seteuid(65534) != 0) GTEST_SKIP() << "running as root and cannot drop to nobody";
  std::string error;
  try {
    write_file_atomically(dir_ / "t.json", "x");
  } catch (const PermissionDeniedError& e) {
    error = e.what();
  }
  if (user == 0) {
    ASSERT_EQ(::seteuid(0), 0);
  }
  fs::permissions(dir_, fs::perms::owner_all);
  ASSERT_FALSE(error.empty()) << "no error";
  EXPECT_NE(error.find((dir_ / "t.json").string()), std::string::npos) << error;
}

// The process's file size limit (which binds root too) while it lives, with SIGXFSZ ignored so
// that a write past it fails with EFBIG instead of killing the process.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit_), 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit_;
    small.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit old_limit_ {};
  void (*old_handler_)(int) = nullptr;
};

// A write that fails half-way (here: the file size limit, which binds root too) leaves the
// file that was there as it was, and no temporary behind.
TEST_F(FileIoTest, FailedWriteLeavesTheExistingFileUntouched) {
  const fs::path path = dir_ / "timeline-7.json";
  write_file_atomically(path, "the previous trace");
  const FileSizeLimit limit(4096);
  bool threw = false;
  std::string message;
  for (bool gzip : {false, true}) {
    try {
      write_file_atomically(path, sample(1'000'000), gzip);
    } catch (const ResourceExhaustedError& e) {
      threw = true;
      message = e.what();
    }
    EXPECT_TRUE(threw);
    threw = false;
  }
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_EQ(read_file(path), "the previous trace");
  EXPECT_EQ(entries(), std::vector<std::string>{"timeline-7.json"});
}

TEST_F(FileIoTest, ADirectoryInThePathsPlaceIsAnErrorAndLeavesNoTemporary) {
  fs::create_directories(dir_ / "t.json");
  EXPECT_THROW(write_file_atomically(dir_ / "t.json", "x"), Error);
  EXPECT_EQ(entries(), std::vector<std::string>{"t.json"});
  EXPECT_TRUE(fs::is_directory(dir_ / "t.json"));
}

TEST_F(FileIoTest, WriteFileAtomicallyConcatenatesPieces) {
  write_file_atomically(dir_ / "f", std::vector<std::string_view>{"ab", "", "cd"}, {.sync = true});
  EXPECT_EQ(read_file(dir_ / "f"), "abcd");
  write_file_atomically(dir_ / "g.gz", std::vector<std::string_view>{"ab", "", "cd"}, {.gzip = true});
  EXPECT_EQ(read_file(dir_ / "g.gz"), "abcd");
  // A directory in the way is refused, and the temporary file is removed.
  fs::create_directory(dir_ / "sub");
  EXPECT_THROW(write_file_atomically(dir_ / "sub", std::vector<std::string_view>{"x"}), FailedPreconditionError);
  EXPECT_EQ(entries(), (std::vector<std::string>{"f", "g.gz", "sub"}));
}

// A flight recorder's dump streams into the file: pieces of any size, across the writes of
// 1 MiB they are gathered into, come out in order, plain or gzip.
TEST_F(FileIoTest, StreamedPiecesComeOutInOrder) {
  const std::string text = sample(3'500'000);
  const auto produce = [&](const PieceWriter& write) {
    size_t at = 0;
    for (size_t n : {size_t{0}, size_t{1}, size_t{32768}, size_t{1} << 20, size_t{(1 << 20) + 5}, size_t{7}}) {
      write(std::string_view(text).substr(at, n));
      at += n;
    }
    while (at < text.size()) {  // the rest in 32 KiB pieces, as a Sink hands them over
      write(std::string_view(text).substr(at, 32768));
      at += 32768;
    }
  };
  write_file_atomically_streamed(dir_ / "t.json", produce);
  EXPECT_EQ(raw(dir_ / "t.json"), text);
  write_file_atomically_streamed(dir_ / "t.json.gz", produce, {.gzip = true, .sync = true});
  EXPECT_TRUE(is_gzip(raw(dir_ / "t.json.gz")));
  EXPECT_EQ(read_file(dir_ / "t.json.gz"), text);
  write_file_atomically_streamed(dir_ / "empty.gz", [](const PieceWriter&) {}, {.gzip = true});
  EXPECT_EQ(read_file(dir_ / "empty.gz"), "");
  EXPECT_EQ(entries(), (std::vector<std::string>{"empty.gz", "t.json", "t.json.gz"}));
}

TEST_F(FileIoTest, AStreamThatFailsLeavesTheExistingFileUntouched) {
  const fs::path path = dir_ / "flight-7-slow.json";
  write_file_atomically(path, "the previous dump");
  // The producer throws halfway: its exception, the old file, no temporary.
  const auto throws_halfway = [](const PieceWriter& write) {
    write(sample(2'000'000));
    throw InvalidArgumentError("the trace could not be made");
  };
  for (bool gzip : {false, true})
    EXPECT_THROW(write_file_atomically_streamed(path, throws_halfway, {.gzip = gzip}), InvalidArgumentError);
  EXPECT_EQ(read_file(path), "the previous dump");
  EXPECT_EQ(entries(), std::vector<std::string>{"flight-7-slow.json"});
  // A write fails (the file size limit): the producer runs on, the error names the file.
  std::vector<std::string> messages;
  for (bool gzip : {false, true}) {
    const FileSizeLimit limit(4096);
    try {
      write_file_atomically_streamed(path,
                                     [](const PieceWriter& write) {
                                       for (int i = 0; i < 100; ++i) write(sample(65536));
                                     },
                                     {.gzip = gzip});
    } catch (const ResourceExhaustedError& e) {
      messages.push_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 2u);
  for (const std::string& m : messages) EXPECT_NE(m.find(path.string()), std::string::npos) << m;
  EXPECT_EQ(read_file(path), "the previous dump");
  EXPECT_EQ(entries(), std::vector<std::string>{"flight-7-slow.json"});
}

// Issue 12 (5): a small .gz could inflate without bound (a 4.3 MB file took 1.1 GB) and fail with
// an untyped bad_alloc; the bound is a typed error naming the file and the limit.
TEST_F(FileIoTest, GunzipIsBoundedAndTheErrorNamesTheFileAndTheLimit) {
  const std::string zeros(1 << 20, '\0');
  std::string gz;
  gzip_append(gz, zeros);
  ASSERT_LT(gz.size(), 5000u);
  EXPECT_EQ(gunzip(gz, "mem", zeros.size()), zeros);  // exactly at the limit is fine
  try {
    gunzip(gz, "mem", zeros.size() - 1);
    FAIL() << "no error";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("mem: gzip data inflates past the limit of 1048575 bytes", 0), 0u)
        << e.what();
  }
  write_file_atomically(dir_ / "zeros.pb.gz", zeros, /*gzip=*/true);
  try {
    read_file(dir_ / "zeros.pb.gz", 4096);
    FAIL() << "no error";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_NE(
        std::string(e.what()).find((dir_ / "zeros.pb.gz").string() + ": gzip data inflates past the limit of 4096"),
        std::string::npos)
        << e.what();
  }
  // By content: any name; plain files are returned as they are.
  fs::copy_file(dir_ / "zeros.pb.gz", dir_ / "zeros.bin");
  EXPECT_EQ(read_file(dir_ / "zeros.bin", kDefaultMaxDecompressedBytes, Gunzip::kByContent), zeros);
  EXPECT_EQ(read_file(dir_ / "zeros.bin", kDefaultMaxDecompressedBytes, Gunzip::kNever), gz);
  EXPECT_THROW(read_file(dir_ / "zeros.bin", 10, Gunzip::kByContent), ResourceExhaustedError);
  write_file_atomically(dir_ / "plain.txt", "plain");
  EXPECT_EQ(read_file(dir_ / "plain.txt", 1, Gunzip::kByContent), "plain");
  EXPECT_EQ(kDefaultMaxDecompressedBytes, uint64_t{1} << 30);
}

// Issue 12 (8): temporary files of writers killed mid-write stayed forever (379 MB after 50
// kills of a checkpoint writer). The next writer in the directory removes those whose owner is
// gone, and only those.
TEST_F(FileIoTest, OrphanedTemporariesOfKilledWritersAreRemovedByTheNextWriter) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A writer that dies in the middle: its temporary file is half written.
    const std::string tmp = (dir_ / ("model.ckpt-7.safetensors.tmp-" + std::to_string(::getpid()) + "-0")).string();
    std::ofstream(tmp) << "half of a checkpoint";
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::string orphan = "model.ckpt-7.safetensors.tmp-" + std::to_string(child) + "-0";
  ASSERT_TRUE(fs::exists(dir_ / orphan));

  // Files that must stay: a live writer's (this process, written now), another program's names.
  const std::string live = "timeline-1.json.tmp-" + std::to_string(::getpid()) + "-99";
  for (const std::string& name :
       {live, std::string("notes.tmp"), std::string("a.tmp-x-1"), std::string("b.tmp-12-"), std::string("c.tmp--3")})
    std::ofstream(dir_ / name) << "keep";
  // This pid's file from before this process started: the pid was reused, the writer is gone.
  const std::string reused = "run_metadata-3.pb.tmp-" + std::to_string(::getpid()) + "-5";
  std::ofstream(dir_ / reused) << "stale";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(24 * 365 * 30);
  fs::last_write_time(dir_ / reused, old);

  write_file_atomically(dir_ / "checkpoint", "model_checkpoint_path: \"model.ckpt-8\"\n");
  EXPECT_FALSE(fs::exists(dir_ / orphan));
  EXPECT_FALSE(fs::exists(dir_ / reused));
  EXPECT_EQ(entries(),
            (std::vector<std::string>{"a.tmp-x-1", "b.tmp-12-", "c.tmp--3", "checkpoint", "notes.tmp", live}));
  // Pid 1 is alive and started long before this file: its file stays.
  std::ofstream(dir_ / "x.tmp-1-0") << "init's";
  EXPECT_EQ(remove_orphaned_temporaries(dir_), 0u);
  EXPECT_TRUE(fs::exists(dir_ / "x.tmp-1-0"));
}

}  // namespace
}  // namespace stepscope
