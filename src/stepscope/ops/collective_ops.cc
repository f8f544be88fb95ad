#include "stepscope/ops/collective_ops.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/collective_trace.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

// One process: every collective is the identity (the sum over one rank is the value).
class LocalBackend : public CollectiveBackend {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "local (one process)"; }
  bool agree(uint64_t) override { return true; }
  void allreduce(const void* in, void* out, int64_t count, DType dtype, double scale) override {
    copy_scaled(in, out, count, dtype, scale);
  }
  void broadcast(void*, int64_t, int) override {}
  void reduce_sum(void*, int64_t, DType, int) override {}
  void allgather_int64(int64_t value, int64_t* out) override { out[0] = value; }
  void allgatherv(const void* in, void* out, std::span<const int64_t> bytes) override {
    if (bytes[0] > 0) std::memcpy(out, in, static_cast<size_t>(bytes[0]));
  }
  void reduce_scatter_sum(const void* in, void* out, std::span<const int64_t> counts, DType dtype) override {
    if (counts[0] > 0) std::memcpy(out, in, static_cast<size_t>(counts[0]) * dtype_size(dtype));
  }
};

std::mutex backend_mutex;
// Held through a whole collective (the agreement check and the data): one collective at a time
// per process, so two kernels on the executor's threads never interleave their MPI calls.
std::mutex collective_mutex;
std::shared_ptr<CollectiveBackend>& backend_slot() {
  static auto* slot = new std::shared_ptr<CollectiveBackend>(std::make_shared<LocalBackend>());
  return *slot;
}

// FNV-1a: the same value on every rank for the same node (std::hash need not be).
uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// All ranks must be at the same collective (same node, same element count) before data moves:
// otherwise buffers of different sizes would meet, which MPI does not detect.
// `detail` folds more into the key (an Allreduce's per-input counts: they decide its calls).
void expect_agreement(KernelContext& c, CollectiveBackend& b, int64_t count, uint64_t detail = 0) {
  if (b.size() == 1) return;
  const uint64_t key = fnv1a(c.node().name()) ^ (static_cast<uint64_t>(count) * 0x9E3779B97F4A7C15ull) ^ detail;
  if (!b.agree(key))
    c.fail(ErrorCode::kInternal,
           "the ranks are not at the same collective (node names or element counts differ, this rank has " +
               std::to_string(count) +
               " elements): every rank must run the same collectives in the same order; "
               "order collectives that can be ready at once with control dependencies");
}

bool is_summable(DType d) { return d != DType::kBool && d != DType::kString; }

int64_t root_rank(const KernelContext& c, const CollectiveBackend& b) {
  const int64_t root = c.attrs().get<int64_t>("root_rank");
  if (root < 0 || root >= b.size())
    c.fail("root_rank " + std::to_string(root) + " is not a rank of this job (size " + std::to_string(b.size()) + ")");
  return root;
}

// Elements per row (dim 0) of a shape of rank >= 1.
int64_t row_elements(const Shape& s) {
  int64_t n = 1;
  for (int d = 1; d < s.rank(); ++d) n *= s.dim(d);
  return n;
}

// ----- Allreduce -----------------------------------------------------------------------------

void allreduce_shape(ShapeContext& c) {
  if (c.num_inputs() < 1) c.fail("expects at least one input");
  const DType dtype = c.input_dtype(0);
  if (!is_summable(dtype)) c.fail("cannot sum tensors of dtype " + std::string(dtype_name(dtype)));
  const std::string& reduction = c.node().attrs().get<std::string>("reduction");
  if (reduction != "sum" && reduction != "average") c.fail("reduction must be sum or average, got " + reduction);
  if (reduction == "average" && !is_floating(dtype))
    c.fail("average needs a floating dtype, got " + std::string(dtype_name(dtype)));
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != dtype)
      c.fail("inputs[" + std::to_string(i) + "] has dtype " + std::string(dtype_name(c.input_dtype(i))) +
             ", but inputs[0] has dtype " + std::string(dtype_name(dtype)) + " (one fused buffer has one dtype)");
    c.set_output(i, dtype, c.input_shape(i));
  }
}

