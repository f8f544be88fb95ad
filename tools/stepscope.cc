// The stepscope command line.
//
//   stepscope serve DIR [--host 127.0.0.1] [--port 9001]
//       serves the timelines under DIR to a browser (see src/stepscope/tools/trace_server.h)
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "stepscope/tools/trace_server.h"

namespace {

stepscope::TraceServer* g_server = nullptr;

void stop_serving(int) {
  if (g_server) g_server->stop();
}

int serve(const std::string& dir, const std::string& host, int port) {
  stepscope::TraceServer server({.root = dir, .host = host, .port = port});
  const int bound = server.bind();
  std::printf("serving the traces under %s at %s (Ctrl-C stops)\n", dir.c_str(), server.url().c_str());
  std::printf("  from another machine: ssh -L %d:localhost:%d <this host>, then open http://localhost:%d/\n", bound,
              bound, bound);
  if (bound == 9001) std::printf("  or directly: https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/<file>\n");
  std::fflush(stdout);
  g_server = &server;
  std::signal(SIGINT, stop_serving);
  std::signal(SIGTERM, stop_serving);
  server.serve();
  g_server = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepscope: look at the traces and profiles of training runs"};
  app.require_subcommand(1);

  std::string serve_dir, host = "127.0.0.1";
  int port = 9001;
  CLI::App* serve_command = app.add_subcommand("serve", "Serve the timelines under a directory to a browser");
  serve_command->add_option("dir", serve_dir, "Directory of a run (or of many runs)")->required();
  serve_command->add_option("--host", host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  serve_command->add_option("--port", port, "Port (Perfetto's URL links need 9001; 0: any free port)")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
    if (serve_command->parsed()) return serve(serve_dir, host, port);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepscope: %s\n", e.what());
    return 1;
  }
  return 0;
}
