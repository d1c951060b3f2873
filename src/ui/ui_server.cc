#include "ui/ui_server.h"

#include <string>
#include <vector>

#include "ui/embedded_files.h"

namespace spanhouse::ui {

namespace {

constexpr std::string_view kAssetPrefix = "/ui/";

// No inline script or style, nothing from another origin: the UI's files are
// all it runs, so a span attribute that smuggles markup cannot run script
// (the UI also only ever sets text, never HTML, from data).
constexpr std::string_view kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

struct Catalog {
  std::vector<std::string> paths;
  std::vector<std::string> etags;
  std::vector<Asset> assets;
  const Asset* index = nullptr;

  Catalog() {
    paths.reserve(kEmbeddedFileCount);
    etags.reserve(kEmbeddedFileCount);
    for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
      const EmbeddedFile& f = kEmbeddedFiles[i];
      paths.push_back(std::string(kAssetPrefix) + f.name);
      etags.push_back("\"" + std::string(f.sha256).substr(0, 32) + "\"");
    }
    for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
      const EmbeddedFile& f = kEmbeddedFiles[i];
      assets.push_back({paths[i], ContentTypeFor(f.name), etags[i],
                        std::string_view(reinterpret_cast<const char*>(f.data), f.size)});
    }
    for (const Asset& a : assets) {
      if (a.path == "/ui/index.html") index = &a;
    }
  }
};

const Catalog& TheCatalog() {
  static const Catalog catalog;
  return catalog;
}

bool HasPrefixAndMore(std::string_view path, std::string_view prefix) {
  return path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix;
}

// Paths the page script draws (app.js's router has the same list).
bool IsPagePath(std::string_view path) {
  return path == "/" || path == "/search" || path == "/dependencies" ||
         HasPrefixAndMore(path, "/service/") || HasPrefixAndMore(path, "/trace/");
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// True when the If-None-Match list names `etag` (or is "*"); weak tags match
// too (RFC 9110, 13.1.2: the weak comparison).
bool NoneMatchHits(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

}  // namespace

std::string_view ContentTypeFor(std::string_view name) {
  if (EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (EndsWith(name, ".js") || EndsWith(name, ".mjs")) return "text/javascript; charset=utf-8";
  if (EndsWith(name, ".css")) return "text/css; charset=utf-8";
  if (EndsWith(name, ".svg")) return "image/svg+xml";
  if (EndsWith(name, ".json")) return "application/json";
  if (EndsWith(name, ".png")) return "image/png";
  if (EndsWith(name, ".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

const Asset* FindAsset(std::string_view path) {
  const Catalog& c = TheCatalog();
  if (IsPagePath(path)) return c.index;
  if (!HasPrefixAndMore(path, kAssetPrefix)) return nullptr;
  for (const Asset& a : c.assets) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

bool IsUiPath(std::string_view path) {
  return FindAsset(path) != nullptr;
}

bool ServeUi(const net::HttpRequest& req, net::HttpResponse& resp) {
  const Asset* asset = FindAsset(req.path());
  if (asset == nullptr) return false;
  resp.headers.clear();
  if (req.method != "GET" && req.method != "HEAD") {
    resp.status = 405;
    resp.content_type = "text/plain";
    resp.headers.emplace_back("Allow", "GET, HEAD");
    resp.body = "method not allowed: use GET\n";
    return true;
  }
  resp.content_type = std::string(asset->content_type);
  resp.headers.emplace_back("ETag", std::string(asset->etag));
  resp.headers.emplace_back("Cache-Control", "no-cache");
  resp.headers.emplace_back("X-Content-Type-Options", "nosniff");
  resp.headers.emplace_back("Referrer-Policy", "no-referrer");
  resp.headers.emplace_back("Content-Security-Policy", std::string(kContentSecurityPolicy));
  if (!req.if_none_match.empty() && NoneMatchHits(req.if_none_match, asset->etag)) {
    resp.status = 304;
    resp.body.clear();
    return true;
  }
  resp.status = 200;
  resp.body.assign(asset->bytes);
  return true;
}

}  // namespace spanhouse::ui
