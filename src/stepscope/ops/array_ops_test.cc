#include "stepscope/ops/array_ops.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "stepscope/testing/error_text.h"
#include "stepscope/testing/op_test_util.h"

namespace stepscope {
namespace {

using testing::eval;
using testing::expect_tensor_near;

template <typename E, typename F>
void expect_error(F&& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "expected an error: " << message;
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

std::vector<float> iota_f(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

// ----- Reshape -------------------------------------------------------------------------------

TEST(Reshape, KeepsValuesAndSharesTheBuffer) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(6), Shape{2, 3});
  auto y = reshape(s, x, {3, 2});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  auto out = eval({x, y});
  expect_tensor_near<float>(out[1], Shape{3, 2}, iota_f(6));
  EXPECT_TRUE(out[1].shares_buffer_with(out[0]));
}

TEST(Reshape, InfersTheMinusOneDimension) {
  Graph g;
  Scope s(g);
  auto x = constant(s, std::vector<int64_t>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(reshape(s, x, {-1, 2}).shape(), (Shape{3, 2}));
  EXPECT_EQ(reshape(s, x, {-1}).shape(), (Shape{6}));
  EXPECT_EQ(reshape(s, x, {1, -1, 3}).shape(), (Shape{1, 2, 3}));
  expect_tensor_near<int64_t>(eval(reshape(s, x, {3, -1})), Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  auto scalar = reshape(s, constant(s, std::vector<bool>{true}, Shape{1, 1}), {});
  EXPECT_EQ(scalar.shape(), Shape{});
  expect_tensor_near<bool>(eval(scalar), Shape{}, {true});
}

TEST(Reshape, NamesItsShapeConstantAfterTheNode) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(6), Shape{2, 3});
  auto a = reshape(s, x, {6});
  auto b = reshape(s.with_name_scope("layer"), x, {6});
  auto c = reshape(s, x, {6});
  EXPECT_EQ(a.node->name(), "Reshape");
  EXPECT_EQ(a.node->input(1).node->name(), "Reshape/shape");
  EXPECT_EQ(b.node->name(), "layer/Reshape");
  EXPECT_EQ(b.node->input(1).node->name(), "layer/Reshape/shape");
  EXPECT_EQ(c.node->name(), "Reshape_1");
  EXPECT_EQ(c.node->input(1).node->name(), "Reshape_1/shape");
  EXPECT_EQ(reshape(s.with_op_name("flat"), x, {6}).node->name(), "flat");
}

TEST(Reshape, ShapeErrorsAtGraphConstruction) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(6), Shape{2, 3});
  expect_error<InvalidArgumentError>(
      [&] { reshape(s, x, {4}); },
      "[Reshape] Reshape: Input to reshape is a tensor with 6 values, but the requested shape has 4");
  expect_error<InvalidArgumentError>(
      [&] {
        reshape(s, x, {-1, 4});
      },
      "[Reshape] Reshape_1: Input to reshape is a tensor with 6 values, but the requested shape requires a multiple "
      "of 4");
  expect_error<InvalidArgumentError>(
      [&] {
        reshape(s, x, {-1, -1});
      },
      "[Reshape] Reshape_2: Only one input size may be -1, not both 0 and 1");
  expect_error<InvalidArgumentError>(
      [&] {
        reshape(s, x, {2, -3});
      },
      "[Reshape] Reshape_3: Size 1 must be non-negative, not -3");
  auto empty = constant(s, std::vector<float>{}, Shape{0, 3});
  expect_error<InvalidArgumentError>(
      [&] {
        reshape(s, empty, {0, -1});
      },
      "[Reshape] Reshape_4: Reshape cannot infer the missing input size for an empty "
      "tensor unless all specified input sizes are non-zero");
  EXPECT_EQ(reshape(s, empty, {3, 0, 5}).shape(), (Shape{3, 0, 5}));
  auto bad_shape = constant(s, std::vector<float>{2, 3}, Shape{2});
  expect_error<InvalidArgumentError>([&] { reshape(s, x, bad_shape); },
                                     "[Reshape] Reshape_6: shape must be int32 or int64, got float32");
}

