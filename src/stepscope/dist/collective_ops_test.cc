// The collective ops and dist::init, on however many ranks run this program: one process under
// plain ctest, 2 and 4 under the dist.mpirun_np* tests (`mpirun -np N dist_test`). Every
// expectation is written for any size, from rank() and size().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>
#include <type_traits>

#include "stepscope/autodiff/gradients.h"
#include "stepscope/dist/mpi.h"
#include "stepscope/ops/all_ops.h"
#include "stepscope/ops/collective_trace.h"
#include "stepscope/runtime/session.h"
#include "stepscope/testing/error_text.h"

namespace stepscope {
namespace {

// dist::init before the tests, dist::shutdown after them: once per process, as a program would.
class DistEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { dist::init(); }
  void TearDown() override { dist::shutdown(); }
};
const auto* const dist_environment = ::testing::AddGlobalTestEnvironment(new DistEnvironment);

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v;
  if (t.dtype() == DType::kFloat32)
    for (float x : t.flat<float>()) v.push_back(x);
  else if (t.dtype() == DType::kFloat64)
    for (double x : t.flat<double>()) v.push_back(x);
  else if (t.dtype() == DType::kInt32)
    for (int32_t x : t.flat<int32_t>()) v.push_back(x);
  else
    for (int64_t x : t.flat<int64_t>()) v.push_back(static_cast<double>(x));
  return v;
}

// This rank's values for an input of `size` elements: element k is
// (rank + 1) * ((k % modulus) + shift), so that their sum over n ranks is n (n + 1) / 2 times
// ((k % modulus) + shift) whatever the order of the additions (small integers, exact in float).
std::vector<float> rank_values(int64_t size, int modulus, int shift) {
  std::vector<float> v(static_cast<size_t>(size));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>((dist::rank() + 1) * (static_cast<int>(k % static_cast<size_t>(modulus)) + shift));
  return v;
}

