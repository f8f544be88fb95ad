// Conv2D, MaxPool and their backward ops (AvgPool: avg_pool_test.cc) (Conv2DBackpropInput, Conv2DBackpropFilter,
// MaxPoolGrad): hand-computed values, naive direct loops as reference on random-ish data (SAME and
// VALID, strides 1 and 2, float32 and float64), shape rule errors, unknown dims and costs.
#include "stepscope/ops/conv_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "stepscope/graph/node.h"
#include "stepscope/graph/op_def.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/internal/dnnl.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_build_error;
using testing::expect_invalid_argument;
using testing::expect_tensor_near;
using testing::flops_of;

template <typename T>
std::vector<T> random_values(size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// Output size and padding before, written from the TF documentation rather than from the
// kernel's code: SAME = ceil(in / s), VALID = ceil((in - k + 1) / s).
void window(int64_t in, int64_t k, int64_t s, bool same, int64_t* out, int64_t* pad) {
  *out = same ? (in + s - 1) / s : (in - k + 1 + s - 1) / s;
  *pad = same ? std::max<int64_t>(0, (*out - 1) * s + k - in) / 2 : 0;
}

// Direct convolution in double precision.
template <typename T>
std::vector<T> naive_conv(const std::vector<T>& x, const Shape& xs, const std::vector<T>& f, const Shape& fs,
                          int64_t sh, int64_t sw, bool same, Shape* out_shape) {
  const int64_t n = xs.dim(0), h = xs.dim(1), w = xs.dim(2), c = xs.dim(3);
  const int64_t kh = fs.dim(0), kw = fs.dim(1), oc = fs.dim(3);
  int64_t oh, ow, pt, pl;
  window(h, kh, sh, same, &oh, &pt);
  window(w, kw, sw, same, &ow, &pl);
  *out_shape = Shape{n, oh, ow, oc};
  std::vector<T> y(n * oh * ow * oc);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < oc; ++o) {
          double acc = 0;
          for (int64_t di = 0; di < kh; ++di)
            for (int64_t dj = 0; dj < kw; ++dj) {
              const int64_t ii = i * sh - pt + di, jj = j * sw - pl + dj;
              if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
              for (int64_t q = 0; q < c; ++q)
                acc += double(x[((b * h + ii) * w + jj) * c + q]) * double(f[((di * kw + dj) * c + q) * oc + o]);
            }
          y[((b * oh + i) * ow + j) * oc + o] = static_cast<T>(acc);
        }
  return y;
}

template <typename T>
std::vector<T> naive_max_pool(const std::vector<T>& x, const Shape& xs, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                              bool same, Shape* out_shape) {
  const int64_t n = xs.dim(0), h = xs.dim(1), w = xs.dim(2), c = xs.dim(3);
  int64_t oh, ow, pt, pl;
  window(h, kh, sh, same, &oh, &pt);
  window(w, kw, sw, same, &ow, &pl);
  *out_shape = Shape{n, oh, ow, c};
  std::vector<T> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t q = 0; q < c; ++q) {
          bool any = false;
          T m{};
          for (int64_t di = 0; di < kh; ++di)
            for (int64_t dj = 0; dj < kw; ++dj) {
              const int64_t ii = i * sh - pt + di, jj = j * sw - pl + dj;
              if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
              const T v = x[((b * h + ii) * w + jj) * c + q];
              if (!any || v > m) m = v;
              any = true;
            }
          y.push_back(m);
        }
  return y;
}

// The adjoints of naive_conv: each tap's product added back to the input pixel / filter weight.
template <typename T>
void naive_conv_backprop(const std::vector<T>& x, const Shape& xs, const std::vector<T>& f, const Shape& fs,
                         const std::vector<T>& dy, int64_t sh, int64_t sw, bool same, std::vector<T>* dx,
                         std::vector<T>* df) {
  const int64_t n = xs.dim(0), h = xs.dim(1), w = xs.dim(2), c = xs.dim(3);
  const int64_t kh = fs.dim(0), kw = fs.dim(1), oc = fs.dim(3);
  int64_t oh, ow, pt, pl;
  window(h, kh, sh, same, &oh, &pt);
  window(w, kw, sw, same, &ow, &pl);
  std::vector<double> gx(xs.num_elements(), 0), gf(fs.num_elements(), 0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < oc; ++o) {
          const double g = dy[((b * oh + i) * ow + j) * oc + o];
          for (int64_t di = 0; di < kh; ++di)
            for (int64_t dj = 0; dj < kw; ++dj) {
              const int64_t ii = i * sh - pt + di, jj = j * sw - pl + dj;
              if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
              for (int64_t q = 0; q < c; ++q) {
                const int64_t xi = ((b * h + ii) * w + jj) * c + q, fi = ((di * kw + dj) * c + q) * oc + o;
                gx[xi] += g * double(f[fi]);
                gf[fi] += g * double(x[xi]);
              }
            }
        }
  dx->assign(gx.begin(), gx.end());
  df->assign(gf.begin(), gf.end());
}

// MaxPool's gradient: each output's gradient to the first strict maximum of its window.
template <typename T>
std::vector<T> naive_max_pool_grad(const std::vector<T>& x, const Shape& xs, const std::vector<T>& grad, int64_t kh,
                                   int64_t kw, int64_t sh, int64_t sw, bool same) {
  const int64_t n = xs.dim(0), h = xs.dim(1), w = xs.dim(2), c = xs.dim(3);
  int64_t oh, ow, pt, pl;
  window(h, kh, sh, same, &oh, &pt);
  window(w, kw, sw, same, &ow, &pl);
  std::vector<T> dx(x.size(), T(0));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t q = 0; q < c; ++q) {
          int64_t arg = -1;
          for (int64_t di = 0; di < kh; ++di)
            for (int64_t dj = 0; dj < kw; ++dj) {
              const int64_t ii = i * sh - pt + di, jj = j * sw - pl + dj;
              if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
              const int64_t xi = ((b * h + ii) * w + jj) * c + q;
              if (arg < 0 || x[xi] > x[arg]) arg = xi;
            }
          dx[arg] += grad[((b * oh + i) * ow + j) * c + q];
        }
  return dx;
}

