// The Estimator loops on the shipped digits data: train / evaluate / resume, train_and_evaluate's
// evaluation schedule, and the early-stopping hooks (tf.estimator.experimental semantics).
#include "stepscope/hooks/estimator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "stepscope/ops/all_ops.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/summary_writer.h"
#include "stepscope/train/variables.h"
#include "stepscope/testing/error_text.h"
#include "stepscope/testing/temp_dir.h"

namespace stepscope {
namespace {

using ::testing::HasSubstr;

const std::string kDigits = std::string(STEPSCOPE_SOURCE_DIR) + "/data/digits.csv.gz";

// The digits split once (parsing the file is the slow part): 1500 rows to train, 297 to test.
const std::pair<Dataset, Dataset>& digits() {
  static const std::pair<Dataset, Dataset> parts = split_dataset(Dataset::csv(kDigits)
                                                                     .map([](std::vector<Tensor> row) {
                                                                       for (float& v : row[0].flat<float>()) v /= 16.0f;
                                                                       return row;
                                                                     })
                                                                     .shuffle(1797, 7, false),
                                                                 {.left_size = 1500});
  return parts;
}

Input train_input(const Scope&) { return digits().first.shuffle(1500, 1).batch(64).repeat(); }
Input eval_input(const Scope&) { return digits().second.batch(100); }

// A small MLP; besides accuracy it reports two synthetic metrics the early-stopping tests use:
// "constant" (never improves) and "progress" (the global step: always improves).
ModelFn mlp(double learning_rate = 0.5) {
  return [learning_rate](Output x, Output labels, ModeKeys mode, const Scope& root) {
    Output hidden = nn::dense(root.with_name_scope("hidden"), x, 64, nn::Activation::relu, {.seed = 1});
    Output logits = nn::dense(root.with_name_scope("logits"), hidden, 10, nn::Activation::none, {.seed = 2});
    EstimatorSpec spec{.mode = mode};
    spec.loss = reduce_mean(root, sparse_softmax_cross_entropy_with_logits(root, labels, logits));
    Variable step = get_global_step(root.graph());
    if (mode == ModeKeys::TRAIN)
      spec.train_op = GradientDescentOptimizer(learning_rate).minimize(root, spec.loss, step);
    spec.eval_metric_ops["accuracy"] =
        reduce_mean(root, cast(root, equal(root, argmax(root, logits, 1, DType::kInt32), labels), DType::kFloat32));
    spec.eval_metric_ops["streaming_accuracy"] =
        metrics::accuracy(root, labels, argmax(root, logits, 1, DType::kInt32), {}, "streaming_accuracy");
    spec.eval_metric_ops["constant"] = constant(root, 0.5f);
    spec.eval_metric_ops["progress"] = cast(root, step.value(), DType::kFloat32);
    return spec;
  };
}

// Counts evaluations: every evaluate() calls its hooks' begin once.
class CountingHook : public SessionRunHook {
 public:
  void begin() override { ++begins; }
  void after_run(SessionRunContext&, const SessionRunValues&) override { ++runs; }
  int begins = 0;
  int runs = 0;
};

// Moves a fake clock forward by `secs` after every training step.
class TickHook : public SessionRunHook {
 public:
  TickHook(FakeClock& clock, double secs) : clock_(clock), secs_(secs) {}
  void after_run(SessionRunContext&, const SessionRunValues&) override { clock_.advance(secs_); }

 private:
  FakeClock& clock_;
  double secs_;
};

class EstimatorTest : public ::testing::Test {
 protected:
  void TearDown() override { SummaryWriterCache::clear(); }

  EstimatorConfig config(EstimatorConfig c = {}) {
    c.model_dir = dir_;
    c.log = quiet_;
    return c;
  }

