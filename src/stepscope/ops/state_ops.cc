#include "stepscope/ops/state_ops.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

std::string str(DType d) { return std::string(dtype_name(d)); }

std::string uninitialized_message(const Node& var) { return "Attempting to use uninitialized value " + var.name(); }

// Assign-family ops name their variable with a data edge from it (input 0), but only need the
// node, not the value the VariableV2 kernel would produce, and that kernel fails before the
// first assignment. When OpDef can say so (`ref_inputs`, a bitmask of inputs the executor neither
// runs nor waits for), input 0 is marked; this compiles to nothing on an OpDef without it.
template <typename Def>
constexpr bool kHasRefInputs = requires(Def& d) {
  d.ref_inputs;
};

template <typename Def>
Def with_ref_input0(Def def) {
  if constexpr (kHasRefInputs<Def>) def.ref_inputs |= 1u;
  return def;
}

// Without `ref_inputs` the executor runs the VariableV2 node of every Assign step. Until then, an
// uninitialized variable that some Assign in the graph targets yields a stand-in value (NaN, or
// zero for non-float dtypes) instead of failing, so that initialization can run; reading such a
// variable before its Assign ran is then not diagnosed.
[[maybe_unused]] bool graph_assigns(const Node& var) {
  for (const auto& node : var.graph().nodes())
    if (node->op_type() == "Assign" && node->num_inputs() > 0 && node->input(0).node == &var) return true;
  return false;
}

[[maybe_unused]] Tensor stand_in_value(const KernelContext& c) {
  Shape shape = c.attrs().get<Shape>("shape");
  if (!shape.known_rank()) shape = Shape{0};
  for (int i = 0; i < shape.rank(); ++i)
    if (shape.dim(i) < 0) shape.set_dim(i, 0);
  const DType dtype = c.attrs().get<DType>("dtype");
  Tensor t(dtype, shape, c.allocator());
  if (dtype == DType::kString) return t;
  dispatch_numeric(dtype, [&](auto zero) {
    using T = decltype(zero);
    T fill = T(0);
    if constexpr (std::is_floating_point_v<T>) fill = std::numeric_limits<T>::quiet_NaN();
    for (T& v : t.flat<T>()) v = fill;
  });
  return t;
}

// ----- VariableV2 --------------------------------------------------------------------------

void variable_shape(ShapeContext& c) {
  c.set_output(0, c.node().attrs().get<DType>("dtype"), c.node().attrs().get<Shape>("shape"));
}

void variable_kernel(KernelContext& c) {
  auto& slot = c.resources().variable(c.node());
  Tensor value;
  {
    std::lock_guard<std::mutex> lock(slot.mutex);
    value = slot.value;
  }
  if (!value.initialized()) {
    if constexpr (!kHasRefInputs<OpDef>) {
      if (graph_assigns(c.node())) return c.set_output(0, stand_in_value(c));
    }
    c.fail(ErrorCode::kFailedPrecondition, uninitialized_message(c.node()));
  }
  c.set_output(0, std::move(value));
}

// ----- Assign, AssignAdd, AssignSub --------------------------------------------------------

const Node& variable_node(const ShapeContext& c) {
  const Node& var = *c.node().input(0).node;
  if (var.op_type() != "VariableV2")
    c.fail("input 0 must be a variable (a VariableV2 output), got " + std::string(var.op_type()) + " node '" +
           var.name() + "'");
  return var;
}

void expect_value_dtype(const ShapeContext& c, const Node& var) {
  if (c.input_dtype(1) != c.input_dtype(0))
    c.fail("value has dtype " + str(c.input_dtype(1)) + ", but variable '" + var.name() + "' has dtype " +
           str(c.input_dtype(0)));
}

// The more specific of two compatible shapes.
Shape merge(const Shape& a, const Shape& b) {
  if (!a.known_rank()) return b;
  if (!b.known_rank()) return a;
  Shape out = a;
  for (int i = 0; i < a.rank(); ++i)
    if (out.dim(i) < 0) out.set_dim(i, b.dim(i));
  return out;
}

std::string assign_shape_message(const Shape& lhs, const Shape& rhs) {
  return "Assign requires shapes of both tensors to match. lhs shape= " + lhs.to_string() +
         " rhs shape= " + rhs.to_string();
}

std::string update_shape_message(const Shape& lhs, const Shape& rhs) {
  return "Parameters and update must be the same size: variable shape " + lhs.to_string() + " vs update shape " +
         rhs.to_string();
}

void assign_shape(ShapeContext& c) {
  const Node& var = variable_node(c);
  expect_value_dtype(c, var);
  const Shape& lhs = c.input_shape(0);
  const Shape& rhs = c.input_shape(1);
  if (!c.node().attrs().get_or<bool>("validate_shape", true)) return c.set_output(0, c.input_dtype(0), rhs);
  if (!lhs.compatible_with(rhs)) c.fail(assign_shape_message(lhs, rhs));
  c.set_output(0, c.input_dtype(0), merge(lhs, rhs));
}

void update_shape(ShapeContext& c) {
  const Node& var = variable_node(c);
  expect_value_dtype(c, var);
  const DType dtype = c.input_dtype(0);
  if (dtype == DType::kBool || dtype == DType::kString)
    c.fail("variable '" + var.name() + "' has dtype " + str(dtype) + "; updates need a numeric dtype");
  if (!c.input_shape(0).compatible_with(c.input_shape(1)))
    c.fail(update_shape_message(c.input_shape(0), c.input_shape(1)));
  c.set_output(0, dtype, merge(c.input_shape(0), c.input_shape(1)));
}