std::vector<float> iota(int n, float start = 1) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// ---------------------------------------------------------------------------------------- Conv2D

TEST(Conv2D, HandComputedSameAndValid) {
  Graph g;
  Scope s(g);
  // 3x3 image 1..9, 2x2 filter of ones: each output sums a window.
  auto x = constant<float>(s, iota(9), Shape{1, 3, 3, 1});
  auto f = constant<float>(s, {1, 1, 1, 1}, Shape{2, 2, 1, 1});
  auto valid = conv2d(s, x, f, {1, 1, 1, 1}, "VALID");
  // SAME: total padding 1, all of it after (pad_before = 1 / 2 = 0).
  auto same = conv2d(s, x, f, {1, 1, 1, 1}, "SAME");
  auto same2 = conv2d(s, x, f, {1, 2, 2, 1}, "SAME");
  auto valid2 = conv2d(s, x, f, {1, 2, 2, 1}, "VALID");
  EXPECT_EQ(valid.node->name(), "Conv2D");
  auto out = eval({valid, same, same2, valid2});
  expect_tensor_near<float>(out[0], Shape{1, 2, 2, 1}, {12, 16, 24, 28});
  expect_tensor_near<float>(out[1], Shape{1, 3, 3, 1}, {12, 16, 9, 24, 28, 15, 15, 17, 9});
  expect_tensor_near<float>(out[2], Shape{1, 2, 2, 1}, {12, 9, 15, 9});
  expect_tensor_near<float>(out[3], Shape{1, 1, 1, 1}, {12});
}

TEST(Conv2D, SamePaddingSplitPutsTheOddPixelAfter) {
  Graph g;
  Scope s(g);
  // 1x4 row, 1x4 filter [1,10,100,1000], SAME stride 1: total padding 3, 1 before, 2 after.
  auto x = constant<double>(s, {1, 2, 3, 4}, Shape{1, 1, 4, 1});
  auto f = constant<double>(s, {1, 10, 100, 1000}, Shape{1, 4, 1, 1});
  expect_tensor_near<double>(
      eval(conv2d(s, x, f, {1, 1, 1, 1}, "SAME")), Shape{1, 1, 4, 1},
      {10 * 1 + 100 * 2 + 1000 * 3, 1 * 1 + 10 * 2 + 100 * 3 + 1000 * 4, 1 * 2 + 10 * 3 + 100 * 4, 1 * 3 + 10 * 4}, 0);
}

struct ConvCase {
  int64_t n, h, w, c, kh, kw, oc, sh, sw;
  bool same;
};

template <typename T>
void check_conv_against_naive(const ConvCase& k, double tolerance, int threads = 2) {
  Graph g;
  Scope s(g);
  const Shape xs{k.n, k.h, k.w, k.c}, fs{k.kh, k.kw, k.c, k.oc};
  auto xv = random_values<T>(xs.num_elements(), 1 + k.h * 7 + k.kw);
  auto fv = random_values<T>(fs.num_elements(), 5 + k.oc);
  auto y = conv2d(s, constant<T>(s, xv, xs), constant<T>(s, fv, fs), {1, k.sh, k.sw, 1}, k.same ? "SAME" : "VALID");
  Shape expected_shape;
  auto expected = naive_conv(xv, xs, fv, fs, k.sh, k.sw, k.same, &expected_shape);
  EXPECT_EQ(y.shape(), expected_shape);
  Session session(g, {.inter_op_threads = threads, .intra_op_threads = threads});
  expect_tensor_near<T>(session.run(y), expected_shape, expected, tolerance);
}

TEST(Conv2D, MatchesNaiveConvolution) {
  const ConvCase cases[] = {
      {2, 5, 6, 3, 3, 2, 4, 1, 1, true},  {2, 5, 6, 3, 3, 2, 4, 1, 1, false}, {2, 5, 6, 3, 3, 2, 4, 2, 2, true},
      {2, 5, 6, 3, 3, 2, 4, 2, 2, false}, {1, 7, 7, 2, 3, 3, 5, 1, 2, true},  {1, 7, 7, 2, 3, 3, 5, 2, 1, false},
      {1, 4, 4, 1, 5, 5, 2, 1, 1, true},   // filter larger than the image
      {3, 6, 6, 4, 1, 1, 3, 1, 1, true},   // 1x1: the input is the patch matrix
      {3, 6, 6, 4, 1, 1, 3, 2, 2, false},  // 1x1 strided: needs patches
      {2, 3, 4, 2, 3, 4, 3, 1, 1, false},  // filter covers the whole image
      {1, 8, 8, 3, 2, 2, 2, 3, 3, true},   // stride larger than the filter
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(::testing::Message() << "case h=" << k.h << " w=" << k.w << " k=" << k.kh << "x" << k.kw
                                      << " s=" << k.sh << "," << k.sw << (k.same ? " SAME" : " VALID"));
    check_conv_against_naive<float>(k, 1e-5);
    check_conv_against_naive<double>(k, 1e-12);
  }
}

TEST(Conv2D, ManyBlocksOverThreads) {
  // 3x3x64 patches: several row blocks, split over 4 threads.
  check_conv_against_naive<float>({2, 16, 16, 64, 3, 3, 8, 1, 1, true}, 1e-4, 4);
  check_conv_against_naive<double>({2, 17, 15, 64, 3, 3, 8, 2, 1, false}, 1e-12, 4);
}

TEST(Conv2D, EmptyOutputForAnImageOneSmallerThanTheFilter) {
  Graph g;
  Scope s(g);
  // TF's VALID size (in - k + stride) / stride truncates to 0 here rather than failing.
  auto y = conv2d(s, constant<float>(s, iota(4), Shape{1, 2, 2, 1}), constant<float>(s, iota(9), Shape{3, 3, 1, 1}),
                  {1, 1, 1, 1}, "VALID");
  EXPECT_EQ(y.shape(), (Shape{1, 0, 0, 1}));
  EXPECT_EQ(eval(y).shape(), (Shape{1, 0, 0, 1}));
}