TEST(Dist, RankAndSizeComeFromMpirun) {
  ASSERT_TRUE(dist::initialized());
  const char* launched = std::getenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(dist::size(), launched ? std::atoi(launched) : 1);
  EXPECT_EQ(dist::rank(), launched ? std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")) : 0);
  EXPECT_GE(dist::local_rank(), 0);
  EXPECT_LT(dist::local_rank(), dist::local_size());
  // Every rank of these tests is on this machine, unless a test that simulates hosts (each rank in
  // a network namespace of its own: dist.two_hosts_netns) says how many ranks share one.
  const char* per_host = std::getenv("STEPSCOPE_TEST_LOCAL_SIZE");
  EXPECT_EQ(dist::local_size(), per_host ? std::atoi(per_host) : dist::size());
  EXPECT_EQ(collective_backend().size(), dist::size());
  if (launched) {
    EXPECT_NE(dist::describe().find("MPI (Open MPI"), std::string::npos) << dist::describe();
  } else {
    EXPECT_EQ(dist::describe(), "local (one process)");
  }
  dist::init();  // a second call changes nothing
  EXPECT_EQ(dist::size(), launched ? std::atoi(launched) : 1);
  dist::barrier();
}

// The ranks of these tests share one machine, so one wall clock: the true offset is 0, and the
// estimate must be within its own error bound of it.
TEST(Dist, ClockOffsetToRankZeroIsWithinItsErrorBound) {
  const dist::ClockOffset clock = dist::clock_offset();
  if (dist::rank() == 0) {
    EXPECT_EQ(clock.offset_ns, 0);
    EXPECT_EQ(clock.error_ns, 0);
  } else {
    EXPECT_GT(clock.error_ns, 0);
    EXPECT_LE(std::abs(clock.offset_ns), clock.error_ns);
  }
}

TEST(Collective, AllreduceSumsAndAveragesFusedInputs) {
  const int r = dist::rank(), n = dist::size();
  Graph g;
  Scope s(g);
  // Rank r contributes (r + 1) times a base value.
  Output a = constant(s, std::vector<float>{1.0f * (r + 1), 2.0f * (r + 1), 3.0f * (r + 1)}, Shape{3});
  Output b = constant(s, std::vector<float>{-1.0f * (r + 1), 0.5f * (r + 1)}, Shape{2, 1});
  std::vector<Output> sums = allreduce(s, {a, b});
  std::vector<Output> means = allreduce(s.with_control_dependencies({sums[0].node}), {a, b}, ReduceOp::kAverage);
  Output ints = allreduce(s.with_control_dependencies({means[0].node}),
                          constant(s, std::vector<int64_t>{int64_t{1} << 40, r}, Shape{2}));
  EXPECT_EQ(sums[1].shape(), (Shape{2, 1}));
  Session sess(g);
  auto out = sess.run({}, {sums[0], sums[1], means[0], means[1], ints});
  const double total = n * (n + 1) / 2.0;  // sum of r + 1 over the ranks
  EXPECT_EQ(values_of(out[0]), (std::vector<double>{total, 2 * total, 3 * total}));
  EXPECT_EQ(values_of(out[1]), (std::vector<double>{-total, 0.5 * total}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  const double mean = total / n;
  EXPECT_NEAR(values_of(out[2])[2], 3 * mean, 1e-6);
  EXPECT_NEAR(values_of(out[3])[0], -mean, 1e-6);
  EXPECT_EQ(values_of(out[4]), (std::vector<double>{static_cast<double>(n * (int64_t{1} << 40)), n * (n - 1) / 2.0}));
  // A second run of the same plan gives the same (no state kept between steps).
  auto again = sess.run({}, {sums[0]});
  EXPECT_EQ(values_of(again[0]), values_of(out[0]));
}

// Inputs of kAllreduceDirectBytes (64 KiB) and more are reduced on their own, from input to
// output; the smaller ones share the fusion buffer. A mix, in both reductions, with exact values:
// the sums are of small integers, and the average is the sum times the float 1 / size, as the
// kernel computes it.
TEST(Collective, AllreduceMixesDirectAndFusedInputsExactly) {
  const int n = dist::size();
  constexpr int64_t kAtThreshold = kAllreduceDirectBytes / 4;  // float32 elements
  // Sizes in elements: small, large (at the threshold: direct), small, just under (fused),
  // large, empty.
  const std::vector<int64_t> sizes = {3, kAtThreshold, 5, kAtThreshold - 1, 3 * kAtThreshold + 7, 0};
  std::vector<int64_t> bytes;
  for (int64_t e : sizes) bytes.push_back(e * 4);
  EXPECT_EQ(allreduce_fused_inputs(bytes), (std::vector<bool>{true, false, true, true, false, true}));
  // A lone small input, or one small among large ones, gains nothing from the buffer.
  EXPECT_EQ(allreduce_fused_inputs(std::vector<int64_t>{12}), (std::vector<bool>{false}));
  EXPECT_EQ(allreduce_fused_inputs(std::vector<int64_t>{12, 1 << 20}), (std::vector<bool>{false, false}));
  Graph g;
  Scope s(g);
  // Input i, element k, on rank r: (r + 1) * ((k % 97) + 10 i - 20).
  std::vector<Output> inputs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    inputs.push_back(constant(s, rank_values(sizes[i], 97, 10 * static_cast<int>(i) - 20), Shape{sizes[i]}));
  }
  std::vector<Output> sums = allreduce(s.with_op_name("mixed_sum"), inputs);
  std::vector<Output> means =
      allreduce(s.with_control_dependencies({sums[0].node}).with_op_name("mixed_mean"), inputs, ReduceOp::kAverage);
  // Only empty inputs to fuse (nothing to reduce in the buffer), beside a large one: every output
  // is still given.
  std::vector<Output> empties = allreduce(s.with_control_dependencies({means[0].node}).with_op_name("empties"),
                                          {inputs[5], inputs[5], inputs[1]});
  std::vector<Output> fetches = sums;
  fetches.insert(fetches.end(), means.begin(), means.end());
  Session sess(g);
  auto empty_out = sess.run({}, empties);
  EXPECT_EQ(empty_out[0].shape(), (Shape{0}));
  EXPECT_EQ(empty_out[1].shape(), (Shape{0}));
  EXPECT_EQ(values_of(empty_out[2])[96], static_cast<double>(n * (n + 1) / 2 * (96 + 10 - 20)));
  for (int run = 0; run < 2; ++run) {  // the second run reuses the plan and the buffers
    auto out = sess.run({}, fetches);
    const float total = static_cast<float>(n * (n + 1) / 2);  // the sum of r + 1 over the ranks
    const float inverse = static_cast<float>(1.0 / n);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const Tensor& sum = out[i];
      const Tensor& mean = out[sizes.size() + i];
      ASSERT_EQ(sum.shape(), (Shape{sizes[i]}));
      ASSERT_EQ(mean.shape(), (Shape{sizes[i]}));
      auto sv = sum.flat<float>();
      auto mv = mean.flat<float>();
      for (int64_t k = 0; k < sizes[i]; ++k) {
        const float base = static_cast<float>(static_cast<int>(k % 97) + 10 * static_cast<int>(i) - 20);
        ASSERT_EQ(sv[k], total * base) << "sum: input " << i << ", element " << k;
        ASSERT_EQ(mv[k], total * base * inverse) << "average: input " << i << ", element " << k;
      }
    }
  }
}

// An input only the Allreduce holds (a gradient in training) is reduced in its own buffer and
// handed on as the output; an input others still hold (a Const here) is left as it was and the
// output is a new tensor. Small and large inputs, fused and direct, sum and average.
TEST(Collective, AllreduceReducesInputsItAloneHoldsInTheirOwnBuffers) {
  const int n = dist::size();
  constexpr int64_t kLarge = kAllreduceDirectBytes / 4 + 3;  // float32 elements: direct
  const std::vector<int64_t> sizes = {5, kLarge, 7, 2 * kLarge};
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    Graph g;
    Scope s(g);
    // Input i, element k, on rank r: (r + 1) * ((k % 89) + i - 40), made by a Neg in the step
    // (owned) or a Const (held).
    std::vector<Output> owned, held;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::vector<float> v = rank_values(sizes[i], 89, static_cast<int>(i) - 40);
      owned.push_back(neg(s, constant(s, v, Shape{sizes[i]})));
      held.push_back(constant(s, v, Shape{sizes[i]}));
    }
    const std::vector<Output> from_owned = allreduce(s.with_op_name("from_owned"), owned, op);
    const std::vector<Output> from_held =
        allreduce(s.with_control_dependencies({from_owned[0].node}).with_op_name("from_held"), held, op);
    std::vector<Output> fetches = from_owned;
    fetches.insert(fetches.end(), from_held.begin(), from_held.end());
    Session sess(g);
    for (int run = 0; run < 3; ++run) {  // a Const modified in place would show on the next run
      RunMetadata metadata;
      RunOptions options;
      options.trace_level = TraceLevel::kFullTrace;
      auto out = sess.run({}, fetches, {}, run == 2 ? options : RunOptions{}, run == 2 ? &metadata : nullptr);
      const float total = static_cast<float>(n * (n + 1) / 2);  // the sum of r + 1 over the ranks
      const float scale = op == ReduceOp::kAverage ? static_cast<float>(1.0 / n) : 1.0f;
      for (size_t j = 0; j < fetches.size(); ++j) {
        const size_t i = j % sizes.size();
        const float sign = j < sizes.size() ? -1.0f : 1.0f;
        auto v = out[j].flat<float>();
        ASSERT_EQ(out[j].shape(), (Shape{sizes[i]}));
        for (int64_t k = 0; k < sizes[i]; ++k) {
          const float base = static_cast<float>(static_cast<int>(k % 89) + static_cast<int>(i) - 40);
          ASSERT_EQ(v[k], sign * total * base * scale)
              << (j < sizes.size() ? "owned" : "held") << " input " << i << ", element " << k << ", run " << run;
        }
      }
      if (run < 2) continue;
      // Where each output lies: in its input's buffer for the owned ones; for the held ones, in
      // a new tensor when there is reducing to do (more than one rank).
      std::map<std::string, std::vector<uint64_t>> outputs;
      for (const auto& dev : metadata.step_stats.dev_stats())
        for (const auto& ns : dev.node_stats)
          for (const auto& o : ns.output)
            outputs[std::string(ns.node_name)].push_back(o.tensor_description.allocation_description.ptr);
      const auto& reduced_owned = outputs["from_owned"];
      const auto& reduced_held = outputs["from_held"];
      ASSERT_EQ(reduced_owned.size(), sizes.size());
      ASSERT_EQ(reduced_held.size(), sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i) {
        const auto& made = outputs[owned[i].node->name()];
        ASSERT_EQ(made.size(), 1u);
        EXPECT_EQ(reduced_owned[i], made[0]) << "owned input " << i;
        const auto& constant_out = outputs[held[i].node->name()];
        ASSERT_EQ(constant_out.size(), 1u);
        if (n > 1) {
          EXPECT_NE(reduced_held[i], constant_out[0]) << "held input " << i;
        }
      }
    }
  }
}

