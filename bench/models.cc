// The benchmark suite's models (models.h). Each builder states its layers once; the layer
// helpers below add the ops and count the step's FLOPs and parameters as they go.
#include "models.h"

#include <cmath>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "stepscope/dist/distributed_optimizer.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"
#include "stepscope/train/rnn.h"
#include "stepscope/train/variables.h"

namespace stepscope::bench {
namespace {

bool distributed_training = false;

constexpr int64_t kBatch = 64;
constexpr uint64_t kDataSeed = 42;

// Adds layers to a model, counting the FLOPs of their products (models.h, flops_per_step).
class Layers {
 public:
  explicit Layers(BenchModel& model, int64_t batch = kBatch) : model_(model), root_(model.g), batch_(batch) {
    model_.batch = batch;
  }

  const Scope& root() const { return root_; }

  // The batch: placeholders x [batch, dims...] (float32, normal) and y [batch] (int64 labels in
  // [0, classes)), fed with random values from a fixed seed.
  Output inputs(std::vector<int64_t> dims, int64_t classes) {
    Output x = features("x", std::move(dims));
    labels(classes);
    return x;
  }

  // A placeholder `name` [batch, dims...] of float32, fed with normal values.
  Output features(const std::string& name, std::vector<int64_t> dims) {
    std::vector<int64_t> placeholder_dims{-1}, tensor_dims{batch_};
    placeholder_dims.insert(placeholder_dims.end(), dims.begin(), dims.end());
    tensor_dims.insert(tensor_dims.end(), dims.begin(), dims.end());
    Output x = placeholder(root_.with_op_name(name), DType::kFloat32, Shape(placeholder_dims));
    std::normal_distribution<float> normal;
    Tensor xs(DType::kFloat32, Shape(tensor_dims));
    for (float& v : xs.flat<float>()) v = normal(rng_);
    model_.feeds.push_back({x, xs});
    return x;
  }

  // The labels y [batch] (int64 in [0, classes)) that finish() scores the logits against.
  void labels(int64_t classes) {
    y_ = placeholder(root_.with_op_name("y"), DType::kInt64, Shape{-1});
    Tensor ys(DType::kInt64, Shape{batch_});
    for (int64_t& v : ys.flat<int64_t>()) v = static_cast<int64_t>(rng_() % static_cast<uint64_t>(classes));
    model_.feeds.push_back({y_, ys});
  }

  // A placeholder `name` [batch, 1] of float32 0/1 labels (a sigmoid cross-entropy's).
  Output binary_labels(const std::string& name) {
    Output z = placeholder(root_.with_op_name(name), DType::kFloat32, Shape{-1, 1});
    Tensor zs(DType::kFloat32, Shape{batch_, 1});
    for (float& v : zs.flat<float>()) v = static_cast<float>(rng_() % 2);
    model_.feeds.push_back({z, zs});
    return z;
  }

  // A categorical feature: ids [batch] (int32, uniform in [0, vocab)) looked up in a trainable
  // table [vocab, dim] (normal, standard deviation 0.05): embedding_lookup, whose gradient is
  // IndexedSlices. The layers after it need their input's gradient (the table's rows).
  Output embedding(const std::string& name, int64_t vocab, int64_t dim) {
    Output ids = placeholder(root_.with_op_name(name + "_ids"), DType::kInt32, Shape{-1});
    Tensor values(DType::kInt32, Shape{batch_});
    for (int32_t& v : values.flat<int32_t>()) v = static_cast<int32_t>(rng_() % static_cast<uint64_t>(vocab));
    model_.feeds.push_back({ids, values});
    const Scope scope = root_.with_name_scope(name);
    Variable table = make_variable(
        scope, "embeddings",
        random_normal(scope, {vocab, dim}, 0.0, 0.05, DType::kFloat32, static_cast<int64_t>(next_seed())));
    first_layer_ = false;
    return embedding_lookup(scope, table.value(), ids);
  }

  // nn::dense (Glorot uniform kernel, zero bias) from `in` features to `units`.
  Output dense(Output x, int64_t in, int64_t units, nn::Activation activation) {
    add_product(2.0 * batch_ * in * units);
    return nn::dense(root_.with_name_scope("dense"), x, units, activation, {.seed = next_seed()});
  }

