#include "auth/bearer_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

#include <fmt/format.h>

namespace spanhouse::auth {

namespace {

constexpr size_t kMinTokenBytes = 16;  // guessable below that, whatever the rate limit
constexpr size_t kMaxTokenBytes = 4096;

// SHA-256 from the default provider, fetched once: a provider without it
// shows at start-up (Parse fails), not as a failed check per request.
const EVP_MD* Sha256Md() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

bool Sha256(std::string_view s, TokenSet::Digest* d) {
  const EVP_MD* md = Sha256Md();
  unsigned int len = 0;
  if (md == nullptr || EVP_Digest(s.data(), s.size(), d->data(), &len, md, nullptr) != 1 ||
      len != d->size()) {
    d->fill(0);
    return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

// Calls f on each comma-separated item, trimmed; stops at the first false.
template <typename F>
bool ForEachItem(std::string_view list, F f) {
  for (;;) {
    const size_t comma = list.find(',');
    if (!f(TrimSpaces(list.substr(0, comma)))) return false;
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

std::string TokenProblem(std::string_view token) {
  if (token.empty()) return "an empty token";
  if (token.size() < kMinTokenBytes) {
    return "a token shorter than 16 characters (make tokens long and random, e.g. `openssl rand "
           "-hex 32`)";
  }
  if (token.size() > kMaxTokenBytes) return "a token longer than 4096 characters";
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return "a token with a space or a non-printable character";
  }
  return "";
}

bool IEqualsAscii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);  // letters only: "bearer"
         });
}

}  // namespace

std::string TokenSet::Check(std::string_view list) {
  if (TrimSpaces(list).empty()) return "";
  std::string problem;
  ForEachItem(list, [&](std::string_view token) {
    problem = TokenProblem(token);
    return problem.empty();
  });
  return problem;
}

Status TokenSet::Parse(std::string_view list, TokenSet* out) {
  return Parse(list, out, &Sha256);
}

Status TokenSet::Parse(std::string_view list, TokenSet* out, DigestFn digest) {
  if (std::string problem = Check(list); !problem.empty()) {
    return Status::Invalid("token list has " + problem);
  }
  TokenSet set;
  set.digest_ = digest;
  bool hashed = true;
  if (!TrimSpaces(list).empty()) {
    ForEachItem(list, [&](std::string_view token) {
      Digest d{};
      hashed = digest(token, &d);
      set.digests_.push_back(d);
      return hashed;
    });
  }
  if (!hashed) return Status::Internal("cannot hash the tokens: SHA-256 failed (OpenSSL)");
  *out = std::move(set);
  return Status::Ok();
}

Verdict TokenSet::Verify(std::string_view authorization) const {
  const size_t space = authorization.find(' ');
  if (space == std::string_view::npos || !IEqualsAscii(authorization.substr(0, space), "bearer")) {
    return Verdict::kMalformed;
  }
  const std::string_view token = TrimSpaces(authorization.substr(space + 1));
  if (token.empty() || token.size() > kMaxTokenBytes) return Verdict::kMalformed;
  Digest presented{};
  // A failed hash denies: it must never compare as a match.
  if (!(digest_ != nullptr ? digest_ : &Sha256)(token, &presented)) return Verdict::kWrong;
  // Every configured digest is compared, whatever matched before.
  int match = 0;
  for (const Digest& d : digests_) {
    match |= CRYPTO_memcmp(presented.data(), d.data(), d.size()) == 0;
  }
  return match ? Verdict::kOk : Verdict::kWrong;
}

Guard::Guard(std::string listener, TokenSet tokens, std::vector<std::string> open_paths,
             PathPredicate also_open)
    : listener_(std::move(listener)),
      tokens_(std::move(tokens)),
      open_paths_(std::move(open_paths)),
      also_open_(also_open) {}

net::HttpAuthorizer Guard::Authorizer() {
  if (!enabled()) return {};
  return [this](const net::HttpRequest& head, const net::AuthorizationHeader& authorization,
                net::HttpResponse& resp) { return Authorize(head, authorization, resp); };
}

bool Guard::Authorize(const net::HttpRequest& head, const net::AuthorizationHeader& authorization,
                      net::HttpResponse& resp) {
  if (!enabled()) return true;
  const std::string_view path = head.path();
  if (std::find(open_paths_.begin(), open_paths_.end(), path) != open_paths_.end()) return true;
  if (also_open_ != nullptr && also_open_(path)) return true;
  const Verdict verdict = authorization.count == 0  ? Verdict::kMissing
                          : authorization.count > 1 ? Verdict::kMalformed
                                                    : tokens_.Verify(authorization.value);
  if (verdict == Verdict::kOk) return true;
  resp.status = 401;
  resp.content_type = "text/plain";
  // RFC 6750, 3: the challenge, with invalid_token once a token was sent.
  switch (verdict) {
    case Verdict::kMissing:
      stats_.missing++;
      resp.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"spanhouse\"");
      resp.body = "unauthorized: missing bearer token (send Authorization: Bearer <token>)\n";
      break;
    case Verdict::kMalformed:
      stats_.malformed++;
      resp.headers.emplace_back("WWW-Authenticate",
                                "Bearer realm=\"spanhouse\", error=\"invalid_request\"");
      resp.body = "unauthorized: the Authorization header is not 'Bearer <token>'\n";
      break;
    default:
      stats_.wrong++;
      resp.headers.emplace_back("WWW-Authenticate",
                                "Bearer realm=\"spanhouse\", error=\"invalid_token\"");
      resp.body = "unauthorized: wrong bearer token\n";
      break;
  }
  return false;
}

void AppendMetrics(std::string& out, std::initializer_list<const Guard*> guards) {
  out += "# TYPE spanhouse_auth_failures_total counter\n";
  for (const Guard* g : guards) {
    const std::pair<const char*, uint64_t> reasons[] = {{"missing", g->stats().missing.load()},
                                                        {"malformed", g->stats().malformed.load()},
                                                        {"wrong", g->stats().wrong.load()}};
    for (const auto& [reason, n] : reasons) {
      out += fmt::format("spanhouse_auth_failures_total{{listener=\"{}\",reason=\"{}\"}} {}\n",
                         g->listener(), reason, n);
    }
  }
}

}  // namespace spanhouse::auth
