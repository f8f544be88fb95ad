// Seed 002's story (a 2022 blog post on tf.train.ProfilerHook), in C++: an Estimator trained with
// train_and_evaluate, its TrainSpec carrying an early-stopping hook (stop_if_no_increase_hook on
// the eval metric) and a ProfilerHook that saves a timeline every 100 steps into
// ./timeline_track; training runs until the early-stopping hook stops it, and the
// timeline-<step>.json files are then opened in chrome://tracing (Load) or ui.perfetto.dev.
//
//   estimator_story [--data data/digits.csv.gz] [--throttle_secs 0]
//
// It works in the current directory: ./model_dir (checkpoints, eval/) and ./timeline_track
// (timelines, run metadata, a tfprof profile), both removed first so that every run starts over.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "stepscope/hooks/estimator.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

using namespace stepscope;
namespace fs = std::filesystem;

namespace {

// The blog's configuration_params / CONFIG_TRAIN, with values for the digits data. Early stopping
// must stop this run within a couple of thousand steps: evaluations come with every checkpoint
// (every 50 steps), the hook checks every 50 steps from step 300 on, and 300 steps without a
// better held-out accuracy stop training (the MLP reaches its best accuracy in a few hundred steps).
constexpr int64_t kSaveCheckpointsSteps = 50;
constexpr int64_t kMaxStepsWithoutIncrease = 300;
constexpr int64_t kMinSteps = 300;
constexpr int64_t kRunEverySteps = 50;
constexpr int64_t kBatchSize = 64;
// A safety net only: the early-stopping hook is what ends this run.
constexpr int64_t kMaxSteps = 5000;

struct Args {
  std::string data = "data/digits.csv.gz";
  // The blog evaluates at most every 30 seconds (throttle_secs=30). This whole run takes a few
  // seconds, so with 30 only the first checkpoint would ever be evaluated and the early-stopping
  // hook, which reads the evaluations, would never see the metric stop increasing. 0 evaluates
  // after every checkpoint; pass --throttle_secs 30 for the blog's schedule on a long run.
  double throttle_secs = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw InvalidArgumentError("flag " + flag + " needs a value");
    if (flag == "--data")
      a.data = argv[++i];
    else if (flag == "--throttle_secs")
      a.throttle_secs = std::stod(argv[++i]);
    else
      throw InvalidArgumentError("unknown flag " + flag + " (flags: --data, --throttle_secs)");
  }
  return a;
}

// model_fn: the MLP of examples/demo.cc (64 relu units, 10 logits, SGD 0.5), with the held-out
// accuracy as its eval metric.
EstimatorSpec model_fn(Output features, Output labels, ModeKeys mode, const Scope& root) {
  Output hidden = nn::dense(root.with_name_scope("hidden"), features, 64, nn::Activation::relu, {.seed = 1});
  Output logits = nn::dense(root.with_name_scope("logits"), hidden, 10, nn::Activation::none, {.seed = 2});
  EstimatorSpec spec{.mode = mode};
  Scope loss_scope = root.with_name_scope("loss");
  spec.loss = reduce_mean(loss_scope, sparse_softmax_cross_entropy_with_logits(loss_scope, labels, logits));
  if (mode == ModeKeys::TRAIN)
    spec.train_op = GradientDescentOptimizer(0.5).minimize(root, spec.loss, get_global_step(root.graph()));
  Scope acc = root.with_name_scope("accuracy");
  spec.eval_metric_ops["accuracy"] =
      reduce_mean(acc, cast(acc, equal(acc, argmax(acc, logits, 1, DType::kInt32), labels), DType::kFloat32));
  return spec;
}

// Pixels are 0..16: scale them to 0..1.
std::vector<Tensor> scale_pixels(std::vector<Tensor> row) {
  for (float& v : row[0].flat<float>()) v /= 16.0f;
  return row;
}

