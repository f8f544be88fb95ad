// Looking at a remote run's timelines from a browser: a small HTTP server over a run's
// directory (`stepscope serve runs/demo`). Its index page lists every trace file under the
// directory (timeline-<step>.json / .json.gz, newest steps of each run last) with an "open in
// Perfetto" button, which fetches the file and hands it to ui.perfetto.dev through postMessage
// (the way Perfetto documents for dashboards: no download, works on any port, e.g. through
// `ssh -L 9001:localhost:9001 host`), and a plain link for chrome://tracing's Load button.
// The files themselves are served with CORS allowed, so
// https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/<file> also opens them directly (the
// Perfetto UI only fetches plain-http URLs from port 9001, hence that default).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stepscope {

struct TraceFile {
  std::string path;  // relative to the served directory, '/'-separated
  int64_t bytes = 0;
  int64_t step = -1;  // from "timeline-<step>.json", -1 when the name has none
  int64_t modified_unix_secs = 0;
};

// The trace files under `root` (recursively), ordered by directory, then step, then name.
// NotFoundError when `root` is not a directory.
std::vector<TraceFile> list_trace_files(const std::filesystem::path& root);

// The index page for those files, as served at "/".
std::string render_trace_index(const std::vector<TraceFile>& files, const std::string& title);

// The directory a server serves, resolved once: `root` is canonical (symbolic links resolved),
// `title` the directory as the user named it (the index page's heading). NotFoundError when it
// is not a directory.
struct ServedDirectory {
  explicit ServedDirectory(const std::filesystem::path& directory);
  std::filesystem::path root;
  std::string title;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

// Everything the server answers, without a socket (the server calls it for every request; so
// can a fuzzer). `method` as in the request line; `target` the raw request-target, path and
// query ("/run1/timeline-2.json?x=1"), still percent-encoded: it is decoded here, once.
//   GET or HEAD "/": the index page; "/api/traces": the list as JSON; "/<path>": the file at
//   <path> under the root, application/json (or application/gzip for .gz);
//   405 for any other method; 400 for a target that is not an absolute path or has a bad
//   percent escape or a NUL; 403 for a path with a ".." segment, an absolute path ("//etc") or
//   one whose symbolic links lead out of the root; 404 for anything else that is not a regular
//   file under the root.
// Throws only when the served directory itself cannot be read (e.g. it was deleted): the
// server answers those with a plain 500.
HttpReply handle_request(const ServedDirectory& served, std::string_view method, std::string_view target);

struct TraceServerOptions {
  std::filesystem::path root = ".";
  std::string host = "127.0.0.1";  // "0.0.0.0" to listen on every interface
  int port = 9001;                 // 0: any free port
  // Slow or idle clients must not starve the others: each connection gets a worker, which a
  // client holds at most `io_timeout_secs` without sending (or reading) a byte, and for at
  // most `keep_alive_max_requests` requests.
  int worker_threads = 64;
  int io_timeout_secs = 5;
  int keep_alive_max_requests = 100;
};

class TraceServer {
 public:
  // NotFoundError when the root is not a directory.
  explicit TraceServer(TraceServerOptions options);
  ~TraceServer();
  TraceServer(const TraceServer&) = delete;
  TraceServer& operator=(const TraceServer&) = delete;

  // Binds the socket and returns the port; UnavailableError naming host and port on failure.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread). Binds first if needed.
  void serve();
  void stop();
  // "http://<host>:<port>/".
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepscope
