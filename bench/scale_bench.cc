// The profiler's own cost as the graph grows, measured as issue 16 asks: a chain of N tiny ops
// (`x + 1` on 16 floats) in name scopes of 100 nodes, one thread. For each N it prints:
//   untraced          one Session::run, the plan already built (µs and ns an op)
//   traced fresh 1/2  the first and second traced runs, each into a new RunMetadata: the extra
//                     ns an op over the untraced run (target ≤ +100 ns whatever the history),
//                     and the new memory each made resident (net of what was freed meanwhile),
//                     bytes a node: what such a step costs follows it at the machine's price
//                     of a new page (on a VM whose host took the memory back, several times the
//                     price of memory it still backs); their CPU time, user and system, and
//                     the pages they touched first go to stderr; and "kept": the bytes a node
//                     the 2nd keeps until it is read (its recorded stream, what each kept step
//                     writes new)
//   traced reused     traced into the same RunMetadata every step
//   first read        what the first read of a traced step's node entries costs (made then,
//                     from what the step recorded): ns a node, into the reused RunMetadata
//   timeline          the Chrome trace with dataflow and memory: ms, MB, ns an event (≤ 300 ns)
//   add_step          a new Profiler (its model of the graph) and add_step of that step: µs a
//                     node (≤ 1 µs)
//   scope/op/graph/code views   each view's first query (time_and_memory, no output; the view's
//                     structure built then): µs a node (≤ 1 µs)
//   a new page        the system time of the row's timed work over the pages it touched first:
//                     the price every figure of new memory above paid (a VM's host charges
//                     ~1-2 µs for memory it backs, 10-50 µs for memory it took back)
// Figures are medians over repetitions (fewer for big N). A plain program (no Google Benchmark):
//   scale_bench [--max-nodes 1000000] [--sizes 1000,10000] [--markdown] [--only PHASE K] [--pause S]
//               [--expect-traced-steps]
// (--only first K: a new session's first traced run, K times, to profile what a plan's first
// traced step costs; --only kept K: traced into a new RunMetadata each time while the earlier
// ones stay alive, the "fresh 2nd" case K times; --only kept_spaced K: the same with 10
// untraced steps before each, as a user who traces every 10th step and keeps each one; --only
// first_run K: a new session's first run, traced, K times, its plan made in it, as a
// ProfilerHook's or FlightRecorderHook's first step is (each into a RunMetadata kept). Under
// --only, each repetition's CPU time, user and system, and the pages it touched first go to
// stderr with its time.)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/tfprof/option_builder.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/profiler/timeline.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

using Clock = std::chrono::steady_clock;