int run(const Args& args) {
  for (const char* dir : {"model_dir", "timeline_track"}) {
    if (fs::exists(dir)) {
      fs::remove_all(dir);
      std::printf("removed ./%s of an earlier run\n", dir);
    }
  }

  // The blog's input_fn(path, mode, batch_size): here one file, split once (after one fixed
  // shuffle, so both parts draw from the whole file) into 1500 rows to train on and 297 held out.
  const std::pair<Dataset, Dataset> parts =
      split_dataset(Dataset::csv(args.data).map(scale_pixels).shuffle(1797, /*seed=*/7, false), {.left_size = 1500});
  auto input_fn = [&parts](const std::string& mode, int64_t batch_size) -> InputFn {
    if (mode == "train")
      return [rows = parts.first, batch_size](const Scope&) -> Input {
        return rows.shuffle(1500, 1).batch(batch_size).repeat();
      };
    return [rows = parts.second, batch_size](const Scope&) -> Input { return rows.batch(batch_size); };
  };

  Estimator model(model_fn, {.model_dir = "./model_dir", .save_checkpoints_steps = kSaveCheckpointsSteps});

  // --- the blog's train_and_eval(model), line for line ---
  ProfilerHook timeline_hook({.save_steps = 100, .output_dir = "./timeline_track"});

  // The hook's two log lines ("No increase in metric ..." and "Requesting early stopping at
  // global step N") are printed and kept, to say at the end why training stopped.
  std::vector<std::string> early_stopping_log;
  HookLog early_stopping_lines{.info = [&](const std::string& line) {
    std::fprintf(stderr, "INFO: %s\n", line.c_str());
    early_stopping_log.push_back(line);
  }};
  auto hook = stop_if_no_increase_hook(model, "accuracy",
                                       /*max_steps_without_increase=*/kMaxStepsWithoutIncrease,
                                       {.min_steps = kMinSteps,  // stop is never requested before this step
                                        .run_every_secs = std::nullopt,
                                        .run_every_steps = kRunEverySteps,
                                        .log = early_stopping_lines});

  TrainSpec train_spec{
      .input_fn = input_fn("train", kBatchSize), .max_steps = kMaxSteps, .hooks = {hook.get(), &timeline_hook}};

  // 297 held-out rows: 3 batches of 99 cover them all, equally weighted (evaluate() averages the
  // per-batch accuracies). The blog uses batches of 128.
  EvalSpec eval_spec{.input_fn = input_fn("eval", 99), .steps = 3, .throttle_secs = args.throttle_secs};

  std::printf("estimator_story: MLP 64-64-10 on %s, batch %lld; checkpoints (and evaluations) every %lld steps\n",
              args.data.c_str(), static_cast<long long>(kBatchSize), static_cast<long long>(kSaveCheckpointsSteps));
  std::printf(
      "hooks: stop_if_no_increase_hook(\"accuracy\", max_steps_without_increase=%lld, min_steps=%lld, "
      "run_every_steps=%lld), ProfilerHook(save_steps=100, output_dir=./timeline_track)\n",
      static_cast<long long>(kMaxStepsWithoutIncrease), static_cast<long long>(kMinSteps),
      static_cast<long long>(kRunEverySteps));
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const auto last_eval = train_and_evaluate(model, train_spec, eval_spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // --- end of the blog's code ---

  const int64_t final_step = model.global_step_from_checkpoint();
  std::printf("\ntrain_and_evaluate returned after %.2f s at global step %lld", seconds,
              static_cast<long long>(final_step));
  if (last_eval) std::printf(" (last evaluation: accuracy %.4f)", last_eval->at("accuracy"));
  std::printf("\n");

  // When and why it stopped: the best evaluation and the hook's own words.
  const auto records = read_eval_metrics(model.eval_dir());
  int64_t best_step = -1;
  double best = -1;
  for (const auto& [step, metrics] : records) {
    if (metrics.at("accuracy") > best) {
      best = metrics.at("accuracy");
      best_step = step;
    }
  }
  std::printf("%zu evaluations; best accuracy %.4f at global step %lld\n", records.size(), best,
              static_cast<long long>(best_step));
  const bool stopped_early =
      std::any_of(early_stopping_log.begin(), early_stopping_log.end(),
                  [](const std::string& s) { return s.rfind("Requesting early stopping at global step ", 0) == 0; });
  if (stopped_early) {
    std::printf("stopped by the early-stopping hook:\n");
    for (const std::string& line : early_stopping_log) std::printf("  %s\n", line.c_str());
  } else {
    std::printf("NOT stopped by the early-stopping hook: training ran to max_steps=%lld\n",
                static_cast<long long>(kMaxSteps));
  }

  // The timelines, in step order, and how to look at them.
  std::vector<std::pair<int64_t, std::string>> timelines;
  for (const auto& entry : fs::directory_iterator("timeline_track")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("timeline-", 0) == 0 && name.ends_with(".json"))
      timelines.emplace_back(std::stoll(name.substr(9)), name);
  }
  std::sort(timelines.begin(), timelines.end());
  std::printf(
      "\n%zu timelines in ./timeline_track (one traced step every 100; run_metadata-<step>.pb and a tfprof "
      "profile beside them):\n",
      timelines.size());
  for (const auto& [step, name] : timelines)
    std::printf("  timeline_track/%s  (%lld bytes)\n", name.c_str(),
                static_cast<long long>(fs::file_size(fs::path("timeline_track") / name)));
  std::printf(
      "open one in chrome://tracing (Load) or https://ui.perfetto.dev (Open trace file), or serve them all:\n"
      "  stepscope serve timeline_track      # then http://127.0.0.1:9001/ (ssh -L 9001:localhost:9001 from afar)\n"
      "and look at the profile from the command line:\n"
      "  stepscope prof scope --profile timeline_track/profile -max_depth 2\n");
  return stopped_early && !timelines.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // in order with the hooks' log lines on stderr
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "estimator_story: %s\n", e.what());
    return 2;
  }
}
