// The scope and graph views (tfprof_scope.cc, tfprof_graph.cc).
#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

#include "stepscope/base/bulk_arena.h"
#include "stepscope/base/huge_pages.h"
#include "stepscope/base/thread_beside.h"
#include "stepscope/profiler/tfprof/internal/show.h"
#include "stepscope/profiler/tfprof/internal/views.h"
#include "stepscope/profiler/tfprof/node_name_index.h"

namespace stepscope::tfprof {
namespace {

// From how many shown lines a view's protos and text are made on two threads (~0.5 µs a line,
// against ~10 µs to wake a ThreadBeside).
constexpr size_t kLinesWorthAThread = 2000;

// Per-query state of a tree view, indexed like ViewTree::entries.
struct TreeQuery {
  const ViewTree& tree;
  const ProfileModel& model;
  const std::vector<NodeStats>& stats;
  const ViewOptions& o;
  std::string_view synthetic_op_type;
  // The totals of the entries with a slot (ViewTree::Entry::inner); a leaf's are made when
  // asked (numbers_of). A shown entry's proto is made last (format).
  std::vector<GraphNodeStats> inner_numbers;
  std::vector<std::pair<int64_t, int32_t>> keyed;  // sort_shown's: children by their order's total
  std::vector<char> account;
  // The kept, then shown, children of the entries with a slot (a leaf has none): children_of.
  std::vector<std::vector<int32_t>> inner_children;
  // Each shown entry's indentation, and their sum and count: the text is written at the end, in
  // display order, once every total is known (a chain's indentation grows with its depth).
  std::vector<int32_t> indents;
  size_t indent_bytes = 0, shown_count = 0;
  std::vector<int32_t> lines;  // a shown entry's: its own line and its shown descendants'
  std::vector<char> visited;   // graph view: each node is visited once per pass

  TreeQuery(const ViewTree& t, const ProfileModel& m, const std::vector<NodeStats>& s, const ViewOptions& opts,
            std::string_view synthetic)
      : tree(t),
        model(m),
        stats(s),
        o(opts),
        synthetic_op_type(synthetic),
        inner_numbers(sized_huge<GraphNodeStats>(static_cast<size_t>(t.inner_count))),
        account(t.entries.size(), 0),
        inner_children(sized_huge<std::vector<int32_t>>(static_cast<size_t>(t.inner_count))),
        indents(t.entries.size(), 0),
        lines(t.entries.size(), 0),
        visited(t.entries.size(), 0) {}

  // The indentation a text holds as spaces in its lines (none where it is deferred).
  size_t written_indent_bytes(const ViewText& text) const {
    return text.indentation() == ViewText::Indentation::kWritten ? indent_bytes : 0;
  }

  const ModelNode* model_node(int32_t e) const {
    const int32_t n = tree.entries[e].node;
    return n >= 0 ? &model.nodes[n] : nullptr;
  }

  // An entry's kept or shown children (none for a leaf); filled only where the entry has a slot.
  const std::vector<int32_t>& children_of(int32_t e) const {
    static const std::vector<int32_t> kNone;
    const int32_t slot = tree.entries[e].inner;
    return slot >= 0 ? inner_children[slot] : kNone;
  }
  std::vector<int32_t>& children_to_fill(int32_t e) { return inner_children[tree.entries[e].inner]; }

  // An entry's numbers: its slot's, or, for a leaf, its node's own statistics and the same
  // totals (a kept leaf is accounted).
  GraphNodeStats numbers_of(int32_t e) const {
    const ViewTree::Entry& entry = tree.entries[e];
    return entry.inner >= 0 ? inner_numbers[entry.inner] : leaf_numbers(entry.node, model, stats);
  }
  void aggregate_child(GraphNodeStats& into, int32_t c) const {
    if (const int32_t slot = tree.entries[c].inner; slot >= 0)
      aggregate_totals(into, inner_numbers[slot]);
    else
      aggregate_totals(into, numbers_of(c));
  }

  // ReAccount: re-reads the node's statistics, then matches its op types.
  bool reaccount(int32_t e) {
    const ViewTree::Entry& entry = tree.entries[e];
    if (entry.inner >= 0)  // the name and shapes come in finish()
      init_graph_node_stats(inner_numbers[entry.inner], entry.node, model, stats);
    if (o.account.is_all()) return true;
    if (const ModelNode* n = model_node(e)) {
      for (std::string_view type : n->op_types)
        if (o.account.matches(type)) return true;
      return false;
    }
    return o.account.matches(synthetic_op_type);
  }