// Issue 12: 2305843009213693953 x 8 wraps around to 8 in int64; the reshape was accepted and a
// transpose of the result read far past its 8 values.
TEST(Reshape, ElementCountsThatOverflowAreRefused) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(8), Shape{8});
  const int64_t huge = 2305843009213693953;  // 2^61 + 1
  expect_error<InvalidArgumentError>(
      [&] { reshape(s, x, {huge, 8}); },
      "[Reshape] Reshape: requested shape has more elements than a 64-bit count can hold (size 1 is 8); check the "
      "sizes");
  auto sizes = placeholder(s.with_op_name("sizes"), DType::kInt64, Shape{2});
  auto y = transpose(s, reshape(s.with_op_name("fed_reshape"), x, sizes), {1, 0});
  expect_error<InvalidArgumentError>(
      [&] { eval(y, {{sizes, Tensor::from_vector<int64_t>({huge, 8})}}); },
      "[Reshape] fed_reshape: requested shape has more elements than a 64-bit count can hold (size 1 is 8); check "
      "the sizes");
  expect_tensor_near<float>(eval(y, {{sizes, Tensor::from_vector<int64_t>({2, 4})}}), Shape{4, 2},
                            {0, 4, 1, 5, 2, 6, 3, 7});
  // Dims from a fed tensor: Fill allocates its output from them.
  auto dims = placeholder(s.with_op_name("dims"), DType::kInt64, Shape{2});
  auto filled = fill(s.with_op_name("fed_fill"), dims, constant(s, 1.0f));
  expect_error<InvalidArgumentError>(
      [&] { eval(filled, {{dims, Tensor::from_vector<int64_t>({huge, 8})}}); },
      "[Fill] fed_fill: cannot allocate a tensor of shape [2305843009213693953,8]: its element count overflows 64 "
      "bits; check the dimensions");
  // Element count fits, byte size does not (2^61 float32 values).
  const std::string bytes_error = testing::error_text<InvalidArgumentError>(
      [&] { eval(filled, {{dims, Tensor::from_vector<int64_t>({int64_t{1} << 60, 2})}}); });
  EXPECT_EQ(bytes_error.rfind("[Fill] fed_fill: cannot allocate a float32 buffer of 2305843009213693952 elements", 0),
            0u)
      << bytes_error;
  // And from constant dims, at graph construction.
  const std::string fill_error =
      testing::error_text<InvalidArgumentError>([&] { fill(s.with_op_name("const_fill"), {huge, 8}, 1.0f); });
  EXPECT_EQ(fill_error.rfind("[Fill] const_fill: shape [2305843009213693953,8] has more elements", 0), 0u)
      << fill_error;
}

TEST(Reshape, UnknownDimsAreInferredAtRunTime) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 3});
  auto flat = reshape(s, x, {-1});
  auto rows = reshape(s, x, {3, -1});
  auto four = reshape(s, x, {4});
  EXPECT_EQ(flat.shape(), (Shape{-1}));
  EXPECT_EQ(rows.shape(), (Shape{3, -1}));
  EXPECT_EQ(four.shape(), (Shape{4}));
  Tensor feed = Tensor::from_vector<float>(iota_f(6), Shape{2, 3});
  auto out = eval({flat, rows}, {{x, feed}});
  expect_tensor_near<float>(out[0], Shape{6}, iota_f(6));
  expect_tensor_near<float>(out[1], Shape{3, 2}, iota_f(6));
  expect_error<InvalidArgumentError>(
      [&] {
        eval({four}, {{x, feed}});
      },
      "[Reshape] Reshape_2: Input to reshape is a tensor with 6 values, but the requested shape has 4");
  auto unknown = placeholder(s, DType::kFloat32);
  EXPECT_EQ(reshape(s, unknown, {2, -1}).shape(), (Shape{2, -1}));
}

TEST(Reshape, TakesAShapeComputedAtRunTime) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(6), Shape{6});
  auto like = placeholder(s, DType::kInt32, Shape{-1, -1});
  auto y = reshape(s, x, shape(s, like));
  EXPECT_EQ(y.shape(), (Shape{-1, -1}));
  expect_tensor_near<float>(eval(y, {{like, Tensor(DType::kInt32, Shape{3, 2})}}), Shape{3, 2}, iota_f(6));
}

// ----- Transpose -----------------------------------------------------------------------------

