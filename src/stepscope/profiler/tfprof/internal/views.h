// The four tfprof views over a ProfileModel (tfprof_scope.cc, tfprof_graph.cc, tfprof_op.cc,
// tfprof_code.cc). A view's structure is built once per model structure; each query then
// accounts, filters, sorts and formats it for one step. Internal to the Profiler.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "stepscope/profiler/tfprof/profile_model.h"
#include "stepscope/profiler/tfprof/protos.h"
#include "stepscope/profiler/tfprof/view_options.h"
#include "stepscope/profiler/tfprof/view_text.h"

namespace stepscope::tfprof {

struct GraphViewResult {
  GraphNodeProto root;
  ViewText text;                   // legend + node lines (what follows tfprof's "Profile:\n")
  std::vector<int32_t> displayed;  // model nodes displayed, in display order
};

struct MultiViewResult {
  MultiGraphNodeProto root;
  ViewText text;
  std::vector<int32_t> displayed;  // model nodes aggregated by the displayed rows
};

// A tree over the model: entry `node` is a model node index or -1 for a synthetic node. Names
// are views into the model's node names (a scope's name is a prefix of them) or kTFProfRoot:
// the tree is valid while the model's structure is (the Profiler makes it again when
// structure_version changes).
struct ViewTree {
  struct Entry {
    std::string_view name;
    int32_t node = -1;
    // Its slot in a query's table of totals, -1 for a leaf: a leaf's totals are its node's own
    // numbers, made when asked (a million leaves' 168-byte copies were a quarter of the scope
    // view's fresh memory). The root and every entry with children have one.
    int32_t inner = -1;
    std::vector<int32_t> children;
  };
  std::vector<Entry> entries;
  int32_t root = -1;
  int32_t inner_count = 0;  // entries with a slot
};

// Name scopes: "a/b/c" is a child of "a/b" (a synthetic "_kTFScopeParent" node when no node has
// that name); children and the root's children in name order.
ViewTree build_scope_tree(const ProfileModel& model);
// Dataflow: a node's children are its inputs (data, then control); the root's children are
// the nodes that are no node's input, in name order.
ViewTree build_graph_tree(const ProfileModel& model);

// Op types, each with its nodes in name order; the code view's tree of call sites.
struct OpGroups {
  std::vector<std::string> op_types;        // sorted
  std::vector<std::vector<int32_t>> nodes;  // per op type, by name
};
OpGroups build_op_groups(const ProfileModel& model);

struct CodeTree {
  struct Entry {
    std::string name;            // "file.cc:42:function" (+ " (gradient)"): one stack frame
    std::vector<int32_t> nodes;  // model nodes whose stack ends there, by name
    std::vector<int32_t> children;
  };
  std::vector<Entry> entries;  // entries[0] is the root
  int64_t unaccounted_gradients = 0;
};
// Each node's stack (ModelNode::stack, outermost frame first) is a path of "basename:line:function"
// entries from the root, the node at its end; a node without a stack is a child of the root named
// by its source location. A gradient node ("gradients/<forward>_grad/...") goes at the end of its
// forward node's path, every entry of it suffixed " (gradient)" (TFCode::Build).
CodeTree build_code_tree(const ProfileModel& model);
// TensorFlow's GetTraceString: "basename:line:function", the function's bare name ("int
// ns::f(int)" -> "f") cut to 17 characters and "..." when it has 20 or more; "??" for the file
// when the frame has none (code built without debug info).
std::string code_trace_name(const SourceLocation& location);

GraphViewResult show_scope(const ViewTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                           const ViewOptions& options);
GraphViewResult show_graph(const ViewTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                           const ViewOptions& options);
MultiViewResult show_op(const OpGroups& groups, const ProfileModel& model, const std::vector<NodeStats>& stats,
                        const ViewOptions& options);
MultiViewResult show_code(const CodeTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                          const ViewOptions& options, std::ostream& log);

}  // namespace stepscope::tfprof