// Why inputs of kAllreduceDirectBytes (64 KiB) and more are reduced on their own: one more
// allreduce call costs its latency (a few µs on shared memory, tens over TCP), which at
// 64 KiB and more is a small part of the call, so sharing a call gains them little. Fused inputs
// their producers did not write into a pack (see allreduce_kernel) cost two copies (into a fusion
// buffer, and out again), about 2 x 64 KiB at ~10 GB/s ≈ 13 µs at 64 KiB: more than the call
// they save. Below 64 KiB the latency is most of a call, so the small ones share one.
// A lone small input gains nothing from the buffer (one call either way), so it goes direct too.
std::vector<bool> plan_fused(std::span<const int64_t> input_bytes) {
  std::vector<bool> fused(input_bytes.size());
  int small = 0;
  for (size_t i = 0; i < input_bytes.size(); ++i) small += (fused[i] = input_bytes[i] < kAllreduceDirectBytes);
  if (small < 2) fused.assign(input_bytes.size(), false);
  return fused;
}

// Fused inputs that something else holds too are copied into a pack made for their outputs
// (Buffer::create_packed, at most 2 GiB with its headers); a bigger one (over 16,384 inputs
// under 64 KiB) goes through a fusion buffer and is copied out.
constexpr int64_t kMaxOutputPackBytes = int64_t{1} << 30;

// The fused inputs, which the executor asks their producers to write into one pack.
std::vector<int> allreduce_contiguous_inputs(const Node&, std::span<const int64_t> input_bytes) {
  const std::vector<bool> fused = plan_fused(input_bytes);
  std::vector<int> inputs;
  for (size_t i = 0; i < fused.size(); ++i)
    if (fused[i]) inputs.push_back(static_cast<int>(i));
  return inputs;
}

