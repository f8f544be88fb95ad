// Reduction ops: Sum, Mean, Max, ArgMax.
//
// As in TensorFlow, the axes are a second input (Sum/Mean/Max: "reduction_indices", ArgMax:
// "dimension"), int32 or int64; the builders make it an int32 Const, so shape rules infer
// static output shapes. Negative axes count from the end. Sum/Mean/Max take float32, float64,
// int32 and int64 (Mean of integers divides with truncation, like TensorFlow); ArgMax outputs
// int64 or int32.
//
// Empty axes: the builders read an empty list as "every axis" (TF's axis=None). The ops
// themselves follow TensorFlow: an empty reduction_indices tensor reduces nothing, unless the
// node has the attr reduce_all=true (what the builders set when the input's rank is unknown at
// graph-build time, so the axes cannot be listed).
//
// Results are deterministic whatever the thread count, and float sums are pairwise (see
// ops/internal/reduce.h).
//
// Gradients: Sum broadcasts the gradient back over the reduced axes (BroadcastTo), Mean does the
// same and divides by the count in one pass (MeanGrad, the count from the run-time shapes), Max
// sends it to the elements equal to the max, split equally among ties (TensorFlow's
// _MinOrMaxGrad). The gradient is first given size-1 dims at the reduced axes (a Reshape, to
// the input's run-time shape when two or more kept dims are unknown) unless only leading axes
// were reduced. They need constant reduction_indices and, without reduce_all, a known rank
// (UnimplementedError otherwise). ArgMax has no gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "stepscope/graph/scope.h"

namespace stepscope {

// Sum of x over `axes` ({} = all axes). keep_dims keeps reduced axes with size 1.
Output reduce_sum(const Scope& scope, Output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  CallSite site = CallSite::current());
// Mean of x over `axes` ({} = all axes). The mean of nothing is NaN for floats, 0 for integers.
Output reduce_mean(const Scope& scope, Output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                   CallSite site = CallSite::current());
// Max of x over `axes` ({} = all axes); NaN if any element is NaN; -inf (lowest for integers)
// over nothing.
Output reduce_max(const Scope& scope, Output x, std::vector<int64_t> axes = {}, bool keep_dims = false,
                  CallSite site = CallSite::current());

// Index of the largest element of x along `axis` (first index on ties; the first NaN if any);
// output_type int64 or int32. The axis is removed from the shape.
Output argmax(const Scope& scope, Output x, int64_t axis, DType output_type = DType::kInt64,
              CallSite site = CallSite::current());

}  // namespace stepscope
