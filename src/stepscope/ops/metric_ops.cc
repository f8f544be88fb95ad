#include "stepscope/ops/metric_ops.h"

#include <algorithm>
#include <cmath>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

namespace {

bool is_label_dtype(DType d) { return d != DType::kString; }

// ----- AssertSameShape ---------------------------------------------------------------------

std::string shapes_differ(const Node& node, const Shape& x, const Shape& y) {
  return node.attrs().get<std::string>("x_name") + " shape " + x.to_string() + " and " +
         node.attrs().get<std::string>("y_name") + " shape " + y.to_string() + " are not the same";
}

void assert_same_shape_shape(ShapeContext& c) {
  if (!c.input_shape(0).compatible_with(c.input_shape(1)))
    c.fail(shapes_differ(c.node(), c.input_shape(0), c.input_shape(1)));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
}

void assert_same_shape_kernel(KernelContext& c) {
  if (c.input(0).shape() != c.input(1).shape()) c.fail(shapes_differ(c.node(), c.input(0).shape(), c.input(1).shape()));
  c.set_output(0, c.input(0));
}

// ----- ConfusionMatrixAtThresholds ---------------------------------------------------------
// Inputs (labels, predictions, weights); attr thresholds (float32 [T], sorted). Outputs tp, fn,
// tn, fp, float32 [T] each.

void confusion_shape(ShapeContext& c) {
  if (!is_label_dtype(c.input_dtype(0))) c.fail("labels must be bool or numeric, got string");
  const DType p = c.input_dtype(1);
  if (p != DType::kFloat32 && p != DType::kFloat64 && p != DType::kBool)
    c.fail("predictions must be float32, float64 or bool, got " + std::string(dtype_name(p)));
  const Shape& labels = c.input_shape(0);
  const Shape& predictions = c.input_shape(1);
  if (!labels.compatible_with(predictions))
    c.fail("labels shape " + labels.to_string() + " and predictions shape " + predictions.to_string() +
           " are not the same");
  const Shape& weights = c.input_shape(2);
  if (weights.known_rank() && weights.rank() != 0 && !weights.compatible_with(predictions))
    c.fail("weights shape " + weights.to_string() + " is neither a scalar nor predictions shape " +
           predictions.to_string());
  const DType w = c.input_dtype(2);
  if (w != DType::kFloat32 && w != DType::kFloat64)
    c.fail("weights must be float32 or float64, got " + std::string(dtype_name(w)));
  const Tensor& thresholds = c.node().attrs().get<Tensor>("thresholds");
  if (thresholds.dtype() != DType::kFloat32 || thresholds.rank() != 1 || thresholds.num_elements() < 1)
    c.fail("thresholds must be a non-empty float32 vector");
  auto t = thresholds.flat<float>();
  if (!std::is_sorted(t.begin(), t.end())) c.fail("thresholds must be sorted");
  for (int i = 0; i < 4; ++i) c.set_output(i, DType::kFloat32, Shape{thresholds.num_elements()});
}

template <typename T>
double as_double(const Tensor& t, int64_t i) {
  return static_cast<double>(t.data<T>()[i]);
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return as_double<float>(t, i);
    case DType::kFloat64:
      return as_double<double>(t, i);
    case DType::kInt32:
      return as_double<int32_t>(t, i);
    case DType::kInt64:
      return as_double<int64_t>(t, i);
    case DType::kBool:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    default:
      return 0.0;
  }
}