// out[j0, j1, ...] = in[i] where i[perm[k]] = j[k].
template <typename T>
std::vector<T> naive_transpose(const std::vector<T>& in, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& perm) {
  const int r = static_cast<int>(dims.size());
  std::vector<int64_t> in_stride(r, 1), out_dims(r);
  for (int d = r - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * dims[d + 1];
  for (int k = 0; k < r; ++k) out_dims[k] = dims[perm[k]];
  std::vector<T> out(in.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    int64_t src = 0;
    for (int k = 0; k < r; ++k) src += idx[k] * in_stride[perm[k]];
    out[o] = in[src];
    for (int k = r - 1; k >= 0; --k) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

template <typename T>
std::vector<T> pattern(int64_t n) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>)
      v[i] = (i * 7 + i / 3) % 3 == 0;
    else
      v[i] = static_cast<T>(i * 3 + 1);
  }
  return v;
}

template <typename T>
void check_transpose(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, int threads = 2) {
  Graph g;
  Scope s(g);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  auto in = pattern<T>(n);
  auto x = constant(s, Tensor::from_vector<T>(in, Shape(dims)));
  auto y = transpose(s, x, perm);
  Shape expected_shape;
  for (int64_t p : perm) expected_shape.add_dim(dims[p]);
  ASSERT_EQ(y.shape(), expected_shape);
  auto out = eval({y}, {}, threads)[0];
  SCOPED_TRACE(Shape(dims).to_string() + " perm " + Shape(perm).to_string());
  expect_tensor_near<T>(out, expected_shape, naive_transpose(in, dims, perm));
}

TEST(Transpose, MatrixValues) {
  Graph g;
  Scope s(g);
  auto x = constant(s, std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto y = transpose(s, x);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  expect_tensor_near<float>(eval(y), Shape{3, 2}, {1, 4, 2, 5, 3, 6});
  EXPECT_EQ(y.node->input(1).node->name(), "Transpose/perm");
}

TEST(Transpose, TwoDimensionalAgainstNaive) {
  for (auto dims : std::vector<std::vector<int64_t>>{{1, 7}, {5, 1}, {67, 45}, {300, 200}, {33, 1000}}) {
    check_transpose<float>(dims, {1, 0});
    check_transpose<double>(dims, {1, 0});
    check_transpose<int32_t>(dims, {1, 0});
    check_transpose<int64_t>(dims, {1, 0});
    check_transpose<bool>(dims, {1, 0});
  }
  check_transpose<float>({300, 200}, {1, 0}, /*threads=*/1);
}

TEST(Transpose, ThreeAndFourDimensionalAgainstNaive) {
  const std::vector<std::vector<int64_t>> perms3 = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& perm : perms3) {
    check_transpose<float>({3, 4, 5}, perm);
    check_transpose<int64_t>({2, 1, 3}, perm);
    check_transpose<bool>({40, 3, 70}, perm);
    check_transpose<double>({64, 50, 40}, perm);
  }
  check_transpose<float>({2, 3, 4, 5}, {0, 2, 3, 1});
  check_transpose<float>({2, 3, 4, 5}, {3, 1, 0, 2});
  check_transpose<int32_t>({8, 16, 16, 3}, {0, 3, 1, 2});  // NHWC -> NCHW
  check_transpose<int32_t>({8, 3, 16, 16}, {0, 2, 3, 1});  // NCHW -> NHWC
}

TEST(Transpose, EmptyPermReversesAndIdentityForwards) {
  Graph g;
  Scope s(g);
  auto in = pattern<float>(24);
  auto x = constant(s, Tensor::from_vector<float>(in, Shape{2, 3, 4}));
  auto rev = transpose(s, x);
  EXPECT_EQ(rev.shape(), (Shape{4, 3, 2}));
  auto same = transpose(s, x, {0, 1, 2});
  auto unit = transpose(s, constant(s, in, Shape{1, 24, 1}), {2, 0, 1});  // moves only size-1 dims
  auto out = eval({x, rev, same, unit});
  expect_tensor_near<float>(out[1], Shape{4, 3, 2}, naive_transpose(in, {2, 3, 4}, {2, 1, 0}));
  EXPECT_TRUE(out[2].shares_buffer_with(out[0]));
  expect_tensor_near<float>(out[3], Shape{1, 1, 24}, in);
  auto scalar = transpose(s, constant(s, 5.0f));
  expect_tensor_near<float>(eval(scalar), Shape{}, {5});
  auto empty = transpose(s, constant(s, std::vector<float>{}, Shape{0, 3}));
  expect_tensor_near<float>(eval(empty), Shape{3, 0}, {});
}

