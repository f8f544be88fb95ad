// Looking at remote runs from a browser: a small HTTP server over a directory of runs
// (`stepscope serve runs`), with pages (web_assets.h, over the JSON API of web_api.h) that show
//  - the runs under the directory, and for a run its step time and scalars over the steps, its
//    traced steps and its saved profile, updated while the run trains;
//  - a traced step in catapult's trace viewer (chrome://tracing's, as Debian's golang-1.19-src
//    ships it for `go tool trace`), served by stepscope itself: nothing is fetched from the
//    internet, so it works on an air-gapped server through `ssh -L 9001:localhost:9001 host`;
//    "open in Perfetto" hands the file to ui.perfetto.dev instead (postMessage, Perfetto's
//    documented protocol for dashboards);
//  - tfprof's four views as tables with the tfprof options as controls, the advisor's report with
//    a step's critical path, and a step's memory (allocator counters, largest tensors).
// Security: loopback only by default. Bound to any other address, every request needs the
// server's token (printed at start, as Jupyter does: the URL "/?token=T" sets a cookie; a
// "token T" Authorization header works too). No `Access-Control-Allow-Origin: *`: trace files
// allow exactly https://ui.perfetto.dev (its "?url=" links; give the token in that URL), so other
// web pages open in the user's browser cannot read them. Read-only (GET and HEAD); paths confined
// to the directory; request targets at most 4 KiB; at most `worker_threads` connections served at
// once and `max_queued_connections` waiting (the accept loop waits beyond that).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stepscope {

class RunCatalog;

// Where catapult's viewer is: Debian's golang-1.19-src (trace_viewer_full.html and the
// webcomponents polyfill it needs); STEPSCOPE_TRACE_VIEWER_DIR overrides it.
std::filesystem::path default_trace_viewer_dir();

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

struct TraceFile {
  std::string path;  // relative to the served directory, '/'-separated
  int64_t bytes = 0;
  int64_t step = -1;  // from "timeline-<step>.json", -1 when the name has none
  int64_t modified_unix_secs = 0;
};

// The trace files under `root` (recursively), ordered by directory, then step, then name.
// NotFoundError when `root` is not a directory.
std::vector<TraceFile> list_trace_files(const std::filesystem::path& root);

// The directory a server serves, resolved once: `root` is canonical (symbolic links resolved),
// `title` the directory as the user named it (the index page's heading). NotFoundError when it
// is not a directory.
struct ServedDirectory {
  explicit ServedDirectory(const std::filesystem::path& directory, std::string token = "",
                           std::filesystem::path viewer_dir = default_trace_viewer_dir());
  std::filesystem::path root;
  std::string title;
  std::string token;                 // "" = none required
  std::filesystem::path viewer_dir;  // catapult's static files
  // What the runs under `root` hold (the pages' API reads it; it caches what it read).
  std::shared_ptr<RunCatalog> catalog;
};

// The path `relative` names under the served root (a regular file, or with `directory` a
// directory), or the status that refuses it: 403 for "..", an absolute path or symbolic links
// that lead out of the root, 404 for anything else that is not there.
int resolve_served_path(const ServedDirectory& served, std::string_view relative, std::filesystem::path& out,
                        bool directory = false);

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};  // beyond the server's defaults
};

// What handle_request reads of a request: the request line's method and raw target, and the
// headers that can carry the token.
struct HttpRequest {
  std::string_view method;
  std::string_view target;
  std::string_view cookie = {};         // the Cookie header
  std::string_view authorization = {};  // the Authorization header
};

// Everything the server answers, without a socket (the server calls it for every request; so
// can a fuzzer). `target` is the raw request-target, path and query ("/run1/timeline-2.json?x=1"),
// still percent-encoded: it is decoded here, once.
//   With a token: 403 unless the query has token=<token> (the reply then sets the cookie
//   "stepscope_token"), the cookie holds it, or the Authorization header is "token <token>".
//   GET or HEAD "/": the pages (and "/ui/<file>" their scripts); "/api/traces": the trace files
//   as JSON; "/api/trace_summary/<path>" and "/api/trace_window/<path>?start=&end=&resolution=":
//   a trace's overview and windows as JSON (trace_window.h; 400 for a bad parameter, 422 for a
//   file that is not a trace); "/api/...": web_api.h; "/viewer/<path>": the trace at <path> in
//   catapult's viewer (a big one through windows: "?mode=window" or "?mode=full" decides;
//   "<job>/timeline-<N>.json?merged=1": a data-parallel job's ranks merged, rank_jobs.h);
//   "/static/<file>": the viewer's two files; "/<path>":
//   the file at <path> under the root, application/json (or application/gzip for .gz);
//   405 for any other method; 414 for a target over 4 KiB; 400 for a target that is not an
//   absolute path or has a bad percent escape or a NUL; 403 for a path with a ".." segment, an
//   absolute path ("//etc") or one whose symbolic links lead out of the root; 404 for anything
//   else that is not a regular file under the root.
// Throws only when the served directory itself cannot be read (e.g. it was deleted): the
// server answers those with a plain 500.
HttpReply handle_request(const ServedDirectory& served, const HttpRequest& request);
inline HttpReply handle_request(const ServedDirectory& served, std::string_view method, std::string_view target) {
  return handle_request(served, HttpRequest{method, target});
}

struct TraceServerOptions {
  std::filesystem::path root = ".";
  std::string host = "127.0.0.1";  // "0.0.0.0" to listen on every interface
  int port = 9001;                 // 0: any free port
  // Slow or idle clients must not starve the others: each connection gets a worker, which a
  // client holds at most `io_timeout_secs` without sending (or reading) a byte, and for at
  // most `keep_alive_max_requests` requests.
  int worker_threads = 64;
  int max_queued_connections = 256;
  int io_timeout_secs = 5;
  int keep_alive_max_requests = 100;
  // Required on every request when not empty; a host that is not loopback requires one
  // (InvalidArgumentError otherwise: `stepscope serve` makes one up and prints it).
  std::string token = {};
  std::filesystem::path viewer_dir = default_trace_viewer_dir();
};

class TraceServer {
 public:
  // NotFoundError when the root is not a directory; InvalidArgumentError for a host that is not
  // loopback without a token.
  explicit TraceServer(TraceServerOptions options);
  ~TraceServer();
  TraceServer(const TraceServer&) = delete;
  TraceServer& operator=(const TraceServer&) = delete;

  // Binds the socket and returns the port; UnavailableError naming host and port on failure.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread). Binds first if needed.
  void serve();
  void stop();
  // "http://<host>:<port>/", with "?token=<token>" when there is one.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepscope
