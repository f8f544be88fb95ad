// Convolution and pooling ops of the nn family (NHWC layout only): Conv2D, MaxPool, AvgPool and
// the backward ops of their gradient rules, Conv2DBackpropInput, Conv2DBackpropFilter,
// MaxPoolGrad, AvgPoolGrad.
// Registered through register_nn_ops.
//
// Kernels: float32 convolutions run on oneDNN (ops/internal/dnnl.h: 2-3x im2col + OpenBLAS on the
// LeNet and deep-CNN shapes of bench/model_bench); float64 ones on im2col + OpenBLAS GEMMs.
// MaxPool and MaxPoolGrad are our own loops: they move memory, not arithmetic (LeNet's 2.3 ms
// MaxPoolGrad reads and writes ~25 MB), and oneDNN's pooling backward needs a workspace from
// its own forward pass that MaxPoolGrad's inputs do not carry.
//
// Gradient rules: Conv2D -> input: Conv2DBackpropInput(Shape(input), filter, grad);
//                           filter: Conv2DBackpropFilter(input, Shape(filter), grad)
//                 MaxPool -> MaxPoolGrad(input, output, grad): each output's gradient goes to the
//                            first maximum of its window (row-major order), as in TensorFlow.
//                 AvgPool -> AvgPoolGrad(Shape(input), grad): each output's gradient spread evenly
//                            over the in-image positions of its window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

class OpRegistry;

// 2-D convolution (strictly, cross-correlation, as TensorFlow) of `input` [batch, height, width,
// in_channels] with `filter` [filter_height, filter_width, in_channels, out_channels].
// strides = [1, stride_h, stride_w, 1]; padding "SAME" (output ceil(in / stride), zeros added,
// the smaller half before) or "VALID" (no padding, output ceil((in - k + 1) / stride)).
Output conv2d(const Scope& scope, Output input, Output filter, std::vector<int64_t> strides, std::string padding,
              CallSite site = CallSite::current());

// Max pooling of `value` [batch, height, width, channels] over windows ksize = [1, kh, kw, 1]
// moved by strides = [1, sh, sw, 1]; padding as conv2d, padded positions never win.
Output max_pool(const Scope& scope, Output value, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                std::string padding, CallSite site = CallSite::current());

// Average pooling of `value` [batch, height, width, channels] (float32 or float64), windows and
// padding as max_pool. Like TensorFlow, each output is the mean of the window's in-image
// positions only: with SAME padding, border windows divide by their count of valid elements.
Output avg_pool(const Scope& scope, Output value, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                std::string padding, CallSite site = CallSite::current());

// The gradient of conv2d with respect to its input: out_backprop [batch, out_h, out_w,
// out_channels] convolved back through `filter` into an NHWC tensor of shape `input_sizes`
// (int32 or int64 vector of 4; Shape(input) in the gradient rule, whose inferred shape then
// gives the static output shape). strides and padding as the forward conv2d.
Output conv2d_backprop_input(const Scope& scope, Output input_sizes, Output filter, Output out_backprop,
                             std::vector<int64_t> strides, std::string padding, CallSite site = CallSite::current());

// The gradient of conv2d with respect to its filter, of shape `filter_sizes` (int32 or int64
// vector of 4): the correlation of `input`'s patches with out_backprop.
Output conv2d_backprop_filter(const Scope& scope, Output input, Output filter_sizes, Output out_backprop,
                              std::vector<int64_t> strides, std::string padding, CallSite site = CallSite::current());

// The gradient of max_pool: `grad` (shaped like orig_output) routed to the first maximum of
// each window of orig_input (float32 or float64); overlapping windows add up.
Output max_pool_grad(const Scope& scope, Output orig_input, Output orig_output, Output grad, std::vector<int64_t> ksize,
                     std::vector<int64_t> strides, std::string padding, CallSite site = CallSite::current());

// The gradient of avg_pool: `grad` (shaped like avg_pool's output) spread back over an NHWC
// tensor of shape `orig_input_shape` (int32 or int64 vector of 4; Shape(input) in the rule),
// each value divided by its window's count of in-image positions; overlapping windows add up.
Output avg_pool_grad(const Scope& scope, Output orig_input_shape, Output grad, std::vector<int64_t> ksize,
                     std::vector<int64_t> strides, std::string padding, CallSite site = CallSite::current());

// Called by register_nn_ops.
void register_conv_ops(OpRegistry& registry);

}  // namespace stepscope
