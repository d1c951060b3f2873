// libFuzzer target: the HTTP/1.1 request parser (net/http_parser.h), what every byte a client
// sends to an HTTP listener goes through first.
//
// Input layout: byte 0 picks the body cap, byte 1 the head cap and the chunk-line and trailer
// caps (small ones too, so that each limit is reached cheaply), bytes 2-3 seed where the stream
// is cut into reads; the rest is the stream, which may hold several pipelined requests.
//
// Invariants besides "no crash, no leak, no UB": no body over its cap and no head over its cap;
// a body with a Content-Length has exactly that length; an error is a 400, 413 or 431 with a
// message and ends the stream; the stream fed whole, cut into reads, and with the bodies
// received in place (as the server's I/O thread does) gives the same requests, the same error
// and consumes the same bytes; every request accepted, written again (method, target, the
// headers the parser keeps, the body with a Content-Length), parses to the same request.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "invariants.h"
#include "net/http_parser.h"

namespace spanhouse::fuzz {
namespace {

using net::HttpHead;
using net::HttpParserLimits;
using net::HttpRequest;
using net::HttpRequestParser;
using Event = HttpRequestParser::Event;

// Not the server's 20 MiB: a Content-Length body is allocated whole once its head is read, and
// the inputs are a few KiB, so a larger cap would only make each input slower.
constexpr size_t kBodyCaps[] = {1u << 20, 0, 1, 16, 100, 1024, 4096, 65536};
constexpr size_t kHeadCaps[] = {64 * 1024, 16, 64, 256, 1024, 4096, 64 * 1024, 64 * 1024};

struct Parsed {
  HttpRequest req;
  HttpHead head;
  int auth_count = 0;
  std::string auth_value;  // copied: the parser's view is into the input
};

struct Outcome {
  std::vector<Parsed> requests;
  int error_status = 0;
  std::string error_message;
  size_t consumed = 0;
};

// How to cut the stream into reads: piece sizes from a small generator seeded by the input.
class Cuts {
 public:
  explicit Cuts(uint32_t seed) : state_(seed | 1) {}
  size_t Next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    // Mostly short reads, now and then a long one.
    return 1 + (state_ % 8 == 0 ? state_ % 4096 : state_ % 16);
  }

 private:
  uint32_t state_;
};

void CheckRequest(const Parsed& p, const HttpParserLimits& limits) {
  if (p.req.body.size() > limits.max_body_bytes) Fail("body over the cap", p.req.method);
  if (!p.head.chunked && p.req.body.size() != p.head.content_length.value_or(0)) {
    Fail("body length differs from Content-Length", std::to_string(p.req.body.size()));
  }
  if (p.head.chunked && p.head.content_length) Fail("both framings accepted", p.req.target);
  if (p.req.method.empty() || p.req.target.empty()) Fail("empty method or target", p.req.method);
}

void CheckError(int status, const std::string& message) {
  if (status != 400 && status != 413 && status != 431) {
    Fail("unexpected error status", std::to_string(status));
  }
  if (message.empty() || message.back() != '\n') Fail("error message", message);
}

// The empty lines the parser skips before a request line.
size_t LeadingEmptyLines(std::string_view s) {
  size_t n = 0;
  for (;;) {
    if (n < s.size() && s[n] == '\n') {
      n += 1;
    } else if (n + 1 < s.size() && s[n] == '\r' && s[n + 1] == '\n') {
      n += 2;
    } else {
      return n;
    }
  }
}

// Feeds `stream` to a parser the way the server does: the bytes not consumed are fed again
// with the next read. `cuts` empty: in one piece. `in_place`: body bytes are written straight
// into BodyRoom() when nothing else is buffered.
Outcome Run(std::string_view stream, const HttpParserLimits& limits, std::optional<Cuts> cuts,
            bool in_place) {
  Outcome out;
  HttpRequestParser parser(limits);
  std::string pending;
  size_t pos = 0;
  for (;;) {
    size_t used = 0;
    const std::string_view fed = pending;
    const Event event = parser.Feed(fed, &used);
    if (used > fed.size()) Fail("consumed more than it was given", std::to_string(used));
    out.consumed += used;
    if (event == Event::kHead) {
      // The head is what was consumed past the empty lines before it, ending in an empty line.
      const std::string_view head = fed.substr(0, used).substr(LeadingEmptyLines(fed));
      if (head.size() > limits.max_head_bytes) Fail("head over the cap", head.substr(0, 64));
      if (!head.ends_with("\n\n") && !head.ends_with("\n\r\n")) Fail("head end", head);
      const net::AuthorizationHeader auth = parser.TakeAuthorization();
      if (auth.count > 0 && (auth.value.data() < fed.data() ||
                             auth.value.data() + auth.value.size() > fed.data() + used)) {
        Fail("Authorization value outside the head", auth.value);
      }
      out.requests.push_back(Parsed{{}, {}, auth.count, std::string(auth.value)});
      // ExpectsContinue depends on how much of the body is here, so it is checked for
      // consistency rather than compared between runs.
      const size_t available = fed.size() - used;
      if (parser.ExpectsContinue(available)) {
        const HttpHead& h = parser.head();
        const uint64_t length = h.content_length.value_or(0);
        if (!h.expect_continue || h.http10 ||
            !(h.chunked || (length > available && length <= limits.max_body_bytes))) {
          Fail("100 Continue when none is due", parser.request().target);
        }
      }
    }
    pending.erase(0, used);
    if (event == Event::kHead) continue;
    if (event == Event::kRequest) {
      if (out.requests.empty() || !out.requests.back().req.method.empty()) {
        Fail("request without a head event", parser.request().target);
      }
      out.requests.back().req = parser.request();
      out.requests.back().head = parser.head();
      CheckRequest(out.requests.back(), limits);
      parser.Next();
      continue;
    }
    if (event == Event::kError) {
      out.error_status = parser.error_status();
      out.error_message = parser.error_message();
      CheckError(out.error_status, out.error_message);
      size_t again = 0;
      if (parser.Feed("GET / HTTP/1.1\r\n\r\n", &again) != Event::kError || again != 0) {
        Fail("the parser goes on after an error", out.error_message);
      }
      break;
    }
    if (pos == stream.size()) break;
    const size_t n = cuts ? std::min(cuts->Next(), stream.size() - pos) : stream.size() - pos;
    const std::span<char> room = parser.BodyRoom();
    if (!pending.empty() && !room.empty()) Fail("body room while bytes are buffered", "");
    if (in_place && !room.empty()) {
      const size_t k = std::min(n, room.size());
      std::memcpy(room.data(), stream.data() + pos, k);
      parser.BodyFilled(k);
      out.consumed += k;
      pos += k;
      continue;
    }
    pending.append(stream.substr(pos, n));
    pos += n;
  }
  // A head seen without its request: the body was refused, or the stream ended in it.
  if (!out.requests.empty() && out.requests.back().req.method.empty()) out.requests.pop_back();
  return out;
}

bool SameRequest(const Parsed& a, const Parsed& b) {
  return a.req.method == b.req.method && a.req.target == b.req.target &&
         a.req.content_type == b.req.content_type &&
         a.req.content_encoding == b.req.content_encoding &&
         a.req.if_none_match == b.req.if_none_match && a.req.body == b.req.body &&
         a.head.http10 == b.head.http10 && a.head.head_method == b.head.head_method &&
         a.head.conn_close == b.head.conn_close &&
         a.head.conn_keep_alive == b.head.conn_keep_alive &&
         a.head.expect_continue == b.head.expect_continue && a.auth_count == b.auth_count &&
         a.auth_value == b.auth_value;
}

void CheckSameOutcome(const Outcome& whole, const Outcome& cut, std::string_view how) {
  if (whole.requests.size() != cut.requests.size()) {
    Fail(how, "a different number of requests: " + std::to_string(whole.requests.size()) + " vs " +
                  std::to_string(cut.requests.size()));
  }
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    if (!SameRequest(whole.requests[i], cut.requests[i])) {
      Fail(how, "request " + std::to_string(i) + " differs: " + whole.requests[i].req.target);
    }
  }
  if (whole.error_status != cut.error_status || whole.error_message != cut.error_message) {
    Fail(how, "a different error: " + whole.error_message + " | " + cut.error_message);
  }
  if (whole.consumed != cut.consumed) Fail(how, "consumed a different number of bytes");
}

