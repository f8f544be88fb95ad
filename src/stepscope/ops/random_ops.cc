#include "stepscope/ops/random_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/internal/op_util.h"
#include "stepscope/ops/internal/philox.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {
namespace {

// Philox blocks reserved for each group of TruncatedNormal outputs (one block's worth of
// values). Rejections are rare (4.6% of draws), so a group that exhausts 16 blocks has
// probability far below 1e-50; if it ever happens it reads on into the next group's blocks,
// still deterministically.
constexpr uint64_t kTruncatedBlocksPerGroup = 16;

// The session-side state of one random node: how many blocks of its stream earlier runs used.
struct StreamPosition {
  std::atomic<uint64_t> next_block{0};
};

// Reserves `blocks` blocks of this node's stream for one run; returns the first.
uint64_t reserve_blocks(const KernelContext& c, uint64_t blocks) {
  auto& pos = c.resources().get_or_create<StreamPosition>(c.node(), [] { return std::make_unique<StreamPosition>(); });
  return pos.next_block.fetch_add(blocks, std::memory_order_relaxed);
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

philox::Stream stream_of(const KernelContext& c) {
  return philox::Stream(static_cast<uint64_t>(c.attrs().get<int64_t>("seed")),
                        static_cast<uint64_t>(c.attrs().get<int64_t>("seed2")));
}

// Like TensorFlow: an explicit seed makes the op deterministic; 0 and 0 asks for fresh entropy,
// drawn here, at graph-construction time, so that the node's attrs say what it will produce.
std::pair<int64_t, int64_t> resolve_seeds(int64_t seed, int64_t seed2) {
  if (seed != 0 || seed2 != 0) return {seed, seed2};
  std::random_device rd;
  auto draw = [&] {
    int64_t v = 0;
    while (v == 0) v = static_cast<int64_t>(static_cast<uint64_t>(rd()) << 32 | rd());
    return v;
  };
  const int64_t a = draw();
  return {a, draw()};
}

Output add_random_node(const Scope& scope, const char* op, const char* default_name, std::vector<int64_t> dims,
                       DType dtype, int64_t seed, int64_t seed2, AttrMap attrs, CallSite site) {
  auto [s1, s2] = resolve_seeds(seed, seed2);
  attrs.set("dtype", dtype);
  attrs.set("seed", s1);
  attrs.set("seed2", s2);
  Output shape = op_util::arg_const(scope, default_name, "shape", op_util::int64_vector(dims), site);
  return scope.add_node(op_def(op), {shape}, std::move(attrs), site, default_name)->output(0);
}

void random_shape(ShapeContext& c) {
  const DType dtype = c.node().attrs().get<DType>("dtype");
  if (!is_floating(dtype)) c.fail("dtype must be float32 or float64, got " + std::string(dtype_name(dtype)));
  if (!op_util::is_index_dtype(c.input_dtype(0)))
    c.fail("shape must be int32 or int64, got " + std::string(dtype_name(c.input_dtype(0))));
  const Shape& ss = c.input_shape(0);
  if (ss.known_rank() && ss.rank() != 1) c.fail("shape must be 1-D, not " + ss.to_string());
  if (const Tensor* t = c.input_constant(0)) {
    std::vector<int64_t> dims = op_util::index_values(*t);
    if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
      c.fail("shape has " + std::to_string(dims.size()) + " entries, more than the maximum rank " +
             std::to_string(Shape::kMaxRank));
    for (int64_t d : dims)
      if (d < 0) c.fail("shape dimensions must be >= 0, got " + dims_text(dims));
    c.set_output(0, dtype, Shape(dims));
    return;
  }
  Shape out = Shape::unknown_rank();
  if (ss.known_rank() && ss.dim(0) >= 0 && ss.dim(0) <= Shape::kMaxRank) {
    out = Shape();
    for (int64_t i = 0; i < ss.dim(0); ++i) out.add_dim(Shape::kUnknownDim);
  }
  c.set_output(0, dtype, out);
}

// Allocates the output from the run-time shape input.
Tensor& allocate_random_output(KernelContext& c) {
  const Tensor& dims_t = c.input(0);
  if (dims_t.rank() != 1) c.fail("shape must be 1-D, not " + dims_t.shape().to_string());
  std::vector<int64_t> dims = op_util::index_values(dims_t);
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank))
    c.fail("shape has " + std::to_string(dims.size()) + " entries, more than the maximum rank " +
           std::to_string(Shape::kMaxRank));
  for (int64_t d : dims)
    if (d < 0) c.fail("shape dimensions must be >= 0, got " + dims_text(dims));
  return c.allocate_output(0, c.attrs().get<DType>("dtype"), Shape(dims));
}

