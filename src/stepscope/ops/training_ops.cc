#include "stepscope/ops/training_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

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

Output apply_adagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad, CallSite site) {
  return scope.add_node(op_def("ApplyAdagrad"), {var, accum, lr, grad}, {}, site)->output(0);
}

Output apply_rms_prop(const Scope& scope, Output var, Output ms, Output mom, Output lr, Output rho, Output momentum,
                      Output epsilon, Output grad, CallSite site) {
  return scope.add_node(op_def("ApplyRMSProp"), {var, ms, mom, lr, rho, momentum, epsilon, grad}, {}, site)->output(0);
}

Output apply_centered_rms_prop(const Scope& scope, Output var, Output mg, Output ms, Output mom, Output lr, Output rho,
                               Output momentum, Output epsilon, Output grad, CallSite site) {
  return scope.add_node(op_def("ApplyCenteredRMSProp"), {var, mg, ms, mom, lr, rho, momentum, epsilon, grad}, {}, site)
      ->output(0);
}

Output sparse_apply_gradient_descent(const Scope& scope, Output var, Output alpha, Output grad, Output indices,
                                     CallSite site) {
  return scope.add_node(op_def("SparseApplyGradientDescent"), {var, alpha, grad, indices}, {}, site)->output(0);
}

Output sparse_apply_momentum(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output indices,
                             Output momentum, bool use_nesterov, CallSite site) {
  return scope
      .add_node(op_def("SparseApplyMomentum"), {var, accum, lr, grad, indices, momentum},
                {{"use_nesterov", use_nesterov}}, site)
      ->output(0);
}

Output sparse_apply_adagrad(const Scope& scope, Output var, Output accum, Output lr, Output grad, Output indices,
                            CallSite site) {
  return scope.add_node(op_def("SparseApplyAdagrad"), {var, accum, lr, grad, indices}, {}, site)->output(0);
}

Output sparse_apply_rms_prop(const Scope& scope, Output var, Output ms, Output mom, Output lr, Output rho,
                             Output momentum, Output epsilon, Output grad, Output indices, CallSite site) {
  return scope
      .add_node(op_def("SparseApplyRMSProp"), {var, ms, mom, lr, rho, momentum, epsilon, grad, indices}, {}, site)
      ->output(0);
}

Output sparse_apply_centered_rms_prop(const Scope& scope, Output var, Output mg, Output ms, Output mom, Output lr,
                                      Output rho, Output momentum, Output epsilon, Output grad, Output indices,
                                      CallSite site) {
  return scope
      .add_node(op_def("SparseApplyCenteredRMSProp"), {var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices}, {},
                site)
      ->output(0);
}

Output sparse_apply_adam(const Scope& scope, Output var, Output m, Output v, Output beta1_power, Output beta2_power,
                         Output lr, Output beta1, Output beta2, Output epsilon, Output grad, Output indices,
                         CallSite site) {
  return scope
      .add_node(op_def("SparseApplyAdam"),
                {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices}, {}, site)
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

constexpr size_t kMaxVariables = 4;

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
  std::mutex* held_[4];
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

// ----- Elementwise updates shared by the dense and sparse ops ---------------------------------

// Dense: out[k][i] = step(in[k][i]..., grad[i]) for the N variables of `layout` (which lists them
// in the order `step` takes them).
template <typename T, size_t N, typename Step>
void dense_update(KernelContext& c, const Layout& layout, int64_t cost, Step&& step) {
  apply_update(c, layout, [&](Tensor* out) {
    const T* in[N];
    T* o[N];
    for (size_t k = 0; k < N; ++k) {
      in[k] = c.input(layout.variables[k]).data<T>();
      o[k] = out[k].data<T>();
    }
    const T* g = c.input(layout.grad).data<T>();
    c.parallel_for(c.input(0).num_elements(), cost, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T v[N];
        for (size_t k = 0; k < N; ++k) v[k] = in[k][i];
        step(v, g[i]);
        for (size_t k = 0; k < N; ++k) o[k][i] = v[k];
      }
    });
  });
}

// Sparse ops: variables (all shaped like var, [V, D...]), scalars, grad ([N, D...]) and
// indices ([N], int32 or int64).
struct SparseLayout {
  std::vector<int> variables;
  std::vector<int> scalars;
  int grad;
  int indices;
};

