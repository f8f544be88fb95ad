// Sparse ops: Gather (embedding lookups) and UnsortedSegmentSum (adding rows by index), the ops
// of embedding tables.
//
// Gradients: Gather's gradient w.r.t. params is sparse, IndexedSlices (values: the incoming
// gradient as [N, D...], indices: the ids flattened to [N], dense_shape: shape(params)), which
// gradients() keeps sparse up to a variable (see autodiff/gradients.h) and densifies with
// UnsortedSegmentSum otherwise; ids get none. UnsortedSegmentSum's gradient w.r.t. data is a
// Gather of the incoming gradient by segment_ids.
#pragma once

#include <span>
#include <string_view>

#include "stepscope/graph/indexed_slices.h"
#include "stepscope/graph/scope.h"

namespace stepscope {

// Rows of `params` ([V, D...], any dtype but string) picked by `ids` (int32 or int64, any shape):
// output shape ids.shape + params.shape[1:]. An id outside [0, V) is an InvalidArgumentError
// naming the node, the id's position and value: "indices[3,1] = 17 is not in [0, 10)".
Output gather(const Scope& scope, Output params, Output ids, CallSite site = CallSite::current());
// tf.nn.embedding_lookup for one table: gather(params, ids).
Output embedding_lookup(const Scope& scope, Output params, Output ids, CallSite site = CallSite::current());

// out[segment_ids[i...], ...] += data[i..., ...]; out has shape [num_segments] +
// data.shape[segment_ids.rank:] and is zero where no id points. segment_ids: int32 or int64 of a
// shape that prefixes data's; num_segments: an int32 or int64 scalar. An id outside
// [0, num_segments) is an InvalidArgumentError.
Output unsorted_segment_sum(const Scope& scope, Output data, Output segment_ids, Output num_segments,
                            CallSite site = CallSite::current());
Output unsorted_segment_sum(const Scope& scope, Output data, Output segment_ids, int64_t num_segments,
                            CallSite site = CallSite::current());

// The rule giving the gradient w.r.t. input 0 of an op of type `op_type` as IndexedSlices (the
// op's other inputs get none), or null when the op has none (Gather has one). gradients()
// prefers it to OpDef::gradient, which gives the same value densified.
using SparseGradientFn = IndexedSlices (*)(const Scope& scope, const Node& node, std::span<const Output> output_grads);
SparseGradientFn sparse_gradient_rule(std::string_view op_type);

// The dense tensor the slices stand for: UnsortedSegmentSum of the values by the indices into
// dense_shape[0] rows (duplicates add up).
Output to_dense(const Scope& scope, const IndexedSlices& slices, CallSite site = CallSite::current());

}  // namespace stepscope
