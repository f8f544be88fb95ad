// The models of the benchmark suite (bench/model_bench.cc, BENCHMARKS.md "Model suite"): each
// one a training graph in stepscope, built on random inputs and labels with a fixed seed, with
// the figures the suite reports computed from its definition in one place. The same networks in
// PyTorch are in bench/pytorch_models.py (same layers, same parameter count).
//
// A new model is one entry of bench_models() (models.cc): a name, a line of description, the
// steps a run times by default, and a builder.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "stepscope/graph/graph.h"
#include "stepscope/runtime/session.h"

namespace stepscope::bench {

// One model's training step, ready to run: session.run(init) once, then
// session.run(feeds, {}, {train}) per step.
struct BenchModel {
  Graph g;
  Node* train = nullptr;  // forward + loss + backward + the optimizer's update (and the update ops)
  Node* init = nullptr;   // global_variables_initializer
  Output loss;            // the batch's loss (mean softmax cross-entropy, or the model's own)
  FeedList feeds;         // the batch (random, fixed seed), fed on every step
  int64_t batch = 0;
  // The multiply-adds of the step's GEMMs and convolutions, counted from the layers (2*M*N*K
  // per product; a convolution as its im2col product): the forward pass, the gradient of every
  // weight (the same count again) and of every layer's input (again, but not for the first
  // layer, whose input is data and needs none). Elementwise ops, pooling and the loss are left
  // out, and so are embedding lookups (a layer after one needs its input's gradient: the rows').
  // An LSTM step is its cell's product on concat(x, h), its input gradient only for h. PyTorch
  // runs the same products, so the driver uses this figure for both sides.
  double flops_per_step = 0;
  // Trainable parameters (weights and biases); equal to the PyTorch model's, but for the second
  // bias of PyTorch's LSTM (bench/pytorch_models.py reports it as extra_parameters).
  int64_t parameters = 0;
};

struct ModelEntry {
  std::string_view name;
  std::string_view description;
  int default_steps;  // timed steps of a run when --steps is not given (a few seconds at 1 thread)
  std::unique_ptr<BenchModel> (*build)();
};

// The suite, in the order the table prints it.
std::span<const ModelEntry> bench_models();
// Models built after this train data-parallel: their optimizer wrapped in DistributedOptimizer
// (gradients averaged over the ranks of an mpirun job; dist::init() first). Each rank keeps its
// own batch, so a job of N ranks trains on N batches a step.
void set_distributed_training(bool on);
// The entry called `name`, or nullptr.
const ModelEntry* find_bench_model(std::string_view name);

// The MLP 784-256-256-10 (ReLU), batch 64, SGD(0.1): the model of train_bench's BM_MlpTrainStep
// and of bench/pytorch_models.py --model mlp.
std::unique_ptr<BenchModel> build_mlp();

}  // namespace stepscope::bench