  // conv2d k x k, stride 1, SAME, with a bias, then ReLU; the input is NHWC [batch, h, w, in].
  // The filter's scale is PyTorch's default one (standard deviation 1/sqrt(3 * fan_in)), so that
  // both sides train in the same regime (a fixed 0.1 makes the deeper CNN diverge).
  Output conv_relu(Output x, int64_t h, int64_t w, int64_t k, int64_t in, int64_t out) {
    const Scope scope = root_.with_name_scope("conv");
    Output y = conv(scope, x, h, w, k, in, out);
    Tensor zeros(DType::kFloat32, Shape{out});
    for (float& v : zeros.flat<float>()) v = 0.0f;
    Variable bias = make_variable(scope, "bias", constant(scope, zeros));
    return relu(scope, bias_add(scope, y, bias.value()));
  }

  // conv2d k x k, stride 1, SAME, without a bias, then nn::batch_normalization in training
  // (batch statistics; its moving averages' updates go to the update ops, see finish) and ReLU.
  Output conv_bn_relu(Output x, int64_t h, int64_t w, int64_t k, int64_t in, int64_t out) {
    const Scope scope = root_.with_name_scope("conv");
    Output y = conv(scope, x, h, w, k, in, out);
    y = nn::batch_normalization(scope.with_name_scope("batch_normalization"), y, {.training = true});
    return relu(scope, y);
  }

