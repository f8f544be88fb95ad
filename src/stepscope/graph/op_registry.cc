#include "stepscope/graph/op_registry.h"

#include <algorithm>

namespace stepscope {

OpDef& OpRegistry::add(OpDef def) {
  if (ops_.count(def.name)) throw InternalError("op type '" + def.name + "' registered twice");
  auto owned = std::make_unique<OpDef>(std::move(def));
  OpDef& ref = *owned;
  ops_.emplace(ref.name, std::move(owned));
  return ref;
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(std::string(name));
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::get(std::string_view name) const {
  const OpDef* def = find(name);
  if (!def) throw NotFoundError("unknown op type '" + std::string(name) + "'");
  return *def;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : ops_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace stepscope
