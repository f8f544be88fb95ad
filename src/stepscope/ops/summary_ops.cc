#include "stepscope/ops/summary_ops.h"

#include <unordered_set>

#include "stepscope/base/proto_wire.h"
#include "stepscope/graph/kernel_context.h"
#include "stepscope/ops/array_ops.h"
#include "stepscope/ops/registry.h"

namespace stepscope {

namespace wire = proto_wire;

// ----- The Summary message -----------------------------------------------------------------

namespace {

std::string serialize_value(const Summary::Value& v) {
  std::string out;
  if (!v.tag.empty()) wire::put_bytes_field(out, 1, v.tag);
  if (v.simple_value) wire::put_float_field(out, 2, *v.simple_value);
  out += v.other_fields;
  if (v.metadata) wire::put_bytes_field(out, 9, *v.metadata);
  return out;
}

bool parse_value(std::string_view bytes, Summary::Value& v, std::string& error) {
  wire::Reader r(bytes);
  uint32_t field;
  wire::WireType type;
  std::string_view b;
  float f;
  while (!r.done()) {
    const size_t start = r.position();
    bool ok = r.next_field(field, type);
    if (ok && field == 1) {
      if ((ok = r.read_length_delimited(type, b))) v.tag = b;
    } else if (ok && field == 2) {
      if ((ok = r.read_float(type, f))) v.simple_value = f;
    } else if (ok && field == 9) {
      if ((ok = r.read_length_delimited(type, b))) v.metadata = std::string(b);
    } else if (ok) {
      ok = r.skip(start, type, &v.other_fields);
    }
    if (!ok) {
      error = std::string("Summary.Value: ") + r.error();
      return false;
    }
  }
  return true;
}

}  // namespace

std::string Summary::serialize() const {
  std::string out;
  for (const Value& v : value) wire::put_bytes_field(out, 1, serialize_value(v));
  return out;
}

std::optional<Summary> Summary::parse(std::string_view bytes, std::string* error) {
  Summary s;
  std::string why;
  wire::Reader r(bytes);
  uint32_t field;
  wire::WireType type;
  while (!r.done()) {
    const size_t start = r.position();
    if (!r.next_field(field, type)) {
      why = std::string("Summary: ") + r.error();
      break;
    }
    if (field == 1) {
      std::string_view b;
      if (!r.read_length_delimited(type, b)) {
        why = std::string("Summary: ") + r.error();
        break;
      }
      if (!parse_value(b, s.value.emplace_back(), why)) break;
    } else if (!r.skip(start, type)) {  // unknown top-level fields are dropped
      why = std::string("Summary: ") + r.error();
      break;
    }
  }
  if (!why.empty()) {
    if (error) *error = why;
    return std::nullopt;
  }
  return s;
}

namespace {

// ----- ScalarSummary -----------------------------------------------------------------------

bool is_summary_number(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt32 || d == DType::kInt64;
}

// TensorFlow's " (tag 'x')" suffix, when the tags hold exactly one tag.
std::string single_tag(const Tensor* tags) {
  if (!tags || tags->num_elements() != 1) return "";
  return " (tag '" + tags->data<std::string>()[0] + "')";
}

void scalar_summary_shape(ShapeContext& c) {
  c.expect_dtype(0, DType::kString);
  if (!is_summary_number(c.input_dtype(1)))
    c.fail("values must be float32, float64, int32 or int64, got " + std::string(dtype_name(c.input_dtype(1))));
  const Shape& tags = c.input_shape(0);
  const Shape& values = c.input_shape(1);
  if (!tags.compatible_with(values))
    c.fail("tags and values not the same shape: " + tags.to_string() + " != " + values.to_string() +
           single_tag(c.input_constant(0)));
  c.set_output(0, DType::kString, Shape{});
}

void scalar_summary_kernel(KernelContext& c) {
  const Tensor& tags = c.input(0);
  const Tensor& values = c.input(1);
  if (tags.shape() != values.shape())
    c.fail("tags and values not the same shape: " + tags.shape().to_string() + " != " + values.shape().to_string() +
           single_tag(&tags));
  const std::string* t = tags.data<std::string>();
  std::string out;
  dispatch_numeric(values.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* v = values.data<T>();
    for (int64_t i = 0; i < values.num_elements(); ++i) {
      std::string value;
      wire::put_bytes_field(value, 1, t[i]);
      wire::put_float_field(value, 2, static_cast<float>(v[i]));
      wire::put_bytes_field(out, 1, value);
    }
  });
  c.allocate_output(0, DType::kString, Shape{}).data<std::string>()[0] = std::move(out);
}

// ----- MergeSummary ------------------------------------------------------------------------

void merge_summary_shape(ShapeContext& c) {
  if (c.num_inputs() < 1) c.fail("MergeSummary needs at least one input");
  for (int i = 0; i < c.num_inputs(); ++i) c.expect_dtype(i, DType::kString);
  c.set_output(0, DType::kString, Shape{});
}

void merge_summary_kernel(KernelContext& c) {
  // Serialized messages concatenate into their merge, and a Summary is one repeated field: the
  // output is the inputs' bytes back to back, once they have been checked.
  std::string out;
  std::unordered_set<std::string> tags;
  for (int i = 0; i < c.num_inputs(); ++i) {
    for (const std::string& bytes : c.input(i).flat<std::string>()) {
      std::optional<Summary> s = Summary::parse(bytes);
      if (!s) c.fail("Could not parse one of the summary inputs");
      for (const Summary::Value& v : s->value)
        if (!v.tag.empty() && !tags.insert(v.tag).second) c.fail("Duplicate tag " + v.tag + " found in summary inputs");
      out += bytes;
    }
  }
  c.allocate_output(0, DType::kString, Shape{}).data<std::string>()[0] = std::move(out);
}

// TensorFlow's _clean_tag: anything but letters, digits and "-_./" becomes '_'; no leading '/'.
std::string clean_tag(std::string_view name) {
  std::string s(name);
  for (char& ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                    ch == '_' || ch == '/' || ch == '.';
    if (!ok) ch = '_';
  }
  const size_t first = s.find_first_not_of('/');
  return first == std::string::npos ? std::string() : s.substr(first);
}

void add_to_collections(Graph& g, Node* node, const std::vector<std::string>& collections) {
  for (const std::string& key : collections) g.add_to_collection(key, node);
}

}  // namespace

