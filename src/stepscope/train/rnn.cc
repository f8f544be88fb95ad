#include "stepscope/train/rnn.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "stepscope/ops/all_ops.h"

namespace stepscope::nn {

namespace {

Tensor filled(DType dtype, const Shape& shape, double value) {
  Tensor t(dtype, shape);
  if (dtype == DType::kFloat64) {
    for (double& v : t.flat<double>()) v = value;
  } else {
    for (float& v : t.flat<float>()) v = static_cast<float>(value);
  }
  return t;
}

}  // namespace

RNNCell::RNNCell(int64_t num_units, std::string name, uint64_t seed)
    : num_units_(num_units), name_(std::move(name)), seed_(seed) {
  if (num_units <= 0)
    throw InvalidArgumentError(name_ + ": num_units must be positive, got " + std::to_string(num_units));
}

RNNState RNNCell::zero_state(const Scope& scope, Output batch_like, CallSite site) const {
  const Scope s = scope.with_name_scope(name_ + "_zero_state");
  const Output batch = slice(s, shape(s, batch_like, DType::kInt64, site), {0}, {1}, site);
  const Output dims = concat(s, {batch, constant(s, std::vector<int64_t>{num_units_}, Shape{1}, site)}, 0, site);
  const Output zero = constant(s, filled(batch_like.dtype(), Shape{}, 0.0), site);
  const Output zeros = fill(s, dims, zero, site);
  return RNNState(static_cast<size_t>(state_parts()), zeros);
}

void RNNCell::prepare(const Scope& scope, const Output& input, const RNNState& state, CallSite site) {
  const Shape& in = input.shape();
  if (!in.known_rank() || in.rank() != 2 || in.dim(1) < 0)
    throw InvalidArgumentError(name_ + ": input " + input.name() + " must be [batch, depth] with a known depth, got " +
                               in.to_string());
  if (input.dtype() != DType::kFloat32 && input.dtype() != DType::kFloat64)
    throw InvalidArgumentError(name_ + ": input " + input.name() + " must be float32 or float64, got " +
                               std::string(dtype_name(input.dtype())));
  if (static_cast<int>(state.size()) != state_parts())
    throw InvalidArgumentError(name_ + ": the state has " + std::to_string(state.size()) + " parts, the cell takes " +
                               std::to_string(state_parts()));
  for (const Output& part : state) {
    const Shape& p = part.shape();
    if (p.known_rank() && (p.rank() != 2 || (p.dim(1) >= 0 && p.dim(1) != num_units_)))
      throw InvalidArgumentError(name_ + ": state " + part.name() + " must be [batch, " + std::to_string(num_units_) +
                                 "], got " + p.to_string());
  }
  if (input_depth_ < 0) {
    input_depth_ = in.dim(1);
    build(scope.with_name_scope(scope.name_prefix() + name_ + "/"), input_depth_, input.dtype(), site);
  } else if (in.dim(1) != input_depth_) {
    throw InvalidArgumentError(name_ + ": input " + input.name() + " has depth " + std::to_string(in.dim(1)) +
                               ", the cell was built for " + std::to_string(input_depth_));
  }
}

std::pair<Output, RNNState> RNNCell::operator()(const Scope& scope, Output input, const RNNState& state,
                                                CallSite site) {
  prepare(scope, input, state, site);
  const Scope s = scope.with_name_scope(name_);
  return step(s, project_inputs(s, input, site), state, site);
}

std::pair<Output, Output> RNNCell::split_kernel(const Scope& scope, const Variable& kernel, CallSite site) const {
  return {slice(scope, kernel.value(), {0, 0}, {input_depth_, -1}, site),
          slice(scope, kernel.value(), {input_depth_, 0}, {-1, -1}, site)};
}

Variable RNNCell::glorot_variable(const Scope& scope, const std::string& name, int64_t rows, int64_t cols, DType dtype,
                                  CallSite site) {
  const uint64_t seed = (seed_ ? seed_ : static_cast<uint64_t>(scope.graph().num_nodes()) + 1) + variables_.size();
  const double limit = std::sqrt(6.0 / static_cast<double>(rows + cols));
  const Scope init = scope.with_name_scope(scope.name_prefix() + name + "/Initializer/");
  const Output value = random_uniform(init.with_op_name("random_uniform"), {rows, cols}, -limit, limit, dtype,
                                      static_cast<int64_t>(seed), 0, site);
  variables_.push_back(make_variable(scope, name, value, true, site));
  return variables_.back();
}

Variable RNNCell::filled_variable(const Scope& scope, const std::string& name, int64_t size, double fill_value,
                                  DType dtype, CallSite site) {
  const Scope init = scope.with_name_scope(scope.name_prefix() + name + "/Initializer/");
  const Output value = constant(init.with_op_name("Const"), filled(dtype, Shape{size}, fill_value), site);
  variables_.push_back(make_variable(scope, name, value, true, site));
  return variables_.back();
}

// ----- BasicLSTMCell -----------------------------------------------------------------------

BasicLSTMCell::BasicLSTMCell(int64_t num_units, LSTMOptions options)
    : RNNCell(num_units, "basic_lstm_cell", options.seed), forget_bias_(options.forget_bias) {}

void BasicLSTMCell::build(const Scope& scope, int64_t input_depth, DType dtype, CallSite site) {
  const Variable kernel = glorot_variable(scope, "kernel", input_depth + num_units_, 4 * num_units_, dtype, site);
  filled_variable(scope, "bias", 4 * num_units_, 0.0, dtype, site);
  std::tie(w_input_, w_state_) = split_kernel(scope, kernel, site);
}

std::vector<Output> BasicLSTMCell::project_inputs(const Scope& s, Output inputs, CallSite site) {
  return {bias_add(s, matmul(s, inputs, w_input_, false, false, site), variables_[1].value(), site)};
}

std::pair<Output, RNNState> BasicLSTMCell::step(const Scope& s, const std::vector<Output>& projected,
                                                const RNNState& state, CallSite site) {
  const Output c = state[0];
  const Output h = state[1];
  const Output gates = add(s, projected[0], matmul(s, h, w_state_, false, false, site), site);
  const std::vector<Output> ijfo = split(s, gates, 4, 1, site);
  const Output &i = ijfo[0], &j = ijfo[1], &f = ijfo[2], &o = ijfo[3];
  const Output forget = forget_bias_ == 0 ? sigmoid(s, f, site) : sigmoid(s, add(s, f, forget_bias_, site), site);
  const Output new_c = add(s, mul(s, c, forget, site), mul(s, sigmoid(s, i, site), tanh(s, j, site), site), site);
  const Output new_h = mul(s, tanh(s, new_c, site), sigmoid(s, o, site), site);
  return {new_h, {new_c, new_h}};
}

// ----- GRUCell -----------------------------------------------------------------------------

GRUCell::GRUCell(int64_t num_units, uint64_t seed) : RNNCell(num_units, "gru_cell", seed) {}

void GRUCell::build(const Scope& scope, int64_t input_depth, DType dtype, CallSite site) {
  const Variable gates = glorot_variable(scope, "gates/kernel", input_depth + num_units_, 2 * num_units_, dtype, site);
  filled_variable(scope, "gates/bias", 2 * num_units_, 1.0, dtype, site);
  const Variable candidate = glorot_variable(scope, "candidate/kernel", input_depth + num_units_, num_units_, dtype, site);
  filled_variable(scope, "candidate/bias", num_units_, 0.0, dtype, site);
  std::tie(gates_input_, gates_state_) = split_kernel(scope, gates, site);
  std::tie(candidate_input_, candidate_state_) = split_kernel(scope, candidate, site);
}

std::vector<Output> GRUCell::project_inputs(const Scope& s, Output inputs, CallSite site) {
  return {bias_add(s, matmul(s, inputs, gates_input_, false, false, site), variables_[1].value(), site),
          bias_add(s, matmul(s, inputs, candidate_input_, false, false, site), variables_[3].value(), site)};
}

std::pair<Output, RNNState> GRUCell::step(const Scope& s, const std::vector<Output>& projected, const RNNState& state,
                                          CallSite site) {
  const Output h = state[0];
  const Output gates = sigmoid(s, add(s, projected[0], matmul(s, h, gates_state_, false, false, site), site), site);
  const std::vector<Output> ru = split(s, gates, 2, 1, site);
  const Output &r = ru[0], &u = ru[1];
  const Output candidate =
      tanh(s, add(s, projected[1], matmul(s, mul(s, r, h, site), candidate_state_, false, false, site), site), site);
  // u * h + (1 - u) * c, written c + u * (h - c): one op fewer.
  const Output new_h = add(s, candidate, mul(s, u, sub(s, h, candidate, site), site), site);
  return {new_h, {new_h}};
}

// ----- static_rnn --------------------------------------------------------------------------

std::pair<std::vector<Output>, RNNState> static_rnn(const Scope& scope, RNNCell& cell, const std::vector<Output>& inputs,
                                                    const RNNState& initial_state, CallSite site) {
  if (inputs.empty()) throw InvalidArgumentError("static_rnn: inputs must not be empty");
  RNNState state = initial_state.empty() ? cell.zero_state(scope, inputs.front(), site) : initial_state;
  for (const Output& x : inputs) cell.prepare(scope, x, state, site);
  const auto steps = static_cast<int64_t>(inputs.size());
  // Every step's input products at once: [T * batch, depth] x kernel rows, then split back by step.
  std::vector<std::vector<Output>> projected(inputs.size());
  if (steps == 1) {
    projected[0] = cell.project_inputs(scope.with_name_scope(cell.name()), inputs[0], site);
  } else {
    const Scope s = scope.with_name_scope(cell.name() + "_inputs");
    const int64_t depth = inputs[0].shape().dim(1);
    std::vector<Output> rows;
    for (const Output& x : inputs) rows.push_back(reshape(s, x, {1, -1, depth}, site));
    const Output all = reshape(s, concat(s, rows, 0, site), {-1, depth}, site);
    for (const Output& part : cell.project_inputs(s, all, site)) {
      const int64_t width = part.shape().dim(1);
      const std::vector<Output> by_step = split(s, reshape(s, part, {steps, -1, width}, site), steps, 0, site);
      for (int64_t t = 0; t < steps; ++t) projected[t].push_back(reshape(s, by_step[t], {-1, width}, site));
    }
  }
  std::vector<Output> outputs;
  outputs.reserve(inputs.size());
  for (size_t t = 0; t < inputs.size(); ++t) {
    auto [out, next] = cell.step(scope.with_name_scope(cell.name()), projected[t], state, site);
    outputs.push_back(out);
    state = std::move(next);
  }
  return {outputs, state};
}

}  // namespace stepscope::nn
