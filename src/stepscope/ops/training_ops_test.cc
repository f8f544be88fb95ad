// ApplyGradientDescent, ApplyMomentum, ApplyAdam: updated in place (variable and slots) when
// nothing but the variable holds the value, copied first when a reader of the step, a fetch or
// another step holds it, with the same bits either way; and no reader ever sees a value half
// updated.
#include "stepscope/ops/training_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/math_ops.h"
#include "stepscope/ops/reduction_ops.h"
#include "stepscope/ops/state_ops.h"
#include "stepscope/runtime/session.h"

namespace stepscope {
namespace {

constexpr int64_t kN = 1 << 16;  // 256 KiB of floats: a large buffer

std::vector<float> wave(float scale, float offset) {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = offset + scale * std::sin(0.001f * static_cast<float>(i));
  return v;
}

// One variable of kN floats and the slots of `op` ("GradientDescent", "Momentum", "Adam"),
// updated with a constant gradient.
struct Model {
  Graph g;
  std::vector<Output> variables;  // var first, then the slots
  std::vector<Node*> init;
  Node* update = nullptr;

  explicit Model(const std::string& op) {
    Scope s(g);
    auto make = [&](const char* name, std::vector<float> value) {
      Output v = variable(s.with_op_name(name), Shape{kN}, DType::kFloat32);
      init.push_back(assign(s, v, constant(s, value, Shape{kN})).node);
      variables.push_back(v);
      return v;
    };
    Output var = make("var", wave(1.0f, 0.5f));
    Output grad = constant(s, wave(0.25f, -0.125f), Shape{kN});
    Output lr = constant(s, 0.1f);
    if (op == "GradientDescent") {
      update = apply_gradient_descent(s, var, lr, grad).node;
    } else if (op == "Momentum") {
      Output accum = make("accum", wave(0.5f, 0.0f));
      update = apply_momentum(s, var, accum, lr, grad, constant(s, 0.9f)).node;
    } else {
      Output m = make("m", wave(0.125f, 0.0f));
      Output v = make("v", wave(0.0f, 0.01f));
      update = apply_adam(s, var, m, v, constant(s, 0.9f), constant(s, 0.999f), lr, constant(s, 0.9f),
                          constant(s, 0.999f), constant(s, 1e-7f), grad)
                   .node;
    }
  }
  std::vector<Tensor> values(Session& sess) { return sess.run({}, variables); }
  std::vector<int64_t> allocation_ids(Session& sess) {
    std::vector<int64_t> ids;
    for (const Tensor& t : values(sess)) ids.push_back(t.buffer()->allocation_id());
    return ids;
  }
};

const char* const kOps[] = {"GradientDescent", "Momentum", "Adam"};

TEST(ApplyOps, UpdateTheVariableAndItsSlotsInPlaceWhenNothingElseHoldsThem) {
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    Model m(op);
    Session sess(m.g, {.inter_op_threads = 2});
    sess.run({}, {}, m.init);
    const std::vector<Tensor> first = m.values(sess);
    std::vector<Tensor> before;
    for (const Tensor& t : first) before.push_back(t.deep_copy());
    std::vector<int64_t> ids;
    for (const Tensor& t : first) ids.push_back(t.buffer()->allocation_id());
    sess.run({}, {}, {m.update});  // `first` holds every value: copied, not overwritten
    for (size_t k = 0; k < first.size(); ++k) EXPECT_TRUE(tensors_equal(first[k], before[k])) << k;
    EXPECT_NE(m.allocation_ids(sess), ids);
    ids = m.allocation_ids(sess);
    for (int i = 0; i < 3; ++i) sess.run({}, {}, {m.update});
    EXPECT_EQ(m.allocation_ids(sess), ids);  // nobody held them: the same buffers
    EXPECT_FALSE(tensors_equal(m.values(sess)[0], before[0]));
  }
}

TEST(ApplyOps, InPlaceAndCopiedUpdatesGiveTheSameBits) {
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    Model m(op);
    Session in_place(m.g, {.inter_op_threads = 2}), copied(m.g, {.inter_op_threads = 2});
    in_place.run({}, {}, m.init);
    copied.run({}, {}, m.init);
    std::vector<Tensor> held;
    for (int step = 0; step < 5; ++step) {
      in_place.run({}, {}, {m.update});
      held = m.values(copied);  // holding every value forces a copy each step
      copied.run({}, {}, {m.update});
    }
    const std::vector<Tensor> a = m.values(in_place), b = m.values(copied);
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(tensors_equal(a[k], b[k])) << k;
    // And the update is the documented one (the first steps of GradientDescent, checked loosely).
    if (std::string(op) == "GradientDescent") {
      const std::vector<float> var = wave(1.0f, 0.5f), grad = wave(0.25f, -0.125f);
      for (int64_t i = 0; i < kN; i += 997) EXPECT_NEAR(a[0].flat<float>()[i], var[i] - 5 * 0.1f * grad[i], 1e-5f) << i;
    }
  }
}