// One pass over the batch: a prediction p is positive at threshold t[j] exactly when t[j] < p,
// i.e. for j below k = (index of the first threshold >= p). So each prediction adds its weight to
// bucket k, and the counts at each threshold are suffix sums of the buckets: O(n log T + T).
void confusion_kernel(KernelContext& c) {
  const Tensor& labels = c.input(0);
  const Tensor& predictions = c.input(1);
  const Tensor& weights = c.input(2);
  if (labels.shape() != predictions.shape())
    c.fail("labels shape " + labels.shape().to_string() + " and predictions shape " + predictions.shape().to_string() +
           " are not the same");
  const bool scalar_weight = weights.rank() == 0;
  if (!scalar_weight && weights.shape() != predictions.shape())
    c.fail("weights shape " + weights.shape().to_string() + " is neither a scalar nor predictions shape " +
           predictions.shape().to_string());
  auto thresholds = c.attrs().get<Tensor>("thresholds").flat<float>();
  const int64_t num_thresholds = static_cast<int64_t>(thresholds.size());
  std::vector<double> positive(num_thresholds + 1, 0.0), negative(num_thresholds + 1, 0.0);
  const int64_t n = predictions.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const double p = element(predictions, i);
    if (!(p >= 0.0 && p <= 1.0))
      c.fail("predictions must be in [0, 1]: predictions[" + std::to_string(i) + "] = " + std::to_string(p));
    const double w = element(weights, scalar_weight ? 0 : i);
    const int64_t k = std::lower_bound(thresholds.begin(), thresholds.end(), p,
                                       [](float t, double v) { return static_cast<double>(t) < v; }) -
                      thresholds.begin();
    (element(labels, i) != 0.0 ? positive : negative)[k] += w;
  }
  float* tp = c.allocate_output(0, DType::kFloat32, Shape{num_thresholds}).data<float>();
  float* fn = c.allocate_output(1, DType::kFloat32, Shape{num_thresholds}).data<float>();
  float* tn = c.allocate_output(2, DType::kFloat32, Shape{num_thresholds}).data<float>();
  float* fp = c.allocate_output(3, DType::kFloat32, Shape{num_thresholds}).data<float>();
  double pos_total = 0, neg_total = 0;
  for (int64_t k = 0; k <= num_thresholds; ++k) {
    pos_total += positive[k];
    neg_total += negative[k];
  }
  double pos_above = pos_total, neg_above = neg_total;  // weight in buckets > j
  for (int64_t j = 0; j < num_thresholds; ++j) {
    pos_above -= positive[j];
    neg_above -= negative[j];
    tp[j] = static_cast<float>(pos_above);
    fn[j] = static_cast<float>(pos_total - pos_above);
    fp[j] = static_cast<float>(neg_above);
    tn[j] = static_cast<float>(neg_total - neg_above);
  }
}

int64_t confusion_flops(const CostContext& c) { return std::max<int64_t>(0, c.input_shapes[1].num_elements()) * 2; }

// ----- AucFromConfusion --------------------------------------------------------------------

void check_auc_attrs(const std::string& curve, const std::string& method, const std::string& node) {
  if (curve != "ROC" && curve != "PR")
    throw InvalidArgumentError("[AucFromConfusion] " + node + ": Curve must be either ROC or PR. Curve " + curve +
                               " is unknown.");
  if (method != "trapezoidal" && method != "careful_interpolation" && method != "minoring" && method != "majoring")
    throw InvalidArgumentError("[AucFromConfusion] " + node + ": Invalid summation_method: " + method +
                               " summation_method should be 'trapezoidal', 'careful_interpolation', 'minoring', "
                               "or 'majoring'.");
}

void auc_shape(ShapeContext& c) {
  check_auc_attrs(c.node().attrs().get<std::string>("curve"), c.node().attrs().get<std::string>("summation_method"),
                  c.node().name());
  for (int i = 0; i < 4; ++i) {
    c.expect_dtype(i, DType::kFloat32);
    c.expect_rank(i, 1);
    if (!c.input_shape(i).compatible_with(c.input_shape(0)))
      c.fail("the four counts must have one shape, got " + c.input_shape(0).to_string() + " and " +
             c.input_shape(i).to_string());
  }
  c.set_output(0, DType::kFloat32, Shape{});
}

// TF's compute_auc / interpolate_pr_auc, in double.
double auc(std::span<const float> tp, std::span<const float> fn, std::span<const float> tn, std::span<const float> fp,
           const std::string& curve, const std::string& method) {
  const size_t n = tp.size();
  double sum = 0;
  if (curve == "PR" && method == "careful_interpolation") {
    auto div_no_nan = [](double a, double b) { return b == 0 ? 0.0 : a / b; };
    for (size_t i = 0; i + 1 < n; ++i) {
      const double dtp = tp[i] - tp[i + 1];
      const double p_a = tp[i] + fp[i], p_b = tp[i + 1] + fp[i + 1];
      const double slope = div_no_nan(dtp, std::max(p_a - p_b, 0.0));
      const double intercept = tp[i + 1] - slope * p_b;
      const double ratio = (p_a > 0 && p_b > 0) ? div_no_nan(p_a, std::max(p_b, 0.0)) : 1.0;
      sum += div_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max<double>(tp[i + 1] + fn[i + 1], 0.0));
    }
    return sum;
  }
  constexpr double kEpsilon = 1e-6;
  std::vector<double> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    const double recall = (tp[i] + kEpsilon) / (tp[i] + fn[i] + kEpsilon);
    if (curve == "ROC") {
      x[i] = fp[i] / (fp[i] + tn[i] + kEpsilon);
      y[i] = recall;
    } else {
      x[i] = recall;
      y[i] = (tp[i] + kEpsilon) / (tp[i] + fp[i] + kEpsilon);
    }
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const double height = method == "minoring"   ? std::min(y[i], y[i + 1])
                          : method == "majoring" ? std::max(y[i], y[i + 1])
                                                 : (y[i] + y[i + 1]) / 2;
    sum += (x[i] - x[i + 1]) * height;
  }
  return sum;
}

