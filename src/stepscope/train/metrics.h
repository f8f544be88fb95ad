// Streaming metrics, as tf.metrics (TF 1.x): each returns a (value, update_op) pair over local
// variables. update_op folds one batch into the counts and gives the metric so far; value reads
// it without changing anything. The counts are local variables (train/variables.h): never
// checkpointed, and reset by local_variables_initializer(), which a MonitoredSession's Scaffold
// runs on every new session, so each evaluation starts from zero.
//
//   auto [auc, auc_update] = metrics::auc(scope, labels, probabilities);
//   for each batch: session.run(auc_update);   then: session.run(auc) is the AUC over all of them
//
// The Estimator takes these pairs in EstimatorSpec::eval_metric_ops.
#pragma once

#include <string>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope::metrics {

struct Metric {
  Output value;      // float32 scalar: the metric over every batch folded in so far
  Output update_op;  // folds the batch in; its value is the metric including that batch
};

// Weighted mean of values (cast to float32): sum(values * weights) / sum(weights), 0 before any
// weight is counted. weights: null (all 1) or broadcastable to values. Variables
// "<name>/total", "<name>/count".
Metric mean(const Scope& scope, Output values, Output weights = {}, const std::string& name = "mean",
            CallSite site = CallSite::current());

// How often predictions equal labels (same shape; predictions cast to labels' dtype).
// Mismatched shapes are an InvalidArgumentError naming both, when the graph is built or at run time.
Metric accuracy(const Scope& scope, Output labels, Output predictions, Output weights = {},
                const std::string& name = "accuracy", CallSite site = CallSite::current());

// true_positives / (true_positives + false_positives), labels and predictions cast to bool
// (nonzero is true); 0 while nothing is predicted positive.
Metric precision(const Scope& scope, Output labels, Output predictions, Output weights = {},
                 const std::string& name = "precision", CallSite site = CallSite::current());
// true_positives / (true_positives + false_negatives), 0 while there is no positive label.
Metric recall(const Scope& scope, Output labels, Output predictions, Output weights = {},
              const std::string& name = "recall", CallSite site = CallSite::current());

struct AucOptions {
  int num_thresholds = 200;
  std::string curve = "ROC";  // or "PR"
  // "trapezoidal" (TF 1.x's default), "careful_interpolation", "minoring", "majoring".
  std::string summation_method = "trapezoidal";
  // Explicit thresholds in [0, 1] (num_thresholds is then ignored); -1e-7 and 1 + 1e-7 are added.
  std::vector<float> thresholds = {};
};

// The area under the ROC (or PR) curve, discretized at thresholds as tf.metrics.auc does, with
// the same epsilons: labels cast to bool, predictions float in [0, 1] (a value outside is an
// InvalidArgumentError from the update op). Variables "<name>/true_positives",
// "<name>/false_negatives", "<name>/true_negatives", "<name>/false_positives".
Metric auc(const Scope& scope, Output labels, Output predictions, Output weights = {}, AucOptions options = {},
           const std::string& name = "auc", CallSite site = CallSite::current());

}  // namespace stepscope::metrics
