// What every op must declare, checked over the whole registry, so that adding an op tells its
// author what is missing: a doc, a shape rule, a kernel, a FLOP rule in the arithmetic families,
// and a gradient rule or an explicit `not_differentiable`. Then every gradient rule is checked
// numerically, table-driven: one row per (op, shapes), and a row is required for every op that
// has a gradient rule.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/conv_ops.h"
#include "stepscope/ops/registry.h"
#include "stepscope/testing/gradient_checker.h"

namespace stepscope {
namespace {

using testing::count_ops;
using testing::distinct_tensor;
using testing::expect_gradient_matches;
using testing::random_tensor;

using RegisterFamily = void (*)(OpRegistry&);
struct Family {
  const char* name;
  RegisterFamily register_ops;
  bool arithmetic;  // its ops compute on numbers: each must say how many float ops it does
};
const Family kFamilies[] = {
    {"array", &register_array_ops, false},
    {"collective", &register_collective_ops, true},
    {"control", &register_control_ops, false},
    {"data", &register_data_ops, false},
    {"linalg", &register_linalg_ops, true},
    {"math", &register_math_ops, true},
    {"metric", &register_metric_ops, true},
    {"nn", &register_nn_ops, true},
    {"random", &register_random_ops, false},
    {"reduction", &register_reduction_ops, true},
    {"sparse", &register_sparse_ops, true},
    {"state", &register_state_ops, false},
    {"summary", &register_summary_ops, false},
    {"training", &register_training_ops, true},
};

TEST(OpRegistry, EveryOpDeclaresWhatTheRuntimeProfilerAndAutodiffNeed) {
  size_t ops = 0;
  for (const Family& family : kFamilies) {
    OpRegistry registry;
    family.register_ops(registry);
    for (const std::string& name : registry.names()) {
      SCOPED_TRACE(std::string(family.name) + " op " + name);
      const OpDef& def = registry.get(name);
      ++ops;
      EXPECT_FALSE(def.doc.empty()) << "give it a doc: what it computes, its inputs and attrs";
      EXPECT_NE(def.shape, nullptr) << "give it a shape rule";
      EXPECT_NE(def.kernel, nullptr) << "give it a CPU kernel";
      if (family.arithmetic) {
        EXPECT_NE(def.flops, nullptr) << "give it a FLOP rule (tfprof's float_ops), or &no_float_ops when it only "
                                         "moves data";
      }
      EXPECT_TRUE(def.gradient != nullptr || def.not_differentiable)
          << "give it a gradient rule, or declare .not_differentiable = true";
      EXPECT_FALSE(def.gradient != nullptr && def.not_differentiable) << "a gradient rule and not_differentiable";
    }
  }
  // Every family above is every family the runtime registers.
  EXPECT_EQ(ops, op_registry().names().size());
}

// One numerical gradient check: inputs are float64 placeholders of `shapes`, fed values from
// random_tensor(shape, seed, lo, hi, min_abs) (distinct_tensor when `distinct`: max-like ops must
// see no ties); every input's gradient is checked.
struct GradientRow {
  const char* op;
  std::vector<Shape> shapes;
  std::function<Output(const Scope&, const std::vector<Output>&)> build;
  double lo = -1, hi = 1, min_abs = 0;
  bool distinct = false;
  testing::GradientExpectation expectation = {};
};

Output int64_vector(const Scope& s, std::vector<int64_t> values) { return constant(s, Tensor::from_vector(values)); }

const std::vector<GradientRow>& gradient_rows() {
  using O = const std::vector<Output>&;
  using S = const Scope&;
  static const std::vector<GradientRow> rows = {
      // math
      {"Add", {{2, 3}, {3}}, [](S s, O x) { return add(s, x[0], x[1]); }},
      {"Sub", {{2, 3}, {2, 1}}, [](S s, O x) { return sub(s, x[0], x[1]); }},
      {"Mul", {{2, 3}, {2, 3}}, [](S s, O x) { return mul(s, x[0], x[1]); }},
      {"Div", {{2, 3}, {3}}, [](S s, O x) { return div(s, x[0], x[1]); }, 0.5, 2},
      {"DivNoNan", {{2, 3}, {3}}, [](S s, O x) { return div_no_nan(s, x[0], x[1]); }, 0.5, 2},
      // Independent uniform values: no ties, and none within a step of another (fixed seeds).
      {"Maximum", {{2, 3}, {2, 3}}, [](S s, O x) { return maximum(s, x[0], x[1]); }},
      {"Minimum", {{2, 3}, {3}}, [](S s, O x) { return minimum(s, x[0], x[1]); }},
      {"Neg", {{4}}, [](S s, O x) { return neg(s, x[0]); }},
      {"Square", {{2, 3}}, [](S s, O x) { return square(s, x[0]); }},
      {"Sqrt", {{2, 3}}, [](S s, O x) { return sqrt(s, x[0]); }, 0.5, 2},
      {"Rsqrt", {{2, 3}}, [](S s, O x) { return rsqrt(s, x[0]); }, 0.5, 2},
      {"Exp", {{2, 3}}, [](S s, O x) { return exp(s, x[0]); }},
      {"Log", {{2, 3}}, [](S s, O x) { return log(s, x[0]); }, 0.5, 2},
      {"Tanh", {{2, 3}}, [](S s, O x) { return tanh(s, x[0]); }},
      {"Sigmoid", {{2, 3}}, [](S s, O x) { return sigmoid(s, x[0]); }},
      {"CheckNumerics", {{2, 3}}, [](S s, O x) { return check_numerics(s, x[0], "bad"); }},
      {"SumToShape", {{2, 3}}, [](S s, O x) { return sum_to_shape(s, x[0], int64_vector(s, {3})); }},
      {"BroadcastTo",
       {{3}},
       [](S s, O x) {
         return broadcast_to(s, x[0], int64_vector(s, {2, 3}));
       }},
      // Through float32 and back: rounding (6e-8 relative) over a 1e-2 step, on a linear map.
      {"Cast",
       {{2, 3}},
       [](S s, O x) { return cast(s, cast(s, x[0], DType::kFloat32), DType::kFloat64); },
       -1,
       1,
       0,
       false,
       {.delta = 1e-2, .tolerance = 1e-5}},
      // array
      {"Identity", {{2, 3}}, [](S s, O x) { return identity(s, x[0]); }},
      {"Reshape",
       {{2, 3}},
       [](S s, O x) {
         return reshape(s, x[0], std::vector<int64_t>{3, 2});
       }},
      {"Transpose",
       {{2, 3, 4}},
       [](S s, O x) {
         return transpose(s, x[0], {2, 0, 1});
       }},
      {"ConcatV2", {{2, 3}, {2, 2}}, [](S s, O x) { return concat(s, {x[0], x[1]}, 1); }},
      {"Slice", {{3, 4}}, [](S s, O x) { return slice(s, x[0], {1, 1}, {2, -1}); }},
      // Both parts, weighted differently: a swapped part would show.
      {"Split", {{4, 3}}, [](S s, O x) { auto p = split(s, x[0], 2, 0); return add(s, mul(s, p[0], 2.0), p[1]); }},
      {"Fill",
       {{}},
       [](S s, O x) {
         return fill(s, std::vector<int64_t>{2, 3}, x[0]);
       }},
      // Zero Jacobians: the rules must give zeros (or nothing), not garbage.
      {"ZerosLike", {{2, 3}}, [](S s, O x) { return add(s, zeros_like(s, x[0]), x[0]); }},
      {"OnesLike", {{2, 3}}, [](S s, O x) { return mul(s, ones_like(s, x[0]), x[0]); }},
      // collective (one process: each is the identity, and so must its gradient be)
      {"Allreduce",
       {{2, 3}, {3}},
       [](S s, O x) {
         auto y = allreduce(s, {x[0], x[1]}, ReduceOp::kAverage);
         return add(s, mul(s, y[0], 2.0), y[1]);
       }},
      {"Broadcast", {{2, 3}}, [](S s, O x) { return broadcast(s, x[0], 0); }},
      {"Reduce", {{2, 3}}, [](S s, O x) { return reduce(s, x[0], 0); }},
      {"Allgather", {{2, 3}}, [](S s, O x) { return allgather(s, x[0]); }},
      {"ReduceScatter", {{2, 3}}, [](S s, O x) { return reduce_scatter(s, x[0], x[0]); }},
      // sparse (ids with duplicates: their gradients add up)
      {"Gather",
       {{4, 3}},
       [](S s, O x) { return gather(s, x[0], constant(s, std::vector<int32_t>{2, 0, 2, 3}, Shape{2, 2})); }},
      {"UnsortedSegmentSum",
       {{4, 3}},
       [](S s, O x) { return unsorted_segment_sum(s, x[0], int64_vector(s, {1, 0, 1, 4}), 5); }},
      // linalg
      {"MatMul", {{2, 3}, {3, 4}}, [](S s, O x) { return matmul(s, x[0], x[1]); }},
      {"MatMul", {{3, 2}, {4, 3}}, [](S s, O x) { return matmul(s, x[0], x[1], true, true); }},
      // reduction
      {"Sum", {{2, 3, 4}}, [](S s, O x) { return reduce_sum(s, x[0], {1}); }},
      {"Mean",
       {{2, 3, 4}},
       [](S s, O x) {
         return reduce_mean(s, x[0], {0, 2}, true);
       }},
      {"Max", {{3, 4}}, [](S s, O x) { return reduce_max(s, x[0], {1}); }, -1, 1, 0, true},
      // nn
      {"Relu", {{3, 4}}, [](S s, O x) { return relu(s, x[0]); }, -1, 1, 0.1},
      {"BiasAdd", {{2, 3}, {3}}, [](S s, O x) { return bias_add(s, x[0], x[1]); }},
      {"Softmax", {{2, 4}}, [](S s, O x) { return softmax(s, x[0]); }},
      {"LogSoftmax", {{2, 4}}, [](S s, O x) { return log_softmax(s, x[0]); }},
      {"SoftmaxCrossEntropyWithLogits",
       {{2, 4}, {2, 4}},
       // Label rows made distributions, which the rule assumes (as TensorFlow's: softmax - labels).
       [](S s, O x) {
         return softmax_cross_entropy_with_logits(s, div(s, x[0], reduce_sum(s, x[0], {1}, true)), x[1]);
       },
       0.1,
       1},
      {"SparseSoftmaxCrossEntropyWithLogits",
       {{3, 4}},
       [](S s, O x) {
         return sparse_softmax_cross_entropy_with_logits(s, int64_vector(s, {1, 3, 0}), x[0]);
       }},
      {"Conv2D",
       {{2, 4, 4, 2}, {2, 2, 2, 3}},
       [](S s, O x) {
         return conv2d(s, x[0], x[1], {1, 1, 1, 1}, "SAME");
       }},
      {"Conv2D",
       {{1, 5, 5, 1}, {3, 3, 1, 2}},
       [](S s, O x) {
         return conv2d(s, x[0], x[1], {1, 2, 2, 1}, "VALID");
       }},
      {"MaxPool",
       {{1, 4, 4, 2}},
       [](S s, O x) {
         return max_pool(s, x[0], {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
       },
       -1,
       1,
       0,
       true},
      {"AvgPool", {{1, 5, 4, 2}}, [](S s, O x) { return avg_pool(s, x[0], {1, 3, 2, 1}, {1, 2, 2, 1}, "SAME"); }},
      {"FusedBatchNorm",
       {{2, 3, 3, 2}, {2}, {2}},
       [](S s, O x) { return fused_batch_norm(s, x[0], x[1], x[2], Output{}, Output{}, 1e-3, true).y; }},
      {"SigmoidCrossEntropyWithLogits",
       {{2, 3}, {2, 3}},
       [](S s, O x) { return sigmoid_cross_entropy_with_logits(s, x[0], x[1]); }},
      // random. Rate 0: a run draws a new mask, and the checker's runs must see the same one (the
      // gradient's use of the step's mask is checked in random_ops_test.cc).
      {"Dropout", {{2, 3}}, [](S s, O x) { return dropout(s, x[0], 0.0, 1); }},
  };
  return rows;
}

TEST(OpRegistry, EveryGradientRuleMatchesNumericalDifferences) {
  unsigned seed = 1;
  for (const GradientRow& row : gradient_rows()) {
    std::string shapes;
    for (const Shape& shape : row.shapes) shapes += " " + shape.to_string();
    SCOPED_TRACE(std::string(row.op) + shapes);
    Graph g;
    Scope s(g);
    std::vector<Output> inputs;
    std::vector<Tensor> values;
    for (const Shape& shape : row.shapes) {
      inputs.push_back(placeholder(s, DType::kFloat64, shape));
      values.push_back(row.distinct ? distinct_tensor(shape, seed++)
                                    : random_tensor(shape, seed++, row.lo, row.hi, row.min_abs));
    }
    const Output y = row.build(s, inputs);
    ASSERT_GT(count_ops(g, row.op), 0) << "the row's graph has no " << row.op << " node";
    for (size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE("d/d input " + std::to_string(i));
      FeedList others;
      for (size_t j = 0; j < inputs.size(); ++j)
        if (j != i) others.emplace_back(inputs[j], values[j]);
      expect_gradient_matches(inputs[i], values[i], y, others, row.expectation);
    }
  }
}

TEST(OpRegistry, EveryOpWithAGradientRuleHasARowInTheNumericalCheck) {
  std::set<std::string> checked;
  for (const GradientRow& row : gradient_rows()) checked.insert(row.op);
  for (const std::string& name : op_registry().names()) {
    if (op_registry().get(name).gradient != nullptr) {
      EXPECT_TRUE(checked.count(name)) << name << " has a gradient rule: add a row for it to gradient_rows()";
    }
  }
}

}  // namespace
}  // namespace stepscope