TEST(ApplyOps, AReadFetchedBesideTheUpdateIsTheValueBeforeIt) {
  Model m("Momentum");
  Session sess(m.g, {.inter_op_threads = 2});
  sess.run({}, {}, m.init);
  const std::vector<Tensor> before = m.values(sess);
  std::vector<Tensor> beside = sess.run({}, m.variables, {m.update});
  for (size_t k = 0; k < before.size(); ++k) EXPECT_TRUE(tensors_equal(beside[k], before[k])) << k;
  const std::vector<Tensor> after = m.values(sess);
  for (size_t k = 0; k < before.size(); ++k) EXPECT_FALSE(tensors_equal(after[k], before[k])) << k;
}

// A reader of the variable that runs beside the update in the same step: it sums the first half
// of its input, waits until TestSignal (which runs after the update) has run, then sums the
// second half. Had the update written in place, the second half would be new values.
std::atomic<bool> g_updated{false};
std::atomic<bool> g_waited_for_update{false};

double sum(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

const OpDef& paused_sum_op() {
  static const OpDef def{
      .name = "TestPausedSum",
      .num_inputs = 1,
      .shape = [](ShapeContext& c) { c.set_output(0, DType::kFloat64, Shape{}); },
      .kernel =
          [](KernelContext& c) {
            auto v = c.input(0).flat<float>();
            double s = sum(v.first(v.size() / 2));
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (!g_updated.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            g_waited_for_update = g_updated.load();
            s += sum(v.subspan(v.size() / 2));
            c.set_output(0, Tensor::scalar<double>(s));
          },
      .doc = "a test op",
  };
  return def;
}

const OpDef& signal_op() {
  static const OpDef def{
      .name = "TestSignal",
      .num_inputs = 0,
      .shape = [](ShapeContext& c) { c.set_output(0, DType::kInt32, Shape{}); },
      .kernel =
          [](KernelContext& c) {
            g_updated = true;
            c.set_output(0, Tensor::scalar<int32_t>(1));
          },
      .doc = "a test op",
  };
  return def;
}

TEST(ApplyOps, AnOpReadingTheVariableBesideTheUpdateSeesOnlyTheOldValue) {
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    Model m(op);
    Scope s(m.g);
    Output paused = s.add_node(paused_sum_op(), {m.variables[0]}, {}, CallSite::current())->output(0);
    Node* signal = s.with_control_dependencies({m.update}).add_node(signal_op(), {}, {}, CallSite::current());
    Session sess(m.g, {.inter_op_threads = 4});
    sess.run({}, {}, m.init);
    for (int rep = 0; rep < 3; ++rep) {
      const Tensor before = m.values(sess)[0].deep_copy();
      g_updated = false;
      g_waited_for_update = false;
      const double got = sess.run({}, {paused}, {signal})[0].scalar_value<double>();
      EXPECT_TRUE(g_waited_for_update.load());  // the update did run while the reader was reading
      auto v = before.flat<float>();
      EXPECT_EQ(got, sum(v.first(v.size() / 2)) + sum(v.subspan(v.size() / 2)));
      EXPECT_FALSE(tensors_equal(m.values(sess)[0], before));
    }
  }
}

TEST(ApplyOps, ReadsInConcurrentStepsNeverSeeAHalfUpdatedValue) {
  Graph g;
  Scope s(g);
  constexpr int64_t kBig = 1 << 20;
  Output var = variable(s.with_op_name("var"), Shape{kBig}, DType::kFloat32);
  Node* init = assign(s, var, fill(s, {kBig}, 0.0f)).node;
  Node* update = apply_gradient_descent(s, var, constant(s, 1.0f), fill(s, {kBig}, -1.0f)).node;  // var += 1
  Output lo = neg(s, reduce_max(s, neg(s, var))), hi = reduce_max(s, var);
  Session sess(g, {.inter_op_threads = 2});
  sess.run({}, {}, {init});
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 100; ++i) sess.run({}, {}, {update});
    done = true;
  });
  int torn = 0, reads = 0;
  float last = 0;
  while (!done.load() || reads < 10) {
    // A fetched read, held while the writer goes on...
    const Tensor t = sess.run(var);
    auto v = t.flat<float>();
    const float first = v[0];
    for (float x : v) torn += x != first;
    EXPECT_GE(first, last);
    last = first;
    // ... and ops consuming the read in another step.
    auto range = sess.run({}, {lo, hi});
    torn += range[0].scalar_value<float>() != range[1].scalar_value<float>();
    for (float x : v) torn += x != first;  // still as fetched
    ++reads;
  }
  writer.join();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(sess.run(lo).scalar_value<float>(), 100.0f);
  EXPECT_EQ(sess.run(hi).scalar_value<float>(), 100.0f);
}

}  // namespace
}  // namespace stepscope
