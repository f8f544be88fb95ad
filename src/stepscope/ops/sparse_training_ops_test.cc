// SparseApply*: only the rows the indices name change (in the variable and in every slot; the
// other rows keep their bits), duplicate indices are summed first, and the touched rows get
// exactly what the dense Apply* gives them for the densified gradient. Plus the dense
// ApplyAdagrad / ApplyRMSProp / ApplyCenteredRMSProp against hand-computed updates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/sparse_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/ops/training_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

constexpr int64_t kRows = 5, kWidth = 3;

// Positive (accumulators must be), distinct per variable; variable 1 small (centered RMSProp's mg:
// ms - mg^2 must stay positive).
std::vector<double> values_for(int which) {
  std::vector<double> v(kRows * kWidth);
  const double scale = which == 1 ? 0.1 : 1.0;
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * (0.5 + 0.1 * which + 0.037 * static_cast<double>(i * (which + 2) % 11));
  return v;
}

using Vars = std::vector<Output>;
struct Case {
  const char* op;
  int num_variables;
  // The dense update of vars with grad, and the sparse one with (values, indices); s: constants' scope.
  std::function<Output(const Scope&, const Vars&, Output grad)> dense;
  std::function<Output(const Scope&, const Vars&, Output values, Output indices)> sparse;
};

Output c(const Scope& s, double v) { return constant(s, v); }

const std::vector<Case>& cases() {
  using S = const Scope&;
  using V = const Vars&;
  static const std::vector<Case> all = {
      {"SparseApplyGradientDescent", 1,
       [](S s, V v, Output g) { return apply_gradient_descent(s, v[0], c(s, 0.1), g); },
       [](S s, V v, Output g, Output i) { return sparse_apply_gradient_descent(s, v[0], c(s, 0.1), g, i); }},
      {"SparseApplyMomentum", 2,
       [](S s, V v, Output g) { return apply_momentum(s, v[0], v[1], c(s, 0.1), g, c(s, 0.9), true); },
       [](S s, V v, Output g, Output i) {
         return sparse_apply_momentum(s, v[0], v[1], c(s, 0.1), g, i, c(s, 0.9), true);
       }},
      {"SparseApplyAdagrad", 2, [](S s, V v, Output g) { return apply_adagrad(s, v[0], v[1], c(s, 0.1), g); },
       [](S s, V v, Output g, Output i) { return sparse_apply_adagrad(s, v[0], v[1], c(s, 0.1), g, i); }},
      {"SparseApplyRMSProp", 3,
       [](S s, V v, Output g) {
         return apply_rms_prop(s, v[0], v[1], v[2], c(s, 0.1), c(s, 0.9), c(s, 0.5), c(s, 1e-10), g);
       },
       [](S s, V v, Output g, Output i) {
         return sparse_apply_rms_prop(s, v[0], v[1], v[2], c(s, 0.1), c(s, 0.9), c(s, 0.5), c(s, 1e-10), g, i);
       }},
      {"SparseApplyCenteredRMSProp", 4,
       [](S s, V v, Output g) {
         return apply_centered_rms_prop(s, v[0], v[1], v[2], v[3], c(s, 0.1), c(s, 0.9), c(s, 0.5), c(s, 1e-10), g);
       },
       [](S s, V v, Output g, Output i) {
         return sparse_apply_centered_rms_prop(s, v[0], v[1], v[2], v[3], c(s, 0.1), c(s, 0.9), c(s, 0.5), c(s, 1e-10),
                                               g, i);
       }},
      {"SparseApplyAdam", 3,
       [](S s, V v, Output g) {
         return apply_adam(s, v[0], v[1], v[2], c(s, 0.9), c(s, 0.999), c(s, 0.01), c(s, 0.9), c(s, 0.999), c(s, 1e-8),
                           g);
       },
       [](S s, V v, Output g, Output i) {
         return sparse_apply_adam(s, v[0], v[1], v[2], c(s, 0.9), c(s, 0.999), c(s, 0.01), c(s, 0.9), c(s, 0.999),
                                  c(s, 1e-8), g, i);
       }},
  };
  return all;
}

