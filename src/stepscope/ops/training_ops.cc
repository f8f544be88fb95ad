#include "stepscope/ops/training_ops.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

Output apply_gradient_descent(const Scope& scope, Output var, Output alpha, Output delta, CallSite site) {
  return scope.add_node(op_def("ApplyGradientDescent"), {var, alpha, delta}, {}, site)->output(0);
}

Output apply_momentum(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output momentum,
                      bool use_nesterov, CallSite site) {
  return scope.add_node(op_def("ApplyMomentum"), {var, accum, lr, grad, momentum}, {{"use_nesterov", use_nesterov}},
                        site)
      ->output(0);
}

Output apply_adam(const Scope& scope, Output var, Output m, Output v, Output beta1_power, Output beta2_power,
                  Output lr, Output beta1, Output beta2, Output epsilon, Output grad, CallSite site) {
  return scope
      .add_node(op_def("ApplyAdam"), {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad}, {}, site)
      ->output(0);
}

namespace {

// Input layout of each op: which inputs are variables, which are scalars, and which is the gradient.
struct Layout {
  std::vector<int> variables;
  std::vector<int> scalars;
  int grad;
};

void check_layout(ShapeContext& c, const Layout& layout) {
  const DType dtype = c.input_dtype(0);
  if (!is_floating(dtype)) c.fail("var must be float32 or float64, got " + std::string(dtype_name(dtype)));
  for (int i : layout.variables) {
    if (c.node().input(i).node->op_type() != "VariableV2")
      c.fail("input " + std::to_string(i) + " must be a variable, got " + c.node().input(i).name() + " (" +
             std::string(c.node().input(i).node->op_type()) + ")");
  }
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != dtype)
      c.fail("input " + std::to_string(i) + " has dtype " + std::string(dtype_name(c.input_dtype(i))) + ", var has " +
             std::string(dtype_name(dtype)));
  }
  for (int i : layout.scalars) {
    const Shape& s = c.input_shape(i);
    if (s.known_rank() && s.num_elements() != 1 && s.fully_defined())
      c.fail("input " + std::to_string(i) + " must be a scalar, got shape " + s.to_string());
  }
  for (int i : layout.variables)
    if (!c.input_shape(i).compatible_with(c.input_shape(layout.grad)))
      c.fail("var and grad shapes differ: " + c.input_shape(i).to_string() + " vs " +
             c.input_shape(layout.grad).to_string());
  c.set_output(0, dtype, c.input_shape(0));
}

int64_t elementwise_flops(const CostContext& c, int64_t per_element) {
  return c.output_shapes[0].num_elements() * per_element;
}

// Locks the distinct variable slots among `slots` (an op may name one variable twice), in
// address order, so that two updates of the same variables never wait on each other.
class SlotLocks {
 public:
  SlotLocks(ResourceStore::VariableSlot* const* slots, size_t n) {
    for (size_t k = 0; k < n; ++k) held_[k] = &slots[k]->mutex;
    std::sort(held_, held_ + n);
    n_ = static_cast<size_t>(std::unique(held_, held_ + n) - held_);
    for (size_t k = 0; k < n_; ++k) held_[k]->lock();
  }
  ~SlotLocks() {
    for (size_t k = n_; k-- > 0;) held_[k]->unlock();
  }
  SlotLocks(const SlotLocks&) = delete;
  SlotLocks& operator=(const SlotLocks&) = delete;

 private:
  std::mutex* held_[3];
  size_t n_ = 0;
};

// Runs `update(out)` with out[k] the tensor to write the new value of the k-th variable input
// into, element by element from the inputs (the value the step read), and stores it. out[k] is
// the variable's own buffer, updated in place, when the variable still holds the value this op
// read and nothing but the variable and this op's input holds it: no reader of this step (the
// executor counts each consumer of a read in the buffer's references), no earlier fetch, no
// other step can see it change. Otherwise it is a fresh buffer the variable then takes (copy on
// write), so a value handed out stays as it was. The slots stay locked for the whole update: a
// read in a concurrent step waits for it rather than see a half-updated value.
template <typename Update>
void apply_update(KernelContext& c, const Layout& layout, Update&& update) {
  const Tensor& grad = c.input(layout.grad);
  for (int i : layout.variables) {
    if (!c.input(i).shape().compatible_with(grad.shape()) || c.input(i).num_elements() != grad.num_elements())
      c.fail("var and grad shapes differ: " + c.input(i).shape().to_string() + " vs " + grad.shape().to_string());
  }
  constexpr size_t kMaxVariables = 3;
  const size_t n = layout.variables.size();
  ResourceStore::VariableSlot* slots[kMaxVariables];
  for (size_t k = 0; k < n; ++k) slots[k] = &c.resources().variable(*c.node().input(layout.variables[k]).node);
  SlotLocks locks(slots, n);
  Tensor out[kMaxVariables];
  for (size_t k = 0; k < n; ++k) {
    const Tensor& in = c.input(layout.variables[k]);
    const bool in_place = in.shares_buffer_with(slots[k]->value) && in.buffer_ref_count() == 2;
    out[k] = in_place ? slots[k]->value : Tensor(in.dtype(), in.shape(), c.allocator());
  }
  update(out);
  for (size_t k = 0; k < n; ++k) slots[k]->value = out[k];
  c.set_output(0, std::move(out[0]));
}