  bool should_show(int32_t e, int depth) const {
    if (e == tree.root) return true;
    return passes_floors(numbers_of(e), o, depth) && passes_names(tree.entries[e].name, o);
  }

  bool should_trim(int32_t e) const { return !o.trim.empty() && o.trim.matches(tree.entries[e].name); }

  // Accounting of the scope view: a node stays when it or a descendant is accounted; its totals
  // are its own statistics plus its staying children's totals. Children first, over an explicit
  // stack: a name is as deep as its scopes, and a profile file's may have tens of thousands.
  std::vector<int32_t> account_scope(const std::vector<int32_t>& roots) {
    std::vector<int32_t> kept;
    std::vector<std::pair<int32_t, size_t>> stack;  // an entry with children, and its next child
    for (int32_t r : roots) {
      if (tree.entries[r].inner < 0) {  // a leaf: kept when accounted
        account[r] = reaccount(r);
        if (account[r]) kept.push_back(r);
        continue;
      }
      children_to_fill(r).clear();  // filled in place: keep() reads it there
      stack.emplace_back(r, 0);
      while (!stack.empty()) {
        auto& [e, next] = stack.back();
        const std::vector<int32_t>& children = tree.entries[e].children;
        if (next < children.size()) {
          const int32_t c = children[next++];
          if (tree.entries[c].inner >= 0) {
            children_to_fill(c).clear();
            stack.emplace_back(c, 0);  // `e` and `next` are not used past here
          } else if ((account[c] = reaccount(c))) {
            children_to_fill(e).push_back(c);
          }
          continue;
        }
        const int32_t done = e;
        stack.pop_back();
        account[done] = reaccount(done);
        if (!account[done] && children_of(done).empty()) continue;
        keep(done);
        (stack.empty() ? kept : children_to_fill(stack.back().first)).push_back(done);
      }
    }
    return kept;
  }

  // Accounting of the graph view: an unaccounted node passes its accounted inputs up. A node's
  // children are its inputs, so the depth is the graph's: a loop over an explicit stack, not
  // recursion (a chain of 100,000 ops overflowed the thread's stack).
  std::vector<int32_t> account_graph(const std::vector<int32_t>& roots) {
    struct Frame {
      int32_t e;
      size_t next_child = 0;
      std::vector<int32_t> kept_children;
    };
    std::vector<int32_t> kept;
    std::vector<Frame> stack;
    auto enter = [&](int32_t e) {
      if (visited[e]) return;
      visited[e] = 1;
      stack.push_back(Frame{e, 0, {}});
    };
    for (int32_t r : roots) {
      enter(r);
      while (!stack.empty()) {
        const std::vector<int32_t>& children = tree.entries[stack.back().e].children;
        if (stack.back().next_child < children.size()) {
          enter(children[stack.back().next_child++]);
          continue;
        }
        Frame done = std::move(stack.back());
        stack.pop_back();
        std::vector<int32_t>& parent_kept = stack.empty() ? kept : stack.back().kept_children;
        account[done.e] = reaccount(done.e);
        if (account[done.e]) {
          if (tree.entries[done.e].inner >= 0) children_to_fill(done.e) = std::move(done.kept_children);
          keep(done.e);
          parent_kept.push_back(done.e);
        } else {
          parent_kept.insert(parent_kept.end(), done.kept_children.begin(), done.kept_children.end());
        }
      }
    }
    return kept;
  }

  // A kept node's totals: its own statistics and its kept children's (children_of(e)) totals
  // (a leaf's are its own: numbers_of).
  void keep(int32_t e) {
    const int32_t slot = tree.entries[e].inner;
    if (slot < 0) return;
    GraphNodeStats& n = inner_numbers[slot];
    reset_totals(n);
    add_self_to_totals(n);
    for (int32_t c : children_of(e)) aggregate_child(n, c);
  }

  // The first nodes matching start_name_regexes on each branch, in depth-first order (an
  // explicit stack: the graph view's kept tree is as deep as the graph).
  std::vector<int32_t> search_root(const std::vector<int32_t>& roots, bool once) {
    std::vector<int32_t> found;
    std::vector<int32_t> stack(roots.rbegin(), roots.rend());
    while (!stack.empty()) {
      const int32_t e = stack.back();
      stack.pop_back();
      if (once) {
        if (visited[e]) continue;
        visited[e] = 1;
      }
      if (o.start.matches(tree.entries[e].name)) {
        found.push_back(e);
        continue;
      }
      const std::vector<int32_t>& children = children_of(e);
      stack.insert(stack.end(), children.rbegin(), children.rend());
    }
    return found;
  }

