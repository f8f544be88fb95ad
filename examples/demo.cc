// The demo: an MLP learns the shipped digits data (8x8 images, 10 classes) through a
// MonitoredTrainingSession with the standard hooks: checkpoints, a step counter and loss
// summaries in --logdir (TensorBoard reads them), a stop at the last step, a loss log, and a
// ProfilerHook tracing a step every 200 (timeline-<step>.json, open them in ui.perfetto.dev or
// chrome://tracing, or run `stepscope serve <logdir>`). It ends with tfprof's scope view of the
// traced steps (time and memory) and the critical path of the last one. Run it again with the
// same --logdir and it restores the last checkpoint and goes on from there.
//
//   demo [--data data/digits.csv.gz] [--logdir runs/demo] [--steps 720] [--threads 2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "stepscope/hooks/basic_session_run_hooks.h"
#include "stepscope/hooks/flight_recorder_hook.h"
#include "stepscope/hooks/monitored_training_session.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/hooks/step_timing_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/profiler/critical_path.h"
#include "stepscope/profiler/tfprof/profiler.h"
#include "stepscope/runtime/session.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

using namespace stepscope;

namespace {

struct Args {
  std::string data = "data/digits.csv.gz";
  std::string logdir = "runs/demo";
  int64_t steps = 720;  // 30 epochs of 24 batches
  int threads = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgumentError("flag " + flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--data")
      a.data = value();
    else if (flag == "--logdir")
      a.logdir = value();
    else if (flag == "--steps")
      a.steps = std::stoll(value());
    else if (flag == "--threads")
      a.threads = std::stoi(value());
    else
      throw InvalidArgumentError("unknown flag " + flag + " (flags: --data, --logdir, --steps, --threads)");
  }
  return a;
}

// Pixels are 0..16: scale them to 0..1.
std::vector<Tensor> scale_pixels(std::vector<Tensor> row) {
  for (float& v : row[0].flat<float>()) v /= 16.0f;
  return row;
}

int run(const Args& args) {
  constexpr int64_t kTrainRows = 1500, kBatch = 64;
  Graph g;
  Scope root(g);
  // One fixed shuffle before the split, so both parts draw from the whole file.
  auto rows = Dataset::csv(args.data).shuffle(1797, /*seed=*/7, /*reshuffle_each_iteration=*/false);
  auto [train_rows, test_rows] = split_dataset(rows, {.left_size = kTrainRows});
  auto train_data = train_rows.map(scale_pixels).shuffle(kTrainRows, 1).batch(kBatch).repeat();
  auto [x, labels] = train_data.make_iterator(root).get_next();

  Output hidden = nn::dense(root.with_name_scope("hidden"), x, 64, nn::Activation::relu);
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 10);
  Scope loss_scope = root.with_name_scope("loss");
  Output loss = reduce_mean(loss_scope, sparse_softmax_cross_entropy_with_logits(loss_scope, labels, logits));
  scalar(root, "loss", loss);
  Variable step = get_or_create_global_step(root);
  Output step_read = get_or_create_global_step_read(g);
  Node* train = GradientDescentOptimizer(0.5).minimize(root, loss, step);
  Scope acc = root.with_name_scope("accuracy");
  Output correct = equal(acc, argmax(acc, logits, 1, DType::kInt32), labels);
  Output accuracy = reduce_mean(acc, cast(acc, correct, DType::kFloat32));

  // The whole test part as one batch, fed in place of the iterator's outputs when evaluating.
  Graph test_graph;
  auto test_next = test_rows.map(scale_pixels).batch(1 << 20).make_iterator(Scope(test_graph)).get_next();
  auto test = Session(test_graph).run({}, {test_next[0], test_next[1]});
  const FeedList test_feeds{{x, test[0]}, {labels, test[1]}};

