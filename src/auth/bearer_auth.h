// Bearer tokens on a listener: `Authorization: Bearer <token>` must carry
// one of the listener's configured tokens, or the request is answered 401
// from its head alone (HttpServerOptions::authorize), before its body is
// read or any handler runs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/http_server.h"

namespace spanhouse::auth {

enum class Verdict {
  kOk,
  kMissing,    // no Authorization header
  kMalformed,  // not "Bearer <token>", empty, or more than one header
  kWrong,      // a bearer token, not one of the listener's
};

// A listener's accepted tokens, kept only as SHA-256 digests. A check hashes
// the presented token and compares its digest with every configured one in
// constant time, so how long it takes tells nothing about how close a guess
// was or how long the real tokens are (only the guess's own length shows,
// in the hashing).
class TokenSet {
 public:
  using Digest = std::array<unsigned char, 32>;
  // SHA-256 of a token into *out; false when hashing failed.
  using DigestFn = bool (*)(std::string_view token, Digest* out);

  // "tok1,tok2", spaces around a token ignored; empty: no tokens. A token is
  // 16 to 4096 visible ASCII characters other than ','; a shorter one is
  // refused (it could be guessed).
  // Fails when SHA-256 is unavailable or fails (start-up then stops).
  static Status Parse(std::string_view list, TokenSet* out);
  // The same with another digest function (tests: a failing one).
  static Status Parse(std::string_view list, TokenSet* out, DigestFn digest);
  // A message naming what is wrong with `list`, or empty (for config checks).
  static std::string Check(std::string_view list);

  bool empty() const { return digests_.empty(); }
  size_t size() const { return digests_.size(); }
  // `authorization`: an Authorization header's value (an empty one is
  // kMalformed; Guard tells absent headers apart). The scheme is
  // case-insensitive (RFC 9110, 11.1). A failure to hash the
  // presented token is kWrong: it never matches.
  Verdict Verify(std::string_view authorization) const;

 private:
  std::vector<Digest> digests_;
  DigestFn digest_ = nullptr;
};

struct AuthStats {
  std::atomic<uint64_t> missing{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> wrong{0};
};

// One listener's guard: its tokens, the paths it serves without one, and
// its refusals by reason.
class Guard {
 public:
  // `listener` names it in metrics ("otlp_http", "query"); `open_paths` are
  // exact paths served to anyone (health probes); `also_open`, when set,
  // opens every path it returns true for (the web UI's files and pages).
  using PathPredicate = bool (*)(std::string_view path);
  Guard(std::string listener, TokenSet tokens, std::vector<std::string> open_paths = {},
        PathPredicate also_open = nullptr);
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  bool enabled() const { return !tokens_.empty(); }
  // For HttpServerOptions::authorize: empty when the guard has no tokens, so
  // an unguarded listener pays nothing per request. The guard must outlive
  // the server.
  net::HttpAuthorizer Authorizer();
  // True: the request may proceed. False: `resp` is the 401 to send.
  // No Authorization header is kMissing; two or more are kMalformed (which
  // one would count is not for a guard to guess).
  bool Authorize(const net::HttpRequest& head, const net::AuthorizationHeader& authorization,
                 net::HttpResponse& resp);

  const std::string& listener() const { return listener_; }
  const AuthStats& stats() const { return stats_; }

 private:
  std::string listener_;
  TokenSet tokens_;
  std::vector<std::string> open_paths_;
  PathPredicate also_open_ = nullptr;
  AuthStats stats_;
};

// spanhouse_auth_failures_total{listener,reason} for the guards, Prometheus text.
void AppendMetrics(std::string& out, std::initializer_list<const Guard*> guards);

}  // namespace spanhouse::auth
