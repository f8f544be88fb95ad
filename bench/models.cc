// The benchmark suite's models (models.h). Each builder states its layers once; the layer
// helpers below add the ops and count the step's FLOPs and parameters as they go.
#include "models.h"

#include <cmath>
#include <random>
#include <stdexcept>

#include "stepscope/ops/all_ops.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/variables.h"

namespace stepscope::bench {
namespace {

constexpr int64_t kBatch = 64;
constexpr uint64_t kDataSeed = 42;

// Adds layers to a model, counting the FLOPs of their products (models.h, flops_per_step).
class Layers {
 public:
  explicit Layers(BenchModel& model) : model_(model), root_(model.g) {}

  const Scope& root() const { return root_; }

  // The batch: placeholders x [batch, dims...] (float32, normal) and y [batch] (int64 labels in
  // [0, classes)), fed with random values from a fixed seed.
  Output inputs(std::vector<int64_t> dims, int64_t classes) {
    std::vector<int64_t> placeholder_dims{-1}, tensor_dims{kBatch};
    placeholder_dims.insert(placeholder_dims.end(), dims.begin(), dims.end());
    tensor_dims.insert(tensor_dims.end(), dims.begin(), dims.end());
    Output x = placeholder(root_.with_op_name("x"), DType::kFloat32, Shape(placeholder_dims));
    y_ = placeholder(root_.with_op_name("y"), DType::kInt64, Shape{-1});
    std::mt19937 rng(kDataSeed);
    std::normal_distribution<float> normal;
    Tensor xs(DType::kFloat32, Shape(tensor_dims)), ys(DType::kInt64, Shape{kBatch});
    for (float& v : xs.flat<float>()) v = normal(rng);
    for (int64_t& v : ys.flat<int64_t>()) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
    model_.feeds = {{x, xs}, {y_, ys}};
    model_.batch = kBatch;
    return x;
  }

  // nn::dense (Glorot uniform kernel, zero bias) from `in` features to `units`.
  Output dense(Output x, int64_t in, int64_t units, nn::Activation activation) {
    add_product(2.0 * kBatch * in * units);
    return nn::dense(root_.with_name_scope("dense"), x, units, activation, {.seed = next_seed()});
  }

  // conv2d k x k, stride 1, SAME, with a bias, then ReLU; the input is NHWC [batch, h, w, in].
  // The filter's scale is PyTorch's default one (standard deviation 1/sqrt(3 * fan_in)), so that
  // both sides train in the same regime (a fixed 0.1 makes the deeper CNN diverge).
  Output conv_relu(Output x, int64_t h, int64_t w, int64_t k, int64_t in, int64_t out) {
    add_product(2.0 * kBatch * h * w * out * k * k * in);
    const Scope scope = root_.with_name_scope("conv");
    const double stddev = 1.0 / std::sqrt(3.0 * static_cast<double>(k * k * in));
    Variable filter = make_variable(
        scope, "filter",
        truncated_normal(scope, {k, k, in, out}, 0.0, stddev, DType::kFloat32, static_cast<int64_t>(next_seed())));
    Tensor zeros(DType::kFloat32, Shape{out});
    for (float& v : zeros.flat<float>()) v = 0.0f;
    Variable bias = make_variable(scope, "bias", constant(scope, zeros));
    return relu(scope, bias_add(scope, conv2d(scope, x, filter.value(), {1, 1, 1, 1}, "SAME"), bias.value()));
  }