void allreduce_kernel(KernelContext& c) {
  std::lock_guard lock(collective_mutex);
  CollectiveBackend& b = collective_backend();
  const int n = c.num_inputs();
  const DType dtype = c.input(0).dtype();
  const size_t esize = dtype_size(dtype);
  int64_t total = 0;
  uint64_t counts_hash = 1469598103934665603ull;
  std::vector<int64_t> bytes(n);
  for (int i = 0; i < n; ++i) {
    const int64_t count = c.input(i).num_elements();
    total += count;
    bytes[i] = count * static_cast<int64_t>(esize);
    counts_hash = (counts_hash ^ static_cast<uint64_t>(count)) * 1099511628211ull;
  }
  if (b.size() == 1) {
    for (int i = 0; i < n; ++i) c.set_output(i, c.input(i));  // the sum and the average over one rank
    return;
  }
  const double factor = c.attrs().get<std::string>("reduction") == "average" ? 1.0 / b.size() : 1.0;
  const std::vector<bool> fused = plan_fused(bytes);
  // Output i: input i's own buffer when only this op holds it (a gradient in training, made for
  // this op and read by no other: the executor counts every reader in the buffer's references),
  // so the result is written where the input lies and nothing is allocated; else a new tensor.
  const auto output_for = [&](int i) -> Tensor& {
    if (c.input(i).buffer_unique()) {
      c.set_output(i, c.input(i));
      return c.output(i);
    }
    return c.allocate_output(i, dtype, c.input(i).shape());
  };
  // Horovod's fusion buffer for the small inputs: one collective call for all of them (latency
  // is paid once; a small gradient alone would be all latency), over the layout of
  // Buffer::create_packed. Where the executor had their producers write them there (a pack,
  // OpDef::contiguous_inputs) and only this op holds them, they are reduced where they lie and
  // become the outputs: no copy. Otherwise (inputs something else holds too) a pack of that
  // layout is made for their outputs, and the backend reduces the inputs, padding included, into
  // it (CollectiveBackend::allreduce_gathered: the shared-memory one reads them where they lie,
  // MPI's copies them in first): one allocation, and no copy out. All ways make the same call (padding included), so ranks that took
  // different ways still meet. The backend averages (it can fold that into a pass of its own:
  // see CollectiveBackend::allreduce).
  std::vector<int> fused_inputs;
  std::vector<int64_t> fused_bytes;
  for (int i = 0; i < n; ++i)
    if (fused[i]) fused_inputs.push_back(i), fused_bytes.push_back(bytes[i]);
  std::vector<int64_t> offsets(fused_inputs.size());
  const int64_t buffer_bytes = Buffer::packed_offsets(fused_bytes, offsets);
  bool in_place = false, outputs_packed = false;
  std::vector<AllreduceInput> gathered;  // with outputs_packed: the inputs, and the padding between
  Tensor buffer;
  char* p = nullptr;
  if (!fused_inputs.empty()) {
    const Tensor& first = c.input(fused_inputs[0]);
    const Buffer* pack = first.buffer() ? first.buffer()->pack() : nullptr;
    in_place = pack != nullptr;
    for (size_t k = 0; k < fused_inputs.size() && in_place; ++k) {
      const Tensor& in = c.input(fused_inputs[k]);
      in_place = in.buffer_unique() && in.buffer()->pack() == pack &&
                 static_cast<const char*>(in.raw_data()) - static_cast<const char*>(first.raw_data()) == offsets[k];
    }
    if (in_place) {
      p = static_cast<char*>(const_cast<void*>(first.raw_data()));  // only this op holds it
    } else if (buffer_bytes < kMaxOutputPackBytes) {
      std::vector<int64_t> counts(fused_inputs.size());
      for (size_t k = 0; k < counts.size(); ++k) counts[k] = fused_bytes[k] / static_cast<int64_t>(esize);
      std::vector<Buffer*> packed(fused_inputs.size());
      Buffer::create_packed(c.allocator(), dtype, counts, packed);
      for (size_t k = 0; k < fused_inputs.size(); ++k) {
        const int i = fused_inputs[k];
        c.set_output(i, Tensor::adopt(dtype, c.input(i).shape(), packed[k]));
        gathered.push_back({c.input(i).raw_data(), counts[k]});
        const int64_t next = k + 1 < offsets.size() ? offsets[k + 1] : buffer_bytes;
        if (const int64_t padding = next - offsets[k] - fused_bytes[k]; padding > 0)
          gathered.push_back({nullptr, padding / static_cast<int64_t>(esize)});
      }
      p = static_cast<char*>(c.output(fused_inputs[0]).raw_data());  // the pack's start (offset 0)
      outputs_packed = true;
    } else {  // more than one pack can hold: a fusion buffer, copied out after
      buffer = Tensor(dtype, Shape{buffer_bytes / static_cast<int64_t>(esize)}, c.allocator());
      p = static_cast<char*>(buffer.raw_data());
      for (size_t k = 0; k < fused_inputs.size(); ++k) {
        const int64_t end = offsets[k] + fused_bytes[k];
        const int64_t next = k + 1 < offsets.size() ? offsets[k + 1] : buffer_bytes;
        if (fused_bytes[k] > 0)
          std::memcpy(p + offsets[k], c.input(fused_inputs[k]).raw_data(), static_cast<size_t>(fused_bytes[k]));
        if (next > end) std::memset(p + end, 0, static_cast<size_t>(next - end));
      }
    }
  }
  // The per-input counts decide which calls are made (fused or direct): they must agree too.
  expect_agreement(c, b, total, n > 1 ? counts_hash : 0);
  if (!fused_inputs.empty()) {
    if (outputs_packed)
      b.allreduce_gathered(gathered, p, dtype, factor);
    else
      b.allreduce(p, p, buffer_bytes / static_cast<int64_t>(esize), dtype, factor);
    for (size_t k = 0; k < fused_inputs.size() && !outputs_packed; ++k) {  // every fused output, empty ones too
      const int i = fused_inputs[k];
      if (in_place) {
        c.set_output(i, c.input(i));
        continue;
      }
      Tensor& out = output_for(i);
      if (bytes[i] > 0) std::memcpy(out.raw_data(), p + offsets[k], static_cast<size_t>(bytes[i]));
    }
  }
  // The others: each its own call, from its input to its output (the input's own buffer where
  // only this op holds it).
  for (int i = 0; i < n; ++i) {
    if (fused[i]) continue;
    const void* in = c.input(i).raw_data();
    b.allreduce(in, output_for(i).raw_data(), bytes[i] / static_cast<int64_t>(esize), dtype, factor);
  }
}

// A ring allreduce moves 2 (n - 1) / n of the buffer out of each rank, adding (n - 1) / n of it.
int64_t allreduce_flops(const CostContext& ctx) {
  const int64_t size = collective_backend().size();
  int64_t elements = 0;
  for (const Shape& s : ctx.output_shapes) elements += std::max<int64_t>(0, s.num_elements());
  const bool average = ctx.node.attrs().get<std::string>("reduction") == "average";
  return elements * (size - 1) / size + (average && size > 1 ? elements : 0);
}

