#include "stepscope/graph/node_label.h"

namespace stepscope {

std::string format_node_label(std::string_view name, std::string_view op, std::span<const NodeLabelInput> inputs) {
  std::string label;
  label.reserve(name.size() + op.size() + 5 + inputs.size() * 16);
  append_node_label(label, name, op, inputs);
  return label;
}

void append_node_label(std::string& label, std::string_view name, std::string_view op,
                       std::span<const NodeLabelInput> inputs) {
  label.append(name).append(" = ").append(op).push_back('(');
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) label += ", ";
    if (inputs[i].control) label += '^';
    label += inputs[i].node;
    if (!inputs[i].control && inputs[i].output != 0) label.append(":").append(std::to_string(inputs[i].output));
  }
  label += ')';
}

namespace {

bool is_op_char(char c) { return c != ' ' && c != '\t' && c != '(' && c != ')' && c != ','; }

}  // namespace

ParsedNodeLabel parse_node_label(std::string_view label) {
  const size_t close = label.rfind(')');
  if (close == std::string_view::npos) return {};
  for (size_t eq = label.find(" = "); eq != std::string_view::npos && eq < close; eq = label.find(" = ", eq + 1)) {
    const size_t op_begin = eq + 3;
    size_t open = op_begin;
    while (open < close && is_op_char(label[open])) ++open;
    if (open == op_begin || open >= close || label[open] != '(') continue;
    return {.valid = true,
            .name = label.substr(0, eq),
            .op = label.substr(op_begin, open - op_begin),
            .inputs = label.substr(open + 1, close - open - 1)};
  }
  return {};
}

bool next_node_label_input(std::string_view& inputs, ParsedNodeLabelInput& input) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  while (!inputs.empty()) {
    const size_t comma = inputs.find(',');
    std::string_view item = trim(inputs.substr(0, comma));
    inputs = comma == std::string_view::npos ? std::string_view() : inputs.substr(comma + 1);
    input = {};
    input.text = item;
    if (!item.empty() && item.front() == '^') {
      input.control = true;
      item = trim(item.substr(1));
    }
    if (item.empty()) continue;
    input.node = item;
    const size_t colon = item.rfind(':');
    if (colon != std::string_view::npos && colon + 1 < item.size() && colon + 11 > item.size()) {
      int64_t output = 0;
      bool digits = true;
      for (size_t c = colon + 1; c < item.size() && digits; ++c) {
        digits = item[c] >= '0' && item[c] <= '9';
        output = output * 10 + (item[c] - '0');
      }
      if (digits && output <= INT32_MAX) {
        input.node = item.substr(0, colon);
        input.output = static_cast<int32_t>(output);
      }
    }
    return true;
  }
  return false;
}

}  // namespace stepscope
