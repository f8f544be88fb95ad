#include "stepscope/train/metrics.h"

#include <algorithm>

#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/metric_ops.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/train/variables.h"

namespace stepscope::metrics {

namespace {

Variable zeros(const Scope& scope, const std::string& name, int64_t size, CallSite site) {
  Tensor value = size < 0 ? Tensor(DType::kFloat32, Shape{}) : Tensor(DType::kFloat32, Shape{size});
  for (float& v : value.flat<float>()) v = 0;
  return make_local_variable(scope, name, constant(scope.with_op_name(name + "/initial_value"), value, site), site);
}

Output as_float(const Scope& scope, Output x, CallSite site) {
  return x.dtype() == DType::kFloat32 ? x : cast(scope, x, DType::kFloat32, site);
}

void check_weights(const Output& weights, const Output& values) {
  if (!weights) return;
  const Shape& w = weights.shape();
  const Shape& v = values.shape();
  if (w.known_rank() && v.known_rank() && w.rank() != 0 && w.rank() != v.rank())
    throw InvalidArgumentError("weights shape " + w.to_string() + " can not be broadcast to values shape " +
                               v.to_string() + ": its rank must be 0 or " + std::to_string(v.rank()));
}

// A confusion count kept at each threshold: the variable, and the op adding one batch's counts.
struct Counts {
  ConfusionAtThresholds value, update;
};

Counts confusion_counts(const Scope& s, Output labels, Output predictions, const std::vector<float>& thresholds,
                        Output weights, CallSite site) {
  const auto n = static_cast<int64_t>(thresholds.size());
  const ConfusionAtThresholds batch = confusion_matrix_at_thresholds(
      s, labels, predictions, thresholds, weights ? as_float(s, weights, site) : Output{}, site);
  Counts c;
  auto keep = [&](const char* name, Output batch_count, Output& value, Output& update) {
    Variable v = zeros(s, name, n, site);
    value = v.value();
    update = assign_add(s.with_op_name(std::string(name) + "/AssignAdd"), v.value(), batch_count, site);
  };
  keep("true_positives", batch.true_positives, c.value.true_positives, c.update.true_positives);
  keep("false_negatives", batch.false_negatives, c.value.false_negatives, c.update.false_negatives);
  keep("true_negatives", batch.true_negatives, c.value.true_negatives, c.update.true_negatives);
  keep("false_positives", batch.false_positives, c.value.false_positives, c.update.false_positives);
  return c;
}

// mean() under the metric's own name scope `s`.
Metric mean_under(const Scope& s, Output values, Output weights, CallSite site) {
  check_weights(weights, values);
  Variable total = zeros(s, "total", -1, site);
  Variable count = zeros(s, "count", -1, site);
  values = as_float(s, values, site);
  Output num_values;
  if (weights) {
    // Broadcast the weights to the values' shape, so a scalar weight counts once per value.
    const Output w = mul(s, ones_like(s, values, site), as_float(s, weights, site), site);
    values = mul(s, values, w, site);
    num_values = reduce_sum(s, w, {}, false, site);
  } else {
    num_values = reduce_sum(s, ones_like(s, values, site), {}, false, site);
  }
  const Output update_total =
      assign_add(s.with_op_name("total/AssignAdd"), total.value(), reduce_sum(s, values, {}, false, site), site);
  const Output update_count = assign_add(s.with_op_name("count/AssignAdd"), count.value(), num_values, site);
  Metric m;
  m.value = div_no_nan(s.with_op_name("value"), total.value(), maximum(s, count.value(), 0.0, site), site);
  m.update_op = div_no_nan(s.with_op_name("update_op"), update_total, maximum(s, update_count, 0.0, site), site);
  return m;
}

}  // namespace

Metric mean(const Scope& scope, Output values, Output weights, const std::string& name, CallSite site) {
  if (!values) throw InvalidArgumentError("metrics::mean: values is null");
  return mean_under(scope.with_name_scope(name), values, weights, site);
}

Metric accuracy(const Scope& scope, Output labels, Output predictions, Output weights, const std::string& name,
                CallSite site) {
  if (!labels || !predictions) throw InvalidArgumentError("metrics::accuracy: labels or predictions is null");
  const Scope s = scope.with_name_scope(name);
  if (predictions.dtype() != labels.dtype()) predictions = cast(s, predictions, labels.dtype(), site);
  predictions = assert_same_shape(s, predictions, labels, "predictions", "labels", site);
  const Output is_correct = cast(s, equal(s, predictions, labels, site), DType::kFloat32, site);
  // As TF: the variables are "accuracy/total" and "accuracy/count".
  return mean_under(s, is_correct, weights, site);
}

namespace {

Metric ratio_metric(const Scope& scope, Output labels, Output predictions, Output weights, const std::string& name,
                    bool of_predicted, CallSite site) {
  if (!labels || !predictions) throw InvalidArgumentError("metrics::" + name + ": labels or predictions is null");
  const Scope s = scope.with_name_scope(name);
  if (predictions.dtype() != DType::kBool) predictions = cast(s, predictions, DType::kBool, site);
  // One threshold below true (1) and above false (0): counts of predicted-true values.
  const Counts c = confusion_counts(s, labels, predictions, {0.5f}, weights, site);
  auto ratio = [&](const ConfusionAtThresholds& k, const char* op_name) {
    const Output other = of_predicted ? k.false_positives : k.false_negatives;
    return reshape(s,
                   div_no_nan(s.with_op_name(op_name), k.true_positives, add(s, k.true_positives, other, site), site),
                   std::vector<int64_t>{}, site);
  };
  return {ratio(c.value, "value"), ratio(c.update, "update_op")};
}

}  // namespace

Metric precision(const Scope& scope, Output labels, Output predictions, Output weights, const std::string& name,
                 CallSite site) {
  return ratio_metric(scope, labels, predictions, weights, name, true, site);
}

Metric recall(const Scope& scope, Output labels, Output predictions, Output weights, const std::string& name,
              CallSite site) {
  return ratio_metric(scope, labels, predictions, weights, name, false, site);
}

Metric auc(const Scope& scope, Output labels, Output predictions, Output weights, AucOptions options,
           const std::string& name, CallSite site) {
  if (!labels || !predictions) throw InvalidArgumentError("metrics::auc: labels or predictions is null");
  if (options.curve != "ROC" && options.curve != "PR")
    throw InvalidArgumentError("metrics::auc: Curve must be either ROC or PR. Curve " + options.curve + " is unknown.");
  constexpr float kEpsilon = 1e-7f;  // TF's kepsilon: predictions of exactly 0 or 1 fall inside
  std::vector<float> thresholds = {0.0f - kEpsilon};
  if (!options.thresholds.empty()) {
    std::vector<float> sorted = options.thresholds;
    std::sort(sorted.begin(), sorted.end());
    thresholds.insert(thresholds.end(), sorted.begin(), sorted.end());
  } else {
    if (options.num_thresholds < 2)
      throw InvalidArgumentError("metrics::auc: num_thresholds must be at least 2, got " +
                                 std::to_string(options.num_thresholds));
    for (int i = 0; i < options.num_thresholds - 2; ++i)
      thresholds.push_back(static_cast<float>((i + 1) * 1.0 / (options.num_thresholds - 1)));
  }
  thresholds.push_back(1.0f + kEpsilon);
  const Scope s = scope.with_name_scope(name);
  const Counts c = confusion_counts(s, labels, predictions, thresholds, weights, site);
  return {auc_from_confusion(s.with_op_name("value"), c.value, options.curve, options.summation_method, site),
          auc_from_confusion(s.with_op_name("update_op"), c.update, options.curve, options.summation_method, site)};
}

}  // namespace stepscope::metrics