// The request written again as a client would, with the headers the parser keeps and the body
// with a Content-Length; it must parse to the same request.
void CheckRewrite(const Parsed& p, const HttpParserLimits& limits) {
  std::string s = p.req.method + " " + p.req.target + (p.head.http10 ? " HTTP/1.0" : " HTTP/1.1");
  s += "\r\n";
  auto field = [&s](std::string_view name, std::string_view value) {
    s.append(name).append(": ").append(value).append("\r\n");
  };
  if (!p.req.content_type.empty()) field("Content-Type", p.req.content_type);
  if (!p.req.content_encoding.empty()) field("Content-Encoding", p.req.content_encoding);
  if (!p.req.if_none_match.empty()) field("If-None-Match", p.req.if_none_match);
  for (int i = 0; i < p.auth_count; ++i) field("Authorization", i == 0 ? p.auth_value : "x");
  if (p.head.conn_close) field("Connection", "close");
  if (p.head.conn_keep_alive) field("Connection", "keep-alive");
  if (p.head.expect_continue) field("Expect", "100-continue");
  field("Content-Length", std::to_string(p.req.body.size()));
  s += "\r\n";
  s += p.req.body;

  HttpParserLimits roomy = limits;
  roomy.max_head_bytes = std::max(limits.max_head_bytes, s.size());
  const Outcome again = Run(s, roomy, std::nullopt, false);
  if (again.error_status != 0) Fail("rewritten request refused", again.error_message);
  if (again.requests.size() != 1 || again.consumed != s.size()) {
    Fail("rewritten request is not one request", s.substr(0, 200));
  }
  if (!SameRequest(again.requests[0], p)) Fail("rewritten request differs", s.substr(0, 200));
}

}  // namespace

int TestOne(std::string_view input) {
  if (input.size() < 4) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(input[i]); };
  HttpParserLimits limits;
  limits.max_body_bytes = kBodyCaps[byte(0) % std::size(kBodyCaps)];
  limits.max_head_bytes = kHeadCaps[byte(1) % std::size(kHeadCaps)];
  switch ((byte(1) >> 3) % 4) {
    case 1:
      limits.max_chunk_line = 8;
      limits.max_trailer_bytes = 16;
      break;
    case 2:
      limits.max_chunk_line = 64;
      limits.max_trailer_bytes = 256;
      break;
    default:
      break;  // the server's
  }
  const uint32_t seed = byte(2) | (uint32_t{byte(3)} << 8);
  const std::string_view stream = input.substr(4);

  const Outcome whole = Run(stream, limits, std::nullopt, false);
  CheckSameOutcome(whole, Run(stream, limits, Cuts(seed), false), "cut into reads");
  CheckSameOutcome(whole, Run(stream, limits, Cuts(seed), true), "bodies received in place");
  CheckSameOutcome(whole, Run(stream, limits, Cuts(~seed), true), "cut otherwise");
  for (const Parsed& p : whole.requests) CheckRewrite(p, limits);
  return 0;
}

}  // namespace spanhouse::fuzz
