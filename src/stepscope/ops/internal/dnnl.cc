#include "stepscope/ops/internal/dnnl.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

// libgomp, oneDNN's threading runtime (declared here: clang has no omp.h without libomp-dev).
extern "C" void omp_set_num_threads(int);

namespace stepscope::dnnl_kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;

// Flops per nanosecond one core does in these kernels, roughly: sizes parallel_for's pieces.
constexpr int64_t kFlopsPerNs = 100;
// A GEMM's result is split in blocks of this many rows (or columns), whichever side is longer.
constexpr int64_t kBlockRows = 128;
constexpr int64_t kBlockCols = 128;

// A static object, not a leaked heap one: with `new dnnl::engine` the MLP step of model_bench
// took 23 page faults more and ran ~35% slower (measured, cause not found).
dnnl::engine& engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

// The calling thread's stream; oneDNN's own threads are turned off for this thread first.
dnnl::stream& thread_stream() {
  struct SingleThreaded {
    SingleThreaded() { omp_set_num_threads(1); }
  };
  thread_local SingleThreaded single_threaded;
  thread_local dnnl::stream stream(engine());
  return stream;
}

// --- Primitive cache: built once per shape, shared by every session and thread (executing a
// primitive is thread-safe; each call brings its own scratch memory).

using Key = std::vector<int64_t>;
struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 0;
    for (int64_t v : key) h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};
constexpr size_t kMaxCachedPrimitives = 1024;  // then the cache starts over
std::mutex cache_mutex;
std::unordered_map<Key, std::shared_ptr<const void>, KeyHash>& cache() {
  static auto* entries = new std::unordered_map<Key, std::shared_ptr<const void>, KeyHash>();
  return *entries;
}

template <typename Entry, typename Make>
std::shared_ptr<const Entry> cached(const Key& key, Make make) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache().find(key);
    if (it != cache().end()) return std::static_pointer_cast<const Entry>(it->second);
  }
  // Built outside the lock: creating a primitive JIT-compiles its kernel (milliseconds).
  std::shared_ptr<const void> built = std::make_shared<const Entry>(make());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache().size() >= kMaxCachedPrimitives) cache().clear();
  return std::static_pointer_cast<const Entry>(cache().emplace(key, std::move(built)).first->second);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Memory from the session's allocator (tracked like a tensor's, cached between steps), freed
// when the Tensor goes.
Tensor scratch(KernelContext& c, size_t bytes) {
  return Tensor(DType::kFloat32, Shape{static_cast<int64_t>(std::max<size_t>(1, (bytes + 3) / 4))}, c.allocator());
}

memory wrap(const memory::desc& desc, const void* data) { return memory(desc, engine(), const_cast<void*>(data)); }

// Runs `prim` on this thread with its arguments and scratch memory.
void execute(KernelContext& c, const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
             std::unordered_map<int, memory> args) {
  const memory::desc scratch_desc = pd.scratchpad_desc();
  Tensor pad;
  if (scratch_desc.get_size() > 0) {
    pad = scratch(c, scratch_desc.get_size());
    args.emplace(DNNL_ARG_SCRATCHPAD, wrap(scratch_desc, pad.raw_data()));
  }
  dnnl::stream& stream = thread_stream();
  prim.execute(stream, args);
  stream.wait();
}

// oneDNN reports failures as dnnl::error; a kernel reports them naming its node.
template <typename F>
void guarded(KernelContext& c, const char* what, F f) {
  try {
    thread_stream();  // before any primitive is built: oneDNN's threads off on this thread
    f();
  } catch (const dnnl::error& e) {
    c.fail(ErrorCode::kInternal, std::string("oneDNN ") + what + " failed: " + e.what());
  }
}

// A reorder (a layout change: values only move) between two descriptions of one tensor.
struct Reorder {
  dnnl::reorder::primitive_desc pd;
  dnnl::reorder prim;
  Reorder(const memory::desc& from, const memory::desc& to)
      : pd(engine(), from, engine(), to, user_scratchpad()), prim(pd) {}
  void run(KernelContext& c, const void* from, void* to) const {
    execute(c, prim, pd, {{DNNL_ARG_FROM, wrap(pd.src_desc(), from)}, {DNNL_ARG_TO, wrap(pd.dst_desc(), to)}});
  }
};

// --- Convolutions

enum Kind : int64_t { kConvForward = 1, kConvBackwardInput, kConvBackwardFilter, kMatmul };

