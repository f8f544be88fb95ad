#include "stepscope/profiler/tfprof/view_text.h"

#include <mutex>
#include <vector>

#include "stepscope/base/huge_pages.h"

namespace stepscope::tfprof {

struct ViewText::State {
  Indentation indentation = Indentation::kWritten;
  std::string lines;
  // Deferred indentation: `width` spaces go before lines[at]; in order of `at`.
  struct Indent {
    size_t at;
    size_t width;
  };
  std::vector<Indent> indents;
  size_t indent_bytes = 0;
  std::once_flag written;
  std::string whole;
};

ViewText::ViewText() : ViewText(Indentation::kWritten) {}

ViewText::ViewText(Indentation indentation) : state_(std::make_shared<State>()) { state_->indentation = indentation; }

ViewText::ViewText(std::string whole) : ViewText(Indentation::kWritten) { state_->lines = std::move(whole); }

std::string& ViewText::lines() { return state_->lines; }

ViewText::Indentation ViewText::indentation() const { return state_->indentation; }

void ViewText::indent(size_t width) {
  State& s = *state_;
  if (width == 0) return;
  if (s.indentation == Indentation::kWritten) {
    s.lines.append(width, ' ');
    return;
  }
  if (!s.indents.empty() && s.indents.back().at == s.lines.size())
    s.indents.back().width += width;
  else
    s.indents.push_back({s.lines.size(), width});
  s.indent_bytes += width;
}

void ViewText::append(ViewText&& other) {
  State& s = *state_;
  State& o = *other.state_;
  // A text read already has its lines in `whole` (never empty then: it has indentation).
  if (!o.whole.empty() || (s.indentation == Indentation::kWritten && !o.indents.empty())) {
    s.lines += other.str();
    return;
  }
  const size_t shift = s.lines.size();
  s.indents.reserve(s.indents.size() + o.indents.size());
  for (const State::Indent& i : o.indents) s.indents.push_back({i.at + shift, i.width});
  s.indent_bytes += o.indent_bytes;
  s.lines += o.lines;
}

const std::string& ViewText::str() const {
  static const std::string kMovedFrom;
  if (!state_) return kMovedFrom;
  State& s = *state_;
  // indents is not written once the text is read, so every reader takes the same branch.
  if (s.indents.empty()) return s.lines;
  std::call_once(s.written, [&s] {
    reserve_huge(s.whole, s.lines.size() + s.indent_bytes);
    size_t from = 0;
    for (const State::Indent& i : s.indents) {
      s.whole.append(s.lines, from, i.at - from);
      s.whole.append(i.width, ' ');
      from = i.at;
    }
    s.whole.append(s.lines, from);
    std::string().swap(s.lines);  // read only here from now on
  });
  return s.whole;
}

}  // namespace stepscope::tfprof
