#include "stepscope/graph/source_location.h"

namespace stepscope {

int32_t SourceLocationTable::intern(const SourceLocation& location) {
  const Key key{location.file, location.line, location.function};
  if (last_ >= 0) {
    const SourceLocation& last = locations_[last_];
    if (Key{last.file, last.line, last.function} == key) return last_;
  }
  if (auto it = index_.find(key); it != index_.end()) return last_ = it->second;
  const SourceLocation& kept = locations_.emplace_back(location);
  last_ = static_cast<int32_t>(locations_.size() - 1);
  index_.emplace(Key{kept.file, kept.line, kept.function}, last_);
  return last_;
}

}  // namespace stepscope
