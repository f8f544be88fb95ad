// Registration of the array family's block ops (Slice, SliceGrad, Split; ops/array_block_ops.cc),
// which register_array_ops calls: one family, two files.
#pragma once

namespace stepscope {

class OpRegistry;
void register_array_block_ops(OpRegistry& registry);

}  // namespace stepscope