void auc_kernel(KernelContext& c) {
  const int64_t n = c.input(0).num_elements();
  for (int i = 1; i < 4; ++i)
    if (c.input(i).num_elements() != n)
      c.fail("the four counts must have one shape, got " + c.input(0).shape().to_string() + " and " +
             c.input(i).shape().to_string());
  const double value =
      auc(c.input(0).flat<float>(), c.input(1).flat<float>(), c.input(2).flat<float>(), c.input(3).flat<float>(),
          c.attrs().get<std::string>("curve"), c.attrs().get<std::string>("summation_method"));
  c.allocate_output(0, DType::kFloat32, Shape{}).data<float>()[0] = static_cast<float>(value);
}

int64_t auc_flops(const CostContext& c) { return std::max<int64_t>(0, c.input_shapes[0].num_elements()) * 8; }

}  // namespace

Output assert_same_shape(const Scope& scope, Output x, Output y, const std::string& x_name, const std::string& y_name,
                         CallSite site) {
  return scope.add_node(op_def("AssertSameShape"), {x, y}, {{"x_name", x_name}, {"y_name", y_name}}, site)->output(0);
}

ConfusionAtThresholds confusion_matrix_at_thresholds(const Scope& scope, Output labels, Output predictions,
                                                     const std::vector<float>& thresholds, Output weights,
                                                     CallSite site) {
  if (!weights) weights = constant(scope.with_op_name("ones"), 1.0f, site);
  Node* node = scope.add_node(op_def("ConfusionMatrixAtThresholds"), {labels, predictions, weights},
                              {{"thresholds", Tensor::from_vector<float>(thresholds)}}, site);
  return {node->output(0), node->output(1), node->output(2), node->output(3)};
}

Output auc_from_confusion(const Scope& scope, const ConfusionAtThresholds& counts, const std::string& curve,
                          const std::string& summation_method, CallSite site) {
  return scope
      .add_node(op_def("AucFromConfusion"),
                {counts.true_positives, counts.false_negatives, counts.true_negatives, counts.false_positives},
                {{"curve", curve}, {"summation_method", summation_method}}, site)
      ->output(0);
}

void register_metric_ops(OpRegistry& registry) {
  registry.add({.name = "AssertSameShape",
                .num_inputs = 2,
                .shape = &assert_same_shape_shape,
                .kernel = &assert_same_shape_kernel,
                .flops = &no_float_ops,
                .not_differentiable = true,
                .doc = "Inputs (x, y); attrs x_name, y_name. Forwards x; fails naming both shapes when x and y "
                       "differ in shape."});
  registry.add({.name = "ConfusionMatrixAtThresholds",
                .num_inputs = 3,
                .num_outputs = 4,
                .shape = &confusion_shape,
                .kernel = &confusion_kernel,
                .flops = &confusion_flops,
                .not_differentiable = true,
                .doc = "Inputs (labels, predictions in [0, 1], weights: scalar or predictions' shape); attr "
                       "thresholds (sorted float32 [T]). Outputs the weight of true positives, false negatives, "
                       "true negatives and false positives at each threshold (positive: prediction > threshold), "
                       "float32 [T] each."});
  registry.add({.name = "AucFromConfusion",
                .num_inputs = 4,
                .shape = &auc_shape,
                .kernel = &auc_kernel,
                .flops = &auc_flops,
                .not_differentiable = true,
                .doc = "Inputs (tp, fn, tn, fp: float32 [T]); attrs curve (ROC, PR), summation_method "
                       "(trapezoidal, careful_interpolation, minoring, majoring). The area under the curve, as "
                       "tf.metrics.auc computes it."});
}

}  // namespace stepscope