  testing::TempDir tmp_;
  std::string dir_ = tmp_ / "model";  // made by the estimator
  std::vector<std::string> info_;
  HookLog quiet_{.info = [this](const std::string& s) { info_.push_back(s); },
                 .warning = [](const std::string&) {},
                 .error = [](const std::string&) {}};
};

std::vector<int64_t> steps_of(const std::map<int64_t, std::map<std::string, double>>& records) {
  std::vector<int64_t> steps;
  for (const auto& [step, metrics] : records) steps.push_back(step);
  return steps;
}

TEST_F(EstimatorTest, TrainsTheMlpAndEvaluatesAccuracyAndGlobalStep) {
  Estimator est(mlp(), config({.save_checkpoints_steps = 100}));
  est.train(train_input, {.max_steps = 300});
  EXPECT_EQ(est.latest_checkpoint(), dir_ + "/model.ckpt-300");
  CountingHook counter;
  const auto metrics = est.evaluate(eval_input, {.hooks = {&counter}});
  EXPECT_GT(metrics.at("accuracy"), 0.9);
  EXPECT_EQ(metrics.at("global_step"), 300);
  EXPECT_LT(metrics.at("loss"), 0.5);
  EXPECT_EQ(metrics.at("constant"), 0.5);
  EXPECT_EQ(metrics.size(), 6u);
  EXPECT_EQ(counter.runs, 3);  // 297 rows in batches of 100, until the input ends
  // The streaming accuracy counts every row once; the per-batch one weighs the short last batch
  // like the others.
  EXPECT_NEAR(metrics.at("streaming_accuracy"), metrics.at("accuracy"), 0.02);
  EXPECT_GT(metrics.at("streaming_accuracy"), 0.9);
  // steps limits the batches; the results are recorded for the early-stopping hooks. A new
  // evaluation starts its streaming counts from zero: over one batch both agree exactly.
  const auto one_batch = est.evaluate(eval_input, {.steps = 1, .hooks = {&counter}});
  EXPECT_NEAR(one_batch.at("streaming_accuracy"), one_batch.at("accuracy"), 1e-6);
  est.evaluate(eval_input, {.steps = 1, .hooks = {&counter}});
  EXPECT_EQ(counter.runs, 5);
  const auto records = read_eval_metrics(est.eval_dir());
  ASSERT_EQ(steps_of(records), std::vector<int64_t>{300});
  EXPECT_EQ(records.at(300).count("accuracy"), 1u);
  EXPECT_EQ(records.at(300).count("global_step"), 0u);
  EXPECT_THAT(info_, ::testing::Contains(HasSubstr("Saving dict for global step 300: accuracy = ")));
  bool has_events = false;
  for (const auto& entry : std::filesystem::directory_iterator(est.eval_dir()))
    has_events |= entry.path().filename().string().starts_with("events.out.tfevents.");
  EXPECT_TRUE(has_events);
}

TEST_F(EstimatorTest, TrainResumesFromTheLatestCheckpoint) {
  {
    Estimator est(mlp(), config({.save_checkpoints_steps = 1000}));
    est.train(train_input, {.max_steps = 50});
  }
  Estimator again(mlp(), config({.save_checkpoints_steps = 1000}));
  EXPECT_EQ(again.global_step_from_checkpoint(), 50);
  const double loss_at_50 = again.evaluate(eval_input).at("loss");
  again.train(train_input, {.steps = 30});  // counts from the restored step
  EXPECT_EQ(again.global_step_from_checkpoint(), 80);
  const auto metrics = again.evaluate(eval_input);
  EXPECT_EQ(metrics.at("global_step"), 80);
  EXPECT_LT(metrics.at("loss"), loss_at_50);  // restored the trained weights, then trained more

  info_.clear();
  again.train(train_input, {.max_steps = 80});
  EXPECT_THAT(info_, ::testing::Contains("Skipping training since max_steps has already saved."));
  EXPECT_EQ(again.global_step_from_checkpoint(), 80);
  // The end of the input ends training too.
  again.train([](const Scope&) -> Input { return digits().first.batch(500); });
  EXPECT_EQ(again.global_step_from_checkpoint(), 83);
}

TEST_F(EstimatorTest, TrainAndEvaluateEvaluatesAfterEveryCheckpoint) {
  Estimator est(mlp(), config({.save_checkpoints_steps = 20}));
  CountingHook evals;
  const auto last = train_and_evaluate(est, {.input_fn = train_input, .max_steps = 100},
                                       {.input_fn = eval_input, .steps = 2, .hooks = {&evals}, .throttle_secs = 0});
  // Saves at 0 (session start: skipped), 20, 40, 60, 80, 100; none left for the end.
  EXPECT_EQ(evals.begins, 5);
  EXPECT_EQ(evals.runs, 10);
  EXPECT_EQ(steps_of(read_eval_metrics(est.eval_dir())), (std::vector<int64_t>{20, 40, 60, 80, 100}));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->at("global_step"), 100);
  EXPECT_GT(last->at("accuracy"), 0.8);
  // Already at max_steps: nothing to train, nothing evaluated.
  EXPECT_FALSE(train_and_evaluate(est, {.input_fn = train_input, .max_steps = 100},
                                  {.input_fn = eval_input, .steps = 2, .hooks = {&evals}, .throttle_secs = 0})
                   .has_value());
  EXPECT_EQ(evals.begins, 5);
}

TEST_F(EstimatorTest, TrainAndEvaluateThrottlesBySeconds) {
  FakeClock clock;
  TickHook tick(clock, 1.0);  // one second per step
  Estimator est(mlp(), config({.save_checkpoints_steps = 20}));
  CountingHook evals;
  train_and_evaluate(est, {.input_fn = train_input, .max_steps = 110, .hooks = {&tick}},
                     {.input_fn = eval_input, .steps = 1, .hooks = {&evals}, .throttle_secs = 30, .clock = &clock});
  // 20 (the first always runs), 40 skipped (20 s), 60 (40 s), 80 skipped, 100 (40 s), and the
  // final step 110 (saved at the end, never evaluated).
  EXPECT_EQ(steps_of(read_eval_metrics(est.eval_dir())), (std::vector<int64_t>{20, 60, 100, 110}));
  EXPECT_EQ(evals.begins, 4);
  EXPECT_THAT(info_, ::testing::Contains("Skip the current checkpoint eval due to throttle secs (30 secs)."));
}

TEST_F(EstimatorTest, StopIfNoIncreaseStopsWhenTheMetricStaysFlat) {
  Estimator est(mlp(), config({.save_checkpoints_steps = 20}));
  auto stop = stop_if_no_increase_hook(est, "constant", 40,
                                       {.run_every_secs = std::nullopt, .run_every_steps = 1, .log = quiet_});
  train_and_evaluate(est, {.input_fn = train_input, .max_steps = 1000, .hooks = {stop.get()}},
                     {.input_fn = eval_input, .steps = 1, .throttle_secs = 0});
  // Best at 20; at 60 it has not increased for 40 steps. The hook runs after the checkpoint saver,
  // which evaluated step 60 after the same run, so training stops exactly there.
  EXPECT_EQ(est.global_step_from_checkpoint(), 60);
  EXPECT_EQ(steps_of(read_eval_metrics(est.eval_dir())), (std::vector<int64_t>{20, 40, 60}));
  EXPECT_THAT(info_, ::testing::Contains("No increase in metric \"constant\" for 40 steps, which is greater than or "
                                         "equal to max steps (40) configured for early stopping."));
  EXPECT_THAT(info_, ::testing::Contains(HasSubstr("Requesting early stopping at global step ")));
}

TEST_F(EstimatorTest, StopIfNoIncreaseKeepsTrainingWhileTheMetricImproves) {
  Estimator est(mlp(), config({.save_checkpoints_steps = 20}));
  auto stop = stop_if_no_increase_hook(est, "progress", 20, {.run_every_secs = std::nullopt, .run_every_steps = 1});
  train_and_evaluate(est, {.input_fn = train_input, .max_steps = 120, .hooks = {stop.get()}},
                     {.input_fn = eval_input, .steps = 1, .throttle_secs = 0});
  EXPECT_EQ(est.global_step_from_checkpoint(), 120);
  EXPECT_EQ(read_eval_metrics(est.eval_dir()).size(), 6u);
}

TEST_F(EstimatorTest, StopIfNoDecreaseStopsWhenTheLossCannotImprove) {
  Estimator est(mlp(/*learning_rate=*/0.0), config({.save_checkpoints_steps = 10}));
  auto stop = stop_if_no_decrease_hook(est, "loss", 30, {.run_every_secs = std::nullopt, .run_every_steps = 5});
  train_and_evaluate(est, {.input_fn = train_input, .max_steps = 500, .hooks = {stop.get()}},
                     {.input_fn = eval_input, .steps = 2, .throttle_secs = 0});
  // Evaluations at 10, 20, 30, 40 (loss unchanged since 10); the hook checks every 5 steps, on
  // the step fetched beside the train op (before its increment: 0, 5, ..., 40), so it sees the
  // step-40 record on the run from 40 to 41 and stops there; the end of training saves and
  // evaluates step 41. (The shared runtime's global_step/read aliases the variable's buffer, so
  // that fetch occasionally shows the incremented value: a check at 41, a stop at 42.)
  const auto records = read_eval_metrics(est.eval_dir());
  const int64_t last = est.global_step_from_checkpoint();
  EXPECT_TRUE(last == 41 || last == 42) << last;
  EXPECT_EQ(steps_of(records), (std::vector<int64_t>{10, 20, 30, 40, last}));
  EXPECT_EQ(records.at(10).at("loss"), records.at(40).at("loss"));
}

TEST_F(EstimatorTest, EarlyStoppingHonoursMinStepsAndTimeSchedule) {
  Estimator est(mlp(), config({.save_checkpoints_steps = 10}));
  std::filesystem::create_directories(est.eval_dir());
  std::ofstream(est.eval_dir() + "/eval_metrics.txt") << "global_step=10 accuracy=0.9 loss=1\n"
                                                      << "global_step=30 accuracy=0.5 loss=1\n"
                                                      << "global_step=50 accuracy=0.7 loss=1\n";
  const auto records = read_eval_metrics(est.eval_dir());
  EXPECT_EQ(records.at(30).at("accuracy"), 0.5);
  // From min_steps 20 the best is 0.7 at 50 (0.5 at 30 was beaten): nothing stale for 30 steps.
  FakeClock clock;
  auto hook_after_min = stop_if_no_increase_hook(est, "accuracy", 30, {.min_steps = 20, .clock = &clock});
  // Counting from 10, 0.9 has not been beaten for 40 steps.
  auto hook_all = stop_if_no_increase_hook(est, "accuracy", 30, {.clock = &clock});
  auto higher = stop_if_higher_hook(est, "accuracy", 0.95, {.clock = &clock});
  auto lower = stop_if_lower_hook(est, "accuracy", 0.6, {.clock = &clock});
  auto hooks_stop = [&](SessionRunHook* hook) {
    Estimator trainer(mlp(), config({.save_checkpoints_steps = 1000}));
    trainer.train(train_input, {.hooks = {hook}, .steps = 3});
    return trainer.global_step_from_checkpoint();
  };
  // run_every_secs = 60 on a still clock: checks on the first step only.
  EXPECT_EQ(hooks_stop(hook_after_min.get()), 3);
  EXPECT_EQ(hooks_stop(hook_all.get()), 4);  // stops after the first step (3 restored + 1)
  EXPECT_EQ(hooks_stop(higher.get()), 7);
  EXPECT_EQ(hooks_stop(lower.get()), 8);

  std::ofstream(est.eval_dir() + "/eval_metrics.txt", std::ios::app) << "global_step=60 loss=1\n";
  auto missing = stop_if_no_increase_hook(est, "accuracy", 100, {.clock = &clock});
  try {
    hooks_stop(missing.get());
    ADD_FAILURE() << "expected an error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Metric \"accuracy\" is not in the evaluation at global step 60"));
  }
  std::ofstream(est.eval_dir() + "/eval_metrics.txt", std::ios::app) << "accuracy=oops\n";
  EXPECT_THROW(read_eval_metrics(est.eval_dir()), DataLossError);
}

