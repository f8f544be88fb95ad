// The node label of traces, TensorFlow's timeline_label: "name = Op(in0, in1:1, ^ctl)". The
// one place that writes it and the one place that reads it back.
//
// Readers of saved traces parse labels because a file has no graph; whoever has the graph takes
// names, ops and edges from it instead (the graph is authoritative; a label is only text).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stepscope {

// One input as a label writes it: "node" (output 0), "node:k" (output k), "^node" (control).
struct NodeLabelInput {
  std::string_view node;
  int32_t output = 0;
  bool control = false;
};
// An input read back from a label, with its text as written ("^node", "node:k").
struct ParsedNodeLabelInput : NodeLabelInput {
  std::string_view text;
};

std::string format_node_label(std::string_view name, std::string_view op, std::span<const NodeLabelInput> inputs);
// The same label appended to `out` (many labels in one buffer: no allocation a label).
void append_node_label(std::string& out, std::string_view name, std::string_view op,
                       std::span<const NodeLabelInput> inputs);

struct ParsedNodeLabel {
  bool valid = false;  // false: the label is not "name = Op(...)"; the fields below are empty
  std::string_view name;
  std::string_view op;
  std::string_view inputs;  // the text between the parentheses; walk it with next_node_label_input
};

// The split is at the first " = " followed by an op name and '(' (an op name has no space,
// parenthesis or comma; it may carry a namespace such as "Addons>Foo"), and the inputs run to
// the last ')'. So node names may contain " = " and parentheses, and so may input names; only a
// name containing " = Op(" itself is ambiguous (TensorFlow's names contain neither).
ParsedNodeLabel parse_node_label(std::string_view label);

// Takes the next input off the front of `inputs` (ParsedNodeLabel::inputs): false when there
// is none left. Inputs are separated by ',' with spaces around ignored; empty items are
// skipped. "node:k" with k all digits is output k of node; any other text is a node name.
bool next_node_label_input(std::string_view& inputs, ParsedNodeLabelInput& input);

}  // namespace stepscope