// Fills out[0, n) from this run's blocks: block b (stream block first + b) makes values
// [b * kPer, b * kPer + kPer). `convert(words, blocks, dst)` turns the 4 * blocks words of
// consecutive blocks into kPer * blocks values.
template <typename T, int kPer, typename Convert>
void fill_by_blocks(const KernelContext& c, T* out, int64_t n, const philox::Stream& stream, uint64_t first,
                    int64_t cost_per_block, Convert convert) {
  const int64_t blocks = (n + kPer - 1) / kPer;
  c.parallel_for(blocks, cost_per_block, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBatch = 64;
    philox::Block buffer[kBatch];
    T tail[kBatch * kPer];
    for (int64_t b = begin; b < end; b += kBatch) {
      const int64_t m = std::min(kBatch, end - b);
      philox::generate_blocks(stream, first + static_cast<uint64_t>(b), m, buffer);
      const int64_t base = b * kPer, count = std::min(m * kPer, n - base);
      if (count == m * kPer) {
        convert(buffer[0].data(), m, out + base);
      } else {  // the last block overhangs the output
        convert(buffer[0].data(), m, tail);
        std::copy(tail, tail + count, out + base);
      }
    }
  });
}

template <typename T>
void uniform_kernel_t(KernelContext& c, Tensor& out) {
  constexpr int kPer = philox::kUniformPerBlock<T>;
  const int64_t n = out.num_elements();
  const uint64_t first = reserve_blocks(c, static_cast<uint64_t>((n + kPer - 1) / kPer));
  const T lo = static_cast<T>(c.attrs().get_or<double>("minval", 0.0));
  const T scale = static_cast<T>(c.attrs().get_or<double>("maxval", 1.0) - c.attrs().get_or<double>("minval", 0.0));
  fill_by_blocks<T, kPer>(c, out.data<T>(), n, stream_of(c), first, 8,
                          [=](const uint32_t* __restrict__ w, int64_t blocks, T* __restrict__ dst) {
                            for (int64_t i = 0; i < blocks * kPer; ++i) {
                              if constexpr (sizeof(T) == 4)
                                dst[i] = lo + scale * philox::uniform_float(w[i]);
                              else
                                dst[i] = lo + scale * philox::uniform_double(w[2 * i], w[2 * i + 1]);
                            }
                          });
}

template <typename T>
void normal_kernel_t(KernelContext& c, Tensor& out) {
  constexpr int kPer = philox::kNormalPerBlock<T>;
  const int64_t n = out.num_elements();
  const uint64_t first = reserve_blocks(c, static_cast<uint64_t>((n + kPer - 1) / kPer));
  const T mean = static_cast<T>(c.attrs().get_or<double>("mean", 0.0));
  const T stddev = static_cast<T>(c.attrs().get_or<double>("stddev", 1.0));
  fill_by_blocks<T, kPer>(c, out.data<T>(), n, stream_of(c), first, 80, [=](const uint32_t* w, int64_t blocks, T* dst) {
    for (int64_t b = 0; b < blocks; ++b) {
      philox::Block block{w[4 * b], w[4 * b + 1], w[4 * b + 2], w[4 * b + 3]};
      philox::normal_block<T>(block, dst + b * kPer);
    }
    for (int64_t i = 0; i < blocks * kPer; ++i) dst[i] = mean + stddev * dst[i];
  });
}

