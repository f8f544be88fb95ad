// IndexedSlices: a sparse representation of a dense tensor of shape `dense_shape` as a set of
// rows, TensorFlow's tf.IndexedSlices. Row k of `values` ([N, D...]) is added to row indices[k]
// ([N], int32 or int64) of a dense [dense_shape[0], D...] tensor that is zero elsewhere;
// duplicate indices add up. Gather's gradient w.r.t. its params takes this form (see
// ops/sparse_ops.h and autodiff/gradients.h), so an embedding table's update touches only the
// rows a step looked up.
#pragma once

#include "stepscope/graph/node.h"

namespace stepscope {

struct IndexedSlices {
  Output values;       // [N, D...]
  Output indices;      // [N], int32 or int64
  Output dense_shape;  // 1-D int64: the shape of the dense tensor these slices stand for

  explicit operator bool() const { return static_cast<bool>(values); }
};

}  // namespace stepscope