memory::desc nhwc(int64_t n, int64_t c, int64_t h, int64_t w) { return memory::desc({n, c, h, w}, kF32, Tag::nhwc); }
memory::desc hwio(const ConvShape& s) { return memory::desc({s.out_depth, s.depth, s.k_h, s.k_w}, kF32, Tag::hwio); }
memory::desc any_weights(const ConvShape& s) {
  return memory::desc({s.out_depth, s.depth, s.k_h, s.k_w}, kF32, Tag::any);
}
memory::desc input_desc(const ConvShape& s, int64_t mb) { return nhwc(mb, s.depth, s.in_h, s.in_w); }
memory::desc output_desc(const ConvShape& s, int64_t mb) { return nhwc(mb, s.out_depth, s.out_h, s.out_w); }

// Padding after the image: what makes (in + before + after - k) / stride + 1 = out.
int64_t pad_after(int64_t in, int64_t k, int64_t stride, int64_t out, int64_t before) {
  return std::max<int64_t>(0, (out - 1) * stride + k - in - before);
}

struct ConvDescs {
  Dims strides, pad_l, pad_r;
};
ConvDescs conv_descs(const ConvShape& s) {
  return {{s.stride_h, s.stride_w},
          {s.pad_top, s.pad_left},
          {pad_after(s.in_h, s.k_h, s.stride_h, s.out_h, s.pad_top),
           pad_after(s.in_w, s.k_w, s.stride_w, s.out_w, s.pad_left)}};
}

Key conv_key(Kind kind, const ConvShape& s, int64_t mb) {
  return {kind,        mb,         s.in_h,     s.in_w,  s.depth, s.k_h,     s.k_w,
          s.out_depth, s.stride_h, s.stride_w, s.out_h, s.out_w, s.pad_top, s.pad_left};
}

// The forward primitive descriptor for `mb` images (also the hint the backward ones need).
// Weights in the format oneDNN picks (`any`): with them fixed to HWIO it falls back to its
// slower GEMM-based kernels.
dnnl::convolution_forward::primitive_desc forward_pd(const ConvShape& s, int64_t mb) {
  const ConvDescs d = conv_descs(s);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                       input_desc(s, mb), any_weights(s), output_desc(s, mb), d.strides, d.pad_l,
                                       d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), engine());
}

struct ConvForward {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  Reorder weights_from_hwio;
};
std::shared_ptr<const ConvForward> conv_forward(const ConvShape& s, int64_t mb) {
  return cached<ConvForward>(conv_key(kConvForward, s, mb), [&] {
    auto pd = forward_pd(s, mb);
    return ConvForward{pd, dnnl::convolution_forward(pd), Reorder(hwio(s), pd.weights_desc())};
  });
}

struct ConvBackwardInput {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
  Reorder weights_from_hwio;
};
std::shared_ptr<const ConvBackwardInput> conv_backward_input(const ConvShape& s, int64_t mb) {
  return cached<ConvBackwardInput>(conv_key(kConvBackwardInput, s, mb), [&] {
    const ConvDescs d = conv_descs(s);
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, input_desc(s, mb), any_weights(s),
                                               output_desc(s, mb), d.strides, d.pad_l, d.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), engine(), forward_pd(s, mb));
    return ConvBackwardInput{pd, dnnl::convolution_backward_data(pd), Reorder(hwio(s), pd.weights_desc())};
  });
}

struct ConvBackwardFilter {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
  Reorder weights_to_hwio;
};
std::shared_ptr<const ConvBackwardFilter> conv_backward_filter(const ConvShape& s, int64_t mb) {
  return cached<ConvBackwardFilter>(conv_key(kConvBackwardFilter, s, mb), [&] {
    const ConvDescs d = conv_descs(s);
    dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, input_desc(s, mb),
                                                  any_weights(s), output_desc(s, mb), d.strides, d.pad_l, d.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), engine(), forward_pd(s, mb));
    return ConvBackwardFilter{pd, dnnl::convolution_backward_weights(pd), Reorder(pd.diff_weights_desc(), hwio(s))};
  });
}

// The batch in chunks of kImagesPerChunk; the last may be smaller.
struct Chunks {
  int64_t count, full, last;
  explicit Chunks(int64_t batch)
      : count((batch + kImagesPerChunk - 1) / kImagesPerChunk),
        full(std::min(batch, kImagesPerChunk)),
        last(batch - (count - 1) * full) {}
  int64_t images(int64_t chunk) const { return chunk + 1 == count ? last : full; }
};