void check_sparse_layout(ShapeContext& c, const SparseLayout& layout) {
  const DType dtype = c.input_dtype(0);
  if (!is_floating(dtype)) c.fail("var must be float32 or float64, got " + std::string(dtype_name(dtype)));
  for (int i : layout.variables) {
    if (c.node().input(i).node->op_type() != "VariableV2")
      c.fail("input " + std::to_string(i) + " must be a variable, got " + c.node().input(i).name() + " (" +
             std::string(c.node().input(i).node->op_type()) + ")");
  }
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (i != layout.indices && c.input_dtype(i) != dtype)
      c.fail("input " + std::to_string(i) + " has dtype " + std::string(dtype_name(c.input_dtype(i))) + ", var has " +
             std::string(dtype_name(dtype)));
  }
  const DType index_dtype = c.input_dtype(layout.indices);
  if (index_dtype != DType::kInt32 && index_dtype != DType::kInt64)
    c.fail("indices must be int32 or int64, got " + std::string(dtype_name(index_dtype)));
  const Shape& indices = c.input_shape(layout.indices);
  if (indices.known_rank() && indices.rank() != 1) c.fail("indices must be 1-D, got shape " + indices.to_string());
  for (int i : layout.scalars) {
    const Shape& s = c.input_shape(i);
    if (s.known_rank() && s.num_elements() != 1 && s.fully_defined())
      c.fail("input " + std::to_string(i) + " must be a scalar, got shape " + s.to_string());
  }
  const Shape& var = c.input_shape(0);
  if (var.known_rank() && var.rank() < 1) c.fail("var must be at least 1-D, got shape " + var.to_string());
  for (int i : layout.variables)
    if (!c.input_shape(i).compatible_with(var))
      c.fail("var and input " + std::to_string(i) + " shapes differ: " + var.to_string() + " vs " +
             c.input_shape(i).to_string());
  const Shape& grad = c.input_shape(layout.grad);
  if (var.known_rank() && grad.known_rank()) {
    bool ok = grad.rank() == var.rank();
    for (int d = 1; ok && d < var.rank(); ++d) ok = grad.dim(d) < 0 || var.dim(d) < 0 || grad.dim(d) == var.dim(d);
    if (!ok) c.fail("grad must be [N] + var.shape[1:], var " + var.to_string() + ", grad " + grad.to_string());
  }
  if (grad.known_rank() && indices.known_rank() && grad.rank() >= 1 && indices.rank() == 1 && grad.dim(0) >= 0 &&
      indices.dim(0) >= 0 && grad.dim(0) != indices.dim(0))
    c.fail("grad has " + std::to_string(grad.dim(0)) + " rows for " + std::to_string(indices.dim(0)) + " indices");
  c.set_output(0, dtype, var);
}

// The rows a sparse gradient touches, each once, with the gradient rows of duplicate indices
// summed first (as TensorFlow's optimizers do with unique + unsorted_segment_sum), in the order
// of first appearance.
template <typename T>
struct SummedRows {
  std::vector<int64_t> index;  // distinct rows of var
  std::vector<T> grad;         // [index.size(), row]
  int64_t row = 0;             // elements per row
};

template <typename T, typename I>
void sum_rows(KernelContext& c, const Tensor& grad, const Tensor& indices, int64_t limit, SummedRows<T>& out) {
  const I* idx = indices.data<I>();
  const T* g = grad.data<T>();
  const int64_t n = indices.num_elements();
  std::unordered_map<int64_t, int64_t> slot;
  slot.reserve(static_cast<size_t>(n));
  out.index.reserve(static_cast<size_t>(n));
  out.grad.reserve(static_cast<size_t>(n * out.row));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r < 0 || r >= limit)
      c.fail("indices[" + std::to_string(i) + "] = " + std::to_string(r) + " is not in [0, " + std::to_string(limit) +
             ")");
    auto [it, fresh] = slot.try_emplace(r, static_cast<int64_t>(out.index.size()));
    const T* src = g + i * out.row;
    if (fresh) {
      out.index.push_back(r);
      out.grad.insert(out.grad.end(), src, src + out.row);
    } else {
      T* dst = out.grad.data() + it->second * out.row;
      for (int64_t k = 0; k < out.row; ++k) dst[k] += src[k];
    }
  }
}

