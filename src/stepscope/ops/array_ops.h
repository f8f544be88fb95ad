// Array ops: Placeholder, Const, Identity, Reshape, Transpose, ConcatV2, Fill, ZerosLike,
// OnesLike, Cast, Shape, Slice, ConcatOffset.
//
// Gradients: Identity passes it on; Reshape reshapes it back to the input's (run-time) shape;
// Transpose applies the inverse permutation; ConcatV2 slices it per input (Const offsets when
// the sizes along the axis are known, ConcatOffset of the run-time shapes otherwise); Cast casts
// it back between float dtypes (none to or from other dtypes); Fill's value gets its sum.
// ZerosLike and OnesLike pass none (TensorFlow's NotDifferentiable); Shape, Slice and
// ConcatOffset have no rule.
//
// Arguments that TensorFlow passes as tensors (Reshape's shape, Transpose's perm, ConcatV2's
// axis, Fill's dims) become Const inputs named "<Op>/<arg>" ("Reshape/shape"), so shape rules
// see their values through ShapeContext::input_constant and infer static shapes; overloads that
// take an Output accept values only known at run time (e.g. reshape(x, shape(y))).
#pragma once

#include <initializer_list>
#include <type_traits>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/scope.h"

namespace stepscope {

// A value that must be fed to Session::run. shape may be partial ([?,784]) or unknown.
Output placeholder(const Scope& scope, DType dtype, const Shape& shape = Shape::unknown_rank(),
                   CallSite site = CallSite::current());

Output constant(const Scope& scope, const Tensor& value, CallSite site = CallSite::current());
template <typename T>
Output constant(const Scope& scope, T value, CallSite site = CallSite::current()) {
  return constant(scope, Tensor::scalar<T>(value), site);
}
template <typename T>
Output constant(const Scope& scope, const std::vector<T>& values, const Shape& shape,
                CallSite site = CallSite::current()) {
  return constant(scope, Tensor::from_vector<T>(values, shape), site);
}

Output identity(const Scope& scope, Output input, CallSite site = CallSite::current());

// The same elements in another shape; one dimension may be -1 (inferred). Never copies: the
// output shares the input's buffer.
Output reshape(const Scope& scope, Output x, std::vector<int64_t> shape, CallSite site = CallSite::current());
// For braced lists, which would otherwise also match the Output overload ({} or {0, ...}).
inline Output reshape(const Scope& scope, Output x, std::initializer_list<int64_t> shape,
                      CallSite site = CallSite::current()) {
  return reshape(scope, x, std::vector<int64_t>(shape), site);
}
// `shape`: a 1-D int32 or int64 tensor computed at run time.
Output reshape(const Scope& scope, Output x, Output shape, CallSite site = CallSite::current());

// Output dim i is input dim perm[i]; an empty perm reverses the dimensions (a matrix
// transpose for rank 2), as in TensorFlow.
Output transpose(const Scope& scope, Output x, std::vector<int64_t> perm = {}, CallSite site = CallSite::current());

// Joins `values` (same dtype and rank, equal dims except `axis`) along `axis`; a negative axis
// counts from the end.
Output concat(const Scope& scope, std::vector<Output> values, int64_t axis, CallSite site = CallSite::current());

// A tensor of shape `dims` with every element equal to the scalar `value`.
Output fill(const Scope& scope, std::vector<int64_t> dims, Output value, CallSite site = CallSite::current());
inline Output fill(const Scope& scope, std::initializer_list<int64_t> dims, Output value,
                   CallSite site = CallSite::current()) {
  return fill(scope, std::vector<int64_t>(dims), value, site);
}
Output fill(const Scope& scope, std::vector<int64_t> dims, const Tensor& value, CallSite site = CallSite::current());
template <typename T>
requires std::is_arithmetic_v<T> Output fill(const Scope& scope, std::vector<int64_t> dims, T value,
                                             CallSite site = CallSite::current()) {
  return fill(scope, std::move(dims), Tensor::scalar<T>(value), site);
}
// `dims`: a 1-D int32 or int64 tensor computed at run time.
Output fill(const Scope& scope, Output dims, Output value, CallSite site = CallSite::current());

Output zeros_like(const Scope& scope, Output x, CallSite site = CallSite::current());
Output ones_like(const Scope& scope, Output x, CallSite site = CallSite::current());

// Converts every element to `to` (see ops/internal/cast.h for the exact rules); forwards the input
// when it already has that dtype.
Output cast(const Scope& scope, Output x, DType to, CallSite site = CallSite::current());

// The run-time shape of x as a 1-D tensor of int32 (or int64).
Output shape(const Scope& scope, Output x, DType out_type = DType::kInt32, CallSite site = CallSite::current());

// The block of x that starts at `begin` and has `size` elements along each dim (a size of -1
// takes the rest of the dim), as TensorFlow's Slice. Forwards x when the block is all of x.
Output slice(const Scope& scope, Output x, std::vector<int64_t> begin, std::vector<int64_t> size,
             CallSite site = CallSite::current());
// `begin` and `size`: 1-D tensors (int32 or int64, the same) computed at run time.
Output slice(const Scope& scope, Output x, Output begin, Output size, CallSite site = CallSite::current());
// num_split equal parts of value along axis (tf.split with a count): their gradient is one
// Concat, where slicing the parts one by one would sum num_split full-size gradients.
std::vector<Output> split(const Scope& scope, Output value, int64_t num_split, int64_t axis = 0,
                          CallSite site = CallSite::current());
// Slice's gradient: zeros of x_shape (1-D int32/int64) with dy written at begin.
Output slice_grad(const Scope& scope, Output dy, Output x_shape, Output begin, CallSite site = CallSite::current());

// Where each of the tensors with shapes `shapes` (1-D, int32 or int64, the same) starts in their
// concatenation along `axis` (scalar): one offset vector per shape, 0 except along the axis
// (TensorFlow's ConcatOffset, which the gradient of ConcatV2 uses when sizes are known only at
// run time).
std::vector<Output> concat_offset(const Scope& scope, Output axis, std::vector<Output> shapes,
                                  CallSite site = CallSite::current());

}  // namespace stepscope
