// The built-in web UI, served on the query listener beside the API: the pages
// (/, /search, /dependencies, /service/<name>, /trace/<id>) all answer
// index.html, whose script reads the path and draws the page from /api; the
// script, styles and icon are under /ui/. Every file is in the binary
// (embedded_files.h), so nothing is fetched from elsewhere.
#pragma once

#include <string_view>

#include "net/http_server.h"

namespace spanhouse::ui {

struct Asset {
  std::string_view path;  // where it is served: "/ui/app.js"
  std::string_view content_type;
  std::string_view etag;  // quoted: "\"<first 32 hex digits of the SHA-256>\""
  std::string_view bytes;
};

// The asset served at `path` ("/ui/app.js"; a page's path gives index.html),
// or null.
const Asset* FindAsset(std::string_view path);

// True for the paths ServeUi answers. They carry no data (the same files in
// every build of spanhouse), so the query listener's token guard lets them
// through (server/listener_security.cc) and the UI asks for the token
// itself; everything under /api stays guarded.
bool IsUiPath(std::string_view path);

// Answers a request for a UI path and returns true; returns false, leaving
// `resp` alone, for any other path. GET and HEAD; an If-None-Match that
// names the file's ETag gets 304. Files are revalidated on every use
// (Cache-Control: no-cache), so a new build's UI shows at once.
bool ServeUi(const net::HttpRequest& req, net::HttpResponse& resp);

// By file name: text/html, text/javascript, text/css, image/svg+xml, ...
std::string_view ContentTypeFor(std::string_view name);

}  // namespace spanhouse::ui