TEST(Transpose, PermErrors) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(6), Shape{2, 3});
  expect_error<InvalidArgumentError>(
      [&] { transpose(s, x, {0}); },
      "[Transpose] Transpose: transpose expects a vector of size 2. But input(1) is a vector of size 1");
  expect_error<InvalidArgumentError>(
      [&] {
        transpose(s, x, {0, 0});
      },
      "[Transpose] Transpose_1: 1 is missing from {0,0}.");
  expect_error<InvalidArgumentError>(
      [&] {
        transpose(s, x, {0, 2});
      },
      "[Transpose] Transpose_2: 2 is out of range [0 .. 2)");
  auto strings = constant(s, Tensor::scalar<std::string>("a"));
  expect_error<InvalidArgumentError>(
      [&] { transpose(s, strings); },
      "[Transpose] Transpose_3: input 0 has dtype string, which this op does not support");
}

TEST(Transpose, UnknownDims) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{-1, 3});
  auto y = transpose(s, x);
  EXPECT_EQ(y.shape(), (Shape{3, -1}));
  auto u = placeholder(s, DType::kFloat32);
  EXPECT_EQ(transpose(s, u, {1, 2, 0}).shape(), (Shape{-1, -1, -1}));
  EXPECT_FALSE(transpose(s, u).shape().known_rank());
  auto out = eval(y, {{x, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})}});
  expect_tensor_near<float>(out, Shape{3, 2}, {1, 4, 2, 5, 3, 6});
  auto z = transpose(s, u, {1, 0});
  expect_error<InvalidArgumentError>(
      [&] {
        eval({z}, {{u, Tensor::from_vector<float>({1, 2, 3})}});
      },
      "[Transpose] Transpose_3: transpose expects a vector of size 1. But input(1) is a vector of size 2");
}

// ----- ConcatV2 ------------------------------------------------------------------------------

