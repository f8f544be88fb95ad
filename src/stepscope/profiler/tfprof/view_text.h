// A tfprof view's text: its legend and a line a shown node, each line indented two spaces a
// level. A deep graph's text is mostly that indentation (a chain of 10^4 nodes has ~1 MB of
// lines and ~100 MB of spaces in front of them), which grows with the square of the depth. So a
// view whose text goes nowhere (output none, pprof or timeline) keeps its lines and their
// indentation apart, and the whole text is written the first time someone reads it: the view
// itself stays linear in the graph. A view printed to stdout or a file writes it at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace stepscope::tfprof {

class ViewText {
 public:
  enum class Indentation { kWritten, kDeferred };

  ViewText();
  explicit ViewText(Indentation indentation);
  explicit ViewText(std::string whole);  // a text already written whole

  // Writing (one thread, before the text is read): the lines go into lines(), and indent(n)
  // before a line gives it n spaces.
  std::string& lines();
  Indentation indentation() const;
  void indent(size_t width);
  // Appends another text (its lines and their indentation) after this one's. A deferred text's
  // are moved in, not copied: `other` (and any copy of it) reads empty after.
  void append(ViewText&& other);

  // The whole text: written on the first call (from any number of threads), then kept. Copies
  // of a ViewText share it; a moved-from one reads empty.
  const std::string& str() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace stepscope::tfprof