std::vector<Output> allreduce_grad(const Scope& s, const Node& n, std::span<const Output> dy) {
  std::vector<Output> grads(dy.begin(), dy.end());
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i]) grads[i] = zeros_like(s, n.output(static_cast<int>(i)));
  const ReduceOp op = n.attrs().get<std::string>("reduction") == "average" ? ReduceOp::kAverage : ReduceOp::kSum;
  return allreduce(s, grads, op);
}

// ----- Broadcast, Reduce ---------------------------------------------------------------------

void rooted_shape(ShapeContext& c) {
  if (!is_summable(c.input_dtype(0)))
    c.fail("dtype " + std::string(dtype_name(c.input_dtype(0))) + " is not supported");
  if (c.node().attrs().get<int64_t>("root_rank") < 0)
    c.fail("root_rank must be >= 0, got " + std::to_string(c.node().attrs().get<int64_t>("root_rank")));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
}

void broadcast_kernel(KernelContext& c) {
  std::lock_guard lock(collective_mutex);
  CollectiveBackend& b = collective_backend();
  const int64_t root = root_rank(c, b);
  const Tensor& x = c.input(0);
  expect_agreement(c, b, x.num_elements());
  if (b.size() == 1) return c.set_output(0, x);
  Tensor& out = c.allocate_output(0, x.dtype(), x.shape());
  const int64_t bytes = x.num_elements() * static_cast<int64_t>(dtype_size(x.dtype()));
  if (b.rank() == root && bytes) std::memcpy(out.raw_data(), x.raw_data(), bytes);
  b.broadcast(out.raw_data(), bytes, static_cast<int>(root));
}

void reduce_kernel(KernelContext& c) {
  std::lock_guard lock(collective_mutex);
  CollectiveBackend& b = collective_backend();
  const int64_t root = root_rank(c, b);
  const Tensor& x = c.input(0);
  expect_agreement(c, b, x.num_elements());
  if (b.size() == 1) return c.set_output(0, x);
  Tensor& out = c.allocate_output(0, x.dtype(), x.shape());
  const size_t bytes = x.num_elements() * dtype_size(x.dtype());
  if (bytes) std::memcpy(out.raw_data(), x.raw_data(), bytes);
  b.reduce_sum(out.raw_data(), x.num_elements(), x.dtype(), static_cast<int>(root));
  if (b.rank() != root && bytes) std::memset(out.raw_data(), 0, bytes);  // zero is all-bits-zero here
}

int64_t reduce_flops(const CostContext& ctx) {
  const int64_t size = collective_backend().size();
  return std::max<int64_t>(0, ctx.output_shapes[0].num_elements()) * (size - 1) / size;
}

std::vector<Output> broadcast_grad(const Scope& s, const Node& n, std::span<const Output> dy) {
  return {reduce(s, dy[0], static_cast<int>(n.attrs().get<int64_t>("root_rank")))};
}
std::vector<Output> reduce_grad(const Scope& s, const Node& n, std::span<const Output> dy) {
  return {broadcast(s, dy[0], static_cast<int>(n.attrs().get<int64_t>("root_rank")))};
}

// ----- Allgather, ReduceScatter --------------------------------------------------------------

void allgather_shape(ShapeContext& c) {
  if (!is_summable(c.input_dtype(0)))
    c.fail("dtype " + std::string(dtype_name(c.input_dtype(0))) + " is not supported");
  const Shape& x = c.input_shape(0);
  if (x.known_rank() && x.rank() == 0) c.fail("cannot gather scalars: x needs a dim 0 to concatenate along");
  Shape out = x;
  if (x.known_rank()) out.set_dim(0, -1);  // the other ranks' row counts are known at run time only
  c.set_output(0, c.input_dtype(0), out);
}