// The executor has the producers of an Allreduce's small inputs write them back to back into one
// allocation (a pack: OpDef::contiguous_inputs), and the Allreduce reduces them there: the
// outputs are the inputs, and it allocates nothing. Where an input is held by another reader too,
// or is not written by its producer (an Identity forwards its input), the Allreduce copies through
// a fusion buffer instead, and what the others read is left as it was. Sum and average, each
// case over several steps (a pack is made anew every step).
TEST(Collective, AllreduceReducesPackedInputsWhereTheyLie) {
  const int r = dist::rank(), n = dist::size();
  const std::vector<int64_t> sizes = {5, 16, 300, 1, 0, 77};
  enum class Case { kPacked, kAlsoReadElsewhere, kForwarded };
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (const Case c : {Case::kPacked, Case::kAlsoReadElsewhere, Case::kForwarded}) {
      SCOPED_TRACE(c == Case::kPacked ? "packed" : c == Case::kAlsoReadElsewhere ? "also read elsewhere" : "forwarded");
      Graph g;
      Scope s(g);
      // Input i, element k, on rank r: (r + 1) * ((k % 89) + i - 40).
      std::vector<Output> inputs;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const Output value = constant(s, rank_values(sizes[i], 89, static_cast<int>(i) - 40), Shape{sizes[i]});
        inputs.push_back(c == Case::kForwarded && i == 2 ? identity(s, value) : mul(s, value, 1.0));
      }
      std::vector<Output> fetches = allreduce(s.with_op_name("reduce"), inputs, op);
      if (c == Case::kAlsoReadElsewhere) fetches.push_back(inputs[3]);
      Session sess(g);
      for (int run = 0; run < 3; ++run) {
        RunMetadata metadata;
        RunOptions options;
        options.trace_level = TraceLevel::kFullTrace;
        const auto out = sess.run({}, fetches, {}, options, &metadata);
        const float total = static_cast<float>(n * (n + 1) / 2);  // the sum of r + 1 over the ranks
        const float scale = op == ReduceOp::kAverage ? static_cast<float>(1.0 / n) : 1.0f;
        for (size_t i = 0; i < sizes.size(); ++i) {
          ASSERT_EQ(out[i].shape(), (Shape{sizes[i]}));
          auto v = out[i].flat<float>();
          for (int64_t k = 0; k < sizes[i]; ++k) {
            const float base = static_cast<float>(static_cast<int>(k % 89) + static_cast<int>(i) - 40);
            ASSERT_EQ(v[k], total * base * scale) << "input " << i << ", element " << k << ", run " << run;
          }
        }
        if (c == Case::kAlsoReadElsewhere) {  // the other reader's value, untouched
          ASSERT_EQ(out.back().flat<float>()[0], static_cast<float>((r + 1) * (3 - 40)));
        }
        int64_t allocated_by_reduce = -1;
        for (const auto& dev : metadata.step_stats.dev_stats())
          for (const auto& ns : dev.node_stats)
            if (ns.node_name == "reduce") {
              allocated_by_reduce = 0;
              for (const auto& m : ns.memory) allocated_by_reduce += m.total_bytes;
            }
        ASSERT_GE(allocated_by_reduce, 0) << "no stats for the Allreduce";
        if (c == Case::kPacked) {
          // The outputs lie where the producers wrote them: one pack, Buffer::create_packed's layout.
          std::vector<int64_t> bytes, offsets(sizes.size());
          for (int64_t size : sizes) bytes.push_back(size * 4);
          Buffer::packed_offsets(bytes, offsets);
          const Buffer* pack = out[0].buffer()->pack();
          ASSERT_NE(pack, nullptr);
          for (size_t i = 0; i < sizes.size(); ++i) {
            EXPECT_EQ(out[i].buffer()->pack(), pack) << "output " << i;
            EXPECT_EQ(static_cast<const char*>(out[i].raw_data()) - static_cast<const char*>(out[0].raw_data()),
                      offsets[i])
                << "output " << i;
          }
          EXPECT_EQ(allocated_by_reduce, 0);
        } else if (n > 1) {
          EXPECT_GT(allocated_by_reduce, 0) << "a fusion buffer";
        }
      }
    }
  }
}