template <typename T>
void truncated_normal_kernel_t(KernelContext& c, Tensor& out) {
  constexpr int kPer = philox::kNormalPerBlock<T>;
  const int64_t n = out.num_elements();
  const int64_t groups = (n + kPer - 1) / kPer;
  const uint64_t first = reserve_blocks(c, static_cast<uint64_t>(groups) * kTruncatedBlocksPerGroup);
  const T mean = static_cast<T>(c.attrs().get_or<double>("mean", 0.0));
  const T stddev = static_cast<T>(c.attrs().get_or<double>("stddev", 1.0));
  const philox::Stream stream = stream_of(c);
  T* o = out.data<T>();
  // Group g (outputs [g * kPer, g * kPer + kPer)) draws from its own run of blocks, so how many
  // draws other groups reject does not matter, nor which thread fills which group.
  c.parallel_for(groups, 100, [&](int64_t begin, int64_t end) {
    T values[kPer];
    for (int64_t g = begin; g < end; ++g) {
      const int64_t base = g * kPer, count = std::min<int64_t>(kPer, n - base);
      uint64_t block = first + static_cast<uint64_t>(g) * kTruncatedBlocksPerGroup;
      int64_t filled = 0;
      while (filled < count) {
        philox::normal_block<T>(stream.block(block++), values);
        for (int j = 0; j < kPer && filled < count; ++j)
          if (std::abs(values[j]) < T(2)) o[base + filled++] = mean + stddev * values[j];
      }
    }
  });
}

// Dropout: one uniform float per element (4 per Philox block, for both dtypes), kept when >= rate.
template <typename T>
void dropout_kernel(KernelContext& c) {
  const Tensor& x = c.input(0);
  const double rate = c.attrs().get<double>("rate");
  Tensor& y_t = c.allocate_output(0, x.dtype(), x.shape());
  Tensor& mask_t = c.allocate_output(1, x.dtype(), x.shape());
  const int64_t n = x.num_elements();
  constexpr int kPer = 4;
  const int64_t blocks = (n + kPer - 1) / kPer;
  const uint64_t first = reserve_blocks(c, static_cast<uint64_t>(blocks));
  const float threshold = static_cast<float>(rate);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - rate));
  const philox::Stream stream = stream_of(c);
  const T* in = x.data<T>();
  T* y = y_t.data<T>();
  T* mask = mask_t.data<T>();
  c.parallel_for(blocks, 12, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBatch = 64;
    philox::Block buffer[kBatch];
    for (int64_t b = begin; b < end; b += kBatch) {
      const int64_t m = std::min(kBatch, end - b);
      philox::generate_blocks(stream, first + static_cast<uint64_t>(b), m, buffer);
      const uint32_t* words = buffer[0].data();
      const int64_t base = b * kPer, count = std::min(m * kPer, n - base);
      for (int64_t i = 0; i < count; ++i) {
        const T k = philox::uniform_float(words[i]) >= threshold ? keep_scale : T(0);
        mask[base + i] = k;
        y[base + i] = in[base + i] * k;
      }
    }
  });
}

template <typename Ctx>
void check_rate(const Ctx& c, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    c.fail("rate must be a scalar tensor or a float in the range [0, 1), got " + std::to_string(rate));
}

void dropout_shape(ShapeContext& c) {
  c.expect_floating(0);
  check_rate(c, c.node().attrs().get<double>("rate"));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  c.set_output(1, c.input_dtype(0), c.input_shape(0));
}

// The mask is a constant of the step: d y / d x = mask; nothing flows back through the mask.
std::vector<Output> dropout_gradient(const Scope& scope, const Node& node, std::span<const Output> grads) {
  if (!grads[0]) return {Output{}};
  return {mul(scope, grads[0], node.output(1))};
}

template <void (*kFloat)(KernelContext&, Tensor&), void (*kDouble)(KernelContext&, Tensor&)>
void random_kernel(KernelContext& c) {
  Tensor& out = allocate_random_output(c);
  if (out.dtype() == DType::kFloat32)
    kFloat(c, out);
  else
    kDouble(c, out);
}

}  // namespace