// --only PHASE: measure that phase alone, --repeat times (for a profiler such as perf).
std::string only_phase;
// --expect-traced-steps: the sessions are told (Session::expect_traced_steps), as ProfilerHook
// and FlightRecorderHook tell theirs.
bool expect_traced_steps = false;
int only_repeat = 1;
bool runs(const char* phase) { return only_phase.empty() || only_phase == phase; }
int reps_for(const char* phase, int reps) { return only_phase == phase ? only_repeat : reps; }
// --pause S: S seconds of sleep before each repetition. A VM whose balloon reports free memory
// to its host gives memory freed back meanwhile (after ~2 s), and mapping it again costs the
// host's fault too: what a user's query meets in a new process or minutes after the last one,
// where back-to-back repetitions reuse memory the host still backs.
double pause_s = 0;
void pause_before_repetition() {
  if (pause_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
}

double seconds_of(const std::function<void()>& body) {
  const auto start = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The bytes of memory this process has resident (/proc/self/statm), 0 where it cannot be read.
double resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long size = 0, resident = 0;
  const bool read = std::fscanf(f, "%ld %ld", &size, &resident) == 2;
  std::fclose(f);
  return read ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

double milliseconds(const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; }

// One repetition of `phase`, timed. Under --only that phase (and always, where `report` says
// so), its CPU time (user and system, of every thread: a thread beside counts) and the pages
// first touched in it (minor faults) go to stderr: on a VM, the system time of the same number
// of faults varies several-fold from run to run, while the user time and the faults do not, so
// they tell the code's cost from the host's.
// The system time and the pages first touched of every timed repetition of the row measured
// now: the row's price of a new page (see Row::page_price_us).
double timed_system_ms = 0;
long timed_pages = 0;
double repetition_seconds(const char* phase, const std::function<void()>& body, bool report = false) {
  report = report || (!only_phase.empty() && only_phase == phase);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const double seconds = seconds_of(body);
  getrusage(RUSAGE_SELF, &after);
  timed_system_ms += milliseconds(after.ru_stime) - milliseconds(before.ru_stime);
  timed_pages += after.ru_minflt - before.ru_minflt;
  if (report) {
    std::fprintf(stderr, "%s: %.4g ms, user %.4g ms, system %.4g ms, %ld pages first touched\n", phase, seconds * 1e3,
                 milliseconds(after.ru_utime) - milliseconds(before.ru_utime),
                 milliseconds(after.ru_stime) - milliseconds(before.ru_stime), after.ru_minflt - before.ru_minflt);
  }
  return seconds;
}

// The median; under --only, every time (sorted) goes to stderr too: this VM's times drift, and
// a before/after comparison wants the spread and the minimum.
double median_of(std::vector<double> times, const char* phase) {
  std::sort(times.begin(), times.end());
  if (!only_phase.empty() && only_phase == phase) {
    std::fprintf(stderr, "%s times (ms):", phase);
    for (double t : times) std::fprintf(stderr, " %.4g", t * 1e3);
    std::fprintf(stderr, "\n");
  }
  return times[times.size() / 2];
}

double median_seconds(const char* phase, int reps, const std::function<void()>& body) {
  std::vector<double> times;
  for (int i = 0; i < reps_for(phase, reps); ++i) {
    pause_before_repetition();
    times.push_back(repetition_seconds(phase, body));
  }
  return median_of(std::move(times), phase);
}

struct Row {
  int64_t nodes = 0;
  double plan_s = 0, untraced_s = 0, fresh1_s = 0, fresh2_s = 0, reused_s = 0, read_s = 0;
  double fresh1_new_bytes = 0, fresh2_new_bytes = 0;  // resident memory each fresh run added
  double recorded_bytes = 0;  // the fresh 2nd's recorded stream: what an unread step keeps
  double timeline_s = 0, timeline_mb = 0;
  int64_t events = 0;
  double add_step_s = 0, scope_s = 0, op_s = 0, graph_s = 0, code_s = 0;
  // The system time of the row's timed repetitions over the pages they touched first: on a VM,
  // the host's price of a new page (~1-2 µs where it backs the memory, 10-50 µs where it took
  // the memory back), which every figure of new memory follows. 0 where too few pages were
  // touched to tell (the system time is counted in scheduler ticks).
  double page_price_us = 0;
};

int64_t count_events(const std::string& json) {
  int64_t n = 0;
  for (size_t at = json.find("\"ph\":"); at != std::string::npos; at = json.find("\"ph\":", at + 5)) ++n;
  return n;
}

Row measure(int64_t n) {
  Row row;
  row.nodes = n;
  timed_system_ms = 0;
  timed_pages = 0;
  const int reps = static_cast<int>(std::clamp<int64_t>(200000 / n, 3, 15));
  Graph g;
  Scope root(g);
  Output x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{16});
  Output one = constant(root.with_op_name("one"), Tensor::from_vector<float>(std::vector<float>(16, 1.0f)));
  Output y = x;
  for (int64_t block = 0; block * 100 < n; ++block) {
    Scope scope = root.with_name_scope("block" + std::to_string(block));
    for (int64_t i = block * 100; i < std::min(n, (block + 1) * 100); ++i) y = add(scope, y, one);
  }
  Session session(g, {.inter_op_threads = 1});
  if (expect_traced_steps) session.expect_traced_steps();
  FeedList feeds{{x, Tensor::from_vector<float>(std::vector<float>(16, 0.0f))}};
  row.plan_s = seconds_of([&] { session.run(feeds, {y}); });  // the plan's build, outside every other timing
  if (runs("untraced")) row.untraced_s = median_seconds("untraced", reps, [&] { session.run(feeds, {y}); });

  RunOptions traced;
  traced.trace_level = TraceLevel::kFullTrace;
  {
    RunMetadata first, second;
    const double before = resident_bytes();
    row.fresh1_s = repetition_seconds("fresh 1st", [&] { session.run(feeds, {y}, {}, traced, &first); }, true);
    const double between = resident_bytes();
    row.fresh2_s = repetition_seconds("fresh 2nd", [&] { session.run(feeds, {y}, {}, traced, &second); }, true);
    row.fresh1_new_bytes = between - before;
    row.fresh2_new_bytes = resident_bytes() - between;
    row.recorded_bytes = static_cast<double>(second.step_stats.num_recorded_bytes());
  }
  if (only_phase == "first") {  // a new session's plan each time, to run its first traced step under a profiler
    std::vector<double> times;
    for (int i = 0; i < only_repeat; ++i) {
      Session again(g, {.inter_op_threads = 1});
      if (expect_traced_steps) again.expect_traced_steps();
      again.run(feeds, {y});
      RunMetadata first;
      pause_before_repetition();
      times.push_back(repetition_seconds("first", [&] { again.run(feeds, {y}, {}, traced, &first); }));
    }
    median_of(std::move(times), "first");  // to stderr; the row keeps the process's first traced run
  }
  if (only_phase == "first_run") {  // a new session's first run traced, its plan made in it (ProfilerHook's first)
    std::vector<RunMetadata> kept(static_cast<size_t>(only_repeat));  // each run's memory new, as a process's first
    std::vector<double> times;
    for (RunMetadata& md : kept) {
      Session again(g, {.inter_op_threads = 1});
      if (expect_traced_steps) again.expect_traced_steps();
      pause_before_repetition();
      times.push_back(repetition_seconds("first_run", [&] { again.run(feeds, {y}, {}, traced, &md); }));
    }
    median_of(std::move(times), "first_run");
  }
  RunMetadata metadata;
  session.run(feeds, {y}, {}, traced, &metadata);
  if (runs("reused"))
    row.reused_s = median_seconds("reused", reps, [&] { session.run(feeds, {y}, {}, traced, &metadata); });
  if (runs("read")) {
    std::vector<double> times;
    for (int i = 0; i < reps_for("read", reps); ++i) {
      session.run(feeds, {y}, {}, traced, &metadata);
      times.push_back(repetition_seconds("read", [&] { (void)metadata.step_stats.dev_stats(); }));
    }
    row.read_s = median_of(std::move(times), "read");
  }
  if (only_phase == "kept") {  // a new RunMetadata each time, the earlier ones kept: "fresh 2nd", K times
    std::vector<RunMetadata> kept(static_cast<size_t>(only_repeat) + 1);
    session.run(feeds, {y}, {}, traced, &kept[0]);
    std::vector<double> times;
    for (int i = 1; i <= only_repeat; ++i) {
      pause_before_repetition();
      times.push_back(
          repetition_seconds("kept", [&] { session.run(feeds, {y}, {}, traced, &kept[static_cast<size_t>(i)]); }));
    }
    median_of(std::move(times), "kept");
  }
  if (only_phase == "kept_spaced") {  // the same, with 10 untraced steps before each traced one
    std::vector<RunMetadata> kept(static_cast<size_t>(only_repeat) + 1);
    session.run(feeds, {y}, {}, traced, &kept[0]);
    std::vector<double> times;
    for (int i = 1; i <= only_repeat; ++i) {
      for (int k = 0; k < 10; ++k) session.run(feeds, {y});
      times.push_back(repetition_seconds(
          "kept_spaced", [&] { session.run(feeds, {y}, {}, traced, &kept[static_cast<size_t>(i)]); }));
    }
    median_of(std::move(times), "kept_spaced");
  }
  if (runs("fresh") && (reps > 1 || !only_phase.empty())) {  // a median too, where there is time for it
    row.fresh2_s = median_seconds("fresh", reps, [&] {
      RunMetadata fresh;
      session.run(feeds, {y}, {}, traced, &fresh);
    });
  }

  const Timeline timeline(metadata.step_stats, &g);
  std::string json;
  if (runs("timeline"))
    row.timeline_s = median_seconds("timeline", reps, [&] {
      json.clear();
      timeline.write_chrome_trace(json, {.show_dataflow = true, .show_memory = true});
    });
  row.timeline_mb = static_cast<double>(json.size()) / 1e6;
  row.events = count_events(json);

  std::ostringstream quiet;
  if (runs("add_step"))
    row.add_step_s = median_seconds("add_step", reps, [&] {
      Profiler profiler(g);
      profiler.set_log(&quiet);
      profiler.add_step(1, metadata);
    });
  // Each view as a user's first query sees it: on a fresh Profiler, so the view's structure
  // (built once per graph) is in the figure.
  const ProfileOptions options =
      ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory()).with_empty_output().build();
  const auto first_query = [&](const char* phase, const std::function<void(const Profiler&)>& view) {
    if (!runs(phase)) return 0.0;
    std::vector<double> times;
    for (int i = 0; i < reps_for(phase, reps); ++i) {
      Profiler profiler(g);
      profiler.set_log(&quiet);
      profiler.add_step(1, metadata);
      pause_before_repetition();
      times.push_back(repetition_seconds(phase, [&] { view(profiler); }));
    }
    return median_of(std::move(times), phase);
  };
  row.scope_s = first_query("scope", [&](const Profiler& p) { p.profile_name_scope(options); });
  row.op_s = first_query("op", [&](const Profiler& p) { p.profile_operations(options); });
  row.graph_s = first_query("graph", [&](const Profiler& p) { p.profile_graph(options); });
  row.code_s = first_query("code", [&](const Profiler& p) { p.profile_code(options); });
  if (timed_pages >= 10000) row.page_price_us = timed_system_ms * 1e3 / static_cast<double>(timed_pages);
  return row;
}

