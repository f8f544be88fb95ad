// A conv net with batch normalization and dropout on Fashion-MNIST (Debian's dataset-fashion-mnist:
// 60,000 training and 10,000 test images of clothes, 28x28 grey, 10 classes), trained by an
// Estimator with a ProfilerHook on: every --profile_steps steps a timeline of a real step (tens
// of MB of activations) goes to ./fashion_timelines. Prints the test accuracy over all 10,000
// test images and exits 1 unless it is above --min_accuracy.
//
//   fashion_mnist_cnn [--epochs 6] [--min_accuracy 0.9]          # the full run: 91.3%, 80 s
//   fashion_mnist_cnn --steps 300 --min_accuracy 0.6 --profile_steps 100   # the short one ctest runs
//   fashion_mnist_cnn --dir /usr/share/datasets/fashion-mnist
//
// The model (tf.layers names): conv2d 32 3x3 SAME -> batch_normalization -> relu -> max_pool 2x2
// -> conv2d 64 3x3 SAME -> batch_normalization -> relu -> max_pool 2x2 -> dense 128 relu ->
// dropout 0.3 -> dense 10. Adam 1e-3, batch 64; the batch norms' moving averages are updated
// through the UPDATE_OPS collection, which the train op depends on, as in TF.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "stepscope/hooks/estimator.h"
#include "stepscope/hooks/profiler_hook.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/dataset.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/metrics.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

using namespace stepscope;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string dir = "/usr/share/datasets/fashion-mnist";
  double epochs = 6;
  int64_t steps = 0;  // > 0: train this many steps instead of --epochs
  double min_accuracy = 0.9;
  int64_t profile_steps = 500;
  int64_t batch = 64;
};

// The flags (CLI11: --help lists them); a bad value exits 2 with CLI11's message.
const CLI::Validator kPositive(
    [](std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return end != v.c_str() && *end == '\0' && x > 0 ? std::string() : "must be a positive number, got " + v;
    },
    "POSITIVE");

std::optional<Args> parse(int argc, char** argv, int& exit_code) {
  Args a;
  CLI::App app(
      "Trains a batch-norm + dropout conv net on Fashion-MNIST and reports the accuracy on the 10,000 "
      "test images (exit 1 below --min_accuracy).");
  app.add_option("--dir", a.dir,
                 "folder of {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (Debian: apt-get install "
                 "dataset-fashion-mnist)")
      ->capture_default_str();
  auto* epochs = app.add_option("--epochs", a.epochs, "passes over the 60,000 training images")
                     ->capture_default_str()
                     ->check(kPositive);
  app.add_option("--steps", a.steps, "training steps (instead of --epochs)")->check(kPositive)->excludes(epochs);
  app.add_option("--min_accuracy", a.min_accuracy, "test accuracy to reach")->capture_default_str();
  app.add_option("--profile_steps", a.profile_steps, "a timeline every this many steps")
      ->capture_default_str()
      ->check(kPositive);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e) == 0 ? 0 : 2;
    return std::nullopt;
  }
  return a;
}

std::vector<Tensor> scale_pixels(std::vector<Tensor> row) {
  for (float& v : row[0].flat<float>()) v /= 255.0f;
  return row;
}

