#include "stepscope/tools/trace_server.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <tuple>

#include "stepscope/base/error.h"
#include "stepscope/profiler/json_out.h"

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

std::string human_bytes(int64_t bytes) {
  char buffer[32];
  if (bytes >= 1000000)
    std::snprintf(buffer, sizeof buffer, "%.1f MB", bytes / 1e6);
  else if (bytes >= 1000)
    std::snprintf(buffer, sizeof buffer, "%.1f KB", bytes / 1e3);
  else
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  return buffer;
}

// Fetches the file, opens ui.perfetto.dev and hands it the bytes once it answers PING with PONG
// (Perfetto's documented postMessage protocol; its channel is not buffered).
constexpr const char* kOpenInPerfettoScript = R"js(
const PERFETTO = 'https://ui.perfetto.dev';
async function openInPerfetto(path) {
  const status = document.getElementById('status');
  status.textContent = 'fetching ' + path + ' ...';
  const response = await fetch(path);
  if (!response.ok) { status.textContent = path + ': HTTP ' + response.status; return; }
  const buffer = await response.arrayBuffer();
  const perfetto = window.open(PERFETTO + '/#!/');
  if (!perfetto) { status.textContent = 'the browser blocked the Perfetto window: allow pop-ups for this page'; return; }
  const ping = setInterval(() => perfetto.postMessage('PING', PERFETTO), 50);
  window.addEventListener('message', function onMessage(event) {
    if (event.source !== perfetto || event.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', onMessage);
    perfetto.postMessage({perfetto: {buffer: buffer, title: path, fileName: path.split('/').pop()}}, PERFETTO);
    status.textContent = 'opened ' + path + ' in Perfetto';
  });
}
)js";

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

std::string render_trace_index(const std::vector<TraceFile>& files, const std::string& title) {
  std::ostringstream html;
  html << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stepscope: " << html_escape(title)
       << "</title>\n<style>body{font-family:sans-serif;margin:2em}"
       << "table{border-collapse:collapse}td,th{padding:.3em 1em;text-align:left;border-bottom:1px solid #ddd}"
       << "td.n{text-align:right}</style>\n<script>" << kOpenInPerfettoScript << "</script></head><body>\n"
       << "<h1>Traces in " << html_escape(title) << "</h1>\n";
  if (files.empty()) {
    html << "<p>No trace files yet (timeline-&lt;step&gt;.json appear as the ProfilerHook writes them; reload "
            "this page).</p>\n";
  } else {
    html << "<table><tr><th>file</th><th>step</th><th>size</th><th></th><th></th></tr>\n";
    for (const TraceFile& f : files) {
      const std::string href = url_path(f.path);
      html << "<tr><td>" << html_escape(f.path) << "</td><td class=n>" << (f.step >= 0 ? std::to_string(f.step) : "")
           << "</td><td class=n>" << human_bytes(f.bytes) << "</td><td><button onclick=\"openInPerfetto('"
           << html_escape(href) << "')\">open in Perfetto</button></td><td><a href=\"" << html_escape(href)
           << "\" download>download</a> (for chrome://tracing's Load)</td></tr>\n";
    }
    html << "</table>\n";
  }
  html << "<p id=\"status\"></p>\n<p>Machine-readable list: <a href=\"/api/traces\">/api/traces</a>.</p>\n"
       << "</body></html>\n";
  return html.str();
}

struct TraceServer::Impl {
  TraceServerOptions options;
  fs::path root;
  httplib::Server server;
  int port = -1;
};

TraceServer::TraceServer(TraceServerOptions options) : impl_(std::make_unique<Impl>()) {
  require_directory(options.root);
  impl_->options = std::move(options);
  impl_->root = fs::canonical(impl_->options.root);
  Impl& m = *impl_;

  // SO_REUSEADDR (quick restarts) but not httplib's default SO_REUSEPORT, which would let a
  // second server share the port and answer half the requests.
  m.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  m.server.set_default_headers({{"Access-Control-Allow-Origin", "*"}, {"Cache-Control", "no-cache"}});
  m.server.Get("/", [&m](const httplib::Request&, httplib::Response& response) {
    response.set_content(render_trace_index(list_trace_files(m.root), m.options.root.string()), "text/html");
  });
  m.server.Get("/api/traces", [&m](const httplib::Request&, httplib::Response& response) {
    std::string json = "[";
    for (const TraceFile& f : list_trace_files(m.root)) {
      if (json.size() > 1) json += ",";
      json += "{\"path\":" + json_literal(f.path) + ",\"bytes\":" + std::to_string(f.bytes) +
              ",\"step\":" + std::to_string(f.step) + ",\"modified\":" + std::to_string(f.modified_unix_secs) + "}";
    }
    response.set_content(json + "]", "application/json");
  });
  m.server.Get(R"(/(.+))", [&m](const httplib::Request& request, httplib::Response& response) {
    // Only files inside the served directory: no "..", no absolute paths, no links out of it.
    const fs::path relative = fs::path(request.matches[1].str()).lexically_normal();
    std::error_code error;
    const fs::path file = fs::weakly_canonical(m.root / relative, error);
    const auto [root_end, file_it] = std::mismatch(m.root.begin(), m.root.end(), file.begin(), file.end());
    if (error || relative.is_absolute() || root_end != m.root.end() || !fs::is_regular_file(file, error)) {
      response.status = 404;
      response.set_content("not found: " + request.matches[1].str() + "\n", "text/plain");
      return;
    }
    std::ifstream in(file, std::ios::binary);
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = file.filename().string();
    const bool gzipped = name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
    response.set_content(std::move(contents), gzipped ? "application/gzip" : "application/json");
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
  return "http://" + impl_->options.host + ":" + std::to_string(impl_->port) + "/";
}

}  // namespace stepscope