// Sparse counterpart of apply_update: checks the shapes, sums duplicate rows, locks the slots,
// and runs step(v, g) on each element of each touched row (v: the N variables' values, updated
// in place), in the variable's own buffer when no one else holds it, else in a copy the variable
// then takes. Rows not touched keep their bits.
template <typename T, size_t N, typename Step>
void sparse_update(KernelContext& c, const SparseLayout& layout, int64_t cost, Step&& step) {
  const Tensor& var = c.input(0);
  const Tensor& grad = c.input(layout.grad);
  const Tensor& indices = c.input(layout.indices);
  if (var.rank() < 1) c.fail("var must be at least 1-D, got shape " + var.shape().to_string());
  for (int i : layout.variables)
    if (!(c.input(i).shape() == var.shape()))
      c.fail("var and input " + std::to_string(i) + " shapes differ: " + var.shape().to_string() + " vs " +
             c.input(i).shape().to_string());
  if (indices.rank() != 1) c.fail("indices must be 1-D, got shape " + indices.shape().to_string());
  bool ok = grad.rank() == var.rank() && grad.dim(0) == indices.dim(0);
  for (int d = 1; ok && d < var.rank(); ++d) ok = grad.dim(d) == var.dim(d);
  if (!ok)
    c.fail("grad must be [N] + var.shape[1:] for N indices; var " + var.shape().to_string() + ", grad " +
           grad.shape().to_string() + ", indices " + indices.shape().to_string());
  SummedRows<T> rows;
  rows.row = var.dim(0) > 0 ? var.num_elements() / var.dim(0) : 0;
  if (indices.dtype() == DType::kInt32)
    sum_rows<T, int32_t>(c, grad, indices, var.dim(0), rows);
  else
    sum_rows<T, int64_t>(c, grad, indices, var.dim(0), rows);

  ResourceStore::VariableSlot* slots[N];
  for (size_t k = 0; k < N; ++k) slots[k] = &c.resources().variable(*c.node().input(layout.variables[k]).node);
  SlotLocks locks(slots, N);
  Tensor out[N];
  T* o[N];
  for (size_t k = 0; k < N; ++k) {
    const Tensor& in = c.input(layout.variables[k]);
    const bool in_place = in.shares_buffer_with(slots[k]->value) && in.buffer_ref_count() == 2;
    if (in_place) {
      out[k] = slots[k]->value;
    } else {
      out[k] = Tensor(in.dtype(), in.shape(), c.allocator());
      if (in.bytes() > 0) std::memcpy(out[k].raw_data(), in.raw_data(), static_cast<size_t>(in.bytes()));
    }
    o[k] = out[k].template data<T>();
  }
  const int64_t width = rows.row;
  const T* g = rows.grad.data();
  const int64_t* index = rows.index.data();
  c.parallel_for(static_cast<int64_t>(rows.index.size()), 1 + cost * width, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t base = index[u] * width;
      const T* gu = g + u * width;
      for (int64_t j = 0; j < width; ++j) {
        T v[N];
        for (size_t k = 0; k < N; ++k) v[k] = o[k][base + j];
        step(v, gu[j]);
        for (size_t k = 0; k < N; ++k) o[k][base + j] = v[k];
      }
    }
  });
  for (size_t k = 0; k < N; ++k) slots[k]->value = out[k];
  c.set_output(0, std::move(out[0]));
}