  // PrintScope / PrintGraph: which nodes show, indented 2 spaces per shown ancestor. The shown
  // ones among `root` (at depth 1) and its descendants (a hidden node's shown descendants in
  // its place) are appended to `shown`, which every level shares: a level past a hidden node
  // has its shown children there already, and a shown node takes its own off into its slot's
  // children (children_of). A loop over an explicit stack: the graph view is as deep as the
  // graph (and max_depth).
  void print(int32_t root, bool once, std::vector<int32_t>& shown) {
    struct Level {
      const std::vector<int32_t>* entries;
      size_t next;
      int depth, last_indent;
      int32_t e = -1;  // the entry whose shown descendants are being found
      bool show = false;
      size_t first_child = 0;
    };
    const std::vector<int32_t> top{root};
    std::vector<Level> stack{{&top, 0, 1, 0}};
    while (!stack.empty()) {
      Level& level = stack.back();
      if (level.e >= 0) {
        keep_shown(level.e, level.show, level.last_indent, level.first_child, shown);
        level.e = -1;
      }
      if (level.next == level.entries->size()) {
        stack.pop_back();
        continue;
      }
      const int32_t e = (*level.entries)[level.next++];
      if (once) {
        if (visited[e]) continue;
        visited[e] = 1;
      }
      level.e = e;
      level.show = should_show(e, level.depth);
      level.first_child = shown.size();
      if (!should_trim(e) && level.depth <= o.max_depth) {
        const Level below{&children_of(e), 0, level.depth + 1, level.show ? level.last_indent + 2 : level.last_indent};
        stack.push_back(below);  // `level` is not used past here
      }
    }
  }
  // After print has found e's shown descendants (shown[first_child...]): a shown e takes them
  // as its children, sorted, and stands in their place.
  void keep_shown(int32_t e, bool show, int last_indent, size_t first_child, std::vector<int32_t>& shown) {
    if (!show) return;  // its shown descendants stay in its place
    indents[e] = last_indent;
    indent_bytes += static_cast<size_t>(last_indent);
    lines[e] = 1;
    if (const int32_t slot = tree.entries[e].inner; slot >= 0) {  // a leaf has no shown descendants
      std::vector<int32_t>& children = inner_children[slot];
      children.assign(shown.begin() + static_cast<ptrdiff_t>(first_child), shown.end());
      shown.resize(first_child);
      sort_shown(children);
      if (o.account_displayed_op_only) {
        GraphNodeStats& n = inner_numbers[slot];
        reset_totals(n);
        add_self_to_totals(n);
        for (int32_t c : children) aggregate_child(n, c);
      }
      for (int32_t c : children) lines[e] += lines[c];
    }
    ++shown_count;
    shown.push_back(e);
  }

  // Shown children in the view's order (sort_by_order's), the total each sorts by made once: a
  // leaf's numbers are made when asked.
  void sort_shown(std::vector<int32_t>& children) {
    if (children.size() < 2) return;
    const auto name_of = [&](int32_t c) -> std::string_view { return tree.entries[c].name; };
    const bool by_name = order_is_by_name<GraphNodeProto>(o.order_by);
    if (by_name) {
      std::stable_sort(children.begin(), children.end(),
                       [&](int32_t a, int32_t b) { return sorts_before(name_of(a), 0, name_of(b), 0, true); });
      return;
    }
    keyed.clear();
    for (int32_t c : children) keyed.emplace_back(order_total(numbers_of(c), o.order_by), c);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      return sorts_before(name_of(a.second), a.first, name_of(b.second), b.first, false);
    });
    for (size_t i = 0; i < children.size(); ++i) children[i] = keyed[i].second;
  }

  // A shown entry's proto in its place in the result: its name and shapes filled in there (the
  // numbers are final), then its line.
  void finish(int32_t e, GraphNodeProto& p, ViewText& text) const {
    const ViewTree::Entry& entry = tree.entries[e];
    init_graph_node_details(p, entry.name, entry.node, model);
    text.indent(static_cast<size_t>(indents[e]));
    append_graph_node(text.lines(), p, account[e] != 0, model_node(e), synthetic_op_type, o);
    text.lines() += '\n';
  }

