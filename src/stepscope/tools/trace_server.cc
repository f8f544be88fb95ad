#include "stepscope/tools/trace_server.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "stepscope/base/error.h"
#include "stepscope/base/json_out.h"
#include "stepscope/tools/run_catalog.h"
#include "stepscope/tools/trace_window.h"
#include "stepscope/tools/web_api.h"
#include "stepscope/tools/web_assets.h"

namespace stepscope {

namespace fs = std::filesystem;

namespace {

bool is_trace_name(const std::string& name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".json") || ends_with(".json.gz");
}

int64_t step_of(const std::string& name) {
  constexpr std::string_view kPrefix = "timeline-";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  int64_t step = -1;
  const char* begin = name.data() + kPrefix.size();
  const auto [end, error] = std::from_chars(begin, name.data() + name.size(), step);
  if (error != std::errc() || end == begin || *end != '.') return -1;
  return step;
}

void require_directory(const fs::path& root) {
  std::error_code error;
  if (!fs::is_directory(root, error)) throw NotFoundError("trace directory " + root.string() + " does not exist");
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Percent-encodes what a URL path must not carry raw (names are the user's files).
std::string url_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string json_literal(std::string_view s) {
  std::string out;
  json_out::append_string(out, s);
  return out;
}

}  // namespace

std::vector<TraceFile> list_trace_files(const fs::path& root) {
  require_directory(root);
  std::vector<TraceFile> files;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const std::string name = it->path().filename().string();
    if (!is_trace_name(name) || name.find(".tmp") != std::string::npos) continue;
    TraceFile file;
    file.path = it->path().lexically_relative(root).generic_string();
    file.bytes = static_cast<int64_t>(it->file_size(error));
    file.step = step_of(name);
    const auto modified = it->last_write_time(error);
    file.modified_unix_secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(modified).time_since_epoch())
            .count();
    files.push_back(std::move(file));
  }
  auto key = [](const TraceFile& f) {
    return std::make_tuple(fs::path(f.path).parent_path().generic_string(), f.step, f.path);
  };
  std::sort(files.begin(), files.end(), [&](const TraceFile& a, const TraceFile& b) { return key(a) < key(b); });
  return files;
}

fs::path default_trace_viewer_dir() {
  if (const char* dir = std::getenv("STEPSCOPE_TRACE_VIEWER_DIR"); dir && *dir) return dir;
  return "/usr/share/go-1.19/src/cmd/trace/static";
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

ServedDirectory::ServedDirectory(const fs::path& directory, std::string token, fs::path viewer_dir)
    : title(directory.string()), token(std::move(token)), viewer_dir(std::move(viewer_dir)) {
  require_directory(directory);
  root = fs::canonical(directory);
  catalog = std::make_shared<RunCatalog>(root);
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%2e%2E" -> "..": false for a malformed escape or a NUL (no file name holds one).
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0') return false;
    out += c;
  }
  return true;
}

HttpReply text_reply(int status, std::string body) { return {status, "text/plain", std::move(body)}; }

std::string traces_json(const fs::path& root) {
  std::string json = "[";
  for (const TraceFile& f : list_trace_files(root)) {
    if (json.size() > 1) json += ",";
    json += "{\"path\":" + json_literal(f.path) + ",\"bytes\":" + std::to_string(f.bytes) +
            ",\"step\":" + std::to_string(f.step) + ",\"modified\":" + std::to_string(f.modified_unix_secs) + "}";
  }
  return json + "]";
}

}  // namespace

namespace {

constexpr size_t kMaxTargetBytes = 4096;
constexpr std::string_view kTokenCookie = "stepscope_token";
constexpr const char* kPerfettoOrigin = "https://ui.perfetto.dev";
constexpr const char* kViewerFiles[] = {"trace_viewer_full.html", "webcomponents.min.js"};

// Compares in time independent of where the strings differ.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The value of `key` in "k1=v1; k2=v2" (cookies) or "k1=v1&k2=v2" (a query), raw.
std::string_view find_pair(std::string_view list, std::string_view key, char separator) {
  while (!list.empty()) {
    const size_t end = std::min(list.find(separator), list.size());
    std::string_view item = list.substr(0, end);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=')
      return item.substr(key.size() + 1);
    list.remove_prefix(std::min(end + 1, list.size()));
  }
  return {};
}

}  // namespace

