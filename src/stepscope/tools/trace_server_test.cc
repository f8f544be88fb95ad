#include "stepscope/tools/trace_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "stepscope/base/error.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

namespace fs = std::filesystem;

class TraceServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root_ / "run1");
    write("run1/timeline-10.json", R"({"traceEvents":[]})");
    write("run1/timeline-2.json", R"({"traceEvents":[{"ph":"M"}]})");
    write("run1/timeline-4.json.gz", "\x1f\x8b");
    write("run1/model.ckpt-4.safetensors", "weights");
    write("run1/timeline-6.json.tmp123", "half");
    write("odd name.json", "{}");
  }
  void write(const std::string& name, const std::string& contents) { std::ofstream(root_ / name) << contents; }

  testing::TempDir tmp_;
  fs::path root_ = tmp_.path();
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

TEST_F(TraceServerTest, ServesIndexFilesAndListToPerfettoOnly) {
  TraceServer server({.root = root_, .port = 0});
  const int port = server.bind();
  std::thread thread([&] { server.serve(); });
  httplib::Client client("127.0.0.1", port);

  auto index = client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->body.find("<script src=\"/ui/app.js\""), std::string::npos);
  auto script = client.Get("/ui/app.js");
  ASSERT_TRUE(script);
  EXPECT_NE(script->body.find("https://ui.perfetto.dev"), std::string::npos);  // the "open in Perfetto" button
  // The run's traces, as the pages list them.
  const nlohmann::json run = nlohmann::json::parse(client.Get("/api/run/run1")->body);
  ASSERT_EQ(run["traces"].size(), 3u);
  EXPECT_EQ(run["traces"][2]["path"], "run1/timeline-10.json");
  EXPECT_EQ(run.dump().find("safetensors"), std::string::npos);

  auto file = client.Get("/run1/timeline-2.json");
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 200);
  EXPECT_EQ(file->body, R"({"traceEvents":[{"ph":"M"}]})");
  // Perfetto's origin may read the traces; no other web page may (no "*").
  EXPECT_EQ(file->get_header_value("Access-Control-Allow-Origin"), "https://ui.perfetto.dev");
  EXPECT_FALSE(index->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(index->get_header_value("Referrer-Policy"), "no-referrer");
  EXPECT_EQ(file->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(client.Get("/run1/timeline-4.json.gz")->get_header_value("Content-Type"), "application/gzip");
  EXPECT_EQ(client.Get("/odd%20name.json")->status, 200);

  EXPECT_EQ(client.Get("/run1/missing.json")->status, 404);
  EXPECT_EQ(client.Get("/../../etc/passwd")->status, 403);
  EXPECT_EQ(client.Get("/run1/../../etc/passwd")->status, 403);

  auto list = client.Get("/api/traces");
  ASSERT_TRUE(list);
  const nlohmann::json json = nlohmann::json::parse(list->body);
  ASSERT_EQ(json.size(), 4u);
  EXPECT_EQ(json[3]["path"], "run1/timeline-10.json");
  EXPECT_EQ(json[3]["step"], 10);

  server.stop();
  thread.join();
}

// Issue 12: the request handling as a function of (method, raw target), as a fuzzer calls it.
TEST_F(TraceServerTest, HandleRequestRefusesEverythingOutsideTheRoot) {
  fs::create_symlink("/etc", root_ / "etc_link");
  fs::create_symlink(root_ / "run1" / "timeline-2.json", root_ / "inside_link.json");
  const ServedDirectory served(root_);
  auto status = [&](std::string_view target, std::string_view method = "GET") {
    return handle_request(served, method, target).status;
  };
  EXPECT_EQ(status("/"), 200);
  EXPECT_EQ(handle_request(served, "GET", "/").content_type, "text/html; charset=utf-8");
  EXPECT_EQ(status("/api/traces?x=1"), 200);
  EXPECT_EQ(handle_request(served, "GET", "/run1/timeline-2.json?download=1#x").body,
            R"({"traceEvents":[{"ph":"M"}]})");
  EXPECT_EQ(handle_request(served, "HEAD", "/run1/timeline-4.json.gz").content_type, "application/gzip");
  EXPECT_EQ(status("/odd%20name.json"), 200);
  EXPECT_EQ(status("/inside_link.json"), 200);  // a link that stays inside is fine
  EXPECT_EQ(status("/run1/./timeline-2.json"), 200);

  for (std::string_view target :
       {"/../../etc/passwd", "/run1/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/%2E%2E%2Fetc%2Fpasswd",
        "/run1/%2e%2e/%2e%2e/etc/passwd", "//etc/passwd", "/%2Fetc%2Fpasswd", "/etc_link/passwd", "/..",
        "/run1/..", "/run1/../run1/timeline-2.json"})
    EXPECT_EQ(status(target), 403) << target;
  // Doubly encoded: decoded once, "%2e%2e" is a plain (missing) name, never "..".
  for (std::string_view target : {"/%252e%252e/%252e%252e/etc/passwd", "/%252E%252E%252Fetc%252Fpasswd"})
    EXPECT_EQ(status(target), 404) << target;
  EXPECT_EQ(status("/viewer/%2e%2e/%2e%2e/etc/passwd"), 403);
  EXPECT_EQ(status("/viewer/etc_link/passwd"), 403);
  EXPECT_EQ(status("/static/..%2F..%2Fetc%2Fpasswd"), 404);
  EXPECT_EQ(status("/" + std::string(5000, 'a')), 414);
  for (std::string_view target : {"/%zz", "/a%2", "/a%00b", "*", "", "etc/passwd", "http://x/etc/passwd"})
    EXPECT_EQ(status(target), 400) << target;
  for (std::string_view target : {"/run1/missing.json", "/run1", "/nope/../x", "/etc_link"})
    EXPECT_TRUE(status(target) == 404 || status(target) == 403) << target;
  EXPECT_EQ(status("/run1/missing.json"), 404);
  EXPECT_EQ(status("/", "POST"), 405);
  EXPECT_EQ(status("/", "DELETE"), 405);
  for (const std::string_view target : {"/etc_link/passwd", "/%2e%2e/%2e%2e/etc/passwd"})
    EXPECT_EQ(handle_request(served, "GET", target).body.find("root:"), std::string::npos);
}

// Beyond loopback a token guards every request: the query (which sets a cookie), the cookie, or
// an Authorization header; without it, nothing is served, not even the index.
TEST_F(TraceServerTest, TokenGuardsEveryRequest) {
  const ServedDirectory served(root_, "s3cret");
  auto reply = [&](std::string_view target, std::string_view cookie = {}, std::string_view authorization = {}) {
    return handle_request(served, {"GET", target, cookie, authorization});
  };
  for (std::string_view target : {"/", "/api/traces", "/run1/timeline-2.json", "/viewer/run1/timeline-2.json",
                                  "/?token=wrong", "/?token=s3cre", "/?token=s3cret2", "/?xtoken=s3cret"})
    EXPECT_EQ(reply(target).status, 403) << target;
  EXPECT_NE(reply("/").body.find("token is required"), std::string::npos);
  EXPECT_EQ(reply("/", "stepscope_token=nope").status, 403);
  EXPECT_EQ(reply("/", {}, "token nope").status, 403);

  const HttpReply first = reply("/?token=s3cret");
  EXPECT_EQ(first.status, 200);
  ASSERT_EQ(first.headers.size(), 1u);
  EXPECT_EQ(first.headers[0].first, "Set-Cookie");
  EXPECT_EQ(first.headers[0].second, "stepscope_token=s3cret; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(reply("/run1/timeline-2.json", "a=b; stepscope_token=s3cret").status, 200);
  EXPECT_EQ(reply("/api/traces", {}, "token s3cret").status, 200);
  EXPECT_EQ(reply("/run1/timeline-2.json?x=1&token=s3cret").status, 200);

  // The server refuses to listen beyond loopback without one; with one, its URL carries it.
  EXPECT_THROW(TraceServer({.root = root_, .host = "0.0.0.0", .port = 0}), InvalidArgumentError);
  TraceServer server({.root = root_, .host = "0.0.0.0", .port = 0, .token = "s3cret"});
  const int port = server.bind();
  EXPECT_EQ(server.url(), "http://0.0.0.0:" + std::to_string(port) + "/?token=s3cret");
  std::thread thread([&] { server.serve(); });
  httplib::Client client("127.0.0.1", port);
  EXPECT_EQ(client.Get("/")->status, 403);
  EXPECT_EQ(client.Get("/run1/timeline-2.json")->status, 403);
  EXPECT_EQ(client.Get("/?token=s3cret")->status, 200);
  EXPECT_EQ(client.Get("/run1/timeline-2.json", {{"Cookie", "stepscope_token=s3cret"}})->status, 200);
  server.stop();
  thread.join();
}

// The viewer page embeds catapult's viewer from the server's own copy; only its two files are
// served from there.
TEST_F(TraceServerTest, ViewerPageAndItsStaticFiles) {
  const fs::path viewer = root_ / "viewer_dir";
  fs::create_directories(viewer);
  std::ofstream(viewer / "trace_viewer_full.html") << "<catapult/>";
  std::ofstream(viewer / "webcomponents.min.js") << "/*polyfill*/";
  std::ofstream(viewer / "other.txt") << "no";
  const ServedDirectory served(root_, "", viewer);
  const HttpReply page = handle_request(served, "GET", "/viewer/odd%20name.json");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html");
  EXPECT_NE(page.body.find(R"(href="/static/trace_viewer_full.html")"), std::string::npos);
  EXPECT_NE(page.body.find(R"(URL_PATH = "/odd%20name.json")"), std::string::npos);
  EXPECT_NE(page.body.find("tr-ui-timeline-view"), std::string::npos);
  EXPECT_EQ(handle_request(served, "GET", "/viewer/run1/missing.json").status, 404);
  EXPECT_EQ(handle_request(served, "GET", "/static/trace_viewer_full.html").body, "<catapult/>");
  EXPECT_EQ(handle_request(served, "GET", "/static/webcomponents.min.js").content_type, "text/javascript");
  EXPECT_EQ(handle_request(served, "GET", "/static/other.txt").status, 404);
  // Without the package: a 404 that says what to install.
  const ServedDirectory bare(root_, "", root_ / "no_viewer_here");
  const HttpReply missing = handle_request(bare, "GET", "/static/trace_viewer_full.html");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("golang-1.19-src"), std::string::npos);
}

// Issue 12: with httplib's 8 workers, 8 clients that sent half a request blocked every other
// request for 39 s. Loopback only; the client's own timeout bounds the test.
TEST_F(TraceServerTest, SlowAndIdleClientsDoNotStarveOthers) {
  TraceServer server({.root = root_, .port = 0, .io_timeout_secs = 20});
  const int port = server.bind();
  std::thread thread([&] { server.serve(); });
  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    if (i % 2 == 0) {  // half send a partial request, half nothing at all
      const std::string partial = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      ASSERT_EQ(::send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
    }
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the server take them all
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);  // well under the slow clients' 20 s: they must not be waited for
  for (int i = 0; i < 3; ++i) {
    auto reply = client.Get("/run1/timeline-2.json");
    ASSERT_TRUE(reply) << httplib::to_string(reply.error());
    EXPECT_EQ(reply->status, 200);
  }
  for (int fd : slow) ::close(fd);
  server.stop();
  thread.join();
}

// Issue 12: an exception inside a handler came back as a 500 with its what() (which names the
// server's directory) in an EXCEPTION_WHAT header.
TEST_F(TraceServerTest, AFailureIsAPlain500WithoutInternals) {
  TraceServer server({.root = root_, .port = 0});
  const int port = server.bind();
  std::thread thread([&] { server.serve(); });
  fs::remove_all(root_);  // listing the directory now throws NotFoundError naming it
  httplib::Client client("127.0.0.1", port);
  auto reply = client.Get("/api/traces");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 500);
  EXPECT_FALSE(reply->has_header("EXCEPTION_WHAT"));
  for (const auto& [name, value] : reply->headers)
    EXPECT_EQ(value.find(root_.filename().string()), std::string::npos) << name << ": " << value;
  EXPECT_EQ(reply->body, "internal server error\n");
  EXPECT_EQ(client.Get("/run1/timeline-2.json")->status, 404);  // and it goes on serving
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
