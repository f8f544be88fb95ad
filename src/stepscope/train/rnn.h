// Recurrent layers as TensorFlow 1.x wrote them: an RNN cell (one step: input and state in,
// output and state out) and static_rnn, which unrolls a cell over a Python-style list of time
// steps, the cell's variables shared by every step.
//
//   nn::BasicLSTMCell cell(128);
//   auto [outputs, state] = nn::static_rnn(root.with_name_scope("rnn"), cell, inputs);  // inputs: T x [B, D]
//   auto logits = nn::dense(root.with_name_scope("logits"), outputs.back(), classes);
//
// The unrolled graph is made of ordinary ops (MatMul, BiasAdd, Slice, Sigmoid, Tanh, Mul, Add),
// so every step shows up in a timeline and the gradients are the ops' own rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepscope/graph/scope.h"
#include "stepscope/train/variables.h"

namespace stepscope::nn {

// A cell's state between steps: (c, h) for an LSTM, (h) for a GRU; each [batch, num_units].
using RNNState = std::vector<Output>;

class RNNCell {
 public:
  explicit RNNCell(int64_t num_units, std::string name, uint64_t seed);
  virtual ~RNNCell() = default;
  RNNCell(const RNNCell&) = delete;
  RNNCell& operator=(const RNNCell&) = delete;

  int64_t num_units() const { return num_units_; }
  const std::string& name() const { return name_; }
  // The variables, once the first step has created them (empty before).
  const std::vector<Variable>& variables() const { return variables_; }

  // Zeros of the state's shape, the batch size taken from `batch_like` ([batch, ...]) at run time.
  RNNState zero_state(const Scope& scope, Output batch_like, CallSite site = CallSite::current()) const;
  // One step under `scope` (the variables go to "<scope>/<name>/..." on the first call; later
  // calls reuse them): returns (output, new state). input: [batch, depth] of one float dtype.
  std::pair<Output, RNNState> operator()(const Scope& scope, Output input, const RNNState& state,
                                         CallSite site = CallSite::current());

 protected:
  friend std::pair<std::vector<Output>, RNNState> static_rnn(const Scope&, RNNCell&, const std::vector<Output>&,
                                                             const RNNState&, CallSite);
  virtual int state_parts() const = 0;
  virtual void build(const Scope& scope, int64_t input_depth, DType dtype, CallSite site) = 0;
  // A step is split in two: the products of the input with the kernel (and the biases), which
  // depend on the input only, and the rest. A single call does both; static_rnn projects the
  // inputs of every step in one GEMM ([T * batch, depth] at once, as cuDNN and PyTorch do), so
  // a step multiplies only the state, and no gradient is computed for inputs that need none.
  virtual std::vector<Output> project_inputs(const Scope& scope, Output inputs, CallSite site) = 0;
  virtual std::pair<Output, RNNState> step(const Scope& scope, const std::vector<Output>& projected,
                                           const RNNState& state, CallSite site) = 0;
  // Checks input and state against the cell, and creates the variables on the first call.
  void prepare(const Scope& scope, const Output& input, const RNNState& state, CallSite site);
  // A [rows, cols] variable "<name>" initialised Glorot-uniform (TF's default for these cells),
  // or a [cols] vector filled with `fill`.
  Variable glorot_variable(const Scope& scope, const std::string& name, int64_t rows, int64_t cols, DType dtype,
                           CallSite site);
  Variable filled_variable(const Scope& scope, const std::string& name, int64_t size, double fill, DType dtype,
                           CallSite site);
  // Rows [0, depth) of a kernel (they multiply the input) and rows [depth, depth + units) (they
  // multiply the state): Slices made once, shared by every step.
  std::pair<Output, Output> split_kernel(const Scope& scope, const Variable& kernel, CallSite site) const;

  int64_t num_units_;
  std::string name_;
  uint64_t seed_;
  int64_t input_depth_ = -1;
  std::vector<Variable> variables_;
};

struct LSTMOptions {
  float forget_bias = 1.0f;  // added to the forget gate's input: remember by default
  uint64_t seed = 0;         // 0: derived from the graph's node count
};

// tf.nn.rnn_cell.BasicLSTMCell: kernel [depth + units, 4 units] and bias [4 units] (zeros), gates
// in TF's order i, j, f, o:  c' = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j),
// h' = tanh(c') * sigmoid(o). Output h'; state (c', h').
class BasicLSTMCell : public RNNCell {
 public:
  explicit BasicLSTMCell(int64_t num_units, LSTMOptions options = {});

 private:
  int state_parts() const override { return 2; }
  void build(const Scope& scope, int64_t input_depth, DType dtype, CallSite site) override;
  std::vector<Output> project_inputs(const Scope& scope, Output inputs, CallSite site) override;
  std::pair<Output, RNNState> step(const Scope& scope, const std::vector<Output>& projected, const RNNState& state,
                                   CallSite site) override;
  float forget_bias_;
  Output w_input_, w_state_;
};

// tf.nn.rnn_cell.GRUCell: gates/kernel [depth + units, 2 units], gates/bias (ones),
// candidate/kernel [depth + units, units], candidate/bias (zeros):
//   r, u = split(sigmoid([x, h] W_g + b_g)),  c = tanh([x, r * h] W_c + b_c),  h' = u * h + (1 - u) * c.
class GRUCell : public RNNCell {
 public:
  explicit GRUCell(int64_t num_units, uint64_t seed = 0);

 private:
  int state_parts() const override { return 1; }
  void build(const Scope& scope, int64_t input_depth, DType dtype, CallSite site) override;
  std::vector<Output> project_inputs(const Scope& scope, Output inputs, CallSite site) override;
  std::pair<Output, RNNState> step(const Scope& scope, const std::vector<Output>& projected, const RNNState& state,
                                   CallSite site) override;
  Output gates_input_, gates_state_, candidate_input_, candidate_state_;
};

// tf.nn.static_rnn: runs `cell` over inputs[0..T) (each [batch, depth], one batch size) from
// initial_state (zeros if empty), under `scope`. Returns the T outputs and the final state. The
// same values as calling the cell T times; the inputs' products are one GEMM (see RNNCell).
std::pair<std::vector<Output>, RNNState> static_rnn(const Scope& scope, RNNCell& cell,
                                                    const std::vector<Output>& inputs,
                                                    const RNNState& initial_state = {},
                                                    CallSite site = CallSite::current());

}  // namespace stepscope::nn
