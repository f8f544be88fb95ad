// Elementwise math ops.
//
// Binary, with NumPy/TensorFlow broadcasting ([64,10] + [10] -> [64,10]):
//   Add, Sub, Mul, Div, Maximum, Minimum  float32, float64, int32, int64
//   Equal                                  any numeric dtype or bool -> bool
// Unary:
//   Neg, Square                            float32, float64, int32, int64
//   Sqrt, Rsqrt, Exp, Log, Tanh, Sigmoid   float32, float64
//   IsFinite                               float32, float64 -> bool
//   CheckNumerics                          float32, float64 (forwards its input, fails on NaN/Inf)
//
// Broadcasting and its reverse (the backward ops of broadcasting, also usable directly):
//   SumToShape(x, shape)   sums x down to `shape`, which must broadcast to x's shape
//   BroadcastTo(x, shape)  x broadcast up to `shape` (TensorFlow's BroadcastTo)
//   MeanGrad(g, shape)     BroadcastTo(g, shape) / (elements of shape / elements of g): the
//                          gradient of Mean, scaled in the same pass
// Fused backward ops (TensorFlow's names and input order, (y, dy) with y the forward output):
//   TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad            float32, float64
//   MaximumGrad, MinimumGrad (grad, x, y; attr input)     the gradient routed to x or y
//
// Gradient rules: every op above but Equal, IsFinite, MeanGrad and the *Grad ops has one. A
// broadcast input's gradient is summed back to its shape with SumToShape, using its run-time
// shape when its static shape is not fully known; nothing is added when the static shapes
// show that no broadcasting can have happened (as for [?,10] + [10] and the [?,10] input).
// Maximum/Minimum route the gradient to the selected input, ties to x (TensorFlow's x >= y
// mask); CheckNumerics checks the gradient too.
//
// Integer semantics: Add, Sub, Mul, Neg and Square wrap around on overflow (two's complement,
// as TensorFlow's CPU kernels behave in practice). Div on integers truncates toward zero like
// TensorFlow's raw `Div` op (-7 / 2 == -3; for Python's floor division use a FloorDiv op),
// fails with "Integer division by zero" on a zero divisor, and gives INT_MIN for INT_MIN / -1.
// Maximum and Minimum propagate NaN. Equal compares floats by IEEE rules (NaN != NaN).
#pragma once

#include <string>

#include "stepscope/graph/scope.h"

namespace stepscope {

Output add(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output sub(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output mul(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output div(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
// x / y, but 0 where y == 0 (float types; TF's div_no_nan).
Output div_no_nan(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output maximum(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output minimum(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());
Output equal(const Scope& scope, Output x, Output y, CallSite site = CallSite::current());

// With a scalar operand: `mul(s, x, 0.5)` adds a scalar Const of x's dtype (named "Const")
// and broadcasts it. For an integer x the value must be a whole number in range
// (InvalidArgumentError otherwise).
Output add(const Scope& scope, Output x, double y, CallSite site = CallSite::current());
Output sub(const Scope& scope, Output x, double y, CallSite site = CallSite::current());
Output sub(const Scope& scope, double x, Output y, CallSite site = CallSite::current());
Output mul(const Scope& scope, Output x, double y, CallSite site = CallSite::current());
Output div(const Scope& scope, Output x, double y, CallSite site = CallSite::current());
Output div(const Scope& scope, double x, Output y, CallSite site = CallSite::current());
Output maximum(const Scope& scope, Output x, double y, CallSite site = CallSite::current());
Output minimum(const Scope& scope, Output x, double y, CallSite site = CallSite::current());

Output neg(const Scope& scope, Output x, CallSite site = CallSite::current());
Output square(const Scope& scope, Output x, CallSite site = CallSite::current());
Output sqrt(const Scope& scope, Output x, CallSite site = CallSite::current());
// 1 / sqrt(x).
Output rsqrt(const Scope& scope, Output x, CallSite site = CallSite::current());
Output exp(const Scope& scope, Output x, CallSite site = CallSite::current());
// Natural logarithm; log(0) = -inf and log(x < 0) = NaN, as in TensorFlow.
Output log(const Scope& scope, Output x, CallSite site = CallSite::current());
Output tanh(const Scope& scope, Output x, CallSite site = CallSite::current());
// 1 / (1 + exp(-x)), computed without overflow for any x.
Output sigmoid(const Scope& scope, Output x, CallSite site = CallSite::current());

// True where x is neither NaN nor infinite.
Output is_finite(const Scope& scope, Output x, CallSite site = CallSite::current());
// Forwards x unchanged; when x holds a NaN or an infinity, Session::run fails with
// InvalidArgumentError "[CheckNumerics] <node>: <message> : Tensor had NaN values" (or "Inf",
// or "Inf and NaN").
Output check_numerics(const Scope& scope, Output x, const std::string& message, CallSite site = CallSite::current());

// ---------------------------------------------------------------------------------------------
// Broadcasting helpers and backward ops. `shape` arguments are 1-D int32 or int64 tensors: a
// Const, or shape(x) for run-time shapes (the shape rules then take x's static shape).

// x summed over the dims along which `shape` broadcasts to x's shape ([64,10] to [10] sums the
// rows, to [64,1] the columns, to [] everything). Forwards x's buffer when nothing is summed.
Output sum_to_shape(const Scope& scope, Output x, Output shape, CallSite site = CallSite::current());
// x broadcast to `shape` (TensorFlow's broadcast_to).
Output broadcast_to(const Scope& scope, Output x, Output shape, CallSite site = CallSite::current());
// broadcast_to(grad, shape) divided by the number of elements each element of grad stands for.
Output mean_grad(const Scope& scope, Output grad, Output shape, CallSite site = CallSite::current());
// x's shape: a Const when x's static shape is fully known, else shape(x) (int64).
Output shape_of(const Scope& scope, Output x, CallSite site = CallSite::current());

// dy * (1 - y^2), y = tanh(x).
Output tanh_grad(const Scope& scope, Output y, Output dy, CallSite site = CallSite::current());
// dy * y * (1 - y), y = sigmoid(x).
Output sigmoid_grad(const Scope& scope, Output y, Output dy, CallSite site = CallSite::current());
// dy * 0.5 / y, y = sqrt(x).
Output sqrt_grad(const Scope& scope, Output y, Output dy, CallSite site = CallSite::current());
// dy * -0.5 * y^3, y = rsqrt(x).
Output rsqrt_grad(const Scope& scope, Output y, Output dy, CallSite site = CallSite::current());
// The gradient `grad` of z = maximum(x, y) (or minimum) routed to input `input` (0: x, 1: y):
// grad where that input was selected (x on ties), 0 elsewhere, in z's shape (not yet summed
// to the input's shape).
Output maximum_grad(const Scope& scope, Output grad, Output x, Output y, int input,
                    CallSite site = CallSite::current());
Output minimum_grad(const Scope& scope, Output grad, Output x, Output y, int input,
                    CallSite site = CallSite::current());

// The gradient `grad` of a broadcasting binary op's output, summed back to the shape of its
// input x (`other` is its other input). Returns grad itself when the static shapes show the
// output has x's shape; null for a null grad. For gradient rules of broadcasting ops.
Output unbroadcast(const Scope& scope, Output grad, Output x, Output other, CallSite site = CallSite::current());

}  // namespace stepscope