  // Shown children [first, last) of e and what they head, into out.children (made already),
  // in display order: each one's line, then what it heads. Each entry is shown once (print's
  // `once`): its proto is made in its place in the result. A loop over an explicit stack, as
  // deep as the shown tree.
  void format_children(int32_t e, size_t first, size_t last, ViewText& text, GraphNodeProto& out,
                       std::vector<int32_t>& displayed) {
    struct Level {
      int32_t e;
      size_t next, last;
      GraphNodeProto* out;
    };
    std::vector<Level> stack{{e, first, last, &out}};
    while (!stack.empty()) {
      Level& level = stack.back();
      if (level.next == level.last) {
        stack.pop_back();
        continue;
      }
      const size_t i = level.next++;
      const int32_t c = children_of(level.e)[i];
      if (tree.entries[c].node >= 0) displayed.push_back(tree.entries[c].node);
      GraphNodeProto& child = level.out->children[i];
      static_cast<GraphNodeStats&>(child) = numbers_of(c);
      finish(c, child, text);
      const size_t grandchildren = children_of(c).size();
      child.children.resize(grandchildren);  // not resized again: the stack points into it
      if (grandchildren > 0) stack.push_back({c, 0, grandchildren, &child});  // `level` is not used past here
    }
  }

  // The root's shown children and what they head: on a big view, the later ones (half the
  // lines) on a second thread, into a text and a list of their own, joined after. The scope view
  // of 10^5 nodes takes 0.78x the time; at 10^6 on a VM whose fresh memory costs its host's
  // faults too, no gain (BENCHMARKS.md, issue 16, sixteenth session).
  void format_top(ViewText& text, GraphNodeProto& root_proto, std::vector<int32_t>& displayed, size_t line_bytes) {
    BulkArena arena = arena_for_protos(shown_count);
    const BulkArena::Use use(arena);
    const std::vector<int32_t>& top = children_of(tree.root);
    root_proto.children.resize(top.size());
    size_t split = top.size(), first_lines = 0;
    if (shown_count >= kLinesWorthAThread && top.size() >= 2 && hardware_cores() > 1) {
      split = 0;
      while (split + 1 < top.size() && first_lines + lines[top[split]] <= shown_count / 2)
        first_lines += static_cast<size_t>(lines[top[split++]]);
      if (split == 0) first_lines = static_cast<size_t>(lines[top[split++]]);
    }
    ViewText other_text(text.indentation());
    std::vector<int32_t> other_displayed;
    std::exception_ptr other_failed;
    ThreadBeside other;  // declared after what it writes: its destructor waits for it
    if (split < top.size()) {
      try {
        other = ThreadBeside([&, split] {
          try {
            const BulkArena::Use use(arena);
            const size_t other_lines = shown_count - 1 - first_lines;
            reserve_huge(other_text.lines(),
                         other_lines * line_bytes + written_indent_bytes(text) * other_lines / shown_count);
            other_displayed.reserve(other_lines);
            format_children(tree.root, split, top.size(), other_text, root_proto, other_displayed);
          } catch (...) {
            other_failed = std::current_exception();
          }
        });
      } catch (const std::system_error&) {  // no thread to be had: all of it here
        split = top.size();
      }
    }
    format_children(tree.root, 0, split, text, root_proto, displayed);
    if (!other.started()) return;
    other.join();
    if (other_failed) std::rethrow_exception(other_failed);
    text.append(std::move(other_text));
    displayed.insert(displayed.end(), other_displayed.begin(), other_displayed.end());
  }