int64_t chunk_cost_ns(const ConvShape& s, int64_t images) {
  return std::max<int64_t>(1, 2 * images * s.out_h * s.out_w * s.out_depth * s.k_h * s.k_w * s.depth / kFlopsPerNs);
}

// The filter (HWIO) reordered into the format a primitive wants.
Tensor reordered_weights(KernelContext& c, const Reorder& reorder, const float* hwio_data) {
  Tensor out = scratch(c, reorder.pd.dst_desc().get_size());
  reorder.run(c, hwio_data, out.raw_data());
  return out;
}

int64_t image_size(const ConvShape& s) { return s.in_h * s.in_w * s.depth; }
int64_t output_image_size(const ConvShape& s) { return s.out_h * s.out_w * s.out_depth; }

// Calls each(conv, weights, images, first_image) for every chunk of the batch, over the intra-op
// pool, with the filter reordered (once) into the layout of the primitive that runs the chunk.
template <typename Conv, typename Each>
void for_each_chunk(KernelContext& c, const ConvShape& s, const Chunks& chunks, const Conv& full, const Conv& last,
                    const float* filter, Each each) {
  const Tensor weights = reordered_weights(c, full.weights_from_hwio, filter);
  Tensor last_weights;
  if (last.pd.weights_desc() != full.pd.weights_desc())
    last_weights = reordered_weights(c, last.weights_from_hwio, filter);
  c.parallel_for(chunks.count, chunk_cost_ns(s, chunks.full), [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const bool is_last = chunk + 1 == chunks.count;
      const void* w = is_last && last_weights.initialized() ? last_weights.raw_data() : weights.raw_data();
      each(is_last ? last : full, w, chunks.images(chunk), chunk * chunks.full);
    }
  });
}

}  // namespace

void conv2d_forward(KernelContext& c, const ConvShape& s, const float* input, const float* filter, float* output) {
  guarded(c, "Conv2D", [&] {
    const Chunks chunks(s.batch);
    for_each_chunk(c, s, chunks, *conv_forward(s, chunks.full), *conv_forward(s, chunks.last), filter,
                   [&](const ConvForward& conv, const void* weights, int64_t mb, int64_t first) {
                     execute(c, conv.prim, conv.pd,
                             {{DNNL_ARG_SRC, wrap(input_desc(s, mb), input + first * image_size(s))},
                              {DNNL_ARG_WEIGHTS, wrap(conv.pd.weights_desc(), weights)},
                              {DNNL_ARG_DST, wrap(output_desc(s, mb), output + first * output_image_size(s))}});
                   });
  });
}

void conv2d_backward_input(KernelContext& c, const ConvShape& s, const float* filter, const float* dy, float* dx) {
  guarded(c, "Conv2DBackpropInput", [&] {
    const Chunks chunks(s.batch);
    for_each_chunk(c, s, chunks, *conv_backward_input(s, chunks.full), *conv_backward_input(s, chunks.last), filter,
                   [&](const ConvBackwardInput& conv, const void* weights, int64_t mb, int64_t first) {
                     execute(c, conv.prim, conv.pd,
                             {{DNNL_ARG_DIFF_SRC, wrap(input_desc(s, mb), dx + first * image_size(s))},
                              {DNNL_ARG_WEIGHTS, wrap(conv.pd.weights_desc(), weights)},
                              {DNNL_ARG_DIFF_DST, wrap(output_desc(s, mb), dy + first * output_image_size(s))}});
                   });
  });
}

