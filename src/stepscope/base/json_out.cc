#include "stepscope/base/json_out.h"

namespace stepscope::json_out {

void append_pretty(std::string& out, std::string_view compact, int indent) {
  out.reserve(out.size() + compact.size() * 2);
  int depth = 0;
  auto newline = [&] {
    out.push_back('\n');
    out.append(static_cast<size_t>(depth * indent), ' ');
  };
  for (size_t i = 0; i < compact.size(); ++i) {
    const char c = compact[i];
    switch (c) {
      case '"': {  // copy the string through its closing quote
        size_t j = i + 1;
        while (j < compact.size() && compact[j] != '"') j += compact[j] == '\\' ? 2 : 1;
        out.append(compact.substr(i, j + 1 - i));
        i = j;
        break;
      }
      case '{':
      case '[': {
        const char close = c == '{' ? '}' : ']';
        if (i + 1 < compact.size() && compact[i + 1] == close) {  // empty: "{}" / "[]" as Python writes them
          out.push_back(c);
          out.push_back(close);
          ++i;
          break;
        }
        out.push_back(c);
        ++depth;
        newline();
        break;
      }
      case '}':
      case ']':
        --depth;
        newline();
        out.push_back(c);
        break;
      case ',':
        out.push_back(',');
        newline();
        break;
      case ':':
        out.append(": ");
        break;
      default:
        out.push_back(c);
    }
  }
}

}  // namespace stepscope::json_out