  GraphViewResult run(bool graph_view) {
    const int32_t root = tree.root;
    GraphNodeStats& root_numbers = inner_numbers[tree.entries[root].inner];
    init_graph_node_stats(root_numbers, -1, model, stats);
    reset_totals(root_numbers);
    children_to_fill(root).clear();
    std::vector<int32_t> roots =
        graph_view ? account_graph(tree.entries[root].children) : account_scope(tree.entries[root].children);
    for (int32_t e : roots) aggregate_child(root_numbers, e);
    if (!o.start.is_all()) {
      std::fill(visited.begin(), visited.end(), 0);
      roots = search_root(roots, graph_view);
    }
    std::fill(visited.begin(), visited.end(), 0);
    children_to_fill(root) = roots;
    std::vector<int32_t> shown;
    print(root, graph_view, shown);

    GraphViewResult result;
    // Indentation written only where the text is printed (view_text.h).
    const bool printed = o.output.type == "stdout" || o.output.type == "file";
    result.text = ViewText(printed ? ViewText::Indentation::kWritten : ViewText::Indentation::kDeferred);
    result.text.lines() = graph_legend(o);
    static_cast<GraphNodeStats&>(result.root) = root_numbers;
    const size_t legend_bytes = result.text.lines().size();
    finish(root, result.root, result.text);
    // Room for every line: the root's line with some more for a longer name, each. Pages of the
    // reserve that are never written cost no memory; a big text (a deep graph's indentation
    // grows with the square of its depth) is written into huge pages.
    const size_t root_line = result.text.lines().size() - legend_bytes;
    reserve_huge(result.text.lines(),
                 legend_bytes + written_indent_bytes(result.text) + shown_count * (root_line + 64));
    result.displayed.reserve(shown_count);
    format_top(result.text, result.root, result.displayed, root_line + 64);
    return result;
  }
};

// The scope tree's hash of a name: folded over its components, so that each scope's hash is its
// parent's extended by its last component (a top-level one extends kNoScopeHash). Inline, a
// word at a time: a name is hashed a component at a time, and a call to std::hash a component
// cost the scope view 10% at 10^5 nodes.
constexpr uint64_t kNoScopeHash = 0x9e3779b97f4a7c15ull;
inline uint64_t fold_product(uint64_t a, uint64_t b) {
  const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}
inline uint64_t extend_scope_hash(uint64_t h, std::string_view component) {
  h ^= component.size() * 0xa0761d6478bd642full;
  size_t at = 0;
  for (; at + 8 <= component.size(); at += 8) {
    uint64_t word;
    std::memcpy(&word, component.data() + at, 8);
    h = fold_product(h ^ word, 0xe7037ed1a0b428dbull);
  }
  uint64_t tail = 0;
  if (at < component.size()) std::memcpy(&tail, component.data() + at, component.size() - at);
  return fold_product(h ^ tail ^ 0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull);
}
uint64_t scope_hash(std::string_view name) {
  uint64_t h = kNoScopeHash;
  for (std::string_view rest = name;;) {
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return extend_scope_hash(h, rest);
    h = extend_scope_hash(h, rest.substr(0, slash));
    rest.remove_prefix(slash + 1);
  }
}

// Gives the root and each entry with children its slot (Entry::inner).
void number_inner_entries(ViewTree& tree) {
  for (size_t e = 0; e < tree.entries.size(); ++e) {
    ViewTree::Entry& entry = tree.entries[e];
    if (!entry.children.empty() || static_cast<int32_t>(e) == tree.root) entry.inner = tree.inner_count++;
  }
}

}  // namespace

