// Soak test: the demo's MLP trained for many steps with every hook on (ProfilerHook tracing
// every --save-steps steps, checkpoints, summaries, the step counter, a loss log, a NaN check),
// sampling the process's resident memory (/proc/self/statm) every --sample-every steps. After
// --warmup steps the memory must stay flat: the program prints the samples and exits 1 when the
// last samples' RSS is more than --tolerance (a fraction) above the RSS at the end of the
// warm-up. Catches what grows with the number of steps or traces (a profile that keeps every
// step, a list of every file written, ...).
//
//   soak [--data data/digits.csv.gz] [--logdir soak-run] [--steps 3000] [--save-steps 1]
//        [--sample-every 100] [--warmup 1000] [--tolerance 0.15] [--threads 2]
//        [--no-profile] [--no-run-metadata]
//
// The defaults are the short run ctest does (3,000 steps, a trace every step, ~12 s): 19 KB
// more per trace would be +240% there, and even 1.5 KB more +19%, while what a trace every step
// legitimately adds (the event writer's set of used run-metadata tags, as TensorFlow's, and
// allocator noise) stays near 5%; scripts/soak.sh runs the long one (100k steps, a trace every
// 100, 1%).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

using namespace stepscope;

namespace {

struct Args {
  std::string data = "data/digits.csv.gz";
  std::string logdir = "soak-run";
  int64_t steps = 3000;
  int64_t save_steps = 1;
  int64_t sample_every = 100;
  int64_t warmup = 1000;
  double tolerance = 0.15;
  int threads = 2;
  bool profile = true, run_metadata = true;  // --no-profile, --no-run-metadata: to find what grows
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgumentError("flag " + flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--data") a.data = value();
    else if (flag == "--logdir") a.logdir = value();
    else if (flag == "--steps") a.steps = std::stoll(value());
    else if (flag == "--save-steps") a.save_steps = std::stoll(value());
    else if (flag == "--sample-every") a.sample_every = std::stoll(value());
    else if (flag == "--warmup") a.warmup = std::stoll(value());
    else if (flag == "--tolerance") a.tolerance = std::stod(value());
    else if (flag == "--threads") a.threads = std::stoi(value());
    else if (flag == "--no-profile") a.profile = false;
    else if (flag == "--no-run-metadata") a.run_metadata = false;
    else
      throw InvalidArgumentError("unknown flag " + flag +
                                 " (flags: --data, --logdir, --steps, --save-steps, --sample-every, --warmup, "
                                 "--tolerance, --threads, --no-profile, --no-run-metadata)");
  }
  if (a.sample_every < 1 || a.warmup < 0 || a.warmup >= a.steps)
    throw InvalidArgumentError("need --sample-every >= 1 and 0 <= --warmup < --steps");
  return a;
}

// Resident set size in bytes (second field of /proc/self/statm, in pages).
int64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

std::vector<Tensor> scale_pixels(std::vector<Tensor> row) {
  for (float& v : row[0].flat<float>()) v /= 16.0f;
  return row;
}

int run(const Args& args) {
  std::filesystem::remove_all(args.logdir);  // a fresh run each time: no restore
  Graph g;
  Scope root(g);
  auto data = Dataset::csv(args.data).map(scale_pixels).shuffle(1797, 1).batch(64).repeat();
  auto [x, labels] = data.make_iterator(root).get_next();
  Output hidden = nn::dense(root.with_name_scope("hidden"), x, 64, nn::Activation::relu);
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 10);
  Scope loss_scope = root.with_name_scope("loss");
  Output loss = reduce_mean(loss_scope, sparse_softmax_cross_entropy_with_logits(loss_scope, labels, logits));
  scalar(root, "loss", loss);
  Variable step = get_or_create_global_step(root);
  Output step_read = get_or_create_global_step_read(g);
  Node* train = GradientDescentOptimizer(0.1).minimize(root, loss, step);

