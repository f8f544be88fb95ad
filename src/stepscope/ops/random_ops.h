// Random ops: RandomUniform, RandomStandardNormal, TruncatedNormal, Dropout.
//
// Reproducibility, as in TensorFlow: each node draws from its own Philox4x32-10 stream keyed by
// its `seed` and `seed2` attrs, and its position in that stream lives in the session (so it
// advances from one Session::run to the next and restarts in a new session). For fixed seeds the
// values of successive runs are the same in every session and do not depend on the number of
// threads. Seeds of 0 and 0 mean "nondeterministic": the builder then draws both from
// std::random_device when the graph is built.
//
// mean/stddev (and RandomUniform's minval/maxval) are attrs applied by the kernel in the same
// pass, instead of TensorFlow's extra Mul and Add nodes: one node, one write of the output.
#pragma once

#include <cstdint>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

// Uniform in [0, 1) (float32 or float64).
Output random_uniform(const Scope& scope, std::vector<int64_t> dims, DType dtype = DType::kFloat32, int64_t seed = 0,
                      int64_t seed2 = 0, CallSite site = CallSite::current());
// Uniform in [minval, maxval).
Output random_uniform(const Scope& scope, std::vector<int64_t> dims, double minval, double maxval,
                      DType dtype = DType::kFloat32, int64_t seed = 0, int64_t seed2 = 0,
                      CallSite site = CallSite::current());

// Normal with the given mean and standard deviation.
Output random_normal(const Scope& scope, std::vector<int64_t> dims, double mean = 0.0, double stddev = 1.0,
                     DType dtype = DType::kFloat32, int64_t seed = 0, int64_t seed2 = 0,
                     CallSite site = CallSite::current());

// Normal, with values more than 2 standard deviations from the mean drawn again.
Output truncated_normal(const Scope& scope, std::vector<int64_t> dims, double mean = 0.0, double stddev = 1.0,
                        DType dtype = DType::kFloat32, int64_t seed = 0, int64_t seed2 = 0,
                        CallSite site = CallSite::current());

// Dropout of `x` (float32 or float64, any shape): each element is kept with probability
// 1 - rate and scaled by 1 / (1 - rate), or set to 0 (TensorFlow's tf.nn.dropout, one fused op).
// The node's output 1 is the mask it applied (0 or 1 / (1 - rate), shaped like x); the gradient
// rule multiplies the incoming gradient by that mask, so backprop drops exactly the units the
// forward pass dropped in the same step. Seeds work as for the other random ops: a fixed seed
// gives the same sequence of masks, step after step, in every session. rate must be in [0, 1)
// (InvalidArgumentError naming the node otherwise); rate 0 returns x unchanged.
Output dropout(const Scope& scope, Output x, double rate, int64_t seed = 0, int64_t seed2 = 0,
               CallSite site = CallSite::current());

}  // namespace stepscope