// Inputs that cannot be packed: one tensor fused twice (one place in a pack an output), and a
// fed one (no producer runs). Fed, the feed is left as it was. Summed, over several steps.
TEST(Collective, AllreduceOfOneTensorTwiceOrOfAFedOneIsExact) {
  const int r = dist::rank(), n = dist::size();
  Graph g;
  Scope s(g);
  const Output x = mul(s, constant(s, std::vector<float>{1, 2, 3}, Shape{3}), static_cast<double>(r + 1));
  const Output y = mul(s, constant(s, std::vector<float>{10, 20}, Shape{2}), static_cast<double>(r + 1));
  const std::vector<Output> out = allreduce(s, {x, y, x}, ReduceOp::kSum);
  Session sess(g);
  const float total = static_cast<float>(n * (n + 1) / 2);  // the sum of r + 1 over the ranks
  for (int run = 0; run < 3; ++run) {
    const auto v = sess.run(out);
    EXPECT_EQ(v[0].to_vector<float>(), (std::vector<float>{total, 2 * total, 3 * total})) << "run " << run;
    EXPECT_EQ(v[1].to_vector<float>(), (std::vector<float>{10 * total, 20 * total})) << "run " << run;
    EXPECT_EQ(v[2].to_vector<float>(), (std::vector<float>{total, 2 * total, 3 * total})) << "run " << run;
    const Tensor fed = Tensor::from_vector<float>({5, 7});
    const auto w = sess.run({{y, fed}}, out);
    EXPECT_EQ(w[1].to_vector<float>(), (std::vector<float>{5.0f * n, 7.0f * n})) << "run " << run;
    EXPECT_EQ(w[0].to_vector<float>(), (std::vector<float>{total, 2 * total, 3 * total})) << "run " << run;
    EXPECT_EQ(fed.to_vector<float>(), (std::vector<float>{5, 7})) << "the feed, run " << run;
  }
}

