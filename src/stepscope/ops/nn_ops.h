// nn ops: Relu, BiasAdd, Softmax, LogSoftmax, SparseSoftmaxCrossEntropyWithLogits,
// SoftmaxCrossEntropyWithLogits, and the backward ops of their gradient rules: ReluGrad,
// BiasAddGrad, SoftmaxGrad, LogSoftmaxGrad, ScaleRows. The convolution and pooling ops (Conv2D,
// MaxPool, AvgPool and their backward ops) live in conv_ops.h, batch normalization
// (FusedBatchNorm, FusedBatchNormGrad) in normalization_ops.h, both included here so that one
// include gives the whole family. SigmoidCrossEntropyWithLogits is here.
//
// Gradient rules (OpDef::gradient, registered with each forward op):
//   Relu        -> ReluGrad(grad, relu output)
//   BiasAdd     -> value: grad; bias: BiasAddGrad(grad)
//   Softmax     -> SoftmaxGrad(grad, softmax output)
//   LogSoftmax  -> LogSoftmaxGrad(grad, log_softmax output)
//   SparseSoftmaxCrossEntropyWithLogits -> logits: ScaleRows(grad of loss, backprop); labels: none
//   SoftmaxCrossEntropyWithLogits -> logits: ScaleRows(grad of loss, backprop);
//                                    labels: ScaleRows(-(grad of loss), LogSoftmax(logits))
//   SigmoidCrossEntropyWithLogits -> logits: grad * backprop (sigmoid(logits) - labels);
//                                    labels: grad * -logits
// The cross entropies fail with UnimplementedError when a gradient flows into their backprop
// output (output 1): that second-order path is not supported.
#pragma once

#include "stepscope/graph/scope.h"
#include "stepscope/ops/conv_ops.h"
#include "stepscope/ops/normalization_ops.h"

namespace stepscope {

// max(features, 0), elementwise (float32, float64, int32, int64; NaN stays NaN).
Output relu(const Scope& scope, Output features, CallSite site = CallSite::current());

// value + bias, with `bias` (rank 1) added along the last dimension of `value` (rank >= 2).
Output bias_add(const Scope& scope, Output value, Output bias, CallSite site = CallSite::current());

// exp(logits) / sum(exp(logits)) over the last axis (rank >= 1), computed from logits minus
// the row max so that large logits do not overflow.
Output softmax(const Scope& scope, Output logits, CallSite site = CallSite::current());
// logits - log(sum(exp(logits))) over the last axis, stable like softmax.
Output log_softmax(const Scope& scope, Output logits, CallSite site = CallSite::current());

// Cross entropy between softmax(logits) ([batch, classes], float) and integer class labels
// ([batch], int32 or int64). Returns the loss [batch] (output 0 of the node); output 1 of the
// same node is the backprop softmax(logits) - onehot(labels), [batch, classes]. A label outside
// [0, classes) fails the run with InvalidArgumentError, as TensorFlow does on CPU.
Output sparse_softmax_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits,
                                                CallSite site = CallSite::current());

// Cross entropy between softmax(logits) and a distribution `labels`, both [batch, classes] of
// the same float dtype. Returns the loss [batch] (output 0); output 1 is the backprop
// softmax(logits) - labels.
Output softmax_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits,
                                         CallSite site = CallSite::current());

// Elementwise logistic loss of `logits` against `labels` (same shape and float dtype; labels
// are probabilities in [0, 1]), TensorFlow's numerically stable formula
//   max(x, 0) - x * z + log(1 + exp(-|x|))
// which stays finite for any finite logit. Returns the loss (output 0, shaped like logits);
// output 1 of the same node is the backprop sigmoid(logits) - labels.
Output sigmoid_cross_entropy_with_logits(const Scope& scope, Output labels, Output logits,
                                         CallSite site = CallSite::current());

// ----------------------------------------------------------------------------------------------
// Backward ops (TensorFlow's names; built by the gradient rules, usable directly).

// gradients * (features > 0): Relu's backprop. `features` may be Relu's input or its output
// (positive exactly where the input is); the rule passes the output, as TensorFlow does.
Output relu_grad(const Scope& scope, Output gradients, Output features, CallSite site = CallSite::current());

// The sum of out_backprop (rank >= 2) over all but its last dimension: BiasAdd's bias gradient.
Output bias_add_grad(const Scope& scope, Output out_backprop, CallSite site = CallSite::current());

// (gradients - sum(gradients * softmax, last axis)) * softmax, where `softmax` is Softmax's output.
Output softmax_grad(const Scope& scope, Output gradients, Output softmax, CallSite site = CallSite::current());

// gradients - exp(log_softmax) * sum(gradients, last axis), where `log_softmax` is LogSoftmax's
// output.
Output log_softmax_grad(const Scope& scope, Output gradients, Output log_softmax, CallSite site = CallSite::current());

// x [batch, n] with row r multiplied by scale[r] (scale [batch]). TensorFlow writes this step of
// the cross-entropy gradients as expand_dims(scale, -1) * x (its _BroadcastMul); one fused op here.
Output scale_rows(const Scope& scope, Output scale, Output x, CallSite site = CallSite::current());

}  // namespace stepscope