EstimatorSpec cnn_model_fn(Output pixels, Output labels, ModeKeys mode, const Scope& root) {
  const bool training = mode == ModeKeys::TRAIN;
  Output x = reshape(root, pixels, {-1, 28, 28, 1});
  int64_t seed = 1;
  for (int64_t filters : {32, 64}) {
    const Scope block = root.with_name_scope("conv" + std::to_string(filters));
    x = nn::conv2d(block, x, filters, {3, 3},
                   {.padding = "SAME", .use_bias = false, .seed = static_cast<uint64_t>(seed++)});
    x = nn::batch_normalization(block.with_name_scope("batch_normalization"), x, {.training = training});
    x = relu(block, x);
    x = max_pool(block, x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  }
  x = reshape(root, x, {-1, 7 * 7 * 64});
  x = nn::dense(root.with_name_scope("dense"), x, 128, nn::Activation::relu, {.seed = 3});
  x = nn::dropout(root.with_name_scope("dropout"), x, 0.3, {.seed = 4, .training = training});
  const Output logits = nn::dense(root.with_name_scope("logits"), x, 10, nn::Activation::none, {.seed = 5});

  EstimatorSpec spec{.mode = mode};
  const Scope loss = root.with_name_scope("loss");
  spec.loss = reduce_mean(loss, sparse_softmax_cross_entropy_with_logits(loss, labels, logits));
  if (training)
    spec.train_op = AdamOptimizer(1e-3).minimize(root.with_control_dependencies(get_update_ops(root.graph())),
                                                 spec.loss, get_global_step(root.graph()));
  spec.eval_metric_ops["accuracy"] = metrics::accuracy(root, labels, argmax(root, logits, 1, DType::kInt32));
  return spec;
}

int run(const Args& args) {
  const fs::path dir(args.dir);
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    if (!fs::exists(dir / name))
      throw NotFoundError("Fashion-MNIST file " + (dir / name).string() +
                          " not found: install Debian's dataset-fashion-mnist (scripts/install-deps.sh does) or "
                          "pass --dir");
  }
  for (const char* old : {"fashion_model_dir", "fashion_timelines"})
    if (fs::exists(old)) fs::remove_all(old);
  const auto load_start = std::chrono::steady_clock::now();
  const Dataset train_images =
      Dataset::from_idx((dir / "train-images-idx3-ubyte.gz").string(), (dir / "train-labels-idx1-ubyte.gz").string())
          .map(scale_pixels);
  const Dataset test_images =
      Dataset::from_idx((dir / "t10k-images-idx3-ubyte.gz").string(), (dir / "t10k-labels-idx1-ubyte.gz").string())
          .map(scale_pixels);
  std::printf("fashion_mnist_cnn: read %s in %.1f s\n", args.dir.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  const int64_t steps = args.steps > 0 ? args.steps : static_cast<int64_t>(args.epochs * 60000 / args.batch);
  Estimator model(cnn_model_fn, {.model_dir = "./fashion_model_dir", .save_checkpoints_steps = steps});
  // record_step_timing: every step's time in the profile too (`stepscope prof timing`, serve).
  ProfilerHook profiler({.save_steps = args.profile_steps,
                         .output_dir = "./fashion_timelines",
                         .show_memory = true,
                         .record_step_timing = true});
  auto train_input = [&](const Scope&) -> Input { return train_images.shuffle(10000, 1).batch(args.batch).repeat(); };
  auto test_input = [&](const Scope&) -> Input { return test_images.batch(1000); };

  std::printf("training %lld steps of %lld images (%.2f epochs), a timeline every %lld steps\n",
              static_cast<long long>(steps), static_cast<long long>(args.batch),
              static_cast<double>(steps * args.batch) / 60000.0, static_cast<long long>(args.profile_steps));
  const auto start = std::chrono::steady_clock::now();
  model.train(train_input, {.hooks = {&profiler}, .max_steps = steps});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto result = model.evaluate(test_input, {.steps = std::nullopt});
  const double accuracy = result.at("accuracy");
  int timelines = 0;
  for (const auto& entry : fs::directory_iterator("fashion_timelines"))
    timelines += entry.path().filename().string().rfind("timeline-", 0) == 0;
  std::printf(
      "CNN (conv32-BN-pool, conv64-BN-pool, dense128, dropout) on Fashion-MNIST: %lld steps in %.1f s "
      "(%.1f steps/s), test accuracy %.2f%% on 10000 images (loss %.4f); %d timelines in ./fashion_timelines\n",
      static_cast<long long>(steps), seconds, static_cast<double>(steps) / seconds, 100 * accuracy, result.at("loss"),
      timelines);
  return accuracy > args.min_accuracy ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int exit_code = 0;
  const std::optional<Args> args = parse(argc, argv, exit_code);
  if (!args) return exit_code;
  try {
    return run(*args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist_cnn: %s\n", e.what());
    return 2;
  }
}
