// Tests for the built-in web UI's server (ui/ui_server.h): the embedded files
// are the ones in src/ui/assets byte for byte, pages answer index.html, the
// headers (type, ETag, CSP) and conditional GETs, and that the UI names no
// file it lacks and nothing outside spanhouse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "net/http_server.h"
#include "ui/ui_server.h"

namespace spanhouse::ui {
namespace {

const std::filesystem::path kAssetDir =
    std::filesystem::path(SPANHOUSE_TESTDATA) / ".." / ".." / "src" / "ui" / "assets";

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

net::HttpRequest Req(std::string target, std::string method = "GET") {
  net::HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

std::string Header(const net::HttpResponse& resp, std::string_view name) {
  for (const auto& [k, v] : resp.headers) {
    if (k == name) return v;
  }
  return "";
}

std::set<std::string> AssetNames() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kAssetDir)) {
    if (e.is_regular_file()) names.insert(e.path().lexically_relative(kAssetDir).generic_string());
  }
  return names;
}

TEST(UiServer, EveryAssetIsEmbeddedAsItIsOnDisk) {
  const std::set<std::string> names = AssetNames();
  ASSERT_TRUE(names.count("index.html")) << kAssetDir;
  ASSERT_TRUE(names.count("app.js"));
  for (const std::string& name : names) {
    const Asset* a = FindAsset("/ui/" + name);
    ASSERT_NE(a, nullptr) << name << " is in src/ui/assets but not in the binary";
    EXPECT_EQ(a->bytes, ReadFile(kAssetDir / name)) << name << ": rebuild embeds the new bytes";
    EXPECT_EQ(a->etag.size(), 34u) << a->etag;
    EXPECT_EQ(a->etag.front(), '"');
  }
}

TEST(UiServer, ContentTypes) {
  EXPECT_EQ(ContentTypeFor("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("app.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("favicon.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("blob"), "application/octet-stream");
  EXPECT_EQ(FindAsset("/ui/app.css")->content_type, "text/css; charset=utf-8");
}

TEST(UiServer, PagesAnswerIndexHtml) {
  const Asset* index = FindAsset("/ui/index.html");
  ASSERT_NE(index, nullptr);
  for (const char* target : {"/", "/search", "/search?service=a&limit=20", "/dependencies",
                             "/service/checkout", "/service/a%2Fb", "/trace/abc123"}) {
    net::HttpResponse resp;
    ASSERT_TRUE(ServeUi(Req(target), resp)) << target;
    EXPECT_EQ(resp.status, 200) << target;
    EXPECT_EQ(resp.content_type, "text/html; charset=utf-8") << target;
    EXPECT_EQ(resp.body, index->bytes) << target;
    EXPECT_TRUE(IsUiPath(net::HttpRequest(Req(target)).path())) << target;
  }
}

TEST(UiServer, OtherPathsAreNotTheUis) {
  for (const char* target :
       {"/api/services", "/api/traces/ab", "/metrics", "/healthz", "/ui/", "/ui/nope.js", "/ui",
        "/service/", "/trace/", "/searchx", "/index.html", "/favicon.ico", "/ui/../metrics"}) {
    net::HttpResponse resp;
    resp.body = "untouched";
    EXPECT_FALSE(ServeUi(Req(target), resp)) << target;
    EXPECT_EQ(resp.body, "untouched") << target;
    EXPECT_FALSE(IsUiPath(net::HttpRequest(Req(target)).path())) << target;
  }
}

TEST(UiServer, HeadersAndConditionalGet) {
  net::HttpResponse resp;
  ASSERT_TRUE(ServeUi(Req("/ui/app.js"), resp));
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.content_type, "text/javascript; charset=utf-8");
  const std::string etag = Header(resp, "ETag");
  EXPECT_EQ(etag, FindAsset("/ui/app.js")->etag);
  EXPECT_EQ(Header(resp, "Cache-Control"), "no-cache");
  EXPECT_EQ(Header(resp, "X-Content-Type-Options"), "nosniff");
  const std::string csp = Header(resp, "Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;

  for (const std::string& inm : {etag, "W/" + etag, "\"other\", " + etag, std::string("*")}) {
    net::HttpRequest req = Req("/ui/app.js");
    req.if_none_match = inm;
    net::HttpResponse r2;
    ASSERT_TRUE(ServeUi(req, r2));
    EXPECT_EQ(r2.status, 304) << inm;
    EXPECT_TRUE(r2.body.empty()) << inm;
    EXPECT_EQ(Header(r2, "ETag"), etag) << inm;
  }
  net::HttpRequest stale = Req("/ui/app.js");
  stale.if_none_match = "\"0123\"";
  net::HttpResponse r3;
  ASSERT_TRUE(ServeUi(stale, r3));
  EXPECT_EQ(r3.status, 200);
  EXPECT_FALSE(r3.body.empty());
}

TEST(UiServer, HeadLikeGetOtherMethods405) {
  net::HttpResponse head;
  ASSERT_TRUE(ServeUi(Req("/", "HEAD"), head));
  EXPECT_EQ(head.status, 200);  // the server sends the head only
  net::HttpResponse post;
  ASSERT_TRUE(ServeUi(Req("/trace/ab", "POST"), post));
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(Header(post, "Allow"), "GET, HEAD");
}

// What the UI's files name: /ui/... references and relative module imports
// must be embedded files; URLs outside spanhouse are not allowed at all (the
// SVG namespace is a name, not a fetch).
TEST(UiServer, ReferencesResolveAndNothingExternal) {
  const std::regex ui_ref(R"re(["'](/ui/[^"'?#]+)["'])re");
  const std::regex import_ref(R"re(from\s+'\./([^']+)')re");
  const std::regex url_ref(R"re(https?://[^\s"'<>)]+)re");
  for (const std::string& name : AssetNames()) {
    const std::string text = ReadFile(kAssetDir / name);
    for (std::sregex_iterator it(text.begin(), text.end(), ui_ref), end; it != end; ++it) {
      EXPECT_NE(FindAsset((*it)[1].str()), nullptr) << name << " names " << (*it)[1];
    }
    for (std::sregex_iterator it(text.begin(), text.end(), import_ref), end; it != end; ++it) {
      EXPECT_NE(FindAsset("/ui/" + (*it)[1].str()), nullptr) << name << " imports " << (*it)[1];
    }
    for (std::sregex_iterator it(text.begin(), text.end(), url_ref), end; it != end; ++it) {
      EXPECT_EQ((*it)[0].str(), "http://www.w3.org/2000/svg") << name << " names " << (*it)[0];
    }
  }
}

}  // namespace
}  // namespace spanhouse::ui