// The per-element rules, v[] in the op's variable order.
template <typename T>
auto gd_step(T alpha) {
  return [=](T* v, T g) { v[0] -= alpha * g; };
}
template <typename T>
auto momentum_step(T lr, T momentum, bool nesterov) {
  return [=](T* v, T g) {
    const T a = v[1] * momentum + g;
    v[1] = a;
    v[0] = nesterov ? v[0] - lr * (g + momentum * a) : v[0] - lr * a;
  };
}
// TF's ApplyAdagrad (update_slots): accum += g^2; var -= lr * g / sqrt(accum)
template <typename T>
auto adagrad_step(T lr) {
  return [=](T* v, T g) {
    v[1] += g * g;
    v[0] -= lr * g / std::sqrt(v[1]);
  };
}
// TF's ApplyRMSProp: ms = rho ms + (1 - rho) g^2; mom = momentum mom + lr g / sqrt(ms + epsilon); var -= mom
template <typename T>
auto rms_prop_step(T lr, T rho, T momentum, T epsilon) {
  return [=](T* v, T g) {
    v[1] = rho * v[1] + (T(1) - rho) * g * g;
    v[2] = momentum * v[2] + lr * g / std::sqrt(v[1] + epsilon);
    v[0] -= v[2];
  };
}
// TF's ApplyCenteredRMSProp: mg = rho mg + (1 - rho) g; ms as above;
// mom = momentum mom + lr g / sqrt(ms - mg^2 + epsilon); var -= mom   (v: var, mg, ms, mom)
template <typename T>
auto centered_rms_prop_step(T lr, T rho, T momentum, T epsilon) {
  return [=](T* v, T g) {
    v[1] = rho * v[1] + (T(1) - rho) * g;
    v[2] = rho * v[2] + (T(1) - rho) * g * g;
    v[3] = momentum * v[3] + lr * g / std::sqrt(v[2] - v[1] * v[1] + epsilon);
    v[0] -= v[3];
  };
}
template <typename T>
auto adam_step(T lr_t, T beta1, T beta2, T epsilon) {
  return [=](T* v, T g) {
    v[1] = beta1 * v[1] + (T(1) - beta1) * g;
    v[2] = beta2 * v[2] + (T(1) - beta2) * g * g;
    v[0] -= lr_t * v[1] / (std::sqrt(v[2]) + epsilon);
  };
}

// Runs body(T{}) for float32 and float64 vars.
template <typename Body>
void dispatch_float(KernelContext& c, Body&& body) {
  dispatch_numeric(c.input(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) body(zero);
  });
}

const Layout kAdagrad{{0, 1}, {2}, 3};
const Layout kRMSProp{{0, 1, 2}, {3, 4, 5, 6}, 7};
const Layout kCenteredRMSProp{{0, 1, 2, 3}, {4, 5, 6, 7}, 8};
const SparseLayout kSparseGD{{0}, {1}, 2, 3};
const SparseLayout kSparseMomentum{{0, 1}, {2, 5}, 3, 4};
const SparseLayout kSparseAdagrad{{0, 1}, {2}, 3, 4};
const SparseLayout kSparseRMSProp{{0, 1, 2}, {3, 4, 5, 6}, 7, 8};
const SparseLayout kSparseCenteredRMSProp{{0, 1, 2, 3}, {4, 5, 6, 7}, 8, 9};
const SparseLayout kSparseAdam{{0, 1, 2}, {3, 4, 5, 6, 7, 8}, 9, 10};

void adagrad_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    dense_update<T, 2>(c, kAdagrad, 4, adagrad_step<T>(scalar<T>(c, 2)));
  });
}
void rms_prop_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    dense_update<T, 3>(c, kRMSProp, 6,
                       rms_prop_step<T>(scalar<T>(c, 3), scalar<T>(c, 4), scalar<T>(c, 5), scalar<T>(c, 6)));
  });
}
void centered_rms_prop_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    dense_update<T, 4>(c, kCenteredRMSProp, 8,
                       centered_rms_prop_step<T>(scalar<T>(c, 4), scalar<T>(c, 5), scalar<T>(c, 6), scalar<T>(c, 7)));
  });
}
void sparse_gd_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    sparse_update<T, 1>(c, kSparseGD, 1, gd_step<T>(scalar<T>(c, 1)));
  });
}
void sparse_momentum_kernel(KernelContext& c) {
  const bool nesterov = c.attrs().get_or<bool>("use_nesterov", false);
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    sparse_update<T, 2>(c, kSparseMomentum, 2, momentum_step<T>(scalar<T>(c, 2), scalar<T>(c, 5), nesterov));
  });
}
void sparse_adagrad_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    sparse_update<T, 2>(c, kSparseAdagrad, 4, adagrad_step<T>(scalar<T>(c, 2)));
  });
}
void sparse_rms_prop_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    sparse_update<T, 3>(c, kSparseRMSProp, 6,
                        rms_prop_step<T>(scalar<T>(c, 3), scalar<T>(c, 4), scalar<T>(c, 5), scalar<T>(c, 6)));
  });
}
void sparse_centered_rms_prop_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    sparse_update<T, 4>(c, kSparseCenteredRMSProp, 8,
                        centered_rms_prop_step<T>(scalar<T>(c, 4), scalar<T>(c, 5), scalar<T>(c, 6), scalar<T>(c, 7)));
  });
}
void sparse_adam_kernel(KernelContext& c) {
  dispatch_float(c, [&](auto zero) {
    using T = decltype(zero);
    const T beta1_power = scalar<T>(c, 3), beta2_power = scalar<T>(c, 4), lr = scalar<T>(c, 5), beta1 = scalar<T>(c, 6),
            beta2 = scalar<T>(c, 7), epsilon = scalar<T>(c, 8);
    const T lr_t = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    sparse_update<T, 3>(c, kSparseAdam, 12, adam_step<T>(lr_t, beta1, beta2, epsilon));
  });
}