void conv2d_backward_filter(KernelContext& c, const ConvShape& s, const float* input, const float* dy, float* dfilter) {
  guarded(c, "Conv2DBackpropFilter", [&] {
    const Chunks chunks(s.batch);
    const auto full = conv_backward_filter(s, chunks.full), last = conv_backward_filter(s, chunks.last);
    const memory::desc partial_desc = full->pd.diff_weights_desc();
    const bool last_differs = last->pd.diff_weights_desc() != partial_desc;
    // Each chunk's filter gradient, in the full chunks' format, one after the other.
    const int64_t partial_floats = static_cast<int64_t>(partial_desc.get_size() / sizeof(float));
    Tensor partials = scratch(c, partial_desc.get_size() * chunks.count);
    float* partial = static_cast<float*>(partials.raw_data());
    const int64_t in_image = image_size(s), out_image = output_image_size(s);
    c.parallel_for(chunks.count, chunk_cost_ns(s, chunks.full), [&](int64_t begin, int64_t end) {
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        const int64_t mb = chunks.images(chunk), first = chunk * chunks.full;
        float* into = partial + chunk * partial_floats;
        const bool own_format = chunk + 1 == chunks.count && last_differs;
        const ConvBackwardFilter& conv = chunk + 1 == chunks.count ? *last : *full;
        Tensor own;
        if (own_format) own = scratch(c, last->pd.diff_weights_desc().get_size());
        execute(c, conv.prim, conv.pd,
                {{DNNL_ARG_SRC, wrap(input_desc(s, mb), input + first * in_image)},
                 {DNNL_ARG_DIFF_WEIGHTS, wrap(conv.pd.diff_weights_desc(), own_format ? own.raw_data() : into)},
                 {DNNL_ARG_DIFF_DST, wrap(output_desc(s, mb), dy + first * out_image)}});
        if (own_format) Reorder(last->pd.diff_weights_desc(), partial_desc).run(c, own.raw_data(), into);
      }
    });
    // Chunk 0 + chunk 1 + ..., in that order whatever split the work.
    if (chunks.count > 1) {
      c.parallel_for(partial_floats, chunks.count, [&](int64_t begin, int64_t end) {
        for (int64_t chunk = 1; chunk < chunks.count; ++chunk) {
          const float* p = partial + chunk * partial_floats;
          for (int64_t i = begin; i < end; ++i) partial[i] += p[i];
        }
      });
    }
    full->weights_to_hwio.run(c, partial, dfilter);
  });
}

// --- MatMul

namespace {
struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};
struct MatmulDescs {
  memory::desc a, b, out;
};
MatmulDescs matmul_descs(bool ta, bool tb, int64_t rows, int64_t cols, int64_t k, int64_t lda, int64_t ldb,
                         int64_t ldc) {
  return {memory::desc({rows, k}, kF32, ta ? Dims{1, lda} : Dims{lda, 1}),
          memory::desc({k, cols}, kF32, tb ? Dims{1, ldb} : Dims{ldb, 1}),
          memory::desc({rows, cols}, kF32, Dims{ldc, 1})};
}
std::shared_ptr<const Matmul> matmul_primitive(const MatmulDescs& d, const Key& key) {
  return cached<Matmul>(key, [&] {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d.a, d.b, d.out), user_scratchpad(), engine());
    return Matmul{pd, dnnl::matmul(pd)};
  });
}
}  // namespace

void matmul(KernelContext& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
            const float* b, int64_t ldb, float* out) {
  guarded(c, "MatMul", [&] {
    // Blocks of the longer side of the result, fixed by the shapes: each an independent product.
    const bool by_rows = m >= n;
    const int64_t side = by_rows ? m : n, block = by_rows ? kBlockRows : kBlockCols;
    const int64_t blocks = (side + block - 1) / block, last = side - (blocks - 1) * block;
    const int64_t ldc = n;
    auto primitive = [&](int64_t size) {
      const int64_t rows = by_rows ? size : m, cols = by_rows ? n : size;
      const MatmulDescs d = matmul_descs(ta, tb, rows, cols, k, lda, ldb, ldc);
      return std::make_pair(d, matmul_primitive(d, {kMatmul, rows, cols, k, ta, tb, lda, ldb, ldc}));
    };
    const auto full = primitive(std::min(side, block)), tail = primitive(last);
    const int64_t cost = std::max<int64_t>(1, 2 * std::min(side, block) * (by_rows ? n : m) * k / kFlopsPerNs);
    c.parallel_for(blocks, cost, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const auto& [d, mm] = blk + 1 == blocks ? tail : full;
        const int64_t first = blk * block;
        // Row r of op(a) starts at a[r, 0] or, transposed, at a[0, r]; column j of op(b) at
        // b[0, j] or, transposed, at b[j, 0].
        const float* a_part = by_rows ? (ta ? a + first : a + first * lda) : a;
        const float* b_part = by_rows ? b : (tb ? b + first * ldb : b + first);
        float* out_part = by_rows ? out + first * ldc : out + first;
        execute(c, mm->prim, mm->pd,
                {{DNNL_ARG_SRC, wrap(d.a, a_part)},
                 {DNNL_ARG_WEIGHTS, wrap(d.b, b_part)},
                 {DNNL_ARG_DST, wrap(d.out, out_part)}});
      }
    });
  });
}

int64_t primitive_cache_size() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return static_cast<int64_t>(cache().size());
}

}  // namespace stepscope::dnnl_kernels