  int64_t traces = 0, log_lines = 0;
  const HookLog quiet{.info = [&](const std::string&) { ++traces; },
                      .warning = [](const std::string& s) { std::fprintf(stderr, "warning: %s\n", s.c_str()); },
                      .error = [](const std::string& s) { std::fprintf(stderr, "error: %s\n", s.c_str()); }};
  StopAtStepHook stop({.last_step = args.steps});
  LoggingTensorHook log_loss({.tensors = {{"step", step_read}, {"loss", loss}},
                              .every_n_iter = 500,
                              .log = {.info = [&](const std::string&) { ++log_lines; }}});
  NanTensorHook nan({.loss_tensor = loss});
  ProfilerHook profiler({.save_steps = args.save_steps,
                         .output_dir = args.logdir,
                         .show_memory = true,
                         .max_files_to_keep = 5,
                         .save_run_metadata = args.run_metadata,
                         .save_profile = args.profile,
                         .log = quiet});
  MonitoredSession sess = MonitoredTrainingSession(g, {.checkpoint_dir = args.logdir,
                                                       .hooks = {&stop, &log_loss, &nan, &profiler},
                                                       .save_checkpoint_steps = 1000,
                                                       .save_summaries_steps = 100,
                                                       .log_step_count_steps = 1000,
                                                       .session_options = {.inter_op_threads = args.threads}});

  std::vector<std::pair<int64_t, int64_t>> samples;  // (step, rss)
  std::vector<int64_t> heap;                           // malloc's bytes in use at each sample
  int64_t runs = 0;
  float last_loss = 0;
  const auto start = std::chrono::steady_clock::now();
  while (!sess.should_stop()) {
    FetchResult result = sess.run(Fetch::list({train, loss}));
    if (result.empty()) break;
    last_loss = result[1].tensor().scalar_value<float>();
    if (++runs % args.sample_every == 0) {
      samples.emplace_back(runs, rss_bytes());
      const struct mallinfo2 m = mallinfo2();
      heap.push_back(static_cast<int64_t>(m.uordblks + m.hblkhd));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sess.close();

  // The baseline: the first sample at or after the warm-up; the verdict: the largest sample
  // after it (memory that grows with the steps ends highest, whatever the noise on the way).
  size_t base = 0;
  while (base < samples.size() && samples[base].first < args.warmup) ++base;
  if (base >= samples.size()) throw InvalidArgumentError("no sample after the warm-up: lower --warmup");
  int64_t highest = samples[base].second;
  for (size_t i = base; i < samples.size(); ++i) highest = std::max(highest, samples[i].second);
  const double growth = static_cast<double>(highest - samples[base].second) / static_cast<double>(samples[base].second);
  const bool flat = growth <= args.tolerance;

  std::printf("soak: %lld steps in %.1f s (%.0f us/step), %lld traces, final loss %.4f\n",
              static_cast<long long>(runs), seconds, 1e6 * seconds / std::max<int64_t>(runs, 1),
              static_cast<long long>(traces), last_loss);
  std::printf("rss after warm-up (step %lld): %.2f MB; highest since: %.2f MB; growth %.2f%% (limit %.2f%%): %s\n",
              static_cast<long long>(samples[base].first), samples[base].second / 1e6, highest / 1e6, 100 * growth,
              100 * args.tolerance, flat ? "flat" : "GROWING");
  if (!flat || samples.size() <= 40) {
    for (size_t i = 0; i < samples.size(); ++i)
      std::printf("  step %7lld  rss %10lld  malloc in use %10lld\n", static_cast<long long>(samples[i].first),
                  static_cast<long long>(samples[i].second), static_cast<long long>(heap[i]));
  }
  if (runs != args.steps || traces == 0 || log_lines == 0) {
    std::fprintf(stderr, "soak: expected %lld steps with traces and log lines, got %lld steps, %lld traces, %lld log lines\n",
                 static_cast<long long>(args.steps), static_cast<long long>(runs), static_cast<long long>(traces),
                 static_cast<long long>(log_lines));
    return 1;
  }
  return flat ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak: %s\n", e.what());
    return 2;
  }
}
