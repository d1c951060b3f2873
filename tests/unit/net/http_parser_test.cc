// net::HttpRequestParser alone, without sockets: heads, bodies by length and
// by chunks, pipelining, Expect: 100-continue, and each limit and error
// answer at its boundary; the same bytes fed whole, a byte at a time and
// with the body received in place give the same requests.
#include "net/http_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace spanhouse::net {
namespace {

using Event = HttpRequestParser::Event;

struct Parsed {
  std::vector<HttpRequest> requests;
  std::vector<HttpHead> heads;
  int error_status = 0;
  std::string error_message;
  size_t left = 0;  // bytes fed but not consumed at the end
};

// Feeds `input` in pieces of `piece` bytes (0: whole), the way the server
// does: unconsumed bytes are fed again with the next ones; with `in_place`,
// body bytes go straight into BodyRoom() when nothing else is buffered.
Parsed Parse(std::string_view input, HttpParserLimits limits = {}, size_t piece = 0,
             bool in_place = false) {
  Parsed out;
  HttpRequestParser parser(limits);
  std::string pending;
  size_t pos = 0;
  for (;;) {
    size_t used = 0;
    const Event event = parser.Feed(pending, &used);
    pending.erase(0, used);
    if (event == Event::kHead) continue;
    if (event == Event::kRequest) {
      out.requests.push_back(parser.request());
      out.heads.push_back(parser.head());
      parser.Next();
      continue;
    }
    if (event == Event::kError) {
      out.error_status = parser.error_status();
      out.error_message = parser.error_message();
      break;
    }
    if (pos == input.size()) break;
    const size_t n = piece == 0 ? input.size() - pos : std::min(piece, input.size() - pos);
    const std::span<char> room = parser.BodyRoom();
    if (in_place && pending.empty() && !room.empty()) {
      const size_t k = std::min(n, room.size());
      std::memcpy(room.data(), input.data() + pos, k);
      parser.BodyFilled(k);
      pos += k;
      continue;
    }
    pending.append(input.substr(pos, n));
    pos += n;
  }
  out.left = pending.size();
  return out;
}

// The same outcome whole, a byte at a time and with bodies received in place.
Parsed ParseEveryWay(std::string_view input, HttpParserLimits limits = {}) {
  const Parsed whole = Parse(input, limits);
  const std::pair<size_t, bool> ways[] = {{1, false}, {1, true}, {7, true}};
  for (const auto& [piece, in_place] : ways) {
    const Parsed cut = Parse(input, limits, piece, in_place);
    EXPECT_EQ(cut.requests.size(), whole.requests.size()) << piece << " " << in_place;
    for (size_t i = 0; i < std::min(cut.requests.size(), whole.requests.size()); ++i) {
      EXPECT_EQ(cut.requests[i].method, whole.requests[i].method);
      EXPECT_EQ(cut.requests[i].target, whole.requests[i].target);
      EXPECT_EQ(cut.requests[i].body, whole.requests[i].body);
    }
    EXPECT_EQ(cut.error_status, whole.error_status) << piece << " " << in_place;
    EXPECT_EQ(cut.error_message, whole.error_message) << piece << " " << in_place;
  }
  return whole;
}

TEST(HttpParser, GetWithHeaders) {
  const Parsed p = ParseEveryWay(
      "\r\n\nGET /api/traces?service=a HTTP/1.1\r\nHost: x\r\ncontent-TYPE: text/a\r\n"
      "Content-Type: text/b\r\nContent-Encoding:  gzip \r\nIf-None-Match: \"e1\"\r\n"
      "If-None-Match: \"e2\"\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  const HttpRequest& r = p.requests[0];
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/api/traces?service=a");
  EXPECT_EQ(r.path(), "/api/traces");
  EXPECT_EQ(r.content_type, "text/a");  // the first one counts
  EXPECT_EQ(r.content_encoding, "gzip");
  EXPECT_EQ(r.if_none_match, "\"e1\"");
  EXPECT_TRUE(r.body.empty());
  EXPECT_TRUE(p.heads[0].keep_alive());
  EXPECT_EQ(p.error_status, 0);
  EXPECT_EQ(p.left, 0u);
}

TEST(HttpParser, HeadEventComesBeforeTheBody) {
  HttpRequestParser parser;
  const std::string head =
      "POST /v1/traces HTTP/1.1\nContent-Length: 5\nAuthorization: a\n"
      "authorization: b\n\n";
  size_t used = 0;
  EXPECT_TRUE(parser.reading_head());
  EXPECT_EQ(parser.Feed(head.substr(0, 10), &used), Event::kNeedInput);
  EXPECT_EQ(used, 0u);  // a head is consumed only once complete
  EXPECT_TRUE(parser.reading_head());
  const std::string bytes = head + "he";
  EXPECT_EQ(parser.Feed(bytes, &used), Event::kHead);
  EXPECT_EQ(used, head.size());
  EXPECT_FALSE(parser.reading_head());
  EXPECT_EQ(parser.request().method, "POST");
  EXPECT_EQ(parser.head().content_length, 5u);
  const AuthorizationHeader auth = parser.TakeAuthorization();
  EXPECT_EQ(auth.count, 2);
  EXPECT_EQ(auth.value, "a");
  EXPECT_EQ(auth.value.data(), bytes.data() + bytes.find("a\n"));  // not copied
  EXPECT_EQ(parser.TakeAuthorization().count, 0);

  EXPECT_EQ(parser.Feed(std::string_view(bytes).substr(used), &used), Event::kNeedInput);
  EXPECT_EQ(used, 2u);
  ASSERT_EQ(parser.BodyRoom().size(), 3u);  // the rest, to be received in place
  std::memcpy(parser.BodyRoom().data(), "llo", 3);
  parser.BodyFilled(3);
  EXPECT_TRUE(parser.BodyRoom().empty());
  EXPECT_EQ(parser.Feed("", &used), Event::kRequest);
  EXPECT_EQ(parser.request().body, "hello");
  EXPECT_EQ(parser.Feed("GET", &used), Event::kRequest);  // nothing more until Next()
  EXPECT_EQ(used, 0u);
  parser.Next();
  EXPECT_TRUE(parser.reading_head());
  EXPECT_TRUE(parser.request().body.empty());
  EXPECT_EQ(parser.head().content_length, std::nullopt);
}

TEST(HttpParser, ChunkedWithExtensionsAndTrailers) {
  const Parsed p = ParseEveryWay(
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=value\r\nhello\r\nA \r\n, world!!!\r\n0\r\nX-Checksum: 1\r\nX-More: 2\r\n\r\n");
  ASSERT_EQ(p.requests.size(), 1u);
  EXPECT_EQ(p.requests[0].body, "hello, world!!!");
  EXPECT_TRUE(p.heads[0].chunked);
  EXPECT_EQ(p.left, 0u);
}

TEST(HttpParser, PipelinedRequests) {
  const Parsed p = ParseEveryWay(
      "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
      "GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: "
      "close\r\n\r\n2\r\nxy\r\n0\r\n\r\n"
      "HEAD /d HTTP/1.0\r\n\r\n"
      "GET /e HTTP/1.1\r\n");
  ASSERT_EQ(p.requests.size(), 4u);
  EXPECT_EQ(p.requests[0].body, "abc");
  EXPECT_EQ(p.requests[1].target, "/b");
  EXPECT_TRUE(p.heads[1].http10);
  EXPECT_TRUE(p.heads[1].keep_alive());
  EXPECT_EQ(p.requests[2].body, "xy");
  EXPECT_FALSE(p.heads[2].keep_alive());
  EXPECT_TRUE(p.heads[3].head_method);
  EXPECT_FALSE(p.heads[3].keep_alive());  // HTTP/1.0 without keep-alive
  EXPECT_EQ(p.left, std::string_view("GET /e HTTP/1.1\r\n").size());
  EXPECT_EQ(p.error_status, 0);
}

TEST(HttpParser, ExpectsContinueOnlyForABodyStillToCome) {
  auto expects = [](std::string_view head, size_t available, size_t max_body = 100) {
    HttpRequestParser parser(HttpParserLimits{.max_body_bytes = max_body});
    size_t used = 0;
    EXPECT_EQ(parser.Feed(head, &used), Event::kHead) << head;
    return parser.ExpectsContinue(available);
  };
  const std::string cl = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 10\r\n\r\n";
  EXPECT_TRUE(expects(cl, 0));
  EXPECT_TRUE(expects(cl, 9));
  EXPECT_FALSE(expects(cl, 10));    // all of it is here already
  EXPECT_FALSE(expects(cl, 0, 9));  // over the limit: a 413 instead
  EXPECT_TRUE(expects(cl, 0, 10));
  EXPECT_TRUE(expects(
      "POST / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n", 1000));
  EXPECT_FALSE(expects("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n", 0));
  EXPECT_FALSE(expects("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n", 0));
  EXPECT_FALSE(expects("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", 0));
}

TEST(HttpParser, MalformedRequestsAre400) {
  const std::pair<std::string, std::string> cases[] = {
      {"GET /\r\n\r\n", "bad request line"},
      {"GET\r\n\r\n", "bad request line"},
      {"G(T / HTTP/1.1\r\n\r\n", "bad method"},
      {"GET  HTTP/1.1\r\n\r\n", "bad request target"},
      {"GET /\x7f HTTP/1.1\r\n\r\n", "bad request target"},
      {"GET / HTTP/2.0\r\n\r\n", "unsupported HTTP version"},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", "obsolete header line folding"},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", "header line without a colon"},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "bad header name"},
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", "control character in a header value"},
      {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n", "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
       "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       "bad or conflicting Content-Length"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       "unsupported Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
       "unsupported Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n", "bad chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
       "chunk data longer than its size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX",
       "chunk data longer than its size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
       "chunk size too large"},
  };
  for (const auto& [request, why] : cases) {
    const Parsed p = ParseEveryWay(request, HttpParserLimits{.max_body_bytes = 1u << 30});
    EXPECT_EQ(p.error_status, 400) << request;
    EXPECT_EQ(p.error_message, "malformed HTTP request: " + why + "\n") << request;
    EXPECT_TRUE(p.requests.empty()) << request;
  }
  // Content-Length as a list of one value repeated is one value.
  const Parsed same = ParseEveryWay("POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab");
  ASSERT_EQ(same.requests.size(), 1u);
  EXPECT_EQ(same.requests[0].body, "ab");
  // 15 hex digits are a size (then over the limit); 16 are not.
  EXPECT_EQ(ParseEveryWay("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "100000000000000\r\n")
                .error_status,
            413);
}

TEST(HttpParser, ErrorsAreFinal) {
  HttpRequestParser parser;
  size_t used = 0;
  EXPECT_EQ(parser.Feed("GET / HTTP/3\r\n\r\nGET / HTTP/1.1\r\n\r\n", &used), Event::kError);
  EXPECT_EQ(parser.error_status(), 400);
  EXPECT_EQ(parser.Feed("GET / HTTP/1.1\r\n\r\n", &used), Event::kError);
  EXPECT_EQ(used, 0u);
  EXPECT_TRUE(parser.request().method.empty());
}

TEST(HttpParser, HeadLimitIs431) {
  const HttpParserLimits limits{.max_head_bytes = 64};
  const std::string line = "GET / HTTP/1.1\r\n";
  auto head_of = [&](size_t size) {  // a head of exactly `size` bytes
    const size_t filler = size - line.size() - std::strlen("X: \r\n\r\n");
    return line + "X: " + std::string(filler, 'x') + "\r\n\r\n";
  };
  const Parsed fits = ParseEveryWay(head_of(64), limits);
  EXPECT_EQ(fits.requests.size(), 1u);
  EXPECT_EQ(fits.error_status, 0);
  // One byte more is refused, even when its end is right there.
  const Parsed over = ParseEveryWay(head_of(65), limits);
  EXPECT_EQ(over.error_status, 431);
  EXPECT_EQ(over.error_message, "request head exceeds 64 bytes\n");
  // An unfinished head is refused once it has reached the limit, not before.
  EXPECT_EQ(ParseEveryWay(std::string(63, 'G'), limits).error_status, 0);
  EXPECT_EQ(ParseEveryWay(std::string(64, 'G'), limits).error_status, 431);
  // Empty lines before a request do not count.
  EXPECT_EQ(ParseEveryWay(std::string(100, '\n') + head_of(64), limits).requests.size(), 1u);
  // The server's default.
  EXPECT_EQ(HttpParserLimits{}.max_head_bytes, 64u * 1024);
}

TEST(HttpParser, BodyLimitIs413) {
  const HttpParserLimits limits{.max_body_bytes = 10};
  EXPECT_EQ(ParseEveryWay("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", limits)
                .requests.size(),
            1u);
  // Refused from the declared length, after the head (the authorizer's turn).
  HttpRequestParser parser(limits);
  size_t used = 0;
  const std::string over = "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n";
  EXPECT_EQ(parser.Feed(over, &used), Event::kHead);
  EXPECT_EQ(parser.Feed("", &used), Event::kError);
  EXPECT_EQ(parser.error_status(), 413);
  EXPECT_EQ(parser.error_message(), "request body exceeds 10 bytes\n");
  EXPECT_TRUE(parser.BodyRoom().empty());
  // De-chunked: the chunks together, before any of the chunk over it is kept.
  const std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(
      ParseEveryWay(chunked + "5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n", limits).requests.at(0).body,
      "0123456789");
  const Parsed p = ParseEveryWay(chunked + "5\r\n01234\r\n6\r\n", limits);
  EXPECT_EQ(p.error_status, 413);
  EXPECT_EQ(p.error_message, "request body exceeds 10 bytes\n");
}

TEST(HttpParser, ChunkLineAndTrailerLimits) {
  const HttpParserLimits limits{.max_chunk_line = 8, .max_trailer_bytes = 16};
  const std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(ParseEveryWay(chunked + "1;abcde\r\nx\r\n0\r\n\r\n", limits).requests.size(), 1u);
  Parsed p = ParseEveryWay(chunked + "1;abcdef\r\n", limits);
  EXPECT_EQ(p.error_status, 400);
  EXPECT_EQ(p.error_message, "malformed HTTP request: chunk size line too long\n");
  // Too long without an end in sight, too.
  EXPECT_EQ(ParseEveryWay(chunked + "000000000", limits).error_status, 400);
  EXPECT_EQ(ParseEveryWay(chunked + "00000000", limits).error_status, 0);

  // Trailer lines count with two bytes each for their line ends, the last
  // (empty) one included: 12 + 2 + 2 = 16.
  EXPECT_EQ(ParseEveryWay(chunked + "0\r\nX: 012345678\r\n\r\n", limits).requests.size(), 1u);
  p = ParseEveryWay(chunked + "0\r\nX: 0123456789\r\n\r\n", limits);
  EXPECT_EQ(p.error_status, 400);
  EXPECT_EQ(p.error_message, "malformed HTTP request: trailer section too large\n");
  EXPECT_EQ(ParseEveryWay(chunked + "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits).error_status, 400);
  EXPECT_EQ(ParseEveryWay(chunked + "0\r\n" + std::string(17, 'x'), limits).error_status, 400);
}

// The fuzz target's seeds (tests/fuzz/corpus/http_request: 4 control bytes, then what a client
// sends) are requests the server accepts, however they arrive.
TEST(HttpParser, FuzzSeedsParse) {
  const std::filesystem::path dir =
      std::filesystem::path(SPANHOUSE_TESTDATA) / ".." / "fuzz" / "corpus" / "http_request";
  size_t seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    ASSERT_GT(bytes.size(), 4u) << entry.path();
    const Parsed p = ParseEveryWay(std::string_view(bytes).substr(4));
    EXPECT_FALSE(p.requests.empty()) << entry.path();
    EXPECT_EQ(p.error_status, 0) << entry.path() << ": " << p.error_message;
    EXPECT_EQ(p.left, 0u) << entry.path();
    ++seeds;
  }
  EXPECT_GE(seeds, 5u);
}

}  // namespace
}  // namespace spanhouse::net