// Buffers of kAllreducePiecedBytes and more (a large input; a fusion buffer of many small ones)
// are reduced in pieces where the ranks share a host: the last piece partial, a piece boundary
// inside a fused input, inputs owned and held, sum and average.
TEST(Collective, AllreduceReducesBigBuffersInPiecesExactly) {
  const int n = dist::size();
  const int64_t large = kAllreducePiecedBytes / 4 + 5;  // float32 elements
  const int64_t small = kAllreduceDirectBytes / 4 - 3;
  const int num_small = static_cast<int>(kAllreducePiecedBytes / (small * 4)) + 1;
  ASSERT_GE(num_small * small * 4, kAllreducePiecedBytes);
  ASSERT_NE((small * 4) % kAllreducePieceBytes, 0);
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (const bool owned : {true, false}) {
      Graph g;
      Scope s(g);
      std::vector<Output> inputs;
      for (int i = 0; i <= num_small; ++i) {
        const int64_t size = i == 0 ? large : small;
        const Output value = constant(s, rank_values(size, 89, i % 7 - 40), Shape{size});
        inputs.push_back(owned ? identity(s, mul(s, value, 1.0)) : value);
      }
      const std::vector<Output> outputs = allreduce(s, inputs, op);
      Session sess(g);
      for (int run = 0; run < 2; ++run) {
        const auto out = sess.run({}, outputs);
        const float total = static_cast<float>(n * (n + 1) / 2);  // the sum of r + 1 over the ranks
        const float scale = op == ReduceOp::kAverage ? static_cast<float>(1.0 / n) : 1.0f;
        for (size_t i = 0; i < out.size(); ++i) {
          auto v = out[i].flat<float>();
          ASSERT_EQ(v.size(), static_cast<size_t>(i == 0 ? large : small));
          int64_t wrong = 0, first_wrong = -1;
          for (size_t k = 0; k < v.size(); ++k) {
            const float base = static_cast<float>(static_cast<int>(k % 89) + static_cast<int>(i) % 7 - 40);
            if (v[k] != total * base * scale && wrong++ == 0) first_wrong = static_cast<int64_t>(k);
          }
          ASSERT_EQ(wrong, 0) << (owned ? "owned" : "held") << " input " << i << ", first wrong element " << first_wrong
                              << ", run " << run;
        }
      }
    }
  }
}

// The backend's allreduce over buffers taken back to back (the inputs of a fused Allreduce that
// something else holds): lengths from none to several of the window's pieces, gaps of zeros
// between them, a rank's part spanning several inputs or lying in one; every element exact, the
// inputs untouched.
TEST(Collective, BackendAllreduceGatheredIsExactAcrossInputsAndGaps) {
  const int n = dist::size();
  const int r = dist::rank();
  CollectiveBackend& b = collective_backend();
  const auto value = [](int rank, int64_t k, int64_t i) { return static_cast<float>((i + 7 * k) % 53 - 26 + rank); };
  const std::vector<std::vector<int64_t>> layouts = {
      {5},                                        // one input
      {3, 0, 17, 1, 64},                          // an empty one among small ones
      {16, -16, 1000, -48, 7},                    // negative: a gap of that many zeros
      {(1 << 20) / 4 + 5, -3, 9, 300000},         // more than a piece in one input, then others
      std::vector<int64_t>(300, 1111),            // many inputs in every piece
  };
  for (size_t l = 0; l < layouts.size(); ++l) {
    for (const double scale : {1.0, 1.0 / n}) {
      std::vector<std::vector<float>> data;
      std::vector<AllreduceInput> inputs;
      int64_t total = 0;
      for (size_t k = 0; k < layouts[l].size(); ++k) {
        const int64_t count = std::abs(layouts[l][k]);
        total += count;
        if (layouts[l][k] < 0) {
          inputs.push_back({nullptr, count});
          continue;
        }
        std::vector<float>& d = data.emplace_back(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) d[i] = value(r, static_cast<int64_t>(k), i);
        inputs.push_back({d.data(), count});
      }
      std::vector<float> out(static_cast<size_t>(total), 99.0f);
      b.allreduce_gathered(inputs, out.data(), DType::kFloat32, scale);
      int64_t at = 0, wrong = 0, first = -1;
      for (size_t k = 0; k < layouts[l].size(); ++k) {
        const int64_t count = std::abs(layouts[l][k]);
        for (int64_t i = 0; i < count; ++i, ++at) {
          double sum = 0;
          if (layouts[l][k] >= 0)
            for (int q = 0; q < n; ++q) sum += value(q, static_cast<int64_t>(k), i);
          if (out[at] != static_cast<float>(sum * scale) && wrong++ == 0) first = at;
        }
      }
      ASSERT_EQ(wrong, 0) << "layout " << l << " scale " << scale << ": first wrong element " << first;
      size_t d = 0;
      for (size_t k = 0; k < layouts[l].size(); ++k) {
        if (layouts[l][k] < 0) continue;
        for (int64_t i = 0; i < layouts[l][k]; ++i)
          ASSERT_EQ(data[d][i], value(r, static_cast<int64_t>(k), i)) << "input " << k << " changed";
        ++d;
      }
    }
  }
}