  Output max_pool_2x2(Output x) {
    return max_pool(root_.with_name_scope("pool"), x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  }

  // Mean sparse softmax cross-entropy of the logits against y, minimized by SGD.
  void finish(Output logits, double learning_rate) {
    model_.loss = reduce_mean(root_, sparse_softmax_cross_entropy_with_logits(root_, y_, logits));
    model_.train = GradientDescentOptimizer(learning_rate).minimize(root_, model_.loss);
    model_.init = global_variables_initializer(root_);
    for (const Variable& v : trainable_variables(model_.g)) model_.parameters += v.shape().num_elements();
  }

 private:
  // One product of `flops` in the forward pass: as much again for the weight's gradient, and
  // again for the input's gradient unless the layer is the first.
  void add_product(double flops) {
    model_.flops_per_step += flops * (first_layer_ ? 2 : 3);
    first_layer_ = false;
  }
  uint64_t next_seed() { return ++seed_; }

  BenchModel& model_;
  Scope root_;
  Output y_;
  bool first_layer_ = true;
  uint64_t seed_ = 0;
};

// The TensorFlow MNIST tutorial's network ("Deep MNIST for experts"): 28x28x1, conv 5x5 32 +
// ReLU, max-pool 2x2, conv 5x5 64 + ReLU, max-pool 2x2, dense 1024 + ReLU, dense 10; SGD(0.01).
std::unique_ptr<BenchModel> build_lenet() {
  auto model = std::make_unique<BenchModel>();
  Layers l(*model);
  Output h = l.inputs({28, 28, 1}, 10);
  h = l.max_pool_2x2(l.conv_relu(h, 28, 28, 5, 1, 32));   // [64,14,14,32]
  h = l.max_pool_2x2(l.conv_relu(h, 14, 14, 5, 32, 64));  // [64,7,7,64]
  h = reshape(l.root(), h, {-1, 7 * 7 * 64});
  h = l.dense(h, 7 * 7 * 64, 1024, nn::Activation::relu);
  l.finish(l.dense(h, 1024, 10, nn::Activation::none), 0.01);
  return model;
}

// Three blocks of conv 3x3 (64, 128, 128 filters) + ReLU + max-pool 2x2 on 32x32x3 inputs, then
// dense 10 from 4x4x128; SGD(0.01).
std::unique_ptr<BenchModel> build_deep_cnn() {
  auto model = std::make_unique<BenchModel>();
  Layers l(*model);
  Output h = l.inputs({32, 32, 3}, 10);
  h = l.max_pool_2x2(l.conv_relu(h, 32, 32, 3, 3, 64));    // [64,16,16,64]
  h = l.max_pool_2x2(l.conv_relu(h, 16, 16, 3, 64, 128));  // [64,8,8,128]
  h = l.max_pool_2x2(l.conv_relu(h, 8, 8, 3, 128, 128));   // [64,4,4,128]
  h = reshape(l.root(), h, {-1, 4 * 4 * 128});
  l.finish(l.dense(h, 4 * 4 * 128, 10, nn::Activation::none), 0.01);
  return model;
}

// Later models (the batch-norm CNN, the embedding model, the LSTM) are one entry each here, and
// one in bench/pytorch_models.py's MODELS.
constexpr ModelEntry kModels[] = {
    {"mlp", "MLP 784-256-256-10, ReLU, SGD(0.1)", 200, build_mlp},
    {"lenet", "TF MNIST tutorial CNN: 28x28x1, conv5x5 32, pool, conv5x5 64, pool, dense 1024, dense 10", 20,
     build_lenet},
    {"deep_cnn", "32x32x3, 3 x [conv3x3 (64, 128, 128) + ReLU + pool 2x2], dense 10", 10, build_deep_cnn},
};

}  // namespace

std::unique_ptr<BenchModel> build_mlp() {
  auto model = std::make_unique<BenchModel>();
  Layers l(*model);
  Output h = l.inputs({784}, 10);
  h = l.dense(h, 784, 256, nn::Activation::relu);
  h = l.dense(h, 256, 256, nn::Activation::relu);
  l.finish(l.dense(h, 256, 10, nn::Activation::none), 0.1);
  return model;
}

std::span<const ModelEntry> bench_models() { return kModels; }

const ModelEntry* find_bench_model(std::string_view name) {
  for (const ModelEntry& entry : kModels)
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace stepscope::bench
