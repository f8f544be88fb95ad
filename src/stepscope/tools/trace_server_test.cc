#include "stepscope/tools/trace_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "stepscope/base/error.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

class TraceServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("stepscope_trace_server_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "run1");
    write("run1/timeline-10.json", R"({"traceEvents":[]})");
    write("run1/timeline-2.json", R"({"traceEvents":[{"ph":"M"}]})");
    write("run1/timeline-4.json.gz", "\x1f\x8b");
    write("run1/model.ckpt-4.safetensors", "weights");
    write("run1/timeline-6.json.tmp123", "half");
    write("odd name.json", "{}");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& name, const std::string& contents) { std::ofstream(root_ / name) << contents; }

  fs::path root_;
};

TEST_F(TraceServerTest, ListsTraceFilesByDirectoryThenStep) {
  const std::vector<TraceFile> files = list_trace_files(root_);
  std::vector<std::string> paths;
  for (const TraceFile& f : files) paths.push_back(f.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"odd name.json", "run1/timeline-2.json", "run1/timeline-4.json.gz",
                                             "run1/timeline-10.json"}));
  EXPECT_EQ(files[1].step, 2);
  EXPECT_EQ(files[3].step, 10);
  EXPECT_EQ(files[0].step, -1);
  EXPECT_EQ(files[1].bytes, 28);
}

TEST_F(TraceServerTest, MissingDirectoryIsNamed) {
  try {
    list_trace_files(root_ / "nope");
    FAIL();
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  EXPECT_THROW(TraceServer({.root = root_ / "nope"}), NotFoundError);
}

TEST_F(TraceServerTest, ServesIndexFilesAndListWithCors) {
  TraceServer server({.root = root_, .port = 0});
  const int port = server.bind();
  std::thread thread([&] { server.serve(); });
  httplib::Client client("127.0.0.1", port);

  auto index = client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->body.find("run1/timeline-10.json"), std::string::npos);
  EXPECT_NE(index->body.find("openInPerfetto('odd%20name.json')"), std::string::npos);
  EXPECT_NE(index->body.find("https://ui.perfetto.dev"), std::string::npos);
  EXPECT_EQ(index->body.find("safetensors"), std::string::npos);

  auto file = client.Get("/run1/timeline-2.json");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 200);
  EXPECT_EQ(file->body, R"({"traceEvents":[{"ph":"M"}]})");
  EXPECT_EQ(file->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(file->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(client.Get("/run1/timeline-4.json.gz")->get_header_value("Content-Type"), "application/gzip");
  EXPECT_EQ(client.Get("/odd%20name.json")->status, 200);

  EXPECT_EQ(client.Get("/run1/missing.json")->status, 404);
  EXPECT_EQ(client.Get("/../../etc/passwd")->status, 404);
  EXPECT_EQ(client.Get("/run1/../../etc/passwd")->status, 404);

  auto list = client.Get("/api/traces");
  ASSERT_TRUE(list);
  const nlohmann::json json = nlohmann::json::parse(list->body);
  ASSERT_EQ(json.size(), 4u);
  EXPECT_EQ(json[3]["path"], "run1/timeline-10.json");
  EXPECT_EQ(json[3]["step"], 10);

  server.stop();
  thread.join();
}

TEST_F(TraceServerTest, PortInUseIsAClearError) {
  TraceServer first({.root = root_, .port = 0});
  const int port = first.bind();
  TraceServer second({.root = root_, .port = port});
  try {
    second.bind();
    FAIL();
  } catch (const UnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos);
  }
}

}  // namespace
}  // namespace stepscope