int resolve_served_path(const ServedDirectory& served, std::string_view relative, fs::path& file, bool directory) {
  if (relative.empty() || relative.front() == '/') return 403;
  for (size_t begin = 0; begin <= relative.size();) {
    const size_t end = std::min(relative.find('/', begin), relative.size());
    if (relative.substr(begin, end - begin) == "..") return 403;
    begin = end + 1;
  }
  std::error_code error;
  file = fs::weakly_canonical(served.root / fs::path(relative), error);
  if (error) return 404;
  const auto [root_end, file_it] = std::mismatch(served.root.begin(), served.root.end(), file.begin(), file.end());
  if (root_end != served.root.end()) return 403;
  if (!(directory ? fs::is_directory(file, error) : fs::is_regular_file(file, error))) return 404;
  return 200;
}

namespace {

int resolve(const ServedDirectory& served, std::string_view relative, fs::path& file) {
  return resolve_served_path(served, relative, file);
}

std::optional<std::string> read_whole(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The trace in catapult's viewer, embedded as catapult documents it (the HTML import of
// trace_viewer_full.html, a tr-ui-timeline-view, tr.importer.Import); the page fetches the trace
// from this server, or, `windowed` (a big trace), windows of it (trace_window.h) under an overview
// strip. window.stepscopeModel is the imported model (for tests), window.stepscopeWindow the
// window shown.
std::string render_viewer(std::string_view path, bool windowed, std::string_view fetch_url = {}) {
  std::ostringstream html;
  html
      << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stepscope: " << html_escape(path)
      << "</title>\n<script src=\"/static/webcomponents.min.js\"></script>\n"
      << "<link rel=\"import\" href=\"/static/trace_viewer_full.html\" onerror=\"viewerMissing()\">\n"
      << "<style>html,body{margin:0;padding:0;width:100%;height:100%;overflow:hidden;box-sizing:border-box}"
      << "#trace-viewer{height:100%}#status{font-family:sans-serif;margin:1em}"
      << "body.windowed{display:flex;flex-direction:column}body.windowed #trace-viewer{flex:1;height:auto;min-height:0}"
      << "body.windowed #status{margin:.2em 1em}#window-bar{font:13px sans-serif;padding:.3em 1em}"
      << "#overview{width:100%;height:48px;display:block;cursor:crosshair}#window-info.sampled{color:#b06000}"
      << "</style>\n</head><body>\n"
      << "<div id=\"status\">loading " << html_escape(path) << " ...</div>\n<script>\n"
      << "const TRACE = " << json_literal(path)
      << ", URL_PATH = " << json_literal(fetch_url.empty() ? "/" + url_path(path) : std::string(fetch_url))
      << ", WINDOWED = " << (windowed ? "true" : "false") << ";\n"
      << R"js(function say(text) { document.getElementById('status').textContent = text; }
function viewerMissing() {
  say("catapult's trace viewer is not installed on the server: apt-get install golang-1.19-src " +
      "(or set STEPSCOPE_TRACE_VIEWER_DIR)");
}
async function importTrace(data) {
  const model = new tr.Model();
  await new tr.importer.Import(model).importTracesWithProgressDialog([data]);
  return model;
}
function showModel(model) {
  let viewer = document.getElementById('trace-viewer');
  if (!viewer) {
    const container = document.createElement('track-view-container');
    container.id = 'track_view_container';
    viewer = document.createElement('tr-ui-timeline-view');
    viewer.track_view_container = container;
    Polymer.dom(viewer).appendChild(container);
    viewer.id = 'trace-viewer';
    viewer.globalMode = true;
    Polymer.dom(document.body).appendChild(viewer);
  }
  viewer.model = model;
  viewer.viewTitle = TRACE;
  window.stepscopeModel = model;
  if (location.hash === '#critical') highlightCriticalPath(model, viewer);
}
// "#critical" (the advisor page's link): the step's critical path, from the run's profile,
// selected in the viewer (the analysis panel below lists its ops). window.stepscopeHighlighted
// counts the slices selected.
async function highlightCriticalPath(model, viewer) {
  window.stepscopeHighlighted = 0;
  const m = TRACE.match(/^(?:(.*)\/)?timeline-(\d+)\.json(?:\.gz)?$/);
  if (!m) return;
  const run = (m[1] || '.').split('/').map(encodeURIComponent).join('/');
  const response = await fetch('/api/advise/' + run + '?step=' + m[2]);
  if (!response.ok) return;
  const names = new Set((await response.json()).critical_path.path.map((op) => op.name));
  const slices = [];
  for (const thread of model.getAllThreads()) {
    for (const slice of thread.sliceGroup.slices) {
      const args = slice.args || {};
      if (names.has(args.name) && (args.step === undefined || String(args.step) === m[2])) slices.push(slice);
    }
  }
  viewer.brushingStateController.changeSelectionFromTimeline(new tr.model.EventSet(slices));
  window.stepscopeHighlighted = slices.length;
}
)js"
      << R"js(document.addEventListener('WebComponentsReady', async () => {
  if (typeof tr === 'undefined') return viewerMissing();
  if (WINDOWED) return startWindowed();
  const response = await fetch(URL_PATH);
  if (!response.ok) return say(TRACE + ': HTTP ' + response.status);
  const data = TRACE.endsWith('.gz') ? await response.arrayBuffer() : await response.text();
  let model;
  try {
    model = await importTrace(data);
  } catch (e) {
    return say(TRACE + ': ' + e);
  }
  document.getElementById('status').remove();
  showModel(model);
});
</script>
)js" << (windowed ? "<script src=\"/ui/windowed_viewer.js\"></script>\n" : "")
      << R"js(</body></html>
)js";
  return html.str();
}

}  // namespace