// ----- Builders ----------------------------------------------------------------------------

Output scalar(const Scope& scope, std::string_view name, Output value, const std::vector<std::string>& collections,
              CallSite site) {
  const std::string cleaned = clean_tag(name);
  if (cleaned.empty()) throw InvalidArgumentError("[ScalarSummary] summary name '" + std::string(name) + "' is empty");
  // As tf.summary.scalar: a name scope made unique gives the tag; the op is named after it.
  Scope inner = scope.with_name_scope(cleaned);
  std::string tag = inner.name_prefix();
  tag.pop_back();
  Output tags = constant(inner.with_op_name("tags"), Tensor::scalar<std::string>(tag), site);
  // Scope::add_node would make the name unique against the name scope just reserved, so the
  // node goes to the graph directly, with what the scope would have given it.
  NodeSpec spec;
  spec.name = tag;
  spec.op = &op_def("ScalarSummary");
  spec.inputs = {tags, value};
  spec.control_inputs = scope.control_dependencies();
  spec.device = scope.device();
  spec.location = SourceLocation::from(site);
  Node* node = scope.graph().add_node(std::move(spec));
  add_to_collections(scope.graph(), node, collections);
  return node->output(0);
}

Output merge_summary(const Scope& scope, const std::vector<Output>& inputs, const std::vector<std::string>& collections,
                     CallSite site) {
  if (inputs.empty()) throw InvalidArgumentError("[MergeSummary] merge_summary needs at least one input");
  Node* node = scope.add_node(op_def("MergeSummary"), inputs, {}, site);
  add_to_collections(scope.graph(), node, collections);
  return node->output(0);
}

Output merge_all_summaries(Graph& graph, const std::string& key, CallSite site) {
  std::vector<Output> inputs;
  for (Node* n : graph.collection(key)) inputs.push_back(n->output(0));
  if (inputs.empty()) return Output{};
  return merge_summary(Scope(graph), inputs, {}, site);
}

// ----- Registration ------------------------------------------------------------------------

void register_summary_ops(OpRegistry& registry) {
  registry.add({.name = "ScalarSummary",
                .num_inputs = 2,
                .shape = scalar_summary_shape,
                .kernel = scalar_summary_kernel,
                .not_differentiable = true,
                .doc = "Inputs (tags: string, values: float32/float64/int32/int64 of the same shape). A string "
                       "scalar: a serialized Summary with one simple_value per element."});
  registry.add({.name = "MergeSummary",
                .num_inputs = -1,
                .shape = merge_summary_shape,
                .kernel = merge_summary_kernel,
                .not_differentiable = true,
                .doc = "Inputs (serialized Summary string tensors...). One Summary with every value, in order; "
                       "a repeated non-empty tag is an error."});
}

}  // namespace stepscope
