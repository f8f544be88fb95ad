// Test-only, for the tools' tests: the command line run in-process (cli), and a small model
// trained for real for those that need traced steps, profiles and RunMetadata files (TracedMlp:
// dense 8 -> 16 (ReLU) -> 4, softmax cross-entropy, GradientDescent(0.1), one fixed batch of 32).
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/runtime/session.h"
#include "stepscope/tools/cli.h"
#include "stepscope/train/layers.h"
#include "stepscope/train/optimizer.h"

namespace stepscope::testing {

// What `stepscope ARGS...` printed and returned.
struct CliResult {
  int code;
  std::string out, err;
};
inline CliResult cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

struct TracedMlp {
  Graph graph;
  Output x, y, loss;
  Node* train = nullptr;
  std::unique_ptr<Session> session;
  Tensor xs{DType::kFloat32, Shape{32, 8}};
  Tensor ys{DType::kInt32, Shape{32}};

  TracedMlp() {
    Scope root(graph);
    x = placeholder(root.with_op_name("x"), DType::kFloat32, Shape{-1, 8});
    y = placeholder(root.with_op_name("y"), DType::kInt32, Shape{-1});
    Output h = nn::dense(root.with_name_scope("hidden"), x, 16, nn::Activation::relu, {.seed = 1});
    Output logits = nn::dense(root.with_name_scope("logits"), h, 4, nn::Activation::none, {.seed = 2});
    loss = reduce_mean(root.with_name_scope("loss"), sparse_softmax_cross_entropy_with_logits(root, y, logits));
    train = GradientDescentOptimizer(0.1).minimize(root, loss);
    session = std::make_unique<Session>(graph);
    session->run(global_variables_initializer(root));
    for (float& v : xs.flat<float>()) v = 0.5f;
    for (int32_t& v : ys.flat<int32_t>()) v = 1;
  }
  // One training step, fully traced; returns its RunMetadata (and its loss in *loss_value).
  RunMetadata step(float* loss_value = nullptr) {
    RunOptions traced;
    traced.trace_level = TraceLevel::kFullTrace;
    RunMetadata metadata;
    const std::vector<Tensor> out = session->run({{x, xs}, {y, ys}}, {loss}, {train}, traced, &metadata);
    if (loss_value) *loss_value = out[0].flat<float>()[0];
    return metadata;
  }
};

}  // namespace stepscope::testing