TEST(Conv2D, ShapeRuleErrors) {
  const std::string p = "[Conv2D] Conv2D: ";
  auto x = [](const Scope& s) { return constant<float>(s, iota(9), Shape{1, 3, 3, 1}); };
  auto f = [](const Scope& s) { return constant<float>(s, {1, 1, 1, 1}, Shape{2, 2, 1, 1}); };
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, constant<float>(s, iota(9), Shape{3, 3, 1}), f(s), {1, 1, 1, 1}, "SAME");
      },
      p + "input must be 4-dimensional: [3,3,1]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), constant<float>(s, iota(4), Shape{2, 2, 1}), {1, 1, 1, 1}, "SAME");
      },
      p + "filter must be 4-dimensional: [2,2,1]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), constant<float>(s, iota(8), Shape{2, 2, 2, 1}), {1, 1, 1, 1}, "SAME");
      },
      p + "input and filter must have the same depth: 1 vs 2");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), f(s), {1, 1}, "SAME");
      },
      p + "Sliding window strides field must specify 4 dimensions");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), f(s), {2, 1, 1, 1}, "SAME");
      },
      p + "Current implementation does not yet support strides in the batch and depth dimensions.");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), f(s), {1, 0, 1, 1}, "SAME");
      },
      p + "Stride must be > 0, but got 0");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), f(s), {1, 1, 1, 1}, "same");
      },
      p + "Value for attr 'padding' of \"same\" is not in the list of allowed values: \"SAME\", \"VALID\"");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, x(s), constant<double>(s, {1, 1, 1, 1}, Shape{2, 2, 1, 1}), {1, 1, 1, 1}, "SAME");
      },
      p + "input 1 must be float32, got float64");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, constant<int32_t>(s, {1}, Shape{1, 1, 1, 1}), f(s), {1, 1, 1, 1}, "SAME");
      },
      p + "input 0 must be float32 or float64, got int32");
  expect_build_error(
      [&](const Scope& s) {
        conv2d(s, constant<float>(s, {1}, Shape{1, 1, 1, 1}), constant<float>(s, iota(9), Shape{3, 3, 1, 1}),
               {1, 1, 1, 1}, "VALID");
      },
      p + "Computed output size would be negative: -1 [input_size: 1, effective_filter_size: 3, stride: 1]");
}

TEST(Conv2D, UnknownDims) {
  Graph g;
  Scope s(g);
  auto f = constant<float>(s, random_values<float>(3 * 3 * 3 * 4, 9), Shape{3, 3, 3, 4});
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 5, 5, 3});
  auto same = conv2d(s, x, f, {1, 2, 2, 1}, "SAME");
  EXPECT_EQ(same.shape(), (Shape{-1, 3, 3, 4}));
  EXPECT_EQ(conv2d(s, placeholder(s, DType::kFloat32, Shape{-1, -1, 7, -1}), f, {1, 1, 1, 1}, "VALID").shape(),
            (Shape{-1, -1, 5, 4}));
  EXPECT_EQ(conv2d(s, placeholder(s, DType::kFloat32), f, {1, 1, 1, 1}, "VALID").shape(), (Shape{-1, -1, -1, 4}));
  EXPECT_EQ(conv2d(s, x, placeholder(s, DType::kFloat32), {1, 1, 1, 1}, "SAME").shape(), (Shape{-1, 5, 5, -1}));
  EXPECT_EQ(conv2d(s, x, placeholder(s, DType::kFloat32), {1, 1, 1, 1}, "VALID").shape(), (Shape{-1, -1, -1, -1}));

  const Shape xs{3, 5, 5, 3};
  auto xv = random_values<float>(xs.num_elements(), 4);
  Shape es;
  auto expected =
      naive_conv(xv, xs, f.node->attrs().get<Tensor>("value").to_vector<float>(), Shape{3, 3, 3, 4}, 2, 2, true, &es);
  expect_tensor_near<float>(eval(same, {{x, Tensor::from_vector<float>(xv, xs)}}), es, expected, 1e-5);

  // Checked again at run time when the shape rule could not.
  auto any = placeholder(s.with_op_name("any"), DType::kFloat32);
  auto y = conv2d(s.with_op_name("c"), any, f, {1, 1, 1, 1}, "SAME");
  expect_invalid_argument(
      [&] {
        eval(y, {{any, Tensor::from_vector<float>(iota(8), Shape{1, 2, 2, 2})}});
      },
      "[Conv2D] c: input and filter must have the same depth: 2 vs 3");
  expect_invalid_argument(
      [&] {
        eval(y, {{any, Tensor::from_vector<float>(iota(4), Shape{2, 2})}});
      },
      "[Conv2D] c: input must be 4-dimensional: [2,2]");
}

TEST(Conv2D, Flops) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{8, 28, 28, 3});
  auto f = placeholder(s, DType::kFloat32, Shape{5, 5, 3, 32});
  EXPECT_EQ(flops_of(conv2d(s, x, f, {1, 2, 2, 1}, "SAME")), int64_t{2} * 8 * 14 * 14 * 5 * 5 * 3 * 32);
  EXPECT_EQ(flops_of(conv2d(s, x, f, {1, 1, 1, 1}, "VALID")), int64_t{2} * 8 * 24 * 24 * 5 * 5 * 3 * 32);
}

// --------------------------------------------------------------------------------------- MaxPool