// The timeline's args say which inputs went through the fusion buffer and which had a call each,
// by the same rule as the kernel.
TEST(Collective, TraceArgsNameTheFusedAndTheDirectInputs) {
  const int n = dist::size();
  Graph g;
  Scope s(g);
  const Output small = constant(s, std::vector<float>(4, 1.0f), Shape{4});
  Node* node = allreduce(s, {small, small, small}).front().node;
  const std::vector<int64_t> mixed = {16, kAllreduceDirectBytes, 16};
  const auto args = collective_trace_args(*node, mixed);
  ASSERT_TRUE(args.has_value());
  EXPECT_EQ(args->bytes_moved, 2 * (n - 1) * (32 + kAllreduceDirectBytes) / n);
  if (n == 1) {
    EXPECT_EQ(std::string(args->algorithm), "none (one process)");
    EXPECT_TRUE(args->fused_inputs.empty() && args->direct_inputs.empty());
    return;
  }
  // What the job's backend calls (on one host, its shared-memory allreduce).
  const std::string call(collective_backend().allreduce_algorithm());
  EXPECT_EQ(std::string(args->algorithm), call + " (fused buffer for the small inputs, one call per large input)");
  EXPECT_EQ(args->fused_inputs, (std::vector<int>{0, 2}));
  EXPECT_EQ(args->direct_inputs, (std::vector<int>{1}));
  const std::vector<int64_t> all_small = {16, 16, 16};
  EXPECT_EQ(std::string(collective_trace_args(*node, all_small)->algorithm), call + " (fused buffer)");
  const std::vector<int64_t> all_large = {kAllreduceDirectBytes, kAllreduceDirectBytes, 1 << 20};
  const auto large = collective_trace_args(*node, all_large);
  EXPECT_EQ(std::string(large->algorithm), call + " (one call per input)");
  EXPECT_EQ(large->direct_inputs, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(large->fused_inputs.empty());
  // Sizes unknown (no output descriptions): the call, without a claim about the plan.
  EXPECT_EQ(std::string(collective_trace_args(*node, std::span<const int64_t>{})->algorithm), call);
  // A profile of a job of another size (loaded elsewhere) names the MPI call: its backend is unknown.
  EXPECT_EQ(std::string(collective_trace_args("Allreduce", 1, n + 1, {})->algorithm), "MPI_Allreduce");
}

// Ranks on one host reduce through the shared-memory window unless STEPSCOPE_ALLREDUCE=mpi (the
// dist tests run both ways); across hosts, MPI_Allreduce.
TEST(Collective, RanksOnOneHostReduceThroughSharedMemory) {
  const char* choice = std::getenv("STEPSCOPE_ALLREDUCE");
  const bool forced_mpi = choice && std::string_view(choice) == "mpi";
  const bool shared = dist::size() > 1 && dist::local_size() == dist::size() && !forced_mpi;
  EXPECT_EQ(std::string(collective_backend().allreduce_algorithm()), shared ? "shared-memory allreduce" : "MPI_Allreduce");
  EXPECT_EQ(dist::describe().find("shared-memory") != std::string::npos, shared) << dist::describe();
}

// The backend's allreduce itself, whichever carries it: every dtype; lengths that leave some
// ranks' parts empty, end mid-cache-line, or span several of the window's pieces; into another
// buffer and in place; summed and scaled. Values are small integers, so each sum (and the
// average of 2 or 4 ranks) is exact in every order.
TEST(Collective, BackendAllreduceIsExactForEveryDtypeLengthAndPlace) {
  const int n = dist::size();
  const int r = dist::rank();
  CollectiveBackend& b = collective_backend();
  const auto value = [](int rank, int64_t i) { return static_cast<int>(i % 101) - 50 + 3 * rank; };
  const auto run = [&]<typename T>(T*, DType dtype) {
    for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{17}, int64_t{1000}, int64_t{(1 << 20) / 4 + 7},
                                int64_t{3 * (1 << 20) / 4 + 1}}) {
      for (const bool in_place : {true, false}) {
        for (const double scale : {1.0, 1.0 / n}) {
          if (scale != 1.0 && !std::is_floating_point_v<T>) continue;
          std::vector<T> in(static_cast<size_t>(count)), out(static_cast<size_t>(count), T{99});
          for (int64_t i = 0; i < count; ++i) in[i] = static_cast<T>(value(r, i));
          T* dst = in_place ? in.data() : out.data();
          b.allreduce(in.data(), dst, count, dtype, scale);
          int64_t wrong = 0, first = -1;
          for (int64_t i = 0; i < count; ++i) {
            double sum = 0;
            for (int q = 0; q < n; ++q) sum += value(q, i);
            if (dst[i] != static_cast<T>(sum * scale) && wrong++ == 0) first = i;
          }
          ASSERT_EQ(wrong, 0) << dtype_name(dtype) << " count " << count << (in_place ? " in place" : " into another")
                              << " scale " << scale << ": first wrong element " << first;
          if (!in_place) {
            for (int64_t i = 0; i < count; ++i) ASSERT_EQ(in[i], static_cast<T>(value(r, i))) << "the input changed";
          }
        }
      }
    }
  };
  run(static_cast<float*>(nullptr), DType::kFloat32);
  run(static_cast<double*>(nullptr), DType::kFloat64);
  run(static_cast<int32_t*>(nullptr), DType::kInt32);
  run(static_cast<int64_t*>(nullptr), DType::kInt64);
}