  std::printf("stepscope demo: MLP 64-64-10 on %s (%lld train, %lld test rows), batch %lld, SGD 0.5, %d threads\n",
              args.data.c_str(), static_cast<long long>(kTrainRows), static_cast<long long>(test[0].dim(0)),
              static_cast<long long>(kBatch), args.threads);
  std::printf(
      "hooks: stop at step %lld, loss log every 200 steps, a timeline every 200 steps, every step's time, a flight "
      "recorder (flight-<step>-<why>.json when a step is 3x the median or fails), and "
      "MonitoredTrainingSession's own: checkpoints every 250 steps, step counter every 200, summaries every "
      "50, into %s\n",
      static_cast<long long>(args.steps), args.logdir.c_str());

  StopAtStepHook stop({.last_step = args.steps});
  LoggingTensorHook log_loss({.tensors = {{"step", step_read}, {"loss", loss}}, .every_n_iter = 200});
  ProfilerHook profiler(
      {.save_steps = 200, .output_dir = args.logdir, .show_memory = true, .record_step_timing = true});
  // Every step's time as scalars (wall, input, ops, idle, hooks), and every step traced into a
  // ring of the last 10 that is written out when a step is slow, a run fails, or on `kill -USR1`.
  StepTimingHook timing({.output_dir = args.logdir});
  FlightRecorderHook flight({.output_dir = args.logdir, .show_memory = true});
  MonitoredSession sess = MonitoredTrainingSession(g, {.checkpoint_dir = args.logdir,
                                                       .hooks = {&stop, &log_loss, &profiler, &timing, &flight},
                                                       .save_checkpoint_steps = 250,
                                                       .save_summaries_steps = 50,
                                                       .log_step_count_steps = 200,
                                                       .session_options = {.inter_op_threads = args.threads}});
  auto evaluate = [&] {
    float value = 0;
    sess.run_step_fn(
        [&](StepContext& context) { value = context.session().run(accuracy, test_feeds).scalar_value<float>(); });
    return value;
  };
  int64_t first_step = -1, last_step = 0, runs = 0;
  const auto start = std::chrono::steady_clock::now();
  while (!sess.should_stop()) {
    FetchResult result = sess.run(Fetch::list({train, loss, step_read}));
    if (result.empty()) break;                                   // the input ran out
    last_step = result[2].tensor().scalar_value<int64_t>() + 1;  // the read is the pre-increment value
    if (first_step < 0) first_step = last_step - 1;
    if (++runs % 200 == 0)
      std::printf("  step %5lld  test accuracy %.2f%%\n", static_cast<long long>(last_step), 100 * evaluate());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const float test_accuracy = evaluate();
  if (first_step > 0) std::printf("restored from the checkpoint at step %lld\n", static_cast<long long>(first_step));
  std::printf("trained %lld steps in %.2f s (%.1f us/step); global step %lld; test accuracy %.2f%%\n",
              static_cast<long long>(runs), seconds, 1e6 * seconds / std::max<int64_t>(runs, 1),
              static_cast<long long>(last_step), 100 * test_accuracy);
  sess.close();

  // Where the traced steps' time and memory went, by name scope, and what bounded the last one.
  if (const Profiler* traced = profiler.profiler(); traced && !traced->steps().empty()) {
    std::printf("\ntfprof scope view of the %zu traced steps (average):\n", traced->steps().size());
    const GraphProfile scopes = traced->profile_name_scope(ProfileOptionBuilder(ProfileOptionBuilder::time_and_memory())
                                                               .with_max_depth(3)
                                                               .select({"micros", "bytes"})
                                                               .order_by("micros")
                                                               .with_empty_output()
                                                               .build());
    std::printf("%s", scopes.text().c_str());
    const CriticalPath path = critical_path(g, traced->step_stats(traced->steps().back()));
    std::printf("\nstep %lld: %s", static_cast<long long>(traced->steps().back()),
                path.to_text({.max_rows = 12}).c_str());
  }

  std::printf("files in %s:\n", args.logdir.c_str());
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(args.logdir)) files.push_back(entry.path().filename());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) std::printf("  %s\n", file.c_str());
  return test_accuracy > 0.9 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 2;
  }
}