  Output max_pool_2x2(Output x) {
    return max_pool(root_.with_name_scope("pool"), x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  }

  Output dropout(Output x, double rate) {
    return nn::dropout(root_.with_name_scope("dropout"), x, rate, {.seed = static_cast<int64_t>(next_seed())});
  }

  // nn::static_rnn of a BasicLSTMCell of `units` over `inputs` (each [batch, depth]); returns the
  // outputs. Each step is one product [batch, depth + units] x [depth + units, 4 units] (the
  // cell's kernel on concat(x, h)): forward, the kernel's gradient and the gradient of its
  // recurrent input h only (x is data), [batch, 4 units] x [4 units, units].
  std::vector<Output> lstm(const std::vector<Output>& inputs, int64_t depth, int64_t units) {
    const double steps = static_cast<double>(inputs.size());
    model_.flops_per_step +=
        steps * (2 * 2.0 * batch_ * (depth + units) * 4 * units + 2.0 * batch_ * 4 * units * units);
    first_layer_ = false;
    nn::BasicLSTMCell cell(units, {.seed = next_seed()});
    return nn::static_rnn(root_.with_name_scope("rnn"), cell, inputs).first;
  }

  // Mean sparse softmax cross-entropy of the logits against y, minimized by SGD.
  void finish(Output logits, double learning_rate) {
    GradientDescentOptimizer sgd(learning_rate);
    finish_loss(reduce_mean(root_, sparse_softmax_cross_entropy_with_logits(root_, y_, logits)), sgd);
  }

  // `loss` minimized by `optimizer`, the train op also running the update ops (batch norms').
  void finish_loss(Output loss, Optimizer& optimizer) {
    model_.loss = loss;
    const std::vector<Node*> update_ops = get_update_ops(model_.g);
    const Scope scope = update_ops.empty() ? root_ : root_.with_control_dependencies(update_ops);
    model_.train =
        distributed_training ? DistributedOptimizer(optimizer).minimize(scope, loss) : optimizer.minimize(scope, loss);
    model_.init = global_variables_initializer(root_);
    for (const Variable& v : trainable_variables(model_.g)) model_.parameters += v.shape().num_elements();
  }

 private:
  // The filter of a conv2d k x k (PyTorch's default scale, see conv_relu) and the convolution.
  Output conv(const Scope& scope, Output x, int64_t h, int64_t w, int64_t k, int64_t in, int64_t out) {
    add_product(2.0 * batch_ * h * w * out * k * k * in);
    const double stddev = 1.0 / std::sqrt(3.0 * static_cast<double>(k * k * in));
    Variable filter = make_variable(
        scope, "filter",
        truncated_normal(scope, {k, k, in, out}, 0.0, stddev, DType::kFloat32, static_cast<int64_t>(next_seed())));
    return conv2d(scope, x, filter.value(), {1, 1, 1, 1}, "SAME");
  }

  // One product of `flops` in the forward pass: as much again for the weight's gradient, and
  // again for the input's gradient unless the layer is the first.
  void add_product(double flops) {
    model_.flops_per_step += flops * (first_layer_ ? 2 : 3);
    first_layer_ = false;
  }
  uint64_t next_seed() { return ++seed_; }

  BenchModel& model_;
  Scope root_;
  int64_t batch_;
  std::mt19937 rng_{kDataSeed};
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

// A Fashion-MNIST-sized CNN with batch norm and dropout: 28x28x1, [conv 3x3 SAME 32, no bias +
// batch norm (training) + ReLU + max-pool 2x2], the same with 64 filters, dense 128 + ReLU,
// dropout 0.3, dense 10; SGD(0.01), the train op after the batch norms' moving-average updates.
std::unique_ptr<BenchModel> build_bn_cnn() {
  auto model = std::make_unique<BenchModel>();
  Layers l(*model);
  Output h = l.inputs({28, 28, 1}, 10);
  h = l.max_pool_2x2(l.conv_bn_relu(h, 28, 28, 3, 1, 32));   // [64,14,14,32]
  h = l.max_pool_2x2(l.conv_bn_relu(h, 14, 14, 3, 32, 64));  // [64,7,7,64]
  h = reshape(l.root(), h, {-1, 7 * 7 * 64});
  h = l.dropout(l.dense(h, 7 * 7 * 64, 128, nn::Activation::relu), 0.3);
  l.finish(l.dense(h, 128, 10, nn::Activation::none), 0.01);
  return model;
}

// An ESMM-like recommendation model, batch 512: four categorical features (vocabularies 100000,
// 10000, 1000, 24) embedded in 16 dimensions, concatenated [512, 64], then two towers (CTR and
// CVR: dense 128 + ReLU, dense 1), each scored by a mean sigmoid cross-entropy against its own
// 0/1 labels, the two losses summed; Adagrad(0.05) on every variable, the tables' updates sparse
// (SparseApplyAdagrad of the looked-up rows).
std::unique_ptr<BenchModel> build_embedding() {
  constexpr int64_t kVocab[] = {100000, 10000, 1000, 24};
  constexpr int64_t kDim = 16;
  auto model = std::make_unique<BenchModel>();
  Layers l(*model, 512);
  std::vector<Output> columns;
  for (size_t i = 0; i < std::size(kVocab); ++i)
    columns.push_back(l.embedding("feature" + std::to_string(i), kVocab[i], kDim));
  const Output click = l.binary_labels("click"), conversion = l.binary_labels("conversion");
  const Output shared = concat(l.root(), columns, 1);  // [512, 64]
  Output loss;
  for (const Output& labels : {click, conversion}) {
    Output h = l.dense(shared, static_cast<int64_t>(std::size(kVocab)) * kDim, 128, nn::Activation::relu);
    h = l.dense(h, 128, 1, nn::Activation::none);
    Output tower_loss = reduce_mean(l.root(), sigmoid_cross_entropy_with_logits(l.root(), labels, h));
    loss = loss ? add(l.root(), loss, tower_loss) : tower_loss;
  }
  AdagradOptimizer adagrad(0.05);
  l.finish_loss(loss, adagrad);
  return model;
}

// An LSTM classifier: 20 time steps of [32, 64] (normal) through static_rnn of a
// BasicLSTMCell(128) (one kernel [192, 512] and one bias [512]), dense 64 on the last output,
// softmax cross-entropy over 64 classes; SGD(0.1).
std::unique_ptr<BenchModel> build_lstm() {
  constexpr int64_t kSteps = 20, kDepth = 64, kUnits = 128, kClasses = 64;
  auto model = std::make_unique<BenchModel>();
  Layers l(*model, 32);
  std::vector<Output> inputs;
  for (int64_t t = 0; t < kSteps; ++t) inputs.push_back(l.features("x_" + std::to_string(t), {kDepth}));
  l.labels(kClasses);
  const std::vector<Output> outputs = l.lstm(inputs, kDepth, kUnits);
  l.finish(l.dense(outputs.back(), kUnits, kClasses, nn::Activation::none), 0.1);
  return model;
}

constexpr ModelEntry kModels[] = {
    {"mlp", "MLP 784-256-256-10, ReLU, SGD(0.1)", 200, build_mlp},
    {"lenet", "TF MNIST tutorial CNN: 28x28x1, conv5x5 32, pool, conv5x5 64, pool, dense 1024, dense 10", 20,
     build_lenet},
    {"deep_cnn", "32x32x3, 3 x [conv3x3 (64, 128, 128) + ReLU + pool 2x2], dense 10", 10, build_deep_cnn},
    {"bn_cnn",
     "28x28x1, 2 x [conv3x3 (32, 64) no bias + batch norm + ReLU + pool 2x2], dense 128, dropout 0.3, dense 10", 100,
     build_bn_cnn},
    {"embedding",
     "ESMM-like: 4 embeddings (100000, 10000, 1000, 24 x 16), 2 towers dense 128 + dense 1, Adagrad, batch 512", 2000,
     build_embedding},
    {"lstm", "static_rnn BasicLSTMCell(128), 20 steps of [32, 64], dense 64 on the last output, SGD(0.1)", 300,
     build_lstm},
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

void set_distributed_training(bool on) { distributed_training = on; }

}  // namespace stepscope::bench
