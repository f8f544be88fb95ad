#include "stepscope/profiler/tfprof/view_text.h"

#include <mutex>
#include <vector>

#include "stepscope/base/huge_pages.h"

namespace stepscope::tfprof {

struct ViewText::State {
  Indentation indentation = Indentation::kWritten;
  // Deferred indentation: `width` spaces go before lines[at]; in order of `at`.
  struct Indent {
    size_t at;
    size_t width;
  };
  // The text in order: a deferred text appended to another is moved in as a part of its own,
  // not copied (a big view's second half, written on a thread beside, was 12% of the view).
  // Writing goes on in the last part.
  struct Part {
    std::string lines;
    std::vector<Indent> indents;
  };
  std::vector<Part> parts = std::vector<Part>(1);
  size_t indent_bytes = 0;
  std::once_flag written;
  std::string whole;
};

ViewText::ViewText() : ViewText(Indentation::kWritten) {}

ViewText::ViewText(Indentation indentation) : state_(std::make_shared<State>()) { state_->indentation = indentation; }

ViewText::ViewText(std::string whole) : ViewText(Indentation::kWritten) { state_->parts[0].lines = std::move(whole); }

std::string& ViewText::lines() { return state_->parts.back().lines; }

ViewText::Indentation ViewText::indentation() const { return state_->indentation; }

void ViewText::indent(size_t width) {
  State& s = *state_;
  if (width == 0) return;
  State::Part& part = s.parts.back();
  if (s.indentation == Indentation::kWritten) {
    part.lines.append(width, ' ');
    return;
  }
  if (!part.indents.empty() && part.indents.back().at == part.lines.size())
    part.indents.back().width += width;
  else
    part.indents.push_back({part.lines.size(), width});
  s.indent_bytes += width;
}

void ViewText::append(ViewText&& other) {
  State& s = *state_;
  State& o = *other.state_;
  // A text read already has its lines in `whole` (never empty then: it has indentation or parts).
  if (!o.whole.empty() || s.indentation == Indentation::kWritten) {
    s.parts.back().lines += other.str();
    return;
  }
  for (State::Part& part : o.parts) s.parts.push_back(std::move(part));
  s.indent_bytes += o.indent_bytes;
  other.state_.reset();  // moved from: reads empty
}

const std::string& ViewText::str() const {
  static const std::string kMovedFrom;
  if (!state_) return kMovedFrom;
  State& s = *state_;
  // parts and indents are not changed once the text is read, so every reader takes the same
  // branch.
  if (s.parts.size() == 1 && s.parts[0].indents.empty()) return s.parts[0].lines;
  std::call_once(s.written, [&s] {
    size_t bytes = s.indent_bytes;
    for (const State::Part& part : s.parts) bytes += part.lines.size();
    reserve_huge(s.whole, bytes);
    for (State::Part& part : s.parts) {
      size_t from = 0;
      for (const State::Indent& i : part.indents) {
        s.whole.append(part.lines, from, i.at - from);
        s.whole.append(i.width, ' ');
        from = i.at;
      }
      s.whole.append(part.lines, from);
      std::string().swap(part.lines);  // read only here from now on
    }
  });
  return s.whole;
}

}  // namespace stepscope::tfprof