HttpReply handle_request(const ServedDirectory& served, const HttpRequest& request) {
  const std::string_view method = request.method, target = request.target;
  if (method != "GET" && method != "HEAD") return text_reply(405, "method not allowed: only GET and HEAD\n");
  if (target.size() > kMaxTargetBytes) return text_reply(414, "request target too long\n");
  if (target.empty() || target.front() != '/') return text_reply(400, "bad request target\n");
  const size_t query_begin = target.find('?');
  const std::string_view query =
      query_begin == std::string_view::npos ? std::string_view() : target.substr(query_begin + 1);
  std::string path;
  if (!percent_decode(target.substr(0, target.find_first_of("?#")), path))
    return text_reply(400, "bad percent escape in the request path\n");

  std::vector<std::pair<std::string, std::string>> headers;
  if (!served.token.empty()) {
    std::string_view authorization = request.authorization;
    const bool by_header = authorization.rfind("token ", 0) == 0 && same_secret(authorization.substr(6), served.token);
    const bool by_cookie = same_secret(find_pair(request.cookie, kTokenCookie, ';'), served.token);
    const std::string_view given = find_pair(query.substr(0, query.find('#')), "token", '&');
    const bool by_query = same_secret(given, served.token);
    if (!by_header && !by_cookie && !by_query)
      return text_reply(
          403, "a token is required: open the URL `stepscope serve` printed (http://<host>:<port>/?token=...)\n");
    if (by_query && !by_cookie)
      headers.push_back(
          {"Set-Cookie", std::string(kTokenCookie) + "=" + served.token + "; Path=/; HttpOnly; SameSite=Strict"});
  }
  auto with_headers = [&](HttpReply reply) {
    reply.headers.insert(reply.headers.end(), headers.begin(), headers.end());
    return reply;
  };

  if (path == "/" || path.rfind("/ui/", 0) == 0) {
    const WebAsset* asset = find_web_asset(path == "/" ? "index.html" : std::string_view(path).substr(4));
    if (!asset) return text_reply(404, "not found\n");
    return with_headers({200, std::string(asset->content_type), std::string(asset->body)});
  }
  if (path == "/api/traces") return with_headers({200, "application/json", traces_json(served.root)});
  fs::path file;
  // Before web_api's "/api/": a big trace's overview and windows (trace_window.h).
  if (path.rfind("/api/trace_summary/", 0) == 0 || path.rfind("/api/trace_window/", 0) == 0) {
    const size_t slash = path.find('/', 5);
    const std::string relative = path.substr(slash + 1);
    const int status = resolve(served, relative, file);
    if (status != 200) return text_reply(status, status == 403 ? "forbidden\n" : "not found\n");
    return with_headers(trace_api_reply(file, relative, std::string_view(path).substr(5, slash - 5), query));
  }
  if (path.rfind("/api/", 0) == 0) {
    std::optional<HttpReply> reply = handle_api_request(served, path, query);
    if (!reply) return text_reply(404, "not found\n");
    return with_headers(std::move(*reply));
  }
  if (path.rfind("/static/", 0) == 0) {
    const std::string_view name = std::string_view(path).substr(8);
    for (const char* allowed : kViewerFiles) {
      if (name != allowed) continue;
      std::optional<std::string> contents = read_whole(served.viewer_dir / allowed);
      if (!contents)
        return text_reply(404, "catapult's trace viewer is not installed: apt-get install golang-1.19-src\n");
      return with_headers({200, name.ends_with(".js") ? "text/javascript" : "text/html", std::move(*contents)});
    }
    return text_reply(404, "not found\n");
  }
  if (path.rfind("/viewer/", 0) == 0) {
    const std::string relative = path.substr(8);
    // A data-parallel job's step, its ranks' timelines merged by the API (rank_jobs.h).
    if (find_pair(query, "merged", '&') == "1")
      return with_headers({200, "text/html", render_viewer(relative, false, "/api/merged/" + url_path(relative))});
    const int status = resolve(served, relative, file);
    if (status != 200) return text_reply(status, status == 403 ? "forbidden\n" : "not found\n");
    return with_headers({200, "text/html", render_viewer(relative, use_windowed_viewer(file, query))});
  }
  const int status = resolve(served, std::string_view(path).substr(1), file);
  if (status != 200) return text_reply(status, status == 403 ? "forbidden\n" : "not found\n");
  std::optional<std::string> contents = read_whole(file);
  if (!contents) return text_reply(404, "not found\n");
  const std::string name = file.filename().string();
  const bool gzipped = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
  HttpReply reply{200, gzipped ? "application/gzip" : "application/json", std::move(*contents)};
  // Perfetto's "?url=" links fetch from ui.perfetto.dev: that origin, and no other, may read.
  reply.headers = {{"Access-Control-Allow-Origin", kPerfettoOrigin}, {"Vary", "Origin"}};
  return with_headers(std::move(reply));
}