TEST(Concat, AlongEachAxis) {
  Graph g;
  Scope s(g);
  auto a = constant(s, std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  auto b = constant(s, std::vector<float>{5, 6}, Shape{1, 2});
  auto c = constant(s, std::vector<float>{7, 8}, Shape{2, 1});
  auto rows = concat(s, {a, b}, 0);
  auto cols = concat(s, {a, c}, 1);
  auto last = concat(s, {c, a, c}, -1);
  EXPECT_EQ(rows.shape(), (Shape{3, 2}));
  EXPECT_EQ(cols.shape(), (Shape{2, 3}));
  EXPECT_EQ(last.shape(), (Shape{2, 4}));
  auto out = eval({rows, cols, last});
  expect_tensor_near<float>(out[0], Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  expect_tensor_near<float>(out[1], Shape{2, 3}, {1, 2, 7, 3, 4, 8});
  expect_tensor_near<float>(out[2], Shape{2, 4}, {7, 1, 2, 7, 8, 3, 4, 8});
  EXPECT_EQ(rows.node->num_inputs(), 3);
  EXPECT_EQ(rows.node->input(2).node->name(), "ConcatV2/axis");
}

TEST(Concat, OtherDtypesAndEmptyInputs) {
  Graph g;
  Scope s(g);
  auto i = concat(s,
                  {constant(s, std::vector<int64_t>{1, 2}, Shape{2}), constant(s, std::vector<int64_t>{}, Shape{0}),
                   constant(s, std::vector<int64_t>{3}, Shape{1})},
                  0);
  auto b = concat(
      s, {constant(s, std::vector<bool>{true}, Shape{1, 1}), constant(s, std::vector<bool>{false}, Shape{1, 1})}, 1);
  auto out = eval({i, b});
  expect_tensor_near<int64_t>(out[0], Shape{3}, {1, 2, 3});
  expect_tensor_near<bool>(out[1], Shape{1, 2}, {true, false});
  auto one = constant(s, iota_f(3), Shape{3});
  expect_tensor_near<float>(eval(concat(s, {one}, 0)), Shape{3}, iota_f(3));
}

TEST(Concat, LargeMiddleAxisAgainstNaive) {
  Graph g;
  Scope s(g);
  auto va = pattern<int32_t>(400 * 3 * 50), vb = pattern<int32_t>(400 * 5 * 50);
  auto a = constant(s, Tensor::from_vector<int32_t>(va, Shape{400, 3, 50}));
  auto b = constant(s, Tensor::from_vector<int32_t>(vb, Shape{400, 5, 50}));
  auto y = concat(s, {a, b}, 1);
  std::vector<int32_t> expected;
  for (int r = 0; r < 400; ++r) {
    expected.insert(expected.end(), va.begin() + r * 150, va.begin() + (r + 1) * 150);
    expected.insert(expected.end(), vb.begin() + r * 250, vb.begin() + (r + 1) * 250);
  }
  expect_tensor_near<int32_t>(eval(y), Shape{400, 8, 50}, expected);
}

TEST(Concat, Errors) {
  Graph g;
  Scope s(g);
  auto a = constant(s, iota_f(4), Shape{2, 2});
  auto v = constant(s, iota_f(2), Shape{2});
  auto wide = constant(s, iota_f(9), Shape{3, 3});
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {a, v}, 0);
      },
      "[ConcatV2] ConcatV2: ConcatOp : Ranks of all input tensors should match: "
      "shape[0] = [2,2] vs. shape[1] = [2]");
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {a, a, wide}, 1);
      },
      "[ConcatV2] ConcatV2_1: ConcatOp : Dimensions of inputs should match: shape[0] = "
      "[2,2] vs. shape[2] = [3,3]");
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {a, a}, 2);
      },
      "[ConcatV2] ConcatV2_2: ConcatOp : Expected concatenating dimensions in the range "
      "[-2, 2), but got 2");
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {a, a}, -3);
      },
      "[ConcatV2] ConcatV2_3: ConcatOp : Expected concatenating dimensions in the range "
      "[-2, 2), but got -3");
  auto d = constant(s, std::vector<double>{1, 2, 3, 4}, Shape{2, 2});
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {a, d}, 0);
      },
      "[ConcatV2] ConcatV2_4: values[1] has dtype float64, but values[0] has dtype float32");
  expect_error<InvalidArgumentError>(
      [&] {
        concat(s, {constant(s, 1.0f), constant(s, 2.0f)}, 0);
      },
      "[ConcatV2] ConcatV2_5: Can't concatenate scalars (use tf.stack instead)");
}

TEST(Concat, UnknownDimsAndRunTimeChecks) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s.with_op_name("x"), DType::kFloat32, Shape{-1, 2});
  auto known = constant(s, iota_f(6), Shape{3, 2});
  auto rows = concat(s, {x, known}, 0);
  EXPECT_EQ(rows.shape(), (Shape{-1, 2}));
  auto cols = concat(s, {x, known}, 1);
  EXPECT_EQ(cols.shape(), (Shape{3, 4}));
  auto u = placeholder(s, DType::kFloat32);
  EXPECT_EQ(concat(s, {u, known}, 1).shape(), (Shape{3, -1}));
  auto out = eval(rows, {{x, Tensor::from_vector<float>({10, 11}, Shape{1, 2})}});
  expect_tensor_near<float>(out, Shape{4, 2}, {10, 11, 0, 1, 2, 3, 4, 5});
  expect_error<InvalidArgumentError>(
      [&] {
        eval({cols}, {{x, Tensor::from_vector<float>({10, 11}, Shape{1, 2})}});
      },
      "[ConcatV2] ConcatV2_1: ConcatOp : Dimensions of inputs should match: shape[0] = "
      "[1,2] vs. shape[1] = [3,2]");
}

// ----- Fill, ZerosLike, OnesLike -------------------------------------------------------------

