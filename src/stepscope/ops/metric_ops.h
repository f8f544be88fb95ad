// Metric ops: the counting kernels behind train/metrics.h (tf.metrics). They compute on one batch;
// the metrics accumulate their results in local variables.
#pragma once

#include <string>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

// x, when x and y have the same shape (checked when the graph is built, as far as shapes are
// known, and at run time); otherwise an InvalidArgumentError "<x_name> shape [..] and <y_name>
// shape [..] are not the same". Guards ops that would broadcast where a metric means
// element-by-element (labels against predictions).
Output assert_same_shape(const Scope& scope, Output x, Output y, const std::string& x_name, const std::string& y_name,
                         CallSite site = CallSite::current());

struct ConfusionAtThresholds {
  Output true_positives, false_negatives, true_negatives, false_positives;  // float32 [T] each
};

// TF's _confusion_matrix_at_thresholds on one batch: for each threshold t[i], the total weight of
// predictions above t[i] (positive) or at most t[i] (negative) whose label is true or false.
// labels: bool or numeric (nonzero is true), of predictions' shape; predictions: float32/float64
// in [0, 1] (a value outside is an InvalidArgumentError naming it) or bool (true = 1);
// weights: null (all 1), a scalar, or predictions' shape. thresholds must be sorted.
// Mismatched shapes are an InvalidArgumentError naming both.
ConfusionAtThresholds confusion_matrix_at_thresholds(const Scope& scope, Output labels, Output predictions,
                                                     const std::vector<float>& thresholds, Output weights = {},
                                                     CallSite site = CallSite::current());

// The area under the ROC or PR curve from confusion counts at thresholds, as tf.metrics.auc
// computes it: curve "ROC" or "PR"; summation_method "trapezoidal", "careful_interpolation",
// "minoring" or "majoring". A scalar float32.
Output auc_from_confusion(const Scope& scope, const ConfusionAtThresholds& counts, const std::string& curve,
                          const std::string& summation_method, CallSite site = CallSite::current());

}  // namespace stepscope