void allgather_kernel(KernelContext& c) {
  std::lock_guard lock(collective_mutex);
  CollectiveBackend& b = collective_backend();
  const Tensor& x = c.input(0);
  if (x.shape().rank() == 0) c.fail("cannot gather a scalar");
  const int64_t per_row = row_elements(x.shape());
  expect_agreement(c, b, per_row);  // the rows' size must agree; the row counts may differ
  if (b.size() == 1) return c.set_output(0, x);
  std::vector<int64_t> rows(b.size());
  b.allgather_int64(x.shape().dim(0), rows.data());
  int64_t total = 0;
  std::vector<int64_t> bytes(b.size());
  const int64_t row_bytes = per_row * static_cast<int64_t>(dtype_size(x.dtype()));
  for (int r = 0; r < b.size(); ++r) {
    total += rows[r];
    bytes[r] = rows[r] * row_bytes;
  }
  Shape out_shape = x.shape();
  out_shape.set_dim(0, total);
  Tensor& out = c.allocate_output(0, x.dtype(), out_shape);
  b.allgatherv(x.raw_data(), out.raw_data(), bytes);
}

void reduce_scatter_shape(ShapeContext& c) {
  if (!is_summable(c.input_dtype(0)))
    c.fail("dtype " + std::string(dtype_name(c.input_dtype(0))) + " is not supported");
  const Shape& x = c.input_shape(0);
  const Shape& like = c.input_shape(1);
  if (x.known_rank() && x.rank() == 0) c.fail("x must have a dim 0 to scatter along, got a scalar");
  Shape out = x;
  if (x.known_rank()) out.set_dim(0, like.known_rank() && like.rank() > 0 ? like.dim(0) : -1);
  c.set_output(0, c.input_dtype(0), out);
}

void reduce_scatter_kernel(KernelContext& c) {
  std::lock_guard lock(collective_mutex);
  CollectiveBackend& b = collective_backend();
  const Tensor& x = c.input(0);
  const Tensor& like = c.input(1);
  if (x.shape().rank() == 0 || like.shape().rank() == 0)
    c.fail("x and like need a dim 0, got shapes " + x.shape().to_string() + " and " + like.shape().to_string());
  const int64_t per_row = row_elements(x.shape());
  expect_agreement(c, b, x.num_elements());
  std::vector<int64_t> rows(b.size());
  b.allgather_int64(like.shape().dim(0), rows.data());
  int64_t total = 0;
  for (int r = 0; r < b.size(); ++r) total += rows[r];
  if (total != x.shape().dim(0))
    c.fail("the ranks' row counts (like's dim 0) add up to " + std::to_string(total) + ", but x has " +
           std::to_string(x.shape().dim(0)) + " rows");
  Shape out_shape = x.shape();
  out_shape.set_dim(0, rows[b.rank()]);
  Tensor& out = c.allocate_output(0, x.dtype(), out_shape);
  if (b.size() == 1) {
    const size_t bytes = out.num_elements() * dtype_size(x.dtype());
    if (bytes) std::memcpy(out.raw_data(), x.raw_data(), bytes);
    return;
  }
  std::vector<int64_t> counts(b.size());
  for (int r = 0; r < b.size(); ++r) counts[r] = rows[r] * per_row;
  b.reduce_scatter_sum(x.raw_data(), out.raw_data(), counts, x.dtype());
}

int64_t reduce_scatter_flops(const CostContext& ctx) {
  const int64_t size = collective_backend().size();
  return std::max<int64_t>(0, ctx.input_shapes[0].num_elements()) * (size - 1) / size;
}

std::vector<Output> allgather_grad(const Scope& s, const Node& n, std::span<const Output> dy) {
  return {reduce_scatter(s, dy[0], n.input(0))};
}
std::vector<Output> reduce_scatter_grad(const Scope& s, const Node& n, std::span<const Output> dy) {
  return {allgather(s, dy[0]), Output{}};
}

}  // namespace

CollectiveBackend& collective_backend() {
  std::lock_guard lock(backend_mutex);
  return *backend_slot();
}

void set_collective_backend(std::shared_ptr<CollectiveBackend> backend) {
  std::lock_guard lock(backend_mutex);
  backend_slot() = backend ? std::move(backend) : std::make_shared<LocalBackend>();
}

std::vector<Output> allreduce(const Scope& scope, const std::vector<Output>& inputs, ReduceOp op, CallSite site) {
  if (inputs.empty()) throw InvalidArgumentError("[Allreduce] allreduce needs at least one tensor");
  Node* node = scope.add_node(op_def("Allreduce"), inputs,
                              {{"reduction", std::string(op == ReduceOp::kAverage ? "average" : "sum")}}, site);
  std::vector<Output> outs;
  for (int i = 0; i < node->num_outputs(); ++i) outs.push_back(node->output(i));
  return outs;
}