TEST(Collective, BroadcastReduceAndAllgather) {
  const int r = dist::rank(), n = dist::size();
  const int root = n - 1;
  Graph g;
  Scope s(g);
  Output mine = constant(s, std::vector<double>{10.0 * r, 10.0 * r + 1}, Shape{2});
  Output from_root = broadcast(s, mine, root);
  Output reduced = reduce(s.with_control_dependencies({from_root.node}), mine, 0);
  // Rank r contributes r + 1 rows [r, 100 r].
  std::vector<int32_t> rows;
  for (int i = 0; i <= r; ++i) rows.insert(rows.end(), {r, 100 * r});
  Output gathered = allgather(s.with_control_dependencies({reduced.node}), constant(s, rows, Shape{r + 1, 2}));
  EXPECT_EQ(gathered.shape(), (Shape{-1, 2}));
  auto out = Session(g).run({}, {from_root, reduced, gathered});
  EXPECT_EQ(values_of(out[0]), (std::vector<double>{10.0 * root, 10.0 * root + 1}));
  if (r == 0) {
    EXPECT_EQ(values_of(out[1]), (std::vector<double>{10.0 * n * (n - 1) / 2, 10.0 * n * (n - 1) / 2 + n}));
  } else {
    EXPECT_EQ(values_of(out[1]), (std::vector<double>{0, 0}));
  }
  std::vector<double> expected;
  for (int k = 0; k < n; ++k)
    for (int i = 0; i <= k; ++i) expected.insert(expected.end(), {1.0 * k, 100.0 * k});
  EXPECT_EQ(out[2].shape(), (Shape{n * (n + 1) / 2, 2}));
  EXPECT_EQ(values_of(out[2]), expected);
}