TEST_F(EstimatorTest, BadArgumentsGiveClearErrors) {
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { Estimator(nullptr, config()); }), "model_fn must be provided to Estimator.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { Estimator(mlp(), config({.save_checkpoints_steps = 1, .save_checkpoints_secs = 1})); }),
            "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.");
  Estimator est(mlp(), config({.save_checkpoints_steps = 10}));
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { est.train(train_input, {.steps = 1, .max_steps = 2}); }),
            "Can not provide both steps and max_steps.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { est.train(train_input, {.steps = 0}); }), "Must specify steps > 0, given: 0");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { est.train(train_input, {.max_steps = -1}); }), "Must specify max_steps > 0, given: -1");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { est.train(train_input, {.hooks = {nullptr}}); }), "hooks[0] is null.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { est.evaluate(eval_input, {.steps = 0}); }), "Must specify steps > 0, given: 0");

  Estimator no_train_op([](Output x, Output, ModeKeys mode,
                           const Scope& root) { return EstimatorSpec{.mode = mode, .loss = reduce_mean(root, x)}; },
                        config());
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { no_train_op.train(train_input, {.max_steps = 1}); }), "Missing train_op.");
  Estimator reserved(
      [](Output x, Output, ModeKeys mode, const Scope& root) {
        Output loss = reduce_mean(root, x);
        return EstimatorSpec{.mode = mode, .loss = loss, .eval_metric_ops = {{"loss", loss}}};
      },
      config());
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { reserved.evaluate(eval_input); }),
            "Metric with name \"loss\" is not allowed, because Estimator already defines a default metric with the "
            "same name.");
  EXPECT_THAT(testing::error_text<InvalidArgumentError>([&] { est.train([](const Scope&) -> Input { return std::vector<Output>{}; }); }),
              HasSubstr("input_fn must give features or (features, labels), got 0 tensors."));

  EXPECT_EQ(
      testing::error_text<InvalidArgumentError>([&] { train_and_evaluate(est, {.input_fn = train_input, .max_steps = 0}, {.input_fn = eval_input}); }),
      "Must specify max_steps > 0, given: 0");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              train_and_evaluate(est, {.input_fn = train_input}, {.input_fn = eval_input, .throttle_secs = -1});
            }),
            "Must specify throttle_secs >= 0, given: -1");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              train_and_evaluate(est, {.input_fn = train_input}, {.input_fn = eval_input, .start_delay_secs = -2});
            }),
            "Must specify start_delay_secs >= 0, given: -2");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { train_and_evaluate(est, {.input_fn = train_input}, {}); }),
            "EvalSpec.input_fn must be provided.");
  Estimator no_ckpt(mlp(), config({.save_checkpoints_secs = 0}));
  EXPECT_THAT(testing::error_text<InvalidArgumentError>([&] { train_and_evaluate(no_ckpt, {.input_fn = train_input}, {.input_fn = eval_input}); }),
              HasSubstr("set save_checkpoints_steps or save_checkpoints_secs"));

  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { stop_if_no_increase_hook(est, "accuracy", 10, {.run_every_steps = 5}); }),
            "Only one of `run_every_secs` and `run_every_steps` can be set.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { stop_if_no_increase_hook(est, "accuracy", 10, {.run_every_secs = std::nullopt}); }),
            "Either every_secs or every_steps should be provided.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { stop_if_no_decrease_hook(est, "loss", -1); }),
            "max_steps_without_decrease must be >= 0, given: -1");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { stop_if_no_increase_hook(est, "", 1); }), "metric_name must not be empty.");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { make_early_stopping_hook(est, nullptr); }), "`should_stop_fn` must be callable.");
}

}  // namespace
}  // namespace stepscope