void assign_kernel(KernelContext& c) {
  const Node& var = *c.node().input(0).node;
  const Tensor& value = c.input(1);
  const bool validate = c.attrs().get_or<bool>("validate_shape", true);
  auto& slot = c.resources().variable(var);
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (validate) {
    const Shape& lhs = slot.value.initialized() ? slot.value.shape() : var.attrs().get<Shape>("shape");
    if (!lhs.compatible_with(value.shape())) c.fail(assign_shape_message(lhs, value.shape()));
  }
  // Three ways to the new value, cheapest first, none writing into a buffer anyone else can see:
  // adopt value's buffer when only this op holds it (the executor counts each consumer in the
  // buffer's references); copy into the variable's buffer when only the variable holds that one
  // (the common case in training, where the step's reads are gone); else a private copy (a feed
  // the caller still holds, a Const, a value other ops still read, the variable's value fetched).
  if (value.buffer_unique()) {
    slot.value = value;
  } else if (slot.value.buffer_unique() && slot.value.dtype() == value.dtype() && slot.value.shape() == value.shape()) {
    if (value.dtype() == DType::kString) {
      std::copy_n(value.data<std::string>(), value.num_elements(), slot.value.data<std::string>());
    } else {
      std::memcpy(slot.value.raw_data(), value.raw_data(), static_cast<size_t>(value.bytes()));
    }
  } else {
    slot.value = value.deep_copy(c.allocator());
  }
  c.set_output(0, slot.value);
}

template <bool kAdd>
void update_kernel(KernelContext& c) {
  const Node& var = *c.node().input(0).node;
  const Tensor& delta = c.input(1);
  auto& slot = c.resources().variable(var);
  // Held for the whole update: concurrent updates of one variable serialize instead of losing
  // each other's increments, and no reader can take a reference while we decide below.
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.value.initialized()) c.fail(ErrorCode::kFailedPrecondition, uninitialized_message(var));
  if (slot.value.shape() != delta.shape()) c.fail(update_shape_message(slot.value.shape(), delta.shape()));
  // When the variable holds the only reference, nobody can observe the buffer (the executor
  // counts every consumer of a read in the buffer's references): update in place (the common
  // case in training, where the step's reads are gone). Otherwise build the new value in a fresh
  // buffer, leaving the old one to whoever holds it.
  Tensor result = slot.value.buffer_unique() ? slot.value : Tensor(delta.dtype(), delta.shape(), c.allocator());
  dispatch_numeric(delta.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* a = slot.value.template data<T>();
      const T* d = delta.data<T>();
      T* r = result.data<T>();
      c.parallel_for(delta.num_elements(), 1, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) r[i] = kAdd ? a[i] + d[i] : a[i] - d[i];
      });
    }
  });
  slot.value = result;
  c.set_output(0, std::move(result));
}

int64_t update_flops(const CostContext& c) { return std::max<int64_t>(0, c.output_shapes[0].num_elements()); }

Output add_update(const Scope& scope, const char* op, Output var, Output value, AttrMap attrs, CallSite site) {
  return scope.add_node(op_def(op), {var, value}, std::move(attrs), site)->output(0);
}

}  // namespace

Output variable(const Scope& scope, Shape shape, DType dtype, CallSite site) {
  return scope.add_node(op_def("VariableV2"), {}, {{"shape", shape}, {"dtype", dtype}}, site, "Variable")->output(0);
}

Output assign(const Scope& scope, Output var, Output value, bool validate_shape, CallSite site) {
  return add_update(scope, "Assign", var, value, {{"validate_shape", validate_shape}}, site);
}

Output assign_add(const Scope& scope, Output var, Output value, CallSite site) {
  return add_update(scope, "AssignAdd", var, value, {}, site);
}

Output assign_sub(const Scope& scope, Output var, Output value, CallSite site) {
  return add_update(scope, "AssignSub", var, value, {}, site);
}

void register_state_ops(OpRegistry& registry) {
  registry.add({.name = "VariableV2",
                .num_inputs = 0,
                .shape = variable_shape,
                .kernel = variable_kernel,
                .not_differentiable = true,
                .stateful = true,
                .doc = "Attrs shape, dtype. Outputs the variable's current value (sharing its buffer); fails "
                       "before the first assignment."});
  registry.add(with_ref_input0(OpDef{.name = "Assign",
                                     .num_inputs = 2,
                                     .shape = assign_shape,
                                     .kernel = assign_kernel,
                                     .not_differentiable = true,
                                     .stateful = true,
                                     .doc = "Inputs (variable, value); attr validate_shape (true). Sets the "
                                            "variable to value and outputs it."}));
  registry.add(with_ref_input0(OpDef{.name = "AssignAdd",
                                     .num_inputs = 2,
                                     .shape = update_shape,
                                     .kernel = update_kernel<true>,
                                     .flops = update_flops,
                                     .not_differentiable = true,
                                     .stateful = true,
                                     .doc = "Inputs (variable, delta). variable += delta; outputs the new value."}));
  registry.add(with_ref_input0(OpDef{.name = "AssignSub",
                                     .num_inputs = 2,
                                     .shape = update_shape,
                                     .kernel = update_kernel<false>,
                                     .flops = update_flops,
                                     .not_differentiable = true,
                                     .stateful = true,
                                     .doc = "Inputs (variable, delta). variable -= delta; outputs the new value."}));
}

}  // namespace stepscope