TEST(MaxPool, HandComputedValidAndSame) {
  Graph g;
  Scope s(g);
  auto x16 = constant<float>(s, iota(16), Shape{1, 4, 4, 1});
  auto x9 = constant<float>(s, iota(9), Shape{1, 3, 3, 1});
  auto out = eval(
      {max_pool(s, x16, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"), max_pool(s, x9, {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME"),
       max_pool(s, x9, {1, 2, 2, 1}, {1, 1, 1, 1}, "VALID"), max_pool(s, x16, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")});
  expect_tensor_near<float>(out[0], Shape{1, 2, 2, 1}, {6, 8, 14, 16});
  expect_tensor_near<float>(out[1], Shape{1, 3, 3, 1}, {5, 6, 6, 8, 9, 9, 8, 9, 9});
  expect_tensor_near<float>(out[2], Shape{1, 2, 2, 1}, {5, 6, 8, 9});
  // 4x4, 3x3 window, stride 2, SAME: out 2x2, total padding 1, all after.
  expect_tensor_near<float>(out[3], Shape{1, 2, 2, 1}, {11, 12, 15, 16});
}

TEST(MaxPool, PaddingNeverWins) {
  Graph g;
  Scope s(g);
  // All values negative: a zero (or any value) from the padding would show up.
  auto x = constant<float>(s, iota(9, -9), Shape{1, 3, 3, 1});  // -9 .. -1
  auto out =
      eval({max_pool(s, x, {1, 3, 3, 1}, {1, 1, 1, 1}, "SAME"), max_pool(s, x, {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME")});
  // 3x3 window SAME: padding 1 before, 1 after.
  expect_tensor_near<float>(out[0], Shape{1, 3, 3, 1}, {-5, -4, -4, -2, -1, -1, -2, -1, -1});
  expect_tensor_near<float>(out[1], Shape{1, 2, 2, 1}, {-5, -4, -2, -1});
}

template <typename T>
void check_pool_against_naive(const Shape& xs, int64_t kh, int64_t kw, int64_t sh, int64_t sw, bool same) {
  Graph g;
  Scope s(g);
  auto xv = random_values<T>(xs.num_elements(), 17 + kh * 3 + sw, -100, 100);
  auto y = max_pool(s, constant<T>(s, xv, xs), {1, kh, kw, 1}, {1, sh, sw, 1}, same ? "SAME" : "VALID");
  Shape es;
  auto expected = naive_max_pool(xv, xs, kh, kw, sh, sw, same, &es);
  EXPECT_EQ(y.shape(), es);
  Session session(g, {.inter_op_threads = 3, .intra_op_threads = 3});
  expect_tensor_near<T>(session.run(y), es, expected, 0);
}

TEST(MaxPool, MatchesNaivePooling) {
  for (bool same : {true, false})
    for (int64_t stride : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << (same ? "SAME" : "VALID") << " stride " << stride);
      check_pool_against_naive<float>(Shape{2, 7, 6, 3}, 3, 2, stride, stride, same);
      check_pool_against_naive<double>(Shape{2, 5, 5, 4}, 2, 3, stride, 3 - stride, same);
      check_pool_against_naive<int32_t>(Shape{1, 6, 7, 2}, 3, 3, stride, stride, same);
      check_pool_against_naive<int64_t>(Shape{1, 4, 4, 1}, 2, 2, stride, stride, same);
    }
  check_pool_against_naive<float>(Shape{4, 64, 64, 16}, 2, 2, 2, 2, true);  // large: split over threads
}

TEST(MaxPool, ShapeRuleErrors) {
  const std::string p = "[MaxPool] MaxPool: ";
  auto x = [](const Scope& s) { return constant<float>(s, iota(16), Shape{1, 4, 4, 1}); };
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 2, 2}, {1, 1, 1, 1}, "SAME");
      },
      p + "Sliding window ksize field must specify 4 dimensions");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 2, 2, 1}, {1, 1, 1}, "SAME");
      },
      p + "Sliding window stride field must specify 4 dimensions");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {2, 2, 2, 1}, {1, 1, 1, 1}, "SAME");
      },
      p + "Pooling is not yet supported on the batch dimension.");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 2, 2, 2}, {1, 1, 1, 1}, "SAME");
      },
      p + "Pooling on the depth dimension is not supported.");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 0, 2, 1}, {1, 1, 1, 1}, "SAME");
      },
      p + "Sliding window ksize for dimension 1 was zero.");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 2, 2, 1}, {1, 1, 1, 1}, "FULL");
      },
      p + "Value for attr 'padding' of \"FULL\" is not in the list of allowed values: \"SAME\", "
          "\"VALID\"");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, constant<float>(s, iota(4), Shape{2, 2}), {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME");
      },
      p + "input must be 4-dimensional: [2,2]");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, x(s), {1, 6, 1, 1}, {1, 1, 1, 1}, "VALID");
      },
      p + "Computed output size would be negative: -1 [input_size: 4, effective_filter_size: 6, "
          "stride: 1]");
  expect_build_error(
      [&](const Scope& s) {
        max_pool(s, placeholder(s, DType::kBool, Shape{1, 1, 1, 1}), {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME");
      },
      p + "input 0 must be float32, float64, int32 or int64, got bool");
}

TEST(MaxPool, UnknownDimsAndFlops) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{-1, 28, -1, 32});
  auto y = max_pool(s, x, {1, 2, 2, 1}, {1, 2, 2, 1}, "SAME");
  EXPECT_EQ(y.shape(), (Shape{-1, 14, -1, 32}));
  EXPECT_EQ(max_pool(s, placeholder(s, DType::kFloat32), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID").shape(),
            (Shape{-1, -1, -1, -1}));
  expect_tensor_near<float>(
      eval(y, {{x, Tensor::from_vector<float>(std::vector<float>(2 * 28 * 3 * 32, 7), Shape{2, 28, 3, 32})}}),
      Shape{2, 14, 2, 32}, std::vector<float>(2 * 14 * 2 * 32, 7));
  EXPECT_EQ(flops_of(y), 0);  // unknown output: nothing to count
  auto known = max_pool(s, placeholder(s, DType::kFloat32, Shape{8, 28, 28, 32}), {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME");
  EXPECT_EQ(flops_of(known), int64_t{8} * 14 * 14 * 32 * 9);
}

// ------------------------------------------------------------------------- Conv2D backward ops

Output sizes(const Scope& s, const Shape& shape) {
  auto d = shape.dim_vector();
  return constant<int32_t>(s, std::vector<int32_t>(d.begin(), d.end()), Shape{4});
}

TEST(Conv2DBackpropInput, HandComputed) {
  Graph g;
  Scope s(g);
  // 3x3 input, 2x2 filter [[1,2],[3,4]], VALID: each output's gradient spreads the filter over
  // its window.
  auto f = constant<float>(s, {1, 2, 3, 4}, Shape{2, 2, 1, 1});
  auto one = conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f,
                                   constant<float>(s, {1, 0, 0, 0}, Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "VALID");
  auto all = conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f,
                                   constant<float>(s, {1, 1, 1, 1}, Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "VALID");
  // SAME stride 2 on 3x3: 2x2 outputs at (0,0), (0,2), (2,0), (2,2); the padding is after.
  auto strided = conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f,
                                       constant<float>(s, {1, 10, 100, 1000}, Shape{1, 2, 2, 1}), {1, 2, 2, 1}, "SAME");
  EXPECT_EQ(one.node->name(), "Conv2DBackpropInput");
  EXPECT_EQ(one.shape(), (Shape{1, 3, 3, 1}));
  auto out = eval({one, all, strided});
  expect_tensor_near<float>(out[0], Shape{1, 3, 3, 1}, {1, 2, 0, 3, 4, 0, 0, 0, 0}, 0);
  expect_tensor_near<float>(out[1], Shape{1, 3, 3, 1}, {1, 3, 2, 4, 10, 6, 3, 7, 4}, 0);
  expect_tensor_near<float>(out[2], Shape{1, 3, 3, 1}, {1, 2, 10, 3, 4, 30, 100, 200, 1000}, 0);
}

TEST(Conv2DBackpropFilter, HandComputed) {
  Graph g;
  Scope s(g);
  // 3x3 image 1..9, dy of ones, VALID 2x2: each weight's gradient sums the pixels it touched.
  auto x = constant<float>(s, iota(9), Shape{1, 3, 3, 1});
  auto df = conv2d_backprop_filter(s, x, sizes(s, Shape{2, 2, 1, 1}),
                                   constant<float>(s, {1, 1, 1, 1}, Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "VALID");
  // Two output channels, dy = 1 for channel 0 and 2 for channel 1 at the one SAME-stride-3 output.
  auto df2 = conv2d_backprop_filter(s, x, sizes(s, Shape{2, 2, 1, 2}), constant<float>(s, {1, 2}, Shape{1, 1, 1, 2}),
                                    {1, 3, 3, 1}, "SAME");
  EXPECT_EQ(df.node->name(), "Conv2DBackpropFilter");
  EXPECT_EQ(df.shape(), (Shape{2, 2, 1, 1}));
  auto out = eval({df, df2});
  expect_tensor_near<float>(out[0], Shape{2, 2, 1, 1}, {12, 16, 24, 28}, 0);
  // ceil(3 / 3) = 1 output; padding max(0, 0 * 3 + 2 - 3) = 0: the window is pixels 1, 2, 4, 5.
  expect_tensor_near<float>(out[1], Shape{2, 2, 1, 2}, {1, 2, 2, 4, 4, 8, 5, 10}, 0);
}

template <typename T>
void check_conv_backprop_against_naive(const ConvCase& k, double tolerance, int threads = 2) {
  Graph g;
  Scope s(g);
  const Shape xs{k.n, k.h, k.w, k.c}, fs{k.kh, k.kw, k.c, k.oc};
  auto xv = random_values<T>(xs.num_elements(), 3 + k.h * 5 + k.kw);
  auto fv = random_values<T>(fs.num_elements(), 7 + k.oc);
  int64_t oh, ow, pad;
  window(k.h, k.kh, k.sh, k.same, &oh, &pad);
  window(k.w, k.kw, k.sw, k.same, &ow, &pad);
  const Shape ys{k.n, oh, ow, k.oc};
  auto dyv = random_values<T>(ys.num_elements(), 11 + k.c);
  const std::string padding = k.same ? "SAME" : "VALID";
  auto dy = constant<T>(s, dyv, ys);
  auto dx = conv2d_backprop_input(s, sizes(s, xs), constant<T>(s, fv, fs), dy, {1, k.sh, k.sw, 1}, padding);
  auto df = conv2d_backprop_filter(s, constant<T>(s, xv, xs), sizes(s, fs), dy, {1, k.sh, k.sw, 1}, padding);
  EXPECT_EQ(dx.shape(), xs);
  EXPECT_EQ(df.shape(), fs);
  std::vector<T> ex, ef;
  naive_conv_backprop(xv, xs, fv, fs, dyv, k.sh, k.sw, k.same, &ex, &ef);
  Session session(g, {.inter_op_threads = threads, .intra_op_threads = threads});
  auto out = session.run({}, {dx, df});
  expect_tensor_near<T>(out[0], xs, ex, tolerance);
  expect_tensor_near<T>(out[1], fs, ef, tolerance);
}

TEST(Conv2DBackprop, MatchesNaiveAdjoint) {
  const ConvCase cases[] = {
      {2, 5, 6, 3, 3, 2, 4, 1, 1, true},  {2, 5, 6, 3, 3, 2, 4, 1, 1, false}, {2, 5, 6, 3, 3, 2, 4, 2, 2, true},
      {2, 5, 6, 3, 3, 2, 4, 2, 2, false}, {1, 7, 7, 2, 3, 3, 5, 1, 2, true},  {1, 7, 7, 2, 3, 3, 5, 2, 1, false},
      {1, 4, 4, 1, 5, 5, 2, 1, 1, true},   // filter larger than the image
      {3, 6, 6, 4, 1, 1, 3, 1, 1, true},   // 1x1: in place, no col2im
      {3, 6, 6, 4, 1, 1, 3, 2, 2, false},  // 1x1 strided: pixels without gradient
      {2, 3, 4, 2, 3, 4, 3, 1, 1, false},  // filter covers the whole image
      {1, 8, 8, 3, 2, 2, 2, 3, 3, true},   // stride larger than the filter
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(::testing::Message() << "case h=" << k.h << " w=" << k.w << " k=" << k.kh << "x" << k.kw
                                      << " s=" << k.sh << "," << k.sw << (k.same ? " SAME" : " VALID"));
    check_conv_backprop_against_naive<float>(k, 1e-5);
    check_conv_backprop_against_naive<double>(k, 1e-12);
  }
}

TEST(Conv2DBackprop, ManyBlocksOverThreads) {
  // 3x3x64 patches: several row blocks per image and several filter groups, split over 4 threads.
  check_conv_backprop_against_naive<float>({3, 16, 16, 64, 3, 3, 8, 1, 1, true}, 1e-4, 4);
  check_conv_backprop_against_naive<double>({2, 17, 15, 64, 3, 3, 8, 2, 1, false}, 1e-12, 4);
  check_conv_backprop_against_naive<float>({4, 32, 32, 8, 1, 1, 16, 1, 1, true}, 1e-4, 4);  // direct, many blocks
}

// float32 runs on oneDNN in chunks of 8 images (ops/internal/dnnl.h): 11 images make a full chunk
// and a short one, each with its own primitive. The three ops give the same bits for any
// intra-op thread count, and building the step again reuses the cached primitives.
TEST(Conv2D, ForwardAndBackpropGiveTheSameBitsForAnyThreadCount) {
  const Shape xs{11, 13, 12, 16}, fs{3, 3, 16, 8}, ys{11, 7, 6, 8};
  auto xv = random_values<float>(xs.num_elements(), 21);
  auto fv = random_values<float>(fs.num_elements(), 23);
  auto dyv = random_values<float>(ys.num_elements(), 22);
  std::vector<std::vector<Tensor>> results;
  int64_t primitives = 0;
  for (int threads : {1, 2, 3, 4, 1}) {
    Graph g;
    Scope s(g);
    auto x = constant<float>(s, xv, xs), f = constant<float>(s, fv, fs), dy = constant<float>(s, dyv, ys);
    auto y = conv2d(s, x, f, {1, 2, 2, 1}, "SAME");
    auto dx = conv2d_backprop_input(s, sizes(s, xs), f, dy, {1, 2, 2, 1}, "SAME");
    auto df = conv2d_backprop_filter(s, x, sizes(s, fs), dy, {1, 2, 2, 1}, "SAME");
    Session session(g, {.inter_op_threads = threads, .intra_op_threads = threads});
    results.push_back(session.run({}, {y, dx, df}));
    if (results.size() == 1) primitives = dnnl_kernels::primitive_cache_size();
  }
  EXPECT_EQ(dnnl_kernels::primitive_cache_size(), primitives);
  for (size_t t = 1; t < results.size(); ++t)
    for (size_t out = 0; out < 3; ++out) EXPECT_TRUE(tensors_equal(results[t][out], results[0][out])) << t << " " << out;
  // And against the float64 path (im2col + GEMM).
  Graph g;
  Scope s(g);
  auto to_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  auto y64 = conv2d(s, constant<double>(s, to_double(xv), xs), constant<double>(s, to_double(fv), fs), {1, 2, 2, 1},
                    "SAME");
  Session session(g);
  Tensor want = session.run(y64);
  for (int64_t i = 0; i < want.num_elements(); ++i)
    ASSERT_NEAR(results[0][0].flat<float>()[i], want.flat<double>()[i], 1e-4) << i;
}

TEST(Conv2DBackprop, ShapeRuleErrors) {
  const std::string pi = "[Conv2DBackpropInput] Conv2DBackpropInput: ";
  const std::string pf = "[Conv2DBackpropFilter] Conv2DBackpropFilter: ";
  auto x = [](const Scope& s) { return constant<float>(s, iota(9), Shape{1, 3, 3, 1}); };
  auto f = [](const Scope& s) { return constant<float>(s, {1, 2, 3, 4}, Shape{2, 2, 1, 1}); };
  auto dy = [](const Scope& s, const Shape& shape) {
    return constant<float>(s, std::vector<float>(shape.num_elements(), 1), shape);
  };
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f(s), dy(s, Shape{1, 3, 3, 1}), {1, 1, 1, 1}, "VALID");
      },
      pi + "out_backprop must have shape [1,2,2,1] for input [1,3,3,1] and filter [2,2,1,1], got [1,3,3,1]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_filter(s, x(s), sizes(s, Shape{2, 2, 1, 1}), dy(s, Shape{1, 2, 2, 2}), {1, 1, 1, 1}, "VALID");
      },
      pf + "out_backprop must have shape [1,2,2,1] for input [1,3,3,1] and filter [2,2,1,1], got [1,2,2,2]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f(s), dy(s, Shape{2, 2}), {1, 1, 1, 1}, "VALID");
      },
      pi + "out_backprop must be 4-dimensional: [2,2]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, constant<int32_t>(s, {1, 3, 3}, Shape{3}), f(s), dy(s, Shape{1, 2, 2, 1}),
                              {1, 1, 1, 1}, "VALID");
      },
      pi + "input_sizes must be a vector of 4 elements, got shape [3]");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, constant<int64_t>(s, {-1, 3, 3, 1}, Shape{4}), f(s), dy(s, Shape{1, 2, 2, 1}),
                              {1, 1, 1, 1}, "VALID");
      },
      pi + "input_sizes must be non-negative, got -1 at index 0");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_filter(s, x(s), constant<float>(s, {2, 2, 1, 1}, Shape{4}), dy(s, Shape{1, 2, 2, 1}),
                               {1, 1, 1, 1}, "VALID");
      },
      pf + "filter_sizes must be int32 or int64, got float32");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_filter(s, x(s), sizes(s, Shape{2, 2, 2, 1}), dy(s, Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "VALID");
      },
      pf + "input and filter must have the same depth: 1 vs 2");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f(s), dy(s, Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "valid");
      },
      pi + "Value for attr 'padding' of \"valid\" is not in the list of allowed values: \"SAME\", \"VALID\"");
  expect_build_error(
      [&](const Scope& s) {
        conv2d_backprop_input(s, sizes(s, Shape{1, 3, 3, 1}), f(s),
                              constant<double>(s, std::vector<double>(4, 1), Shape{1, 2, 2, 1}), {1, 1, 1, 1}, "VALID");
      },
      pi + "input 2 must be float32, got float64");
}