// The gradient rules, with each rank's loss depending on its own weights: d(sum of the ranks'
// losses)/dx as each rule defines it.
TEST(Collective, GradientsFollowTheCollectives) {
  const int r = dist::rank(), n = dist::size();
  const int root = n > 1 ? 1 : 0;
  Graph g;
  Scope s(g);
  Output x = constant(s, std::vector<double>{1, 2}, Shape{2});
  Output w = constant(s, std::vector<double>{1.0 * (r + 1), -1.0 * (r + 1)}, Shape{2});
  // Allreduce: y = sum of the ranks' x; dL/dx = sum over ranks of w.
  Output y = allreduce(s, x);
  Output dx_allreduce = gradients(s, {reduce_sum(s, mul(s, y, w))}, {x})[0];
  // Broadcast: the root's x everywhere; the root's dx is the sum of w, the others' zero.
  Scope after1 = s.with_control_dependencies({dx_allreduce.node});
  Output b = broadcast(after1, x, root);
  Output dx_broadcast = gradients(after1, {reduce_sum(after1, mul(after1, b, w))}, {x})[0];
  // Allgather of one row per rank ([1, 2] -> [n, 2]) weighted by row k = k + 1: rank r's dx is n (r + 1).
  Scope after2 = s.with_control_dependencies({dx_broadcast.node});
  Output row = reshape(after2, x, std::vector<int64_t>{1, 2});
  Output all = allgather(after2, row);
  std::vector<double> weights;
  for (int k = 0; k < n; ++k) weights.insert(weights.end(), {k + 1.0, k + 1.0});
  Output dx_allgather =
      gradients(after2, {reduce_sum(after2, mul(after2, all, constant(after2, weights, Shape{n, 2})))}, {row})[0];
  auto out = Session(g).run({}, {dx_allreduce, dx_broadcast, dx_allgather});
  const double total = n * (n + 1) / 2.0;
  EXPECT_EQ(values_of(out[0]), (std::vector<double>{total, -total}));
  EXPECT_EQ(values_of(out[1]), r == root ? (std::vector<double>{total, -total}) : (std::vector<double>{0, 0}));
  EXPECT_EQ(values_of(out[2]), (std::vector<double>{1.0 * n * (r + 1), 1.0 * n * (r + 1)}));
}

TEST(Collective, ShapeRulesNameTheNodeAndTheProblem) {
  Graph g;
  Scope s(g);
  Output f = constant(s, std::vector<float>{1, 2}, Shape{2});
  Output i = constant(s, std::vector<int32_t>{1, 2}, Shape{2});
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] {
              allreduce(s.with_op_name("mixed"), {f, i});
            }),
            "[Allreduce] mixed: inputs[1] has dtype int32, but inputs[0] has dtype float32 (one fused buffer has "
            "one dtype)");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { allreduce(s.with_op_name("avg"), i, ReduceOp::kAverage); }),
            "[Allreduce] avg: average needs a floating dtype, got int32");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { allgather(s.with_op_name("scalar"), constant(s, 1.0f)); }),
            "[Allgather] scalar: cannot gather scalars: x needs a dim 0 to concatenate along");
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { allreduce(s, std::vector<Output>{}); }),
            "[Allreduce] allreduce needs at least one tensor");
  // A root that is no rank of the job is known at run time only.
  Output bad = broadcast(s.with_op_name("bcast"), f, 64);
  EXPECT_EQ(testing::error_text<InvalidArgumentError>([&] { Session(g).run(bad); }),
            "[Broadcast] bcast: root_rank 64 is not a rank of this job (size " + std::to_string(dist::size()) + ")");
}

TEST(Collective, CostsCountTheAdditionsOfTheReduction) {
  const int n = dist::size();
  Graph g;
  Scope s(g);
  Output x = constant(s, std::vector<float>(120, 1.0f), Shape{4, 30});
  Node* sum = allreduce(s, x).node;
  Node* avg = allreduce(s, x, ReduceOp::kAverage).node;
  std::vector<Shape> shapes = {Shape{4, 30}};
  EXPECT_EQ(sum->op().flops(CostContext{*sum, shapes, shapes}), 120 * (n - 1) / n);
  EXPECT_EQ(avg->op().flops(CostContext{*avg, shapes, shapes}), 120 * (n - 1) / n + (n > 1 ? 120 : 0));
}

// Ranks that reach different collectives fail with an error naming the node, instead of
// exchanging buffers of different sizes or hanging.
TEST(Collective, RanksAtDifferentCollectivesFailClearly) {
  if (dist::size() == 1) GTEST_SKIP() << "needs two ranks or more";
  Graph g;
  Scope s(g);
  Output x = constant(s, Tensor::from_vector(std::vector<float>(dist::rank() == 0 ? 3 : 5, 1.0f)));
  Output y = allreduce(s.with_op_name("differs"), x);
  const std::string error = testing::error_text<InternalError>([&] { Session(g).run(y); });
  EXPECT_NE(error.find("[Allreduce] differs: the ranks are not at the same collective"), std::string::npos) << error;
  // Everyone failed together: the next collective works.
  Graph g2;
  Scope s2(g2);
  EXPECT_EQ(values_of(Session(g2).run(allreduce(s2, constant(s2, 1.0f)))), (std::vector<double>{1.0 * dist::size()}));
}

}  // namespace
}  // namespace stepscope