std::string page_price(const Row& r) {
  if (r.page_price_us <= 0) return "–";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f µs", r.page_price_us);
  return text;
}

void print(const Row& r, bool markdown) {
  const double n = static_cast<double>(r.nodes);
  const auto per_node_us = [&](double s) { return s * 1e6 / n; };
  const auto extra_ns = [&](double s) { return (s - r.untraced_s) * 1e9 / n; };
  if (markdown) {
    std::printf(
        "| %lld | %.0f ns/op | %.2f ms (%.0f ns/op) | +%.0f / +%.0f / +%.0f ns/op (new %.0f / %.0f B/node; kept %.0f) "
        "| %.0f ns/node | %.1f ms, %.1f MB, "
        "%.0f ns/event | %.2f µs/node | %.2f / %.2f / %.2f / %.2f µs/node | %s |\n",
        static_cast<long long>(r.nodes), r.plan_s * 1e9 / n, r.untraced_s * 1e3, r.untraced_s * 1e9 / n,
        extra_ns(r.fresh1_s), extra_ns(r.fresh2_s), extra_ns(r.reused_s), r.fresh1_new_bytes / n,
        r.fresh2_new_bytes / n, r.recorded_bytes / n, r.read_s * 1e9 / n, r.timeline_s * 1e3, r.timeline_mb,
        r.timeline_s * 1e9 / static_cast<double>(r.events), per_node_us(r.add_step_s), per_node_us(r.scope_s),
        per_node_us(r.op_s), per_node_us(r.graph_s), per_node_us(r.code_s), page_price(r).c_str());
  } else {
    std::printf(
        "nodes %lld: first run (plan) %.0f ns/op; untraced %.3f ms (%.0f ns/op); traced extra ns/op: fresh 1st %.0f, "
        "fresh 2nd %.0f (new memory %.0f / %.0f B/node, kept %.0f B/node), "
        "reused %.0f; first read %.0f ns/node\n  timeline %.1f ms, %.1f MB, %lld events, %.0f ns/event; add_step "
        "%.2f µs/node\n"
        "  views µs/node: scope %.2f, op %.2f, graph %.2f, code %.2f; a new page: %s\n",
        static_cast<long long>(r.nodes), r.plan_s * 1e9 / n, r.untraced_s * 1e3, r.untraced_s * 1e9 / n,
        extra_ns(r.fresh1_s), extra_ns(r.fresh2_s), r.fresh1_new_bytes / n, r.fresh2_new_bytes / n,
        r.recorded_bytes / n, extra_ns(r.reused_s), r.read_s * 1e9 / n, r.timeline_s * 1e3, r.timeline_mb,
        static_cast<long long>(r.events), r.timeline_s * 1e9 / static_cast<double>(r.events), per_node_us(r.add_step_s),
        per_node_us(r.scope_s), per_node_us(r.op_s), per_node_us(r.graph_s), per_node_us(r.code_s),
        page_price(r).c_str());
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace stepscope

int main(int argc, char** argv) {
  int64_t max_nodes = 1000000;
  std::vector<int64_t> sizes;
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--markdown") {
      markdown = true;
    } else if (arg == "--expect-traced-steps") {
      stepscope::expect_traced_steps = true;
    } else if (arg == "--only" && i + 2 < argc) {
      stepscope::only_phase = argv[++i];
      stepscope::only_repeat = std::atoi(argv[++i]);
    } else if (arg == "--pause" && i + 1 < argc) {
      stepscope::pause_s = std::atof(argv[++i]);
    } else if (arg == "--max-nodes" && i + 1 < argc) {
      max_nodes = std::atoll(argv[++i]);
    } else if (arg == "--sizes" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::atoll(item.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: scale_bench [--max-nodes N] [--sizes N,N,...] [--markdown] [--only PHASE K] [--pause S]\n"
                   "                   [--expect-traced-steps]\n"
                   "  the profiler's cost on a chain of N `x + 1` ops (issue 16's scale table); "
                   "sizes default to 1000, 10000, ... up to --max-nodes (1000000)\n"
                   "  each row gives the new memory (bytes a node) the fresh traced runs made resident, and what\n"
                   "    the 2nd keeps unread (its recorded stream, bytes a node); their CPU\n"
                   "    time, user and system, and the pages they touched first go to stderr (the system time of\n"
                   "    new pages is the host's price on a VM: several times higher on memory it took back);\n"
                   "    the last column is that price over the row's timed work, µs a page\n"
                   "  --only PHASE K: that phase alone, K times (untraced, first, first_run, fresh, kept, reused,\n"
                   "    read, timeline, add_step, scope, op, graph, code; first: a new session's first traced run;\n"
                   "    first_run: a new session's first run, traced, its plan made in it; kept: into a new\n"
                   "    RunMetadata while the earlier ones stay alive; kept_spaced: the same, 10 untraced steps\n"
                   "    before each), to run under a profiler\n"
                   "  --pause S: sleep S seconds before each repetition (memory freed by the last one goes back\n"
                   "    to a VM's host meanwhile, where the host takes it: the cost a query meets in a new process)\n"
                   "  --expect-traced-steps: the sessions are told that steps will be traced (as ProfilerHook and\n"
                   "    FlightRecorderHook tell theirs): a plan's first traced step finds its memory made ahead\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  if (sizes.empty())
    for (int64_t n = 1000; n <= max_nodes; n *= 10) sizes.push_back(n);
  if (markdown) {
    std::printf(
        "| nodes | first run (plan built) | untraced run | traced extra: fresh 1st / fresh 2nd / reused (new memory "
        "of the fresh; kept: the 2nd's stream) | first read "
        "| timeline (dataflow + memory) | Profiler + add_step | views, first query: scope / op / graph / code "
        "| a new page (system time / pages first touched) |\n|---|---|---|---|---|---|---|---|---|\n");
  }
  for (int64_t n : sizes) {
    if (n < 1) {
      std::fprintf(stderr, "scale_bench: --sizes takes positive node counts, not %lld\n", static_cast<long long>(n));
      return 2;
    }
    stepscope::print(stepscope::measure(n), markdown);
  }
  return 0;
}
