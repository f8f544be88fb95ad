// Batch normalization ops of the nn family: FusedBatchNorm and its backward op FusedBatchNormGrad,
// with TensorFlow 1.x's FusedBatchNorm semantics (CPU kernel). Registered through register_nn_ops.
//
// x is NHWC [batch, height, width, channels] as in TensorFlow, or (an extension, what
// tf.layers.batch_normalization does for dense outputs without the fused op) [batch, channels].
// Statistics are per channel (the last axis) over all other axes: n = the product of those.
//
// Training (is_training = true): mean and variance inputs are ignored (TensorFlow passes empty
// tensors; [0] or [channels] are accepted). With mu = mean(x), var = mean((x - mu)^2) (biased):
//   y               = scale * (x - mu) / sqrt(var + epsilon) + offset
//   batch_mean      = mu
//   batch_variance  = var * n / (n - 1)   the UNBIASED variance (var when n == 1), which
//                                         tf.layers.batch_normalization puts into moving_variance
//   reserve_space_1 = mu, reserve_space_2 = var (biased), what FusedBatchNormGrad needs.
// Inference (is_training = false): y = scale * (x - mean) / sqrt(variance + epsilon) + offset;
// batch_mean / reserve_space_1 = mean, batch_variance / reserve_space_2 = variance (passed through).
//
// Gradient rule: FusedBatchNorm -> FusedBatchNormGrad(dy, x, scale, reserve_space_1,
// reserve_space_2): x, scale and offset get gradients; mean and variance none (as TensorFlow).
// A gradient flowing into outputs 1-4 (the statistics) is an UnimplementedError.
//
// float32 (TensorFlow's dtype) and float64 (for the numerical gradient checks).
#pragma once

#include "stepscope/graph/scope.h"

namespace stepscope {

class OpRegistry;

struct FusedBatchNormOutputs {
  Output y, batch_mean, batch_variance, reserve_space_1, reserve_space_2;
};

// mean and variance may be null Outputs in training (an empty [0] constant is passed instead).
FusedBatchNormOutputs fused_batch_norm(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                                       Output variance, double epsilon = 1e-3, bool is_training = true,
                                       CallSite site = CallSite::current());

struct FusedBatchNormGradOutputs {
  Output x_backprop, scale_backprop, offset_backprop;
};

// The backward op. Training: reserve_space_1/2 are the forward's batch mean and biased variance;
// dx = scale * rsqrt(var + eps) * (dy - mean(dy) - (x - mu) * mean(dy * (x - mu)) / (var + eps)).
// Inference: they are the population mean and variance; dx = dy * scale * rsqrt(var + eps).
// Both: dscale = sum(dy * (x - mu) * rsqrt(var + eps)), doffset = sum(dy) per channel.
// (TensorFlow's op has two more, empty, outputs, reserve_space_3/4; this one has three.)
FusedBatchNormGradOutputs fused_batch_norm_grad(const Scope& scope, Output y_backprop, Output x, Output scale,
                                                Output reserve_space_1, Output reserve_space_2, double epsilon = 1e-3,
                                                bool is_training = true, CallSite site = CallSite::current());

// Called by register_nn_ops.
void register_normalization_ops(OpRegistry& registry);

}  // namespace stepscope
