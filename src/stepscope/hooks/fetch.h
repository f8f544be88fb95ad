// Nested fetch structures, as SessionRunArgs allows in TensorFlow (a single tensor, a list, a
// map, nested): Fetch describes what to run, FetchResult holds the values in the same shape.
// An op (Node*) in a fetch is run for its effect and yields an empty tensor.
#pragma once

#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "stepscope/core/tensor.h"
#include "stepscope/graph/node.h"

namespace stepscope {

class Fetch {
 public:
  using List = std::vector<Fetch>;
  using Map = std::map<std::string, Fetch>;

  Fetch() = default;                             // nothing
  Fetch(Output output) : value_(output) {}       // NOLINT: a tensor is a fetch
  Fetch(Node* op) : value_(op) {}                // NOLINT: an op is a fetch (run, no value)
  Fetch(List list) : value_(std::move(list)) {}  // NOLINT
  Fetch(Map map) : value_(std::move(map)) {}     // NOLINT
  static Fetch list(std::vector<Fetch> items) { return Fetch(List(std::move(items))); }
  static Fetch map(Map items) { return Fetch(std::move(items)); }

  bool empty() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_output() const { return std::holds_alternative<Output>(value_); }
  bool is_op() const { return std::holds_alternative<Node*>(value_); }
  bool is_list() const { return std::holds_alternative<List>(value_); }
  bool is_map() const { return std::holds_alternative<Map>(value_); }
  Output output() const { return std::get<Output>(value_); }
  Node* op() const { return std::get<Node*>(value_); }
  const List& as_list() const { return std::get<List>(value_); }
  const Map& as_map() const { return std::get<Map>(value_); }

  // The leaves in depth-first order (map entries by key), split into tensors and ops.
  void flatten(std::vector<Output>& outputs, std::vector<Node*>& ops) const;

 private:
  std::variant<std::monostate, Output, Node*, List, Map> value_;
};

class FetchResult {
 public:
  using List = std::vector<FetchResult>;
  using Map = std::map<std::string, FetchResult>;

  FetchResult() = default;
  explicit FetchResult(Tensor t) : value_(std::move(t)) {}
  explicit FetchResult(List l) : value_(std::move(l)) {}
  explicit FetchResult(Map m) : value_(std::move(m)) {}

  // Rebuilds the structure of `fetch` from the flat values of flatten() (tensors in order).
  static FetchResult unflatten(const Fetch& fetch, std::span<const Tensor> values);

  bool empty() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(value_); }
  bool is_list() const { return std::holds_alternative<List>(value_); }
  bool is_map() const { return std::holds_alternative<Map>(value_); }
  // Typed access; the wrong kind is an InvalidArgumentError.
  const Tensor& tensor() const;
  const FetchResult& operator[](size_t i) const;
  const FetchResult& operator[](const std::string& key) const;
  size_t size() const;

 private:
  std::variant<std::monostate, Tensor, List, Map> value_;
};

}  // namespace stepscope