Output allreduce(const Scope& scope, Output x, ReduceOp op, CallSite site) {
  return allreduce(scope, std::vector<Output>{x}, op, site).front();
}

Output broadcast(const Scope& scope, Output x, int root_rank, CallSite site) {
  return scope.add_node(op_def("Broadcast"), {x}, {{"root_rank", int64_t{root_rank}}}, site)->output(0);
}

Output reduce(const Scope& scope, Output x, int root_rank, CallSite site) {
  return scope.add_node(op_def("Reduce"), {x}, {{"root_rank", int64_t{root_rank}}}, site)->output(0);
}

Output allgather(const Scope& scope, Output x, CallSite site) {
  return scope.add_node(op_def("Allgather"), {x}, {}, site)->output(0);
}

Output reduce_scatter(const Scope& scope, Output x, Output like, CallSite site) {
  return scope.add_node(op_def("ReduceScatter"), {x, like}, {}, site)->output(0);
}

std::vector<bool> allreduce_fused_inputs(std::span<const int64_t> input_bytes) { return plan_fused(input_bytes); }

void CollectiveBackend::allreduce_gathered(std::span<const AllreduceInput> inputs, void* out, DType dtype,
                                           double scale) {
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  char* at = static_cast<char*>(out);
  for (const AllreduceInput& in : inputs) {
    const size_t bytes = static_cast<size_t>(in.count * esize);
    if (bytes == 0) continue;
    if (in.data)
      std::memcpy(at, in.data, bytes);
    else
      std::memset(at, 0, bytes);
    at += bytes;
  }
  allreduce(out, out, (at - static_cast<char*>(out)) / esize, dtype, scale);
}

void copy_scaled(const void* in, void* out, int64_t n, DType dtype, double factor) {
  if (n <= 0) return;
  const bool scaled = factor != 1.0 && (dtype == DType::kFloat32 || dtype == DType::kFloat64);
  if (!scaled) {
    if (in != out) std::memcpy(out, in, static_cast<size_t>(n) * dtype_size(dtype));
    return;
  }
  // In place as its own loop: the compiler vectorizes a loop over two arrays only when they do
  // not overlap, and runs it one element at a time otherwise (~5x slower: 85 µs a MiB here).
  const auto scale = [&]<typename T>(const T* p, T* q) {
    const T f = static_cast<T>(factor);
    if (p == q) {
      for (int64_t i = 0; i < n; ++i) q[i] *= f;
    } else {
      for (int64_t i = 0; i < n; ++i) q[i] = p[i] * f;
    }
  };
  if (dtype == DType::kFloat32)
    scale(static_cast<const float*>(in), static_cast<float*>(out));
  else
    scale(static_cast<const double*>(in), static_cast<double*>(out));
}

bool is_collective_op(std::string_view op) {
  return op == "Allreduce" || op == "Broadcast" || op == "Reduce" || op == "Allgather" || op == "ReduceScatter";
}

namespace {

// "<call> (<how>)" for the args' string_view: kept for the process's life, made once each.
std::string_view interned(std::string text) {
  static std::mutex mutex;
  static auto* texts = new std::set<std::string, std::less<>>;
  std::lock_guard lock(mutex);
  return *texts->insert(std::move(text)).first;
}

}  // namespace

std::optional<CollectiveTraceArgs> collective_trace_args(const Node& node, std::span<const int64_t> output_bytes_each) {
  if (!is_collective_op(node.op().name)) return std::nullopt;
  return collective_trace_args(node.op().name, node.num_inputs(), collective_backend().size(), output_bytes_each);
}

