// OpDef: everything the runtime, the profiler and autodiff need to know about one op type,
// declared in ONE place (the op's family file under ops/): its inputs and outputs, its shape
// rule, its CPU kernel, its cost (FLOPs, for tfprof's float_ops) and its gradient rule.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/base/error.h"
#include "stepscope/core/dtype.h"
#include "stepscope/core/shape.h"
#include "stepscope/core/tensor.h"

namespace stepscope {

class Node;
class Scope;
class KernelContext;
struct Output;

// What a shape rule sees: the node being added (its attrs, name, op) and its inputs.
class ShapeContext {
 public:
  ShapeContext(const Node& node, std::span<const DType> input_dtypes, std::span<const Shape> input_shapes)
      : node_(node), input_dtypes_(input_dtypes), input_shapes_(input_shapes) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  DType input_dtype(int i) const { return input_dtypes_[i]; }
  const Shape& input_shape(int i) const { return input_shapes_[i]; }
  // The value of input i when it is produced by a Const node (null otherwise); lets Reshape,
  // Sum, Fill, ... infer static shapes from constant shape/axis arguments.
  const Tensor* input_constant(int i) const;

  void set_output(int i, DType dtype, const Shape& shape);
  const std::vector<DType>& output_dtypes() const { return output_dtypes_; }
  const std::vector<Shape>& output_shapes() const { return output_shapes_; }

  // Throws InvalidArgumentError("[Op] node/name: message").
  [[noreturn]] void fail(const std::string& message) const;
  // Checks that input i has dtype `expected` (error names the input and both dtypes).
  void expect_dtype(int i, DType expected) const;
  void expect_floating(int i) const;
  void expect_rank(int i, int rank) const;

 private:
  const Node& node_;
  std::span<const DType> input_dtypes_;
  std::span<const Shape> input_shapes_;
  std::vector<DType> output_dtypes_;
  std::vector<Shape> output_shapes_;
};

// Shapes of one execution, for cost rules (runtime shapes when profiling, inferred otherwise).
struct CostContext {
  const Node& node;
  std::span<const Shape> input_shapes;
  std::span<const Shape> output_shapes;
};

using ShapeFn = void (*)(ShapeContext& ctx);
using KernelFn = void (*)(KernelContext& ctx);
using FlopsFn = int64_t (*)(const CostContext& ctx);
// The inputs an op would like to find back to back in one allocation (Buffer::create_packed's
// layout, in this order), given every input's size in bytes from the graph's shapes.
using ContiguousInputsFn = std::vector<int> (*)(const Node& node, std::span<const int64_t> input_bytes);
// Given the forward node and the gradient flowing into each of its outputs (a null Output where
// none flows), adds the gradient computation under `scope` and returns one gradient per input
// (null Output for inputs that get none).
using GradientFn = std::vector<Output> (*)(const Scope& scope, const Node& node,
                                           std::span<const Output> output_grads);

// The FLOP rule of an op in an arithmetic family that only moves or relabels data.
inline int64_t no_float_ops(const CostContext&) { return 0; }

struct OpDef {
  std::string name;
  int num_inputs = 0;   // -1: variadic (checked by the shape rule)
  int num_outputs = 1;  // -1: decided by the shape rule
  ShapeFn shape = nullptr;
  KernelFn kernel = nullptr;
  FlopsFn flops = nullptr;        // null: zero float ops
  GradientFn gradient = nullptr;  // null: gradients() stops with "No gradient defined ..."
  // Declared without a gradient on purpose (TF's ops.NotDifferentiable): integer or boolean
  // results, state, side effects, or a gradient op whose own gradient (second order) is not
  // supported. ops/registry_test.cc requires a gradient rule or this.
  bool not_differentiable = false;
  bool stateful = false;          // reads or writes session state; never pruned as constant
  // Bit i set: input i is passed by reference (Assign's variable): the kernel reaches the
  // producer through the graph (c.node().input(i).node), so the executor neither runs nor waits
  // for the producer on that edge, and c.input(i) is an empty tensor.
  uint32_t ref_inputs = 0;
  // Null, or the inputs the executor asks their producers to write back to back into one
  // allocation each step (TensorFlow's ScopedAllocator), so that the kernel can work on them where
  // they lie (a fused allreduce: one call, no copy into a buffer and out again). Only outputs the
  // producer allocates itself get there (not a forwarded input, not a fed tensor), so the kernel
  // checks (Buffer::pack, the offsets) and works without.
  ContiguousInputsFn contiguous_inputs = nullptr;
  std::string doc;
};

}  // namespace stepscope
