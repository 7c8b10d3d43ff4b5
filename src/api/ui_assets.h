// The web dashboard's static files (ui/src and the chart library from ui/node_modules), built into
// weftd by cmake/embed_ui.cmake so that /ui/ needs nothing from disk or the network at run time.
#pragma once

#include <string_view>
#include <vector>

namespace weft::api {

struct UiAsset {
  std::string_view path;          // under /ui/, e.g. "app.js"; "index.html" is the page itself
  std::string_view content_type;  // e.g. "text/javascript; charset=utf-8"
  std::string_view body;          // the file's bytes
};

// Every file, in the order the build listed them.
const std::vector<UiAsset>& UiAssets();

}  // namespace weft::api
