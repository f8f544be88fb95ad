// The files of `stepscope serve`'s pages (src/stepscope/tools/web/: index.html, app.js, app.css),
// compiled into the program at build time (cmake/embed_web_assets.cmake), so the server needs no
// share directory and fetches nothing at run time.
#pragma once

#include <string_view>

namespace stepscope {

struct WebAsset {
  std::string_view name;  // "app.js"
  std::string_view content_type;
  std::string_view body;
};

// The asset called `name`, or null.
const WebAsset* find_web_asset(std::string_view name);

}  // namespace stepscope