TEST(Fill, ValuesForEachDtype) {
  Graph g;
  Scope s(g);
  auto f = fill(s, {2, 3}, 1.5f);
  auto i = fill(s, {4}, int64_t{7});
  auto b = fill(s, {2}, true);
  auto scalar = fill(s, {}, 2.0);
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(f.node->input(0).node->name(), "Fill/dims");
  auto out = eval({f, i, b, scalar});
  expect_tensor_near<float>(out[0], Shape{2, 3}, std::vector<float>(6, 1.5f));
  expect_tensor_near<int64_t>(out[1], Shape{4}, {7, 7, 7, 7});
  expect_tensor_near<bool>(out[2], Shape{2}, {true, true});
  expect_tensor_near<double>(out[3], Shape{}, {2.0});
  auto big = fill(s, {1000, 1000}, int32_t{3});
  auto t = eval(big);
  EXPECT_EQ(std::count(t.flat<int32_t>().begin(), t.flat<int32_t>().end(), 3), 1000000);
}

TEST(Fill, ErrorsAndRunTimeDims) {
  Graph g;
  Scope s(g);
  expect_error<InvalidArgumentError>(
      [&] {
        fill(s, {2, -1}, 1.0f);
      },
      "[Fill] Fill: Fill dimensions must be >= 0, got [2,-1]");
  auto vec = constant(s, iota_f(2), Shape{2});
  expect_error<InvalidArgumentError>([&] { fill(s, {2}, vec); },
                                     "[Fill] Fill_1: value must be a scalar, got shape [2]");
  auto x = placeholder(s, DType::kFloat32, Shape{-1, 2});
  auto y = fill(s, shape(s, x), constant(s, 4.0f));
  EXPECT_EQ(y.shape(), (Shape{-1, -1}));
  auto out = eval(y, {{x, Tensor(DType::kFloat32, Shape{3, 2})}});
  expect_tensor_near<float>(out, Shape{3, 2}, std::vector<float>(6, 4.0f));
}

TEST(ZerosOnesLike, EachDtypeClass) {
  Graph g;
  Scope s(g);
  auto f = constant(s, std::vector<float>{3, -1}, Shape{2});
  auto i = constant(s, std::vector<int32_t>{5, 6, 7}, Shape{3, 1});
  auto b = constant(s, std::vector<bool>{true, false}, Shape{2});
  auto out =
      eval({zeros_like(s, f), ones_like(s, f), zeros_like(s, i), ones_like(s, i), zeros_like(s, b), ones_like(s, b)});
  expect_tensor_near<float>(out[0], Shape{2}, {0, 0});
  expect_tensor_near<float>(out[1], Shape{2}, {1, 1});
  expect_tensor_near<int32_t>(out[2], Shape{3, 1}, {0, 0, 0});
  expect_tensor_near<int32_t>(out[3], Shape{3, 1}, {1, 1, 1});
  expect_tensor_near<bool>(out[4], Shape{2}, {false, false});
  expect_tensor_near<bool>(out[5], Shape{2}, {true, true});
  auto x = placeholder(s, DType::kFloat64, Shape{-1, 4});
  EXPECT_EQ(zeros_like(s, x).shape(), (Shape{-1, 4}));
  EXPECT_EQ(ones_like(s, x).node->output_dtype(0), DType::kFloat64);
}

// ----- Cast ----------------------------------------------------------------------------------

TEST(Cast, FloatToIntTruncatesTowardZeroAndSaturates) {
  Graph g;
  Scope s(g);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto x = constant(s, std::vector<float>{1.7f, -1.7f, 0.5f, -0.5f, nan, 1e10f, -1e10f, inf, -inf, 2147483520.0f},
                    Shape{10});
  auto y = cast(s, x, DType::kInt32);
  EXPECT_EQ(y.node->output_dtype(0), DType::kInt32);
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  expect_tensor_near<int32_t>(eval(y), Shape{10}, {1, -1, 0, 0, 0, kMax, kMin, kMax, kMin, 2147483520});
  auto d = constant(s, std::vector<double>{-2.9, 9.3e18, -9.3e18, 4e15 + 0.5}, Shape{4});
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max(), kMin64 = std::numeric_limits<int64_t>::min();
  expect_tensor_near<int64_t>(eval(cast(s, d, DType::kInt64)), Shape{4}, {-2, kMax64, kMin64, 4000000000000000});
}