template <typename T>
T scalar(const KernelContext& c, int i) {
  return c.input(i).template scalar_value<T>();
}

void gradient_descent_kernel(KernelContext& c) {
  static const Layout layout{{0}, {1}, 2};
  dispatch_numeric(c.input(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T alpha = scalar<T>(c, 1);
      apply_update(c, layout, [&](Tensor* out) {
        const T* var = c.input(0).data<T>();
        const T* g = c.input(2).data<T>();
        T* o = out[0].data<T>();
        c.parallel_for(c.input(0).num_elements(), 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) o[i] = var[i] - alpha * g[i];
        });
      });
    }
  });
}

void momentum_kernel(KernelContext& c) {
  static const Layout layout{{0, 1}, {2, 4}, 3};
  const bool nesterov = c.attrs().get_or<bool>("use_nesterov", false);
  dispatch_numeric(c.input(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T lr = scalar<T>(c, 2), momentum = scalar<T>(c, 4);
      apply_update(c, layout, [&](Tensor* out) {
        const T* var = c.input(0).data<T>();
        const T* accum = c.input(1).data<T>();
        const T* g = c.input(3).data<T>();
        T* ov = out[0].data<T>();
        T* oa = out[1].data<T>();
        c.parallel_for(c.input(0).num_elements(), 2, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const T a = accum[i] * momentum + g[i];
            oa[i] = a;
            ov[i] = nesterov ? var[i] - lr * (g[i] + momentum * a) : var[i] - lr * a;
          }
        });
      });
    }
  });
}

void adam_kernel(KernelContext& c) {
  static const Layout layout{{0, 1, 2}, {3, 4, 5, 6, 7, 8}, 9};
  dispatch_numeric(c.input(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      const T beta1_power = scalar<T>(c, 3), beta2_power = scalar<T>(c, 4), lr = scalar<T>(c, 5),
              beta1 = scalar<T>(c, 6), beta2 = scalar<T>(c, 7), epsilon = scalar<T>(c, 8);
      const T lr_t = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
      apply_update(c, layout, [&](Tensor* out) {
        const T* var = c.input(0).data<T>();
        const T* m = c.input(1).data<T>();
        const T* v = c.input(2).data<T>();
        const T* g = c.input(9).data<T>();
        T* ov = out[0].data<T>();
        T* om = out[1].data<T>();
        T* oo = out[2].data<T>();
        c.parallel_for(c.input(0).num_elements(), 4, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const T mi = beta1 * m[i] + (T(1) - beta1) * g[i];
            const T vi = beta2 * v[i] + (T(1) - beta2) * g[i] * g[i];
            om[i] = mi;
            oo[i] = vi;
            ov[i] = var[i] - lr_t * mi / (std::sqrt(vi) + epsilon);
          }
        });
      });
    }
  });
}

}  // namespace

void register_training_ops(OpRegistry& registry) {
  registry.add({.name = "ApplyGradientDescent",
                .num_inputs = 3,
                .shape = [](ShapeContext& c) { check_layout(c, {{0}, {1}, 2}); },
                .kernel = gradient_descent_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 2); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "var -= alpha * delta"});
  registry.add({.name = "ApplyMomentum",
                .num_inputs = 5,
                .shape = [](ShapeContext& c) { check_layout(c, {{0, 1}, {2, 4}, 3}); },
                .kernel = momentum_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 4); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "accum = accum * momentum + grad; var -= lr * accum"});
  registry.add({.name = "ApplyAdam",
                .num_inputs = 10,
                .shape = [](ShapeContext& c) { check_layout(c, {{0, 1, 2}, {3, 4, 5, 6, 7, 8}, 9}); },
                .kernel = adam_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 12); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Adam update of var, m and v."});
}

}  // namespace stepscope