bool same_bits(const double* a, const double* b, int64_t n) { return std::memcmp(a, b, n * sizeof(double)) == 0; }

TEST(SparseApplyOps, TouchOnlyTheNamedRowsSumDuplicatesAndMatchTheDenseUpdateThere) {
  const std::vector<int64_t> ids{3, 1, 3, 0};  // row 3 twice; rows 2 and 4 untouched
  const std::vector<double> g{0.3, -0.2, 0.1, 0.05, 0.4, -0.6, -0.1, 0.25, 0.2, 0.7, -0.3, 0.15};
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.op);
    Graph graph;
    Scope s(graph);
    std::vector<Node*> init;
    auto make_set = [&](const std::string& prefix) {
      Vars vars;
      for (int i = 0; i < k.num_variables; ++i) {
        Output v = variable(s.with_op_name(prefix + std::to_string(i)), Shape{kRows, kWidth}, DType::kFloat64);
        init.push_back(assign(s, v, constant(s, values_for(i), Shape{kRows, kWidth})).node);
        vars.push_back(v);
      }
      return vars;
    };
    Vars dense_vars = make_set("dense"), sparse_vars = make_set("sparse");
    Output values = constant(s, g, Shape{4, kWidth});
    Output indices = constant(s, ids, Shape{4});
    Output dense_grad = unsorted_segment_sum(s, values, indices, kRows);
    Node* dense = k.dense(s, dense_vars, dense_grad).node;
    Node* sparse = k.sparse(s, sparse_vars, values, indices).node;
    EXPECT_EQ(sparse->op_type(), k.op);
    Session sess(graph);
    for (Node* n : init) sess.run(n);
    std::vector<Tensor> before = sess.run({}, sparse_vars);
    sess.run(dense);
    sess.run(sparse);
    std::vector<Tensor> d = sess.run({}, dense_vars), sp = sess.run({}, sparse_vars);
    for (int i = 0; i < k.num_variables; ++i) {
      SCOPED_TRACE("variable " + std::to_string(i));
      for (int64_t r = 0; r < kRows; ++r) {
        const double* b = before[i].data<double>() + r * kWidth;
        const double* x = sp[i].data<double>() + r * kWidth;
        const double* y = d[i].data<double>() + r * kWidth;
        if (r == 2 || r == 4) {
          EXPECT_TRUE(same_bits(x, b, kWidth)) << "untouched row " << r << " changed";
        } else {
          for (int64_t j = 0; j < kWidth; ++j) EXPECT_DOUBLE_EQ(x[j], y[j]) << "row " << r << " col " << j;
          if (i == 0) {
            EXPECT_FALSE(same_bits(x, b, kWidth)) << "row " << r << " did not move";
          }
        }
      }
    }
  }
}

TEST(SparseApplyOps, BadIndicesNameTheNodeAndLeaveTheVariableAsItWas) {
  Graph graph;
  Scope s(graph);
  Output var = variable(s.with_op_name("table"), Shape{kRows, kWidth}, DType::kFloat64);
  Node* init = assign(s, var, constant(s, values_for(0), Shape{kRows, kWidth})).node;
  Output ids = placeholder(s, DType::kInt32, Shape{2});
  Output update =
      sparse_apply_gradient_descent(s.with_op_name("update"), var, c(s, 1.0),
                                    constant(s, std::vector<double>(2 * kWidth, 1.0), Shape{2, kWidth}), ids);
  Session sess(graph);
  sess.run(init);
  try {
    sess.run(update, {{ids, Tensor::from_vector<int32_t>({1, 5})}});
    ADD_FAILURE() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), "[SparseApplyGradientDescent] update: indices[1] = 5 is not in [0, 5)");
  }
  Tensor t = sess.run(var);
  EXPECT_TRUE(same_bits(t.data<double>(), values_for(0).data(), kRows * kWidth));
  sess.run(update, {{ids, Tensor::from_vector<int32_t>({1, 4})}});
  EXPECT_DOUBLE_EQ(sess.run(var).data<double>()[4 * kWidth], values_for(0)[4 * kWidth] - 1.0);
}