TEST(Cast, IntegerBoolAndFloatConversions) {
  Graph g;
  Scope s(g);
  auto i64 = constant(s, std::vector<int64_t>{4294967297LL, -1, 16777217}, Shape{3});
  expect_tensor_near<int32_t>(eval(cast(s, i64, DType::kInt32)), Shape{3}, {1, -1, 16777217});
  expect_tensor_near<float>(eval(cast(s, i64, DType::kFloat32)), Shape{3}, {4294967296.0f, -1.0f, 16777216.0f}, 0);
  expect_tensor_near<bool>(eval(cast(s, i64, DType::kBool)), Shape{3}, {true, true, true});
  auto b = constant(s, std::vector<bool>{true, false}, Shape{2});
  expect_tensor_near<float>(eval(cast(s, b, DType::kFloat32)), Shape{2}, {1, 0});
  expect_tensor_near<int64_t>(eval(cast(s, b, DType::kInt64)), Shape{2}, {1, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto f = constant(s, std::vector<float>{0.0f, -0.0f, nan, 0.25f}, Shape{4});
  expect_tensor_near<bool>(eval(cast(s, f, DType::kBool)), Shape{4}, {false, false, true, true});
  expect_tensor_near<double>(eval(cast(s, f, DType::kFloat64)), Shape{4}, {0.0, 0.0, std::nan(""), 0.25});
  auto big = constant(s, std::vector<double>{1e300, 0.1}, Shape{2});
  auto narrowed = eval(cast(s, big, DType::kFloat32));
  EXPECT_TRUE(std::isinf(narrowed.flat<float>()[0]));
  EXPECT_EQ(narrowed.flat<float>()[1], 0.1f);
  auto i32 = constant(s, std::vector<int32_t>{-3, 7}, Shape{2});
  expect_tensor_near<int64_t>(eval(cast(s, i32, DType::kInt64)), Shape{2}, {-3, 7});
}

TEST(Cast, SameDtypeForwardsAndLargeInputsSplit) {
  Graph g;
  Scope s(g);
  auto x = constant(s, iota_f(8), Shape{2, 4});
  auto out = eval({x, cast(s, x, DType::kFloat32)});
  EXPECT_TRUE(out[1].shares_buffer_with(out[0]));
  std::vector<int32_t> v(200000);
  std::iota(v.begin(), v.end(), -100000);
  auto big = eval(cast(s, constant(s, v, Shape{200000}), DType::kFloat64));
  for (int i = 0; i < 200000; i += 997) ASSERT_EQ(big.flat<double>()[i], v[i]);
  auto strings = constant(s, Tensor::scalar<std::string>("1"));
  expect_error<InvalidArgumentError>([&] { cast(s, strings, DType::kFloat32); },
                                     "[Cast] Cast_2: Cast string to float32 is not supported");
  auto p = placeholder(s, DType::kInt32, Shape{-1, 3});
  EXPECT_EQ(cast(s, p, DType::kFloat32).shape(), (Shape{-1, 3}));
}

// ----- Shape ---------------------------------------------------------------------------------

TEST(Shape, RunTimeShapeAsInt32OrInt64) {
  Graph g;
  Scope s(g);
  auto x = placeholder(s, DType::kFloat32, Shape{-1, 3});
  auto u = placeholder(s, DType::kFloat32);
  auto sx = shape(s, x);
  auto su = shape(s, u, DType::kInt64);
  EXPECT_EQ(sx.shape(), (Shape{2}));
  EXPECT_EQ(sx.node->output_dtype(0), DType::kInt32);
  EXPECT_EQ(su.shape(), (Shape{-1}));
  auto out = eval({sx, su, shape(s, constant(s, 1.0f))},
                  {{x, Tensor(DType::kFloat32, Shape{5, 3})}, {u, Tensor(DType::kFloat32, Shape{1, 2, 0})}});
  expect_tensor_near<int32_t>(out[0], Shape{2}, {5, 3});
  expect_tensor_near<int64_t>(out[1], Shape{3}, {1, 2, 0});
  expect_tensor_near<int32_t>(out[2], Shape{0}, {});
  expect_error<InvalidArgumentError>([&] { shape(s, x, DType::kFloat32); },
                                     "[Shape] Shape_3: out_type must be int32 or int64, got float32");
}

}  // namespace
}  // namespace stepscope