TEST(Conv2DBackprop, UnknownDimsAndRunTimeChecks) {
  Graph g;
  Scope s(g);
  auto f = constant<float>(s, {1, 2, 3, 4}, Shape{2, 2, 1, 1});
  auto input_sizes = placeholder(s.with_op_name("input_sizes"), DType::kInt32, Shape{4});
  auto dy = placeholder(s.with_op_name("dy"), DType::kFloat32, Shape{-1, 2, 2, 1});
  auto dx = conv2d_backprop_input(s.with_op_name("dx"), input_sizes, f, dy, {1, 1, 1, 1}, "VALID");
  // Nothing known of the sizes: the batch comes from out_backprop, the depth from the filter.
  EXPECT_EQ(dx.shape(), (Shape{-1, -1, -1, 1}));
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, -1, -1, 3});
  auto filter_sizes = placeholder(s.with_op_name("filter_sizes"), DType::kInt64);
  auto dy2 = placeholder(s.with_op_name("dy2"), DType::kFloat32, Shape{-1, -1, -1, 4});
  EXPECT_EQ(conv2d_backprop_filter(s, x, filter_sizes, dy2, {1, 1, 1, 1}, "SAME").shape(), (Shape{-1, -1, 3, 4}));

  auto feeds = [&](std::vector<int32_t> sz, const Shape& dy_shape) {
    return FeedList{{input_sizes, Tensor::from_vector<int32_t>(sz)},
                    {dy, Tensor::from_vector<float>(std::vector<float>(dy_shape.num_elements(), 1), dy_shape)}};
  };
  expect_tensor_near<float>(eval(dx, feeds({1, 3, 3, 1}, Shape{1, 2, 2, 1})), Shape{1, 3, 3, 1},
                            {1, 3, 2, 4, 10, 6, 3, 7, 4}, 0);
  expect_invalid_argument(
      [&] {
        eval(dx, feeds({1, 4, 3, 1}, Shape{1, 2, 2, 1}));
      },
      "[Conv2DBackpropInput] dx: out_backprop must have shape [1,3,2,1] for input [1,4,3,1] and "
      "filter [2,2,1,1], got [1,2,2,1]");
  expect_invalid_argument(
      [&] {
        eval(dx, feeds({1, 3, -3, 1}, Shape{1, 2, 2, 1}));
      },
      "[Conv2DBackpropInput] dx: input_sizes must be non-negative, got -3 at index 2");
  // An empty batch gives an empty gradient.
  EXPECT_EQ(eval(dx, feeds({0, 3, 3, 1}, Shape{0, 2, 2, 1})).shape(), (Shape{0, 3, 3, 1}));
}