// FLOPs of a sparse update: per element of grad.
int64_t sparse_flops(const CostContext& c, int grad, int64_t per_element) {
  const int64_t n = c.input_shapes[grad].num_elements();
  return n < 0 ? 0 : n * per_element;
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
  registry.add({.name = "ApplyAdagrad",
                .num_inputs = 4,
                .shape = [](ShapeContext& c) { check_layout(c, kAdagrad); },
                .kernel = adagrad_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 5); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, accum, lr, grad). accum += grad^2; var -= lr * grad / sqrt(accum)"});
  registry.add({.name = "ApplyRMSProp",
                .num_inputs = 8,
                .shape = [](ShapeContext& c) { check_layout(c, kRMSProp); },
                .kernel = rms_prop_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 10); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, ms, mom, lr, rho, momentum, epsilon, grad). ms = rho * ms + (1 - rho) * grad^2; "
                       "mom = momentum * mom + lr * grad / sqrt(ms + epsilon); var -= mom"});
  registry.add({.name = "ApplyCenteredRMSProp",
                .num_inputs = 9,
                .shape = [](ShapeContext& c) { check_layout(c, kCenteredRMSProp); },
                .kernel = centered_rms_prop_kernel,
                .flops = [](const CostContext& c) { return elementwise_flops(c, 14); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, mg, ms, mom, lr, rho, momentum, epsilon, grad). mg = rho * mg + (1 - rho) * grad; "
                       "ms = rho * ms + (1 - rho) * grad^2; mom = momentum * mom + lr * grad / sqrt(ms - mg^2 + "
                       "epsilon); var -= mom"});
  registry.add({.name = "SparseApplyGradientDescent",
                .num_inputs = 4,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseGD); },
                .kernel = sparse_gd_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 2, 2); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var [V, D...], alpha, grad [N, D...], indices [N]). var[indices[i]] -= alpha * "
                       "grad[i], duplicate indices summed first; other rows untouched."});
  registry.add({.name = "SparseApplyMomentum",
                .num_inputs = 6,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseMomentum); },
                .kernel = sparse_momentum_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 3, 4); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, accum, lr, grad, indices, momentum); attr use_nesterov. ApplyMomentum on the rows "
                       "indices name (duplicates summed first); other rows of var and accum untouched."});
  registry.add({.name = "SparseApplyAdagrad",
                .num_inputs = 5,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseAdagrad); },
                .kernel = sparse_adagrad_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 3, 5); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, accum, lr, grad, indices). ApplyAdagrad on the rows indices name (duplicates "
                       "summed first); other rows of var and accum untouched."});
  registry.add({.name = "SparseApplyRMSProp",
                .num_inputs = 9,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseRMSProp); },
                .kernel = sparse_rms_prop_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 7, 10); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, ms, mom, lr, rho, momentum, epsilon, grad, indices). ApplyRMSProp on the rows "
                       "indices name (duplicates summed first); other rows untouched."});
  registry.add({.name = "SparseApplyCenteredRMSProp",
                .num_inputs = 10,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseCenteredRMSProp); },
                .kernel = sparse_centered_rms_prop_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 8, 14); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices). ApplyCenteredRMSProp on "
                       "the rows indices name (duplicates summed first); other rows untouched."});
  registry.add({.name = "SparseApplyAdam",
                .num_inputs = 11,
                .shape = [](ShapeContext& c) { check_sparse_layout(c, kSparseAdam); },
                .kernel = sparse_adam_kernel,
                .flops = [](const CostContext& c) { return sparse_flops(c, 9, 12); },
                .not_differentiable = true,
                .stateful = true,
                .doc = "Inputs (var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices). Lazy "
                       "Adam (tf.contrib.opt.LazyAdamOptimizer): ApplyAdam's update on the rows indices name only "
                       "(duplicates summed first); other rows of var, m and v untouched."});
}

}  // namespace stepscope
