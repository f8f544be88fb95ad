#include "stepscope/hooks/fetch.h"

namespace stepscope {

void Fetch::flatten(std::vector<Output>& outputs, std::vector<Node*>& ops) const {
  if (is_output())
    outputs.push_back(output());
  else if (is_op())
    ops.push_back(op());
  else if (is_list())
    for (const Fetch& f : as_list()) f.flatten(outputs, ops);
  else if (is_map())
    for (const auto& [key, f] : as_map()) f.flatten(outputs, ops);
}

namespace {
FetchResult unflatten_at(const Fetch& fetch, std::span<const Tensor> values, size_t& next) {
  if (fetch.is_output()) {
    if (next >= values.size()) throw InternalError("fetch result has fewer values than its fetches");
    return FetchResult(values[next++]);
  }
  if (fetch.is_op()) return FetchResult(Tensor());
  if (fetch.is_list()) {
    FetchResult::List out;
    for (const Fetch& f : fetch.as_list()) out.push_back(unflatten_at(f, values, next));
    return FetchResult(std::move(out));
  }
  if (fetch.is_map()) {
    FetchResult::Map out;
    for (const auto& [key, f] : fetch.as_map()) out.emplace(key, unflatten_at(f, values, next));
    return FetchResult(std::move(out));
  }
  return FetchResult();
}
}  // namespace

FetchResult FetchResult::unflatten(const Fetch& fetch, std::span<const Tensor> values) {
  size_t next = 0;
  return unflatten_at(fetch, values, next);
}

const Tensor& FetchResult::tensor() const {
  if (!is_tensor()) throw InvalidArgumentError("fetch result is not a single tensor");
  return std::get<Tensor>(value_);
}

const FetchResult& FetchResult::operator[](size_t i) const {
  if (!is_list()) throw InvalidArgumentError("fetch result is not a list");
  const auto& l = std::get<List>(value_);
  if (i >= l.size())
    throw InvalidArgumentError("fetch result index " + std::to_string(i) + " out of range (size " +
                               std::to_string(l.size()) + ")");
  return l[i];
}

const FetchResult& FetchResult::operator[](const std::string& key) const {
  if (!is_map()) throw InvalidArgumentError("fetch result is not a map");
  const auto& m = std::get<Map>(value_);
  auto it = m.find(key);
  if (it == m.end()) throw InvalidArgumentError("fetch result has no key '" + key + "'");
  return it->second;
}

size_t FetchResult::size() const {
  if (is_list()) return std::get<List>(value_).size();
  if (is_map()) return std::get<Map>(value_).size();
  return is_tensor() ? 1 : 0;
}

}  // namespace stepscope