namespace {

// httplib's pool queues every accepted connection in memory, however many: this one holds at
// most `capacity` waiting and makes the accept loop wait beyond that (the kernel's backlog then
// bounds the rest), so a flood of connections costs a bounded amount of memory.
class BoundedThreadPool : public httplib::TaskQueue {
 public:
  BoundedThreadPool(size_t workers, size_t capacity) : capacity_(capacity) {
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~BoundedThreadPool() override { shutdown(); }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    has_room_.wait(lock, [&] { return queue_.size() < capacity_ || stopping_; });
    queue_.push_back(std::move(fn));
    has_work_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    has_work_.notify_all();
    has_room_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        has_work_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping, and everything queued was served
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      has_room_.notify_one();
      fn();
    }
  }
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable has_work_, has_room_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

struct TraceServer::Impl {
  TraceServerOptions options;
  std::unique_ptr<ServedDirectory> served;
  httplib::Server server;
  int port = -1;
};

TraceServer::TraceServer(TraceServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (!is_loopback_host(options.host) && options.token.empty())
    throw InvalidArgumentError("serving on " + options.host +
                               " (not a loopback address) needs a token: any machine that can reach it could read "
                               "the traces otherwise");
  impl_->served = std::make_unique<ServedDirectory>(options.root, options.token, options.viewer_dir);
  impl_->options = std::move(options);
  Impl& m = *impl_;

  // SO_REUSEADDR (quick restarts) but not httplib's default SO_REUSEPORT, which would let a
  // second server share the port and answer half the requests.
  m.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // httplib gives a connection one worker for its whole life; with its default 8 workers eight
  // clients that send half a request blocked everyone else. More workers, and deadlines on
  // every read and write, so a slow or idle client only holds its own.
  const auto workers = static_cast<size_t>(std::max(1, m.options.worker_threads));
  const auto queued = static_cast<size_t>(std::max(1, m.options.max_queued_connections));
  m.server.new_task_queue = [workers, queued] { return new BoundedThreadPool(workers, queued); };
  m.server.set_payload_max_length(64 * 1024);  // GET and HEAD only: no request needs a body
  const time_t io_secs = std::max(1, m.options.io_timeout_secs);
  m.server.set_read_timeout(io_secs);
  m.server.set_write_timeout(io_secs);
  m.server.set_keep_alive_timeout(io_secs);
  m.server.set_keep_alive_max_count(static_cast<size_t>(std::max(1, m.options.keep_alive_max_requests)));
  // No Access-Control-Allow-Origin by default (files add Perfetto's origin); no Referer to other
  // sites (a URL may hold the token); no content sniffing.
  m.server.set_default_headers(
      {{"Cache-Control", "no-cache"}, {"Referrer-Policy", "no-referrer"}, {"X-Content-Type-Options", "nosniff"}});
  // Every request goes to handle_request, with the raw target (httplib's decoded path would be
  // decoded twice).
  m.server.set_pre_routing_handler([&m](const httplib::Request& request, httplib::Response& response) {
    const std::string cookie = request.get_header_value("Cookie");
    const std::string authorization = request.get_header_value("Authorization");
    HttpReply reply = handle_request(*m.served, {request.method, request.target, cookie, authorization});
    for (auto& [key, value] : reply.headers) response.set_header(key, value);
    response.status = reply.status;
    response.set_content(std::move(reply.body), reply.content_type.c_str());
    return httplib::Server::HandlerResponse::Handled;
  });
  // Without a handler httplib answers an exception with its what() in an EXCEPTION_WHAT header,
  // which tells any client the server's paths. A plain 500 instead.
  m.server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
    response.status = 500;
    response.set_content("internal server error\n", "text/plain");
  });
}

TraceServer::~TraceServer() { stop(); }

int TraceServer::bind() {
  Impl& m = *impl_;
  if (m.port >= 0) return m.port;
  if (m.options.port == 0) {
    m.port = m.server.bind_to_any_port(m.options.host);
  } else {
    m.port = m.server.bind_to_port(m.options.host, m.options.port) ? m.options.port : -1;
  }
  if (m.port < 0) {
    throw UnavailableError("cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) +
                           " (in use, or not an address of this machine)");
  }
  return m.port;
}

void TraceServer::serve() {
  bind();
  impl_->server.listen_after_bind();
}

void TraceServer::stop() { impl_->server.stop(); }

std::string TraceServer::url() const {
  return "http://" + impl_->options.host + ":" + std::to_string(impl_->port) + "/" +
         (impl_->options.token.empty() ? "" : "?token=" + impl_->options.token);
}

}  // namespace stepscope
