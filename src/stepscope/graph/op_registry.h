// The table of op types. Families register explicitly (register_math_ops(registry), ...), never
// through static initialisers, so a static library needs no whole-archive linking.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stepscope/graph/op_def.h"

namespace stepscope {

class OpRegistry {
 public:
  // Adds an op; a second op of the same name is an InternalError.
  OpDef& add(OpDef def);
  // The op named `name`, or NotFoundError("unknown op type 'name'").
  const OpDef& get(std::string_view name) const;
  const OpDef* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::unordered_map<std::string, std::unique_ptr<OpDef>> ops_;
};

}  // namespace stepscope