std::optional<CollectiveTraceArgs> collective_trace_args(std::string_view op, int num_inputs, int64_t n,
                                                         std::span<const int64_t> output_bytes_each) {
  if (n < 1) return std::nullopt;
  // The job's own backend says what its allreduce calls (a literal); a profile of another job's
  // (loaded elsewhere) names the MPI call.
  const CollectiveBackend& backend = collective_backend();
  const std::string_view allreduce_call = backend.size() == n ? backend.allreduce_algorithm() : "MPI_Allreduce";
  int64_t output_bytes = 0;
  for (int64_t bytes : output_bytes_each) output_bytes += bytes;
  CollectiveTraceArgs args;
  args.ranks = n;
  if (op == "Allreduce") {
    args.algorithm = allreduce_call;  // a literal of the backend's, or this one
    // The kernel's plan, from the same sizes (an output has its input's size).
    if (num_inputs > 1 && n > 1 && static_cast<int>(output_bytes_each.size()) == num_inputs) {
      const std::vector<bool> fused = plan_fused(output_bytes_each);
      for (int i = 0; i < num_inputs; ++i) (fused[i] ? args.fused_inputs : args.direct_inputs).push_back(i);
      args.algorithm = interned(
          std::string(allreduce_call) +
          (args.direct_inputs.empty()  ? " (fused buffer)"
           : args.fused_inputs.empty() ? " (one call per input)"
                                       : " (fused buffer for the small inputs, one call per large input)"));
    }
    args.bytes_moved = 2 * (n - 1) * output_bytes / n;
  } else if (op == "Broadcast" || op == "Reduce") {
    args.algorithm = op == "Broadcast" ? "MPI_Bcast" : "MPI_Reduce";
    args.bytes_moved = n > 1 ? output_bytes : 0;
  } else if (op == "Allgather") {
    args.algorithm = "MPI_Allgatherv";
    args.bytes_moved = (n - 1) * output_bytes / n;
  } else if (op == "ReduceScatter") {
    args.algorithm = "MPI_Reduce_scatter";
    args.bytes_moved = (n - 1) * output_bytes;  // the other ranks' parts of the sum
  } else {
    return std::nullopt;
  }
  if (n == 1) args.algorithm = "none (one process)";
  return args;
}

void register_collective_ops(OpRegistry& registry) {
  // Stateful: a collective must run on every rank every time it is reached, never be folded or
  // pruned as a constant on one rank only.
  registry.add({.name = "Allreduce",
                .num_inputs = -1,
                .num_outputs = -1,
                .shape = allreduce_shape,
                .kernel = allreduce_kernel,
                .flops = allreduce_flops,
                .gradient = allreduce_grad,
                .stateful = true,
                .contiguous_inputs = allreduce_contiguous_inputs,
                .doc = "Inputs (x...: one dtype); attr reduction (sum or average). Each output is its input summed "
                       "(or averaged) over the ranks; inputs under 64 KiB travel fused in one buffer (one "
                       "call; their producers write them into it where their shapes are known), larger "
                       "ones each in a call of its own, from input to output."});
  registry.add({.name = "Broadcast",
                .num_inputs = 1,
                .shape = rooted_shape,
                .kernel = broadcast_kernel,
                .flops = no_float_ops,
                .gradient = broadcast_grad,
                .stateful = true,
                .doc = "Input x; attr root_rank. The root rank's x on every rank (MPI_Bcast)."});
  registry.add({.name = "Reduce",
                .num_inputs = 1,
                .shape = rooted_shape,
                .kernel = reduce_kernel,
                .flops = reduce_flops,
                .gradient = reduce_grad,
                .stateful = true,
                .doc = "Input x; attr root_rank. On the root rank the sum of x over the ranks, zeros elsewhere "
                       "(MPI_Reduce)."});
  registry.add({.name = "Allgather",
                .num_inputs = 1,
                .shape = allgather_shape,
                .kernel = allgather_kernel,
                .flops = no_float_ops,
                .gradient = allgather_grad,
                .stateful = true,
                .doc = "Input x (rank >= 1). Every rank's x concatenated along dim 0 in rank order; dim 0 may differ "
                       "between ranks (MPI_Allgatherv)."});
  registry.add({.name = "ReduceScatter",
                .num_inputs = 2,
                .shape = reduce_scatter_shape,
                .kernel = reduce_scatter_kernel,
                .flops = reduce_scatter_flops,
                .gradient = reduce_scatter_grad,
                .stateful = true,
                .doc = "Inputs (x, like). This rank's rows of the sum of x over the ranks: like.dim(0) rows after "
                       "those of the lower ranks (MPI_Reduce_scatter); Allgather's gradient."});
}

}  // namespace stepscope