TEST(Conv2DBackprop, Flops) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{8, 28, 28, 3});
  auto f = placeholder(s, DType::kFloat32, Shape{5, 5, 3, 32});
  auto dy = placeholder(s, DType::kFloat32, Shape{8, 14, 14, 32});
  const int64_t forward = int64_t{2} * 8 * 14 * 14 * 5 * 5 * 3 * 32;
  EXPECT_EQ(flops_of(conv2d_backprop_input(s, sizes(s, Shape{8, 28, 28, 3}), f, dy, {1, 2, 2, 1}, "SAME")), forward);
  EXPECT_EQ(flops_of(conv2d_backprop_filter(s, x, sizes(s, Shape{5, 5, 3, 32}), dy, {1, 2, 2, 1}, "SAME")), forward);
}

// ------------------------------------------------------------------------------------ MaxPoolGrad

TEST(MaxPoolGrad, HandComputed) {
  Graph g;
  Scope s(g);
  // Windows [1,5;2,4] and [3,3;3,1] (2x2, stride 2): 5 is the max of the first; the second has
  // three 3s and the first in row-major order, (0,2), takes the gradient.
  auto x = constant<float>(s, {1, 5, 3, 3, 2, 4, 3, 1}, Shape{1, 2, 4, 1});
  auto y = max_pool(s, x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  auto dx =
      max_pool_grad(s, x, y, constant<float>(s, {10, 20}, Shape{1, 1, 2, 1}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  EXPECT_EQ(dx.node->name(), "MaxPoolGrad");
  EXPECT_EQ(dx.shape(), (Shape{1, 2, 4, 1}));
  // Overlapping windows (1x2, stride 1) over [1, 3, 2]: both outputs pick the 3; gradients add.
  auto x3 = constant<double>(s, {1, 3, 2}, Shape{1, 1, 3, 1});
  auto y3 = max_pool(s, x3, {1, 1, 2, 1}, {1, 1, 1, 1}, "VALID");
  auto dx3 =
      max_pool_grad(s, x3, y3, constant<double>(s, {1, 2}, Shape{1, 1, 2, 1}), {1, 1, 2, 1}, {1, 1, 1, 1}, "VALID");
  // SAME 2x2 stride 1 on 2x2 with two channels: windows clipped by the padding after.
  auto x4 = constant<float>(s, {1, 8, 4, 7, 3, 6, 2, 5}, Shape{1, 2, 2, 2});
  auto y4 = max_pool(s, x4, {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME");
  auto dx4 = max_pool_grad(s, x4, y4, constant<float>(s, {1, 10, 2, 20, 3, 30, 4, 40}, Shape{1, 2, 2, 2}), {1, 2, 2, 1},
                           {1, 1, 1, 1}, "SAME");
  auto out = eval({dx, dx3, dx4});
  expect_tensor_near<float>(out[0], Shape{1, 2, 4, 1}, {0, 10, 20, 0, 0, 0, 0, 0}, 0);
  expect_tensor_near<double>(out[1], Shape{1, 1, 3, 1}, {0, 3, 0}, 0);
  // Channel 0 [1,4;3,2]: windows at (0,0) (0,1) (1,0) (1,1) pick 4, 4, 3, 2.
  // Channel 1 [8,7;6,5]: pick 8, 7, 6, 5.
  expect_tensor_near<float>(out[2], Shape{1, 2, 2, 2}, {0, 10, 3, 20, 3, 30, 4, 40}, 0);
}

template <typename T>
void check_pool_grad_against_naive(const Shape& xs, int64_t kh, int64_t kw, int64_t sh, int64_t sw, bool same,
                                   bool ties, int threads = 3) {
  Graph g;
  Scope s(g);
  auto xv = random_values<T>(xs.num_elements(), 31 + kh * 3 + sw, -100, 100);
  if (ties)
    for (T& v : xv) v = std::round(v / 40);  // few distinct values: the first maximum must win
  const std::string padding = same ? "SAME" : "VALID";
  auto x = constant<T>(s, xv, xs);
  auto y = max_pool(s, x, {1, kh, kw, 1}, {1, sh, sw, 1}, padding);
  auto gv = random_values<T>(y.shape().num_elements(), 41 + kw);
  auto dx = max_pool_grad(s, x, y, constant<T>(s, gv, y.shape()), {1, kh, kw, 1}, {1, sh, sw, 1}, padding);
  Session session(g, {.inter_op_threads = threads, .intra_op_threads = threads});
  expect_tensor_near<T>(session.run(dx), xs, naive_max_pool_grad(xv, xs, gv, kh, kw, sh, sw, same), 1e-6);
}

TEST(MaxPoolGrad, MatchesNaive) {
  for (bool same : {true, false})
    for (int64_t stride : {1, 2})
      for (bool ties : {false, true}) {
        SCOPED_TRACE(::testing::Message() << (same ? "SAME" : "VALID") << " stride " << stride << " ties " << ties);
        check_pool_grad_against_naive<float>(Shape{2, 7, 6, 3}, 3, 2, stride, stride, same, ties);
        check_pool_grad_against_naive<double>(Shape{2, 5, 5, 4}, 2, 3, stride, 3 - stride, same, ties);
      }
  check_pool_grad_against_naive<float>(Shape{4, 64, 64, 16}, 3, 3, 2, 2, true, true, 4);  // split over threads
}

TEST(MaxPoolGrad, ShapeRuleErrorsUnknownDimsAndFlops) {
  const std::string p = "[MaxPoolGrad] MaxPoolGrad: ";
  auto x = [](const Scope& s) { return constant<float>(s, iota(16), Shape{1, 4, 4, 1}); };
  auto t = [](const Scope& s, const Shape& shape) {
    return constant<float>(s, std::vector<float>(shape.num_elements(), 1), shape);
  };
  expect_build_error(
      [&](const Scope& s) {
        max_pool_grad(s, x(s), t(s, Shape{1, 2, 2, 1}), t(s, Shape{1, 3, 3, 1}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
      },
      p + "grad must have shape [1,2,2,1] (pooled from orig_input [1,4,4,1]), got [1,3,3,1]");
  expect_build_error(
      [&](const Scope& s) {
        max_pool_grad(s, x(s), t(s, Shape{1, 4, 4, 1}), t(s, Shape{1, 2, 2, 1}), {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
      },
      p + "orig_output must have shape [1,2,2,1] (pooled from orig_input [1,4,4,1]), got [1,4,4,1]");
  expect_build_error(
      [&](const Scope& s) {
        max_pool_grad(s, t(s, Shape{4, 4}), t(s, Shape{1, 2, 2, 1}), t(s, Shape{1, 2, 2, 1}), {1, 2, 2, 1},
                      {1, 2, 2, 1}, "VALID");
      },
      p + "input must be 4-dimensional: [4,4]");
  expect_build_error(
      [&](const Scope& s) {
        auto xi = constant<int32_t>(s, std::vector<int32_t>(16, 1), Shape{1, 4, 4, 1});
        max_pool_grad(s, xi, max_pool(s, xi, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"),
                      constant<int32_t>(s, std::vector<int32_t>(4, 1), Shape{1, 2, 2, 1}), {1, 2, 2, 1}, {1, 2, 2, 1},
                      "VALID");
      },
      p + "input 0 must be float32 or float64, got int32");

  Graph g;
  Scope s(g);
  auto xp = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 4, 4, 1});
  auto yp = max_pool(s, xp, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  auto gp = placeholder(s.with_op_name("g"), DType::kFloat32);
  auto dx = max_pool_grad(s.with_op_name("dx"), xp, yp, gp, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  EXPECT_EQ(dx.shape(), (Shape{-1, 4, 4, 1}));
  const FeedList ok = {{xp, Tensor::from_vector<float>(iota(16), Shape{1, 4, 4, 1})},
                       {gp, Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 2, 2, 1})}};
  expect_tensor_near<float>(eval(dx, ok), Shape{1, 4, 4, 1}, {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}, 0);
  expect_invalid_argument(
      [&] {
        eval(dx, {{xp, Tensor::from_vector<float>(iota(16), Shape{1, 4, 4, 1})},
                  {gp, Tensor::from_vector<float>({1, 2}, Shape{1, 1, 2, 1})}});
      },
      "[MaxPoolGrad] dx: grad must have shape [1,2,2,1] (pooled from orig_input [1,4,4,1]), got [1,1,2,1]");
  EXPECT_EQ(flops_of(dx), 0);  // grad's shape unknown
  auto known =
      max_pool_grad(s, x(s), t(s, Shape{1, 2, 2, 1}), t(s, Shape{1, 2, 2, 1}), {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME");
  EXPECT_EQ(flops_of(known), 4 * (9 + 1));
}

}  // namespace
}  // namespace stepscope
