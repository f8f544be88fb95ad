#include "stepscope/base/file_io.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "stepscope/base/error.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stepscope_file_io_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  static std::string raw(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path dir_;
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
  if (user == 0) ASSERT_EQ(::seteuid(0), 0);
  fs::permissions(dir_, fs::perms::owner_all);
  ASSERT_FALSE(error.empty()) << "no error";
  EXPECT_NE(error.find((dir_ / "t.json").string()), std::string::npos) << error;
}

// A write that fails half-way (here: the file size limit, which binds root too) leaves the
// file that was there as it was, and no temporary behind.
TEST_F(FileIoTest, FailedWriteLeavesTheExistingFileUntouched) {
  const fs::path path = dir_ / "timeline-7.json";
  write_file_atomically(path, "the previous trace");
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
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
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
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

}  // namespace
}  // namespace stepscope