ViewTree build_scope_tree(const ProfileModel& model) {
  // Every node's name and every scope above it ("a/b" of "a/b/c"), the entries made as they are
  // found, each named by a view into the first node name it is found in (a scope's name is a
  // prefix of its nodes'), and found again through a NodeNameIndex over those views: no name
  // is copied.
  ViewTree tree;
  std::vector<ViewTree::Entry>& entries = tree.entries;
  reserve_huge(entries, model.nodes.size() + model.nodes.size() / 4 + 1);
  // An entry is found by its parent and its last component, under a hash folded over its
  // components (scope_hash): a name's scopes are then found in time linear in the name, where
  // hashing and comparing each whole prefix was quadratic (a name 100,000 scopes deep took
  // seconds). Each entry's parent and hash are kept while the tree is built.
  std::vector<int32_t> parent_of;
  std::vector<uint64_t> hash_of;
  parent_of.reserve(entries.capacity());
  hash_of.reserve(entries.capacity());
  const auto component_of = [&](int32_t e) {
    const std::string_view name = entries[e].name;
    const size_t slash = name.rfind('/');
    return slash == std::string_view::npos ? name : name.substr(slash + 1);
  };
  const auto rehash = [&](int32_t e) { return hash_of[e]; };
  NodeNameIndex by_name;
  by_name.reserve_by(entries.capacity(), rehash);
  std::vector<int32_t> roots;
  // The scopes of the previous name (where each ends in it, its entry and its hash): neighbours
  // in the graph mostly share their scopes, which are then known without a lookup.
  struct Scope {
    size_t end;
    int32_t entry;
    uint64_t hash;
  };
  std::vector<Scope> previous_scopes;
  std::string_view previous;
  // The hashes of the next nodes' names, their slots asked for ahead (see
  // NodeNameIndex::prefetch): a node's own name is always looked up, and is new in most graphs.
  constexpr size_t kAhead = 8;
  std::array<uint64_t, kAhead> ahead{};
  const auto hash_ahead = [&](size_t i) {
    if (i >= model.nodes.size()) return;
    ahead[i % kAhead] = scope_hash(model.nodes[i].name);
    by_name.prefetch(ahead[i % kAhead]);
  };
  for (size_t i = 0; i < kAhead; ++i) hash_ahead(i);
  for (size_t i = 0; i < model.nodes.size(); ++i) {
    const std::string_view name = model.nodes[i].name;
    const uint64_t name_hash = ahead[i % kAhead];
    hash_ahead(i + kAhead);
    int32_t parent = -1;
    uint64_t parent_hash = kNoScopeHash;
    size_t begin = 0, shared = 0;
    for (; shared < previous_scopes.size(); ++shared) {
      const size_t end = previous_scopes[shared].end;
      if (end >= name.size() || name[end] != '/' ||
          name.substr(begin, end - begin) != previous.substr(begin, end - begin))
        break;
      parent = previous_scopes[shared].entry;
      parent_hash = previous_scopes[shared].hash;
      begin = end + 1;
    }
    previous_scopes.resize(shared);
    previous = name;
    for (;;) {
      const size_t slash = name.find('/', begin);
      const size_t end = slash == std::string_view::npos ? name.size() : slash;
      const std::string_view component = name.substr(begin, end - begin);
      const uint64_t h = slash == std::string_view::npos ? name_hash : extend_scope_hash(parent_hash, component);
      const auto next = static_cast<int32_t>(entries.size());
      const auto is_it = [&](int32_t e) { return parent_of[e] == parent && component_of(e) == component; };
      const int32_t e = by_name.find_or_insert_if(h, next, is_it, rehash);
      if (e == next) {
        entries.push_back({name.substr(0, end), -1, -1, {}});
        parent_of.push_back(parent);
        hash_of.push_back(h);
        (parent >= 0 ? entries[parent].children : roots).push_back(e);
      }
      if (slash == std::string_view::npos) {
        if (entries[e].node < 0) entries[e].node = static_cast<int32_t>(i);  // the first node of a name
        break;
      }
      previous_scopes.push_back({end, e, h});
      parent = e;
      parent_hash = h;
      begin = slash + 1;
    }
  }
  // Children in name order: siblings share their parent's name, so their last components
  // decide (and make keys that differ in their first characters, for sort_by_name).
  for (ViewTree::Entry& entry : entries) sort_by_name(entry.children, component_of);
  sort_by_name(roots, component_of);
  entries.push_back({kTFProfRoot, -1, -1, std::move(roots)});
  tree.root = static_cast<int32_t>(entries.size() - 1);
  number_inner_entries(tree);
  return tree;
}

ViewTree build_graph_tree(const ProfileModel& model) {
  ViewTree tree;
  const size_t n = model.nodes.size();
  tree.entries.resize(n);
  std::vector<char> is_input(n, 0);
  for (size_t i = 0; i < n; ++i) {
    tree.entries[i].name = model.nodes[i].name;
    tree.entries[i].node = static_cast<int32_t>(i);
    auto& children = tree.entries[i].children;
    const auto inputs = model.inputs_of(model.nodes[i]);
    children.reserve(inputs.size());
    for (const ModelInput& in : inputs) {
      children.push_back(in.node);
      is_input[in.node] = 1;
    }
  }
  std::vector<int32_t> roots;
  for (size_t i = 0; i < n; ++i)
    if (!is_input[i]) roots.push_back(static_cast<int32_t>(i));
  sort_by_name(roots, [&](int32_t i) -> std::string_view { return model.nodes[i].name; });
  tree.entries.push_back({kTFProfRoot, -1, -1, std::move(roots)});
  tree.root = static_cast<int32_t>(n);
  number_inner_entries(tree);
  return tree;
}

GraphViewResult show_scope(const ViewTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                           const ViewOptions& options) {
  return TreeQuery(tree, model, stats, options, kTFScopeParent).run(false);
}

GraphViewResult show_graph(const ViewTree& tree, const ProfileModel& model, const std::vector<NodeStats>& stats,
                           const ViewOptions& options) {
  return TreeQuery(tree, model, stats, options, kTFGraphParent).run(true);
}

}  // namespace stepscope::tfprof