TEST(SparseApplyOps, ShapeRulesCheckGradAgainstTheVariable) {
  Graph graph;
  Scope s(graph);
  Output var = variable(s.with_op_name("table"), Shape{kRows, kWidth}, DType::kFloat64);
  Output ids = constant(s, std::vector<int32_t>{0, 1}, Shape{2});
  EXPECT_THROW(
      sparse_apply_gradient_descent(s, var, c(s, 1.0), constant(s, std::vector<double>(4, 1.0), Shape{2, 2}), ids),
      InvalidArgumentError);
  EXPECT_THROW(
      sparse_apply_gradient_descent(s, var, c(s, 1.0), constant(s, std::vector<double>(9, 1.0), Shape{3, 3}), ids),
      InvalidArgumentError);
  EXPECT_THROW(sparse_apply_gradient_descent(s, var, c(s, 1.0), constant(s, std::vector<double>(6, 1.0), Shape{2, 3}),
                                             constant(s, std::vector<double>{0, 1}, Shape{2})),
               InvalidArgumentError);
}

// One element through each dense rule, against the formula written out.
TEST(ApplyOps, AdagradAndRMSPropFollowTensorFlowsRules) {
  Graph graph;
  Scope s(graph);
  std::vector<Node*> init;
  auto var = [&](const char* name, double value) {
    Output v = variable(s.with_op_name(name), Shape{1}, DType::kFloat64);
    init.push_back(assign(s, v, constant(s, std::vector<double>{value}, Shape{1})).node);
    return v;
  };
  Output g = constant(s, std::vector<double>{0.5}, Shape{1});
  Output w1 = var("w1", 1.0), acc = var("acc", 0.1);
  Node* adagrad = apply_adagrad(s, w1, acc, c(s, 0.2), g).node;
  Output w2 = var("w2", 1.0), ms = var("ms", 1.0), mom = var("mom", 0.3);
  Node* rms = apply_rms_prop(s, w2, ms, mom, c(s, 0.2), c(s, 0.9), c(s, 0.5), c(s, 1e-10), g).node;
  Output w3 = var("w3", 1.0), mg = var("mg", 0.2), ms3 = var("ms3", 1.0), mom3 = var("mom3", 0.3);
  Node* centered = apply_centered_rms_prop(s, w3, mg, ms3, mom3, c(s, 0.2), c(s, 0.9), c(s, 0.5), c(s, 1e-10), g).node;
  Session sess(graph);
  for (Node* n : init) sess.run(n);
  sess.run(adagrad);
  sess.run(rms);
  sess.run(centered);
  auto at = [&](Output v) { return sess.run(v).data<double>()[0]; };
  // Adagrad: accum = 0.1 + 0.25 = 0.35; w = 1 - 0.2 * 0.5 / sqrt(0.35)
  EXPECT_DOUBLE_EQ(at(acc), 0.35);
  EXPECT_DOUBLE_EQ(at(w1), 1.0 - 0.2 * 0.5 / std::sqrt(0.35));
  // RMSProp: ms = 0.9 + 0.1 * 0.25 = 0.925; mom = 0.5 * 0.3 + 0.2 * 0.5 / sqrt(0.925 + 1e-10); w = 1 - mom
  const double rms_mom = 0.5 * 0.3 + 0.2 * 0.5 / std::sqrt(0.925 + 1e-10);
  EXPECT_DOUBLE_EQ(at(ms), 0.925);
  EXPECT_DOUBLE_EQ(at(mom), rms_mom);
  EXPECT_DOUBLE_EQ(at(w2), 1.0 - rms_mom);
  // Centered: mg = 0.9 * 0.2 + 0.1 * 0.5 = 0.23; mom = 0.15 + 0.1 / sqrt(0.925 - 0.23^2 + 1e-10)
  const double centered_mom = 0.5 * 0.3 + 0.2 * 0.5 / std::sqrt(0.925 - 0.23 * 0.23 + 1e-10);
  EXPECT_DOUBLE_EQ(at(mg), 0.9 * 0.2 + 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(at(mom3), centered_mom);
  EXPECT_DOUBLE_EQ(at(w3), 1.0 - centered_mom);
}

}  // namespace
}  // namespace stepscope