Output random_uniform(const Scope& scope, std::vector<int64_t> dims, DType dtype, int64_t seed, int64_t seed2,
                      CallSite site) {
  return add_random_node(scope, "RandomUniform", "RandomUniform", std::move(dims), dtype, seed, seed2, {}, site);
}

Output random_uniform(const Scope& scope, std::vector<int64_t> dims, double minval, double maxval, DType dtype,
                      int64_t seed, int64_t seed2, CallSite site) {
  return add_random_node(scope, "RandomUniform", "RandomUniform", std::move(dims), dtype, seed, seed2,
                         {{"minval", minval}, {"maxval", maxval}}, site);
}

Output random_normal(const Scope& scope, std::vector<int64_t> dims, double mean, double stddev, DType dtype,
                     int64_t seed, int64_t seed2, CallSite site) {
  return add_random_node(scope, "RandomStandardNormal", "RandomStandardNormal", std::move(dims), dtype, seed, seed2,
                         {{"mean", mean}, {"stddev", stddev}}, site);
}

Output truncated_normal(const Scope& scope, std::vector<int64_t> dims, double mean, double stddev, DType dtype,
                        int64_t seed, int64_t seed2, CallSite site) {
  return add_random_node(scope, "TruncatedNormal", "TruncatedNormal", std::move(dims), dtype, seed, seed2,
                         {{"mean", mean}, {"stddev", stddev}}, site);
}

Output dropout(const Scope& scope, Output x, double rate, int64_t seed, int64_t seed2, CallSite site) {
  auto [s1, s2] = resolve_seeds(seed, seed2);
  return scope.add_node(op_def("Dropout"), {x}, {{"rate", rate}, {"seed", s1}, {"seed2", s2}}, site)->output(0);
}

void register_random_ops(OpRegistry& registry) {
  registry.add(
      {.name = "Dropout",
       .num_inputs = 1,
       .num_outputs = 2,
       .shape = dropout_shape,
       .kernel =
           [](KernelContext& c) {
             if (c.input(0).dtype() == DType::kFloat64)
               dropout_kernel<double>(c);
             else
               dropout_kernel<float>(c);
           },
       // The comparison and the multiply, per element.
       .flops = [](const CostContext& c) { return 2 * std::max<int64_t>(0, c.input_shapes[0].num_elements()); },
       .gradient = dropout_gradient,
       .stateful = true,
       .doc = "Input x; attrs rate in [0, 1), seed, seed2. Outputs y = x * mask and mask (0, or "
              "1 / (1 - rate) with probability 1 - rate, from the node's Philox stream)."});
  registry.add({.name = "RandomUniform",
                .num_inputs = 1,
                .shape = random_shape,
                .kernel = random_kernel<uniform_kernel_t<float>, uniform_kernel_t<double>>,
                .not_differentiable = true,
                .stateful = true,
                .doc = "Input shape (1-D int32/int64); attrs dtype (float32/float64), seed, seed2, minval (0), "
                       "maxval (1). Uniform values in [minval, maxval) from the node's Philox stream."});
  registry.add({.name = "RandomStandardNormal",
                .num_inputs = 1,
                .shape = random_shape,
                .kernel = random_kernel<normal_kernel_t<float>, normal_kernel_t<double>>,
                .not_differentiable = true,
                .stateful = true,
                .doc = "Input shape (1-D int32/int64); attrs dtype (float32/float64), seed, seed2, mean (0), "
                       "stddev (1). Normal values (Box-Muller) from the node's Philox stream."});
  registry.add({.name = "TruncatedNormal",
                .num_inputs = 1,
                .shape = random_shape,
                .kernel = random_kernel<truncated_normal_kernel_t<float>, truncated_normal_kernel_t<double>>,
                .not_differentiable = true,
                .stateful = true,
                .doc = "Like RandomStandardNormal, but draws beyond 2 standard deviations are rejected and drawn "
                       "again."});
}

}  // namespace stepscope
